"""graph_override.keras.zoo against larq-zoo 2.3.2 itself, which runs on
TensorFlow 2.15 (larq 0.13.3) only (tests/keras/zoo_env.py): every
architecture's summary table and parameter counts are larq's for larq-zoo's
model, at full size and on the small-input branches; the weights larq-zoo's
models saved there load into our builders with larq's predictions."""

import contextlib
import io

import numpy as np
import pytest
import tensorflow as tf

import zoo_env
import graph_override.keras as lq
from graph_override.keras import layers as quant_layers
from graph_override.keras import zoo

ARCHITECTURES = ["QuickNetSmall", "QuickNet", "QuickNetLarge", "BiRealNet", "BinaryResNetE18",
                 "XNORNet", "DoReFaNet", "BinaryAlexNet", "RealToBinaryNet", "MeliusNet22",
                 "BinaryDenseNet28", "BinaryDenseNet37", "BinaryDenseNet37Dilated"]
# Full size (224x224, 1000 classes), and the 3x3 stems these two take below 50 pixels.
SUMMARIES = ["%s:224:1000" % name for name in ARCHITECTURES] + [
    "BinaryResNetE18:32:10", "BinaryDenseNet28:32:10"]


@pytest.fixture(scope="module")
def larq_zoo_summaries(tmp_path_factory):
    return zoo_env.summaries(tmp_path_factory, "zoo_summaries.json", SUMMARIES)


@pytest.fixture(scope="module")
def larq_zoo_files(tmp_path_factory):
    return zoo_env.saved_models(tmp_path_factory)


def _build(spec, **kwargs):
    name, size, classes = spec.split(":")
    tf.keras.backend.clear_session()  # layer names count from 0, as in larq-zoo's run
    return getattr(zoo, name)(input_shape=(int(size), int(size), 3), num_classes=int(classes),
                              **kwargs)


def _counts(model):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        lq.models.summary(model)
    count = lambda ws: int(sum(np.prod(w.shape) for w in ws))  # noqa: E731
    binarized = sum(int(np.prod(v.shape)) for layer in model.layers
                    for _, v, q in quant_layers.quantized_weights(layer)
                    if getattr(q, "precision", None) == 1)
    return dict(text=text.getvalue(), trainable=count(model.trainable_weights),
                non_trainable=count(model.non_trainable_weights), binarized=binarized)


@pytest.mark.parametrize("spec", SUMMARIES)
def test_summary_and_counts_are_larq_zoos(spec, larq_zoo_summaries):
    want = larq_zoo_summaries[spec]
    got = _counts(_build(spec))
    assert want["binarized"] > 0.8 * want["trainable"] or spec.startswith(("MeliusNet",
                                                                         "BinaryDenseNet"))
    assert {k: got[k] for k in ("trainable", "non_trainable", "binarized")} == \
        {k: want[k] for k in ("trainable", "non_trainable", "binarized")}
    assert got["text"] == want["text"]


@pytest.mark.parametrize("spec", [s for s in zoo_env.SAVED if not s.startswith("TFOps")])
def test_larq_zoo_weights_load_into_the_builder(spec, larq_zoo_files):
    name = spec.split(":")[0]
    model = _build(spec, weights=str(larq_zoo_files / (name + ".h5")))
    x = np.load(larq_zoo_files / (name + ".x.npy"))
    want = np.load(larq_zoo_files / (name + ".y.npy"))
    got = model(x, training=False).numpy()
    assert want.std() > 1e-3  # the random weights give predictions that differ
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_builder_saves_and_loads_by_name(tmp_path):
    """The layers that stand for larq-zoo's TFOpLambda and Lambda layers
    (QuickNet's additions, MeliusNet's split, concat and padded add) save
    and load without custom_objects."""
    x = np.random.RandomState(0).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)
    for spec in ("QuickNetSmall:32:10", "MeliusNet22:32:10"):
        model = _build(spec)
        path = str(tmp_path / ("m.keras" if hasattr(tf.keras, "ops") else "m.h5"))
        model.save(path)
        loaded = tf.keras.models.load_model(path)
        assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
        np.testing.assert_array_equal(loaded(x, training=False).numpy(),
                                      model(x, training=False).numpy())


def test_builder_refuses_what_larq_zoo_refuses():
    with pytest.raises(ValueError, match="not downloaded here"):
        zoo.QuickNet(weights="imagenet")
    with pytest.raises(ValueError, match=r"\(height, width, 3\)"):
        zoo.BiRealNet(input_shape=(32, 32, 1))
    with pytest.raises(ValueError, match="must be given"):
        zoo.BiRealNet(input_shape=(None, None, 3))
    headless = zoo.BiRealNet(input_shape=(None, None, 3), include_top=False)
    assert headless.output.shape[-1] == 512
