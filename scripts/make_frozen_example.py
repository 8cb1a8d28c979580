"""Writes small frozen GraphDefs for the README walk-through, and differentiates them.

  python scripts/make_frozen_example.py model.pb                   # binarized MLP (Sign)
  python scripts/make_frozen_example.py custom.pb --kind custom    # tf.custom_gradient STE
  python scripts/make_frozen_example.py rnn.pb --kind rnn          # TF2 loop, frozen (TF1 loop)
  python scripts/make_frozen_example.py rnn.pb --kind rnn --functional  # loop body in a function
  python scripts/make_frozen_example.py --differentiate fixed.pb   # in this (fresh) process
  python scripts/make_frozen_example.py --differentiate portable.pb --plain

`--kind sign` builds a binarized MLP in a tf.compat.v1 Session: hidden
activations and weights pass through tf.sign, whose TensorFlow gradient is
zero. `--kind custom` wraps each tf.sign in a straight-through
tf.custom_gradient, which leaves IdentityN nodes carrying
``_gradient_op_type: "CustomGradient-<N>"``: a name that only the process
that built the graph can resolve. Both are frozen with TensorFlow's own
tf.compat.v1.graph_util.convert_variables_to_constants. `--kind rnn` is a
binarized recurrent cell, h <- sign(h W + x U) three times, in a TF2
tf.function frozen with convert_variables_to_constants_v2: by default that
lowers the loop to TF1 control flow (Enter/Exit/NextIteration), which
TensorFlow cannot differentiate after import; with `--functional`
(lower_control_flow=False) the loop stays a While node whose body, with the
Sign, is in the GraphDef's function library. Input "x" [N, 16], output
"logits" [N, 4].

`--differentiate FILE` imports FILE and prints d sum(logits)/dx on a fixed
batch: with graph_override.frozen.import_graph_def (which resolves
graph_override.* gradient names), or with `--plain` through TensorFlow alone,
never importing graph_override.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_tensorflow_quietly():
    """Imports TensorFlow with file descriptor 2 pointed at /dev/null:
    TensorFlow 2.21 prints absl start-up lines from native code that no
    environment variable silences. (graph_override.cli does the same; it is
    not used here because --plain must not import graph_override.)"""
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] < "3":
        return
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_import_tensorflow_quietly()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # the TF1 freezing API warns it is deprecated

SIZES = (16, 32, 32, 4)


def _custom_sign():
    @tf.custom_gradient
    def ste(x):
        def grad(dy):
            return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)
        return tf.sign(x), grad
    return ste


def build_binarized_mlp(kind="sign", seed=0):
    """A frozen binarized MLP as a GraphDef (see the module docstring)."""
    rng = np.random.RandomState(seed)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, SIZES[0]], name="x")
        binarize = _custom_sign() if kind == "custom" else tf.sign
        h = x
        for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
            w = tf.compat.v1.get_variable(
                "dense_%d/kernel" % i,
                initializer=rng.randn(n_in, n_out).astype(np.float32))
            b = tf.compat.v1.get_variable(
                "dense_%d/bias" % i, initializer=0.1 * rng.randn(n_out).astype(np.float32))
            last = i == len(SIZES) - 2
            kernel = w if last else binarize(w)
            h = tf.matmul(h, kernel) / np.float32(np.sqrt(n_in)) + b
            if not last:
                h = binarize(h)
        tf.identity(h, name="logits")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), ["logits"])


def build_binarized_rnn(functional=False, seed=0, steps=3):
    """A frozen binarized recurrent cell as a GraphDef (see the module
    docstring)."""
    from tensorflow.python.framework.convert_to_constants import (  # pylint: disable=import-outside-toplevel
        convert_variables_to_constants_v2)
    rng = np.random.RandomState(seed)
    hidden = SIZES[1]
    u = tf.Variable(rng.randn(SIZES[0], hidden).astype(np.float32) / 4.0)
    w = tf.Variable(rng.randn(hidden, hidden).astype(np.float32) / 8.0)
    v = tf.Variable(rng.randn(hidden, SIZES[-1]).astype(np.float32) / 8.0)

    @tf.function(input_signature=[tf.TensorSpec([None, SIZES[0]], tf.float32, name="x")])
    def rnn(x):
        xu = tf.matmul(x, u)
        _, h = tf.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, tf.sign(tf.matmul(h, w) + xu)),
                             [tf.constant(0), xu])
        return tf.identity(tf.matmul(h, v), name="logits")

    return convert_variables_to_constants_v2(
        rnn.get_concrete_function(), lower_control_flow=not functional).graph.as_graph_def()


def differentiate(path, plain=False):
    """Prints d sum(logits)/dx of the frozen model at `path`; returns it."""
    x_value = np.random.RandomState(0).randn(4, SIZES[0]).astype(np.float32)
    with open(path, "rb") as f:
        graph_def = tf.compat.v1.GraphDef.FromString(f.read())
    with tf.Graph().as_default():
        if plain:
            importer = tf.compat.v1.import_graph_def
        else:
            from graph_override import frozen  # pylint: disable=import-outside-toplevel
            importer = frozen.import_graph_def
        x, logits = importer(graph_def, return_elements=["x:0", "logits:0"], name="")
        dx, = tf.gradients(tf.reduce_sum(logits), x)
        with tf.compat.v1.Session() as sess:
            grad = sess.run(dx, {x: x_value})
    print("d sum(logits)/dx: %d of %d entries nonzero, norm %.4f; graph_override "
          "imported: %s" % (np.count_nonzero(grad), grad.size, np.linalg.norm(grad),
                            "graph_override" in sys.modules))
    return grad


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", help="where to write the GraphDef (.pb)")
    parser.add_argument("--kind", choices=("sign", "custom", "rnn"), default="sign")
    parser.add_argument("--functional", action="store_true",
                        help="with --kind rnn: keep the loop a While node (control flow v2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--differentiate", metavar="FILE",
                        help="differentiate FILE instead of writing a model")
    parser.add_argument("--plain", action="store_true",
                        help="with --differentiate: TensorFlow only, no graph_override")
    args = parser.parse_args(argv)
    if args.differentiate:
        differentiate(args.differentiate, args.plain)
        return 0
    if not args.output:
        parser.error("give an output file, or --differentiate FILE")
    from graph_override import frozen  # pylint: disable=import-outside-toplevel
    if args.kind == "rnn":
        graph_def = build_binarized_rnn(args.functional, args.seed)
    else:
        graph_def = build_binarized_mlp(args.kind, args.seed)
    frozen.save(graph_def, args.output)
    print("wrote %s: %d nodes" % (args.output, len(graph_def.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
