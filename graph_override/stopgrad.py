"""The estimators through the stop_gradient identity, with no registry at all.

For a forward f and a gradient dy * g(x), every function here computes

    y = stop_gradient(f(x)) - (stop_gradient(h) - h),  h = stop_gradient(g(x)) * x

The bracket is exactly +0 for finite h, so y is f(x) bit for bit (also -0.0
and NaN), and plain TensorFlow differentiates h to dy * g(x), the same
product the other families compute. Nothing is registered, so graphs built
with this family survive GraphDef export and import into a process that has
never imported graph_override. Non-finite x is replaced by 0 inside h (its
gradient there is 0), so inf - inf never turns the forward value into NaN.

One floating-point caveat: the subtraction is arithmetic, and TensorFlow's
CPU kernels flush subnormal numbers to zero, so for `flip_gradient` and
`scale_gradient` (forward x) a subnormal x (|x| < 1.2e-38 in float32) comes
out as a zero of the same sign. Every other value is bitwise identical to the
other families, and any later arithmetic op would flush it anyway.

An estimator whose gradient is not linear in dy (`clip_gradient`) is the one
exception to registry-freedom: no stop_gradient identity can express it, so
it delegates to its `graph_override.tf2` function.
"""

import tensorflow as tf

from graph_override import estimators, tf2
from graph_override._families import functions

# The estimator functions are made from the table (see functions.define).
__all__ = list(functions.ESTIMATOR_FUNCTIONS)


def stop_gradient_form(estimator, x, y, params, name=None):
    """``stop_gradient(y) - (stop_gradient(h) - h)`` with h = x * stop_gradient(g(x)).

    Its value is y bit for bit and its gradient into x is dy * g(x), the
    estimator's rule (an attribution rule's g reads y too). `graph_override.frozen.make_portable` passes a frozen
    node's own output as y, so a rewritten graph keeps its outputs.
    """
    g = estimators.gradient_multiplier(estimator, x, params, y=y)
    finite_x = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
    h = finite_x if g is None else finite_x * tf.stop_gradient(g)
    return tf.math.subtract(tf.stop_gradient(y), tf.stop_gradient(h) - h, name=name)


def apply_stop_gradient(estimator, x, params):
    """The stop_gradient form of `estimator` on tensor `x` (params normalized)."""
    return stop_gradient_form(estimator, x, estimators.forward(estimator, x, params),
                              params)


def _apply(estimator, x, name, params):
    params = estimators.normalize(estimator, params)
    if not estimators.spec(estimator).linear:
        return getattr(tf2, estimator)(x, name=name, **params)
    with tf.name_scope(name or estimator):
        x = estimators.check_float_input(x, estimator)
        return apply_stop_gradient(estimator, x, params)


globals().update(functions.define(__name__, "stopgrad", _apply))
