"""`override_gradients`: `Graph.gradient_override_map` with its traps removed.

TensorFlow's own scope accepts any string: a misspelled op type, a gradient
name nobody registered, an op created outside the ``with`` or in another
graph are all silently ignored, and in eager mode (or under a GradientTape
inside tf.function) the whole map is ignored. This scope checks the keys
against TensorFlow's op registry, resolves or registers the values, records
the ops it re-routed, warns (or raises) when that is none, and raises
`EagerModeError` where TensorFlow would ignore it.
"""

import collections
import threading
import warnings

import tensorflow as tf

from graph_override import registry
from graph_override._tensorflow import compat
from graph_override.errors import (ConcurrentScopeError, EagerModeError,
                                   NoMatchError, UnknownOpTypeError)

__all__ = [ "NoMatchWarning", "claim_graph",
           "override_gradients", "require_graph_mode"]

_ON_NO_MATCH = ("warn", "raise", "ignore")

_EAGER_HINT = (
    "TensorFlow ignores gradient override maps in eager execution. Use "
    "graph_override.tf2 (tf.custom_gradient) or graph_override.stopgrad, or "
    "graph_override.tf2.op_with_gradient(op_fn, gradient) to run a legacy "
    "gradient function in TF2.")

_TAPE_HINT = (
    "a GradientTape inside tf.function records these ops, and the tape looks "
    "gradients up by op type, ignoring the override map. Use graph_override.tf2 "
    "or graph_override.stopgrad there, or compute the gradient with "
    "tf.gradients inside the function.")


class NoMatchWarning(UserWarning):
    """An override scope re-routed no op."""


def require_graph_mode(what, tensors=()):
    """Raises EagerModeError where an override map would be ignored.

    Args:
      what: the caller, for the message (e.g. "overrides.ste_sign").
      tensors: input tensors; inside tf.function, a GradientTape watching any
        of them would ignore the override.
    """
    if tf.executing_eagerly():
        raise EagerModeError("%s was called in eager mode. %s" % (what, _EAGER_HINT))
    graph = tf.compat.v1.get_default_graph()
    if graph.building_function and tensors and compat.tape_records(tensors):
        raise EagerModeError("%s was called inside tf.function under a "
                             "GradientTape: %s" % (what, _TAPE_HINT))


# Which threads have an override map open on a graph: an attribute of the
# graph itself, {thread ident: [thread name, depth]}, changed under this lock.
_CLAIMS = "_graph_override_claims"
_claims_lock = threading.Lock()


class claim_graph:  # pylint: disable=invalid-name
    """Marks `graph` as having an override map open in this thread.

    TensorFlow keeps one gradient override map per graph, shared by all
    threads: an op another thread creates while this thread's map is open
    gets this thread's gradients, and the other way round. A claim by a
    second thread while the first holds one raises instead. Nesting in one
    thread is fine. A plain class, not a generator, so that a claim is
    released by `__exit__` only, never by garbage collection.

    Raises:
      ConcurrentScopeError: another thread holds a claim on `graph`.
    """

    def __init__(self, graph, what):
        self.graph, self.what = graph, what

    def __enter__(self):
        me = threading.get_ident()
        with _claims_lock:
            claims = getattr(self.graph, _CLAIMS, None)
            if claims is None:
                claims = {}
                setattr(self.graph, _CLAIMS, claims)
            others = [v[0] for k, v in claims.items() if k != me]
            if others:
                raise ConcurrentScopeError(
                    "%s: thread %r has a gradient override scope open on this "
                    "graph, and TensorFlow keeps one override map per graph "
                    "(not per thread), so the ops of both threads would get "
                    "each other's gradients. Build each thread's ops in its "
                    "own tf.Graph, or enter the scopes one thread at a time (a "
                    "lock around the `with`)." % (self.what, others[0]))
            claims.setdefault(me, [threading.current_thread().name, 0])[1] += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        me = threading.get_ident()
        with _claims_lock:
            claims = getattr(self.graph, _CLAIMS)
            entry = claims[me]
            entry[1] -= 1
            if not entry[1]:
                del claims[me]
        return False


def _check_key(op_type):
    if not isinstance(op_type, str):
        raise TypeError("override_gradients: keys must be op type strings such "
                        "as 'Sign', got %r" % (op_type,))
    if compat.is_op_type(op_type):
        return
    hints = compat.op_type_suggestions(op_type)
    hint = (" Did you mean %s?" % " or ".join(repr(h) for h in hints)) if hints else ""
    raise UnknownOpTypeError(
        "override_gradients: %r is not an op type TensorFlow knows, so no op "
        "would ever be re-routed.%s Keys are op types as in op.type "
        "(CamelCase), not Python function names." % (op_type, hint))


def _resolve_value(op_type, value):
    if isinstance(value, str):
        return str(registry.resolve(value))
    if callable(value):
        return str(registry.register_gradient(value))
    raise TypeError("override_gradients: the value for %r must be a gradient "
                    "name or a gradient function, got %s" % (
                        op_type, type(value).__name__))


class override_gradients:  # pylint: disable=invalid-name
    """Re-routes the gradients of op types created inside the scope.

    A checked front to ``Graph.gradient_override_map``::

        with graph_override.override_gradients({"Sign": my_grad}) as scope:
            y = tf.sign(x)
        scope.matched   # [<tf.Operation 'Sign' type=Sign>]

    Example:
      >>> import tensorflow as tf
      >>> import graph_override as go
      >>> def pass_through(op, grad):
      ...     return grad
      >>> with tf.Graph().as_default():
      ...     x = tf.constant([-0.5, 0.0, 2.0])
      ...     with go.override_gradients({"Sign": pass_through}) as scope:
      ...         y = tf.sign(x)
      ...     dx, = tf.gradients(y, x)
      ...     with tf.compat.v1.Session() as sess:
      ...         print(sess.run(dx), [op.type for op in scope.matched])
      [1. 1. 1.] ['Sign']

    Args:
      mapping: ``{op_type: gradient}``. Keys are op types TensorFlow knows
        ("Sign", "Round", "Identity"...). Values are registered gradient
        names (TensorFlow's own such as "Identity" too), built-in estimator
        names such as ``"graph_override.ste_sign(clip_value=1.0)"``, or plain
        Python gradient functions ``fn(op, *grads)``, registered for you once.
      graph: the graph whose ops are re-routed; default: the default graph.
      on_no_match: "warn" (default), "raise" or "ignore" when the scope ends
        without having re-routed any op.

    Attributes:
      mapping: the resolved ``{op_type: gradient name}``.
      matched: the ops re-routed by the last use of the scope, in creation
        order.

    Raises:
      UnknownOpTypeError: a key is not an op type (with a suggestion).
      UnknownGradientError: a value names no registered gradient.
      EagerModeError: used in eager mode, or its ops are recorded by a
        GradientTape inside tf.function (TensorFlow would ignore the map).
      NoMatchError: nothing was re-routed and on_no_match="raise".
      ConcurrentScopeError: another thread has an override scope open on
        the same graph. TensorFlow keeps one override map per graph, not per
        thread, so both threads' ops would get each other's gradients. (Ops
        another thread creates outside any scope while this one is open
        cannot be detected: build each thread's ops in its own graph.)

    The previous map is restored when the scope ends, also on exceptions,
    by the scope itself rather than by the clean-up of TensorFlow's
    generator-based context manager.
    """

    def __init__(self, mapping, *, graph=None, on_no_match="warn"):
        if not isinstance(mapping, collections.abc.Mapping):
            raise TypeError("override_gradients needs a mapping {op_type: "
                            "gradient}, got %s" % type(mapping).__name__)
        if not mapping:
            raise ValueError("override_gradients needs at least one "
                             "{op_type: gradient} entry; the mapping is empty")
        if on_no_match not in _ON_NO_MATCH:
            raise ValueError("override_gradients(on_no_match=%r): use one of %s"
                             % (on_no_match, ", ".join(_ON_NO_MATCH)))
        if graph is not None and not isinstance(graph, tf.Graph):
            raise TypeError("override_gradients(graph=...) must be a tf.Graph, "
                            "got %s" % type(graph).__name__)
        for op_type in mapping:
            _check_key(op_type)
        self.mapping = {k: _resolve_value(k, v) for k, v in mapping.items()}
        self.on_no_match = on_no_match
        self.matched = []
        self._graph = graph
        self._active = []  # (graph, count at entry, TF's context manager)

    def __repr__(self):
        return "override_gradients(%r)" % (self.mapping,)

    def __enter__(self):
        graph = self._graph
        if graph is None:
            if tf.executing_eagerly():
                raise EagerModeError(
                    "override_gradients(%r) was entered in eager mode. %s"
                    % (self.mapping, _EAGER_HINT))
            graph = tf.compat.v1.get_default_graph()
        claim = claim_graph(graph, "override_gradients(%r)" % (self.mapping,))
        claim.__enter__()
        try:
            start = compat.operation_count(graph)
            saved = compat.override_map_entries(graph, self.mapping)
            cm = graph.gradient_override_map(self.mapping)
            cm.__enter__()
        except BaseException:
            claim.__exit__(None, None, None)
            raise
        self._active.append((graph, start, cm, saved, claim))
        return self

    def __exit__(self, exc_type, exc, tb):
        graph, start, cm, saved, claim = self._active.pop()
        try:
            cm.__exit__(exc_type, exc, tb)  # restores the previous map
        finally:
            # Restored here too, explicitly: never left to the generator's
            # clean-up, which runs only when it is closed or collected.
            compat.restore_override_map_entries(graph, saved)
            claim.__exit__(None, None, None)
        created = compat.operations_since(graph, start)
        self.matched = [op for op in created if self._rerouted(op)]
        if exc_type is not None:
            return False
        if graph.building_function:
            for op in self.matched:
                if compat.tape_records(op.inputs):
                    raise EagerModeError(
                        "override_gradients re-routed op %r (type %s), but %s"
                        % (op.name, op.type, _TAPE_HINT))
        if not self.matched and self.on_no_match != "ignore":
            self._no_match(created)
        return False

    def _rerouted(self, op):
        name = self.mapping.get(op.type)
        if name is None:
            return False
        try:
            return op.get_attr("_gradient_op_type") == name.encode()
        except ValueError:
            return False

    def _no_match(self, created):
        kinds = collections.Counter(op.type for op in created)
        seen = ", ".join("%s x%d" % kv for kv in sorted(kinds.items())) or "none"
        message = (
            "override_gradients(%r) re-routed no op: no op of type %s was "
            "created in this graph inside the scope (ops created there: %s). "
            "Ops created before the `with`, in another graph, or in eager mode "
            "are not affected." % (self.mapping, " or ".join(sorted(self.mapping)),
                                   seen))
        if self.on_no_match == "raise":
            raise NoMatchError(message)
        warnings.warn(message, NoMatchWarning, stacklevel=3)
