"""A generalized divisive normalization built on bounds.lower_bound: it
calls a function that opens and closes the override map inside itself,
so nothing in this file is re-routed and nothing needs migrating."""
import tensorflow.compat.v1 as tf

from bounds import lower_bound


def gdn(x, beta=1.0, gamma=0.1):
    beta = lower_bound(tf.constant(beta), 1e-6)
    norm = tf.sqrt(beta + gamma * tf.square(x))
    return x / norm
