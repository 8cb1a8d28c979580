"""The estimators as `tf.custom_gradient` functions: the TF2 family.

Works in eager mode, inside `tf.function`, in Keras layers and in graph mode.
It is the migration target of override-map code and the oracle that the
`overrides` and `stopgrad` families are tested against. Non-tensor settings
(clip_value, beta, ...) are captured in a closure around the custom-gradient
function, as larq does.

`op_with_gradient` runs a legacy ``(op, grad)`` gradient function unchanged
under `tf.custom_gradient`; see `graph_override.legacy`.
"""

import tensorflow as tf

from graph_override import _family, estimators

__all__ = [
    "approx_sign",
    "clip_gradient",
    "dorefa_quantize",
    "flip_gradient",
    "op_with_gradient",
    "scale_gradient",
    "ste_floor",
    "ste_heaviside",
    "ste_round",
    "ste_sign",
    "ste_tern",
    "swish_sign",
]


def _apply(estimator, x, name, params):
    params = estimators.normalize(estimator, params)
    with tf.name_scope(name or estimator):
        x = estimators.check_float_input(x, estimator)

        @tf.custom_gradient
        def estimator_op(x):
            def grad(dy):
                return estimators.gradient(estimator, x, dy, params)
            return estimators.forward(estimator, x, params), grad

        return estimator_op(x)


(approx_sign, clip_gradient, dorefa_quantize, flip_gradient, scale_gradient,
 ste_floor, ste_heaviside, ste_round, ste_sign, ste_tern,
 swish_sign) = _family.define(__name__, "tf2", _apply)


def op_with_gradient(op_fn, gradient):
    """See `graph_override.legacy.op_with_gradient`."""
    from graph_override import legacy  # pylint: disable=import-outside-toplevel
    return legacy.op_with_gradient(op_fn, gradient)
