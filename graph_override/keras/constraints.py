"""larq's weight constraint: `WeightClip` (``"weight_clip"``).

A binarized kernel trains its latent full-precision weights; clipping them to
``[-clip_value, clip_value]`` after each step keeps them where the
straight-through gradient is not zero (larq's "starved weights").
"""

import difflib

import tensorflow as tf

from graph_override import tf2
from graph_override._families import keras_saving
from graph_override.errors import QuantizerError
from graph_override.keras import quantizers

__all__ = ["WeightClip", "get", "weight_clip"]


class WeightClip(tf.keras.constraints.Constraint):
    """Clips every weight to ``[-clip_value, clip_value]`` (boundaries kept).

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.keras import constraints
      >>> constraints.WeightClip(0.5)(tf.constant([-2.0, -0.5, 0.0, 0.75])).numpy()
      array([-0.5, -0.5,  0. ,  0.5], dtype=float32)

    Args:
      clip_value: the bound, > 0.
    """

    def __init__(self, clip_value=1):
        self.clip_value = clip_value

    def __call__(self, x):
        return tf.clip_by_value(x, -self.clip_value, self.clip_value)

    def get_config(self):
        return {"clip_value": self.clip_value}


class weight_clip(WeightClip):  # pylint: disable=invalid-name
    """larq's lower-case alias of `WeightClip`."""


keras_saving.register([WeightClip, weight_clip])

BY_NAME = {"weight_clip": WeightClip, "WeightClip": WeightClip}


def get(identifier, layer=None, argument=None):
    """The constraint `identifier` names: None, ``"weight_clip"``, one of
    Keras's own names (``"non_neg"``, ``"max_norm"``, ...), a Keras config,
    or a constraint object or callable as it is.

    Raises:
      QuantizerError: an unknown name (the message suggests the closest) or
        not a constraint; the message names `layer` and `argument`.
    """
    if isinstance(identifier, str) and identifier in BY_NAME:
        return BY_NAME[identifier]()
    if (isinstance(identifier, (quantizers.Quantizer, tf2.Estimator))
            or any(identifier is f for f in quantizers.FUNCTIONS.values())):
        raise QuantizerError(
            "%s(%s=...): %r is a quantizer, not a constraint; a quantizer goes in "
            "kernel_quantizer= (or input_quantizer=), and a binarized kernel's "
            "constraint is usually \"weight_clip\"." % (
                layer or "constraint", argument or "constraint", identifier))
    try:
        return tf.keras.constraints.get(identifier)
    except (ValueError, TypeError) as e:
        where = "%s(%s=...)" % (layer or "constraint", argument or "constraint")
        if isinstance(identifier, str):
            keras_names = ["max_norm", "min_max_norm", "non_neg", "unit_norm"]
            close = difflib.get_close_matches(identifier, list(BY_NAME) + keras_names, n=2)
            raise QuantizerError("%s: no constraint named %r.%s" % (
                where, identifier, " Did you mean %s?" % " or ".join(
                    repr(c) for c in close) if close else "")) from e
        raise QuantizerError("%s: %r is not a constraint: %s" % (
            where, identifier, e)) from e
