"""The estimators through `tf.RegisterGradient` + `gradient_override_map`.

Each function creates TensorFlow's natural op for the forward (Sign, Round,
Floor, Identity) and gives the op that reads x a `_gradient_op_type` naming
the estimator, for example ``graph_override.ste_sign(clip_value=1.0)``. Such
names are registered once per distinct setting (not once per call) and any
process that imports graph_override resolves them on demand, also in a
GraphDef read back from disk.

Where the forward needs a second op (the zero of sign(0), the threshold of
ste_tern), that op's gradient is mapped to TensorFlow's own "Identity", so
the whole construction passes exactly the estimator's gradient to x.

Graph mode only: in eager mode, and under a GradientTape inside tf.function,
TensorFlow ignores override maps, so these functions raise `EagerModeError`.
"""

import threading

import tensorflow as tf

from graph_override import estimators, registry
from graph_override._families import functions
from graph_override.scope import claim_graph, require_graph_mode

# Builds of this family in one process take turns, so two threads building
# into one graph never see each other's override map.
_build_lock = threading.RLock()

# The estimator functions are made from the table (see functions.define).
__all__ = ["gradient_name"] + list(functions.ESTIMATOR_FUNCTIONS)


def gradient_name(estimator, **params):
    """The registered, self-describing gradient name of an estimator setting.

    Example:
      >>> from graph_override import overrides
      >>> overrides.gradient_name("ste_sign", clip_value=0.5)
      'graph_override.ste_sign(clip_value=0.5)'
    """
    spec = estimators.spec(estimator)
    return registry.resolve_estimator(spec, estimators.normalize(spec, params))


def _build(spec, x, params, grad_name):
    """The record's own build, or its forward under ``{op_type: grad_name}``,
    which must then be one op of that type reading x."""
    override = x.graph.gradient_override_map
    if spec.build is not None:
        return spec.build(x, params, grad_name, override)
    with override({spec.op_type: grad_name}):
        y = spec.forward(x, params)
    if y.op.type != spec.op_type or not y.op.inputs or y.op.inputs[0].name != x.name:
        raise TypeError(
            "estimator %r: its forward is not one %s op on x (it ends in %s), so the "
            "overrides family cannot re-route its gradient; give its record a build "
            "(graph_override/estimators/table.py)" % (spec.name, spec.op_type, y.op.type))
    return y


def _apply(estimator, x, name, params):
    spec = estimators.spec(estimator)  # the one look-up: the record from here on
    params = estimators.normalize(spec, params)
    what = "graph_override.overrides.%s" % estimator
    require_graph_mode(what, [x] if tf.is_tensor(x) else [])
    grad_name = registry.resolve_estimator(spec, params)
    with tf.compat.v1.name_scope(name, estimator, [x]):
        x = estimators.check_float_input(x, estimator)
        with _build_lock, claim_graph(x.graph, what):
            return _build(spec, x, params, grad_name)


globals().update(functions.define(__name__, "overrides", _apply))
