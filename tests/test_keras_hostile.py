"""Hostile Keras files: a saved `op_with_gradient` that names a function the
user did not name is refused at load, with a message that names the function
and says how to allow it, and the function never runs.

The corpus is made here: legit models saved to .keras and HDF5, their op
function name then rewritten in the file. Every named function is replaced
by a sentinel that records a call (with the real function's module and name,
so that a check by name would be fooled), so a regression shows as a call,
not as a changed process."""

import json
import sys
import types
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from graph_override import tf2
from graph_override._trust import allowed
from graph_override.errors import SerializationError
from graph_override.tf2 import OpWithGradient, op_with_gradient

KERAS_3 = int(keras.__version__.split(".")[0]) >= 3

# Functions of already-imported packages, of the standard library and of
# graph_override; TensorFlow functions that are not pure ops.
HOSTILE = [
    "requests.api:get", "absl.app:_exit_before_main", "os:system", "subprocess:run",
    "builtins:input", "shutil:disk_usage", "graph_override.frozen.graphdef.io:save",
    "tf.experimental.numpy.experimental_enable_numpy_behavior", "tf.io.write_file",
    "tf.io.read_file", "tf.compat.v1.write_file", "tf.compat.v1.read_file",
    "tf.compat.v1.py_func", "tf.py_function", "tf.numpy_function", "tf.print",
    "tf.config.set_visible_devices", "tf.config.run_functions_eagerly",
    "tf.summary.trace_on", "tf.debugging.enable_check_numerics", "tf.random.set_seed",
    "tf.compat.v1.enable_eager_execution", "tf.compat.v1.disable_v2_behavior",
    "tf.compat.v1.set_random_seed", "tf.load_op_library", "tf.nn.dropout",
    "tf.compat.v1.assign", "tf.raw_ops.WriteFile", "tf.raw_ops.ReadFile",
    "tf.raw_ops.PrintV2", "tf.raw_ops.EagerPyFunc", "tf.raw_ops.RandomUniform",
    "tf.raw_ops.DecodeProtoV2", "tf.raw_ops.ImmutableConst", "tf.raw_ops.MatchingFiles",
]


def _holder(name):
    """(object holding the function, attribute, real function or None)."""
    if name.startswith("tf."):
        parent, _, attr = name[3:].rpartition(".")
        holder = tf
        for part in parent.split(".") if parent else ():
            holder = getattr(holder, part)
        return holder, attr, getattr(holder, attr, None)
    module, _, attr = name.partition(":")
    __import__(module)
    return sys.modules[module], attr, getattr(sys.modules[module], attr, None)


@pytest.fixture
def sentinels(monkeypatch):
    """Replaces every hostile function by a recorder; returns the calls."""
    calls = []
    for name in HOSTILE:
        holder, attr, real = _holder(name)

        def record(*args, _name=name, **kwargs):
            calls.append(_name)
            return args[0] if args else None
        record.__module__ = getattr(real, "__module__", None) or name.partition(":")[0]
        record.__qualname__ = record.__name__ = attr
        monkeypatch.setattr(holder, attr, record, raising=False)
    return calls


def _save_legit(folder, fmt):
    """A model using op_with_gradient(tf.sign) as an activation and (Keras 3)
    in a Lambda layer, saved to `fmt`."""
    wrapper = op_with_gradient(tf.sign, "Identity")
    inputs = keras.Input((3,))
    h = keras.layers.Dense(3, activation=wrapper)(inputs)
    h = (keras.layers.Lambda if KERAS_3 else keras.layers.Activation)(wrapper)(h)
    path = folder / ("legit." + fmt)
    keras.Model(inputs, h).save(str(path))
    return path


def _rewrite(text, name):
    assert text.count('"op_fn": "tf.sign"') == 2, text
    return text.replace('"op_fn": "tf.sign"', '"op_fn": %s' % json.dumps(name))


def _hostile_copy(legit, name, folder):
    path = folder / ("hostile" + legit.suffix)
    if legit.suffix == ".keras":
        with zipfile.ZipFile(legit) as src, zipfile.ZipFile(path, "w") as out:
            for item in src.infolist():
                data = src.read(item)
                if item.filename == "config.json":
                    data = _rewrite(data.decode(), name).encode()
                out.writestr(item, data)
    else:
        path.write_bytes(legit.read_bytes())
        with h5py.File(path, "r+") as f:
            config = f.attrs["model_config"]
            config = config.decode() if isinstance(config, bytes) else config
            f.attrs["model_config"] = _rewrite(config, name)
    return path


def _chain(error):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def test_the_corpus_names_functions_that_exist_here():
    for name in HOSTILE:
        assert _holder(name)[2] is not None, name


@pytest.mark.parametrize("name", HOSTILE)
def test_a_config_naming_a_hostile_function_is_refused(name, sentinels):
    with pytest.raises(SerializationError) as info:
        OpWithGradient.from_config({"op_fn": name, "gradient": "Identity"})
    message = str(info.value)
    assert name.partition(":")[2] in message if ":" in name else name in message
    assert "If you trust this file" in message and "custom_objects" in message
    assert sentinels == []


@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_hostile_files_are_refused_at_load_and_run_nothing(tmp_path, fmt, sentinels):
    legit = _save_legit(tmp_path, fmt)
    x = np.array([[-2.0, 0.0, 3.0]], np.float32)
    want = np.asarray(keras.models.load_model(str(legit))(x))  # the legit file loads
    for name in HOSTILE:
        path = _hostile_copy(legit, name, tmp_path)
        with pytest.raises(Exception) as info:  # pylint: disable=broad-except
            keras.models.load_model(str(path))(x)
        messages = " ".join(str(e) for e in _chain(info.value))
        assert "If you trust this file" in messages, (name, messages[-2000:])
        assert sentinels == [], name
    assert np.array_equal(np.asarray(keras.models.load_model(str(legit))(x)), want)


@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_a_file_naming_a_users_function_loads_when_the_user_names_it(tmp_path, fmt):
    module = types.ModuleType("hostile_test_user_ops")
    exec("import tensorflow as tf\ndef user_floor(x):\n    return tf.floor(x)\n",  # pylint: disable=exec-used
         module.__dict__)
    sys.modules[module.__name__] = module
    try:
        path = _hostile_copy(_save_legit(tmp_path, fmt), module.__name__ + ":user_floor",
                             tmp_path)
        x = np.array([[-1.5, 0.0, 2.5]], np.float32)
        with pytest.raises(Exception) as info:  # pylint: disable=broad-except
            keras.models.load_model(str(path))
        assert "allow_op_functions('hostile_test_user_ops')" in " ".join(
            str(e) for e in _chain(info.value))
        with tf2.allow_op_functions(module.__name__):
            first = keras.models.load_model(str(path))
        second = keras.models.load_model(str(path), custom_objects={"user_floor": module.user_floor})
        for model in (first, second):
            assert model.layers[1].activation.op_fn is module.user_floor
        assert np.array_equal(np.asarray(first(x)), np.asarray(second(x)))
    finally:
        del sys.modules[module.__name__]


# --- the pure TensorFlow op functions -----------------------------------------

@pytest.mark.parametrize("path", [
    "sign", "math.sign", "round", "floor", "identity", "nn.relu", "nn.softmax", "matmul",
    "clip_by_value", "math.reduce_mean", "linalg.matmul", "bitwise.invert", "signal.fft",
    "compat.v1.floor", "compat.v1.nn.relu", "einsum", "fingerprint", "raw_ops.Sign",
    "raw_ops.Round", "raw_ops.Relu", "raw_ops.MatMul", "raw_ops.Identity", "raw_ops.Floor"])
def test_pure_op_functions_are_allowed(path):
    fn = allowed.pure_tf_op(path)
    assert fn is not None and fn is eval("tf." + path)  # pylint: disable=eval-used


def test_every_allowed_raw_op_is_stateless_and_self_contained():
    pure = [n for n in dir(tf.raw_ops) if allowed.pure_raw_op(n)]
    assert 300 < len(pure) < len(dir(tf.raw_ops))
    from graph_override.frozen import RISKY_OPS  # pylint: disable=import-outside-toplevel
    from graph_override._tensorflow import compat  # pylint: disable=import-outside-toplevel
    for name in pure:
        op_def = compat.op_def(name)
        assert not op_def.is_stateful, name
        assert name not in RISKY_OPS, name
        assert not any(a.type in ("func", "list(func)") for a in op_def.attr), name
    for name in ("WriteFile", "ReadFile", "PrintV2", "EagerPyFunc", "PyFunc", "RandomUniform",
                 "DecodeProtoV2", "ImmutableConst", "StatefulPartitionedCall",
                 "PartitionedCall", "TFRecordDatasetV2", "Assign", "ApplyGradientDescent",
                 "StatelessRandomUniformV2", "NoSuchOp", "_Send"):
        assert not allowed.pure_raw_op(name), name


def test_every_allowed_function_comes_from_a_pure_namespace_and_module():
    count = 0
    for space in allowed.PURE_NAMESPACES:
        root = tf
        for part in space.split(".") if space else ():
            root = getattr(root, part)
        for attr in dir(root):
            path = "%s.%s" % (space, attr) if space else attr
            fn = allowed.pure_tf_op(path)
            if fn is not None:
                count += 1
                assert fn.__module__.startswith("tensorflow.python.ops."), path
                assert "random" not in attr and "dropout" not in attr, path
    assert count > 500


def test_allow_op_functions_checks_its_arguments_and_restores():
    with pytest.raises(TypeError, match="dotted module names"):
        tf2.allow_op_functions("not a module")
    with pytest.raises(TypeError, match="dotted module names"):
        tf2.allow_op_functions(3)
    assert not allowed.allowed_module("pkg_a.ops")
    with tf2.allow_op_functions("pkg_a") as allowance:
        assert allowance.modules == ("pkg_a",)
        assert allowed.allowed_module("pkg_a.ops") and allowed.allowed_module("pkg_a")
        assert not allowed.allowed_module("pkg_ab")
        with tf2.allow_op_functions("pkg_a", "pkg_b") as inner:
            assert inner.modules == ("pkg_b",)
        assert allowed.allowed_module("pkg_a") and not allowed.allowed_module("pkg_b")
    assert not allowed.allowed_module("pkg_a")
