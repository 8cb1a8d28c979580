"""Several rounding ops under one map, each with TensorFlow's Identity
gradient (straight-through), and a nested scope for Ceil."""
import tensorflow.compat.v1 as tf


def quantize_all(x):
    g = tf.get_default_graph()
    with g.gradient_override_map({"Floor": "Identity", "Rint": "Identity"}):
        a = tf.floor(x * 3.0)
        b = tf.math.rint(x * 2.0)
        with g.gradient_override_map({"Ceil": "Identity"}):
            c = tf.ceil(x)
    return a + 2.0 * b + 3.0 * c
