"""larq-zoo's binarized ResNets: BiRealNet (Liu et al., 2018),
BinaryResNetE18 (Bethge et al., 2019) and RealToBinaryNet (Martinez et al.,
2020), layer for layer as larq_zoo.literature builds them."""

import tensorflow as tf

from graph_override.keras import constraints, layers, quantizers
from graph_override.keras.zoo import _common

__all__ = ["BiRealNet", "BinaryResNetE18", "RealToBinaryNet"]

_KL = tf.keras.layers


def _birealnet_block(x, double_filters=False, filters=None):
    in_filters = x.shape[-1]
    out_filters = filters or in_filters if not double_filters else 2 * in_filters
    shortcut = x
    if in_filters != out_filters:
        shortcut = _KL.AvgPool2D(2, strides=2, padding="same")(shortcut)
        shortcut = _KL.Conv2D(out_filters, (1, 1), kernel_initializer="glorot_normal",
                              use_bias=False)(shortcut)
        shortcut = _KL.BatchNormalization(momentum=0.8)(shortcut)
    x = layers.QuantConv2D(out_filters, (3, 3), strides=1 if out_filters == in_filters else 2,
                           padding="same", input_quantizer="approx_sign",
                           kernel_quantizer="magnitude_aware_sign",
                           kernel_initializer="glorot_normal", kernel_constraint="weight_clip",
                           use_bias=False)(x)
    x = _KL.BatchNormalization(momentum=0.8)(x)
    return _KL.add([x, shortcut])


def BiRealNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
              num_classes=1000):
    """larq-zoo's Bi-Real Net (11.7 M parameters at 224x224, 1000 classes).

    Args:
      input_shape: (height, width, 3); default 224x224x3.
      input_tensor: a Keras tensor to use as the input.
      weights: None (random initialization) or the path of a weights file
        (larq-zoo's loads: the same layers in the same order).
      include_top: whether to end with the classifier.
      num_classes: the classifier's classes.
    """
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    out = _KL.Conv2D(64, (7, 7), strides=2, kernel_initializer="glorot_normal",
                     padding="same", use_bias=False)(inputs)
    out = _KL.BatchNormalization(momentum=0.8)(out)
    out = _KL.MaxPool2D((3, 3), strides=2, padding="same")(out)
    out = _birealnet_block(out, filters=64)
    for _ in range(3):
        out = _birealnet_block(out)
    for _ in range(3):
        out = _birealnet_block(out, double_filters=True)
        for _ in range(3):
            out = _birealnet_block(out)
    if include_top:
        out = _common.global_pool(out)
        out = _KL.Dense(num_classes)(out)
        out = _KL.Activation("softmax", dtype="float32")(out)
    return _common.finish(inputs, out, "birealnet18", weights)


def _binary(clip):
    return dict(input_quantizer=quantizers.SteSign(clip_value=clip),
                kernel_quantizer=quantizers.SteSign(clip_value=clip),
                kernel_constraint=constraints.WeightClip(clip_value=clip))


def _resnet_e_block(x, filters, strides=1):
    if x.shape[-1] != filters:
        residual = _KL.AvgPool2D(pool_size=2, strides=2)(x)
        residual = _KL.Conv2D(filters, kernel_size=1, use_bias=False,
                              kernel_initializer="glorot_normal")(residual)
        residual = _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(residual)
    else:
        residual = x
    x = layers.QuantConv2D(filters, kernel_size=3, strides=strides, padding="same",
                           kernel_initializer="glorot_normal", use_bias=False,
                           **_binary(1.25))(x)
    x = _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    return _KL.add([x, residual])


def BinaryResNetE18(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                    num_classes=1000):
    """larq-zoo's Binary ResNet-E 18 (11.7 M parameters at 224x224); an input
    under 50 pixels high gets a 3x3 stem without pooling, as in larq-zoo.
    Arguments as `BiRealNet`."""
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    if inputs.shape[1] and inputs.shape[1] < 50:
        x = _KL.Conv2D(64, kernel_size=3, padding="same", kernel_initializer="he_normal",
                       use_bias=False)(inputs)
    else:
        x = _KL.Conv2D(64, kernel_size=7, strides=2, padding="same",
                       kernel_initializer="he_normal", use_bias=False)(inputs)
        x = _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        x = _KL.Activation("relu")(x)
        x = _KL.MaxPool2D(3, strides=2, padding="same")(x)
        x = _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
    for block, filters in enumerate((64, 128, 256, 512)):
        for layer in range(2 * 2):
            x = _resnet_e_block(x, filters, strides=1 if block == 0 or layer != 0 else 2)
    x = _KL.Activation("relu")(x)
    if include_top:
        x = _common.global_pool(x)
        x = _KL.Dense(num_classes, kernel_initializer="glorot_normal")(x)
        x = _KL.Activation("softmax", dtype="float32")(x)
    return _common.finish(inputs, x, "binary_resnet_e_18", weights)


def _shortcut(x, name, in_channels, out_channels):
    if in_channels == out_channels:
        return x
    x = _KL.AvgPool2D(2, strides=2, padding="same", name=name + "_shortcut_pool")(x)
    x = _KL.Conv2D(out_channels, kernel_size=1, kernel_initializer="glorot_normal",
                   use_bias=False, name=name + "_shortcut_conv2d")(x)
    return _KL.BatchNormalization(momentum=0.99, name=name + "_shortcut_batch_norm")(x)


def _half_binary_block(x, downsample, name):
    in_channels = x.shape[-1]
    out_channels = int(in_channels * 2 if downsample else in_channels)
    shortcut = _shortcut(x, name, in_channels, out_channels)
    conv_input = _KL.BatchNormalization(momentum=0.99, name=name + "_batch_norm")(x)
    conv = layers.QuantConv2D(out_channels, kernel_size=3, strides=2 if downsample else 1,
                              padding="same", input_quantizer="ste_sign",
                              kernel_quantizer="ste_sign", kernel_constraint="weight_clip",
                              kernel_initializer="glorot_normal", use_bias=False,
                              name=name + "_conv2d")(conv_input)
    z = _common.global_pool(conv_input, name=name + "_scaling_pool")
    z = _KL.Dense(int(in_channels // 8), activation="relu", kernel_initializer="he_normal",
                  name=name + "_scaling_dense_reduce", use_bias=False)(z)
    z = _KL.Dense(out_channels, activation="sigmoid", kernel_initializer="he_normal",
                  name=name + "_scaling_dense_expand", use_bias=False)(z)
    scales = _KL.Reshape((1, 1, out_channels), name=name + "_scaling_reshape")(z)
    x = _KL.Multiply(name=name + "_scaling_multiplication")([conv, scales])
    x = _KL.PReLU(shared_axes=[1, 2], name=name + "_prelu")(x)
    return _KL.Add(name=name + "_skip_add")([x, shortcut])


def RealToBinaryNet(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                    num_classes=1000):
    """larq-zoo's Real-to-Binary Net, binarized (``r2b_bnn``). larq-zoo ends
    each block with an identity ``Lambda`` (``..._out``); here it is a linear
    ``Activation`` of the same name, which saves without Python code.
    Arguments as `BiRealNet`."""
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    name = "r2b_bnn_block_1"
    x = _KL.Conv2D(64, kernel_size=7, strides=2, kernel_initializer="glorot_normal",
                   padding="same", name=name + "_conv2d", use_bias=False)(inputs)
    x = _KL.BatchNormalization(momentum=0.99, name=name + "_batch_norm")(x)
    x = _KL.PReLU(shared_axes=[1, 2], name=name + "_prelu")(x)
    x = _KL.MaxPool2D(3, strides=2, padding="same", name=name + "_pool")(x)
    for block in range(2, 10):
        name = "r2b_bnn_block_%d" % block
        x = _half_binary_block(x, block % 2 == 0 and block > 3, name + "a")
        x = _half_binary_block(x, False, name + "b")
        x = _KL.Activation("linear", name=name + "_out")(x)
    if include_top:
        name = "r2b_bnn_block_10"
        x = _common.global_pool(x, name=name + "_global_pool")
        x = _KL.Dense(num_classes, name=name + "_logits")(x)
        x = _KL.Softmax(name=name + "_probs", dtype="float32")(x)
    return _common.finish(inputs, x, "r2b_bnn", weights)
