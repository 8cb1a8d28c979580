"""`graph-override explain` sets the methods' options as the Python API
does (--epsilon, --rule, --no-abs, --seed, --samples, --stdev-spread,
--magnitude, --layer, --resize: the maps equal the API's with the same
keywords), and warns, as the API does, on maps that vanish. Options given
with a method that does not take them, and values out of range, are usage
errors found before TensorFlow is imported: test_cli_explain_usage.py."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen
from graph_override.commands import _explain_options

RNG = np.random.RandomState(3)
W1 = RNG.randn(3, 3, 2, 4).astype(np.float32)
W2 = RNG.randn(16, 3).astype(np.float32)
X = RNG.randn(3, 4, 4, 2).astype(np.float32)


def _graph_def(bias=0.0):
    """x [N, 4, 4, 2] -> Conv2D 3x3 -> Relu "act" (4x4x4) -> MaxPool "pool"
    (2x2x4) -> MatMul -> logits [N, 3]."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="x")
        a = tf.nn.relu(tf.nn.conv2d(x, tf.constant(W1), 1, "SAME") + bias, name="act")
        p = tf.nn.max_pool2d(a, 2, 2, "VALID", name="pool")
        tf.identity(tf.matmul(tf.reshape(p, [-1, 16]), tf.constant(W2)), name="logits")
    return g.as_graph_def()


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frozen.save(_graph_def(), "model.pb")
    frozen.save(_graph_def(bias=-100.0), "dead.pb")
    np.save("x.npy", X)
    return tmp_path


def _explain(capsys, method, *extra, model="model.pb", out="maps.npy"):
    code = cli.main(["explain", model, "--inputs", "x:0", "--outputs", "logits:0",
                     "--method", method, "--data", "x.npy", "--target", "1", "-o", out,
                     *extra])
    _, err = capsys.readouterr()
    assert code == 0, err
    return np.load(out), err


def _api(method, **options):
    return attribution.attribute("model.pb", method, X, 1, inputs="x:0", outputs="logits:0",
                                 **options).maps


@pytest.mark.parametrize("method, flags, options", [
    ("eps_lrp", ["--epsilon", "0.5"], {"epsilon": 0.5}),
    ("integrated_gradients", ["--steps", "3", "--rule", "riemann_left"],
     {"steps": 3, "rule": "riemann_left"}),
    ("saliency", ["--no-abs"], {"abs": False}),
    ("smoothgrad", ["--seed", "7", "--samples", "3", "--stdev-spread", "0.3"],
     {"seed": 7, "samples": 3, "stdev_spread": 0.3}),
    ("smoothgrad", ["--seed", "7", "--samples", "3", "--magnitude"],
     {"seed": 7, "samples": 3, "magnitude": True}),
    ("grad_cam", ["--layer", "act"], {"layer": "act"}),
    ("grad_cam", ["--layer", "act:0", "--resize"], {"layer": "act:0", "resize": True}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_each_option_reaches_the_method(files, capsys, method, flags, options):
    maps, _ = _explain(capsys, method, *flags)
    np.testing.assert_array_equal(maps, _api(method, **options))
    # ... and is not the method's default: the option changed the maps.
    default, _ = _explain(capsys, method, *(["--seed", "7", "--samples", "3"]
                                            if method == "smoothgrad" else []),
                          out="default.npy")
    assert maps.shape != default.shape or not np.allclose(maps, default, rtol=1e-3,
                                                          atol=1e-6)


def test_smoothgrad_with_a_seed_writes_the_same_maps_twice(files, capsys):
    first, _ = _explain(capsys, "smoothgrad", "--seed", "11", "--samples", "4", out="a.npy")
    second, _ = _explain(capsys, "smoothgrad", "--seed", "11", "--samples", "4",
                         out="b.npy")
    other, _ = _explain(capsys, "smoothgrad", "--seed", "12", "--samples", "4", out="c.npy")
    np.testing.assert_array_equal(first, second)
    assert np.abs(first - other).max() > 1e-3


def test_every_flag_is_an_option_of_the_methods_it_names():
    """The table the CLI checks and passes options with names the keywords of
    the API's functions."""
    import inspect  # pylint: disable=import-outside-toplevel
    for flag, key, methods in _explain_options.METHOD_FLAGS:
        for method in methods:
            assert key in inspect.signature(getattr(attribution, method)).parameters, (
                flag, method)


def test_an_unknown_layer_is_a_usage_error_naming_close_nodes(files, capsys):
    code = cli.main(["explain", "model.pb", "--inputs", "x:0", "--outputs", "logits:0",
                     "--method", "grad_cam", "--data", "x.npy", "--layer", "acts",
                     "-o", "maps.npy"])
    err = capsys.readouterr().err
    assert code == 2 and "model.pb has no node 'acts' (did you mean 'act'" in err, err


@pytest.mark.parametrize("method", ["saliency", "eps_lrp", "deeplift", "grad_cam"])
def test_maps_that_vanish_are_a_warning(files, capsys, method):
    maps, err = _explain(capsys, method, model="dead.pb")
    assert not np.any(maps)
    assert ("graph-override explain: warning: %s maps vanish: every map of the 3 "
            "example(s) is exactly 0" % method) in err
    assert err.count("warning:") == 1
    _, err = _explain(capsys, method, out="alive.npy")
    assert "warning" not in err
