"""A DoReFa-Net quantizer factory in the style of tensorpack's dorefa.py.

The gradient of fg is registered inside the factory behind a module flag (a
hack against registering twice), the graph is taken once and shared by the
closures, and quantize maps "Floor" while it calls tf.round: that entry never
re-routed anything, so tf.round keeps TensorFlow's own (None) gradient.
"""
import tensorflow.compat.v1 as tf

# avoid registering the gradient twice
GRAD_DEFINED = False


def get_dorefa(bitW, bitA, bitG):
    """Return fw, fa, fg: quantizers of weights, activations and gradients."""
    G = tf.get_default_graph()

    def quantize(x, k):
        n = float(2 ** k - 1)
        with G.gradient_override_map({"Floor": "Identity"}):
            return tf.round(x * n) / n

    def fw(x):
        if bitW == 1:   # BWN
            with G.gradient_override_map({"Sign": "Identity"}):
                E = tf.stop_gradient(tf.reduce_mean(tf.abs(x)))
                return tf.sign(x / E) * E
        x = tf.tanh(x)
        x = x / tf.reduce_max(tf.abs(x)) * 0.5 + 0.5
        return 2 * quantize(x, bitW) - 1

    def fa(x):
        return quantize(tf.clip_by_value(x, 0.0, 1.0), bitA)

    global GRAD_DEFINED
    if not GRAD_DEFINED:
        @tf.RegisterGradient("CaseFGGrad")
        def grad_fg(op, x):
            maxx = tf.reduce_max(tf.abs(x), keepdims=True)
            n = float(2 ** bitG - 1)
            x = x / maxx * 0.5 + 0.5
            return (tf.round(x * n) / n - 0.5) * maxx * 2
    GRAD_DEFINED = True

    def fg(x):
        with G.gradient_override_map({"Identity": "CaseFGGrad"}):
            return tf.identity(x)
    return fw, fa, fg


def binary_weight_net(x, w):
    fw, fa, fg = get_dorefa(1, 2, 4)
    return fg(fa(x) * fw(w))
