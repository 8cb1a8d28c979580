"""larq's math functions for extremely quantized networks (``larq.math``).

Both are written as larq writes them, so that their values (and the
optimizers built on them, `graph_override.keras.optimizers.Bop`) are larq's
bit for bit, zeros included.
"""

import tensorflow as tf

from graph_override.keras._missing import module_getattr

__all__ = ["heaviside", "sign"]


def sign(x):
    """A sign that is never zero: ``sign(x) = -1 if x < 0 else +1``.

    Computed as larq does, ``tf.sign(tf.sign(x) + 0.1)``, so ``sign(0.0)``
    and ``sign(-0.0)`` are ``+1``; NaN stays NaN. Its gradient is zero
    almost everywhere (use a quantizer for a straight-through one).

    Example:
      >>> from graph_override.keras import math
      >>> math.sign([-2.0, -0.0, 0.0, 3.0]).numpy().tolist()
      [-1.0, 1.0, 1.0, 1.0]
    """
    return tf.sign(tf.sign(x) + 0.1)


def heaviside(x):
    """The Heaviside step with values 0 and 1: ``1 if x > 0 else 0``.

    Computed as larq does, ``tf.sign(tf.nn.relu(x))``: ``heaviside(0) = 0``.

    Example:
      >>> from graph_override.keras import math
      >>> math.heaviside([-2.0, 0.0, 0.5]).numpy().tolist()
      [0.0, 0.0, 1.0]
    """
    return tf.sign(tf.nn.relu(x))

__getattr__ = module_getattr(__name__)
