"""`graph-override explain` on a model of several inputs: --inputs a:0,b:0
with --data a.npy,b.npy or one .npz of an array per input name (and
--baseline likewise), OUT a .npz of a map per input, equal to the API's;
what does not fit is a usage error naming the input."""

import os

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen

RNG = np.random.RandomState(2)
WA = RNG.randn(4, 3).astype(np.float32)
WB = RNG.randn(2, 3).astype(np.float32)
A = RNG.randn(3, 2, 2).astype(np.float32)
B = RNG.randn(3, 2).astype(np.float32)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """model.pb: logits = relu(flat(a) WA + b WB); a.npy, b.npy, x.npz."""
    monkeypatch.chdir(tmp_path)
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, 2, 2], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 2], name="b")
        tf.nn.relu(tf.matmul(tf.reshape(a, [-1, 4]), WA) + tf.matmul(b, WB), name="logits")
    frozen.save(g.as_graph_def(), "model.pb")
    np.save("a.npy", A)
    np.save("b.npy", B)
    np.savez("x.npz", b=B, a=A)
    np.savez("base.npz", a=np.full((2, 2), 0.5, np.float32), b=np.zeros((3, 2), np.float32))
    return tmp_path


def _explain(*extra):
    return cli.main(["explain", "model.pb", "--inputs", "a:0,b:0", "--outputs", "logits:0",
                     "--target", "1", *extra])


def _api(method, **options):
    return attribution.attribute("model.pb", method, [A, B], 1, inputs=["a:0", "b:0"],
                                 outputs="logits:0", **options).maps


@pytest.mark.parametrize("data", ["a.npy,b.npy", "x.npz"])
def test_maps_per_input_equal_the_apis(files, capsys, data):
    assert _explain("--method", "integrated_gradients", "--steps", "4", "--data", data,
                    "--baseline", "base.npz", "-o", "maps.npz") == 0
    out = capsys.readouterr().out
    assert "integrated_gradients maps of 3 example(s), one per input: a (3, 2, 2), " \
           "b (3, 2)" in out, out
    with np.load("maps.npz") as maps:
        assert sorted(maps.files) == ["a", "b"]
        want = _api("integrated_gradients", steps=4,
                    baseline=[np.full((2, 2), 0.5, np.float32), 0.0])
        np.testing.assert_array_equal(maps["a"], want[0])
        np.testing.assert_array_equal(maps["b"], want[1])
        assert np.abs(maps["a"]).max() > 0 and np.abs(maps["b"]).max() > 0


def test_deeplift_with_a_baseline_file_per_input(files, capsys):
    np.save("ra.npy", np.zeros((2, 2), np.float32))
    np.save("rb.npy", np.ones((3, 2), np.float32))
    assert _explain("--method", "deeplift", "--data", "a.npy,b.npy", "--baseline",
                    "ra.npy,rb.npy", "-o", "maps.npz") == 0, capsys.readouterr().err
    with np.load("maps.npz") as maps:
        want = _api("deeplift", baseline=[0.0, np.ones((3, 2), np.float32)])
        np.testing.assert_array_equal(maps["b"], want[1])


@pytest.mark.parametrize("extra, says", [
    (["--data", "a.npy,b.npy", "-o", "maps.npy"], "-o maps.npy: a model of several inputs "
                                                  "(a:0, b:0) gets a map per input: give a "
                                                  ".npz file"),
    (["--method", "grad_cam", "--data", "a.npy,b.npy", "-o", "maps.npz", "--png", "m.png"],
     "--png draws a map per input; grad_cam's map is of a layer, not of the inputs a:0, b:0"),
    (["--data", "a.npy", "-o", "maps.npz"], "--data a.npy: 1 file(s) for 2 inputs (a:0, b:0)"),
    (["--data", "b.npy,a.npy", "-o", "maps.npz"], "the input a:0 has shape (2,) per example"),
    (["--method", "deeplift", "--data", "a.npy,b.npy", "--baseline", "x.npz,a.npy", "-o",
      "maps.npz"],
     "--baseline (input a:0) x.npz: holds several arrays (.npz)"),
])
def test_what_does_not_fit_is_a_usage_error(files, capsys, extra, says):
    assert _explain("--method", "saliency", *extra) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert not os.path.exists("maps.npz") and not os.path.exists("maps.npy")


def test_an_npz_without_an_input_is_a_usage_error(files, capsys):
    np.savez("only_a.npz", a=A)
    assert _explain("--method", "saliency", "--data", "only_a.npz", "-o", "maps.npz") == 2
    assert "x has no array for the input b:0 (its keys: 'a')" in capsys.readouterr().err
