"""A binarized Keras block in the style of BinaryNet's Keras port: the
layers are built and applied inside the override scope, so whatever ops
they create take the map's gradient."""
import tensorflow.compat.v1 as tf
from tensorflow.keras.layers import Activation, BatchNormalization, Dense, Dropout


@tf.RegisterGradient("CaseKerasSignSTE")
def _sign_ste(op, grad):
    return grad * tf.cast(tf.abs(op.inputs[0]) <= 1.0, grad.dtype)


def binary_block(x, units=16):
    with tf.get_default_graph().gradient_override_map({"Sign": "CaseKerasSignSTE"}):
        with tf.variable_scope(tf.get_variable_scope(), reuse=tf.AUTO_REUSE):
            h = Dense(units, use_bias=False)(x)
            h = BatchNormalization(momentum=0.9, epsilon=1e-4)(h)
            h = Activation("tanh")(h)
            h = Dropout(0.2)(h)
            return tf.sign(h)
