"""Section 6 of tools/bench.py: graph_override.keras's quantized layers.

Three comparisons, each of the same network (QuantConv2D x 2, max pool,
QuantDense x 2, binarized inputs and kernels, ``weight_clip``):

1. a training step (``model.train_on_batch``, compiled, after warm-up) with
   the quantized layers against the same network with float Conv2D/Dense,
   in one process, alternating in a rotating order;
2. peak memory (``VmHWM``) of a process that builds and trains the
   quantized network against one that does the same with the float one,
   each in a fresh process, the processes of a repetition in a rotating
   order; also what the training adds to the process (its own ``VmHWM``,
   started again after the imports, less the resident memory then: the
   imports, which both sides share, can peak higher); the same
   with one malloc arena (``MALLOC_ARENA_MAX=1``: what is left without the
   allocator's slack across threads), and under TensorFlow 2.15, where
   larq's own layers are measured too;
3. under TensorFlow 2.15 (compat/.venv-2.15, where larq 0.13.3 is
   installed), the quantized network with these layers against the same
   network with larq's layers, alternating in one process of that venv;
4. on a deeper network whose activations, not the runtime, fill the memory
   (`build_deep`), quantized against float, each in a fresh process: the
   peak of the tensors a training step holds, as TensorFlow's own allocator
   counts them (its pooling allocator, TF_CPU_ALLOCATOR_USE_BFC, which keeps
   that count; the peak after warm-up), and VmHWM under that allocator and
   under the default one (malloc).

5. larq-zoo's QuickNet, built by graph_override.keras.zoo, against the same
   model with float layers and against larq-zoo's own (bench_zoo.py).

A ratio is the median over repetitions of the ratio within each one.
Run on its own: ``python tools/bench_keras.py step|memory|larq|tensors ARGS`` (what
the section starts as child processes) prints one JSON line.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# TensorFlow 2.15's Python, where larq is installed (compat/run.sh builds it).
VENV_215 = pathlib.Path(os.environ.get(
    "BENCH_PYTHON_215", ROOT / "compat" / ".venv-2.15" / "bin" / "python"))
GOALS = {"float": 1.15, "memory": 1.0, "larq": 1.0}


def build(layers, size, width, seed=0):
    """The benchmarked network with `layers` (a module with QuantConv2D and
    QuantDense: graph_override.keras.layers or larq.layers), or float
    Conv2D/Dense for None; the same initial weights for every `layers`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if layers is None:
        conv = lambda n, **kw: tf.keras.layers.Conv2D(n, 3, padding="same", use_bias=False)  # noqa: E731
        dense = lambda n, **kw: tf.keras.layers.Dense(n, use_bias=False)  # noqa: E731
    else:
        binary = dict(kernel_quantizer="ste_sign", kernel_constraint="weight_clip",
                      use_bias=False)
        conv = lambda n, **kw: layers.QuantConv2D(n, 3, padding="same", **binary, **kw)  # noqa: E731
        dense = lambda n, **kw: layers.QuantDense(n, **binary, **kw)  # noqa: E731
    quantized = dict(input_quantizer="ste_sign")
    norm = lambda: tf.keras.layers.BatchNormalization(scale=False)  # noqa: E731
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential([
        tf.keras.Input((size, size, 1)),
        conv(width), norm(),
        conv(2 * width, **quantized), tf.keras.layers.MaxPool2D(2), norm(),
        tf.keras.layers.Flatten(),
        dense(8 * width, **quantized), norm(),
        dense(10, **quantized), norm(),
        tf.keras.layers.Activation("softmax")])


def build_deep(layers, depth, width, seed=0):
    """A float Conv2D on 32x32x3 inputs, then `depth` convolutions of
    `width` channels (QuantConv2D with binarized inputs and kernels from
    `layers`, or float Conv2D for None), each with batch normalization, and a
    pooled 10-way Dense."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.keras.utils.set_random_seed(seed)
    stack = [tf.keras.Input((32, 32, 3)),
             tf.keras.layers.Conv2D(width, 3, padding="same", use_bias=False),
             tf.keras.layers.BatchNormalization(scale=False)]
    for _ in range(depth):
        stack.append(tf.keras.layers.Conv2D(width, 3, padding="same", use_bias=False)
                     if layers is None else layers.QuantConv2D(
                         width, 3, padding="same", use_bias=False, input_quantizer="ste_sign",
                         kernel_quantizer="ste_sign", kernel_constraint="weight_clip"))
        stack.append(tf.keras.layers.BatchNormalization(scale=False))
    stack += [tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10),
              tf.keras.layers.Activation("softmax")]
    return tf.keras.Sequential(stack)


def _deep_peaks(layers, depth, width, batch, steps):
    """Trains `build_deep` for `steps` steps after one of warm-up: the peak,
    in MB, of the tensors TensorFlow's CPU allocator holds over those steps
    (None under the default allocator, which does not count them) and the
    process's VmHWM."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    model = _compiled(build_deep(layers, depth, width))
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (batch, 32, 32, 3)).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.int64)
    model.train_on_batch(x, y)
    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        counted = True
    except ValueError:  # the default allocator keeps no count
        counted = False
    for _ in range(steps):
        model.train_on_batch(x, y)
    tensors = tf.config.experimental.get_memory_info("CPU:0")["peak"] if counted else None
    return dict(tensor_peak_mb=None if tensors is None else tensors / 2.0 ** 20,
                peak_mb=_hwm_mb())


def _data(size, batch, seed=1):
    import numpy as np  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(seed)
    return (rng.uniform(-1, 1, (batch, size, size, 1)).astype(np.float32),
            rng.randint(0, 10, batch).astype(np.int64))


def _compiled(model):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    model.compile(tf.keras.optimizers.Adam(0.001), "sparse_categorical_crossentropy")
    return model


def compare_steps(variants, size, width, batch, repeats, steps):
    """Median seconds per train_on_batch of each of `variants` ({label: layers
    module or None}), the first the baseline: {label: (median s, ratio)}."""
    from bench_common import median, rotations  # pylint: disable=import-outside-toplevel
    x, y = _data(size, batch)
    models = {label: _compiled(build(layers, size, width)) for label, layers in variants.items()}
    for model in models.values():
        for _ in range(3):  # warm up: tracing, allocation
            model.train_on_batch(x, y)
    times = {label: [] for label in models}
    for order in rotations(list(models), repeats):
        for label in order:
            start = time.perf_counter()
            for _ in range(steps):
                model_loss = models[label].train_on_batch(x, y)
            float(model_loss if not isinstance(model_loss, list) else model_loss[0])
            times[label].append((time.perf_counter() - start) / steps)
    base = times[next(iter(models))]
    return {label: (median(t), median(a / b for a, b in zip(t, base)))
            for label, t in times.items()}


def _status_mb(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024.0


def _hwm_mb():
    return _status_mb("VmHWM:")


def _reset_peak():
    """Starts VmHWM again from the resident memory now (Linux: "5" to
    clear_refs), so that a peak reached while importing does not hide the
    training's; False where that cannot be done."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(argv):
    """The child processes' work; prints one JSON line."""
    sys.path.insert(0, str(ROOT / "tools"))
    kind, size, width, batch = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    import graph_override.keras as lq  # pylint: disable=import-outside-toplevel
    if kind == "tensors":  # size is the depth; argv[4]: quantized or float; argv[5]: steps
        layers = {"quantized": lq.layers, "float": None}[argv[4]]
        result = _deep_peaks(layers, size, width, batch, int(argv[5]))
    elif kind == "memory":  # argv[4]: quantized, float or larq; argv[5]: steps
        layers = {"quantized": lq.layers, "float": None}.get(argv[4])
        if argv[4] == "larq":
            import larq  # pylint: disable=import-outside-toplevel
            layers = larq.layers
        imports_peak = _hwm_mb()
        before = _status_mb("VmRSS:") if _reset_peak() else imports_peak
        model = _compiled(build(layers, size, width))
        x, y = _data(size, batch)
        for _ in range(int(argv[5])):
            model.train_on_batch(x, y)
        training_peak = _hwm_mb()
        result = dict(peak_mb=max(imports_peak, training_peak), after_imports_mb=before,
                      added_mb=training_peak - before)
    else:  # step (ours against float) or larq (ours against larq's)
        repeats, steps = int(argv[4]), int(argv[5])
        if kind == "larq":
            import larq  # pylint: disable=import-outside-toplevel
            variants = {"larq": larq.layers, "graph_override": lq.layers}
        else:
            variants = {"float": None, "graph_override": lq.layers}
        result = compare_steps(variants, size, width, batch, repeats, steps)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    result["tensorflow"] = tf.__version__
    print(json.dumps(result))


def _run_child(python, args, log, script=None, path=(), **env_vars):
    """The JSON a child process (`script`, default this file's, with `path`
    on its PYTHONPATH after the repository) printed, or {"error": ...}."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env_vars,
               PYTHONPATH=os.pathsep.join([str(ROOT)] + list(path) + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([str(python), str(script or __file__)] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, cwd=str(ROOT))
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        log("bench_keras %s failed: %s" % (args[0], tail))
        return {"error": "tools/bench_keras.py %s failed: %s" % (args[0], tail)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(comparison, ours, theirs, ratio, goal, unit, tensorflow, repeats):
    return dict(comparison=comparison, ours=ours, theirs=theirs, ratio=ratio, goal=goal,
                unit=unit, tensorflow=tensorflow, repeats=repeats)


_LABELS = {"quantized": "these layers", "float": "float Conv2D/Dense",
           "larq": "larq 0.13.3's layers"}


def _fresh_processes(python, args, kinds, keys, k, log, **env):
    """Runs the child ``args + [kind, steps]`` for each of `kinds` in a fresh
    process, k["memory_repeats"] times, the kinds of a repetition in a
    rotating order: ``({key: {kind: [value per repetition]}}, TensorFlow's
    version)`` for each of `keys` of the children's JSON, or a child's
    {"error": ...}."""
    from bench_common import rotations  # pylint: disable=import-outside-toplevel
    found = {key: {} for key in keys}
    for order in rotations(list(kinds), k["memory_repeats"]):
        for kind in order:
            m = _run_child(python, args + [kind, k["steps"]], log, **env)
            if "error" in m:
                return m
            for key in keys:
                found[key].setdefault(kind, []).append(m[key])
    return found, m["tensorflow"]


def _ratio_row(comparison, ours, theirs, goal, tensorflow, repeats):
    """A row of MB values per repetition: their medians and the median of
    the ratios within each repetition."""
    from bench_common import median  # pylint: disable=import-outside-toplevel
    return _row(comparison, median(ours), median(theirs),
                median(a / b for a, b in zip(ours, theirs)), goal, "MB", tensorflow, repeats)


def _memory_rows(python, kinds, shape, k, log, arenas=None):
    """Each of `kinds` but the float one against the float one (and, when
    measured, ours against larq's): the median peak of a fresh process and
    the median of what training adds over the imports, with the median of the
    ratios within each repetition. The processes of a repetition run one after
    another in a rotating order. `arenas`: glibc's MALLOC_ARENA_MAX for the
    children (None: glibc's default, one arena per thread up to 8 per core)."""
    env = {} if arenas is None else {"MALLOC_ARENA_MAX": str(arenas)}
    measured = _fresh_processes(python, ["memory"] + shape, kinds, ("peak_mb", "added_mb"), k,
                                log, **env)
    if isinstance(measured, dict):  # a child failed
        return [measured]
    found, tensorflow = measured
    pairs = [(kind, "float") for kind in kinds if kind != "float"]
    if "larq" in kinds:
        pairs.append(("quantized", "larq"))
    rows = []
    for ours, theirs in pairs:
        for what, key, goal in (("peak memory (VmHWM) of a process that trains",
                                 "peak_mb", GOALS["memory"]),
                                ("memory training adds to the process (VmHWM less "
                                 "RSS after imports)", "added_mb", None)):
            if (ours, theirs) != ("quantized", "float") or arenas is not None:
                goal = None  # the goal: against float layers, as users run
            rows.append(_ratio_row(
                "%s%s: %s against %s" % (what, "" if arenas is None else (
                    ", MALLOC_ARENA_MAX=%d" % arenas), _LABELS[ours], _LABELS[theirs]),
                found[key][ours], found[key][theirs], goal, tensorflow, k["memory_repeats"]))
    return rows


def _deep_rows(k, log):
    """`build_deep` with k["deep"] = (depth, width, batch), quantized against
    float, each in a fresh process, under TensorFlow's pooling allocator
    (the peak of the tensors a training step holds, and VmHWM) and its
    default one (VmHWM): medians, and the median of the ratios."""
    depth, width, batch = k["deep"]
    network = "%d QuantConv2D of %d channels at 32x32, batch %d" % (depth, width, batch)
    rows = []
    for allocator, use_bfc in (("pooling", "true"), ("default", "false")):
        measured = _fresh_processes(sys.executable, ["tensors"] + list(k["deep"]),
                                    ("quantized", "float"), ("tensor_peak_mb", "peak_mb"),
                                    dict(k, steps=2), log, TF_CPU_ALLOCATOR_USE_BFC=use_bfc)
        if isinstance(measured, dict):  # a child failed
            return rows + [measured]
        found, tensorflow = measured
        measures = [("peak_mb", "peak memory (VmHWM) of a process that trains", None)]
        if allocator == "pooling":
            measures.insert(0, ("tensor_peak_mb", "peak of the tensors of a training step",
                                GOALS["memory"]))
        for key, what, goal in measures:
            rows.append(_ratio_row(
                "%s, TensorFlow's %s allocator, %s: these layers against float Conv2D"
                % (what, allocator, network), found[key]["quantized"], found[key]["float"],
                goal, tensorflow, k["memory_repeats"]))
    return rows


def bench_section(cfg, log):
    """The section's rows: each comparison with its medians, ratio and goal."""
    k = cfg["keras"]
    shape = [k["size"], k["width"], k["batch"]]
    rows = []
    log("keras: training step, quantized against float layers")
    r = _run_child(sys.executable, ["step"] + shape + [k["repeats"], k["steps"]], log)
    rows.append(r if "error" in r else _row(
        "training step: QuantConv2D/QuantDense against float Conv2D/Dense",
        1e3 * r["graph_override"][0], 1e3 * r["float"][0], r["graph_override"][1],
        GOALS["float"], "ms", r["tensorflow"], k["repeats"]))
    log("keras: peak memory, each network in a fresh process")
    rows += _memory_rows(sys.executable, ("quantized", "float"), shape, k, log)
    log("keras: the same with one malloc arena (no allocator slack across threads)")
    rows += _memory_rows(sys.executable, ("quantized", "float"), shape, k, log, arenas=1)
    log("keras: peak memory of a deeper network, under both CPU allocators")
    rows += _deep_rows(k, log)
    from bench_zoo import zoo_rows  # pylint: disable=import-outside-toplevel
    rows += zoo_rows(k, log)
    if not VENV_215.exists():
        rows.append({"error": "no TensorFlow 2.15 Python at %s (compat/run.sh builds it; "
                              "BENCH_PYTHON_215 names another): larq's layers not "
                              "measured" % VENV_215})
        return rows
    log("keras: peak memory under TensorFlow 2.15, larq's layers too")
    rows += _memory_rows(VENV_215, ("quantized", "float", "larq"), shape, k, log)
    log("keras: training step, these layers against larq's (TensorFlow 2.15 venv)")
    r = _run_child(VENV_215, ["larq"] + shape + [k["repeats"], k["steps"]], log)
    rows.append(r if "error" in r else _row(
        "training step: these layers against larq 0.13.3's",
        1e3 * r["graph_override"][0], 1e3 * r["larq"][0], r["graph_override"][1],
        GOALS["larq"], "ms", r["tensorflow"], k["repeats"]))
    from bench_bop import bop_row  # pylint: disable=import-outside-toplevel
    rows.append(bop_row(VENV_215, k, log, _run_child))
    return rows


if __name__ == "__main__":
    child(sys.argv[1:])
