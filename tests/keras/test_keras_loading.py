"""Moving models over: models larq 0.13.3 saved under TensorFlow 2.15
(tests/data/larq, written by make_larq_models.py there) load under both
releases with larq's outputs, and are not fooled by larq's names left in
Keras's registry; models with graph_override.keras layers save and load by
name, and train on after loading in a fresh process."""

import json
import os
import sys

import numpy as np
import pytest

import warm_python
import tensorflow as tf

import graph_override.keras as lq
from graph_override.errors import SerializationError

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "larq")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LARQ_FILES = ["larq_model.h5", "larq_savedmodel"]


@pytest.fixture(scope="module")
def larq_io():
    return np.load(os.path.join(DATA, "inputs.npy")), np.load(os.path.join(DATA, "outputs.npy"))


def _check_larq_model(model, larq_io):
    x, want = larq_io
    np.testing.assert_array_equal(model(x, training=False).numpy(), want)
    by_name = {l.name: l for l in model.layers}
    assert isinstance(by_name["conv"], lq.layers.QuantConv2D)
    assert by_name["conv"].pad_values == 1.0
    assert by_name["depthwise"].depthwise_quantizer.threshold_value == 0.1
    assert isinstance(by_name["separable"].pointwise_quantizer, lq.quantizers.MagnitudeAwareSign)
    assert by_name["dense"].input_quantizer.clip_value == 0.5
    assert isinstance(by_name["dense"].kernel_constraint, lq.constraints.WeightClip)
    head = by_name["head"]
    assert (head.input_quantizer.precision, head.kernel_quantizer.mode) == (3, "weights")


@pytest.mark.parametrize("name", LARQ_FILES)
def test_larq_saved_model_loads_with_larqs_outputs(name, larq_io):
    _check_larq_model(lq.load_larq_model(os.path.join(DATA, name)), larq_io)


class _Unquantized(tf.keras.layers.Layer):
    """What a failed `import larq` leaves registered under larq's names, as far
    as loading can tell: a class of that name that does not quantize."""

    def __init__(self, **kwargs):
        super().__init__(name=kwargs.get("name"))

    def call(self, inputs):
        return inputs


def _impostors():
    """Classes named as larq's that build the plain Keras layer and drop the
    quantizer arguments."""
    def impostor(base):
        class Impostor(base):  # pylint: disable=too-few-public-methods
            def __init__(self, *args, **kwargs):
                for key in [k for k in kwargs if k.endswith("_quantizer") or k == "pad_values"]:
                    kwargs.pop(key)
                kwargs = {k: v for k, v in kwargs.items()
                          if not (k == "groups" and base is not tf.keras.layers.Conv2D)}
                super().__init__(*args, **kwargs)
        return Impostor
    found = {"QuantConv2D": impostor(tf.keras.layers.Conv2D),
             "QuantDepthwiseConv2D": impostor(tf.keras.layers.DepthwiseConv2D),
             "QuantSeparableConv2D": impostor(tf.keras.layers.SeparableConv2D),
             "QuantDense": impostor(tf.keras.layers.Dense)}
    for name in ("SteSign", "SteTern", "ApproxSign", "MagnitudeAwareSign", "DoReFa",
                 "ste_sign", "weight_clip"):
        found[name] = _Unquantized
    return found


@pytest.mark.parametrize("name", LARQ_FILES)
def test_larq_names_left_in_the_registry_do_not_fool_the_loader(name, larq_io, monkeypatch):
    registry = tf.keras.utils.get_custom_objects()
    for key, cls in _impostors().items():
        monkeypatch.setitem(registry, key, cls)
    _check_larq_model(lq.load_larq_model(os.path.join(DATA, name)), larq_io)


def test_larq_custom_objects_name_every_larq_class():
    objects = lq.larq_custom_objects()
    for name in ("QuantDense", "QuantConv1D", "QuantConv2D", "QuantConv3D",
                 "QuantConv2DTranspose", "QuantDepthwiseConv2D", "QuantSeparableConv1D",
                 "QuantSeparableConv2D", "SteSign", "ste_sign", "DoReFa", "dorefa_quantizer",
                 "DoReFaQuantizer", "NoOpQuantizer", "magnitude_aware_sign", "weight_clip"):
        assert objects[name].__module__.startswith("graph_override.keras.")


def test_larq_summary_of_the_loaded_model_is_larqs():
    """summary.txt is larq.models.summary of the model, printed under 2.15."""
    lines = []
    lq.models.summary(lq.load_larq_model(os.path.join(DATA, "larq_model.h5")),
                      print_fn=lines.append)
    with open(os.path.join(DATA, "summary.txt")) as f:
        want = f.read()
    assert "\n".join(lines) + "\n" == want


def test_load_larq_model_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file or folder"):
        lq.load_larq_model(tmp_path / "missing.h5")
    bad = tmp_path / "notes.h5"
    bad.write_text("not a model")
    with pytest.raises(SerializationError, match="neither an HDF5 file"):
        lq.load_larq_model(bad)
    with pytest.raises(SerializationError, match="without keras_metadata.pb"):
        lq.load_larq_model(tmp_path)


# --- graph_override.keras models: save, load in a fresh process, train on --------

def _model():
    tf.keras.utils.set_random_seed(3)
    inputs = tf.keras.Input((8, 8, 1))
    x = lq.layers.QuantConv2D(4, 3, padding="same", pad_values=1.0, kernel_quantizer="ste_sign",
                              kernel_constraint="weight_clip", use_bias=False)(inputs)
    x = tf.keras.layers.BatchNormalization()(x)
    x = lq.layers.QuantConv2D(4, 3, input_quantizer="ste_sign",
                              kernel_quantizer=lq.quantizers.SteTern(threshold_value=0.1),
                              kernel_constraint=lq.constraints.WeightClip(0.5))(x)
    x = tf.keras.layers.Flatten()(x)
    x = lq.layers.QuantDense(3, input_quantizer=lq.quantizers.SteSign(clip_value=0.5),
                             kernel_quantizer="magnitude_aware_sign",
                             kernel_constraint="weight_clip")(x)
    return tf.keras.Model(inputs, x)


_CHILD = r"""
import sys, numpy as np, tensorflow as tf
import graph_override.keras  # registers the layers: no custom_objects below
path, data, out = sys.argv[1:4]
d = np.load(data)
model = tf.keras.models.load_model(path, compile=path.endswith(".keras"))
if not path.endswith(".keras"):
    model.compile(tf.keras.optimizers.SGD(0.1), "mse")
y = model(d["x"], training=False).numpy()
model.train_on_batch(d["x"], d["t"])
np.savez(out, y=y, classes=np.array([type(l).__name__ for l in model.layers]),
         **{"w%d" % i: w for i, w in enumerate(model.get_weights())})
"""


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_saved_model_loads_by_name_in_a_fresh_process_and_trains_on(ext, tmp_path):
    rng = np.random.RandomState(0)
    x = rng.uniform(-1.5, 1.5, (8, 8, 8, 1)).astype(np.float32)
    x[0, :2] = 0.0
    t = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    model = _model()
    # .keras keeps the optimizer's state; the .h5 test uses stateless SGD.
    model.compile(tf.keras.optimizers.Adam(0.01) if ext == ".keras"
                  else tf.keras.optimizers.SGD(0.1), "mse")
    model.train_on_batch(x, t)
    path, data, out = (str(tmp_path / ("model" + ext)), str(tmp_path / "data.npz"),
                       str(tmp_path / "out.npz"))
    model.save(path)
    np.savez(data, x=x, t=t)
    y = model(x, training=False).numpy()
    model.train_on_batch(x, t)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    warm_python.run([sys.executable, "-c", _CHILD, path, data, out], check=True, env=env,
                   cwd=ROOT, capture_output=True)
    got = np.load(out)
    np.testing.assert_array_equal(got["y"], y)
    for i, w in enumerate(model.get_weights()):
        np.testing.assert_array_equal(got["w%d" % i], w)
    assert "QuantConv2D" in got["classes"] and "QuantDense" in got["classes"]


def test_saved_config_names_the_registered_classes():
    config = json.dumps(_model().get_config())
    assert "graph_override>QuantConv2D" in config and "graph_override>QuantDense" in config
    assert "graph_override>SteTern" in config and "graph_override>WeightClip" in config


def _own_sign(x):
    """A quantizer function of the user's own, unregistered."""
    return tf.sign(x)


@pytest.mark.parametrize("ext", [".keras", ".h5"])
def test_quantizer_functions_save_by_name_and_load_back(ext, tmp_path):
    # larq scripts pass the functions themselves (lq.quantizers.ste_sign);
    # a saved model holds a function by name only.
    x = np.array([[-1.5, -0.5, 0.0, 0.5, 1.5, -0.0]], np.float32)

    def saved(**quantizers):
        model = tf.keras.Sequential([tf.keras.Input((6,)), lq.layers.QuantDense(
            3, kernel_initializer="glorot_uniform", name="qd", **quantizers)])
        path = str(tmp_path / ("%s%s" % (len(list(tmp_path.iterdir())), ext)))
        model.save(path)
        return model, path

    model, path = saved(input_quantizer=lq.quantizers.ste_sign,
                        kernel_quantizer=lq.quantizers.approx_sign)
    loaded = tf.keras.models.load_model(path)  # no custom_objects
    layer = loaded.get_layer("qd")
    assert (layer.input_quantizer, layer.kernel_quantizer) == (
        lq.quantizers.ste_sign, lq.quantizers.approx_sign)
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())

    model, path = saved(input_quantizer=_own_sign)
    # Keras wraps the layer's error in its own TypeError (Keras 3) or ValueError.
    with pytest.raises((TypeError, ValueError), match=r"the quantizer is the function '_own_sign'.*"
                       r"custom_objects=\{'_own_sign': _own_sign\}"):
        tf.keras.models.load_model(path)
    loaded = tf.keras.models.load_model(path, custom_objects={"_own_sign": _own_sign})
    assert loaded.get_layer("qd").input_quantizer is _own_sign
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())
