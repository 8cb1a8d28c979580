"""Loading models that larq saved (``.h5`` and SavedModel), on Keras 3 or 2.

`load_larq_model` reads the model's config from the file, renames every larq
class in it (layers, quantizers, ``weight_clip``) to this package's
registered name (``graph_override>QuantDense``, ...), builds the model from
that config and then reads the weights. Renaming, not ``custom_objects``, is
what makes it safe: after a failed ``import larq`` under Keras 3, larq's
classes sit in Keras's global registry under their bare names
("QuantDense", "SteSign"), and Keras's ``.h5`` loader prefers them to the
``custom_objects`` it is given, so the model would load without error and
without quantization. A renamed config never asks for a bare name.

Keras 2's TFOpLambda layers (``x + y`` on symbolic tensors, as larq-zoo's
QuickNet adds its residuals) become the pure op they name, or are refused
by name (graph_override.keras.tf_op_layer). Functions larq-zoo registered
(QuickNet's initializer, DoReFaNet's quantizer) are known by name;
``custom_objects`` names the user's own.

`larq_custom_objects` is the plain mapping, for code that calls
``keras.models.load_model`` itself (safe where larq was never imported).
"""

import inspect
import json
import os

import numpy as np
import tensorflow as tf

from graph_override.errors import SerializationError
from graph_override.keras import constraints, layers, quantizers, tf_op_layer

__all__ = ["larq_custom_objects", "load_larq_model"]

_MODULES = {layers: "graph_override.keras.layers",
            quantizers: "graph_override.keras.quantizers",
            constraints: "graph_override.keras.constraints"}


def larq_custom_objects():
    """``{larq's name: this package's class}`` for every layer, quantizer
    (class names and larq's aliases such as "ste_sign") and constraint."""
    found = {cls.__name__: cls for cls in layers.LAYERS}
    found.update(quantizers.BY_NAME)
    found.update(constraints.BY_NAME)
    return found


def _renamed(config, names):
    """`config` with every larq class renamed to its registered name here."""
    if isinstance(config, list):
        return [_renamed(c, names) for c in config]
    if not isinstance(config, dict):
        return config
    if config.get("class_name") in ("__tuple__", "TensorShape") and "items" in config:
        return _renamed(config["items"], names)  # Keras 2's JSON of a tuple or shape
    out = {k: _renamed(v, names) for k, v in config.items()}
    name = out.get("class_name")
    larq_module = str(out.get("module") or "larq").startswith("larq")
    if name == "DepthwiseConv2D" and isinstance(out.get("config"), dict) \
            and hasattr(tf.keras, "ops") and out["config"].get("groups") == 1:
        del out["config"]["groups"]  # Keras 2 saves it; Keras 3's layer has none
    if isinstance(name, str) and name in names and larq_module:
        cls = names[name]
        if cls in layers.LAYERS:
            _drop_keras_2_only(cls, out.get("config"))
        out["class_name"] = cls.__name__ if "module" in out else "graph_override>" + cls.__name__
        if "module" in out:
            out["module"] = next(m for mod, m in _MODULES.items()
                                 if getattr(mod, cls.__name__, None) is cls)
            out["registered_name"] = "graph_override>" + cls.__name__
    return out


_LAYER_KEYS = frozenset(("name", "trainable", "dtype", "input_shape", "batch_input_shape",
                         "batch_size", "input_dim", "autocast", "input_quantizer",
                         "kernel_quantizer", "depthwise_quantizer", "pointwise_quantizer",
                         "pad_values"))


def _drop_keras_2_only(cls, config):
    """Under Keras 3, drops the settings Keras 2 saved that the Keras 3 layer
    does not take and that do not change it: ``groups: 1`` of depthwise
    convolutions, the unused ``kernel_*`` of separable ones."""
    if not hasattr(tf.keras, "ops") or not isinstance(config, dict):
        return
    keras_base = next(c for c in cls.__mro__ if c.__module__.startswith("keras"))
    taken = set(inspect.signature(keras_base.__init__).parameters) | _LAYER_KEYS
    for key in [k for k in config if k not in taken]:
        if key == "groups" and config[key] != 1:
            continue  # left for Keras to refuse
        del config[key]


def _model_from_config(config, path, custom_objects):
    legacy = getattr(getattr(tf.keras, "legacy", None), "saving", None)
    try:
        config = _renamed(tf_op_layer.translate(config, path), larq_custom_objects())
        if legacy is None:  # Keras 2 reads its own configs
            return tf.keras.models.model_from_json(json.dumps(config),
                                                   custom_objects=custom_objects)
        # Keras 3 reads Keras 2's configs with its legacy deserializer, as
        # its own .h5 loader does.
        objects = dict(vars(tf.keras.layers), Functional=tf.keras.Model,
                       Model=tf.keras.Model, Sequential=tf.keras.Sequential)
        return legacy.deserialize_keras_object(config, module_objects=objects,
                                               custom_objects=custom_objects)
    except SerializationError:
        raise  # says what it refused, and why
    except RecursionError as e:
        raise SerializationError("%s: cannot build the model from its saved config: it "
                                 "is nested too deeply" % path) from e
    except (ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, tf.errors.OpError) as e:
        # A damaged or hand-edited config reaches Keras's deserializer,
        # which raises whatever the first value it does not expect makes.
        raise SerializationError("%s: cannot build the model from its saved config: %s: %s"
                                 % (path, type(e).__name__, e)) from e


def _load_h5(path, custom_objects):
    import h5py  # pylint: disable=import-outside-toplevel
    with h5py.File(path, "r") as f:
        config = f.attrs.get("model_config")
    if config is None:
        raise SerializationError("%s has no model config (weights only?); build the "
                                 "model in code and use model.load_weights." % path)
    config = _model_json(config, path, "its model_config")
    model = _model_from_config(config, path, custom_objects)
    model.load_weights(path)
    return model


def _model_json(text, path, what):
    """The JSON object `text` holds (bytes are UTF-8), or a SerializationError
    naming `path` and `what` (the part of the file that holds it)."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        config = json.loads(text)
    except UnicodeDecodeError as e:
        raise SerializationError("%s: %s is not UTF-8 text (byte %d): the file is damaged."
                                 % (path, what, e.start)) from None
    except ValueError as e:  # JSONDecodeError
        raise SerializationError("%s: %s is not valid JSON (%s): the file is damaged."
                                 % (path, what, e)) from None
    except RecursionError:
        raise SerializationError("%s: %s is JSON nested too deeply to read." % (path, what)) \
            from None
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str) \
            or not isinstance(config.get("config"), dict):
        raise SerializationError(
            "%s: %s is not a model config (a JSON object with a class_name string and a "
            "config object); got %s." % (path, what, _kind(config)))
    return config


def _kind(value):
    if isinstance(value, dict):
        return "an object with keys %s" % ", ".join(sorted(map(str, value))[:8])
    return "a JSON %s" % type(value).__name__


class _Damaged(Exception):
    """What is wrong with a protobuf message, at which byte."""


def _fields(data):
    """(field number, bytes) of the length-delimited fields of a protobuf
    message, skipping the others.

    Raises:
      _Damaged: a field that runs past the end, or a wire type that no
        message of these has.
    """
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        kind = key & 7
        if kind == 0:
            _, pos = _varint(data, pos)
        elif kind == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise _Damaged("the field at byte %d claims %d bytes, %d are left"
                               % (start, size, len(data) - pos))
            yield key >> 3, data[pos:pos + size]
            pos += size
        elif kind in (1, 5):
            pos += 8 if kind == 1 else 4
            if pos > len(data):
                raise _Damaged("the field at byte %d runs past the end" % start)
        else:
            raise _Damaged("the field at byte %d has wire type %d, which these "
                           "messages do not use" % (start, kind))


def _varint(data, pos):
    value = shift = 0
    start = pos
    while True:
        if pos >= len(data) or shift > 63:
            raise _Damaged("the number at byte %d %s" % (
                start, "runs past the end" if pos >= len(data) else "is over 64 bits"))
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _saved_model_config(path):
    """The model config Keras 2 kept in a SavedModel's keras_metadata.pb
    (SavedMetadata: nodes = 1; a node: node_path = 3, metadata = 5)."""
    meta = os.path.join(path, "keras_metadata.pb")
    if not os.path.exists(meta):
        raise SerializationError("%s is a SavedModel without keras_metadata.pb: it was "
                                 "not saved by Keras 2, so it has no model config." % path)
    with open(meta, "rb") as f:
        data = f.read()
    try:
        for number, node in _fields(data):
            fields = dict(_fields(node)) if number == 1 else {}
            if fields.get(3) == b"root" and 5 in fields:
                return _model_json(fields[5], meta, "the root model's metadata")
    except _Damaged as e:
        raise SerializationError("%s is damaged: %s (of %d)." % (meta, e, len(data))) \
            from None
    raise SerializationError("%s describes no root model: the file is damaged, or was "
                             "not written by Keras 2." % meta)


def _short(name):
    return name.split("/")[-1].split(":")[0]


def _load_saved_model(path, custom_objects):
    meta = _saved_model_config(path)
    model = _model_from_config({"class_name": meta["class_name"], "config": meta["config"]},
                               path, custom_objects)
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    saved = reader.get_variable_to_shape_map()
    weighted = [l for l in model.layers if l.weights]
    saved_layers = {k.split("/")[0] for k in saved if k.startswith("layer_with_weights-")}
    if len(saved_layers) != len(weighted):
        raise SerializationError(
            "%s: keras_metadata.pb describes %d layers with weights, the checkpoint holds "
            "%d: the files do not belong together, or one is damaged."
            % (path, len(weighted), len(saved_layers)))
    for index, layer in enumerate(weighted):
        prefix = "layer_with_weights-%d/" % index
        keys = {k[len(prefix):].split("/")[0]: k for k in saved
                if k.startswith(prefix) and k.endswith("/.ATTRIBUTES/VARIABLE_VALUE")}
        for weight in layer.weights:
            name = _short(weight.name)
            if name not in keys:  # Keras 3 calls DepthwiseConv2D's kernel "kernel"
                same = [k for k in keys if list(saved[keys[k]]) == list(weight.shape)]
                if len(same) != 1:
                    raise SerializationError(
                        "%s: no saved value for weight %r of layer %r (saved: %s)" % (
                            path, name, layer.name, ", ".join(sorted(keys)) or "none"))
                name = same[0]
            key = keys.pop(name)
            if list(saved[key]) != list(weight.shape):
                raise SerializationError(
                    "%s: the saved value of weight %r of layer %r has shape %s; the layer "
                    "keras_metadata.pb describes has %s: the files do not belong together, "
                    "or one is damaged." % (path, name, layer.name, list(saved[key]),
                                            list(weight.shape)))
            weight.assign(np.asarray(reader.get_tensor(key)))
    return model


def load_larq_model(path, custom_objects=None):
    """The model larq saved at `path` (``.h5`` file or SavedModel folder),
    built from this package's layers and quantizers, with its weights: the
    same outputs as under larq. It is not compiled (compile it to train).
    `custom_objects` ({saved name: function or class}) names the
    functions of your own the model was saved with (a quantizer, an
    initializer); larq-zoo's are known.

    Example (with larq's file under TensorFlow 2.21 / Keras 3)::

        import graph_override.keras as lq
        model = lq.load_larq_model("bnn.h5")       # or "bnn_savedmodel/"
        model.compile("adam", "sparse_categorical_crossentropy")

    Raises:
      SerializationError: `path` is neither, has no model config, or a
        weight has no saved value or one of another shape; or the file
        that holds the config (keras_metadata.pb, the .h5's model_config)
        is damaged: truncated, not UTF-8, not JSON, nested too deeply, not
        a model config, or one Keras cannot build; or a TFOpLambda layer
        names an op that is not pure, or a Lambda layer holds Python
        code. The message names the file and what is wrong with it.
      FileNotFoundError: nothing at `path`.
    """
    from graph_override.keras.zoo import functions  # pylint: disable=import-outside-toplevel
    objects = dict(functions.BY_NAME, **functions.MODELS)
    objects.update(custom_objects or {})
    with tf.keras.utils.custom_object_scope(objects):
        return _load(os.fspath(path), objects)


def _load(path, custom_objects):
    if os.path.isdir(path):
        return _load_saved_model(path, custom_objects)
    if not os.path.exists(path):
        raise FileNotFoundError("load_larq_model: no file or folder %s" % path)
    with open(path, "rb") as f:
        if f.read(8) != b"\x89HDF\r\n\x1a\n":
            raise SerializationError("%s is neither an HDF5 file (.h5) nor a SavedModel "
                                     "folder." % path)
    return _load_h5(path, custom_objects)
