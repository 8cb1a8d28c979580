"""The functions larq-zoo registers with Keras, which its saved models name:
QuickNet's anti-aliasing initializer, DoReFaNet's kernel quantizer and
clipped activation, XNORNet's kernel quantizer. `load_larq_model` knows
them by these names (`BY_NAME`), and larq-zoo's model classes (`MODELS`);
the builders of graph_override.keras.zoo
use them.
"""

import numpy as np
import tensorflow as tf

from graph_override.keras import quantizers

__all__ = ["BY_NAME", "BlurPool", "MODELS", "blurpool_initializer", "clip_by_value_activation",
           "magnitude_aware_sign_unclipped", "xnor_weight_scale"]


def blurpool_initializer(shape, dtype=None):
    """A depthwise kernel that blurs: the outer product of the binomial
    filter of the kernel's size (2, 3 or 5) with itself, normalized to sum
    1, for every channel (Zhang, "Making Convolutional Networks
    Shift-Invariant Again", 2019)."""
    ksize, filters = shape[0], shape[2]
    taps = {2: [1, 1], 3: [1, 2, 1], 5: [1, 4, 6, 4, 1]}.get(ksize)
    if taps is None:
        raise ValueError("blurpool_initializer: filter size should be 2, 3 or 5, got %s"
                         % (ksize,))
    k = np.outer(taps, taps)
    k = np.repeat(np.expand_dims(k / np.sum(k), -1), filters, axis=-1)
    return tf.constant(np.reshape(k, shape), dtype=dtype or tf.float32)


class BlurPool(tf.keras.initializers.Initializer):
    """`blurpool_initializer` as an initializer class: QuickNet's builder
    uses it, since Keras 2 cannot read back a function it saved in an
    ``.h5`` file by name (it saves ``{"class_name": "function"}``)."""

    def __call__(self, shape, dtype=None, **kwargs):
        return blurpool_initializer(shape, dtype)

    def get_config(self):
        return {}


def magnitude_aware_sign_unclipped(x):
    """sign(x) * mean(|x|), with the gradient passed straight through
    (unclipped): DoReFaNet's kernel quantizer. sign(0) = 1, as larq's."""
    scale = tf.stop_gradient(tf.reduce_mean(tf.abs(x)))

    @tf.custom_gradient
    def _sign(x):
        sign = tf.where(x >= 0, tf.ones_like(x), -tf.ones_like(x))
        return sign * scale, lambda dy: dy

    return _sign(x)


magnitude_aware_sign_unclipped.precision = 1


def clip_by_value_activation(x):
    """x clipped to [0, 1]: DoReFaNet's activation before its classifier."""
    return tf.clip_by_value(x, 0, 1)


def xnor_weight_scale(x):
    """mean(|clip(x, -1, 1)|) per output channel times ste_sign(x clipped):
    XNORNet's kernel quantizer (Rastegari et al., 2016)."""
    x = tf.clip_by_value(x, -1, 1)
    alpha = tf.reduce_mean(tf.abs(x), axis=[0, 1, 2], keepdims=True)
    return alpha * quantizers.get("ste_sign")(x)


xnor_weight_scale.precision = 1

# larq-zoo's model classes, which its files name: subclasses of Model that add nothing.
MODELS = {"BinaryDenseNet": tf.keras.Model}
BY_NAME = {f.__name__: f for f in (blurpool_initializer, magnitude_aware_sign_unclipped,
                                   clip_by_value_activation, xnor_weight_scale)}


def _register():
    from graph_override._families import keras_saving  # pylint: disable=import-outside-toplevel
    keras_saving.register(list(BY_NAME.values()) + [BlurPool])


_register()
