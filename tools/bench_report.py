"""The report of tools/bench.py: docs/benchmarks.md's tables, and the
figures embedded in it so that `--only SECTION` re-runs one section and
keeps the others, and a hand-written analysis kept across runs."""

import io
import json
import pathlib

from bench_common import load_script

ANALYSIS_MARKER = "<!-- analysis: written by hand, kept by tools/bench.py -->"
DATA_MARKER = "<!-- bench-data "
SECTIONS = ("training", "construction", "frozen", "migrate", "cli", "keras", "attribution",
            "lrp", "fast", "scale")


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
    ("patch_file s", "patch_file_s", "{:.3f}"),
    ("patch_file ratio", "patch_file_ratio", "**{:.2f}**"),
    ("patch_file ratio incl. file I/O", "patch_file_ratio_with_file_io", "{:.2f}"),
    ("patch_file ratio without the C reader", "patch_file_python_ratio", "{:.2f}"),
    ("memory ratio", "memory_ratio", lambda v: "-" if v is None else "%.2f" % v),
    ("patch_file memory ratio", "patch_file_memory_ratio",
     lambda v: "-" if v is None else "%.2f" % v),
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


def _cli_section(rows):
    if any("error" in r for r in rows):
        return _generic_table(rows)
    text = ("`tools/bench_cli.py`: each command in a fresh Python process, as a "
            "user starts it (`python -m graph_override ...`), wall time of the whole "
            "process, median of %s repetitions in a rotating order. Ratios: to "
            "`python -c pass` (the interpreter alone) and to `python -c \"import "
            "tensorflow\"` (what every command cost when the command line imported "
            "TensorFlow before parsing its arguments). The migrated file is "
            "`tools/bench_migrate.py`'s dense legacy code, 400 lines." % rows[0]["repeats"])
    table = _table(
        ["command", "median s", "spread s", "ratio to python -c pass",
         "ratio to import tensorflow", "exit status", "goal"],
        [[r["command"], "%.3f" % r["seconds"], "%.3f" % r["spread"],
          "**%.2f**" % r["ratio_python"], "**%.3f**" % r["ratio_tensorflow"],
          r["exit_status"],
          "—" if r["goal"] is None else "<= %.1f s: %s" % (
              r["goal"], "met" if r["seconds"] <= r["goal"] else "**not met**")]
         for r in rows])
    return text + "\n\n" + table


def _keras_section(rows):
    if any("error" in r for r in rows):
        measured = [r for r in rows if "error" not in r]
        errors = "\n".join("- %s" % r["error"] for r in rows if "error" in r)
        return (_keras_section(measured) + "\n\n" if measured else "") + errors
    text = ("`tools/bench_keras.py`: one network (QuantConv2D x 2, max pool, "
            "QuantDense x 2, each with batch normalization; inputs and kernels binarized "
            "with `ste_sign`, `weight_clip`), trained with `model.train_on_batch` "
            "(compiled, after warm-up) with Adam. The training steps alternate in one "
            "process in a rotating order: the quantized network against the same one "
            "with float `Conv2D`/`Dense`, and, in TensorFlow 2.15's venv, these layers "
            "against larq 0.13.3's, and the same network trained with larq's Bop recipe "
            "(`CaseOptimizer` of `Bop` and Keras 2's legacy Adam; `tools/bench_bop.py`) "
            "with these layers and optimizers against larq's (median seconds per "
            "step). Peak memory: `VmHWM` of "
            "a fresh process that builds and trains each network (median over "
            "processes, those of a repetition in a rotating order), and what the "
            "training adds to it: `VmHWM` less the resident memory after the imports, "
            "which every side shares; under TensorFlow 2.15 larq's own layers are "
            "measured the same way. The QuickNet rows (`tools/bench_zoo.py`): larq-zoo's "
            "QuickNet built by `graph_override.keras.zoo`, trained the same way against "
            "the same model with float layers (same weights), and, in TensorFlow 2.15's "
            "venv, against larq-zoo 2.3.2's own. A ratio is ours to theirs, the median of "
            "the ratios within each repetition; lower is better.")
    table = _table(
        ["comparison", "TensorFlow", "repetitions", "ours", "theirs", "ratio", "goal"],
        [[r["comparison"], r["tensorflow"], r["repeats"], "%.2f %s" % (r["ours"], r["unit"]),
          "%.2f %s" % (r["theirs"], r["unit"]), "**%.2f**" % r["ratio"],
          "—" if r["goal"] is None else "<= %.2f: %s" % (
              r["goal"], "met" if r["ratio"] <= r["goal"] else "**not met**")]
         for r in rows])
    return text + "\n\n" + table


def _not_measured(section):
    return ("Not measured in this report: `--only` ran other sections, and the "
            "earlier report at this path held no figures of this one. Run "
            "`python tools/bench.py --only %s` to measure it." % section)


def _header(w, report, quick, plot_name, no_figure):
    """The title, machine, dates, load and method lines of the report."""
    m = report["machine"]
    w("# Benchmarks")
    w()
    w("Measured by `python tools/bench.py%s` on %s." % (" --quick" if quick else "", m["date"]))
    if quick:
        w("**A --quick run: small sizes, few repetitions; the numbers only show "
          "that the benchmark runs.**")
    w()
    w("Machine: %d cores (`nproc`), CPU `%s`, %s. Python %s, TensorFlow %s, numpy %s, "
      "protobuf %s, graph_override %s." % (
          m["nproc"], m["cpu"], m["platform"], m["python"], m["tensorflow"],
          m["numpy"], m["protobuf"], m["graph_override"]))
    w()
    dates = {k: d for k, d in (report.get("dates") or {}).items() if d}
    if len(set(dates.values())) > 1:
        w("Measured in more than one run (`--only` re-runs a section and keeps "
          "the others): %s." % "; ".join(
              "%s on %s" % (k, dates[k]) for k in SECTIONS if k in dates))
        w()
    missing = [k for k in SECTIONS if not report.get(k)]
    if missing:
        w("Not measured in this report: %s." % ", ".join(missing))
        w()
    w("Load average (1, 5, 15 min) when the run started: %.2f, %.2f, %.2f; "
      "at its end: %.2f, %.2f, %.2f (other processes share the cores)." % (
          tuple(m["load"]) + tuple(report.get("load_end", (0, 0, 0)))))
    w()
    w("Times are medians over repetitions, in every section; within each "
      "repetition the alternatives run one after another in a rotating order, "
      "so noise from other processes hits them alike. A ratio is the median "
      "over repetitions of the ratio within each repetition.")
    w()
    if plot_name is not None:
        w("![benchmarks](%s)" % plot_name)
    else:
        w("No figure was drawn: %s." % (no_figure or "none was asked for"))
    w()


# The sections a script of their own renders: (number, key, title, script).
_SCRIPT_SECTIONS = (
    (7, "attribution", "Attribution maps", "bench_attribution"),
    (8, "lrp", "LRP composites", "bench_lrp"),
    (9, "fast", "Attribution fast mode and scale-out", "bench_fast"),
    (10, "scale", "Explaining a data set", "bench_scale"),
)


def render(report, quick, plot_name, no_figure=None):
    """The report's Markdown. `plot_name`: the figure beside it, or None if
    none was drawn (`no_figure` says why)."""
    out = io.StringIO()
    w = lambda s="": out.write(s + "\n")  # noqa: E731
    _header(w, report, quick, plot_name, no_figure)
    w("## 1. Training step of a binarized MLP")
    w()
    w("Hidden activations are binarized with `ste_sign` (two sites); the "
      "baseline uses `tanh` in the same places. Plain SGD, softmax cross "
      "entropy, random data held in constants (no feeding). `ops`: operations "
      "in the whole training graph (forward, gradient, update); `fwd ops`: "
      "operations of the forward pass and loss. `CPU ms`: CPU time of this "
      "process (all its threads) per step, `time.process_time`; less "
      "sensitive than wall time to other processes on the cores.")
    if not report["training"]:
        w()
        w(_not_measured("training"))
    for t in report["training"]:
        w()
        w("### MLP %s (%d repetitions x %d steps)" % (
            t["title"], t.get("repeats", report["config"]["train_repeats"]),
            t.get("steps", report["config"]["train_steps"])))
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
    if not report["construction"]:
        w()
        w(_not_measured("construction"))
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
    if not report["frozen"]:
        w(_not_measured("frozen"))
    else:
        w("`tools/bench_frozen.py`, each size in a fresh process: a synthetic "
          "frozen binarized network (one node in five a Sign); graph_override's "
          "`frozen.load` + `frozen.patch([\"Sign=ste_sign\"])` + `frozen.save`, "
          "and `frozen.patch_file` (what `graph-override patch` runs: the same in "
          "one call, on the file's bytes), with the C reader and without it (as "
          "where pip had no C compiler), against protobuf's own "
          "`GraphDef.FromString` + `SerializeToString` of the same bytes. Median "
          "of %d runs, each running every side once in a rotating order; a ratio "
          "is the median of the ratios within each run. Peak RSS: the peak "
          "resident size of "
          "the benchmark's own process (`VmHWM`), TensorFlow imported; 'after "
          "imports' is that peak before the benchmark starts. Python peak: "
          "tracemalloc's peak of Python allocations during one load+patch+save."
          % report["frozen"][0].get("repeats", report["config"]["frozen_repeats"]))
        w()
        w(_frozen_table(report["frozen"]))
    w()
    w("## 4. Source migration throughput")
    w()
    if not report["migrate"]:
        w(_not_measured("migrate"))
    else:
        w("`tools/bench_migrate.py`: a generated tree of legacy files dense "
          "with override scopes and registrations (every block has a site to "
          "convert or report: the worst case), migrated in diff mode; and a tree "
          "of the same size without any (plain code, only parsed).")
        w()
        w(_migrate_table(report["migrate"]))
    w()
    w("## 5. Command-line start")
    w()
    if not report.get("cli"):
        w(_not_measured("cli"))
    else:
        w(_cli_section(report["cli"]))
    w()
    w("## 6. Quantized Keras layers")
    w()
    if not report.get("keras"):
        w(_not_measured("keras"))
    else:
        w(_keras_section(report["keras"]))
    w()
    for number, key, title, script in _SCRIPT_SECTIONS:
        w("## %d. %s" % (number, title))
        w()
        w(load_script(script).render(report[key]) if report.get(key) else _not_measured(key))
        w()
    w(embed_data(report).rstrip("\n"))
    w()
    analysis = report.get("analysis") or ANALYSIS_MARKER + "\n"
    out.write(analysis if analysis.endswith("\n") else analysis + "\n")
    return out.getvalue()


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


