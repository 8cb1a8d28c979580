"""Guided backpropagation through a class-based context manager, as some
saliency libraries write it: __enter__ opens the override map, so the ReLUs
it re-routes are created in the caller's `with` block."""
import tensorflow.compat.v1 as tf


@tf.RegisterGradient("CaseClassGuidedRelu")
def _guided_relu(op, grad):
    gate_y = tf.cast(op.outputs[0] > 0., grad.dtype)
    gate_g = tf.cast(grad > 0., grad.dtype)
    return grad * gate_y * gate_g


class GuidedBackprop(object):
    def __init__(self, graph=None):
        self.graph = graph or tf.get_default_graph()
        self._scope = None

    def __enter__(self):
        self._scope = self.graph.gradient_override_map({"Relu": "CaseClassGuidedRelu"})
        return self._scope.__enter__()

    def __exit__(self, *exc_info):
        return self._scope.__exit__(*exc_info)


def saliency(x):
    with GuidedBackprop():
        h = tf.nn.relu(x + 0.25)
        return tf.nn.relu(1.0 - h) * x
