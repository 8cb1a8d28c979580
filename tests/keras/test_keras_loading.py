"""Moving models over: models larq 0.13.3 saved under TensorFlow 2.15
(tests/data/larq, written by make_larq_models.py there) load under both
releases with larq's outputs, and are not fooled by larq's names left in
Keras's registry; models with graph_override.keras layers save and load by
name, and train on after loading in a fresh process."""

import json
import os
import re
import shutil
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


# --- damaged keras_metadata.pb: SerializationError naming the file and the damage --

def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _with_root_metadata(data, make):
    """larq's keras_metadata.pb with the root node's metadata (field 5 of the
    first node, a JSON text) replaced by make(the parsed JSON) -> bytes."""
    from graph_override.keras import loading  # pylint: disable=import-outside-toplevel
    first, node = next(loading._fields(data))  # pylint: disable=protected-access
    fields = list(loading._fields(node))  # pylint: disable=protected-access
    assert first == 1 and dict(fields)[3] == b"root" and [n for n, _ in fields] == [3, 4, 5, 6]
    root = json.loads(dict(fields)[5])
    rest = data[len(_field(1, node)):]
    new_node = b"".join(_field(n, make(root) if n == 5 else v) for n, v in fields)
    return _field(1, new_node) + rest


def _edit(change):
    def make(root):
        change(root)
        return json.dumps(root).encode()
    return make


def _dense(root):
    return next(l for l in root["config"]["layers"] if l["config"].get("name") == "dense")


_NEST = 100000

DAMAGES = {
    # (the file from the real one, what the message says)
    "truncated-in-a-length": (lambda d: d[:2], r"keras_metadata\.pb is damaged: the number "
                              r"at byte 1 runs past the end \(of 2\)"),
    "truncated-in-the-root": (lambda d: d[:9000], r"keras_metadata\.pb is damaged: the field "
                              r"at byte 0 claims 14799 bytes, 8997 are left \(of 9000\)"),
    "wire-type-7": (lambda d: b"\x0f" + d[1:], r"keras_metadata\.pb is damaged: the field at "
                    r"byte 0 has wire type 7"),
    "flipped-to-non-utf8": (lambda d: d[:200] + b"\xff" + d[201:],
                            r"keras_metadata\.pb: the root model's metadata is not UTF-8 "
                            r"text \(byte \d+\): the file is damaged"),
    "invalid-json": (lambda d: _with_root_metadata(d, lambda r: b'{"class_name": "Fun'),
                     r"the root model's metadata is not valid JSON \(Unterminated string"),
    "deeply-nested-json": (lambda d: _with_root_metadata(
        d, lambda r: b"[" * _NEST + b"]" * _NEST),
        r"the root model's metadata is JSON nested too deeply to read"),
    "deeply-nested-config": (lambda d: _with_root_metadata(d, _edit(
        lambda r: r["config"].update(extra=json.loads("[" * 900 + "]" * 900)))),
        r"cannot build the model from its saved config: it is nested too deeply"),
    "root-a-list": (lambda d: _with_root_metadata(d, lambda r: b"[1, 2]"),
                    r"the root model's metadata is not a model config .*; got a JSON list"),
    "no-config": (lambda d: _with_root_metadata(d, _edit(lambda r: r.pop("config"))),
                  r"the root model's metadata is not a model config .*; got an object "
                  r"with keys"),
    "class-name-a-number": (lambda d: _with_root_metadata(
        d, _edit(lambda r: r.update(class_name=7))),
        r"the root model's metadata is not a model config"),
    "layers-a-number": (lambda d: _with_root_metadata(
        d, _edit(lambda r: r["config"].update(layers=5))),
        r"cannot build the model from its saved config: TypeError"),
    "layer-a-string": (lambda d: _with_root_metadata(
        d, _edit(lambda r: r["config"]["layers"].__setitem__(2, "conv"))),
        r"cannot build the model from its saved config: "),
    "units-changed": (lambda d: _with_root_metadata(
        d, _edit(lambda r: _dense(r)["config"].update(units=7))),
        r"the saved value of weight 'kernel' of layer 'dense' has shape \[\d+, \d+\]; the "
        r"layer keras_metadata\.pb describes has \[\d+, 7\]"),
    "layer-dropped": (lambda d: _with_root_metadata(d, _edit(lambda r: r["config"].update(
        layers=[l for l in r["config"]["layers"] if l["config"].get("name") != "head"],
        output_layers=[["dense", 0, 0]]))),
        r"keras_metadata\.pb describes 5 layers with weights, the checkpoint holds 6"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_keras_metadata_raises_serialization_error_naming_it(damage, tmp_path):
    """Each was a raw IndexError, UnicodeDecodeError, JSONDecodeError,
    RecursionError, KeyError, TypeError or ValueError (or a SerializationError
    that did not name the file)."""
    folder = tmp_path / "larq_savedmodel"
    shutil.copytree(os.path.join(DATA, "larq_savedmodel"), folder)
    meta = folder / "keras_metadata.pb"
    mutate, says = DAMAGES[damage]
    meta.write_bytes(mutate(meta.read_bytes()))
    with pytest.raises(SerializationError) as info:
        lq.load_larq_model(folder)
    assert str(folder) in str(info.value)
    assert re.search(says, str(info.value)), str(info.value)

