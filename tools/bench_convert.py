#!/usr/bin/env python
"""How fast is a frozen graph in TF2 through frozen.to_function?

    python tools/bench_convert.py                  # all figures
    python tools/bench_convert.py --quick --json   # smaller, machine-readable

Step times (one fine-tuning step: forward, gradients into every weight through
ste_sign, an SGD update) of the same binarized MLP, run side by side:

* session: the patched GraphDef imported into a tf.compat.v1 graph whose
  weights are variables (input_map), trained with tf.compat.v1 SGD;
* frozen eager / frozen function: FrozenFunction (trainable weights) under a
  GradientTape, eagerly and in a tf.function;
* portable function: the same on the make_portable form (stop_gradient
  subgraphs, what FrozenFunction.save writes);
* tf2 eager / tf2 function: the network written directly with
  graph_override.tf2.ste_sign and tf.Variables.

Each figure is the median over rounds (a round runs every variant once, one
after another); ratios are of these medians, to the Session. Conversion
times: to_function on MobileNetV2 (alpha 0.35, 32x32, frozen with
convert_variables_to_constants_v2) and on a large synthetic graph, next to
TensorFlow's own wrap_function + prune, medians too.
"""

import argparse
import functools
import importlib.util
import json
import os
import statistics
import sys
import time

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from graph_override import frozen, tf2  # noqa: E402

tf.get_logger().setLevel("ERROR")
LR = 0.01


def binarized_mlp(widths, seed=0):
    """Frozen MLP: x -> [matmul(h, sign(W_i)) + b_i -> sign] ... -> logits."""
    rng = np.random.RandomState(seed)
    with tf.Graph().as_default() as g:
        h = tf.compat.v1.placeholder(tf.float32, [None, widths[0]], name="x")
        for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
            w = tf.constant((rng.rand(n_in, n_out) * 2 - 1).astype(np.float32),
                            name="layer%d/kernel" % i)
            b = tf.constant(np.zeros(n_out, np.float32), name="layer%d/bias" % i)
            h = tf.matmul(h, tf.sign(w)) / np.float32(np.sqrt(n_in)) + b
            if i < len(widths) - 2:
                h = tf.sign(h)
        tf.identity(h, name="logits")
    return g.as_graph_def()


def median_seconds(fn, repeats, clock=time.perf_counter):
    """The median over `repeats` calls of the seconds one call of fn takes."""
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _per_step(fn, steps):
    """Seconds per call of fn, over `steps` calls in a row."""
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def _loss(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=logits))


def session_step(graph_def, names, x, y):
    patched, _ = frozen.patch(graph_def, ["Sign=ste_sign"])
    graph = tf.Graph()
    with graph.as_default():
        consts = {n.name: tf.make_ndarray(n.attr["value"].tensor)
                  for n in patched.node if n.name in names}
        variables = {n: tf.compat.v1.Variable(v) for n, v in consts.items()}
        # The batch is a constant, as in the tf.function steps: no feed.
        logits, = frozen.import_graph_def(
            patched, input_map={**{n + ":0": tf.convert_to_tensor(v)
                                   for n, v in variables.items()}, "x:0": tf.constant(x)},
            return_elements=["logits:0"], name="")
        train = tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(
            _loss(logits, y), var_list=list(variables.values()))
        sess = tf.compat.v1.Session(graph=graph)
        sess.run(tf.compat.v1.global_variables_initializer())
    return lambda: sess.run(train)


def _tape_step(forward, variables, x, y):
    with tf.GradientTape() as tape:
        loss = _loss(forward(x), y)
    for v, g in zip(variables, tape.gradient(loss, variables)):
        v.assign_sub(LR * g)
    return loss


def frozen_steps(graph_def, x, y, portable=False):
    if portable:
        graph_def, _ = frozen.make_portable(graph_def, ["Sign=ste_sign"])
        fn = frozen.to_function(graph_def, ["x"], ["logits"], trainable="kernel|bias")
    else:
        fn = frozen.to_function(graph_def, ["x"], ["logits"], rules=["Sign=ste_sign"],
                                trainable="kernel|bias")
    variables = list(fn.trainable_variables)
    xt = tf.constant(x)
    compiled = tf.function(lambda: _tape_step(fn, variables, xt, y))
    return fn, (lambda: _tape_step(fn, variables, xt, y).numpy()), (
        lambda: compiled().numpy())


def tf2_steps(fn, widths, x, y):
    values = fn.initial_values()
    variables = []
    for i in range(len(widths) - 1):
        variables += [tf.Variable(values["layer%d/kernel" % i]),
                      tf.Variable(values["layer%d/bias" % i])]

    def forward(h):
        for i in range(len(widths) - 1):
            w, b = variables[2 * i], variables[2 * i + 1]
            h = tf.matmul(h, tf2.ste_sign(w)) / np.float32(np.sqrt(widths[i])) + b
            if i < len(widths) - 2:
                h = tf2.ste_sign(h)
        return h
    xt = tf.constant(x)
    compiled = tf.function(lambda: _tape_step(forward, variables, xt, y))
    return (lambda: _tape_step(forward, variables, xt, y).numpy()), (
        lambda: compiled().numpy())


def step_times(widths, batch, steps, repeats):
    rng = np.random.RandomState(1)
    x = rng.randn(batch, widths[0]).astype(np.float32)
    y = rng.randint(0, widths[-1], batch).astype(np.int64)
    graph_def = binarized_mlp(widths)
    fn, eager, function = frozen_steps(graph_def, x, y)
    _, _, portable = frozen_steps(graph_def, x, y, portable=True)
    tf2_eager, tf2_function = tf2_steps(fn, widths, x, y)
    runs = {"session": session_step(graph_def, set(fn.weight_names), x, y),
            "frozen eager": eager, "frozen function": function,
            "portable function": portable, "tf2 eager": tf2_eager,
            "tf2 function": tf2_function}
    for run in runs.values():
        run()  # warm-up: tracing, first allocation
    # Interleaved rounds, so that load from other processes hits all alike;
    # the median round of each.
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(_per_step(run, steps))
    return {name: statistics.median(t) for name, t in times.items()}


def _script(name):
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(name, os.path.join(here, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain_wrap(graph_def, inputs, outputs):
    wrapped = tf.compat.v1.wrap_function(
        lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    g = wrapped.graph
    return wrapped.prune([g.as_graph_element(n) for n in inputs],
                         [g.as_graph_element(n) for n in outputs])


def mobilenet_v2():
    """Keras MobileNetV2 (alpha 0.35, 32x32, random weights with seed 0)
    frozen with convert_variables_to_constants_v2: (graph_def, inputs,
    outputs). The to_function tests use it too (tests/frozen_tf2_models.py)."""
    from tensorflow.python.framework.convert_to_constants import (  # pylint: disable=import-outside-toplevel
        convert_variables_to_constants_v2)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.MobileNetV2(alpha=0.35, input_shape=(32, 32, 3),
                                              weights=None, classes=10)
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 32, 32, 3], tf.float32, name="x"))
    frozen_fn = convert_variables_to_constants_v2(concrete)
    return frozen_fn.graph.as_graph_def(), ["x:0"], [frozen_fn.outputs[0].name]


def conversion_times(nodes, repeats):
    mobilenet = mobilenet_v2() + ({}, 1000)
    big = _script("bench_frozen").synthetic_graph_def(nodes)
    last = big.node[-1].name
    large = (big, ["x:0"], [last + ":0"], {"rules": ["Sign=ste_sign"]}, "w$")
    out = {}
    for name, (graph_def, inputs, outputs, kwargs, trainable) in (
            ("MobileNetV2 (%d nodes)" % len(mobilenet[0].node), mobilenet),
            ("synthetic (%d nodes)" % len(big.node), large)):
        row = {}
        for label, make in (
                ("wrap_function + prune",
                 functools.partial(_plain_wrap, graph_def, inputs, outputs)),
                ("to_function",
                 functools.partial(frozen.to_function, graph_def, inputs, outputs, **kwargs)),
                ("to_function, trainable",
                 functools.partial(frozen.to_function, graph_def, inputs, outputs,
                                   trainable=trainable, **kwargs))):
            row[label] = median_seconds(make, repeats)
        out[name] = row
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 1024, 10])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=50, help="steps per timing")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=20000,
                        help="size of the synthetic graph (default 20000)")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.widths, args.batch, args.steps, args.repeats, args.nodes = (
            [64, 128, 10], 32, 5, 2, 2000)
    steps = step_times(args.widths, args.batch, args.steps, args.repeats)
    convert = conversion_times(args.nodes, 1 if args.nodes > 5000 else 2)
    if args.json:
        print(json.dumps({"step_seconds": steps, "conversion_seconds": convert,
                          "tensorflow": tf.__version__}, indent=2))
        return 0
    print("TensorFlow %s; MLP %s, batch %d; median of %d rounds x %d steps"
          % (tf.__version__, args.widths, args.batch, args.repeats, args.steps))
    print("%-20s %12s %12s" % ("step", "ms", "/ session"))
    for name, seconds in steps.items():
        print("%-20s %12.3f %12.2f" % (name, 1e3 * seconds, seconds / steps["session"]))
    print()
    print("%-28s %-24s %10s %12s" % ("conversion", "", "seconds", "/ wrap+prune"))
    for graph, row in convert.items():
        for label, seconds in row.items():
            print("%-28s %-24s %10.3f %12.2f" % (
                graph, label, seconds, seconds / row["wrap_function + prune"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
