"""scripts/plot_estimators.py: it writes a PNG, and what it draws is the
library's estimators, equal to the numpy formulas of DESIGN.md."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from graph_override import estimators

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plot(load_script):
    return load_script("plot_estimators")


@pytest.fixture(scope="module")
def curves(plot):
    # 161 points: a step of 0.025, so 0, +-0.5, +-1 and +-2 are exact samples.
    return {c.name: c for c in plot.compute_curves(points=161)}


def numpy_forward(name, x, p):
    """The forward column of DESIGN.md's estimator table."""
    x = x.astype(np.float64)
    if name in ("ste_sign", "approx_sign", "swish_sign"):
        return np.where(x >= 0, 1.0, -1.0)
    if name == "ste_heaviside":
        return np.where(x > 0, 1.0, 0.0)
    if name == "ste_tern":
        return np.where(np.abs(x) >= p["threshold_value"], np.sign(x), 0.0)
    if name == "ste_round":
        return np.round(x)  # half to even, as tf.round
    if name == "ste_floor":
        return np.floor(x)
    if name == "dorefa_quantize":
        n = 2.0 ** p["k_bit"] - 1
        return np.round(np.clip(x, 0, 1) * n) / n
    return x


def numpy_gradient(name, x, dy, p):
    """The backward column of DESIGN.md's estimator table (dy -> dx)."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    if name in ("ste_sign", "ste_heaviside", "ste_tern"):
        return dy * (np.abs(x) <= p["clip_value"])
    if name == "approx_sign":
        return dy * np.maximum(0.0, 2 - 2 * np.abs(x))
    if name == "swish_sign":
        b = p["beta"]
        return dy * b * (2 - b * x * np.tanh(b * x / 2)) / (1 + np.cosh(b * x))
    if name in ("ste_round", "ste_floor"):
        return dy
    if name == "dorefa_quantize":
        return dy * ((0 <= x) & (x <= 1))
    if name == "flip_gradient":
        return -p["scale"] * dy
    if name == "scale_gradient":
        return p["scale"] * dy
    return np.clip(dy, p["clip_value_min"], p["clip_value_max"])


# Every estimator but the attribution rules (guided_relu, eps_lrp, ...), whose
# gradients read the op they differentiate.
DRAWN = [name for name, spec in estimators.ESTIMATORS.items() if spec.op_types is None]


def test_every_estimator_is_drawn(plot, curves):
    assert list(curves) == DRAWN
    assert set(plot.SETTINGS) == set(DRAWN)
    assert "eps_lrp" in estimators.ESTIMATORS and "eps_lrp" not in DRAWN


def test_grid_holds_zero_and_the_boundaries(curves):
    x = curves["ste_sign"].x
    assert x[0] == -2.0 and x[-1] == 2.0
    for v in (0.0, 0.5, -0.5, 1.0, -1.0):
        assert v in x


@pytest.mark.parametrize("name", DRAWN)
def test_curves_equal_the_numpy_formulas(curves, name):
    c = curves[name]
    dy = c.x if c.gradient_axis == "dy" else np.ones_like(c.x)
    # dorefa divides by n: one float32 rounding; everything else is exact.
    np.testing.assert_allclose(c.forward, numpy_forward(name, c.x, c.params),
                               rtol=1e-6, atol=0, err_msg=name)
    np.testing.assert_allclose(c.gradient, numpy_gradient(name, c.x, dy, c.params),
                               rtol=1e-5, atol=1e-6, err_msg=name)


def test_exact_zero_and_clip_boundaries(curves):
    x = curves["ste_sign"].x
    at = {v: int(np.flatnonzero(x == v)[0]) for v in (0.0, 1.0, -1.0)}
    assert curves["ste_sign"].forward[at[0.0]] == 1.0           # sign(0) is +1
    assert curves["ste_heaviside"].forward[at[0.0]] == 0.0
    assert curves["ste_tern"].forward[at[0.0]] == 0.0
    for name in ("ste_sign", "ste_heaviside", "ste_tern"):
        g = curves[name].gradient
        assert g[at[1.0]] == 1.0 and g[at[-1.0]] == 1.0, name  # inclusive
        assert g[at[1.0] + 1] == 0.0 and g[at[-1.0] - 1] == 0.0, name
    assert curves["approx_sign"].gradient[at[0.0]] == 2.0
    assert curves["swish_sign"].gradient[at[0.0]] == pytest.approx(5.0)
    assert curves["clip_gradient"].gradient[at[1.0]] == 0.5


def test_script_writes_a_png_atomically(plot, tmp_path):
    out = tmp_path / "plots" / "estimators.png"
    assert plot.main(["--out", str(out), "--points", "81"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(out.parent) == ["estimators.png"]  # no temporary left


def test_too_few_points_is_a_usage_error(plot, tmp_path):
    with pytest.raises(SystemExit) as info:
        plot.main(["--out", str(tmp_path / "e.png"), "--points", "3"])
    assert info.value.code == 2
    assert not (tmp_path / "e.png").exists()


def test_a_fresh_run_prints_only_its_own_line(tmp_path):
    """TensorFlow 2.21's native start-up lines (absl's "All log messages
    before absl::InitializeLog()", cudart_stub, oneDNN), which
    TF_CPP_MIN_LOG_LEVEL does not stop, stay off the script's output."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    out = tmp_path / "e.png"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_estimators.py"),
                           "--out", str(out), "--points", "81"], cwd=str(tmp_path),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout == "wrote %s (11 estimators)\n" % out
