"""TF1 code kept running on a TF2 install through a module alias made by
assignment (tf1 = tf.compat.v1), as many ported repositories do."""
import tensorflow as tf

tf1 = tf.compat.v1


@tf1.RegisterGradient("CaseAliasAssignSTE")
def _ste_grad(op, grad):
    x = op.inputs[0]
    return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)


def binarize(x):
    g = tf1.get_default_graph()
    with g.gradient_override_map({"Sign": "CaseAliasAssignSTE"}):
        return tf1.sign(x)


def quantize(x, k=2):
    n = float(2 ** k - 1)
    with tf1.get_default_graph().gradient_override_map({"Round": "Identity"}):
        return tf1.math.round(x * n) / n


def quantized_binary(x):
    return binarize(x) * 0.5 + quantize(x)
