"""Gradient scaling with a class-attribute counter, in the style of
RETURNN's scaled-gradient builder: after the scope, the code checks the
type of the op it made (graph code that inspects its own output)."""
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops


class _ScaledGradient(object):
    num_calls = 0  # shared by every instance: one fresh name per call

    def __call__(self, x, scale=1.0):
        grad_name = "CaseScaledGradient%d" % _ScaledGradient.num_calls

        @ops.RegisterGradient(grad_name)
        def _scaled(op, grad):
            return [grad * scale]

        g = tf.get_default_graph()
        with g.gradient_override_map({"Identity": grad_name}):
            y = tf.identity(x, name="scaled_gradient")
        assert y.op.type == "Identity", y.op.type
        _ScaledGradient.num_calls += 1
        return y


scaled_gradient = _ScaledGradient()


def reversed_head(x):
    return scaled_gradient(x, scale=-0.5) * 3.0
