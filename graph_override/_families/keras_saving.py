"""Keras serialization of graph_override's TF2 callables.

`register` makes functions and classes known to every Keras in use as
``graph_override>NAME``, so a model that uses them saves by name and loads
without ``custom_objects``. An `op_with_gradient` wrapper is saved as two
names: its op function's (`op_fn_name`) and its gradient's
(`gradient_name`); `resolve_op_fn` and `resolve_gradient` turn them back.

Op function names are ``tf.PATH`` for TensorFlow's public op functions
(``tf.sign``, ``tf.raw_ops.Sign``) and ``module:qualname`` for a module-level
function of the user's own code. Loading never imports a module and runs
only what `graph_override._trust.allowed` allows: TensorFlow's pure op functions
and the functions the user named, so a saved file cannot name an arbitrary
function to run.
"""

import importlib
import os
import re
import sys
import sysconfig
import types

import tensorflow as tf

from graph_override import registry
from graph_override._trust import allowed
from graph_override.errors import SerializationError, UnknownGradientError

__all__ = ["PACKAGE", "gradient_name", "no_name", "op_fn_name", "register",
           "resolve_gradient", "resolve_op_fn", "wrapper_config", "wrapper_parts"]

PACKAGE = "graph_override"

# Where TensorFlow's public op functions are looked for, in this order, so
# that tf.math.round is saved as its shortest public name, tf.round.
_TF_NAMESPACES = ("", "math", "nn", "linalg", "bitwise", "image", "signal",
                  "compat.v1", "compat.v1.math", "compat.v1.nn")
# Top-level packages whose functions are never op functions of a user's own.
_REFUSED_PACKAGES = frozenset(("builtins", "graph_override", "keras", "numpy",
                               "tensorflow", "tf_keras"))


def _keras_modules():
    """The Keras modules in use, each once: `keras`, and `tf.keras` where
    that is another module (tf_keras)."""
    found = []
    for load in (lambda: importlib.import_module("keras"), lambda: tf.keras):
        try:
            module = load()
            utils = module.utils
        except (ImportError, AttributeError):  # pragma: no cover - no Keras
            continue
        if all(utils.get_registered_object is not u.get_registered_object
               for _, u in found):
            found.append((module, utils))
    return found


def register(objects):
    """Registers each function or class as ``graph_override>NAME`` with every
    Keras in use; registering again is a no-op.

    Keras 2 (TensorFlow 2.15) loads HDF5 files with its legacy deserializer,
    which looks an object up by its bare class name, so there a class is also
    added to ``keras.utils.get_custom_objects()`` under its own name (unless
    that name is taken)."""
    for module, utils in _keras_modules():
        keras_2 = not str(getattr(module, "__version__", "2")).startswith("3")
        for obj in objects:
            key = "%s>%s" % (PACKAGE, obj.__name__)
            if utils.get_registered_object(key) is None:
                utils.register_keras_serializable(package=PACKAGE, name=obj.__name__)(obj)
            if keras_2 and isinstance(obj, type):
                utils.get_custom_objects().setdefault(obj.__name__, obj)


# --- op functions ----------------------------------------------------------

def _attr_path(root, dotted, private=False):
    """root.a.b.c for dotted "a.b.c" of identifiers (public ones unless
    `private`), or None."""
    obj = root
    for part in dotted.split("."):
        if not part.isidentifier() or (part.startswith("_") and not private):
            return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _is_tf_op_function(fn):
    return str(getattr(fn, "__module__", None)).startswith("tensorflow.python.ops.")


def _standard_library(top):
    if hasattr(sys, "stdlib_module_names"):  # Python 3.10+
        return top in sys.stdlib_module_names
    if top in sys.builtin_module_names:  # pragma: no cover - Python 3.9
        return True
    path = os.path.realpath(getattr(sys.modules.get(top), "__file__", None) or "")
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
    return path.startswith(stdlib) and "site-packages" not in path


def _user_module(module):
    top = module.split(".")[0]
    return top not in _REFUSED_PACKAGES and not _standard_library(top)


def _tf_name(op_fn):
    name = getattr(op_fn, "__name__", None)
    if not _is_tf_op_function(op_fn) or not isinstance(name, str):
        return None
    for space in _TF_NAMESPACES:
        path = "%s.%s" % (space, name) if space else name
        if _attr_path(tf, path) is op_fn:
            return "tf." + path
    for key, value in vars(tf.raw_ops).items():
        if value is op_fn:
            return "tf.raw_ops." + key
    return None


def op_fn_name(op_fn):
    """(name, None) for an op function that can be saved by name, or
    (None, why) with the reason it cannot."""
    name = _tf_name(op_fn)
    if name is not None:
        return name, None
    what = getattr(op_fn, "__qualname__", None) or repr(op_fn)
    if not isinstance(op_fn, types.FunctionType):
        return None, "%r is a %s, not a function" % (op_fn, type(op_fn).__name__)
    module = op_fn.__module__ or ""
    if op_fn.__name__ == "<lambda>":
        return None, "%s is a lambda" % what
    if "<locals>" in what:
        return None, "%s is defined inside another function" % what
    if _is_tf_op_function(op_fn):
        return None, ("%s.%s has no public name in tf.raw_ops or %s" % (
            module, what, ", ".join("tf." + n if n else "tf" for n in _TF_NAMESPACES)))
    if not _user_module(module):
        return None, ("%s.%s is a function of %s, not a TensorFlow op function "
                      "such as tf.sign" % (module, what, module.split(".")[0]))
    if _attr_path(sys.modules.get(module), what, private=True) is not op_fn:
        return None, "%s is not reachable as %s.%s" % (what, module, what)
    return "%s:%s" % (module, what), None


def _how_to_allow(name, module, qualname):
    if module == "tf":
        return ("If you trust this file, pass the function in custom_objects under "
                "the saved name: keras.models.load_model(path, custom_objects="
                "{%r: %s})." % (name, name))
    return ("If you trust this file, pass the function in custom_objects "
            "(keras.models.load_model(path, custom_objects={%r: %s.%s})), register it "
            "with keras.utils.register_keras_serializable, or allow its module with "
            "graph_override.tf2.allow_op_functions(%r)." % (
                qualname, module, qualname, module))


def resolve_op_fn(name, where):
    """The op function saved as `name`; `where` says what is being loaded.

    A saved model may name TensorFlow's pure op functions and the functions
    the user named (`graph_override._trust.allowed`); deciding runs nothing.

    Raises:
      SerializationError: `name` is malformed, or names a function that is
        not allowed (the message names it and says how to allow it), or one
        of an allowed module this process has not imported.
    """
    if not isinstance(name, str) or not name:
        raise SerializationError("%s: the op function must be saved as a name "
                                 "such as 'tf.sign' or 'module:function', got %r"
                                 % (where, name))
    utils = [u for _, u in _keras_modules()]
    if name.startswith("tf.") and ":" not in name:
        fn = allowed.pure_tf_op(name[3:]) or allowed.user_named(utils, name, None, None)
        if fn is None:
            raise SerializationError(
                "%s: the saved model names %s, which is not one of the TensorFlow "
                "op functions a saved model may name: those of %s and tf.raw_ops that "
                "build ops from their inputs alone (no files, Python code, random or "
                "process state). %s" % (where, name, ", ".join(
                    "tf." + n if n else "tf" for n in allowed.PURE_NAMESPACES[:6]),
                    _how_to_allow(name, "tf", name[3:])))
        return fn
    module, _, qualname = name.partition(":")
    if (not module or not qualname
            or not all(p.isidentifier() for p in module.split(".") + qualname.split("."))):
        raise SerializationError(
            "%s: the op function %r is neither a TensorFlow op function "
            "('tf.sign') nor 'module:function'." % (where, name))
    fn = allowed.user_named(utils, name, module, qualname)
    if fn is not None:
        return fn
    if not allowed.allowed_module(module):
        raise SerializationError(
            "%s: the saved model names the function %s of module %r, which you have "
            "not allowed; loading runs only TensorFlow's pure op functions and "
            "functions you name. %s" % (where, qualname, module,
                                        _how_to_allow(name, module, qualname)))
    if module not in sys.modules:
        raise SerializationError(
            "%s needs the op function %s from module %r, which this process "
            "has not imported. Import %s before keras.models.load_model "
            "(loading never imports a module)." % (where, qualname, module, module))
    fn = _attr_path(sys.modules[module], qualname, private=True)
    if (not isinstance(fn, types.FunctionType) or fn.__module__ != module
            or fn.__qualname__ != qualname):
        raise SerializationError(
            "%s: module %r has no module-level function %r." % (where, module, qualname))
    return fn


# --- gradients -------------------------------------------------------------

def gradient_name(gradient):
    """(name, None) for a gradient name or a registered gradient function, or
    (None, why) for a function registered under no name."""
    if isinstance(gradient, str):
        return str(gradient), None
    name = registry.registered_name(gradient)
    if name is not None:
        return name, None
    return None, ("gradient function %s is registered under no name" % (
        getattr(gradient, "__qualname__", None) or repr(gradient)))


def resolve_gradient(name, where):
    """Makes sure gradient `name` resolves in this process; returns it.

    Raises:
      UnknownGradientError: nothing is registered under `name` here.
      SerializationError: `name` is not a string.
    """
    if not isinstance(name, str) or not name:
        raise SerializationError("%s: the gradient must be saved as a registered "
                                 "name, got %r" % (where, name))
    try:
        return registry.resolve(name)
    except UnknownGradientError as e:
        hint = re.search(r" Did you mean [^?]*\?", str(e))
        raise UnknownGradientError(
            "%s names the gradient %r, which is not registered in this process.%s "
            "Import the module that registers it (with "
            "graph_override.register_gradient or tf.RegisterGradient) before "
            "keras.models.load_model." % (where, name, hint.group(0) if hint else "")
        ) from None


# --- op_with_gradient wrappers ---------------------------------------------

def wrapper_config(wrapper, op_fn, gradient):
    """The config of an OpWithGradient: both names, or SerializationError
    saying which part has none and what to do."""
    op_name, op_why = op_fn_name(op_fn)
    grad_name, grad_why = gradient_name(gradient)
    if op_why is None and grad_why is None:
        return {"op_fn": op_name, "gradient": grad_name}
    fixes = []
    if op_why:
        fixes.append("op_fn: %s; use a TensorFlow op function such as tf.sign, or "
                     "a function defined at the top level of a module of your "
                     "own" % op_why)
    if grad_why:
        fixes.append("gradient: %s; register it with graph_override.register_"
                     "gradient(fn, name=\"...\") and pass the name (or the "
                     "function)" % grad_why)
    raise SerializationError("%r cannot be saved by name. %s." % (
        wrapper, ". ".join(fixes)))


def wrapper_parts(config):
    """(op function, gradient name) of a saved OpWithGradient config."""
    if not isinstance(config, dict) or set(config) != {"op_fn", "gradient"}:
        raise SerializationError(
            "a saved OpWithGradient config has the keys 'op_fn' and 'gradient', "
            "got %r" % (config,))
    where = "op_with_gradient(%s, %r)" % (config["op_fn"], config["gradient"])
    op_fn = resolve_op_fn(config["op_fn"], where)
    return op_fn, resolve_gradient(config["gradient"], where)


def no_name(obj):
    """The `__name__` of graph_override's callable objects: an AttributeError
    (they have none), whose message Keras 2's Lambda layer shows when it
    saves: it stores a callable by that name only, which loads as nothing."""
    raise AttributeError(
        "%r has no __name__: it is an object, not a function. (Keras 2's "
        "Lambda layer saves a callable by its __name__ only, and cannot load "
        "it back: use keras.layers.Activation(...), or a layer of your own "
        "that saves it in its config.)" % (obj,))
