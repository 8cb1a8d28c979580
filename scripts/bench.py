"""Benchmarks graph_override against the other ways of changing a gradient.

Sections (each a table in the report):
  1. training step of a binarized MLP with ste_sign from each family, against
     the same network with tanh (a plain differentiable activation);
  2. graph construction of N straight-through sites: time, ops and entries
     added to TensorFlow's gradient registry;
  3. frozen-graph patching against protobuf's own parse + serialize
     (scripts/bench_frozen.py, when present);
  4. source migration throughput (scripts/bench_migrate.py, when present).

Timing: time.perf_counter (wall) and time.process_time (CPU, all threads)
around whole runs, several repetitions, medians; within a repetition the
alternatives run one after another in a rotating order, so machine noise hits
all of them alike, and a ratio is the median of the ratios within each
repetition. The report embeds its figures, so `--only SECTION` re-runs one
section and keeps the others; a hand-written analysis after ANALYSIS_MARKER
is kept across runs.

Usage:
  python scripts/bench.py                          # full run (about 15 minutes):
                                                   #   docs/benchmarks.md + .png
  python scripts/bench.py --quick --out /tmp/b.md  # small and fast (about a minute)
  python scripts/bench.py --only training          # refresh one section
"""

import argparse
import datetime
import importlib.util
import io
import itertools
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402  pylint: disable=wrong-import-position
import tensorflow as tf  # noqa: E402  pylint: disable=wrong-import-position

import graph_override as go  # noqa: E402  pylint: disable=wrong-import-position
from graph_override import overrides, stopgrad, tf2  # noqa: E402  pylint: disable=wrong-import-position
from graph_override._atomic import atomic_write  # noqa: E402  pylint: disable=wrong-import-position

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"

FULL = dict(
    mlps=[("784-2048-2048-10, batch 256", (784, 2048, 2048, 10), 256),
          ("784-256-256-10, batch 32", (784, 256, 256, 10), 32)],
    train_repeats=15, train_steps=3,
    sites=[1000, 10000], build_repeats=3, build_grad_sites=1000,
    frozen_nodes=[10_000, 100_000, 1_000_000], frozen_repeats=3,
    migrate=[(20, 400), (80, 400)],
)
QUICK = dict(
    mlps=[("784-128-128-10, batch 32", (784, 128, 128, 10), 32)],
    train_repeats=3, train_steps=2,
    sites=[50, 100], build_repeats=1, build_grad_sites=50,
    frozen_nodes=[2_000], frozen_repeats=1,
    migrate=[(3, 60)],
)


def median(values):
    """The median of an iterable of numbers."""
    return statistics.median(list(values))


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


# --- 1. training step -------------------------------------------------------------

def _init_weights(sizes, seed=0):
    """Glorot-uniform weights, the same numbers for every variant."""
    rng = np.random.RandomState(seed)
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (a + b))
        out.append(rng.uniform(-limit, limit, (a, b)).astype(np.float32))
    return out


def _data(sizes, batch, seed=1):
    rng = np.random.RandomState(seed)
    x = rng.randn(batch, sizes[0]).astype(np.float32)
    y = rng.randint(0, sizes[-1], batch).astype(np.int32)
    return x, y


def _logits(x, weights, act):
    h = x
    for i, w in enumerate(weights):
        h = tf.matmul(h, w)
        if i < len(weights) - 1:
            h = act(h)
    return h


def _loss(logits, labels):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


LEARNING_RATE = 0.01

# (label, activation, how it runs)
TRAIN_VARIANTS = [
    ("tanh (baseline), Session", tf.tanh, "session"),
    ("overrides.ste_sign, Session", overrides.ste_sign, "session"),
    ("stopgrad.ste_sign, Session", stopgrad.ste_sign, "session"),
    ("tf2.ste_sign (tf.custom_gradient), Session", tf2.ste_sign, "session"),
    ("tf2.ste_sign, eager", tf2.ste_sign, "eager"),
    ("tf2.ste_sign, tf.function", tf2.ste_sign, "function"),
    ("tanh, eager", tf.tanh, "eager"),
    ("tanh, tf.function", tf.tanh, "function"),
]


class _SessionStep:
    def __init__(self, act, sizes, batch):
        x_np, y_np = _data(sizes, batch)
        self.graph = tf.Graph()
        with self.graph.as_default():
            weights = [tf.compat.v1.Variable(w, name="w%d" % i)
                       for i, w in enumerate(_init_weights(sizes))]
            x, y = tf.constant(x_np), tf.constant(y_np)
            before = len(self.graph.get_operations())
            self.loss = _loss(_logits(x, weights, act), y)
            self.forward_ops = len(self.graph.get_operations()) - before
            opt = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
            self.train = opt.minimize(self.loss, var_list=weights)
            self.ops = len(self.graph.get_operations())
            init = tf.compat.v1.global_variables_initializer()
        self.graph.finalize()
        self.sess = tf.compat.v1.Session(graph=self.graph)
        self.sess.run(init)
        self.first_loss = float(self.sess.run(self.loss))

    def __call__(self):
        self.sess.run(self.train)

    def close(self):
        self.sess.close()


class _EagerStep:
    def __init__(self, act, sizes, batch, compiled):
        x_np, y_np = _data(sizes, batch)
        self.x, self.y = tf.constant(x_np), tf.constant(y_np)
        self.weights = [tf.Variable(w) for w in _init_weights(sizes)]
        self.act = act
        self.optimizer = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
        self.first_loss = float(_loss(_logits(self.x, self.weights, act), self.y))
        self.step = tf.function(self._step) if compiled else self._step
        self.forward_ops = self.ops = None
        if compiled:
            graph = self.step.get_concrete_function().graph
            self.ops = len(graph.get_operations())

    def _step(self):
        with tf.GradientTape() as tape:
            loss = _loss(_logits(self.x, self.weights, self.act), self.y)
        grads = tape.gradient(loss, self.weights)
        # The Session's update op (ResourceApplyGradientDescent, in place), so
        # the comparison is of the gradients, not of two ways to apply them.
        self.optimizer.apply_gradients(zip(grads, self.weights))
        return loss

    def __call__(self):
        loss = self.step()
        loss.numpy()  # wait for the step to finish

    def close(self):
        pass


def bench_training(cfg, log):
    """Median seconds per training step of every variant, per MLP."""
    results = []
    for title, sizes, batch in cfg["mlps"]:
        log("training step: MLP %s" % title)
        steps = {}
        for label, act, how in TRAIN_VARIANTS:
            steps[label] = (_SessionStep(act, sizes, batch) if how == "session"
                            else _EagerStep(act, sizes, batch, how == "function"))
            for _ in range(2):  # warm up: first runs allocate and optimize
                steps[label]()
        times = {label: [] for label in steps}
        cpu = {label: [] for label in steps}
        labels = list(steps)
        n = cfg["train_steps"]
        for rep in range(cfg["train_repeats"]):
            order = labels[rep % len(labels):] + labels[:rep % len(labels)]
            for label in order:
                step = steps[label]
                cpu0 = time.process_time()
                seconds, _ = _timed(lambda s=step: [s() for _ in range(n)])
                cpu[label].append((time.process_time() - cpu0) / n)
                times[label].append(seconds / n)
        # Ratios: the median over repetitions of the ratio within each one
        # (the variants of one repetition ran seconds apart, so slow drifts
        # of the machine's load cancel out).
        base, cpu_base = times[labels[0]], cpu[labels[0]]
        rows = []
        for label in labels:
            s = steps[label]
            rows.append(dict(variant=label, ms=1e3 * median(times[label]),
                             spread=1e3 * (max(times[label]) - min(times[label])),
                             ratio=median(a / b for a, b in zip(times[label], base)),
                             cpu_ms=1e3 * median(cpu[label]),
                             cpu_ratio=median(a / b for a, b in zip(cpu[label], cpu_base)),
                             ops=s.ops, forward_ops=s.forward_ops,
                             first_loss=s.first_loss))
            s.close()
        ste = [r["first_loss"] for r in rows if "ste_sign" in r["variant"]]
        results.append(dict(title=title, rows=rows,
                            same_loss=max(ste) - min(ste) <= 1e-5 * abs(ste[0])))
    return results


# --- 2. graph construction ---------------------------------------------------------

_dann_calls = itertools.count()


def dann_counter_ste_sign(x, clip_value=1.0):
    """ste_sign the way public DANN code builds its gradient reversal layer:
    a fresh tf.RegisterGradient name per call (``"FlipGradient%d" %
    num_calls``), so no call collides with an earlier one. Same forward ops
    as overrides.ste_sign."""
    grad_name = "bench.SignSTE%d" % next(_dann_calls)

    @tf.RegisterGradient(grad_name)
    def _sign_ste(op, grad):
        x = op.inputs[0]
        return [grad * tf.cast(tf.abs(x) <= clip_value, grad.dtype)]

    g = tf.compat.v1.get_default_graph()
    with g.gradient_override_map({"Sign": grad_name}):
        s = tf.sign(x)
    with g.gradient_override_map({"Sign": "Identity"}):
        return tf.sign(s + 0.1)


BUILD_VARIANTS = [
    ("tf.sign alone (no gradient change; the floor)", tf.sign),
    ("overrides.ste_sign (this toolkit)", overrides.ste_sign),
    ("stopgrad.ste_sign (this toolkit, no registry)", stopgrad.ste_sign),
    ("tf2.ste_sign: tf.custom_gradient in graph mode", tf2.ste_sign),
    ("DANN counter idiom: a RegisterGradient name per call", dann_counter_ste_sign),
]


def _build_once(fn, sites, with_gradients):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [16], name="x")
        entries = go.registry_size()
        ops = len(graph.get_operations())
        cpu = time.process_time()
        build, ys = _timed(lambda: [fn(x) for _ in range(sites)])
        cpu = time.process_time() - cpu
        entries = go.registry_size() - entries
        ops = len(graph.get_operations()) - ops
        grad = None
        if with_gradients:
            grad, _ = _timed(lambda: tf.gradients(tf.add_n(ys), x))
    return build, cpu, grad, entries, ops


def bench_construction(cfg, log):
    results = []
    for sites in cfg["sites"]:
        log("graph construction: %d sites" % sites)
        with_grad = sites <= cfg["build_grad_sites"]
        rec = {label: dict(build=[], cpu=[], grad=[], entries=[], ops=None)
               for label, _ in BUILD_VARIANTS}
        for _, fn in BUILD_VARIANTS:  # warm up: first calls import and cache
            _build_once(fn, 10, with_grad)
        for rep in range(cfg["build_repeats"]):
            k = rep % len(BUILD_VARIANTS)
            for label, fn in BUILD_VARIANTS[k:] + BUILD_VARIANTS[:k]:
                build, cpu, grad, entries, ops = _build_once(fn, sites, with_grad)
                r = rec[label]
                r["build"].append(build)
                r["cpu"].append(cpu)
                r["entries"].append(entries)
                r["ops"] = ops
                if grad is not None:
                    r["grad"].append(grad)
        floor = rec[BUILD_VARIANTS[0][0]]
        rows = []
        for label, _ in BUILD_VARIANTS:
            r = rec[label]
            rows.append(dict(
                variant=label, seconds=median(r["build"]),
                us_per_site=1e6 * median(r["build"]) / sites,
                cpu_us_per_site=1e6 * median(r["cpu"]) / sites,
                ratio=median(a / b for a, b in zip(r["build"], floor["build"])),
                cpu_ratio=median(a / b for a, b in zip(r["cpu"], floor["cpu"])),
                grad_seconds=median(r["grad"]) if r["grad"] else None,
                ops_per_site=r["ops"] / sites,
                entries_first=r["entries"][0], entries_total=sum(r["entries"])))
        results.append(dict(sites=sites, repeats=cfg["build_repeats"], rows=rows))
    return results


# --- 3. and 4.: the other developers' benchmark modules ---------------------------

def _load_script(name):
    path = SCRIPTS / (name + ".py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_other(name, calls, log):
    """Runs `name`.run(*args) for each args in `calls`; None if the module is
    absent; a one-row table naming the error if it fails (another
    developer's module must not stop this report)."""
    try:
        module = _load_script(name)
        if module is None:
            return None
        out = []
        for args in calls:
            log("%s.run%r" % (name, tuple(args)))
            out.append(module.run(*args))
        return out
    except Exception as e:  # pylint: disable=broad-except
        log("%s failed: %s: %s" % (name, type(e).__name__, e))
        return [{"error": "scripts/%s.py failed: %s: %s" % (name, type(e).__name__, e)}]


# The child reports peak RSS from /proc/self/status (VmHWM, the peak of its
# own address space): ru_maxrss survives exec, so a child started by this
# large process would report the parent's peak.
_FROZEN_CHILD = """
import importlib.util, json, sys
def hwm_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        return None
import tensorflow, graph_override.frozen
after_imports = hwm_mb()
spec = importlib.util.spec_from_file_location("bench_frozen", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
result = module.run(int(sys.argv[2]), int(sys.argv[3]))
if after_imports is not None:
    result["rss_after_imports_mb"] = after_imports
    result["peak_rss_mb"] = hwm_mb()
print(json.dumps(result))
"""


def bench_frozen(cfg, log):
    """scripts/bench_frozen.py's run(nodes, repeats), each size in a fresh
    process: peak memory (ru_maxrss) only grows, so it must not see the
    other sections' graphs."""
    path = SCRIPTS / "bench_frozen.py"
    if not path.exists():
        return None
    out = []
    for nodes in cfg["frozen_nodes"]:
        log("frozen-graph patching: %d nodes (own process)" % nodes)
        proc = subprocess.run(
            [sys.executable, "-c", _FROZEN_CHILD, str(path), str(nodes),
             str(cfg["frozen_repeats"])], capture_output=True, text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            out.append({"error": "scripts/bench_frozen.py failed at %d nodes: %s"
                                 % (nodes, tail[0])})
            log(out[-1]["error"])
            break
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def bench_migrate(cfg, log):
    return _run_other("bench_migrate", cfg["migrate"], log)


# --- the report --------------------------------------------------------------------

def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import google.protobuf  # pylint: disable=import-outside-toplevel
    return dict(nproc=os.cpu_count(), cpu=model, load=os.getloadavg(), python=platform.python_version(),
                tensorflow=tf.__version__, numpy=np.__version__,
                protobuf=google.protobuf.__version__, graph_override=go.__version__,
                platform=platform.platform(),
                date=datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M UTC"))


def _fmt(value, spec="%.2f"):
    return "—" if value is None else spec % value


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _generic_table(results):
    """A table of the dicts another benchmark module returned: one row each,
    columns the union of their keys (nested values shown as text)."""
    keys = []
    for r in results:
        for k in r:
            if k not in keys:
                keys.append(k)

    def cell(v):
        if isinstance(v, float):
            return "%.4g" % v
        return str(v).replace("|", "/")
    return _table(keys, [[cell(r.get(k, "")) for k in keys] for r in results])


_FROZEN_COLUMNS = [
    ("nodes", "nodes", "{:,}"), ("MB", "bytes", lambda v: "%.1f" % (v / 1e6)),
    ("protobuf parse+serialize s", "protobuf_parse_serialize_s", "{:.3f}"),
    ("load+patch+save s", "load_patch_save_s", "{:.3f}"),
    ("ratio", "ratio", "**{:.2f}**"),
    ("ratio incl. file I/O", "ratio_with_file_io", "{:.2f}"),
    ("load s", "load_s", "{:.3f}"), ("patch s", "patch_s", "{:.3f}"),
    ("save s", "save_s", "{:.3f}"), ("patch ratio", "patch_ratio", "{:.2f}"),
    ("nodes patched", "nodes_changed", "{:,}"),
    ("peak RSS MB", "peak_rss_mb", "{:.0f}"),
    ("RSS after imports MB", "rss_after_imports_mb", "{:.0f}"),
    ("Python peak MB", "python_peak_mb", "{:.1f}"),
]

_MIGRATE_COLUMNS = [
    ("files", "files", "{:,}"), ("lines", "lines", "{:,}"),
    ("seconds", "seconds", "{:.2f}"), ("lines / s", "lines_per_second", "**{:,.0f}**"),
    ("files / s", "files_per_second", "{:.1f}"),
    ("sites changed", "sites_changed", "{:,}"), ("sites left", "sites_left", "{:,}"),
    ("plain tree lines / s", "plain_lines_per_second", "{:,.0f}"),
]


def _known_table(columns, results):
    """The columns we know of another module's dicts; anything else (an
    error, renamed keys) as a generic table, so nothing is lost."""
    if any(any(key not in r for _, key, _ in columns) for r in results):
        return _generic_table(results)

    def cell(fmt, value):
        return fmt(value) if callable(fmt) else fmt.format(value)
    return _table([title for title, _, _ in columns],
                  [[cell(fmt, r[key]) for _, key, fmt in columns] for r in results])


def _frozen_table(results):
    return _known_table(_FROZEN_COLUMNS, results)


def _migrate_table(results):
    return _known_table(_MIGRATE_COLUMNS, results)


def render(report, quick, plot_name):
    m = report["machine"]
    out = io.StringIO()
    w = lambda s="": out.write(s + "\n")  # noqa: E731
    w("# Benchmarks")
    w()
    w("Measured by `python scripts/bench.py%s` on %s." % (" --quick" if quick else "", m["date"]))
    if quick:
        w("**A --quick run: small sizes, few repetitions; the numbers only show "
          "that the benchmark runs.**")
    w()
    w("Machine: %d cores (`nproc`), CPU `%s`, %s. Python %s, TensorFlow %s, numpy %s, "
      "protobuf %s, graph_override %s." % (
          m["nproc"], m["cpu"], m["platform"], m["python"], m["tensorflow"],
          m["numpy"], m["protobuf"], m["graph_override"]))
    w()
    dates = report.get("dates") or {}
    if len(set(dates.values())) > 1:
        w("Measured in more than one run (`--only` re-runs a section and keeps "
          "the others): %s." % "; ".join(
              "%s on %s" % (k, dates[k]) for k in SECTIONS if k in dates))
        w()
    w("Load average (1, 5, 15 min) when the run started: %.2f, %.2f, %.2f; "
      "at its end: %.2f, %.2f, %.2f (other processes share the cores)." % (
          tuple(m["load"]) + tuple(report.get("load_end", (0, 0, 0)))))
    w()
    w("Times are medians over repetitions; within each repetition the "
      "alternatives run one after another in a rotating order, so noise from "
      "other processes hits them alike. A ratio is the median over repetitions "
      "of the ratio within each repetition.")
    w()
    w("![benchmarks](%s)" % plot_name)
    w()
    w("## 1. Training step of a binarized MLP")
    w()
    w("Hidden activations are binarized with `ste_sign` (two sites); the "
      "baseline uses `tanh` in the same places. Plain SGD, softmax cross "
      "entropy, random data held in constants (no feeding). `ops`: operations "
      "in the whole training graph (forward, gradient, update); `fwd ops`: "
      "operations of the forward pass and loss. `CPU ms`: CPU time of this "
      "process (all its threads) per step, `time.process_time`; less "
      "sensitive than wall time to other processes on the cores.")
    for t in report["training"]:
        w()
        w("### MLP %s (%d repetitions x %d steps)" % (
            t["title"], report["config"]["train_repeats"], report["config"]["train_steps"]))
        w()
        w(_table(["variant", "ms / step (median)", "spread (max-min)",
                  "ratio to tanh Session", "CPU ms / step", "CPU ratio", "ops",
                  "fwd ops"],
                 [[r["variant"], "%.2f" % r["ms"], "%.2f" % r["spread"],
                   "**%.2f**" % r["ratio"], "%.2f" % r["cpu_ms"],
                   "%.2f" % r["cpu_ratio"], _fmt(r["ops"], "%d"),
                   _fmt(r["forward_ops"], "%d")] for r in t["rows"]]))
        w()
        w("Initial loss identical across the ste_sign variants (same forward "
          "values in every family): %s." % ("yes" if t["same_loss"] else "**no**"))
    w()
    w("## 2. Graph construction of N straight-through sites")
    w()
    w("Each site is `ste_sign(x)` on a 16-element placeholder, built in a fresh "
      "graph. `registry +`: names added to TensorFlow's gradient registry "
      "(`graph_override.registry_size()`) by the first build, and in total "
      "over all repetitions in this one process: entries are never removed. "
      "The overrides family registers one name per estimator setting, once per "
      "process (here already during section 1, hence 0). `tf.gradients s`: "
      "time to build the gradient of the sum of all sites (measured up to "
      "%d sites). `CPU`: `time.process_time`, the less noisy measure of this "
      "single-threaded Python work." % report["config"]["build_grad_sites"])
    for c in report["construction"]:
        w()
        w("### %d sites (%d repetition%s)" % (c["sites"], c["repeats"],
                                              "" if c["repeats"] == 1 else "s"))
        w()
        w(_table(["variant", "build s", "µs / site", "ratio to tf.sign",
                  "CPU µs / site", "CPU ratio", "tf.gradients s", "ops / site",
                  "registry + (first build)", "registry + (all builds)"],
                 [[r["variant"], "%.3f" % r["seconds"], "%.0f" % r["us_per_site"],
                   "**%.2f**" % r["ratio"], "%.0f" % r["cpu_us_per_site"],
                   "%.2f" % r["cpu_ratio"], _fmt(r["grad_seconds"], "%.3f"),
                   "%.0f" % r["ops_per_site"], r["entries_first"],
                   r["entries_total"]] for r in c["rows"]]))
    w()
    w("## 3. Frozen-graph patching")
    w()
    if report["frozen"] is None:
        w("Not measured: scripts/bench_frozen.py is not in this tree yet.")
    else:
        w("`scripts/bench_frozen.py`, each size in a fresh process: a synthetic "
          "frozen binarized network (one node in five a Sign); graph_override's "
          "`frozen.load` + `frozen.patch([\"Sign=ste_sign\"])` + `frozen.save` "
          "against protobuf's own `GraphDef.FromString` + `SerializeToString` "
          "of the same bytes. Best of %d runs. Peak RSS: the peak resident size of "
          "the benchmark's own process (`VmHWM`), TensorFlow imported; 'after "
          "imports' is that peak before the benchmark starts. Python peak: "
          "tracemalloc's peak of Python allocations during one load+patch+save."
          % report["config"]["frozen_repeats"])
        w()
        w(_frozen_table(report["frozen"]))
    w()
    w("## 4. Source migration throughput")
    w()
    if report["migrate"] is None:
        w("Not measured: scripts/bench_migrate.py is not in this tree yet.")
    else:
        w("`scripts/bench_migrate.py`: a generated tree of legacy files dense "
          "with override scopes and registrations (every block has a site to "
          "convert or report: the worst case), migrated in diff mode; and a tree "
          "of the same size without any (plain code, only parsed).")
        w()
        w(_migrate_table(report["migrate"]))
    w()
    w(embed_data(report).rstrip("\n"))
    w()
    analysis = report.get("analysis") or ANALYSIS_MARKER + "\n"
    out.write(analysis if analysis.endswith("\n") else analysis + "\n")
    return out.getvalue()


def _ok(results):
    return bool(results) and all("error" not in r for r in results)


def plot(report, path):
    """A 2x2 figure: training ratios, construction cost, frozen-graph
    patching, migration throughput (the last two where measured)."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    ax = axes[0][0]
    training = report["training"]
    labels = [r["variant"] for r in training[0]["rows"]]
    width = 0.8 / len(training)
    for i, t in enumerate(training):
        ys = np.arange(len(labels)) + i * width
        ax.barh(ys, [r["ratio"] for r in t["rows"]], height=width, label=t["title"])
        for y, r in zip(ys, t["rows"]):
            ax.text(r["ratio"], y, " %.2f" % r["ratio"], va="center", fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(np.arange(len(labels)) + width * (len(training) - 1) / 2)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("wall time per training step / tanh in a Session (median ratio)")
    ax.set_title("1. training step (lower is better)")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.12)

    ax = axes[0][1]
    cons = report["construction"]
    blabels = [r["variant"].split(" (")[0].split(":")[0] for r in cons[0]["rows"]]
    width = 0.8 / len(cons)
    for i, c in enumerate(cons):
        ys = np.arange(len(blabels)) + i * width
        ax.barh(ys, [r["cpu_us_per_site"] / 1e3 for r in c["rows"]], height=width,
                label="%d sites" % c["sites"])
        for y, r in zip(ys, c["rows"]):
            ax.text(r["cpu_us_per_site"] / 1e3, y,
                    "  +%d registry entries" % r["entries_first"],
                    va="center", fontsize=7)
    ax.set_yticks(np.arange(len(blabels)) + width * (len(cons) - 1) / 2)
    ax.set_yticklabels(blabels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("CPU ms per site to build")
    ax.set_title("2. graph construction (lower is better)")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.35)

    ax = axes[1][0]
    frozen = report["frozen"]
    if _ok(frozen):
        nodes = [r["nodes"] for r in frozen]
        ax.loglog(nodes, [r["protobuf_parse_serialize_s"] for r in frozen], "o-",
                  label="protobuf parse + serialize")
        ax.loglog(nodes, [r["load_patch_save_s"] for r in frozen], "s-",
                  label="graph_override load + patch + save")
        ax.loglog(nodes, [r["patch_s"] for r in frozen], "^--", label="patch() alone")
        for r in frozen:
            ax.annotate("%.0f MB peak RSS" % r["peak_rss_mb"],
                        (r["nodes"], r["load_patch_save_s"]),
                        textcoords="offset points", xytext=(-30, 8), fontsize=7)
        ax.set_xlabel("GraphDef nodes")
        ax.set_ylabel("seconds (best of %d)" % report["config"]["frozen_repeats"])
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
    ax.set_title("3. frozen-graph patching")

    ax = axes[1][1]
    migrate = report["migrate"]
    if _ok(migrate):
        names = ["%d files x %d lines" % (r["files"], r["lines"] // max(r["files"], 1))
                 for r in migrate]
        ys = np.arange(len(migrate))
        ax.barh(ys - 0.2, [r["lines_per_second"] for r in migrate], height=0.4,
                label="dense with override code")
        ax.barh(ys + 0.2, [r["plain_lines_per_second"] for r in migrate], height=0.4,
                label="plain code (parsed only)")
        ax.set_yticks(ys)
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("lines per second")
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
    ax.set_title("4. source migration throughput (higher is better)")
    fig.suptitle("graph_override benchmarks: %d cores, TensorFlow %s (%s)" % (
        report["machine"]["nproc"], report["machine"]["tensorflow"],
        report["machine"]["date"]))
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    _write_file(path, png.getvalue())
    plt.close(fig)


def _write_file(path, data):
    """Atomically writes bytes `data` to `path`, creating its folder."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(str(path), data)


ANALYSIS_MARKER = "<!-- analysis: written by hand, kept by scripts/bench.py -->"
DATA_MARKER = "<!-- bench-data "
SECTIONS = ("training", "construction", "frozen", "migrate")


def embed_data(report):
    """The report's figures as an HTML comment, so `--only SECTION` can
    re-run one section and keep the others' figures."""
    text = json.dumps({k: report.get(k) for k in SECTIONS + ("config", "machine", "dates")})
    return DATA_MARKER + text.replace("--", "-\\u002d") + " -->\n"


def embedded_data(path):
    """The figures embedded in an earlier report at `path`, or {}."""
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return {}
    at = text.find(DATA_MARKER)
    if at < 0:
        return {}
    end = text.find(" -->", at)
    try:
        return json.loads(text[at + len(DATA_MARKER):end])
    except ValueError:
        return {}


def kept_analysis(path):
    """The hand-written analysis at the end of an earlier report at `path`
    (from ANALYSIS_MARKER on), so a re-run refreshes the tables only."""
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return ""
    at = text.find(ANALYSIS_MARKER)
    return text[at:] if at >= 0 else ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repetitions (about a minute)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"),
                        help="report to write (default docs/benchmarks.md); the "
                             "plot goes beside it with the suffix .png")
    parser.add_argument("--only", action="append", choices=list(SECTIONS),
                        help="run only these sections (repeatable); the other "
                             "sections' figures are kept from the earlier report "
                             "at --out")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    only = set(args.only or ["training", "construction", "frozen", "migrate"])
    out = pathlib.Path(args.out)
    png = out.with_suffix(".png")

    def log(message):
        print("[bench %s] %s" % (time.strftime("%H:%M:%S"), message), flush=True)

    report = dict(machine=machine(), config=cfg)
    earlier = embedded_data(out) if args.only else {}
    old_dates = earlier.get("dates") or {
        k: (earlier.get("machine") or {}).get("date") for k in SECTIONS}
    report["dates"] = {k: report["machine"]["date"] if k in only else old_dates.get(k)
                       for k in SECTIONS}
    runners = dict(training=bench_training, construction=bench_construction,
                   frozen=bench_frozen, migrate=bench_migrate)
    for section in SECTIONS:
        if section in only:
            report[section] = runners[section](cfg, log)
        else:  # kept from the earlier report, or absent
            report[section] = earlier.get(section, [] if section in (
                "training", "construction") else None)
    report["load_end"] = os.getloadavg()
    report["analysis"] = kept_analysis(out)
    text = render(report, args.quick, png.name)
    _write_file(out, text.encode("utf-8"))
    if report["training"] and report["construction"]:
        plot(report, png)
    print(text)
    log("wrote %s and %s" % (out, png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
