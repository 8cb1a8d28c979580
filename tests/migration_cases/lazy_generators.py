"""Per-channel binarization where the ops are made by generator
expressions, lazily: one made inside the override scope is consumed after
it (so the map never applied to its ops), one made before the scope is
consumed inside it by list() (so the map applied to all of them)."""
import tensorflow.compat.v1 as tf


@tf.RegisterGradient("CaseLazySignSTE")
def _sign_ste(op, grad):
    x = op.inputs[0]
    return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)


def binarize_after(x):
    channels = [x, x * 0.5]
    with tf.get_default_graph().gradient_override_map({"Sign": "CaseLazySignSTE"}):
        signs = (tf.sign(c) for c in channels)
    return tf.add_n(list(signs))


def binarize_inside(x):
    channels = [x, x * 0.5]
    signs = (tf.sign(c) for c in channels)
    with tf.get_default_graph().gradient_override_map({"Sign": "CaseLazySignSTE"}):
        outputs = list(signs)
    return tf.add_n(outputs)
