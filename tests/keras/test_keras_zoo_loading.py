"""Models larq-zoo 2.3.2 saved with larq 0.13.3 on TensorFlow 2.15 (in a
process of that release: tests/keras/zoo_env.py) load with
`load_larq_model` in this one, with larq's predictions: Keras 2's
TFOpLambda layers become the pure ops they name (others are refused by
name), larq-zoo's functions are known, ``custom_objects`` reaches the
deserializer, and Lambda layers (Python code) are refused with the way out."""

import shutil

import h5py
import numpy as np
import pytest

import zoo_env
import graph_override.keras as lq
from graph_override.errors import SerializationError
from graph_override.keras.tf_op_layer import OpLayer
from graph_override.keras.zoo import functions

LOADABLE = ["QuickNetSmall", "BiRealNet", "BinaryResNetE18", "DoReFaNet", "BinaryAlexNet",
            "BinaryDenseNet28", "TFOps"]


@pytest.fixture(scope="module")
def larq_zoo_files(tmp_path_factory):
    return zoo_env.saved_models(tmp_path_factory)


def _predictions(folder, name, **kwargs):
    model = lq.load_larq_model(folder / (name + ".h5"), **kwargs)
    x = np.load(folder / (name + ".x.npy"))
    return model, model(x, training=False).numpy(), np.load(folder / (name + ".y.npy"))


@pytest.mark.parametrize("name", LOADABLE)
def test_larq_zoo_model_loads_with_larqs_predictions(name, larq_zoo_files):
    model, got, want = _predictions(larq_zoo_files, name)
    assert want.std() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ops = [l for l in model.layers if isinstance(l, OpLayer)]
    if name == "QuickNetSmall":  # its 16 residual additions, Keras 2's TFOpLambda
        assert [l.function for l in ops] == ["__operators__.add"] * 16
        assert ops[0].name == "tf.__operators__.add"
    if name == "TFOps":  # relu, x * 2, concat of a list (twice), multiply by a tensor
        assert sorted(l.function for l in ops) == [
            "concat", "concat", "math.multiply", "math.multiply", "nn.relu"]


def _edited(folder, name, tmp_path, old, new):
    """A copy of larq-zoo's NAME.h5 whose model config says `new` for `old`."""
    path = tmp_path / (name + ".h5")
    shutil.copy(folder / (name + ".h5"), path)
    with h5py.File(path, "r+") as f:
        config = f.attrs["model_config"]
        config = config.decode() if isinstance(config, bytes) else config
        assert old in config
        f.attrs["model_config"] = config.replace(old, new)
    return path


def test_impure_tf_op_is_refused_by_name(larq_zoo_files, tmp_path):
    written = tmp_path / "written"
    path = _edited(larq_zoo_files, "TFOps", tmp_path, '"function": "nn.relu"',
                   '"function": "io.write_file"')
    with pytest.raises(SerializationError, match=r"tf\.io\.write_file, which is not a pure"):
        lq.load_larq_model(path)
    assert not written.exists()


@pytest.mark.parametrize("name", ["RealToBinaryNet", "MeliusNet22"])
def test_lambda_layer_is_refused_with_the_way_out(name, larq_zoo_files):
    with pytest.raises(SerializationError, match=r"Lambda layer.*graph_override\.keras\.zoo"):
        lq.load_larq_model(larq_zoo_files / (name + ".h5"))


def test_custom_objects_reach_the_deserializer(larq_zoo_files, tmp_path):
    """A quantizer function the package does not know: the error's advice
    (custom_objects) loads the model, with larq's predictions."""
    path = _edited(larq_zoo_files, "DoReFaNet", tmp_path, "magnitude_aware_sign_unclipped",
                   "my_sign")
    with pytest.raises(SerializationError, match=r"custom_objects=\{'my_sign': my_sign\}"):
        lq.load_larq_model(path)
    model = lq.load_larq_model(path, custom_objects={
        "my_sign": functions.magnitude_aware_sign_unclipped})
    x = np.load(larq_zoo_files / "DoReFaNet.x.npy")
    np.testing.assert_allclose(model(x, training=False).numpy(),
                               np.load(larq_zoo_files / "DoReFaNet.y.npy"), rtol=1e-5, atol=1e-6)


def test_custom_objects_come_before_larq_zoos_functions(larq_zoo_files):
    def mine(x):
        return functions.magnitude_aware_sign_unclipped(x)
    mine.precision = 1
    model = lq.load_larq_model(larq_zoo_files / "DoReFaNet.h5",
                               custom_objects={"magnitude_aware_sign_unclipped": mine})
    quantized = [l for l in model.layers if getattr(l, "kernel_quantizer", None) is mine]
    assert len(quantized) == 6  # 4 convolutions, 2 dense layers
