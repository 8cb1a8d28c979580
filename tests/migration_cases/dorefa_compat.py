"""DoReFa-Net quantizers (Zhou et al.) written against tf.compat.v1 from a
TF2 install: the graph comes from tf.compat.v1.get_default_graph()."""
import tensorflow as tf


def quantize(x, k):
    n = float(2 ** k - 1)
    with tf.compat.v1.get_default_graph().gradient_override_map({"Round": "Identity"}):
        return tf.round(x * n) / n


def quantize_activation(x, bit_a=2):
    return quantize(tf.clip_by_value(x, 0.0, 1.0), bit_a)


def quantize_weight(x, bit_w=3):
    x = tf.tanh(x)
    x = x / tf.reduce_max(tf.abs(x)) * 0.5 + 0.5
    return 2 * quantize(x, bit_w) - 1
