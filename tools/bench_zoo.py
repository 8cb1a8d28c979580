"""Section 6 of tools/bench.py, continued: a training step of larq-zoo's
QuickNet built by graph_override.keras.zoo,

1. against the same model with float layers (each QuantConv2D,
   QuantDepthwiseConv2D and QuantDense as Keras's own layer of the same
   configuration, without quantizers, ``pad_values`` or constraint; the
   same weights), in one process of this TensorFlow;
2. against larq-zoo 2.3.2's own QuickNet with larq 0.13.3's layers, in one
   process of TensorFlow 2.15 (bench_keras.VENV_215), larq-zoo installed
   there by compat/reference_zoo.sh; our model gets larq-zoo's weights.

Each step is ``model.train_on_batch`` (compiled, Adam, after warm-up); the
two models of a comparison alternate in a rotating order, and a ratio is the
median of the ratios within each repetition. Run on its own: ``python
tools/bench_zoo.py float|larq MODEL SIZE BATCH REPEATS STEPS`` (what the
section starts as a child process) prints one JSON line.
"""

import json
import os
import subprocess
import sys
import time

from bench_keras import ROOT, VENV_215, _row, _run_child

GOALS = {"float": 1.1, "larq": 1.0}
_QUANT_KEYS = ("input_quantizer", "kernel_quantizer", "depthwise_quantizer", "pad_values",
               "kernel_constraint", "depthwise_constraint")


def _float_twin(model):
    """`model` with Keras's float layers for the quantized ones, same weights."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from graph_override.keras import layers as quant  # pylint: disable=import-outside-toplevel
    plain = {quant.QuantConv2D: tf.keras.layers.Conv2D,
             quant.QuantDepthwiseConv2D: tf.keras.layers.DepthwiseConv2D,
             quant.QuantDense: tf.keras.layers.Dense}

    def clone(layer):
        config = layer.get_config()
        cls = plain.get(type(layer))
        if cls is None:
            return layer.__class__.from_config(config)
        for key in _QUANT_KEYS:
            config.pop(key, None)
        return cls.from_config(config)
    twin = tf.keras.models.clone_model(model, clone_function=clone)
    twin.set_weights(model.get_weights())
    return twin


def _larq_zoo_model(name, size, classes):
    import keras.applications.imagenet_utils as public  # pylint: disable=import-outside-toplevel
    import keras.src.applications.imagenet_utils as private  # pylint: disable=import-outside-toplevel
    public.obtain_input_shape = private.obtain_input_shape  # gone from Keras 2.15's public API
    import larq_zoo  # pylint: disable=import-outside-toplevel
    return getattr(larq_zoo.sota, name)(weights=None, input_shape=(size, size, 3),
                                        num_classes=classes)


def steps(models, x, y, repeats, count):
    """{label: (median seconds per step, median ratio to the first label)}."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from bench_common import median, rotations  # pylint: disable=import-outside-toplevel
    for model in models.values():
        model.compile(tf.keras.optimizers.Adam(0.001), "sparse_categorical_crossentropy")
        for _ in range(3):  # warm up: tracing, allocation
            model.train_on_batch(x, y)
    times = {label: [] for label in models}
    for order in rotations(list(models), repeats):
        for label in order:
            start = time.perf_counter()
            for _ in range(count):
                loss = models[label].train_on_batch(x, y)
            float(loss if not isinstance(loss, list) else loss[0])
            times[label].append((time.perf_counter() - start) / count)
    base = times[next(iter(models))]
    return {label: (median(t), median(a / b for a, b in zip(t, base)))
            for label, t in times.items()}


def child(argv):
    """The child process's work; prints one JSON line."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from graph_override.keras import zoo  # pylint: disable=import-outside-toplevel
    kind, name = argv[0], argv[1]
    size, batch, repeats, count = (int(a) for a in argv[2:6])
    tf.keras.utils.set_random_seed(0)
    ours = getattr(zoo, name)(input_shape=(size, size, 3), num_classes=10)
    if kind == "larq":
        theirs = _larq_zoo_model(name, size, 10)
        ours.set_weights(theirs.get_weights())
        models = {"larq": theirs, "graph_override": ours}
    else:
        models = {"float": _float_twin(ours), "graph_override": ours}
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.int64)
    result = steps(models, x, y, repeats, count)
    result["tensorflow"] = tf.__version__
    print(json.dumps(result))


def _zoo_path(log):
    done = subprocess.run(["bash", str(ROOT / "compat" / "reference_zoo.sh")],
                          env=dict(os.environ, PYTHON=str(VENV_215)), capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        log("compat/reference_zoo.sh failed: %s" % tail)
        return None, tail
    return done.stdout.strip().splitlines()[-1].split("=", 1)[1], None


def zoo_rows(k, log):
    """The section's QuickNet rows (k: bench.py's ``keras`` settings, its
    ``zoo`` entry: model, size, batch, repeats, steps)."""
    z = k["zoo"]
    args = [z["model"], z["size"], z["batch"], z["repeats"], z["steps"]]
    what = "%s at %dx%d, batch %d" % (z["model"], z["size"], z["size"], z["batch"])
    log("keras: training step of %s, against float layers" % what)
    r = _child(sys.executable, ["float"] + args, log)
    rows = [r if "error" in r else _row(
        "training step: %s (graph_override.keras.zoo) against the same model with float "
        "layers" % what, 1e3 * r["graph_override"][0], 1e3 * r["float"][0],
        r["graph_override"][1], GOALS["float"], "ms", r["tensorflow"], z["repeats"])]
    if not VENV_215.exists():
        return rows + [{"error": "no TensorFlow 2.15 Python at %s: larq-zoo's QuickNet not "
                                 "measured" % VENV_215}]
    path, failure = _zoo_path(log)
    if path is None:
        return rows + [{"error": "larq-zoo could not be installed for TensorFlow 2.15 "
                                 "(compat/reference_zoo.sh: %s): not measured" % failure}]
    log("keras: training step of %s, against larq-zoo's (TensorFlow 2.15 venv)" % what)
    r = _child(VENV_215, ["larq"] + args, log, path)
    rows.append(r if "error" in r else _row(
        "training step: %s (graph_override.keras.zoo) against larq-zoo 2.3.2's" % what,
        1e3 * r["graph_override"][0], 1e3 * r["larq"][0], r["graph_override"][1],
        GOALS["larq"], "ms", r["tensorflow"], z["repeats"]))
    return rows


def _child(python, args, log, zoo_path=None):
    return _run_child(python, args, log, script=__file__,
                      path=() if zoo_path is None else (zoo_path,))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    child(sys.argv[1:])
