"""larq's global switches (``larq.context``): the quantized scope and the
training metrics scope.

`quantized_scope` and `should_quantize` keep larq's flag (thread-local,
False outside any scope). larq's QuantizedVariable reads it to return the
latent or the quantized kernel; here a layer keeps its latent kernel in a
plain Keras variable and quantizes it inside its own ``call`` (as larq's
layers do under ``quantized_scope(True)``), so reading a variable, saving or
``get_weights()`` give the latent weights in and out of the scope: Keras 3
cannot give a variable a value other than its own (larq subclassed Keras 2's
variables for it). ``layers.quantized_weights(layer)`` gives each kernel with
its quantizer, whose output is the quantized kernel.

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

    Example:
      >>> from graph_override.keras import context
      >>> with context.quantized_scope(True):
      ...     context.should_quantize()
      True
      >>> context.should_quantize()
      False
    """
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
