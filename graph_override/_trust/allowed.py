"""What a saved model may name as a function to run: an allow-list.

A Keras file that holds an `op_with_gradient` wrapper names its op function,
and loading the model calls it. Loading finds such a name only if it is

* a pure TensorFlow op function: ``tf.PATH`` in tf, tf.math, tf.nn,
  tf.linalg, tf.bitwise, tf.signal (or their tf.compat.v1 twins) defined in
  one of TensorFlow's op-building modules (`pure_tf_op`), or ``tf.raw_ops.OP``
  of an op that is not stateful, calls no function and touches no file,
  queue, table, variable, random state or other process (`pure_raw_op`);
* a function the user named: passed in ``custom_objects`` (under its name or
  the name the file saves), registered with
  ``keras.utils.register_keras_serializable``, or of a module the user
  allowed with `allow_op_functions` (`user_named`, `allowed_module`).

Deciding never imports a module, never calls the function, and looks up an
attribute of a user's module only where the user allowed that module, so a
refused name runs nothing.
"""

import types

import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override._trust.op_signatures import outside_reason

__all__ = ["PURE_NAMESPACES", "allow_op_functions", "allowed_module", "pure_raw_op",
           "pure_tf_op", "user_named"]

# The tf namespaces whose op functions a saved model may name.
PURE_NAMESPACES = ("", "math", "nn", "linalg", "bitwise", "signal", "compat.v1",
                   "compat.v1.math", "compat.v1.nn", "compat.v1.linalg",
                   "compat.v1.bitwise", "compat.v1.signal")
# TensorFlow's modules whose public functions build ops from their inputs
# and nothing else (no files, variables, Python callbacks, process settings).
_PURE_MODULES = frozenset("tensorflow.python.ops." + m for m in (
    "array_ops", "array_ops_stack", "clip_ops", "gen_array_ops", "gen_bitwise_ops",
    "gen_linalg_ops", "gen_math_ops", "gen_nn_ops", "gen_spectral_ops", "linalg_ops",
    "linalg.linalg_impl", "manip_ops", "math_ops", "nn_impl", "nn_ops", "sort_ops",
    "special_math_ops", "signal.dct_ops", "signal.fft_ops", "signal.mel_ops",
    "signal.mfcc_ops", "signal.reconstruction_ops", "signal.shape_ops",
    "signal.spectral_ops", "signal.window_ops"))
# Functions of those modules that are not pure: random numbers change the
# process's random state; placeholders and variables change graph state.
_IMPURE_WORDS = ("random", "dropout", "sampled", "sampler", "nce_loss", "placeholder",
                 "variable", "file", "shuffle")
# Raw ops by name that touch files, queues, tables, devices, other processes
# or the process's state, even where their op def says stateless.
_IMPURE_RAW_WORDS = (
    "Dataset", "Iterator", "Reader", "Summary", "File", "Debug", "Rpc", "Remote",
    "Collective", "Send", "Recv", "Table", "Queue", "Stack", "TensorArray", "Barrier",
    "Checkpoint", "Save", "Restore", "Proto", "Resource", "Variable", "Py", "Print",
    "Random", "Sampl", "Shuffle", "Dropout", "Assign", "Mutex", "Accumulator", "TPU",
    "Tpu", "Call", "Session", "Immutable", "Scoped", "Optional", "Tensorlist", "Map",
    "Nccl", "Xla", "Apply", "Inplace", "_")


def pure_raw_op(op_name):
    """Whether tf.raw_ops.`op_name` is an op a saved model may name: known
    here, not stateful, without function attributes or reference (TF1
    variable) arguments, and named like none of the ops that reach outside
    their inputs."""
    op_def = compat.op_def(op_name)
    if op_def is None or op_def.is_stateful:
        return False
    if any(a.type in ("func", "list(func)") for a in op_def.attr):
        return False
    if any(arg.is_ref for arg in list(op_def.input_arg) + list(op_def.output_arg)):
        return False  # writes to a TF1 variable
    if outside_reason(op_def) is not None:
        return False  # a file, a path or an address among its arguments
    return not any(word in op_name for word in _IMPURE_RAW_WORDS)


def pure_tf_op(path):
    """The pure op function at tf.`path` ("sign", "math.round",
    "raw_ops.Sign"), or None. Looks up attributes only along the pure
    namespaces: a refused path imports and runs nothing."""
    namespace, _, name = path.rpartition(".")
    if not name.isidentifier() or name.startswith("_"):
        return None
    if namespace == "raw_ops":
        fn = getattr(tf.raw_ops, name, None) if pure_raw_op(name) else None
        return fn if callable(fn) else None
    if namespace not in PURE_NAMESPACES:
        return None
    root = tf
    for part in namespace.split(".") if namespace else ():
        root = getattr(root, part, None)
    fn = getattr(root, name, None)
    if (not callable(fn) or isinstance(fn, type)
            or getattr(fn, "__module__", None) not in _PURE_MODULES):
        return None
    lower = name.lower()
    return None if any(word in lower for word in _IMPURE_WORDS) else fn


# --- what the user named ---------------------------------------------------

_ALLOWED_MODULES = set()


class _Allowance:
    """What `allow_op_functions` returns: used in a ``with`` statement, the
    modules it allowed are allowed only inside it."""

    def __init__(self, added):
        self.modules = tuple(added)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _ALLOWED_MODULES.difference_update(self.modules)
        return False

    def __repr__(self):
        return "allow_op_functions(%s)" % ", ".join(map(repr, self.modules))


def allow_op_functions(*modules):
    """Lets saved Keras models name the functions of these modules (and of
    their submodules) as ``op_with_gradient`` op functions.

    A saved model names such a function as ``"module:function"``; loading
    runs it. By default loading accepts only TensorFlow's pure op functions
    and functions you name in ``custom_objects`` or register with Keras; call
    this for modules whose every top-level function you would run on the
    word of a model file. Allowing a module does not import it.

    Args:
      *modules: module objects or dotted module names ("my_project.ops").

    Returns:
      An object that, used as a context manager, withdraws the allowance on
      exit (for modules that were not allowed before). Without ``with`` the
      allowance lasts for the process.

    Raises:
      TypeError: a module is neither a module nor a dotted name.

    Example:
      >>> from graph_override import tf2
      >>> with tf2.allow_op_functions("my_project.ops"):
      ...     pass  # keras.models.load_model("model.keras") here
    """
    names = []
    for module in modules:
        name = module.__name__ if isinstance(module, types.ModuleType) else module
        if not isinstance(name, str) or not all(p.isidentifier() for p in name.split(".")):
            raise TypeError("allow_op_functions: expected modules or dotted module names "
                            "such as 'my_project.ops', got %r" % (module,))
        names.append(name)
    added = [n for n in dict.fromkeys(names) if n not in _ALLOWED_MODULES]
    _ALLOWED_MODULES.update(added)
    return _Allowance(added)


def allowed_module(module):
    """Whether the user allowed `module` (or a package holding it)."""
    parts = module.split(".")
    return any(".".join(parts[:k]) in _ALLOWED_MODULES for k in range(1, len(parts) + 1))


def user_named(keras_utils, saved, module, qualname):
    """What the user gave Keras for the saved name `saved`: the function given
    in ``custom_objects`` (the scope of the load in progress) under that very
    name; else the function `module`.`qualname` given there under its own
    name or registered with ``register_keras_serializable``; else None.
    Looks at Keras's registries only, never at the module."""
    for utils in keras_utils:
        given = utils.get_registered_object(saved)
        if callable(given):  # the very name the file saves: the user's choice
            return given
        if module is None:
            continue
        found = [utils.get_registered_object(qualname)]
        found += list(utils.get_custom_objects().values())
        for obj in found:
            if (callable(obj) and getattr(obj, "__module__", None) == module
                    and getattr(obj, "__qualname__", None) == qualname):
                return obj
    return None

