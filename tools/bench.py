"""Benchmarks graph_override against the other ways of changing a gradient.

Sections (each a table in the report, each measured by its own module):
  1. training step of a binarized MLP with ste_sign from each family, against
     the same network with tanh (bench_training.py);
  2. graph construction of N straight-through sites: time, ops and entries
     added to TensorFlow's gradient registry (bench_construction.py);
  3. frozen-graph patching against protobuf's own parse + serialize
     (bench_frozen.py, run by bench_capabilities.py);
  4. source migration throughput (bench_migrate.py, run by
     bench_capabilities.py);
  5. command-line start: --help, --version, a usage error, migrate and a
     command that needs TensorFlow, against `python -c pass` and
     `python -c "import tensorflow"` (bench_cli.py);
  6. graph_override.keras's quantized layers: a training step against float
     layers and against larq's own (TensorFlow 2.15), peak memory against
     float layers (bench_keras.py); larq-zoo's QuickNet against the same
     model with float layers and against larq-zoo's own (bench_zoo.py);
  7. attribution maps (gradient x input, guided backprop, epsilon-LRP,
     DeepLIFT) of a frozen MobileNetV2 against its plain gradient, and PAIR's
     saliency.tf1 guided backprop beside them (bench_attribution.py);
  8. LRP composites on MobileNetV2 and ResNet50 against their plain gradient,
     beside the floor of a rule that keeps each layer's input (bench_lrp.py).
  9. the attribution fast mode against the user's own tf.function gradient
     of the same Keras model (MobileNetV2, ResNet50), and two workers of the
     scale-out engine (Ray) against one (bench_fast.py).

Timing: time.perf_counter (wall) and time.process_time (CPU, all threads)
around whole runs, several repetitions, medians; within a repetition the
alternatives run one after another in a rotating order, so machine noise hits
all of them alike, and a ratio is the median of the ratios within each
repetition. The report (bench_report.py) embeds its figures, so
`--only SECTION` re-runs one section and keeps the others; a hand-written
analysis after ANALYSIS_MARKER is kept across runs. The figure: bench_plot.py.

Usage:
  python tools/bench.py                          # full run (about 35 minutes):
                                                   #   docs/benchmarks.md + .png
  python tools/bench.py --quick --out /tmp/b.md  # small and fast (about a minute)
  python tools/bench.py --only training          # refresh one section
"""

import argparse
import importlib
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:  # the section modules beside this file
    sys.path.insert(0, _HERE)

# Only light modules here: `--help` answers before TensorFlow is imported
# (the sections and machine() import it when they run).
# pylint: disable=wrong-import-position
import bench_plot  # noqa: E402
from bench_common import ROOT, machine, write_file  # noqa: E402
from bench_report import (ANALYSIS_MARKER, SECTIONS, embed_data,  # noqa: E402,F401
                          embedded_data, kept_analysis, render)

FULL = dict(
    mlps=[("784-2048-2048-10, batch 256", (784, 2048, 2048, 10), 256),
          ("784-256-256-10, batch 32", (784, 256, 256, 10), 32)],
    train_repeats=15, train_steps=3,
    sites=[1000, 10000], build_repeats=3, build_grad_sites=1000,
    frozen_nodes=[10_000, 100_000, 1_000_000], frozen_repeats=3,
    migrate=[(20, 400), (80, 400)],
    cli_repeats=9,
    keras=dict(size=16, width=16, batch=64, repeats=15, steps=5, memory_repeats=5,
               deep=(6, 64, 128),
               zoo=dict(model="QuickNet", size=64, batch=16, repeats=9, steps=2)),
    attribution=dict(size=224, alpha=1.0, batches=[1, 32], repeats=5),
    lrp=dict(models=["MobileNetV2", "ResNet50"], size=224, batches=[1, 32], repeats=3),
    fast=dict(models=[("MobileNetV2", 224, 1.0), ("ResNet50", 224, 1.0)], batches=[1, 32],
              repeats=5, methods=["saliency", "gradient_input", "guided_backprop",
                                  "deconvnet", "eps_lrp", "deeplift", "grad_cam"],
              scale=dict(size=128, alpha=1.0, batch=8, batches=12, repeats=3)),
    scale=dict(size=96, alpha=0.35, batch=32, ns=[1000, 10000, 20000], repeats=5,
               rounds={10000: 3}),
)
QUICK = dict(
    mlps=[("784-128-128-10, batch 32", (784, 128, 128, 10), 32)],
    train_repeats=3, train_steps=2,
    sites=[50, 100], build_repeats=1, build_grad_sites=50,
    frozen_nodes=[2_000], frozen_repeats=1,
    migrate=[(3, 60)],
    cli_repeats=1,
    keras=dict(size=8, width=4, batch=16, repeats=2, steps=2, memory_repeats=1,
               deep=(2, 8, 8),
               zoo=dict(model="QuickNetSmall", size=32, batch=4, repeats=2, steps=1)),
    # One batch size: each (batch, allocator) is a process that builds and
    # traces the model for every method, the longest part of a quick run.
    attribution=dict(size=32, alpha=0.35, batches=[2], repeats=2),
    lrp=dict(models=["MobileNetV2"], size=32, batches=[2], repeats=1),
    # One small model and two methods; the two-worker run needs Ray and
    # starts processes: not in a quick run.
    fast=dict(models=[("MobileNetV2", 32, 0.35)], batches=[2], repeats=2,
              methods=["gradient_input", "deeplift"], scale=None),
    # Two small runs: the section's table and its memory sentence.
    scale=dict(size=32, alpha=0.35, batch=8, ns=[16, 48], repeats=1, rounds={48: 1}),
)

# Each section's runner, run(cfg, log), as (module beside this file, function):
# imported only when the section runs.
RUNNERS = dict(
    training=("bench_training", "bench_training"),
    construction=("bench_construction", "bench_construction"),
    frozen=("bench_capabilities", "bench_frozen"),
    migrate=("bench_capabilities", "bench_migrate"),
    cli=("bench_cli", "bench_section"),
    keras=("bench_keras", "bench_section"),
    attribution=("bench_attribution", "bench_section"),
    lrp=("bench_lrp", "bench_section"),
    fast=("bench_fast", "bench_section"),
    scale=("bench_scale", "bench_section"),
)


def run_section(section, cfg, log):
    """Imports the module of `section` and runs it: its figures."""
    module, function = RUNNERS[section]
    return getattr(importlib.import_module(module), function)(cfg, log)


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
    only = set(args.only or SECTIONS)
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
    for section in SECTIONS:
        if section in only:
            report[section] = run_section(section, cfg, log)
        else:  # kept from the earlier report, or absent
            report[section] = earlier.get(section, [] if section in (
                "training", "construction") else None)
    report["load_end"] = os.getloadavg()
    report["analysis"] = kept_analysis(out)
    # The figure first: the report links to it only if it was drawn.
    try:
        figure, no_figure = bench_plot.draw(report), None
    except ImportError as e:
        figure, no_figure = None, ("matplotlib is not installed (%s); `pip install "
                                   "-e .[scripts]` installs it" % e)
        log("no figure: %s" % no_figure)
    if figure is not None:
        write_file(png, figure)
    text = render(report, args.quick, png.name if figure is not None else None,
                  no_figure=no_figure)
    write_file(out, text.encode("utf-8"))
    print(text)
    log("wrote %s%s" % (out, "" if figure is None else " and %s" % png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
