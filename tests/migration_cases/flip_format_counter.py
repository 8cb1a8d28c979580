"""A gradient reversal layer whose fresh name per call is built with
str.format, and a functional one with a module-level counter."""
import tensorflow.compat.v1 as tf


class GradientReversal(object):
    """Identity forward, -hp_lambda * dy backward (DANN)."""

    def __init__(self, hp_lambda):
        self.hp_lambda = hp_lambda
        self.num_calls = 0

    def __call__(self, x):
        grad_name = "CaseGradientReversal{}".format(self.num_calls)
        hp_lambda = self.hp_lambda

        @tf.RegisterGradient(grad_name)
        def _reverse(op, grad):
            return [tf.negative(grad) * hp_lambda]

        g = tf.get_default_graph()
        with g.gradient_override_map({"Identity": grad_name}):
            y = tf.identity(x)
        self.num_calls += 1
        return y


_NUM_CALLS = [0]


def reverse_gradient(x, scale=1.0):
    name = "CaseReverseGradient%d" % _NUM_CALLS[0]
    _NUM_CALLS[0] += 1

    @tf.RegisterGradient(name)
    def _reverse(op, grad):
        return [-scale * grad]

    with tf.get_default_graph().gradient_override_map({"Identity": name}):
        return tf.identity(x)


_reversal = GradientReversal(0.5)


def domain_loss(x):
    return tf.square(_reversal(x)) + reverse_gradient(x, 2.0) * x
