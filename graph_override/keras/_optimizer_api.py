"""What `graph_override.keras.optimizers` needs of the two Keras optimizer
APIs (Keras 3's ``keras.optimizers.Optimizer``, Keras 2's new
``tf.keras.optimizers.Optimizer`` of TensorFlow 2.15), in one place."""

import tensorflow as tf

from graph_override.errors import OptimizerError

__all__ = ["Base", "Hyperparameters", "KERAS_3", "base_arguments", "deserialize_hyper",
           "serialize_hyper", "variable_name"]

KERAS_3 = hasattr(tf.keras, "ops")
Base = tf.keras.optimizers.Optimizer
_Schedule = tf.keras.optimizers.schedules.LearningRateSchedule


def base_arguments(kwargs):
    """The Keras base class's arguments: Keras 3 requires a learning rate
    (Bop has none; 0.0, never read), Keras 2's XLA-compiled update step
    would fuse Bop's multiply-add, which larq's does not."""
    kwargs.pop("is_legacy_optimizer", None)
    if KERAS_3:
        kwargs.pop("learning_rate", None)
        return dict(kwargs, learning_rate=0.0)
    kwargs.setdefault("jit_compile", False)
    kwargs.setdefault("weight_decay", None)  # Keras 2's default 0 would read the rate
    return kwargs


def serialize_hyper(value):
    if isinstance(value, _Schedule):
        return tf.keras.optimizers.schedules.serialize(value)
    if isinstance(value, tf.Variable) or hasattr(value, "numpy"):
        return float(value.numpy())
    return value


def deserialize_hyper(value, custom_objects=None):
    if isinstance(value, dict):
        return tf.keras.optimizers.schedules.deserialize(value, custom_objects=custom_objects)
    return value


class Hyperparameters:
    """``gamma`` and ``threshold`` as variables of the optimizer (so a
    callback can set them inside a traced step) or as schedules of the step."""

    def _hyper_variable(self, name, value):
        if isinstance(value, _Schedule) or callable(value):
            return value
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise OptimizerError("%s(%s=%r): a number or a learning-rate schedule "
                                 "(tf.keras.optimizers.schedules)" % (
                                     type(self).__name__, name, value)) from None
        if KERAS_3:
            return tf.keras.Variable(value, name=name, dtype=tf.keras.backend.floatx(),
                                     trainable=False, aggregation="only_first_replica")
        with tf.init_scope():
            return tf.Variable(value, name=name, dtype=tf.keras.backend.floatx(),
                               trainable=False,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def _set_hyper_value(self, attribute, name, value):
        current = getattr(self, attribute, None)
        if current is not None and not isinstance(value, _Schedule) and not callable(value) \
                and not isinstance(current, _Schedule) and not callable(current):
            current.assign(value)
        else:
            setattr(self, attribute, self._hyper_variable(name, value))

    def _decayed(self, value, dtype):
        """larq's `_get_decayed_hyper`: a schedule of the step, cast."""
        if isinstance(value, _Schedule):
            value = value(tf.cast(self.iterations, dtype))
        elif callable(value) and not hasattr(value, "assign"):
            value = value()
        return tf.cast(value, dtype)

    def _get_hyper(self, name, dtype=None):
        """Keras 2's legacy accessor, as larq's tests read it."""
        value = getattr(self, "_" + name)
        return value if dtype is None else self._decayed(value, dtype)


def variable_name(var):
    """A name that is the same when the model is built again (for the saved
    mapping): ``layer/weight``, the last two parts of Keras 3's path or
    Keras 2's name (a loaded model's paths lack the model's own name)."""
    name = getattr(var, "path", None) or var.name
    return "/".join(name.split(":")[0].split("/")[-2:])
