"""Gradient scaling in the style of sonnet v1's scale_gradient built on an
override map: one registration per scale value, kept in a dict."""
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops


class ScaleGradient(object):
    def __init__(self):
        self.num_calls = 0

    def __call__(self, x, scale):
        grad_name = "CaseScaleGradient_%d" % self.num_calls
        self.num_calls += 1

        @ops.RegisterGradient(grad_name)
        def _scale(op, grad):
            return [grad * scale]

        graph = tf.get_default_graph()
        with graph.gradient_override_map({"Identity": grad_name}):
            return tf.identity(x, name="scale_gradient")


scale_gradient = ScaleGradient()


def two_heads(x):
    return scale_gradient(x, 0.25) * 2.0 + tf.square(scale_gradient(x, -3.0))
