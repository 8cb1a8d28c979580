"""What ``context.quantized_scope(True)`` changes: `get_weights()` and saving
give each quantized kernel (the layer's own kernel quantizer applied to its
latent kernel), as larq's QuantizedVariable does.

Keras reads a model's weights from its variables directly (Keras 3's
``Model.get_weights``, Keras 2's ``.h5`` writer), not through the layers; so
the first `quantized_scope(True)` wraps, once, Keras's ``Layer.get_weights``,
``Model.save`` and ``Model.save_weights``. Outside the scope the wrappers call
Keras's own methods and nothing else. Inside it:

- ``get_weights()`` (of a layer or a model) computes the quantized kernels
  and returns them in place of the latent ones; nothing is written;
- ``save`` and ``save_weights`` (every format of the release) write the
  quantized kernels into the model's variables for the length of the call and
  write the latent ones back after it (also on an exception), bit for bit.
  Another thread that reads the variables during the call sees the quantized
  values.

A variable's own reads (``kernel.numpy()``, ``read_value()``,
``tf.convert_to_tensor(kernel)``) cannot be intercepted (Keras 3's variables
cannot be subclassed) and give the latent kernel in the scope too.
"""

import contextlib
import threading

import numpy as np
import tensorflow as tf

from graph_override.keras import context

_install_lock = threading.Lock()
_installed = []
_swapping = threading.local()


def _quantized_layers(root):
    """Every layer of `root` (itself included) with a quantized weight."""
    from graph_override.keras.layers import quantized_weights  # noqa: PLC0415

    flatten = getattr(root, "_flatten_layers", None)
    layers = list(flatten(include_self=True, recursive=True)) if flatten else [root]
    return [(layer, found) for layer in layers for found in [quantized_weights(layer)] if found]


def _quantized_values(root):
    """``[(variable, quantized tensor)]`` for each quantized weight of `root`:
    the weight's quantizer applied to it, as the layer's call does."""
    return [(variable, quantizer(tf.convert_to_tensor(variable)))
            for _, found in _quantized_layers(root) for _, variable, quantizer in found]


def _get_weights(original):
    def get_weights(self):
        weights = original(self)
        if not context.should_quantize():
            return weights
        quantized = {id(v): q for v, q in _quantized_values(self)}
        if not quantized:
            return weights
        return [np.asarray(quantized[id(v)]) if id(v) in quantized else w
                for v, w in zip(self.weights, weights)]
    get_weights.__wrapped__ = original
    get_weights.__doc__ = original.__doc__
    return get_weights


@contextlib.contextmanager
def _quantized_variables(model):
    """The model's quantized weights hold their quantized values inside the
    block, and their latent ones again after it (also on an exception).
    Nested calls (``save`` calling ``save_weights``) swap once."""
    if getattr(_swapping, "active", False):
        yield
        return
    values = _quantized_values(model)
    latent = [(variable, tf.identity(tf.convert_to_tensor(variable))) for variable, _ in values]
    _swapping.active = True
    try:
        for variable, quantized in values:
            variable.assign(quantized)
        yield
    finally:
        _swapping.active = False
        for variable, value in latent:
            variable.assign(value)


def _saving(original):
    def save(self, *args, **kwargs):
        if not context.should_quantize():
            return original(self, *args, **kwargs)
        with _quantized_variables(self):
            return original(self, *args, **kwargs)
    save.__wrapped__ = original
    save.__doc__ = original.__doc__
    save.__name__ = original.__name__
    return save


def install():
    """Wraps Keras's ``Layer.get_weights``, ``Model.save`` and
    ``Model.save_weights`` (once per process)."""
    with _install_lock:
        if _installed:
            return
        layer, model = tf.keras.layers.Layer, tf.keras.Model
        layer.get_weights = _get_weights(layer.get_weights)
        for name in ("save", "save_weights"):
            setattr(model, name, _saving(getattr(model, name)))
        _installed.append(True)
