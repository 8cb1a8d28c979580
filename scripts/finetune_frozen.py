#!/usr/bin/env python
"""Fine-tune a frozen binarized network in TF2, then serve it with plain TensorFlow.

    python scripts/finetune_frozen.py                # train briefly, freeze, fine-tune
    python scripts/finetune_frozen.py --workdir /tmp/ft --target 0.96

1. Trains a BinaryNet on scikit-learn's digits in a Session for a short while
   (graph_override.training.recipes.train_bnn, as scripts/train_bnn.py does).
2. Freezes it the TF1 way (convert_variables_to_constants): an inference
   graph whose latent weights are Const nodes feeding tf.sign, whose gradient
   is zero; the training code is then no longer needed.
3. Converts the frozen graph with graph_override.frozen.to_function
   (rule Sign=ste_sign, trainable latent kernels and batch-norm scale/offset)
   and fine-tunes it eagerly (tf.function steps with a GradientTape), printing
   the test accuracy after each epoch until it reaches --target.
4. Saves a SavedModel (`FrozenFunction.save`), loads it in a fresh process
   that never imports graph_override, and checks that it reproduces the
   fine-tuned outputs bit for bit and still differentiates.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from graph_override import frozen  # noqa: E402
from graph_override.training import data, recipes  # noqa: E402

tf.get_logger().setLevel("ERROR")

# Run by a fresh interpreter: plain TensorFlow, no graph_override.
_PLAIN_CHECK = r"""
import json, sys
import numpy as np, tensorflow as tf
loaded = tf.saved_model.load(sys.argv[1])
x = tf.constant(np.load(sys.argv[2]))
with tf.GradientTape() as tape:
    logits = loaded.signatures["serving_default"](x=x)["logits"]
    loss = tf.reduce_sum(tf.nn.log_softmax(logits)[:, 0])
grads = tape.gradient(loss, list(loaded.weights))
np.save(sys.argv[3], logits.numpy())
print(json.dumps({"graph_override_imported": "graph_override" in sys.modules,
                  "weights": len(loaded.weights),
                  "nonzero_weight_gradients": sum(int(np.any(g.numpy())) for g in grads)}))
"""


def freeze_bnn(checkpoint, n_layers):
    """The inference graph of the trained BNN as a frozen GraphDef.

    Input "x" [N, 64] in [0, 1], output "logits" [N, 10]; batch norm uses the
    moving averages. Node names follow the checkpoint's variables.
    """
    reader = tf.train.load_checkpoint(checkpoint)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, data.N_FEATURES], name="x")
        h = 2.0 * x - 1.0
        for i in range(n_layers):
            def var(name):
                return tf.compat.v1.get_variable(
                    "bnn/" + name, initializer=reader.get_tensor("bnn/" + name))
            kernel = var("dense%d/kernel" % i)
            h = tf.matmul(h, tf.sign(kernel))
            h = tf.nn.batch_normalization(
                h, var("bn%d/moving_mean" % i), var("bn%d/moving_variance" % i),
                var("bn%d/beta" % i), var("bn%d/gamma" % i), 1e-4)
            if i < n_layers - 1:
                h = tf.sign(h)
        tf.identity(h, name="logits")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), ["logits"])


def _accuracy(fn, x, y):
    return float(np.mean(np.argmax(fn(x).numpy(), axis=1) == y))


def fine_tune(fn, split, *, epochs, target, learning_rate, seed, log=print):
    """Adam on the trainable weights, latent kernels clipped to [-1, 1]
    after each step (BinaryNet); stops at `target` test accuracy."""
    optimizer = tf.keras.optimizers.Adam(learning_rate)
    kernels = [v for n, v in zip(fn.weight_names, fn.weights) if n.endswith("kernel")]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=fn(x)))
        grads = tape.gradient(loss, fn.trainable_variables)
        optimizer.apply_gradients(zip(grads, fn.trainable_variables))
        for k in kernels:
            k.assign(tf.clip_by_value(k, -1.0, 1.0))
        return loss

    history = []
    for epoch in range(1, epochs + 1):
        losses = [float(step(split.x_train[i], split.y_train[i]))
                  for i in data.batches(len(split.y_train), 64, seed, epoch)]
        acc = _accuracy(fn, split.x_test, split.y_test)
        history.append(acc)
        log("fine-tune epoch %d: loss %.4f, test accuracy %.4f"
            % (epoch, float(np.mean(losses)), acc))
        if acc >= target:
            break
    return history


def check_in_plain_tensorflow(saved_dir, x, workdir):
    """Loads the SavedModel in a fresh process without graph_override;
    returns (its logits for x, what it reported)."""
    np.save(os.path.join(workdir, "x.npy"), x)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-c", _PLAIN_CHECK, saved_dir, os.path.join(workdir, "x.npy"),
         os.path.join(workdir, "logits.npy")], capture_output=True, text=True, env=env,
        check=True)
    return np.load(os.path.join(workdir, "logits.npy")), json.loads(proc.stdout.splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", help="keep the files here (default: a temporary folder)")
    parser.add_argument("--train-epochs", type=int, default=1,
                        help="Session training epochs before freezing (default 1)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--epochs", type=int, default=30,
                        help="most fine-tuning epochs (default 30)")
    parser.add_argument("--target", type=float, default=0.95,
                        help="stop fine-tuning at this test accuracy (default 0.95)")
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="finetune_frozen_")
    os.makedirs(workdir, exist_ok=True)
    split = data.digits_splits()

    result = recipes.train_bnn("overrides", epochs=args.train_epochs, seed=args.seed,
                               hidden=tuple(args.hidden), progress=False,
                               checkpoint_dir=os.path.join(workdir, "checkpoints"))
    print("1. trained a BinaryNet %s for %d epoch(s) in a Session: test accuracy %.4f"
          % (args.hidden, args.train_epochs, result.evaluations[-1][2]["test"]))

    graph_def = freeze_bnn(tf.train.latest_checkpoint(os.path.join(workdir, "checkpoints")),
                           len(args.hidden) + 1)
    model_pb = os.path.join(workdir, "bnn.pb")
    frozen.save(graph_def, model_pb)
    report = frozen.inspect(graph_def)
    print("2. froze it to %s: %d nodes; %d Sign node(s) with zero gradient"
          % (model_pb, report.nodes, len(report.zero_gradients)))

    fn = frozen.to_function(model_pb, ["x:0"], ["logits:0"], rules=["Sign=ste_sign"],
                            trainable=r"kernel$|gamma$|beta$")
    before = _accuracy(fn, split.x_test, split.y_test)
    print("3. to_function: %d trainable variables (%d elements); test accuracy %.4f"
          % (len(fn.weights), sum(int(v.shape.num_elements()) for v in fn.weights), before))
    history = fine_tune(fn, split, epochs=args.epochs, target=args.target,
                        learning_rate=args.learning_rate, seed=args.seed,
                        log=lambda m: print("   " + m))
    print("   test accuracy %.4f -> %.4f in %d epoch(s)" % (before, history[-1], len(history)))

    saved = os.path.join(workdir, "saved_model")
    fn.save(saved, overwrite=True)
    logits, info = check_in_plain_tensorflow(saved, split.x_test, workdir)
    same = np.array_equal(logits, fn(split.x_test).numpy())
    print("4. saved %s; plain TensorFlow (graph_override imported: %s) reproduces the "
          "fine-tuned logits bitwise: %s; test accuracy %.4f; %d of %d weights get a "
          "nonzero gradient" % (saved, info["graph_override_imported"], same,
                                float(np.mean(np.argmax(logits, 1) == split.y_test)),
                                info["nonzero_weight_gradients"], info["weights"]))
    return 0 if same and history[-1] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
