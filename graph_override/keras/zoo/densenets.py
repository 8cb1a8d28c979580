"""larq-zoo's densely connected binarized networks: BinaryDenseNet28, 37
and 37Dilated (Bethge et al., 2019) and MeliusNet22 (Bethge et al., 2020),
layer for layer as larq_zoo.literature builds them."""

import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.keras import constraints, layers, quantizers
from graph_override.keras.tf_op_layer import OpLayer
from graph_override.keras.zoo import _common

__all__ = ["BinaryDenseNet28", "BinaryDenseNet37", "BinaryDenseNet37Dilated", "MeliusNet22",
           "PadAdd"]

_KL = tf.keras.layers


def _binary(clip):
    return dict(input_quantizer=quantizers.SteSign(clip_value=clip),
                kernel_quantizer=quantizers.SteSign(clip_value=clip),
                kernel_constraint=constraints.WeightClip(clip_value=clip))


def _densenet(name, reduction, dilation_rate, blocks, input_shape, input_tensor, weights,
              include_top, num_classes):
    norm = lambda: _KL.BatchNormalization(momentum=0.9, epsilon=1e-5)  # noqa: E731
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    if inputs.shape[1] and inputs.shape[1] < 50:
        x = _KL.Conv2D(64, kernel_size=3, padding="same", kernel_initializer="he_normal",
                       use_bias=False)(inputs)
    else:
        x = _KL.Conv2D(64, kernel_size=7, strides=2, padding="same",
                       kernel_initializer="he_normal", use_bias=False)(inputs)
        x = norm()(x)
        x = _KL.Activation("relu")(x)
        x = _KL.MaxPool2D(3, strides=2, padding="same")(x)
    for block, count in enumerate(blocks):
        for _ in range(count):
            y = norm()(x)
            y = layers.QuantConv2D(64, kernel_size=3, dilation_rate=dilation_rate[block],
                                   kernel_initializer="glorot_normal", padding="same",
                                   use_bias=False, **_binary(1.3))(y)
            x = _KL.concatenate([x, y])
        if block < len(blocks) - 1:
            x = norm()(x)
            if dilation_rate[block + 1] == 1:
                x = _KL.MaxPooling2D(2, strides=2)(x)
            x = _KL.Activation("relu")(x)
            x = _KL.Conv2D(round(x.shape[-1] // reduction[block] / 32) * 32, kernel_size=1,
                           kernel_initializer="he_normal", use_bias=False)(x)
    x = norm()(x)
    x = _KL.Activation("relu")(x)
    if include_top:
        x = _common.global_pool(x)
        x = _KL.Dense(num_classes, kernel_initializer="he_normal")(x)
        x = _KL.Activation("softmax", dtype="float32")(x)
    return _common.finish(inputs, x, name, weights)


def BinaryDenseNet28(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                     num_classes=1000):
    """larq-zoo's BinaryDenseNet28 (5.1 M parameters at 224x224, 1000
    classes); an input under 50 pixels high gets a 3x3 stem without pooling,
    as in larq-zoo.

    Args:
      input_shape: (height, width, 3); default 224x224x3.
      input_tensor: a Keras tensor to use as the input.
      weights: None (random initialization) or the path of a weights file
        (larq-zoo's loads: the same layers in the same order).
      include_top: whether to end with the classifier.
      num_classes: the classifier's classes.
    """
    return _densenet("binary_densenet28", (2.7, 2.7, 2.2), (1, 1, 1, 1), (6, 6, 6, 5),
                     input_shape, input_tensor, weights, include_top, num_classes)


def BinaryDenseNet37(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                     num_classes=1000):
    """larq-zoo's BinaryDenseNet37; arguments as `BinaryDenseNet28`."""
    return _densenet("binary_densenet37", (3.3, 3.3, 4), (1, 1, 1, 1), (6, 8, 12, 6),
                     input_shape, input_tensor, weights, include_top, num_classes)


def BinaryDenseNet37Dilated(*, input_shape=None, input_tensor=None, weights=None,
                            include_top=True, num_classes=1000):
    """larq-zoo's BinaryDenseNet37Dilated (dilation 2 and 4 in the last two
    blocks instead of pooling); arguments as `BinaryDenseNet28`."""
    return _densenet("binary_densenet37_dilated", (3.3, 3.3, 4), (1, 1, 2, 4), (6, 8, 12, 6),
                     input_shape, input_tensor, weights, include_top, num_classes)


class PadAdd(tf.keras.layers.Layer):
    """``x + w`` with `w` zero-padded in front along the channels to `x`'s
    channels: MeliusNet's improvement block (larq-zoo writes it as a Python
    ``Lambda``, which a saved model cannot hold safely)."""

    def call(self, inputs):  # pylint: disable=arguments-differ
        x, w = inputs
        pad = x.shape[-1] - w.shape[-1]
        return x + tf.pad(w, [[0, 0], [0, 0], [0, 0], [pad, 0]])


keras_saving.register([PadAdd])


def _melius_conv(x, filters, kernel, name):
    return layers.QuantConv2D(filters, kernel, strides=1, padding="same", use_bias=False,
                              kernel_initializer="glorot_normal", name=name,
                              **_binary(1.3))(x)


def _group_conv(x, filters, kernel, groups, name):
    splits = OpLayer("split", arguments=dict(num_or_size_splits=groups, axis=-1),
                     name=name + "_split")(x)
    outs = [_KL.Conv2D(filters // groups, kernel, padding="same", use_bias=False,
                       kernel_initializer="glorot_normal", name="%s_conv%d" % (name, i))(s)
            for i, s in enumerate(splits)]
    return OpLayer("concat", first_count=groups, arguments=dict(axis=-1),
                   name=name + "_concat")(outs)


def MeliusNet22(*, input_shape=None, input_tensor=None, weights=None, include_top=True,
                num_classes=1000):
    """larq-zoo's MeliusNet22 (7.0 M parameters at 224x224, 1000 classes).
    larq-zoo's grouped convolutions split and concatenate with ``Lambda``
    layers and its improvement blocks add with one: here they are an
    `OpLayer` (tf.split, tf.concat) and a `PadAdd` of the same names, which
    save without Python code. Arguments as `BinaryDenseNet28`."""
    norm = lambda name: _KL.BatchNormalization(momentum=0.9, epsilon=1e-5,  # noqa: E731
                                               name=name)
    pool = lambda name: _KL.MaxPool2D(2, strides=2, padding="same", name=name)  # noqa: E731
    relu = lambda name: _KL.Activation("relu", name=name)  # noqa: E731
    inputs = _common.image_input(input_shape, input_tensor, include_top, weights)
    x = _KL.Conv2D(32, 3, strides=2, padding="same", use_bias=False,
                   kernel_initializer="glorot_normal", name="stem_s0_conv")(inputs)
    x = relu("stem_s0_relu")(norm("stem_s0_bn")(x))
    x = _group_conv(x, 32, 3, 4, "stem_s1_groupconv")
    x = relu("stem_s1_relu")(norm("stem_s1_bn")(x))
    x = _group_conv(x, 64, 3, 8, "stem_s2_groupconv")
    x = relu("stem_s2_relu")(norm("stem_s2_bn")(x))
    x = pool("stem_pool")(x)
    for i, (n, features) in enumerate(zip((4, 5, 4, 4), (160, 224, 256, None))):
        for j in range(n):
            name = "section_%d_block_%d" % (i, j)
            w = _melius_conv(norm(name + "_dense_bn")(x), 64, 3, name + "_dense_binconv")
            x = OpLayer("concat", first_count=2, arguments=dict(axis=-1),
                        name=name + "_dense_concat")([x, w])
            w = _melius_conv(norm(name + "_improve_bn")(x), 64, 3, name + "_improve_binconv")
            x = PadAdd(name=name + "_improve_merge")([x, w])
        if features:
            name = "section_%d_transition" % i
            x = relu(name + "_relu")(pool(name + "_maxpool")(norm(name + "_bn")(x)))
            x = _KL.Conv2D(features, 1, use_bias=False, kernel_initializer="glorot_normal",
                           name=name + "_pw")(x)
    x = relu("head_relu")(norm("head_bn")(x))
    if include_top:
        x = _common.global_pool(x, name="head_globalpool")
        x = _KL.Dense(num_classes, kernel_initializer="glorot_normal", name="head_dense")(x)
        x = _KL.Activation("softmax", dtype="float32", name="head_softmax")(x)
    return _common.finish(inputs, x, "meliusnet22", weights)
