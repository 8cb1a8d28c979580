"""larq's activations (``larq.activations``): `hard_tanh` and `leaky_tanh`,
by name in Keras once `graph_override.keras` is imported
(``Activation("hard_tanh")``, ``activation="leaky_tanh"``)."""

import tensorflow as tf

from graph_override._families import keras_saving
from graph_override.keras._missing import module_getattr

__all__ = ["hard_tanh", "leaky_tanh"]


def hard_tanh(x):
    """``clip(x, -1, 1)``; its gradient is 1 inside [-1, 1], 0 outside (at
    -1 and +1: 1, as `tf.clip_by_value`'s).

    Example:
      >>> from graph_override.keras import activations
      >>> activations.hard_tanh([-2.0, 0.5, 3.0]).numpy().tolist()
      [-1.0, 0.5, 1.0]
    """
    return tf.clip_by_value(x, -1, 1)


def leaky_tanh(x, alpha=0.2):
    """Hard tanh with slope `alpha` outside [-1, 1], as larq writes it:
    ``clip(x, -1, 1) + (max(x, 1) - 1) * alpha + (min(x, -1) + 1) * alpha``."""
    return (tf.clip_by_value(x, -1, 1) + (tf.math.maximum(x, 1) - 1) * alpha
            + (tf.math.minimum(x, -1) + 1) * alpha)


keras_saving.register([hard_tanh, leaky_tanh])
for _function in (hard_tanh, leaky_tanh):  # larq's bare names, as larq registers them
    tf.keras.utils.get_custom_objects().setdefault(_function.__name__, _function)

__getattr__ = module_getattr(__name__)
