"""The one place where graph_override touches TensorFlow's private symbols.

TensorFlow moves private modules between releases (``tape`` became ``record``
in 2.13, the op registry went to C++ in 2.12). Everything the library needs
beyond the public API is reached through the functions below, so a release
that moves a symbol breaks this module and nothing else. docs/guide/compat.md
lists what each supported release provides.
"""

import difflib
import functools

import tensorflow as tf
from tensorflow.python.framework import convert_to_constants as _convert_to_constants
from tensorflow.python.framework import function_def_to_graph as _function_def_to_graph
from tensorflow.python.framework import op_def_registry as _op_def_registry
from tensorflow.python.framework import ops as _ops

from tensorflow.python.eager import context as _context

try:  # TensorFlow >= 2.13
    from tensorflow.python.eager import record as _record
except ImportError:  # pragma: no cover - older releases
    from tensorflow.python.eager import tape as _record

__all__ = [
    "all_op_types",
    "eager_scope",
    "freeze_concrete_function",
    "function_def_to_graph",
    "gradient_registry_entries",
    "gradient_registry_location",
    "gradient_registry_names",
    "has_gradient_entry",
    "in_v1_control_flow",
    "is_op_type",
    "keras_multi_worker_fit",
    "lookup_gradient",
    "op_def",
    "op_type_suggestions",
    "operations_since",
    "operation_count",
    "override_map_entries",
    "register_gradient_function",
    "restore_override_map_entries",
    "tape_records",
]


def _registry():
    return _ops._gradient_registry  # pylint: disable=protected-access


def _entry(name):
    """TensorFlow's registry entry for `name` ({"type": fn, "location": frame})."""
    return _registry()._registry.get(name)  # pylint: disable=protected-access


def lookup_gradient(name):
    """Returns the function TensorFlow's registry holds for `name`, or None
    (also for a ``tf.no_gradient`` entry; see `has_gradient_entry`)."""
    entry = _entry(name)
    return None if entry is None else entry["type"]


def gradient_registry_location(name):
    """Where TensorFlow recorded the registration of `name`, as 'file:line'."""
    entry = _entry(name)
    if entry is None:
        return None
    frame = entry.get("location")
    try:
        return "%s:%s" % (frame.filename, frame.lineno)
    except AttributeError:
        return "an unknown location"


def gradient_registry_entries():
    """The number of names in TensorFlow's gradient registry."""
    return len(_registry().list())


def gradient_registry_names():
    """Every name in TensorFlow's gradient registry."""
    return list(_registry().list())


def register_gradient_function(name, fn):
    """Registers `fn` under `name` in TensorFlow's own gradient registry."""
    tf.RegisterGradient(name)(fn)


def is_op_type(op_type):
    """True if TensorFlow's op registry knows `op_type` (e.g. 'Sign')."""
    return op_def(op_type) is not None


@functools.lru_cache(maxsize=1)
def all_op_types():
    """Every op type registered with TensorFlow, sorted."""
    names = {n for n in dir(tf.raw_ops) if n[:1].isupper()}
    return sorted(names)


def op_type_suggestions(op_type, limit=3):
    """Registered op types that look like `op_type`, best first."""
    names = all_op_types()
    folded = [n for n in names if n.lower() == str(op_type).lower()]
    close = difflib.get_close_matches(str(op_type), names, n=limit, cutoff=0.6)
    out = []
    for n in folded + close:
        if n not in out:
            out.append(n)
    return out[:limit]


def operation_count(graph):
    """How many ops `graph` holds (ops are never removed from a graph)."""
    try:
        return len(graph._nodes_by_id)  # pylint: disable=protected-access
    except (AttributeError, TypeError):  # pragma: no cover
        return len(graph.get_operations())


def operations_since(graph, count):
    """The ops added to `graph` after it held `count` ops, in creation order."""
    return graph.get_operations()[count:]


def tape_records(tensors):
    """True if a GradientTape that is recording now would watch `tensors`."""
    return bool(_record.should_record_backprop(list(tensors)))


def has_gradient_entry(name):
    """True if TensorFlow's gradient registry has any entry for `name`,
    including ``tf.no_gradient`` (NotDifferentiable) entries, whose
    function is None; False where tf.gradients raises LookupError."""
    return _entry(name) is not None


def op_def(op_type):
    """TensorFlow's OpDef of `op_type` (its inputs, outputs and attrs), or None."""
    return _op_def_registry.get(op_type)


_MISSING = object()


def override_map_entries(graph, op_types):
    """The current entries of `graph`'s gradient override map for
    `op_types`, to give to `restore_override_map_entries`."""
    current = graph._gradient_override_map  # pylint: disable=protected-access
    return {t: current.get(t, _MISSING) for t in op_types}


def restore_override_map_entries(graph, saved):
    """Puts back the entries `override_map_entries` returned (removing those
    that were absent then)."""
    current = graph._gradient_override_map  # pylint: disable=protected-access
    for op_type, value in saved.items():
        if value is _MISSING:
            current.pop(op_type, None)
        else:
            current[op_type] = value


def function_def_to_graph(fdef):
    """A FunctionDef of a GraphDef's library as a FuncGraph, whose ops have
    their shapes inferred (private: tensorflow.python.framework)."""
    return _function_def_to_graph.function_def_to_graph(fdef)


def freeze_concrete_function(concrete_function):
    """A ConcreteFunction with its variables folded into Consts, functional
    While/If kept (their bodies in the function library, where patch rules
    reach them; lowered to TF1 loops TensorFlow could not differentiate after
    import) (private: tensorflow.python.framework.convert_to_constants)."""
    return _convert_to_constants.convert_variables_to_constants_v2(
        concrete_function, lower_control_flow=False)


def eager_scope():
    """A scope in which ops run eagerly whatever the caller's context: inside
    a TF1 ``with graph.as_default():`` and with eager execution disabled
    (private: ``tensorflow.python.eager.context.eager_mode``; no public scope
    leaves a user's graph, ``tf.init_scope`` stays in it)."""
    return _context.eager_mode()


def in_v1_control_flow(tensor):
    """Whether ops built now in `tensor`'s graph, or `tensor`'s op, sit in a
    TF1 control-flow context (a v1 while_loop or cond, or their gradients),
    where TensorFlow does not route a function call's inputs between frames
    (private:
    ``Graph._get_control_flow_context``, ``Operation._get_control_flow_context``)."""
    graph = tensor.graph
    return (graph._get_control_flow_context() is not None  # pylint: disable=protected-access
            or tensor.op._get_control_flow_context() is not None)  # pylint: disable=protected-access


# --- Keras 3's model.fit under MultiWorkerMirroredStrategy ------------------
# Keras 3's TensorFlow trainer (keras/src/backend/tensorflow/trainer.py, 3.0 to
# 3.15 at least) fails under a multi-worker strategy in two places, both in
# its own reductions (keras-team/keras#20585, tensorflow/tensorflow#72388):
# TensorFlowTrainer._maybe_symbolic_build averages a batch of data across the
# workers eagerly, only to learn its shapes, which the collective reduce
# refuses ("Attempt to convert a value (PerReplica...)"); and
# reduce_per_replica's "mean" reduces the step's scalar logs along axis 0,
# which a scalar has not. The replacements below change those two places, for
# multi-worker strategies only: the symbolic build takes this worker's first
# replica's batch (the same shapes), and the logs are averaged across the
# replicas (what the single-worker "mean" does).
_KERAS_TRAINER_PATCHES = {}


def _keras_tf_trainer():
    """keras/src/backend/tensorflow/trainer.py's module, or None (Keras 2)."""
    if not hasattr(tf.keras, "ops"):
        return None
    import importlib  # pylint: disable=import-outside-toplevel
    return importlib.import_module("keras.src.backend.tensorflow.trainer")


def keras_multi_worker_fit(enable):
    """Replaces (`enable` True) or puts back (False) the two functions of
    Keras 3's TensorFlow trainer described above. Returns whether they are
    replaced now; False on Keras 2, whose model.fit works under the strategy.
    RuntimeError if this Keras lacks what the replacements wrap (private:
    ``keras.src.backend.tensorflow.trainer``'s ``TensorFlowTrainer
    ._maybe_symbolic_build``, ``reduce_per_replica`` and
    ``_collective_all_reduce_multi_worker``)."""
    trainer = _keras_tf_trainer()
    if trainer is None:
        return False
    if not enable:
        for (owner, name), original in _KERAS_TRAINER_PATCHES.items():
            setattr(owner, name, original)
        _KERAS_TRAINER_PATCHES.clear()
        return False
    if not _KERAS_TRAINER_PATCHES:
        for owner, name, replacement in _keras_trainer_replacements(trainer):
            _KERAS_TRAINER_PATCHES[(owner, name)] = getattr(owner, name)
            setattr(owner, name, replacement)
    return True


def _keras_trainer_replacements(trainer):
    """[(owner, name, replacement)] for `keras_multi_worker_fit`."""
    cls = getattr(trainer, "TensorFlowTrainer", None)
    missing = [n for n, ok in (
        ("TensorFlowTrainer._maybe_symbolic_build",
         hasattr(cls, "_maybe_symbolic_build")),
        ("reduce_per_replica", hasattr(trainer, "reduce_per_replica")),
        ("_collective_all_reduce_multi_worker",
         hasattr(trainer, "_collective_all_reduce_multi_worker"))) if not ok]
    if missing:
        import keras  # pylint: disable=import-outside-toplevel
        raise RuntimeError(
            "graph_override.keras.enable_multi_worker_fit: Keras %s's TensorFlow "
            "trainer (keras.src.backend.tensorflow.trainer) has no %s, which the "
            "workaround replaces; it knows Keras 3.0 to 3.15. Train with a custom "
            "loop and strategy.run instead (docs/guide/keras.md, 'Scaling out')."
            % (keras.__version__, ", ".join(missing)))
    multi_worker = trainer._collective_all_reduce_multi_worker  # pylint: disable=protected-access
    build = cls._maybe_symbolic_build  # pylint: disable=protected-access
    reduce = trainer.reduce_per_replica

    def first_replica(value, strategy):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    @functools.wraps(build)
    def maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy  # pylint: disable=protected-access
        if strategy is None or iterator is None or not multi_worker(strategy):
            return build(self, iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:  # the original's one batch, for its shapes
            data_batch = tf.nest.map_structure(
                lambda v: first_replica(v, strategy), next(batches))
            break
        return build(self, iterator=None, data_batch=data_batch)

    @functools.wraps(reduce)
    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and multi_worker(strategy):
            return tf.nest.map_structure(
                lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return reduce(values, strategy, reduction)

    return [(cls, "_maybe_symbolic_build", maybe_symbolic_build),
            (trainer, "reduce_per_replica", reduce_per_replica)]
