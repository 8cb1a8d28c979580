"""What ``context.quantized_scope(True)`` changes: `get_weights()` and the
``.h5`` and ``.keras`` writers give each quantized kernel (the layer's own
kernel quantizer applied to its latent kernel), as larq's QuantizedVariable
does.

Keras reads a model's weights from its variables directly (Keras 3's
``Model.get_weights``, the ``.h5`` writer, the ``.keras`` writer's
``save_own_variables``), not through the layers' own methods; so the first
`quantized_scope(True)` wraps, once, Keras's ``Layer.get_weights`` and its
``.h5`` writer (``save_weights_to_hdf5_group``), and the quantized layers'
``save_own_variables`` (``.keras``, Keras 3's ``.weights.h5``). Outside the scope the
wrappers call Keras's own functions and nothing else. Inside it:

- ``get_weights()`` (of a layer or a model) computes the quantized kernels
  and returns them in place of the latent ones; nothing is written;
- the writers write the quantized kernels into the layer's variables for
  the length of the call and the latent ones back after it (also on an
  exception), bit for bit. Another thread that reads the variables during
  the call sees the quantized values.

TensorFlow checkpoints (Keras 2's ``save_weights`` to a checkpoint path,
SavedModels, ``tf.train.Checkpoint``) keep the latent kernels, as larq's do.
A variable's own reads (``kernel.numpy()``, ``read_value()``,
``tf.convert_to_tensor(kernel)``) cannot be intercepted (Keras 3's variables
cannot be subclassed) and give the latent kernel in the scope too.
"""

import contextlib
import importlib
import threading

import numpy as np
import tensorflow as tf

from graph_override.keras import context

_install_lock = threading.Lock()
_installed = []
_swapping = threading.local()


def _quantized_layers(root, recursive=True):
    """Every layer of `root` (itself included; `recursive`: and the layers
    inside it) with a quantized weight."""
    from graph_override.keras.layers import quantized_weights  # noqa: PLC0415

    flatten = getattr(root, "_flatten_layers", None) if recursive else None
    layers = list(flatten(include_self=True, recursive=True)) if flatten else [root]
    return [(layer, found) for layer in layers for found in [quantized_weights(layer)] if found]


def _quantized_values(root, recursive=True):
    """``[(variable, quantized tensor)]`` for each quantized weight of `root`:
    the weight's quantizer applied to it, as the layer's call does."""
    return [(variable, quantizer(tf.convert_to_tensor(variable)))
            for _, found in _quantized_layers(root, recursive)
            for _, variable, quantizer in found]


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
def _quantized_variables(root, recursive):
    """The quantized weights of `root` hold their quantized values inside
    the block, and their latent ones again after it (also on an exception).
    Nested writers swap once."""
    if getattr(_swapping, "active", False):
        yield
        return
    values = _quantized_values(root, recursive)
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


def _writing(original, recursive):
    """`original(layer_or_group, ...)` with the quantized values of the
    model's (``recursive``) or the layer's own quantized weights."""
    def write(*args, **kwargs):
        if not context.should_quantize():
            return original(*args, **kwargs)
        layer = kwargs["model"] if "model" in kwargs else args[1] if recursive else args[0]
        with _quantized_variables(layer, recursive):
            return original(*args, **kwargs)
    write.__wrapped__ = original
    write.__doc__ = original.__doc__
    write.__name__ = original.__name__
    return write


def _h5_writers():
    """The modules holding Keras's ``.h5`` weight writer, of either release."""
    for name in ("keras.src.legacy.saving.legacy_h5_format",  # Keras 3
                 "keras.src.saving.legacy.hdf5_format"):  # Keras 2.15
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "save_weights_to_hdf5_group"):
            yield module


def install():
    """Wraps Keras's ``Layer.get_weights`` and ``.h5`` writer, and the
    quantized layers' ``save_own_variables`` (once per process)."""
    with _install_lock:
        if _installed:
            return
        from graph_override.keras.layers import LAYERS  # noqa: PLC0415

        layer = tf.keras.layers.Layer
        layer.get_weights = _get_weights(layer.get_weights)
        # Keras 3's Dense and convolutions write their own kernels.
        for cls in LAYERS:
            cls.save_own_variables = _writing(cls.save_own_variables, recursive=False)
        for module in _h5_writers():
            module.save_weights_to_hdf5_group = _writing(
                module.save_weights_to_hdf5_group, recursive=True)
        _installed.append(True)
