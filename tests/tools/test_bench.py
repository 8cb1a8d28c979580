"""tools/bench.py: runs end to end with --quick and writes its tables and
plot; what it times computes the right thing. No timed assertion here."""

import importlib
import json
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from graph_override import testing, tf2

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "bench.py"


@pytest.fixture(scope="module")
def bench(load_tool):
    return load_tool("bench")


@pytest.fixture(scope="module")
def sections(bench):  # pylint: disable=redefined-outer-name
    """The section modules beside bench.py, which puts their folder on
    sys.path (and imports them only when a section runs)."""
    return {name: importlib.import_module("bench_" + name) for name in (
        "training", "construction", "capabilities", "cli", "report", "common",
        "plot", "frozen", "convert")}


@pytest.fixture(scope="module")
def quick_run(quick_report):
    """tools/bench.py --quick, every section (tests/tools/conftest.py)."""
    return quick_report


@pytest.mark.slow
def test_quick_run_writes_its_tables_and_plot(quick_run):
    status, out = quick_run
    assert status["returncode"] == 0, status["stderr"]
    text = out.read_text()
    assert "## 1. Training step of a binarized MLP" in text
    assert "## 2. Graph construction of N straight-through sites" in text
    assert "| tanh (baseline), Session |" in text
    assert "| overrides.ste_sign (this toolkit) |" in text
    # The baseline's ratio to itself, and a number in every ratio cell.
    assert re.search(r"\| tanh \(baseline\), Session \| [0-9.]+ \| [0-9.]+ \| \*\*1\.00\*\* \|", text)
    assert "Initial loss identical across the ste_sign variants (same forward values in every family): yes." in text
    assert "## 5. Command-line start" in text
    assert re.search(r"\| graph-override --help \| [0-9.]+ \| [0-9.]+ \| \*\*[0-9.]+\*\* \| "
                     r"\*\*[0-9.]+\*\* \| 0 \| <= 0\.5 s: ", text)
    assert "| graph-override migrate --bad-option (usage error) |" in text
    assert "Machine: %d cores" % os.cpu_count() in text
    assert "TensorFlow %s" % tf.__version__ in text
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(out.parent)) == ["report.md", "report.png"]  # no temporaries


@pytest.mark.slow
def test_toolkit_adds_one_registry_entry_the_others_one_per_site(quick_run):
    _, out = quick_run
    text = out.read_text()
    section = text.split("### 100 sites")[1].split("##")[0]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")
            for line in section.splitlines() if line.startswith("| ") and "variant" not in line}
    def total(label):
        return int(rows[label][-1].strip(" |"))
    assert total("overrides.ste_sign (this toolkit)") <= 1
    assert total("stopgrad.ste_sign (this toolkit, no registry)") == 0
    assert total("tf2.ste_sign: tf.custom_gradient in graph mode") == 100
    assert total("DANN counter idiom: a RegisterGradient name per call") == 100


def test_dann_counter_idiom_is_the_same_estimator(sections):
    """The benchmark compares like with like: the counter idiom computes
    ste_sign's forward and gradient exactly."""
    x = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, np.nextafter(1.0, 2.0, dtype=np.float32), 3.0],
                 np.float32)
    got = testing.evaluate(sections["construction"].dann_counter_ste_sign, x, "graph")
    want = testing.evaluate(tf2.ste_sign, x, "eager")
    np.testing.assert_array_equal(got.outputs, [-1, -1, -1, 1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(got.outputs, want.outputs)
    np.testing.assert_array_equal(got.gradients[0], [0, 1, 1, 1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(got.gradients[0], want.gradients[0])


def test_every_session_variant_trains_the_same_network(sections):
    """Same weights, same data: every ste_sign variant starts at the same loss,
    and that loss differs from tanh's (the activation is really replaced)."""
    sizes, batch = (20, 8, 8, 3), 4
    losses = {}
    bench = sections["training"]
    for label, act, how in bench.TRAIN_VARIANTS:
        step = (bench._SessionStep(act, sizes, batch) if how == "session"  # pylint: disable=protected-access
                else bench._EagerStep(act, sizes, batch, how == "function"))  # pylint: disable=protected-access
        losses[label] = step.first_loss
        step()  # one training step runs
        step.close()
    ste = [v for k, v in losses.items() if "ste_sign" in k]
    tanh = [v for k, v in losses.items() if k.startswith("tanh")]
    np.testing.assert_allclose(ste, ste[0], rtol=1e-6)
    np.testing.assert_allclose(tanh, tanh[0], rtol=1e-6)
    assert abs(ste[0] - tanh[0]) > 1e-4


def test_rerun_keeps_the_hand_written_analysis(sections, tmp_path):
    bench = sections["report"]
    out = tmp_path / "b.md"
    out.write_text("# old tables\n\n%s\nWhy stopgrad costs more.\n" % bench.ANALYSIS_MARKER)
    kept = bench.kept_analysis(out)
    assert kept.startswith(bench.ANALYSIS_MARKER) and "Why stopgrad costs more." in kept
    assert bench.kept_analysis(tmp_path / "missing.md") == ""


def test_tables_of_other_benchmark_modules(sections):
    bench = sections["report"]
    table = bench._generic_table([{"nodes": 10, "seconds": 0.5},  # pylint: disable=protected-access
                                  {"nodes": 100, "seconds": 2.25, "peak": "1|2"}])
    assert table.splitlines()[0] == "| nodes | seconds | peak |"
    assert table.splitlines()[3] == "| 100 | 2.25 | 1/2 |"



def test_frozen_table_names_every_figure_and_keeps_errors(sections):
    bench = sections["report"]
    row = {"nodes": 10000, "bytes": 750000, "protobuf_parse_serialize_s": 0.01,
           "protobuf_with_file_io_s": 0.012, "load_s": 0.01, "patch_s": 0.015,
           "save_s": 0.01, "load_patch_save_s": 0.035, "ratio": 3.5,
           "ratio_with_file_io": 2.9, "patch_ratio": 1.5, "nodes_changed": 2000,
           "patch_file_s": 0.02, "patch_file_ratio": 2.0, "patch_file_ratio_with_file_io": 1.7,
           "patch_file_python_ratio": 3.1,
           "memory_ratio": 2.25, "patch_file_memory_ratio": None,
           "peak_rss_mb": 700.0, "rss_after_imports_mb": 650.0, "python_peak_mb": 4.2}
    lines = bench._frozen_table([row]).splitlines()  # pylint: disable=protected-access
    assert lines[0].startswith("| nodes | MB | protobuf parse+serialize s | load+patch+save s | ratio |")
    assert lines[2].startswith("| 10,000 | 0.8 | 0.010 | 0.035 | **3.50** | 2.90 | 0.020 "
                               "| **2.00** | 1.70 | 3.10 | 2.25 | - |")
    assert lines[2].endswith("| 2,000 | 700 | 650 | 4.2 |")
    failed = bench._frozen_table([{"error": "tools/bench_frozen.py failed: boom"}])  # pylint: disable=protected-access
    assert "failed: boom" in failed


def test_embedded_figures_round_trip(bench, sections, tmp_path):
    """--only re-runs one section and takes the others from the report."""
    report = {"training": [{"title": "t", "rows": []}], "construction": [],
              "frozen": [{"error": "a -- b"}], "migrate": None, "cli": None,
              "keras": [{"error": "x"}], "attribution": None, "lrp": None, "fast": None, "scale": None,
              "config": {"train_repeats": 1},
              "machine": {"nproc": 2},
              "dates": {"training": "2026-01-01 00:00 UTC"}}
    path = tmp_path / "b.md"
    path.write_text("# tables\n\n" + bench.embed_data(report) + "\n" + bench.ANALYSIS_MARKER + "\n")
    assert "a -- b" not in path.read_text()  # '--' would end the HTML comment
    assert bench.embedded_data(path) == report
    assert bench.embedded_data(tmp_path / "missing.md") == {}
    assert sections["report"].embedded_data is bench.embedded_data
    assert "keras" in bench.SECTIONS and set(bench.SECTIONS) == set(bench.RUNNERS)


def test_cli_benchmark_times_real_work(sections, tmp_path, capsys):
    """The timed migrate converts and reports sites of a 400-line file, and
    the baselines come first, in the order the ratios use."""
    from graph_override import cli  # pylint: disable=import-outside-toplevel
    bench_cli = sections["cli"]
    path = bench_cli.legacy_file(tmp_path)
    assert len(path.read_text().splitlines()) >= 400
    assert cli.main(["migrate", "-q", str(path)]) in (0, 1)
    out, err = capsys.readouterr()
    assert out.count("+") > 20 and "op_with_gradient" in out
    assert "1 file(s) read, 1 would be migrated" in err
    labels = [label for label, _ in bench_cli.commands(tmp_path)]
    assert labels[:2] == ["python -c pass", 'python -c "import tensorflow"']
    assert set(bench_cli.GOALS) <= set(labels)


def test_cli_section_shows_both_ratios_and_the_goals(sections):
    rows = [dict(command="python -c pass", seconds=0.1, spread=0.01, ratio_python=1.0,
                 ratio_tensorflow=0.02, exit_status=0, goal=None, repeats=3),
            dict(command="graph-override --help", seconds=0.3, spread=0.05,
                 ratio_python=3.0, ratio_tensorflow=0.06, exit_status=0, goal=0.5,
                 repeats=3),
            dict(command="graph-override migrate legacy.py (400 lines)", seconds=1.6,
                 spread=0.2, ratio_python=16.0, ratio_tensorflow=0.3, exit_status=1,
                 goal=1.5, repeats=3)]
    text = sections["report"]._cli_section(rows)  # pylint: disable=protected-access
    lines = text.splitlines()
    assert "median of 3 repetitions" in text
    assert lines[2] == ("| command | median s | spread s | ratio to python -c pass | "
                        "ratio to import tensorflow | exit status | goal |")
    assert lines[5] == "| graph-override --help | 0.300 | 0.050 | **3.00** | **0.060** | 0 | <= 0.5 s: met |"
    assert lines[6].endswith("| 1 | <= 1.5 s: **not met** |")


@pytest.mark.slow
def test_quick_lrp_section_compares_composites_with_the_gradient_and_the_floor(quick_report):
    """--quick, section 8: a table per model and batch, a row per composite
    and the floor; every composite's maps explain the target (finite sums)."""
    status, out = quick_report
    assert status["returncode"] == 0, status["stderr"]
    text = out.read_text()
    section = text.split("## 8. LRP composites")[1].split("<!--")[0]
    assert "### MobileNetV2, batch 2 (TensorFlow " in section
    for row in ("| plain gradient | ", "| lrp epsilon | ", "| lrp epsilon_plus_flat | ",
                "| floor: layer input kept (dx * x) | "):
        assert section.count(row) == 1, row
    data = json.loads(text.split("<!-- bench-data ")[1].split(" -->")[0])
    (row,) = data["lrp"]
    assert row["ratio"]["plain gradient"] == 1.0
    assert all(np.isfinite(v) for v in row["relative_sum_gap"].values())


def test_benchmark_modules_stay_small():
    for path in sorted((ROOT / "tools").glob("bench*.py")):
        assert len(path.read_text().splitlines()) < 400, path.name


# ---------------------------------------------------------------------------
# Running to the end in any environment, and telling only the truth.

CLI_ROWS = [dict(command="python -c pass", seconds=0.1, spread=0.01, ratio_python=1.0,
                 ratio_tensorflow=0.02, exit_status=0, goal=None, repeats=1)]


@pytest.fixture
def cli_only(bench, monkeypatch, tmp_path):
    """bench.main(--only cli) into a new file, the section's figures canned
    (nothing is timed): (status, report text, png path)."""
    ran = []

    def run_section(section, cfg, log):
        ran.append(section)
        return CLI_ROWS

    monkeypatch.setattr(bench, "run_section", run_section)

    def run():
        out = tmp_path / "new" / "report.md"
        status = bench.main(["--quick", "--only", "cli", "--out", str(out)])
        assert ran == ["cli"]
        return status, out.read_text(), out.with_suffix(".png")
    return run


def test_only_into_a_new_file_writes_no_false_text(cli_only, capsys):
    status, text, png = cli_only()
    capsys.readouterr()
    assert status == 0
    assert "not in this tree yet" not in text and "None" not in text
    assert ("Not measured in this report: training, construction, frozen, migrate, keras, "
            "attribution, lrp, fast, scale." in text)
    for section in ("training", "construction", "frozen", "migrate", "keras", "attribution",
                    "lrp", "fast", "scale"):
        assert "Run `python tools/bench.py --only %s` to measure it." % section in text
    assert "| python -c pass | 0.100 |" in text
    # The figure is drawn (each missing panel says "not measured") and linked.
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![benchmarks](report.png)" in text
    assert sorted(os.listdir(png.parent)) == ["report.md", "report.png"]


def test_without_matplotlib_the_report_is_written_without_a_figure(cli_only, monkeypatch,
                                                                   capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    status, text, png = cli_only()
    out = capsys.readouterr().out
    assert status == 0
    assert not png.exists()
    assert "![benchmarks]" not in text
    assert ("No figure was drawn: matplotlib is not installed (import of matplotlib "
            "halted; None in sys.modules); `pip install -e .[scripts]` installs it.") in text
    assert "no figure: matplotlib is not installed" in out


@pytest.mark.slow
def test_quick_run_without_matplotlib_exits_0_without_a_traceback(tmp_path):
    out = tmp_path / "report.md"
    code = ("import runpy, sys\n"
            "sys.modules['matplotlib'] = None\n"
            "sys.argv = ['bench.py', '--quick', '--only', 'cli', '--out', %r]\n"
            "runpy.run_path(%r, run_name='__main__')\n" % (str(out), str(SCRIPT)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "No figure was drawn: matplotlib is not installed" in out.read_text()
    assert ("Not measured in this report: training, construction, frozen, migrate, keras, "
            "attribution, lrp, fast, scale." in out.read_text())
    assert not out.with_suffix(".png").exists()


def test_help_answers_without_importing_tensorflow():
    code = ("import runpy, sys\n"
            "sys.argv = ['bench.py', '--help']\n"
            "try:\n"
            "    runpy.run_path(%r, run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    status = e.code\n"
            "heavy = sorted(m for m in ('tensorflow', 'keras', 'matplotlib') if m in sys.modules)\n"
            "print('heavy:', heavy)\n"
            "sys.exit(status)\n" % str(SCRIPT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("usage: bench.py")
    assert proc.stdout.rstrip().endswith("heavy: []")


def test_frozen_figures_are_medians_and_ratios_medians_of_ratios(sections, monkeypatch):
    bench_frozen = sections["frozen"]
    # Seconds each side "takes" in repetitions 1, 2, 3 (the work runs for real,
    # on a tiny graph; only the clock is scripted).
    scripted = {"protobuf_only": [1.0, 5.0, 2.0], "protobuf_with_file_io": [2.0, 2.0, 8.0],
                "protobuf_deterministic": [1.0, 1.0, 1.0], "ours": [4.0, 10.0, 6.0],
                "file_path": [3.0, 0.5, 4.0], "file_path_python": [9.0, 9.0, 1.0]}
    calls = {k: iter(v) for k, v in scripted.items()}

    def seconds(fn):
        fn()
        return next(calls[fn.__name__])

    monkeypatch.setattr(bench_frozen, "_seconds", seconds)
    monkeypatch.setattr(bench_frozen, "_child_peak_mb", lambda *a: 1.0)
    r = bench_frozen.run(nodes=50, repeats=3)
    assert r["repeats"] == 3
    assert r["protobuf_parse_serialize_s"] == 2.0      # best of 3 would be 1.0
    assert r["load_patch_save_s"] == 6.0               # best of 3 would be 4.0
    assert r["patch_file_s"] == 3.0 and r["patch_file_python_s"] == 9.0
    assert r["ratio"] == 3.0                           # median of 4, 2, 3
    assert r["ratio_with_file_io"] == 2.0              # median of 2, 5, 0.75
    assert r["patch_file_ratio"] == 2.0                # median of 3, 0.1, 2
    assert r["nodes_changed"] > 0


def test_frozen_report_text_says_median(sections):
    row = dict(nodes=10, repeats=5, error="x")
    report = {"machine": dict(date="d", nproc=2, cpu="c", platform="p", python="3",
                              tensorflow="2", numpy="1", protobuf="4", graph_override="0",
                              load=(0, 0, 0)),
              "config": dict(frozen_repeats=3, build_grad_sites=1, train_repeats=1,
                             train_steps=1),
              "training": [], "construction": [], "frozen": [row], "migrate": None,
              "cli": None, "dates": {}}
    text = sections["report"].render(report, False, "b.png")
    assert "Median of 5 runs, each running every side once in a rotating order" in text
    assert "Best of" not in text and "best of" not in text


def test_convert_figures_are_medians(sections, monkeypatch):
    bench_convert = sections["convert"]
    clock = iter([0.0, 1.0, 10.0, 15.0, 20.0, 22.0])   # calls of 1, 5 and 2 seconds
    made = []
    assert bench_convert.median_seconds(lambda: made.append(1), 3,
                                        clock=lambda: next(clock)) == 2.0
    assert len(made) == 3
    rounds = iter(range(18))                            # 3 rounds x 6 variants

    def per_step(run, steps):
        run()
        i = next(rounds)
        return [1.0, 5.0, 2.0][i // 6] * (i % 6 + 1)   # round r, variant v: f(r) * (v + 1)

    monkeypatch.setattr(bench_convert, "_per_step", per_step)
    times = bench_convert.step_times([4, 8, 3], 2, 1, 3)
    assert list(times) == ["session", "frozen eager", "frozen function",
                           "portable function", "tf2 eager", "tf2 function"]
    assert list(times.values()) == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]  # medians, not minima


@pytest.mark.slow
def test_quick_keras_section_compares_with_float_and_larq(quick_run):
    """--quick, section 6: its three comparisons, each with its ratio and
    goal; larq's row where TensorFlow 2.15's Python is known (this Python,
    when it has larq), else a row saying it was not measured."""
    status, out = quick_run
    assert status["returncode"] == 0, status["stderr"]
    section = out.read_text().split("## 6. Quantized Keras layers")[1].split("<!--")[0]
    cell = r"\| [0-9.]+ (ms|MB) \| [0-9.]+ (ms|MB) \| \*\*[0-9.]+\*\* \| <= [0-9.]+: "
    assert re.search(r"\| training step: QuantConv2D/QuantDense against float Conv2D/Dense "
                     r"\| %s \| 2 " % re.escape(tf.__version__) + cell, section)
    peak = r"\| peak memory \(VmHWM\) of a process that trains: these layers against "
    added = (r"\| memory training adds to the process \(VmHWM less RSS after imports\): "
             r"these layers against ")
    informative = r"\| [0-9.]+ MB \| [0-9.]+ MB \| \*\*[0-9.]+\*\* \| — \|"
    version = re.escape(tf.__version__)
    assert re.search(peak + r"float Conv2D/Dense \| %s \| 1 " % version + cell, section)
    assert re.search(added + r"float Conv2D/Dense \| %s \| 1 " % version + informative,
                     section)
    deep = r", 2 QuantConv2D of 8 channels at 32x32, batch 8: these layers against float Conv2D"
    assert re.search(r"\| peak of the tensors of a training step, TensorFlow's pooling "
                     r"allocator" + deep + r" \| %s \| 1 " % version + cell, section)
    for allocator in ("pooling", "default"):
        assert re.search(r"\| peak memory \(VmHWM\) of a process that trains, TensorFlow's "
                         + allocator + r" allocator" + deep + r" \| %s \| 1 " % version
                         + informative, section)
    if status["env"] == sys.executable:
        assert re.search(r"\| training step: these layers against larq 0.13.3's \| 2\.15\.[0-9]+ "
                         r"\| 2 " + cell, section)
        assert re.search(r"\| training step with Bop \(CaseOptimizer: Bop for the binary "
                         r"kernels, Adam for the rest\): these layers and optimizers against "
                         r"larq 0.13.3's \| 2\.15\.[0-9]+ \| 2 " + cell, section)
        assert re.search(peak + r"larq 0.13.3's layers \| 2\.15\.[0-9]+ \| 1 " + informative,
                         section)
        assert re.search(r"\| peak memory \(VmHWM\) of a process that trains: larq 0.13.3's "
                         r"layers against float Conv2D/Dense \| 2\.15\.[0-9]+ \| 1 "
                         + informative, section)
    else:
        assert "larq's layers not measured" in section


def test_quick_keras_section_times_quicknet_against_float_and_larq_zoo(quick_run):
    """--quick, section 6: larq-zoo's QuickNetSmall built by
    graph_override.keras.zoo, against the same model with float layers (goal
    1.1) and, where TensorFlow 2.15's Python is known, larq-zoo's own (goal 1.0)."""
    status, out = quick_run
    assert status["returncode"] == 0, status["stderr"]
    section = out.read_text().split("## 6. Quantized Keras layers")[1].split("<!--")[0]
    cell = r"\| [0-9.]+ ms \| [0-9.]+ ms \| \*\*[0-9.]+\*\* \| <= %s: "
    what = r"training step: QuickNetSmall at 32x32, batch 4 \(graph_override.keras.zoo\) "
    assert re.search(r"\| " + what + r"against the same model with float layers \| %s \| 2 "
                     % re.escape(tf.__version__) + cell % "1.10", section)
    if status["env"] == sys.executable:
        assert re.search(r"\| " + what + r"against larq-zoo 2.3.2's \| 2\.15\.[0-9]+ \| 2 "
                         + cell % "1.00", section)
    else:
        assert "larq-zoo's QuickNet not measured" in section


def test_keras_section_text_names_errors_and_goals(sections):
    rows = [dict(comparison="training step: a", ours=1.2, theirs=1.0, ratio=1.2, goal=1.15,
                 unit="ms", tensorflow="2.21.0", repeats=7),
            dict(comparison="peak memory: b", ours=400.0, theirs=410.0, ratio=0.98, goal=1.0,
                 unit="MB", tensorflow="2.21.0", repeats=2),
            dict(comparison="memory added: c", ours=12.0, theirs=10.0, ratio=1.2, goal=None,
                 unit="MB", tensorflow="2.21.0", repeats=5),
            {"error": "no TensorFlow 2.15 Python at x: larq's layers not measured"}]
    text = sections["report"]._keras_section(rows)  # pylint: disable=protected-access
    lines = text.splitlines()
    assert "| training step: a | 2.21.0 | 7 | 1.20 ms | 1.00 ms | **1.20** | <= 1.15: **not met** |" in lines
    assert "| peak memory: b | 2.21.0 | 2 | 400.00 MB | 410.00 MB | **0.98** | <= 1.00: met |" in lines
    assert "| memory added: c | 2.21.0 | 5 | 12.00 MB | 10.00 MB | **1.20** | — |" in lines
    assert lines[-1] == "- no TensorFlow 2.15 Python at x: larq's layers not measured"


@pytest.mark.slow
def test_quick_section_times_the_library_s_own_gradient(quick_report, load_tool):
    """--quick, section 7: a table per batch size; the baseline is the
    library's plain gradient (saliency without abs) to float rounding."""
    status, out = quick_report
    assert status["returncode"] == 0, status["stderr"]
    text = out.read_text()
    section = text.split("## 7. Attribution maps")[1].split("<!--")[0].split("## 8.")[0]
    batches = load_tool("bench").QUICK["attribution"]["batches"]
    tables = 2 * len(batches)  # a table per batch size and allocator
    for batch in batches:
        for allocator in ("default CPU allocator", "TF_CPU_ALLOCATOR_USE_BFC=true"):
            assert "### Batch %d, %s (TensorFlow " % (batch, allocator) in section
    for method in ("gradient_input", "guided_backprop", "eps_lrp", "deeplift",
                   "floor: dy * x (keeps x)", "floor: dy * x compiled (keeps x, new buffer)"):
        assert section.count("| %s | " % method) == tables, method
    assert "Every method's maps were the same bits under both allocators" in section
    assert "PAIR's saliency.tf1 not measured" in section
    data = json.loads(text.split("<!-- bench-data ")[1].split(" -->")[0])
    assert len([row for row in data["attribution"] if "error" not in row]) == tables
    for row in data["attribution"][:tables]:
        assert row["baseline_max_abs_diff"] <= 1e-5 * row["gradient_max_abs"]
        assert row["gradient_max_abs"] > 0


@pytest.mark.slow
def test_quick_scale_section_measures_throughput_and_peak_memory_per_n(quick_report,
                                                                        load_tool):
    """--quick, section 10: a row per N (a process each) with the ratio to the
    best single batch and the peak RSS, and the sentence on memory growth."""
    status, out = quick_report
    assert status["returncode"] == 0, status["stderr"]
    text = out.read_text()
    section = text.split("## 10. Explaining a data set")[1].split("<!--")[0]
    cfg = load_tool("bench").QUICK["scale"]
    for n in cfg["ns"]:
        assert re.search(r"\| %d \| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| \*\*[0-9.]+\*\* \| "
                         r"[0-9.]+ \| [0-9.]+ \| \*\*[0-9.]+\*\* \| [0-9]+ \| [0-9]+ \|" % n,
                         section), section
    assert re.search(r"Peak RSS from %d to %d images: x[0-9.]+ \(goal <= 1\.10: " % (
        min(cfg["ns"]), max(cfg["ns"])), section)
    data = json.loads(text.split("<!-- bench-data ")[1].split(" -->")[0])
    for row in data["scale"]:
        assert row["peak_mb"] >= row["rss_before_mb"] > 0 and row["ratio"] > 0
