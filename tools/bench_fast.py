"""Section 8 of tools/bench.py: the fast mode against the user's own
gradient, and the scale-out engine's two workers against one.

Fast mode: a Keras application (weights=None, batch normalization calibrated,
logits out; `bench_attribution.keras_application`) frozen once; the baseline
(ratio 1) is what a user writes for the same model and batch: the Keras
model's gradient under a GradientTape inside a `tf.function`, the target
logits summed. Beside it, every single-gradient method through one
`Explainer(mode="fast")`, the exact mode's plain gradient (saliency without
abs), and at batch N > 1 the exact and fast plain gradient as N calls of
batch 1 (what PAIR's loop does), and with DeepLIFT the Keras gradient of its
batch, the N inputs and one reference row: the floor of any DeepLIFT that
runs both in one pass. The process's resident memory is read once the model
is frozen and after each method's first fast call (the exact maps are
computed after those), and its peak at the end. Each (model, batch) runs in a fresh process,
the variants one after another in a rotating order; a ratio is the median
of the ratios within each repetition. In the batch-1 process each method's
fast maps are compared with its exact maps (largest absolute difference, and
that relative to the largest |map|): the figures the attribution guide
states.

Scale-out: `ExplainBatches` in Ray actors (what Ray Data's `map_batches`
actor pool runs), each actor a process with one intra-op thread, warm (model
loaded, function compiled): the seconds to explain K batches with one actor,
and with two actors taking half each, side by side in rotating order; the
ratio is the throughput of two over one. Ray comes from BENCH_RAY_PATH or
compat/.engine/ray-tfX.Y (compat/engine_venv.sh); without it the row says so.

Run alone: ``python tools/bench_fast.py fast MODEL SIZE ALPHA BATCH REPEATS
METHODS`` or ``python tools/bench_fast.py scale SIZE ALPHA BATCH BATCHES
REPEATS RAY_PATH`` print one JSON line.
"""

import json
import os
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOALS = {"deeplift": 2.2}  # every other method: 1.2
DEFAULT_GOAL = 1.2
SCALE_GOAL = 1.7
BASELINE = "Keras tf.function GradientTape gradient"
KERAS_REFERENCE_ROWS = BASELINE + " of N + 1 rows (DeepLIFT's batch)"


def _target_sum(y, onehot):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.reduce_sum(y * onehot, axis=1)


def fast_child(model_name, size, alpha, batch, repeats, methods):
    """One (model, batch): medians, ratios to the Keras gradient, first
    calls, and (batch 1) fast-versus-exact differences."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    import bench_attribution  # pylint: disable=import-outside-toplevel
    from bench_common import median, rotations  # pylint: disable=import-outside-toplevel
    from graph_override import attribution  # pylint: disable=import-outside-toplevel

    kwargs = {"alpha": alpha} if model_name == "MobileNetV2" else {}
    model = bench_attribution.keras_application(model_name, size, **kwargs)
    graph_def, input_name, output_name = bench_attribution.freeze(model, size)
    x = np.random.RandomState(1).uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
    top = int(np.argmax(model(x[:1], training=False)))
    target = np.full(batch, top)
    onehot = tf.one_hot(target, 1000)
    xt = tf.constant(x)

    @tf.function
    def keras_gradient(t, hot=onehot):
        with tf.GradientTape() as tape:
            tape.watch(t)
            scalars = _target_sum(model(t, training=False), hot)
        return tape.gradient(scalars, t)

    fast = attribution.Explainer(graph_def, inputs=input_name, outputs=output_name,
                                 mode="fast")
    exact = attribution.Explainer(graph_def, inputs=input_name, outputs=output_name)
    variants = {BASELINE: lambda: keras_gradient(xt).numpy()}
    first_call, differences, fast_maps = {}, {}, {}
    start = time.perf_counter()
    variants[BASELINE]()
    first_call[BASELINE] = time.perf_counter() - start
    memory = {"model frozen": _rss_mb()}
    for method in methods:
        options = {"abs": False} if method == "saliency" else {}
        call = (lambda m=method, o=options: fast.attribute(m, x, target, **o).maps)
        start = time.perf_counter()
        fast_maps[method] = call()
        first_call[method] = time.perf_counter() - start
        memory[method] = _rss_mb()
        variants[method] = call
    if "deeplift" in methods:  # its batch: the inputs and one reference row
        x_ref = tf.constant(np.concatenate([x, np.zeros_like(x[:1])]))
        onehot_ref = tf.one_hot(np.full(batch + 1, top), 1000)
        variants[KERAS_REFERENCE_ROWS] = lambda: keras_gradient(x_ref, onehot_ref).numpy()
    for method in methods if batch == 1 else ():  # after the fast calls' memory
        want = exact.attribute(method, x, target,
                               **({"abs": False} if method == "saliency" else {})).maps
        diff = float(np.max(np.abs(fast_maps[method] - want)))
        differences[method] = dict(max_abs=diff, largest=float(np.max(np.abs(want))),
                                   relative=diff / max(float(np.max(np.abs(want))), 1e-30))
    variants["exact plain gradient"] = lambda: exact.attribute(
        "saliency", x, target, abs=False).maps
    if batch > 1:
        for label, explainer in (("exact", exact), ("fast", fast)):
            variants["%s plain gradient, %d calls of batch 1" % (label, batch)] = (
                lambda e=explainer: [e.attribute("saliency", x[i:i + 1], target[i:i + 1],
                                                 abs=False).maps for i in range(batch)])
    for fn in variants.values():
        fn()  # warm-up
    times = {label: [] for label in variants}
    for order in rotations(list(variants), repeats):
        for label in order:
            start = time.perf_counter()
            variants[label]()
            times[label].append(time.perf_counter() - start)
    base = times[BASELINE]
    return dict(model=model_name, size=size, alpha=alpha if model_name == "MobileNetV2"
                else None, batch=batch, repeats=repeats, tensorflow=tf.__version__,
                seconds={k: median(v) for k, v in times.items()},
                ratio={k: median(a / b for a, b in zip(v, base)) for k, v in times.items()},
                first_call_s=first_call, differences=differences, rss_mb=memory,
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _rss_mb():
    """The process's resident memory now, in MB (Linux; None elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) / 1024 for line in status
                        if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None


def scale_child(size, alpha, batch, count, repeats, ray_path):
    """Two warm Ray actors against one: seconds for `count` batches."""
    sys.path.append(ray_path)
    import numpy as np  # pylint: disable=import-outside-toplevel
    import ray  # pylint: disable=import-outside-toplevel

    import bench_attribution  # pylint: disable=import-outside-toplevel
    from bench_common import median, rotations  # pylint: disable=import-outside-toplevel
    from graph_override.attribution import scale_out  # pylint: disable=import-outside-toplevel

    model = bench_attribution.keras_application("MobileNetV2", size, alpha=alpha)
    graph_def, input_name, output_name = bench_attribution.freeze(model, size)
    data = [np.random.RandomState(k).uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
            for k in range(count)]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    worker = ray.remote(num_cpus=1)(scale_out.ExplainBatches)
    actors = [worker.remote(graph_def, "guided_backprop", inputs=input_name,
                            outputs=output_name, mode="fast", threads=1) for _ in range(2)]
    refs = [ray.put({"x": d}) for d in data]
    ray.get([a.__call__.remote(refs[0]) for a in actors])  # warm: model, function

    def run(n):
        start = time.perf_counter()
        ray.get([actors[k % n].__call__.remote(r) for k, r in enumerate(refs)])
        return time.perf_counter() - start

    times = {1: [], 2: []}
    for order in rotations([1, 2], repeats):
        for n in order:
            times[n].append(run(n))
    ray.shutdown()
    return dict(size=size, alpha=alpha, batch=batch, batches=count, repeats=repeats,
                one_s=median(times[1]), two_s=median(times[2]),
                speedup=median(a / b for a, b in zip(times[1], times[2])))


def _ray_path():
    """Where Ray is installed for this TensorFlow, or ''."""
    given = os.environ.get("BENCH_RAY_PATH")
    if given is not None:
        return given if pathlib.Path(given, "ray").is_dir() else ""
    try:
        import importlib.metadata as metadata  # pylint: disable=import-outside-toplevel
        version = ".".join(metadata.version("tensorflow").split(".")[:2])
    except Exception:  # pylint: disable=broad-except
        return ""
    path = ROOT / "compat" / ".engine" / ("ray-tf" + version)
    return str(path) if (path / "ray").is_dir() else ""


def _run_child(args, log, extra_path=""):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "tools")] + ([extra_path] if extra_path else [])
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, __file__] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        log("bench_fast failed: %s" % tail)
        return {"error": "tools/bench_fast.py %s failed: %s" % (
            " ".join(str(a) for a in args[:6]), tail)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_section(cfg, log):
    """The section's rows: one per model and batch, then the scale-out row."""
    f = cfg["fast"]
    rows = []
    for model, size, alpha in f["models"]:
        for batch in f["batches"]:
            log("fast mode: %s %dx%d, batch %d (own process)" % (model, size, size, batch))
            rows.append(_run_child(["fast", model, size, alpha, batch, f["repeats"],
                                    ",".join(f["methods"])], log))
    if f.get("scale"):
        s = f["scale"]
        ray_path = _ray_path()
        if not ray_path:
            rows.append({"error": "two workers not measured: Ray is not installed for "
                                  "this TensorFlow (compat/engine_venv.sh installs it; "
                                  "BENCH_RAY_PATH names another folder)"})
        else:
            log("scale-out: two Ray actors against one (own process)")
            row = _run_child(["scale", s["size"], s["alpha"], s["batch"], s["batches"],
                              s["repeats"], ray_path], log, ray_path)
            rows.append(dict(row, kind="scale") if "error" not in row else row)
    else:
        rows.append({"error": "two workers not measured in a --quick run"})
    return rows


def render(rows):
    """The section's Markdown."""
    if not rows:
        return None
    errors = [r["error"] for r in rows if "error" in r]
    fast = [r for r in rows if "error" not in r and r.get("kind") != "scale"]
    scale = [r for r in rows if r.get("kind") == "scale"]
    out = []
    if fast:
        out.append(
            "`tools/bench_fast.py`: Keras applications (weights=None, batch normalization "
            "calibrated, 1000 logits) frozen once; each method's maps through "
            "`Explainer(mode=\"fast\")` (forward and backward in one compiled function); "
            "ratio to the %s of the same model, batch and target (one class for every "
            "example), the median of the ratios within each repetition; one fresh "
            "process per model and batch. Goals: <= %.1f, DeepLIFT <= %.1f (its batch "
            "holds the reference row too)." % (BASELINE, DEFAULT_GOAL, GOALS["deeplift"]))
    for r in fast:
        out.append("")
        out.append("### %s %dx%d%s, batch %d%s (TensorFlow %s, %d repetitions)" % (
            r["model"], r["size"], r["size"], ", alpha %g" % r["alpha"] if r["alpha"] else "",
            r["batch"], ", TF_CPU_ALLOCATOR_USE_BFC=true" if r.get("allocator") == "BFC"
            else "", r["tensorflow"], r["repeats"]))
        out.append("")
        out.append("| variant | median s | ratio | goal | first call s |")
        out.append("|---|---|---|---|---|")
        for label, seconds in r["seconds"].items():
            method = label in r["first_call_s"] and label != BASELINE
            goal = GOALS.get(label, DEFAULT_GOAL) if method else None
            verdict = "—" if goal is None else "<= %.1f: %s" % (
                goal, "met" if r["ratio"][label] <= goal else "**not met**")
            first = r["first_call_s"].get(label)
            out.append("| %s | %.4f | **%.2f** | %s | %s |" % (
                label + (" (fast)" if method else ""), seconds, r["ratio"][label], verdict,
                "—" if first is None else "%.2f" % first))
        if r.get("rss_mb"):
            out.append("")
            out.append("Resident memory (MB) once the model is frozen and after each "
                       "method's first fast call: " + ", ".join(
                           "%s %s" % (k, "?" if v is None else "%.0f" % v)
                           for k, v in r["rss_mb"].items())
                       + "; the process's peak %.0f (exact maps included)." % r["peak_rss_mb"])
        if r.get("differences"):
            out.append("")
            out.append("Fast against exact maps: " + "; ".join(
                "%s %.2g (%.2g of the largest |map|, %.2g)" % (
                    m, d["max_abs"], d["relative"], d["largest"])
                for m, d in r["differences"].items()) + ".")
    for s in scale:
        out.append("")
        out.append("### Two Ray workers against one (MobileNetV2 %dx%d, alpha %g, batch %d)"
                   % (s["size"], s["size"], s["alpha"], s["batch"]))
        out.append("")
        out.append("Warm Ray actors (`ExplainBatches`, guided backprop, fast mode, one "
                   "intra-op thread each) explain %d batches: one actor %.2f s, two %.2f s "
                   "(median of %d side-by-side runs); two workers' throughput **%.2fx** "
                   "one's (goal >= %.1f: %s)." % (
                       s["batches"], s["one_s"], s["two_s"], s["repeats"], s["speedup"],
                       SCALE_GOAL, "met" if s["speedup"] >= SCALE_GOAL else "**not met**"))
    out.extend([""] + ["- %s" % e for e in errors] if errors else [])
    return "\n".join(out).strip("\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tools"))
    argv = sys.argv[1:]
    if argv[0] == "fast":
        print(json.dumps(fast_child(argv[1], int(argv[2]), float(argv[3]), int(argv[4]),
                                    int(argv[5]), argv[6].split(","))))
    else:
        print(json.dumps(scale_child(int(argv[1]), float(argv[2]), int(argv[3]),
                                     int(argv[4]), int(argv[5]), argv[6])))
