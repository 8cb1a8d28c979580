"""QuickNet, QuickNetSmall and QuickNetLarge: larq-zoo's own binarized
networks (Bannink et al., "Larq Compute Engine", 2021), layer for layer as
larq_zoo.sota builds them."""

import tensorflow as tf

from graph_override.keras import constraints, layers, quantizers
from graph_override.keras.zoo import _common
from graph_override.keras.zoo.functions import BlurPool

__all__ = ["QuickNet", "QuickNetLarge", "QuickNetSmall"]

_KL = tf.keras.layers


def _binary():
    return dict(input_quantizer=quantizers.SteSign(clip_value=1.25),
                kernel_quantizer=quantizers.SteSign(clip_value=1.25),
                kernel_constraint=constraints.WeightClip(clip_value=1.25))


def _stem(x, filters):
    x = layers.QuantConv2D(filters // 4, (3, 3), kernel_initializer="he_normal",
                           padding="same", strides=2, use_bias=False)(x)
    x = _KL.BatchNormalization()(x)
    x = _KL.Activation("relu")(x)
    x = layers.QuantDepthwiseConv2D((3, 3), padding="same", strides=2, use_bias=False)(x)
    x = _KL.BatchNormalization(scale=False, center=False)(x)
    x = layers.QuantConv2D(filters, 1, kernel_initializer="he_normal", use_bias=False)(x)
    return _KL.BatchNormalization()(x)


def _residual(x):
    residual = x
    x = layers.QuantConv2D(int(x.shape[-1]), (3, 3), activation="relu",
                           kernel_initializer="glorot_normal", padding="same", pad_values=1.0,
                           use_bias=False, **_binary())(x)
    x = _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    return _common.add(x, residual)


def _transition(x, filters, strides):
    x = _KL.Activation("relu")(x)
    x = _KL.MaxPool2D(pool_size=strides, strides=1)(x)
    x = _KL.DepthwiseConv2D((3, 3), depthwise_initializer=BlurPool(),
                            padding="same", strides=strides, trainable=False,
                            use_bias=False)(x)
    x = layers.QuantConv2D(filters, (1, 1), kernel_initializer="glorot_normal",
                           use_bias=False)(x)
    return _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)


def _quicknet(name, blocks, filters, input_shape, input_tensor, weights, include_top,
              num_classes):
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    x = _stem(inputs, filters[0])
    for count, width in zip(blocks, filters):
        for _ in range(count):
            if width != x.shape[-1]:
                x = _transition(x, width, strides=2)
            x = _residual(x)
    if include_top:
        x = _KL.Activation("relu")(x)
        x = _common.global_pool(x)
        x = layers.QuantDense(num_classes, kernel_initializer="glorot_normal")(x)
        x = _KL.Activation("softmax", dtype="float32")(x)
    return _common.finish(inputs, x, name, weights)


def QuickNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
             num_classes=1000):
    """larq-zoo's QuickNet (sections of 4 blocks, 64/128/256/512 filters;
    13.2 M parameters at 224x224 with 1000 classes).

    Args:
      input_shape: (height, width, 3); default 224x224x3 (any size without
        the top).
      input_tensor: a Keras tensor to use as the input.
      weights: None (random initialization) or the path of a weights file
        (larq-zoo's ``quicknet_weights.h5`` loads: the layers are the same,
        in the same order).
      include_top: whether to end with the classifier.
      num_classes: the classifier's classes.

    Example:
      >>> from graph_override.keras import zoo
      >>> zoo.QuickNet(input_shape=(32, 32, 3), num_classes=10).count_params()
      12735850
    """
    return _quicknet("quicknet", (4, 4, 4, 4), (64, 128, 256, 512), input_shape,
                     input_tensor, weights, include_top, num_classes)


def QuickNetSmall(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                  num_classes=1000):
    """larq-zoo's QuickNetSmall (32/64/256/512 filters); arguments as `QuickNet`."""
    return _quicknet("quicknet_small", (4, 4, 4, 4), (32, 64, 256, 512), input_shape,
                     input_tensor, weights, include_top, num_classes)


def QuickNetLarge(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                  num_classes=1000):
    """larq-zoo's QuickNetLarge (6/8/12/6 blocks); arguments as `QuickNet`."""
    return _quicknet("quicknet_large", (6, 8, 12, 6), (64, 128, 256, 512), input_shape,
                     input_tensor, weights, include_top, num_classes)
