"""Override maps that cannot be converted safely; the migration must leave
every one of them as it is and list it."""
import tensorflow.compat.v1 as tf


@tf.RegisterGradient("CaseKeptSign")
def _kept_sign_grad(op, grad):
    return grad


def from_config(x, mapping):
    with tf.get_default_graph().gradient_override_map(mapping):
        return tf.sign(x)


def through_helper(x):
    with tf.get_default_graph().gradient_override_map({"Sign": "CaseKeptSign"}):
        return helper(x)


def operator_collision(x, y):
    with tf.get_default_graph().gradient_override_map({"Mul": "CaseKeptSign"}):
        return x * y


def helper(x):
    return tf.sign(x)
