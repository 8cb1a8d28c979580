"""Quantizers from saved Keras configs: the function a config names, and
the quantizer object a class config describes, refusing what is not a
quantizer of `graph_override.keras.quantizers`, of larq, or of the user's
own (`custom_objects`, Keras's registry). `quantizers.deserialize` and
`quantizers.get` are these; the tables they read (`quantizers.BY_NAME`,
`quantizers.FUNCTIONS`) stay with the classes, read when called."""

import types

import tensorflow as tf

__all__ = ["decorated_function_config", "deserialize", "function_named"]

# The module the quantizer classes are saved under.
_QUANTIZERS = "graph_override.keras.quantizers"


def decorated_function_config(quantizer):
    """The config of a function that TensorFlow decorated (a
    ``@tf.custom_gradient`` function, larq's recipe for a quantizer of one's
    own): the function's config, by the decorated function's name or the
    name it was registered with, where Keras would save the class name of
    the callable object TensorFlow made of it (``Bind``), which no process
    can load. None for anything else."""
    wrapped = getattr(quantizer, "__wrapped__", None)
    if (isinstance(quantizer, types.FunctionType) or not hasattr(quantizer, "_tf_decorator")
            or not isinstance(wrapped, types.FunctionType)):
        return None
    config = tf.keras.utils.serialize_keras_object(wrapped)
    name = tf.keras.utils.get_registered_name(quantizer)
    if isinstance(config, dict):
        return dict(config, config=name)
    return name


def function_named(name, custom_objects=None):
    """The function a saved quantizer config names: one of `FUNCTIONS`
    (first: larq, once imported, registers functions of the same names with
    Keras), else the user's (in `custom_objects`, a Keras custom object scope
    such as ``load_model(custom_objects=...)`` opens, or registered with
    Keras); None if none of them is a function."""
    if not isinstance(name, str):
        return None
    from graph_override.keras import quantizers  # pylint: disable=import-outside-toplevel
    found = quantizers.FUNCTIONS.get(name)
    if found is None:
        found = (custom_objects or {}).get(name)
    if found is None:
        found = tf.keras.utils.get_registered_object(name)
    return found if callable(found) and not isinstance(found, type) else None


def deserialize(config, custom_objects=None):
    """The quantizer a config from `serialize` describes (new or legacy
    Keras format).

    Raises:
      ValueError: the config names a function that is neither one of this
        module's nor known to Keras (a function of the user's own, which a
        saved model holds by name only), or something that does not load
        as a quantizer (a class of another module, such as os.system)."""
    if isinstance(config, dict) and config.get("class_name") == "function":
        found = function_named(config.get("config"), custom_objects)
        if found is None:
            name = config.get("config")
            raise ValueError(
                "the quantizer is the function %r, which is not one of "
                "graph_override.keras.quantizers' functions; a saved model keeps a "
                "function of your own by name only: load it with "
                "custom_objects={%r: %s}, or register the function with "
                "@tf.keras.utils.register_keras_serializable()" % (name, name, name))
        return found
    if _foreign(config, custom_objects):
        raise ValueError(_not_a_quantizer(config))
    from graph_override.keras.quantizers import BY_NAME  # pylint: disable=import-outside-toplevel
    legacy = getattr(tf.keras.utils, "legacy", None)
    if (legacy is not None and isinstance(config, dict) and "module" not in config
            and "registered_name" not in config):
        found = legacy.deserialize_keras_object(
            config, module_objects=BY_NAME, custom_objects=custom_objects,
            printable_module_name="quantizer")
    else:
        found = tf.keras.utils.deserialize_keras_object(
            config, module_objects=BY_NAME, custom_objects=custom_objects,
            printable_module_name="quantizer")
    # Keras hands back the bare class name for a class it does not know in a
    # module it does not load ({"module": "os", "class_name": "system"} gives
    # 'system'): such a "quantizer" would fail only at the model's first call.
    if isinstance(found, (str, bytes, type)) or not callable(found):
        raise ValueError(_not_a_quantizer(config) + " (it loaded as %r)" % (found,))
    return found


def _foreign(config, custom_objects):
    """True if a class config names a module other than this one's (or
    larq's, whose names this package takes) for a class that neither
    `custom_objects` nor Keras's registry holds."""
    if not isinstance(config, dict) or config.get("class_name") == "function":
        return False
    module = config.get("module")
    if not isinstance(module, str) or module in (_QUANTIZERS, "larq.quantizers"):
        return False
    for key in ("registered_name", "class_name"):
        name = config.get(key)
        if isinstance(name, str) and (name in (custom_objects or {}) or
                                      tf.keras.utils.get_registered_object(name) is not None):
            return False
    return True


def _not_a_quantizer(config):
    return ("the config names %s, which is not a quantizer: not one of "
            "graph_override.keras.quantizers' classes, nor one given in custom_objects "
            "or registered with Keras; a saved model is trusted with nothing else"
            % _named(config))


def _named(config):
    """``module.class_name`` of a config, as it names itself."""
    if not isinstance(config, dict):
        return repr(config)
    name = config.get("registered_name") or config.get("class_name")
    module = config.get("module")
    return "%s.%s" % (module, name) if isinstance(module, str) and module else repr(name)
