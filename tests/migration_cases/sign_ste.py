"""Binarized activations with a straight-through estimator (BNN style).

The gradient is registered once at module level and attached to tf.sign by an
override map on the default graph.
"""
import tensorflow as tf


@tf.RegisterGradient("CaseSignSTE")
def _sign_ste_grad(op, grad):
    """Pass the gradient where |x| <= 1 (Hubara et al., 2016)."""
    x = op.inputs[0]
    return grad * tf.cast(tf.less_equal(tf.abs(x), 1.0), grad.dtype)


def binary_activation(x):
    g = tf.compat.v1.get_default_graph()
    with g.gradient_override_map({"Sign": "CaseSignSTE"}):
        # forward: sign(x); backward: straight-through, clipped at 1
        return tf.sign(x)


def binary_dense(x, w):
    wb = binary_activation(w)
    return tf.reduce_sum(binary_activation(x) * wb, axis=-1)
