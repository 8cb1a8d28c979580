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

from graph_override import _family, estimators, registry
from graph_override.scope import claim_graph, require_graph_mode

# Builds of this family in one process take turns, so two threads building
# into one graph never see each other's override map.
_build_lock = threading.RLock()

__all__ = [
    "approx_sign",
    "clip_gradient",
    "dorefa_quantize",
    "flip_gradient",
    "gradient_name",
    "scale_gradient",
    "ste_floor",
    "ste_heaviside",
    "ste_round",
    "ste_sign",
    "ste_tern",
    "swish_sign",
]


def gradient_name(estimator, **params):
    """The registered, self-describing gradient name of an estimator setting.

    Example:
      >>> from graph_override import overrides
      >>> overrides.gradient_name("ste_sign", clip_value=0.5)
      'graph_override.ste_sign(clip_value=0.5)'
    """
    return _registered_name(estimator, estimators.normalize(estimator, params))


def _registered_name(estimator, params):
    """The built-in name of a normalized setting, registered on first use."""
    return registry.resolve(registry.builtin_name(estimator, params))


def _build(estimator, x, params, grad_name):
    graph = x.graph
    override = graph.gradient_override_map
    if estimator in ("ste_round", "ste_floor"):
        with override({estimators.ESTIMATORS[estimator].op_type: grad_name}):
            return tf.round(x) if estimator == "ste_round" else tf.floor(x)
    if estimator in ("flip_gradient", "scale_gradient", "clip_gradient"):
        with override({"Identity": grad_name}):
            return tf.identity(x)
    if estimator == "dorefa_quantize":
        # The DoReFa-Net idiom: clip passes dy on [0, 1], Round passes it on.
        n = tf.constant(float(2 ** params["k_bit"] - 1), dtype=x.dtype)
        clipped = tf.clip_by_value(x, tf.constant(0.0, x.dtype),
                                   tf.constant(1.0, x.dtype))
        with override({"Round": "Identity"}):
            return estimators.exact_divide(tf.round(clipped * n), n)
    # Sign-based estimators: the Sign that reads x carries the estimator.
    with override({"Sign": grad_name}):
        s = tf.sign(x)
    if estimator == "ste_heaviside":
        with override({"Relu": "Identity"}):
            return tf.nn.relu(s)  # == estimators.heaviside(x)
    if estimator == "ste_tern":
        correction = estimators.ternary_correction(x, s, params)
        with override({"Sign": "Identity"}):
            return tf.sign(s + tf.stop_gradient(correction))  # == ternary(x)
    with override({"Sign": "Identity"}):
        return tf.sign(s + tf.constant(0.1, dtype=x.dtype))  # == sign_pm1(x)


def _apply(estimator, x, name, params):
    params = estimators.normalize(estimator, params)
    what = "graph_override.overrides.%s" % estimator
    require_graph_mode(what, [x] if tf.is_tensor(x) else [])
    grad_name = _registered_name(estimator, params)
    with tf.compat.v1.name_scope(name, estimator, [x]):
        x = estimators.check_float_input(x, estimator)
        with _build_lock, claim_graph(x.graph, what):
            return _build(estimator, x, params, grad_name)


(approx_sign, clip_gradient, dorefa_quantize, flip_gradient, scale_gradient,
 ste_floor, ste_heaviside, ste_round, ste_sign, ste_tern,
 swish_sign) = _family.define(__name__, "overrides", _apply)
