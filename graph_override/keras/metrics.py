"""larq's training metric ``flip_ratio`` (``larq.metrics.FlipRatio``).

`FlipRatio` is a Keras metric of one tensor: the mean, over its updates after
the first, of the fraction of the tensor's values that changed since the
update before (a binary kernel's sign flips). It is not a metric of
``(y_true, y_pred)``: give it the tensor, e.g. from a callback::

    ratio = FlipRatio()
    class Flips(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ratio.update_state(tf.sign(model.layers[0].kernel))

``model.compile(metrics=["flip_ratio"])`` resolves the name to this class, as
larq registers it, and fails at the first step with `QuantizerError`, which
says so.
"""

import numpy as np
import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.errors import QuantizerError
from graph_override.keras._missing import module_getattr

__all__ = ["FlipRatio"]

_KERAS_3 = hasattr(tf.keras, "ops")
_NOT_A_LOSS_METRIC = (
    "FlipRatio got %d tensors: flip_ratio is the ratio of a tensor's values that changed "
    "since the last update (larq's training metric of a kernel), not a metric of "
    "(y_true, y_pred) for model.compile(metrics=...). Update it with the tensor itself, "
    "e.g. in a callback: ratio.update_state(tf.sign(layer.kernel)).")


class FlipRatio(tf.keras.metrics.Metric):
    """The mean ratio of changed values in a tensor, over its updates.

    ``update_state(values)`` counts the values unequal to the previous
    update's (cast to `values_dtype` first); the result is the mean of those
    ratios over the updates after the first (0 before the second).

    Args:
      values_dtype: the dtype the tracked values are compared in (larq's
        default int8: compare signs, not the float values).
      name: the metric's name.
      dtype: the dtype of the ratio.

    Example:
      >>> import numpy as np
      >>> from graph_override.keras import metrics
      >>> m = metrics.FlipRatio()
      >>> m.update_state(np.array([1, 1])); m.update_state(np.array([2, 2]))
      >>> m.update_state(np.array([1, 2])); float(m.result())
      0.75
    """

    def __init__(self, values_dtype="int8", name="flip_ratio", dtype=None):
        if tf.is_tensor(values_dtype) or tf.is_tensor(name):
            # Keras 2 calls a metric class it resolved by name as a function of
            # (y_true, y_pred).
            raise QuantizerError(_NOT_A_LOSS_METRIC % 2)
        super().__init__(name=name, dtype=dtype)
        self.stateful = True
        self.values_dtype = tf.as_dtype(values_dtype)
        self._shape = None

    def _weight(self, name, shape, dtype):
        if _KERAS_3:
            return self.add_variable(shape=shape, initializer="zeros", dtype=dtype,
                                     aggregation="only_first_replica", name=name)
        return self.add_weight(name=name, shape=shape, dtype=dtype, initializer="zeros",
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def build(self, input_shape):
        """Creates the state for a tracked tensor of `input_shape`."""
        shape = tuple(tf.TensorShape(input_shape).as_list())
        self._previous_values = self._weight("previous_values", shape, self.values_dtype)
        self.total = self._weight("total", (), self.dtype)
        self.count = self._weight("count", (), self.dtype)
        self._size = int(np.prod(shape))
        self._shape = shape
        self.built = True

    def update_state(self, values, *more, sample_weight=None):
        if more:
            raise QuantizerError(_NOT_A_LOSS_METRIC % (1 + len(more)))
        values = tf.cast(values, self.values_dtype)
        if self._shape is None:
            with tf.init_scope():
                self.build(values.shape)
        dtype = tf.as_dtype(self.dtype)
        unchanged = tf.math.count_nonzero(tf.equal(tf.convert_to_tensor(
            self._previous_values), values))
        ratio = 1 - tf.cast(unchanged, dtype) / tf.cast(self._size, dtype)
        self.total.assign_add(ratio * tf.sign(tf.convert_to_tensor(self.count)))
        self.count.assign_add(tf.ones((), dtype))
        self._previous_values.assign(values)

    def result(self):
        if self._shape is None:  # no update yet
            return tf.zeros((), self.dtype)
        return tf.math.divide_no_nan(tf.convert_to_tensor(self.total),
                                     tf.convert_to_tensor(self.count) - 1)

    def reset_state(self):
        """Zeros the mean; the previous values stay (as larq's)."""
        if self._shape is not None:
            self.total.assign(tf.zeros_like(self.total))
            self.count.assign(tf.zeros_like(self.count))

    def reset_states(self):
        self.reset_state()

    def get_config(self):
        return dict(super().get_config(), values_dtype=self.values_dtype.name)


def _register_alias():
    """larq's alias, so that ``metrics=["flip_ratio"]`` resolves to this class
    (whose first update explains what it measures): Keras 2 looks a metric's
    name up in the custom objects, Keras 3 only in its own table."""
    tf.keras.utils.get_custom_objects().setdefault("flip_ratio", FlipRatio)
    if _KERAS_3:
        try:
            from keras.src import metrics as keras_metrics
        except ImportError:  # pragma: no cover - another Keras layout
            return
        table = getattr(keras_metrics, "ALL_OBJECTS_DICT", None)
        if isinstance(table, dict):
            table.setdefault("flip_ratio", FlipRatio)


keras_saving.register([FlipRatio])
_register_alias()

__getattr__ = module_getattr(__name__)
