"""`FrozenLayer`: a `FrozenFunction` as a Keras layer (Keras 3 and Keras 2).

The layer owns Keras weights made with ``add_weight`` from the function's
variables (bitwise copies), so ``model.fit``, ``layer.trainable = False``,
``model.summary()`` and Keras checkpoints see them as usual, and it passes
them to `FrozenFunction.call_with_weights`. `FrozenLayer.export_function`
copies the trained values back into the function, ready for
`FrozenFunction.save`.
"""

import re

import tensorflow as tf

__all__ = ["FrozenLayer"]

keras = tf.keras


def _constant_initializer(value):
    def initializer(shape, dtype=None, **kwargs):
        del kwargs
        if tuple(shape) != value.shape:
            raise ValueError("weight shape %s, expected %s" % (tuple(shape), value.shape))
        return tf.constant(value, dtype=dtype)
    return initializer


class FrozenLayer(keras.layers.Layer):
    """A frozen graph in a Keras model.

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
      ...     y = tf.matmul(x, tf.constant([[1.0], [2.0]], name="w"), name="y")
      >>> layer = frozen.FrozenLayer(frozen.to_function(
      ...     g.as_graph_def(), ["x"], ["y"], trainable="^w$"))
      >>> layer(np.ones((1, 2), np.float32)).numpy(), len(layer.trainable_weights)
      (array([[3.]], dtype=float32), 1)

    Args:
      function: a `FrozenFunction` (see `to_function`). Its `trainable`
        weights become the layer's weights.
      trainable: False keeps the weights fixed in ``fit`` (gradients still
        flow through the layer to the layers before it).
      **kwargs: passed to keras.layers.Layer (name, dtype...). The dtype
        defaults to the graph's first input dtype, so Keras does not cast a
        float64 model's inputs to float32.
    """

    def __init__(self, function, trainable=True, **kwargs):
        from graph_override.frozen.tf2.function import FrozenFunction  # pylint: disable=import-outside-toplevel
        if not isinstance(function, FrozenFunction):
            raise TypeError("FrozenLayer needs a FrozenFunction (frozen.to_function(...)), "
                            "got %s" % type(function).__name__)
        kwargs.setdefault("dtype", function.specs()[0][0].dtype.name)
        super().__init__(trainable=trainable, **kwargs)
        # Not an attribute Keras or tf tracking would follow: the function's
        # own variables are not the layer's weights.
        object.__setattr__(self, "_frozen", function)
        self._frozen_weights = [
            self.add_weight(name=re.sub(r"[^A-Za-z0-9_]", "_", name),
                            shape=tuple(v.shape), dtype=v.dtype,
                            initializer=_constant_initializer(v.numpy()),
                            trainable=True)
            for name, v in zip(function.weight_names, function.weights)]
        self.built = True

    @property
    def frozen_function(self):
        """The wrapped `FrozenFunction` (its variables are not updated by
        training; see `export_function`)."""
        return self._frozen

    def call(self, inputs):  # pylint: disable=arguments-differ
        args = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        out = self._frozen.call_with_weights(
            args, [tf.convert_to_tensor(w) for w in self._frozen_weights])
        return list(out) if isinstance(out, tuple) else out

    def compute_output_shape(self, input_shape):
        del input_shape
        shapes = [tuple(s.shape.as_list()) for s in self._frozen.specs()[1]]
        return shapes[0] if len(shapes) == 1 else shapes

    def export_function(self):
        """Copies the layer's weight values into the FrozenFunction's
        variables and returns it (for `FrozenFunction.save`)."""
        for variable, weight in zip(self._frozen.weights, self._frozen_weights):
            variable.assign(tf.convert_to_tensor(weight))
        return self._frozen

    def get_config(self):
        raise NotImplementedError(
            "FrozenLayer holds a GraphDef, which a Keras config cannot carry; "
            "save the model's weights (model.save_weights), or export the layer "
            "with layer.export_function().save(DIR) as a SavedModel")
