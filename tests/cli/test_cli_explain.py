"""`graph-override explain`: maps from .npy to .npy, checked against numpy
references on a small ReLU network, files written atomically or not at all
(both or neither, also when a write or the picture fails), the picture, the
coverage warning and the usage errors (those found before TensorFlow is
imported: test_cli_explain_usage.py)."""

import errno
import itertools
import os

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen
from graph_override._files import atomic
from graph_override.commands import _picture

W1 = np.array([[1.0, -1.0, 0.5], [-2.0, 1.0, 1.0], [0.5, 0.5, -1.0], [1.0, 0.0, 2.0]],
              np.float32)
W2 = np.array([[1.0, -1.0], [-1.0, 2.0], [0.5, 1.0]], np.float32)
# Exact zeros in the inputs; examples whose hidden units are off (pre <= 0).
X = np.array([[1.0, 0.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0], [-1.0, 2.0, 0.0, -0.5],
              [2.0, -1.0, 1.0, 0.0]], np.float32)
_names = itertools.count()


def _model(elu=False):
    """x [N, 4] -> MatMul W1 -> Relu (-> Elu) -> MatMul W2 -> logits [N, 2];
    no biases."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        h = tf.nn.relu(tf.matmul(x, tf.constant(W1)), name="relu")
        if elu:
            h = tf.nn.elu(h, name="elu")
        tf.identity(tf.matmul(h, tf.constant(W2)), name="logits")
    return g.as_graph_def()


def _guided(x, target):
    pre = x @ W1
    dy = np.broadcast_to(W2[:, target], pre.shape)
    return (dy * (dy > 0) * (pre > 0)) @ W1.T


def _gradient(x, target):
    pre = x @ W1
    return (np.broadcast_to(W2[:, target], pre.shape) * (pre > 0)) @ W1.T


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frozen.save(_model(), "model.pb")
    frozen.save(_model(elu=True), "elu.pb")
    np.save("x.npy", X)
    return tmp_path


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _explain(capsys, method, *extra, model="model.pb", out="maps.npy"):
    return _main(capsys, "explain", model, "--inputs", "x:0", "--outputs", "logits:0",
                 "--method", method, "--data", "x.npy", "-o", out, *extra)


def _leftovers(folder):
    return [n for n in os.listdir(folder) if n.startswith(".") or n.endswith(".tmp")]


def test_guided_backprop_maps_are_numpy_s(files, capsys):
    code, out, err = _explain(capsys, "guided_backprop", "--target", "1")
    assert code == 0, err
    maps = np.load("maps.npy")
    expected = _guided(X, 1)
    assert (expected == 0).any() and (expected != 0).any()
    np.testing.assert_allclose(maps, expected, rtol=1e-6, atol=1e-7)
    assert "wrote maps.npy: guided_backprop maps of 4 example(s), shape (4, 4) float32; " \
           "target(s) 1, 1, 1, 1" in out
    assert err == ""  # Relu only: covered, no warning


def test_targets_per_example_and_the_default_top_class(files, capsys):
    assert _explain(capsys, "saliency", "--target", "0,1,1,0", out="a.npy")[0] == 0
    expected = np.stack([np.abs(_gradient(X[i:i + 1], t))[0]
                         for i, t in enumerate((0, 1, 1, 0))])
    np.testing.assert_allclose(np.load("a.npy"), expected, rtol=1e-6, atol=1e-7)
    code, out, _ = _explain(capsys, "gradient_input", out="b.npy")
    top = np.argmax(X @ W1 * (X @ W1 > 0) @ W2, axis=1)
    assert code == 0 and ("target(s) %s" % ", ".join(map(str, top))) in out


def test_deeplift_with_zero_baseline_is_gradient_times_input_on_a_relu_net(files, capsys):
    """Ancona et al. (2018): on a ReLU network without biases, DeepLIFT
    (rescale) from a zero baseline equals gradient x input."""
    np.save("zeros.npy", np.zeros(4, np.float32))  # one example's shape: for all
    for baseline, out in (("zeros", "d1.npy"), ("zeros.npy", "d2.npy")):
        code, stdout, err = _explain(capsys, "deeplift", "--target", "0", "--baseline",
                                     baseline, out=out)
        assert code == 0, err
        assert "completeness delta max |d|" in stdout
        np.testing.assert_allclose(np.load(out), _gradient(X, 0) * X, rtol=1e-5, atol=1e-6)


def test_integrated_gradients_takes_steps(files, capsys):
    for steps, out in (("2", "ig2.npy"), ("64", "ig64.npy")):
        assert _explain(capsys, "integrated_gradients", "--target", "0", "--steps",
                        steps, out=out)[0] == 0
    # The steps reach the method: 2 points and 64 give different maps ...
    assert not np.allclose(np.load("ig2.npy"), np.load("ig64.npy"))
    # ... and on 64 completeness holds: each row sums to f(x) - f(0) = f(x).
    f = (np.maximum(X @ W1, 0) @ W2)[:, 0]
    np.testing.assert_allclose(np.load("ig64.npy").sum(axis=1), f, atol=0.05)


def test_an_existing_output_is_kept_without_force_and_inputs_never_replaced(files, capsys):
    np.save("maps.npy", np.arange(3.0))
    before = open("maps.npy", "rb").read()
    code, _, err = _explain(capsys, "saliency")
    assert code == 2 and "exists already; pass --force" in err
    assert open("maps.npy", "rb").read() == before
    assert _explain(capsys, "saliency", "--force")[0] == 0
    assert np.load("maps.npy").shape == X.shape
    x_before = open("x.npy", "rb").read()
    for out in ("x.npy", "model.pb"):
        code, _, err = _explain(capsys, "saliency", "--force", out=out)
        assert code == 2 and "is an input of this run" in err
    assert open("x.npy", "rb").read() == x_before
    code, _, err = _explain(capsys, "saliency", out="no/such/folder/maps.npy")
    assert code == 2 and "does not exist" in err


def test_a_failed_run_leaves_no_file(files, capsys):
    code, _, err = _explain(capsys, "saliency", "--target", "5", "--png", "maps.png")
    assert code == 2 and "class 5 (example 0) is out of range" in err
    assert not os.path.exists("maps.npy") and not os.path.exists("maps.png")
    assert _leftovers(files) == []


_real_write = atomic.write_temporary


def _full_disk_on(monkeypatch, name):
    """The writer fails with ENOSPC on the file `name`, as a full disk would."""
    def write(path, data, **kwargs):
        if os.path.basename(path) == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return _real_write(path, data, **kwargs)

    monkeypatch.setattr(atomic, "write_temporary", write)


def _snapshot(*names):
    return {n: open(n, "rb").read() if os.path.exists(n) else None for n in names}


@pytest.mark.parametrize("failing", ["maps.png", "maps.npy"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "force"])
def test_a_write_that_fails_leaves_both_files_as_they_were(files, capsys, monkeypatch,
                                                           failing, existing):
    """Maps and picture, both or neither: a full disk on either file, new or
    replaced with --force, leaves no new file and every old one unchanged."""
    pytest.importorskip("matplotlib")
    if existing:
        np.save("maps.npy", np.arange(3.0))
        open("maps.png", "wb").write(b"an older picture")
    before = _snapshot("maps.npy", "maps.png")
    _full_disk_on(monkeypatch, failing)
    code, out, err = _explain(capsys, "saliency", "--png", "maps.png",
                              *(["--force"] if existing else []))
    assert code == 2 and out == ""
    flag = "--png" if failing == "maps.png" else "-o"
    assert ("graph-override explain: error: %s %s: cannot be written: No space left on "
            "device; neither maps.npy nor maps.png was written (both are as they were "
            "before this run)" % (flag, failing)) in err
    assert _snapshot("maps.npy", "maps.png") == before
    assert _leftovers(files) == []


def test_a_picture_that_fails_to_draw_writes_nothing(files, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel

    def broken(self, *args, **kwargs):
        raise RuntimeError("the Agg renderer ran out of memory")

    monkeypatch.setattr(Figure, "savefig", broken)
    code, _, err = _explain(capsys, "saliency", "--png", "maps.png")
    assert code == 2
    assert ("--png maps.png: matplotlib failed to draw the picture (RuntimeError: the Agg "
            "renderer ran out of memory); nothing was written") in err
    assert _snapshot("maps.npy", "maps.png") == {"maps.npy": None, "maps.png": None}
    np.save("maps.npy", np.arange(3.0))  # with --force, the old maps stay
    before = _snapshot("maps.npy", "maps.png")
    assert _explain(capsys, "saliency", "--png", "maps.png", "--force")[0] == 2
    assert _snapshot("maps.npy", "maps.png") == before
    assert _leftovers(files) == []


def test_without_png_a_full_disk_names_the_maps(files, capsys, monkeypatch):
    _full_disk_on(monkeypatch, "maps.npy")
    code, _, err = _explain(capsys, "saliency")
    assert code == 2
    assert "-o maps.npy: cannot be written: No space left on device; nothing was " \
           "written" in err
    assert not os.path.exists("maps.npy") and _leftovers(files) == []


def test_an_output_that_appears_during_the_run_is_kept(files, capsys, monkeypatch):
    """Another process creates maps.png while the maps are computed: it is
    not replaced (no --force), and the maps are not left behind."""
    def write(path, data, **kwargs):
        if os.path.basename(path) == "maps.png":
            open(path, "wb").write(b"the other process's")
        return _real_write(path, data, **kwargs)

    pytest.importorskip("matplotlib")
    monkeypatch.setattr(atomic, "write_temporary", write)
    code, _, err = _explain(capsys, "saliency", "--png", "maps.png")
    assert code == 2 and "--png maps.png: appeared while the maps were computed" in err
    assert _snapshot("maps.npy", "maps.png") == {"maps.npy": None,
                                                 "maps.png": b"the other process's"}


def _savez(path, **arrays):
    with open(path, "wb") as f:  # np.savez would add .npz to the name
        np.savez(f, **arrays)


@pytest.mark.parametrize("setup, extra, message", [
    (lambda: np.save("x.npy", X.astype(np.int32)), [], "holds int32 values"),
    (lambda: np.save("x.npy", X[:, :3]), [], "x has shape (4, 3)"),
    (lambda: _savez("x.npy", a=X), [], "holds several arrays"),
    (lambda: np.save("x.npy", np.array([{}], dtype=object)), [], "without pickle"),
    (lambda: open("x.npy", "w").write("not numpy"), [], "not a .npy array file"),
    (lambda: os.remove("x.npy"), [], "--data x.npy: cannot be read"),
    (lambda: np.save("b.npy", np.zeros(3, np.float32)), ["--baseline", "b.npy"],
     "baseline has shape (3,)"),
])
def test_bad_data_is_a_usage_error(files, capsys, setup, extra, message):
    setup()
    method = "deeplift" if extra else "saliency"
    code, _, err = _explain(capsys, method, *extra)
    assert code == 2 and message in err, err
    assert not os.path.exists("maps.npy")


@pytest.mark.parametrize("argv, message", [
    (["--method", "deeplfit"], "Did you mean 'deeplift'?"),
    (["--method", "guided_backprop", "--baseline", "zeros"], "guided_backprop takes no "
                                                             "baseline"),
    (["--method", "deeplift", "--steps", "3"], "only integrated_gradients takes it, not deeplift"),
    (["--method", "saliency", "--map", "Relu=nosuch_module_q:f"], "cannot import module"),
])
def test_bad_arguments_are_usage_errors(files, capsys, argv, message):
    code, _, err = _main(capsys, "explain", "model.pb", "--inputs", "x:0", "--outputs",
                         "logits:0", "--data", "x.npy", "-o", "maps.npy", *argv)
    assert code == 2 and message in err, err
    assert not os.path.exists("maps.npy")


def test_a_name_not_in_the_graph_names_the_file(files, capsys):
    code, _, err = _main(capsys, "explain", "model.pb", "--inputs", "x:0", "--outputs",
                         "logit:0", "--data", "x.npy", "-o", "maps.npy", "--method",
                         "saliency")
    assert code == 2 and "model.pb: outputs names 'logit:0'" in err
    assert "Did you mean 'logits:0'?" in err


def test_coverage_warning_and_a_rule_of_ones_own(files, capsys):
    code, _, err = _explain(capsys, "guided_backprop", "--target", "1", model="elu.pb")
    assert code == 0
    assert "warning: guided_backprop does not cover Elu (1 node(s): elu)" in err
    with_elu = np.load("maps.npy")
    # Elu after Relu: its gradient is exp(h) where h <= 0, i.e. 1 wherever
    # Relu's output is >= 0: the maps equal the ReLU-only network's.
    np.testing.assert_allclose(with_elu, _guided(X, 1), rtol=1e-6, atol=1e-7)
    name = "explain_grads_%d_%d" % (os.getpid(), next(_names))
    (files / (name + ".py")).write_text("def halve(op, grad):\n    return grad * 0.5\n")
    code, _, err = _explain(capsys, "guided_backprop", "--target", "1", "--map",
                            "Elu=%s:halve" % name, model="elu.pb", out="halved.npy")
    assert code == 0 and err == ""  # the user's rule covers Elu
    np.testing.assert_allclose(np.load("halved.npy"), 0.5 * _guided(X, 1), rtol=1e-6,
                               atol=1e-7)
    # A user's rule on an op type the method covers wins over the method's.
    code, _, err = _explain(capsys, "guided_backprop", "--target", "1", "--map",
                            "Relu=%s:halve" % name, out="relu_halved.npy")
    assert code == 0
    pre = X @ W1
    np.testing.assert_allclose(np.load("relu_halved.npy"),
                               0.5 * np.broadcast_to(W2[:, 1], pre.shape) @ W1.T,
                               rtol=1e-6, atol=1e-7)


def _image_model():
    rng = np.random.RandomState(1)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 3], name="x")
        h = tf.nn.relu(tf.nn.conv2d(x, tf.constant(rng.randn(3, 3, 3, 2).astype("float32")),
                                    1, "SAME"))
        tf.identity(tf.matmul(tf.reshape(h, [-1, 72]), tf.constant(
            rng.randn(72, 4).astype("float32"))), name="logits")
    return g.as_graph_def()


@pytest.mark.parametrize("model, data", [
    ("image", np.random.RandomState(2).rand(3, 6, 6, 3).astype(np.float32)),
    ("vector", X),
])
def test_the_picture_is_a_png_with_a_row_per_example(files, capsys, model, data):
    pytest.importorskip("matplotlib")
    from PIL import Image  # pylint: disable=import-outside-toplevel
    if model == "image":
        frozen.save(_image_model(), "image.pb")
    np.save("x.npy", data)
    code, out, err = _explain(capsys, "deeplift", "--png", "maps.png",
                              model="image.pb" if model == "image" else "model.pb")
    assert code == 0, err
    assert "picture maps.png" in out
    with Image.open("maps.png") as picture:
        width, height = picture.size
    assert picture.format == "PNG" and height > width * (len(data) - 1) / 2.5
    np.save("x.npy", np.concatenate([data] * 6))  # 18 / 24 examples: capped rows
    assert _explain(capsys, "saliency", "--png", "big.png", out="big.npy",
                    model="image.pb" if model == "image" else "model.pb")[0] == 0
    with Image.open("big.png") as picture:
        assert picture.size[1] < height * _picture.MAX_ROWS / len(data) * 1.2


def test_signed_maps_get_a_diverging_colormap_centred_at_zero():
    values, cmap, low, high = _picture._heat(np.array([[-1.0, 0.5], [0.0, 0.25]]))
    assert cmap == "RdBu_r" and (low, high) == (-1.0, 1.0)
    values, cmap, low, high = _picture._heat(np.array([[0.0, 0.5], [0.0, 2.0]]))
    assert cmap == "Reds" and (low, high) == (0.0, 2.0)
    assert _picture._heat(np.zeros((2, 2)))[2:] == (0.0, 1.0)  # all zero: no 0/0
    summed = _picture._heat(np.ones((2, 2, 3)))[0]
    assert summed.shape == (2, 2) and (summed == 3.0).all()
