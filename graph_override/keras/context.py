"""larq's global switches (``larq.context``): the quantized scope and the
training metrics scope.

`quantized_scope` and `should_quantize` keep larq's flag (thread-local,
False outside any scope). Inside ``quantized_scope(True)``, as with larq,
``get_weights()`` (of a layer or a model), ``model.save`` and
``model.save_weights`` give each quantized kernel (its layer's kernel
quantizer applied to the latent kernel); the bias and the other weights
stay latent. A variable's own reads (``kernel.numpy()``, ``read_value()``,
``tf.convert_to_tensor(kernel)``) give the latent kernel in the scope too:
Keras 3 cannot give a variable a value other than its own (larq subclassed
Keras 2's variables for it); ``get_weights()`` in the scope, or
``layers.quantized_weights(layer)`` (each kernel with its quantizer), give
the quantized one.

`metrics_scope` and `get_training_metrics` keep the set of larq's training
metrics (only ``"flip_ratio"``); a quantizer created while it holds a metric
raises `QuantizerError` (these quantizers do not compute metrics; compute
the ratio with `graph_override.keras.metrics.FlipRatio`).
"""

import contextlib
import threading

from graph_override.keras._missing import module_getattr

__all__ = ["get_training_metrics", "metrics_scope", "quantized_scope", "should_quantize"]

_quantized = threading.local()
_training_metrics = set()
_AVAILABLE_METRICS = frozenset(("flip_ratio",))


@contextlib.contextmanager
def quantized_scope(quantize):
    """Sets `should_quantize` to `quantize` inside the block (and restores it
    on exit, also on an exception); yields `quantize`.

    With `quantize` true, ``get_weights()``, ``model.save`` and
    ``model.save_weights`` give the quantized kernels inside the block (see
    the module's docstring; the first such scope wraps those Keras methods).

    Example:
      >>> from graph_override.keras import context
      >>> with context.quantized_scope(True):
      ...     context.should_quantize()
      True
      >>> context.should_quantize()
      False
    """
    if quantize:
        from graph_override.keras import _quantized_reads  # noqa: PLC0415

        _quantized_reads.install()
    backup = should_quantize()
    _quantized.should_quantize = quantize
    try:
        yield quantize
    finally:
        _quantized.should_quantize = backup


def should_quantize():
    """The flag of the innermost `quantized_scope` of this thread (False
    outside any)."""
    return getattr(_quantized, "should_quantize", False)


@contextlib.contextmanager
def metrics_scope(metrics=()):
    """Adds `metrics` to the training metrics inside the block, as larq does.

    Raises:
      ValueError: a metric other than ``"flip_ratio"`` (larq's type; the
        message names the metric).
    """
    metrics = list(metrics)
    for metric in metrics:
        if metric not in _AVAILABLE_METRICS:
            raise ValueError("Unknown training metric '%s'. Available metrics: %s."
                             % (metric, set(_AVAILABLE_METRICS)))
    backup = set(_training_metrics)
    _training_metrics.update(metrics)
    try:
        yield _training_metrics
    finally:
        _training_metrics.clear()
        _training_metrics.update(backup)


def get_training_metrics():
    """The live set of training metrics of the current scope (larq's)."""
    return _training_metrics

__getattr__ = module_getattr(__name__)
