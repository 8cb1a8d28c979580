"""Section 6 of tools/bench.py, its Bop row: a training step of the
benchmarked network (bench_keras.build) trained with larq's recipe for
binarized networks, ``CaseOptimizer((Bop.is_binary_variable, Bop()),
default_optimizer=Adam)``, with graph_override.keras's layers and optimizers
against larq 0.13.3's, in one process of TensorFlow 2.15's venv (larq runs
there only), alternating in a rotating order. Both use Keras 2's legacy Adam
for the float weights (larq's CaseOptimizer accepts no other), so the two
steps differ only by the layers, Bop and the CaseOptimizer.

Run on its own (in TensorFlow 2.15's venv):
``python tools/bench_bop.py SIZE WIDTH BATCH REPEATS STEPS``: one JSON line,
{"larq": [median s, 1.0], "graph_override": [median s, ratio], "tensorflow": ...}.
"""

import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOAL = 1.0


def _compiled(package, model):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    optimizers = package.optimizers
    model.compile(optimizers.CaseOptimizer(
        (optimizers.Bop.is_binary_variable, optimizers.Bop(threshold=1e-6, gamma=1e-3)),
        default_optimizer=tf.keras.optimizers.legacy.Adam(0.001)),
        "sparse_categorical_crossentropy")
    return model


def compare_bop_steps(size, width, batch, repeats, steps):
    """Median seconds per train_on_batch of larq's stack and ours:
    {label: (median s, median ratio to larq's within a repetition)}."""
    import larq  # pylint: disable=import-outside-toplevel

    import graph_override.keras as lq  # pylint: disable=import-outside-toplevel
    from bench_common import median, rotations  # pylint: disable=import-outside-toplevel
    from bench_keras import _data, build  # pylint: disable=import-outside-toplevel
    x, y = _data(size, batch)
    models = {"larq": _compiled(larq, build(larq.layers, size, width)),
              "graph_override": _compiled(lq, build(lq.layers, size, width))}
    for model in models.values():
        for _ in range(3):  # warm up: tracing, slots
            model.train_on_batch(x, y)
    times = {label: [] for label in models}
    for order in rotations(list(models), repeats):
        for label in order:
            start = time.perf_counter()
            for _ in range(steps):
                loss = models[label].train_on_batch(x, y)
            float(loss)
            times[label].append((time.perf_counter() - start) / steps)
    return {label: (median(t), median(a / b for a, b in zip(t, times["larq"])))
            for label, t in times.items()}


def bop_row(python, k, log, run_child):
    """The row of section 6 (or the child's {"error": ...}), measured by
    running this file under `python` (TensorFlow 2.15's)."""
    log("keras: training step with Bop, these layers and optimizers against larq's")
    r = run_child(python, [k["size"], k["width"], k["batch"], k["repeats"], k["steps"]], log,
                  script=__file__)
    if "error" in r:
        return r
    return dict(comparison="training step with Bop (CaseOptimizer: Bop for the binary "
                           "kernels, Adam for the rest): these layers and optimizers "
                           "against larq 0.13.3's",
                ours=1e3 * r["graph_override"][0], theirs=1e3 * r["larq"][0],
                ratio=r["graph_override"][1], goal=GOAL, unit="ms",
                tensorflow=r["tensorflow"], repeats=k["repeats"])


def main(argv):
    sys.path.insert(0, str(ROOT / "tools"))
    size, width, batch, repeats, steps = (int(a) for a in argv[:5])
    result = compare_bop_steps(size, width, batch, repeats, steps)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    result["tensorflow"] = tf.__version__
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
