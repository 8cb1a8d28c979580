"""tools/bench_scale.py (section 10 of tools/bench.py): the data-set run
against the single batch measured in the same minutes, the ratio to the best
and to the median single batch, the CPU ratio and the load beside them. No
timed assertion here."""

import pytest


@pytest.fixture(scope="module")
def bench(load_tool):
    return load_tool("bench_scale")


def _row(n, peak, partial=None):
    return dict(n=n, batch=32, size=96, alpha=0.35, shards=n // 1024 + 1, seconds=n * 0.005,
                ms_per_image=5.0, best_ms_per_image=4.0, ratio=1.25, median_ms_per_image=5.0,
                median_ratio=1.0, best_before_ms_per_image=4.0, best_after_ms_per_image=4.5,
                cpu_ms_per_image=4.2, best_cpu_ms_per_image=4.0, cpu_ratio=1.05,
                median_cpu_ratio=1.02, partial_rows=n % 32,
                partial_first_call_s=partial, load_start=[3.5, 3.0, 2.0],
                load_end=[1.25, 2.0, 2.0], rss_before_mb=800.0, peak_setup_mb=900.0,
                peak_mb=peak)


def test_render_gives_the_median_ratio_the_load_and_the_partial_batch_s_first_call(bench):
    text = bench.render([_row(1000, 1000.0, partial=0.75), _row(20000, 1050.0),
                         {"error": "boom"}])
    lines = text.splitlines()
    assert "| 1,000 | 1 | 5.0 | 5.00 | 4.00 | **1.250** | 4.20 | 4.00 | **1.050** | 800 | 1000 |" \
        in lines
    assert ("- N = 1,000: against the median single batch (5.00 ms / image) the ratio is "
            "**1.000** (CPU 1.020); best single batch before the run 4.00, after it 4.50 ms / "
            "image; load average at the run's start 3.50, at its end 1.25; the first call at "
            "the last batch's size (8 rows), made before the run: 0.75 s.") in lines
    assert any(line.startswith("- N = 20,000:") and line.endswith("at its end 1.25.")
               for line in lines)
    assert "Peak RSS from 1,000 to 20,000 images: x1.050 (goal <= 1.10: met)." in lines
    assert "made before and after the run" in text and "Not measured: boom" in lines
