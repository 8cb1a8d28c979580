"""tools/bench_attribution.py (section 7 of tools/bench.py): its report
says what was measured against which goal, PAIR's saliency is imported
without its package's heavy __init__ files, and a --quick run times the
right computation. No timed assertion here."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench(load_tool):
    return load_tool("bench_attribution")


def _row(**extra):
    row = dict(tensorflow="2.21.0", batch=32, size=224, alpha=1.0, repeats=5,
               first_call_s={"gradient_input": 9.5, "guided_backprop": 12.25},
               baseline_max_abs_diff=0.0, gradient_max_abs=3.0,
               seconds={"plain gradient": 2.0, "forward pass": 0.7,
                        "gradient_input": 2.2, "guided_backprop": 2.6},
               ratio={"plain gradient": 1.0, "forward pass": 0.35,
                      "gradient_input": 1.1, "guided_backprop": 1.3})
    row.update(extra)
    return row


def test_render_shows_each_variant_its_ratio_and_goal(bench):
    text = bench.render([_row()])
    lines = text.splitlines()
    assert "MobileNetV2 (weights=None, 224x224x3, alpha 1" in text
    assert "median seconds per batch of at least 5 repetitions" in text
    assert "### Batch 32 (TensorFlow 2.21.0, 5 repetitions)" in lines
    assert "| plain gradient | 2.000 | **1.00** | — | — |" in lines
    assert "| forward pass | 0.700 | **0.35** | — | — |" in lines
    assert "| gradient_input | 2.200 | **1.10** | <= 1.2: met | 9.50 |" in lines
    assert "| guided_backprop | 2.600 | **1.30** | <= 1.2: **not met** | 12.25 |" in lines


def test_render_shows_pair_and_keeps_errors(bench):
    row = _row(pair_construction_s=4.5, pair_max_abs_diff_to_plain_gradient=1e-6)
    row["seconds"]["PAIR saliency.tf1 GuidedBackprop"] = 3.0
    row["ratio"]["PAIR saliency.tf1 GuidedBackprop"] = 1.5
    text = bench.render([row, {"error": "PAIR's saliency.tf1 not measured: no package"}])
    assert "| PAIR saliency.tf1 GuidedBackprop | 3.000 | **1.50** | — | 4.50 |" in text
    assert "largest difference to the plain gradient: 1e-06" in text
    assert text.splitlines()[-1] == "- PAIR's saliency.tf1 not measured: no package"
    assert bench.render([]) is None
    assert bench.render([{"error": "boom"}]) == "- boom"


def test_short_calls_get_more_repetitions(bench):
    """At least the configured repetitions; more where one plain gradient is
    short, until MIN_SECONDS of them, at most MAX_REPEATS."""
    assert bench.MIN_SECONDS == 2.0 and bench.MAX_REPEATS == 40
    assert bench.enough_repeats(5, 1.5) == 5        # batch 32: 1.5 s a call
    assert bench.enough_repeats(5, 0.4) == 5        # exactly 2 s in 5 calls
    assert bench.enough_repeats(5, 0.39) == 6
    assert bench.enough_repeats(5, 0.066) == 31     # batch 1: 66 ms a call
    assert bench.enough_repeats(5, 0.001) == 40     # capped
    assert bench.enough_repeats(50, 0.001) == 50    # the configured floor wins
    assert bench.enough_repeats(5, 0.0) == 40


def test_goals_are_the_issue_s(bench):
    assert bench.GOALS == {"gradient_input": 1.2, "guided_backprop": 1.2, "eps_lrp": 1.2,
                           "deeplift": 2.2}
    assert set(bench.METHODS) == set(bench.GOALS)


def test_the_floor_rules_keep_the_input_and_multiply_by_it(load_tool, monkeypatch):
    """Both floors patch every activation epsilon-LRP covers with dy * x (the
    op's input), in place and compiled, through the MODULE:FUNCTION rules a
    user would write; on a Relu6 network the gradient of the sum is then x
    itself, beyond 6 and below 0 too, where Relu6's own gradient is 0."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from graph_override.estimators.attribution_ops import ACTIVATIONS
    from graph_override.frozen.tf2.function import FrozenFunction

    floors = load_tool("bench_floors")
    assert floors.ACTIVATIONS == ACTIVATIONS
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        tf.nn.relu6(x * 1.0, name="y")
    values = tf.constant([[-2.0, 0.0, 3.0, 7.5], [-0.0, 6.0, 1e-30, -1e30]])
    assert len(floors.FLOORS) == 2
    for function, rules in zip(("keep_input", "keep_input_compiled"), floors.FLOORS.values()):
        assert rules == ["%s=bench_floors:%s" % (op, function) for op in ACTIVATIONS]
        model = FrozenFunction(graph.as_graph_def(), ["x:0"], ["y:0"], rules=rules,
                               on_no_match="ignore")
        assert model.patch_report.changes
        with tf.GradientTape() as tape:
            tape.watch(values)
            total = tf.reduce_sum(model(values))
        np.testing.assert_array_equal(tape.gradient(total, values).numpy(), values.numpy())


def test_pair_is_imported_without_the_package_init_files(bench, tmp_path):
    """saliency/__init__.py imports saliency.core, whose Grad-CAM needs
    scikit-image; the benchmark needs saliency.tf1.guided_backprop only."""
    root = tmp_path / "saliency"
    for folder in (root, root / "core", root / "tf1"):
        folder.mkdir()
        (folder / "__init__.py").write_text("raise ImportError('needs scikit-image')\n")
    (root / "core" / "base.py").write_text("MARK = 'core'\n")
    (root / "tf1" / "guided_backprop.py").write_text(
        "from ..core.base import MARK\nclass GuidedBackprop:\n    pass\n")
    def saliency_modules():
        return [m for m in sys.modules if m == "saliency" or m.startswith("saliency.")]
    assert saliency_modules() == []   # nothing else in this process imported it
    try:
        module = bench.import_pair_saliency(str(tmp_path))
        assert module.MARK == "core" and hasattr(module, "GuidedBackprop")
    finally:
        for name in saliency_modules():
            del sys.modules[name]


def test_without_saliency_the_section_says_so(bench, monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "SALIENCY_DIR", str(tmp_path / "nowhere"))
    ran = []
    monkeypatch.setattr(bench, "_run_child",
                        lambda args, log, env: ran.append((args, env)) or _row())
    cfg = {"attribution": dict(size=32, alpha=0.35, batches=[1, 4], repeats=2)}
    rows = bench.bench_section(cfg, lambda message: None)
    bfc = {"TF_CPU_ALLOCATOR_USE_BFC": "true"}
    # every batch under each allocator; no saliency folder passed
    assert ran == [([32, 0.35, 1, 2], {}), ([32, 0.35, 4, 2], {}),
                   ([32, 0.35, 1, 2], bfc), ([32, 0.35, 4, 2], bfc)]
    assert [r["allocator"] for r in rows[:-1]] == ["default", "default", "BFC", "BFC"]
    assert "not measured: no saliency package at %s" % (tmp_path / "nowhere") in (
        rows[-1]["error"])


def test_the_default_allocator_s_child_does_not_inherit_a_bfc_setting(bench, monkeypatch):
    """A TF_CPU_ALLOCATOR_USE_BFC in the caller's environment would make the
    'default' rows measure the pooling allocator."""
    seen = []

    def run(argv, env, **kwargs):
        seen.append(env)
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(_row()) + "\n",
                                           stderr="")
    monkeypatch.setattr(bench.subprocess, "run", run)
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "true")
    monkeypatch.setenv("TF_CPU_BFC_MEM_LIMIT_IN_MB", "512")
    for _, env in bench.ALLOCATORS:
        assert bench._run_child([32, 0.35, 1, 2], lambda message: None, env)["batch"] == 32
    default, pooled = seen
    assert "TF_CPU_ALLOCATOR_USE_BFC" not in default
    assert "TF_CPU_BFC_MEM_LIMIT_IN_MB" not in default
    assert pooled["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert "TF_CPU_BFC_MEM_LIMIT_IN_MB" not in pooled
    assert default["TF_CPP_MIN_LOG_LEVEL"] == pooled["TF_CPP_MIN_LOG_LEVEL"] == "3"


def test_render_names_the_allocator_and_compares_the_maps(bench):
    same = {"gradient_input": "aa", "guided_backprop": "bb"}
    rows = [_row(allocator="default", maps_sha256=same),
            _row(allocator="BFC", maps_sha256=dict(same))]
    lines = bench.render(rows).splitlines()
    assert "### Batch 32, default CPU allocator (TensorFlow 2.21.0, 5 repetitions)" in lines
    assert "### Batch 32, TF_CPU_ALLOCATOR_USE_BFC=true (TensorFlow 2.21.0, 5 repetitions)" in (
        lines)
    assert lines[-1].startswith("Every method's maps were the same bits under both")
    rows[1]["maps_sha256"]["guided_backprop"] = "cc"
    assert bench.render(rows).splitlines()[-1] == (
        "The maps of guided_backprop differ between the allocators.")
    # one allocator (or rows from before the digests): no sentence
    assert "same bits" not in bench.render([_row(allocator="default", maps_sha256=same)])
    assert "same bits" not in bench.render([_row(), _row()])
