"""The same op reached through aliases: tf.math.sign, tf.compat.v1.sign,
a compat.v1 module alias and TensorFlow's private math_ops."""
import tensorflow as tf
import tensorflow.compat.v1 as tf1
from tensorflow.python.ops import math_ops


@tf1.RegisterGradient("CaseAliasClip")
def _clipped_identity(op, grad):
    return tf.clip_by_value(grad, -0.25, 0.25)


def quantize(x):
    with tf1.get_default_graph().gradient_override_map({"Sign": "CaseAliasClip",
                                                       "Round": "CaseAliasClip"}):
        a = tf.math.sign(x)
        b = tf.compat.v1.sign(x - 0.5)
        c = tf1.math.sign(x + 0.5)
        d = math_ops.round(x * 2.0)
    return a + 2.0 * b + 3.0 * c + 4.0 * d
