"""What the zoo's builders share: the image input, the names Keras 2 gives
the layers larq-zoo builds implicitly, global pooling, weights.

larq-zoo writes ``x + residual`` on symbolic tensors, which Keras 2 records
as a TFOpLambda layer named ``tf.__operators__.add`` (``_1``, ...); Keras 3
records no layer at all. `add` makes the same layer on both (an `OpLayer`,
which saves and loads by name), and `image_input` names the input as Keras 2
does (``input_1``), so that a model's layers, names and summary are
larq-zoo's. The counters are Keras's own (``backend.get_uid``): they restart
with ``clear_session``, as Keras 2's do.
"""

import os

import tensorflow as tf

from graph_override.keras.tf_op_layer import OpLayer

__all__ = ["add", "finish", "global_pool", "image_input"]


def _counted(prefix):
    return tf.keras.backend.get_uid("graph_override.keras.zoo>" + prefix)


def image_input(input_shape, input_tensor, include_top, weights):
    """The model's input: `input_tensor` if given (wrapped in an Input when
    it is not a Keras tensor), else an Input of `input_shape` (default
    224x224x3, or any size without the top), checked as larq-zoo checks it.

    Raises:
      ValueError: `weights` is neither None nor an existing file ("imagenet"
        weights are not downloaded here); a shape without 3 channels, or
        one that is not fully known while `include_top`.
    """
    if weights is not None and not (isinstance(weights, (str, os.PathLike))
                                    and os.path.exists(weights)):
        raise ValueError("weights=%r: give None (random initialization) or the path of a "
                         "weights file you have (larq-zoo's ImageNet weights are not "
                         "downloaded here: fetch the .h5 file and pass its path)" % (weights,))
    if input_shape is None:
        input_shape = (224, 224, 3) if include_top or weights is not None else (None, None, 3)
    input_shape = tuple(input_shape)
    if len(input_shape) != 3 or input_shape[-1] != 3:
        raise ValueError("input_shape=%r: expected (height, width, 3)" % (input_shape,))
    if include_top and None in input_shape:
        raise ValueError("input_shape=%r: with include_top=True the height and width must be "
                         "given" % (input_shape,))
    if input_tensor is not None:
        try:
            keras_tensor = tf.keras.backend.is_keras_tensor(input_tensor)
        except ValueError:
            keras_tensor = False
        if keras_tensor:
            return input_tensor
        return tf.keras.layers.Input(tensor=input_tensor, shape=input_shape,
                                     name="input_%d" % _counted("input"))
    return tf.keras.layers.Input(shape=input_shape, name="input_%d" % _counted("input"))


def add(x, y):
    """``x + y`` as Keras 2 records it: a layer ``tf.__operators__.add[_N]``."""
    n = _counted("tf.__operators__.add") - 1
    name = "tf.__operators__.add" + ("_%d" % n if n else "")
    return OpLayer("__operators__.add", tensor_arguments=["y"], name=name)([x, y])


def global_pool(x, name=None):
    """larq-zoo's global average pooling: an AveragePooling2D over the whole
    (known) height and width, then Flatten; GlobalAveragePooling2D when the
    size is not known."""
    height, width = x.shape[1], x.shape[2]
    if height is None or width is None:
        return tf.keras.layers.GlobalAveragePooling2D(name=name)(x)
    x = tf.keras.layers.AveragePooling2D(pool_size=(height, width),
                                         name=name and name + "_pool")(x)
    return tf.keras.layers.Flatten(name=name and name + "_flatten")(x)


def finish(inputs, outputs, name, weights, model_class=None):
    """The model, with the weights file `weights` (a path) loaded."""
    model = (model_class or tf.keras.Model)(inputs=inputs, outputs=outputs, name=name)
    if weights is not None:
        model.load_weights(os.fspath(weights))
    return model
