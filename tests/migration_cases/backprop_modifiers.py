"""Guided and rectified backprop in the style of keras-vis: the model is
rebuilt (here: its frozen graph imported) under the override map inside
modify_model_backprop, which closes the map before it returns; guided()
and rectified() call it with a modifier name, not with a map."""
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops


def _register_guided_gradient(name):
    if name not in ops._gradient_registry._registry:
        @tf.RegisterGradient(name)
        def _guided_backprop(op, grad):
            dtype = op.outputs[0].dtype
            gate_g = tf.cast(grad > 0., dtype)
            gate_y = tf.cast(op.outputs[0] > 0., dtype)
            return gate_y * gate_g * grad


def _register_rectified_gradient(name):
    if name not in ops._gradient_registry._registry:
        @tf.RegisterGradient(name)
        def _relu_backprop(op, grad):
            return tf.cast(grad > 0., op.outputs[0].dtype) * grad


_BACKPROP_MODIFIERS = {
    "CaseGuided": _register_guided_gradient,
    "CaseRectified": _register_rectified_gradient,
}


def _frozen_model():
    with tf.Graph().as_default() as graph:
        x = tf.placeholder(tf.float32, [None], name="input")
        tf.nn.relu(x * 2.0 - 0.5, name="output")
    return graph.as_graph_def()


def modify_model_backprop(x, backprop_modifier):
    """The model's output on x, rebuilt with a modified ReLU gradient."""
    modifier_fn = _BACKPROP_MODIFIERS.get(backprop_modifier)
    if modifier_fn is None:
        raise ValueError("'{}' modifier is not supported".format(backprop_modifier))
    modifier_fn(backprop_modifier)
    graph_def = _frozen_model()
    with tf.get_default_graph().gradient_override_map({"Relu": backprop_modifier}):
        (y,) = tf.import_graph_def(graph_def, input_map={"input:0": x},
                                   return_elements=["output:0"])
    return y


def guided(x):
    return modify_model_backprop(x, "CaseGuided")


def rectified(x):
    return modify_model_backprop(x, "CaseRectified")
