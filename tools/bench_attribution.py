"""Section 7 of tools/bench.py: attribution maps against the plain gradient.

One frozen model (Keras MobileNetV2, weights=None, frozen with
convert_variables_to_constants_v2) and one batch; every variant explains the
same examples for the same target classes:

- the plain gradient: the model's unpatched `FrozenFunction` under a
  GradientTape, the target logits summed (the baseline, ratio 1);
- the forward pass alone (to show where time goes);
- graph_override's gradient x input, guided backprop, epsilon-LRP and
  DeepLIFT, each through an `attribution.Explainer` kept across calls (the
  frozen graph is patched once per method, as a user who explains several
  batches would keep it);
- PAIR's `saliency.tf1.GuidedBackprop` (saliency 0.2.1) on the same frozen
  graph, where it can be imported: it imports the graph again into a new
  Graph when it is constructed (once per target tensor, so once per class)
  and takes one example per `GetMask`, so a batch is a loop. Its
  construction is timed apart. It overrides the gradient of Relu only; on
  MobileNetV2 (Relu6) its map is the plain gradient, which the child checks.
- two floors of an exact epsilon-LRP rule (`bench_floors`): the plain gradient
  with every activation's gradient replaced by dy * x, a rule that keeps the
  op's input as epsilon-LRP must, as one in-place multiply and as one
  XLA-compiled call.

Everything runs in one fresh process per batch size and CPU allocator, the
variants one after another in a rotating order, median seconds per batch over the
repetitions; a ratio is the median of the ratios within each repetition.
Each batch is measured twice: with TensorFlow's default CPU allocator, which
takes every large tensor from malloc (on Linux a fresh mmap, so its pages
fault in on first touch at every step), and with TF_CPU_ALLOCATOR_USE_BFC=true,
TensorFlow's pooling allocator, which reuses them (`ALLOCATORS`).
Run on its own: ``python tools/bench_attribution.py SIZE ALPHA BATCH REPEATS
[SALIENCY_DIR]`` prints one JSON line.
"""

import hashlib
import json
import math
import os
import pathlib
import subprocess
import sys
import time
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Where saliency 0.2.1 is installed: BENCH_SALIENCY_DIR, else the folder
# compat/reference_venv.sh installs it into (pip install --no-deps --target
# DIR saliency==0.2.1 is enough: saliency.tf1 needs only numpy and TensorFlow).
SALIENCY_DIR = os.environ.get("BENCH_SALIENCY_DIR") or str(
    ROOT / "compat" / ".reference" / ("pair-py%d.%d" % sys.version_info[:2]))
GOALS = {"gradient_input": 1.2, "guided_backprop": 1.2, "eps_lrp": 1.2, "deeplift": 2.2}
METHODS = ("gradient_input", "guided_backprop", "eps_lrp", "deeplift")
# (label, environment) of the CPU allocators measured: read once by
# TensorFlow's process state (tensorflow/core/common_runtime/process_state.cc),
# so each runs in a process of its own.
ALLOCATORS = (("default", {}), ("BFC", {"TF_CPU_ALLOCATOR_USE_BFC": "true"}))
ALLOCATOR_VARIABLES = ("TF_CPU_ALLOCATOR_USE_BFC", "TF_CPU_BFC_MEM_LIMIT_IN_MB")


def calibrate_batch_norm(model, x):
    """Sets every BatchNormalization layer's moving mean and variance to the
    statistics of the batch `x` (one training-mode pass with momentum 0).

    Keras applications built with weights=None have moving statistics 0 and
    1, with which MobileNetV2's activations shrink layer by layer (logits
    about 1e-11 at 32x32); calibrated, every layer sees inputs of unit scale,
    as in a trained network.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    norms = [l for l in model.layers if isinstance(l, tf.keras.layers.BatchNormalization)]
    momenta = [l.momentum for l in norms]
    try:
        for layer in norms:
            layer.momentum = 0.0
        model(x, training=True)
    finally:
        for layer, momentum in zip(norms, momenta):
            layer.momentum = momentum


def keras_application(name, size, seed=0, classes=1000, **kwargs):
    """tf.keras.applications.NAME on size x size x 3 images, weights=None,
    logits out, batch normalization calibrated on random inputs."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.keras.utils.set_random_seed(seed)
    model = getattr(tf.keras.applications, name)(
        input_shape=(size, size, 3), weights=None, classes=classes,
        classifier_activation=None, **kwargs)
    calibrate_batch_norm(model, np.random.RandomState(seed).uniform(
        -1, 1, (8, size, size, 3)).astype(np.float32))
    return model


def freeze(model, size):
    """(GraphDef, input name, output name) of a Keras model of size x size x 3
    images, frozen with convert_variables_to_constants_v2 (inference mode)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tensorflow.python.framework import (  # pylint: disable=import-outside-toplevel
        convert_to_constants)
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, size, size, 3], tf.float32))
    frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def import_pair_saliency(directory):
    """saliency.tf1.guided_backprop from `directory`, without running the
    package's __init__ files (they import saliency.core, which needs
    scikit-image, for methods not measured here)."""
    import importlib  # pylint: disable=import-outside-toplevel
    root = pathlib.Path(directory) / "saliency"
    for name, path in (("saliency", root), ("saliency.core", root / "core"),
                       ("saliency.tf1", root / "tf1")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    return importlib.import_module("saliency.tf1.guided_backprop")


class PairGuidedBackprop:
    """PAIR's GuidedBackprop on a frozen graph, as its users run it: a Graph
    and Session holding the imported model (plus one variable: its Saver
    refuses a graph without any), the target logit as `y`."""

    def __init__(self, module, graph_def, input_name, output_name, target, ckpt):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        v1 = tf.compat.v1
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.import_graph_def(graph_def, name="")
            self.x = self.graph.get_tensor_by_name(input_name)
            y = self.graph.get_tensor_by_name(output_name)[0, int(target)]
            v1.Variable(0.0, name="pair_saver_needs_a_variable")
            self.session = v1.Session(graph=self.graph)
            self.session.run(v1.global_variables_initializer())
        start = time.perf_counter()
        self.method = module.GuidedBackprop(self.graph, self.session, y, self.x,
                                            tmp_ckpt_path=ckpt)
        self.construction_s = time.perf_counter() - start

    def __call__(self, x):
        import numpy as np  # pylint: disable=import-outside-toplevel
        return np.stack([self.method.GetMask(e, feed_dict={}) for e in x])


def _method_call(explainer, method, x, target):
    """A function computing `method`'s maps of x with `explainer`."""
    return lambda: explainer.attribute(method, x, target).maps


# A call of batch 1 takes tens of milliseconds, where the spread between
# calls is a tenth of that: the repetitions grow until the plain gradient's
# calls add up to MIN_SECONDS (at most MAX_REPEATS), so that short calls get
# a median of many.
MIN_SECONDS = 2.0
MAX_REPEATS = 40


def enough_repeats(repeats, seconds):
    """The repetitions to run: at least `repeats`, more where one call of the
    plain gradient (`seconds`) is short (see MIN_SECONDS)."""
    return max(repeats, min(MAX_REPEATS, math.ceil(MIN_SECONDS / max(seconds, 1e-9))))


def child(size, alpha, batch, repeats, saliency_dir=""):
    """The measurements of one batch size: a dict of medians and ratios."""
    import tempfile  # pylint: disable=import-outside-toplevel

    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    import bench_floors  # pylint: disable=import-outside-toplevel
    from bench_common import (  # pylint: disable=import-outside-toplevel
        median, rotations, timed)
    from graph_override import attribution  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.tf2.function import (  # pylint: disable=import-outside-toplevel
        FrozenFunction)

    graph_def, input_name, output_name = freeze(
        keras_application("MobileNetV2", size, alpha=alpha), size)
    x = np.random.RandomState(1).uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
    plain = FrozenFunction(graph_def, [input_name], [output_name])
    # One class for every example, the first one's top class: PAIR's
    # GuidedBackprop differentiates one fixed output tensor.
    top = int(plain(tf.constant(x[:1])).numpy().argmax())
    target = np.full(batch, top)
    onehot = tf.one_hot(target, 1000)

    def gradient(function=plain):
        t = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(t)
            scalars = tf.reduce_sum(function(t) * onehot, axis=1)
        return tape.gradient(scalars, t).numpy()

    def forward():
        return plain(tf.constant(x)).numpy()

    explainer = attribution.Explainer(graph_def, inputs=input_name, outputs=output_name)
    variants = {"plain gradient": gradient, "forward pass": forward}
    first_call, digests = {}, {}
    for method in METHODS:
        variants[method] = _method_call(explainer, method, x, target)
        start = time.perf_counter()
        maps = variants[method]()  # patches and builds the function
        first_call[method] = time.perf_counter() - start
        digests[method] = hashlib.sha256(np.ascontiguousarray(maps).tobytes()).hexdigest()
    for label, rules in bench_floors.FLOORS.items():
        floor = FrozenFunction(graph_def, [input_name], [output_name], rules=rules,
                               on_no_match="ignore")
        variants[label] = lambda floor=floor: gradient(floor)
    # The baseline computes what the methods build on: the library's own
    # plain gradient of the same targets (0 up to float rounding).
    check = explainer.attribute("saliency", x, target, abs=False).maps
    result = dict(tensorflow=tf.__version__, batch=batch, size=size, alpha=alpha,
                  first_call_s=first_call, maps_sha256=digests,
                  baseline_max_abs_diff=float(np.max(np.abs(gradient() - check))),
                  gradient_max_abs=float(np.max(np.abs(check))))
    if saliency_dir:
        module = import_pair_saliency(saliency_dir)
        with tempfile.TemporaryDirectory() as ckpt:
            pair = PairGuidedBackprop(module, graph_def, input_name, output_name, top,
                                      os.path.join(ckpt, "ckpt"))
        variants["PAIR saliency.tf1 GuidedBackprop"] = lambda: pair(x)
        result["pair_construction_s"] = pair.construction_s
        result["pair_max_abs_diff_to_plain_gradient"] = float(
            np.max(np.abs(pair(x) - gradient())))
    for fn in variants.values():
        fn()  # warm-up: tracing, allocation
    result["min_repeats"] = repeats
    repeats = result["repeats"] = enough_repeats(repeats, timed(gradient)[0])
    times = {label: [] for label in variants}
    for order in rotations(list(variants), repeats):
        for label in order:
            start = time.perf_counter()
            variants[label]()
            times[label].append(time.perf_counter() - start)
    base = times["plain gradient"]
    result["seconds"] = {label: median(t) for label, t in times.items()}
    result["ratio"] = {label: median(a / b for a, b in zip(t, base))
                       for label, t in times.items()}
    return result


def _run_child(args, log, allocator_env):
    env = {k: v for k, v in os.environ.items() if k not in ALLOCATOR_VARIABLES}
    env.update(allocator_env, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tools")] + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, __file__] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        log("bench_attribution failed: %s" % tail)
        return {"error": "tools/bench_attribution.py %s failed: %s"
                         % (" ".join(str(a) for a in args), tail)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _saliency_dir():
    """SALIENCY_DIR if it holds saliency/tf1, else ''."""
    if (pathlib.Path(SALIENCY_DIR) / "saliency" / "tf1").is_dir():
        return SALIENCY_DIR
    return ""


def bench_section(cfg, log):
    """The section's rows: one per batch size and allocator (a fresh process
    each)."""
    a = cfg["attribution"]
    saliency = _saliency_dir()
    rows = []
    for allocator, allocator_env in ALLOCATORS:
        for batch in a["batches"]:
            log("attribution: MobileNetV2 %dx%d alpha %g, batch %d, %s CPU allocator "
                "(own process)" % (a["size"], a["size"], a["alpha"], batch, allocator))
            row = _run_child([a["size"], a["alpha"], batch, a["repeats"]]
                             + ([saliency] if saliency else []), log, allocator_env)
            rows.append(dict(row, allocator=allocator))
    if not saliency:
        rows.append({"error": "PAIR's saliency.tf1 not measured: no saliency package at %s "
                              "(compat/reference_venv.sh installs it there; "
                              "BENCH_SALIENCY_DIR names another folder)" % SALIENCY_DIR})
    return rows


_ALLOCATOR_TITLES = {
    "default": "default CPU allocator",
    "BFC": "TF_CPU_ALLOCATOR_USE_BFC=true",
}


def _same_maps(rows):
    """A sentence on whether each batch's maps were the same bits under every
    allocator (the SHA-256 of each method's maps), or '' with one allocator."""
    by_batch = {}
    for r in rows:
        if "maps_sha256" in r:
            by_batch.setdefault(r["batch"], []).append(r["maps_sha256"])
    pairs = [d for d in by_batch.values() if len(d) > 1]
    if not pairs:
        return ""
    differ = sorted({m for d in pairs for m in d[0] if any(o.get(m) != d[0][m] for o in d[1:])})
    if differ:
        return "The maps of %s differ between the allocators." % ", ".join(differ)
    return ("Every method's maps were the same bits under both allocators (their "
            "SHA-256 compared, at each batch size).")


def render(rows):
    """The section's Markdown: what was measured, and a table per batch."""
    if not rows:
        return None
    errors = [r["error"] for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    out = []
    if rows:
        r0 = rows[0]
        out.append(
            "`tools/bench_attribution.py`: Keras MobileNetV2 (weights=None, %dx%dx3, "
            "alpha %g, 1000 logits) frozen with convert_variables_to_constants_v2; one "
            "fresh process per batch size; median seconds per batch of at least %d "
            "repetitions (more where one call is short: each table's heading says) in "
            "a rotating order, after a warm-up call; ratio to the plain gradient (the "
            "unpatched frozen function under a GradientTape), the median of the ratios "
            "within each repetition. Every example is explained for one class (the "
            "first example's top class), as PAIR's GuidedBackprop differentiates one "
            "output tensor. graph_override's methods run through one "
            "`attribution.Explainer` per process (`first call` includes patching and "
            "building the function); DeepLIFT's baseline is zeros, one reference row "
            "after the inputs. Each batch runs under TensorFlow's default CPU "
            "allocator (malloc: on Linux every large tensor is a fresh mmap whose pages "
            "fault in at each step) and under TF_CPU_ALLOCATOR_USE_BFC=true (its pooling "
            "allocator, which reuses them); each in processes of its own."
            % (r0["size"], r0["size"], r0["alpha"], r0.get("min_repeats", r0["repeats"])))
    for r in rows:
        out.append("")
        allocator = r.get("allocator")  # absent in rows measured before it was
        out.append("### Batch %d%s (TensorFlow %s, %d repetitions)" % (
            r["batch"], ", " + _ALLOCATOR_TITLES[allocator] if allocator else "",
            r["tensorflow"], r["repeats"]))
        out.append("")
        out.append("| variant | median s | ratio to the plain gradient | goal | first call s |")
        out.append("|---|---|---|---|---|")
        for label, seconds in r["seconds"].items():
            goal = GOALS.get(label)
            verdict = "—" if goal is None else "<= %.1f: %s" % (
                goal, "met" if r["ratio"][label] <= goal else "**not met**")
            first = r["first_call_s"].get(label)
            if label.startswith("PAIR") and "pair_construction_s" in r:
                first = r["pair_construction_s"]
            out.append("| %s | %.3f | **%.2f** | %s | %s |" % (
                label, seconds, r["ratio"][label], verdict,
                "—" if first is None else "%.2f" % first))
        if "pair_max_abs_diff_to_plain_gradient" in r:
            out.append("")
            out.append("PAIR's first-call column is its construction (importing the graph "
                       "again); its largest difference to the plain gradient: %.2g (it "
                       "overrides Relu, and MobileNetV2's activations are Relu6)."
                       % r["pair_max_abs_diff_to_plain_gradient"])
    same = _same_maps(rows)
    if same:
        out.append("")
        out.append(same)
    out.extend([""] + ["- %s" % e for e in errors] if errors else [])
    return "\n".join(out).strip("\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    argv = sys.argv[1:]
    print(json.dumps(child(int(argv[0]), float(argv[1]), int(argv[2]), int(argv[3]),
                           argv[4] if len(argv) > 4 else "")))
