"""larq-zoo's AlexNet-like networks: BinaryAlexNet, XNORNet (Rastegari et
al., 2016) and DoReFaNet (Zhou et al., 2016), layer for layer as
larq_zoo.literature builds them."""

import tensorflow as tf

from graph_override.keras import layers, quantizers
from graph_override.keras.zoo import _common
from graph_override.keras.zoo.functions import (clip_by_value_activation,
                                                magnitude_aware_sign_unclipped,
                                                xnor_weight_scale)

__all__ = ["BinaryAlexNet", "DoReFaNet", "XNORNet"]

_KL = tf.keras.layers
_BINARY = dict(input_quantizer="ste_sign", kernel_quantizer="ste_sign",
               kernel_constraint="weight_clip", use_bias=False)


def _alex_block(x, features, kernel_size, strides=1, pool=False, first_layer=False):
    kwargs = dict(_BINARY, input_quantizer=None) if first_layer else _BINARY
    x = layers.QuantConv2D(features, kernel_size=kernel_size, strides=strides, padding="same",
                           **kwargs)(x)
    if pool:
        x = _KL.MaxPool2D(pool_size=3, strides=2)(x)
    return _KL.BatchNormalization(scale=False, momentum=0.9)(x)


def _alex_dense(x, units):
    x = layers.QuantConv2D(units, kernel_size=1, **_BINARY)(x)
    return _KL.BatchNormalization(scale=False, momentum=0.9)(x)


def BinaryAlexNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                  num_classes=1000):
    """larq-zoo's binarized AlexNet (61.9 M parameters at 224x224, 1000
    classes; 64x64 is the smallest input it takes).

    Args:
      input_shape: (height, width, 3); default 224x224x3.
      input_tensor: a Keras tensor to use as the input.
      weights: None (random initialization) or the path of a weights file
        (larq-zoo's loads: the same layers in the same order).
      include_top: whether to end with the classifier.
      num_classes: the classifier's classes.
    """
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    out = _alex_block(inputs, 64, 11, strides=4, pool=True, first_layer=True)
    out = _alex_block(out, 192, 5, pool=True)
    out = _alex_block(out, 384, 3)
    out = _alex_block(out, 384, 3)
    out = _alex_block(out, 256, 3, pool=True)
    if include_top:
        out = _KL.Reshape((1, 1, out.shape[-1] * out.shape[-2] * out.shape[-3]))(out)
        out = _alex_dense(out, 4096)
        out = _alex_dense(out, 4096)
        out = _alex_dense(out, num_classes)
        out = _KL.Flatten()(out)
        out = _KL.Activation("softmax", dtype="float32")(out)
    return _common.finish(inputs, out, "binary_alexnet", weights)


def XNORNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
            num_classes=1000):
    """larq-zoo's XNOR-Net (224x224 inputs: its 6x6 convolution needs them),
    its kernels quantized by `xnor_weight_scale`, L2(5e-7) on every kernel.
    Arguments as `BinaryAlexNet`."""
    regularizer = lambda: tf.keras.regularizers.l2(5e-7)  # noqa: E731
    conv = dict(kernel_quantizer=xnor_weight_scale, input_quantizer="ste_sign",
                kernel_constraint="weight_clip", use_bias=False)
    norm = lambda epsilon=1e-4: _KL.BatchNormalization(  # noqa: E731
        momentum=0.9, scale=False, epsilon=epsilon)
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    x = _KL.Conv2D(96, (11, 11), strides=(4, 4), padding="same", use_bias=False,
                   kernel_regularizer=regularizer())(inputs)
    x = norm(1e-5)(x)
    x = _KL.Activation("relu")(x)
    x = _KL.MaxPool2D(pool_size=(3, 3), strides=(2, 2))(x)
    x = norm()(x)
    x = layers.QuantConv2D(256, (5, 5), padding="same", kernel_regularizer=regularizer(),
                           **conv)(x)
    x = _KL.MaxPool2D(pool_size=(3, 3), strides=(2, 2))(x)
    x = norm()(x)
    for filters in (384, 384):
        x = layers.QuantConv2D(filters, (3, 3), padding="same",
                               kernel_regularizer=regularizer(), **conv)(x)
        x = norm()(x)
    x = layers.QuantConv2D(256, (3, 3), padding="same", kernel_regularizer=regularizer(),
                           **conv)(x)
    x = _KL.MaxPool2D(pool_size=(3, 3), strides=(2, 2))(x)
    x = norm()(x)
    x = layers.QuantConv2D(4096, (6, 6), padding="valid", kernel_regularizer=regularizer(),
                           **conv)(x)
    x = norm()(x)
    if include_top:
        x = layers.QuantConv2D(4096, (1, 1), strides=(1, 1), padding="valid",
                               kernel_regularizer=regularizer(), **conv)(x)
        x = norm(1e-3)(x)
        x = _KL.Activation("relu")(x)
        x = _KL.Flatten()(x)
        x = _KL.Dense(num_classes, use_bias=False, kernel_regularizer=regularizer())(x)
        x = _KL.Activation("softmax", dtype="float32")(x)
    return _common.finish(inputs, x, "xnornet", weights)


def _dorefa_quantized(k_bit=2):
    return dict(input_quantizer=quantizers.DoReFa(k_bit=k_bit, mode="activations"),
                kernel_quantizer=magnitude_aware_sign_unclipped, kernel_constraint=None,
                use_bias=False)


def _dorefa_conv(x, filters, kernel_size, pool=False, pool_padding="same"):
    x = layers.QuantConv2D(filters, kernel_size=kernel_size, strides=1, padding="same",
                           **_dorefa_quantized())(x)
    x = _KL.BatchNormalization(scale=False, momentum=0.9, epsilon=1e-4)(x)
    if pool:
        x = _KL.MaxPool2D(pool_size=3, strides=2, padding=pool_padding)(x)
    return x


def DoReFaNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
              num_classes=1000):
    """larq-zoo's DoReFa-Net: 2-bit activations (`quantizers.DoReFa`),
    binarized kernels scaled by their mean magnitude
    (`magnitude_aware_sign_unclipped`); 64x64 is the smallest input it
    takes. Arguments as `BinaryAlexNet`."""
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    out = _KL.Conv2D(96, kernel_size=12, strides=4, padding="valid", use_bias=True)(inputs)
    out = _dorefa_conv(out, 256, 5, pool=True)
    out = _dorefa_conv(out, 384, 3, pool=True)
    out = _dorefa_conv(out, 384, 3)
    out = _dorefa_conv(out, 256, 3, pool_padding="valid", pool=True)
    if include_top:
        out = _KL.Flatten()(out)
        for _ in range(2):
            out = layers.QuantDense(4096, **_dorefa_quantized())(out)
            out = _KL.BatchNormalization(scale=False, momentum=0.9, epsilon=1e-4)(out)
        out = _KL.Activation(clip_by_value_activation)(out)
        out = _KL.Dense(num_classes, use_bias=True)(out)
        out = _KL.Activation("softmax", dtype="float32")(out)
    return _common.finish(inputs, out, "dorefanet", weights)
