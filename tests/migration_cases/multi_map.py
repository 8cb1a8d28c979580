"""Several keys in one map, several calls in one scope, a nested scope, and
the graph passed in (or taken from the default)."""
import tensorflow as tf


@tf.RegisterGradient("CaseMultiSign")
def _multi_sign_grad(op, grad):
    x = op.inputs[0]
    return grad * tf.maximum(0.0, 2.0 - 2.0 * tf.abs(x))  # ApproxSign


@tf.RegisterGradient("CaseHalfTanh")
def _half_tanh_grad(op, grad):
    y = op.outputs[0]  # reads the op's output, as TF's own Tanh gradient does
    return 0.5 * grad * (1.0 - y * y)


@tf.RegisterGradient("CaseMulSwap")
def _mul_swap_grad(op, grad):
    a, b = op.inputs
    # multi-input: each input gets the other one's share, and a None
    return [grad * b * 2.0, None]


def block(x, graph=None):
    graph = graph or tf.compat.v1.get_default_graph()
    with tf.name_scope("block"), graph.gradient_override_map(
            {"Sign": "CaseMultiSign",   # binarize
             "Floor": "Identity",
             "Tanh": "CaseHalfTanh"}):
        s = tf.sign(x)
        f = tf.floor(x * 4.0)
        t = tf.tanh(x)
        with graph.gradient_override_map({"Mul": "CaseMulSwap"}):
            p = tf.multiply(t, x)
    return s + f + t + p
