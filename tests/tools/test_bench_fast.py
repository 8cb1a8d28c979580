"""tools/bench_fast.py (section 8 of tools/bench.py): the fast mode against
the user's own tf.function gradient, two scale-out workers against one. Its
report says what was measured against which goal; the --quick run times the
right computation. No timed assertion here."""

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_tool):
    return load_tool("bench_fast")


def _row(**extra):
    base = "Keras tf.function GradientTape gradient"
    row = dict(model="ResNet50", size=224, alpha=None, batch=1, repeats=5,
               tensorflow="2.21.0",
               seconds={base: 0.1, "gradient_input": 0.11, "deeplift": 0.25,
                        "exact plain gradient": 0.15},
               ratio={base: 1.0, "gradient_input": 1.1, "deeplift": 2.5,
                      "exact plain gradient": 1.5},
               first_call_s={base: 3.0, "gradient_input": 9.5, "deeplift": 12.25},
               differences={"gradient_input": dict(max_abs=0.002, relative=0.004, largest=0.5)},
               rss_mb={"model frozen": 900.4, "gradient_input": 1012.0, "deeplift": None},
               peak_rss_mb=1500.2)
    row.update(extra)
    return row


def test_render_shows_each_variant_its_ratio_goal_and_differences(bench):
    text = bench.render([_row(), dict(kind="scale", size=128, alpha=1.0, batch=8, batches=12,
                                      repeats=3, one_s=10.0, two_s=6.0, speedup=1.66),
                         {"error": "boom"}])
    lines = text.splitlines()
    assert "### ResNet50 224x224, batch 1 (TensorFlow 2.21.0, 5 repetitions)" in lines
    assert ("| Keras tf.function GradientTape gradient | 0.1000 | **1.00** | — | 3.00 |"
            in lines)
    assert "| gradient_input (fast) | 0.1100 | **1.10** | <= 1.2: met | 9.50 |" in lines
    assert "| deeplift (fast) | 0.2500 | **2.50** | <= 2.2: **not met** | 12.25 |" in lines
    assert "| exact plain gradient | 0.1500 | **1.50** | — | — |" in lines
    assert ("Resident memory (MB) once the model is frozen and after each method's first "
            "fast call: model frozen 900, gradient_input 1012, deeplift ?; the process's "
            "peak 1500 (exact maps included).") in lines
    assert ("Fast against exact maps: gradient_input 0.002 (0.004 of the largest |map|, "
            "0.5).") in lines
    assert "two workers' throughput **1.66x** one's (goal >= 1.7: **not met**)." in text
    assert lines[-1] == "- boom"


@pytest.mark.slow
def test_quick_section_compares_the_fast_mode_with_the_keras_gradient(quick_report,
                                                                      load_tool):
    status, out = quick_report
    assert status["returncode"] == 0, status["stderr"]
    text = out.read_text()
    section = text.split("## 9. Attribution fast mode and scale-out")[1].split("<!--")[0]
    quick = load_tool("bench").QUICK["fast"]
    assert "### MobileNetV2 32x32, alpha 0.35, batch 2 (TensorFlow " in section
    for method in quick["methods"]:
        assert section.count("| %s (fast) | " % method) == 1, method
    assert "| exact plain gradient, 2 calls of batch 1 | " in section
    assert "| fast plain gradient, 2 calls of batch 1 | " in section
    assert "two workers not measured in a --quick run" in section
    data = json.loads(text.split("<!-- bench-data ")[1].split(" -->")[0])
    row = data["fast"][0]
    assert row["ratio"]["Keras tf.function GradientTape gradient"] == 1.0
    assert set(row["first_call_s"]) == {"Keras tf.function GradientTape gradient",
                                        *quick["methods"]}
    assert list(row["rss_mb"]) == ["model frozen", *quick["methods"]]
    assert row["peak_rss_mb"] >= max(row["rss_mb"].values())
    assert ("| Keras tf.function GradientTape gradient of N + 1 rows (DeepLIFT's batch) | "
            in section)
