"""What an attribution call checks after computing the maps, and says as a
warning on every call that meets it (the Python API and ``graph-override
explain`` alike):

* `CoverageWarning`: op types on the path from the input to the output that
  the method's rules do not cover (their own gradient was used), or that no
  method can differentiate as it needs (`coverage.coverage_report`), with the
  completeness gap where the method has one (DeepLIFT and Integrated
  Gradients: how far the maps' sum is from f(x) - f(baseline));
* `VanishingMapsWarning`: every map of the batch is exactly zero, or its
  largest absolute value is at most `VANISHING` times max(1, the largest
  absolute output): the maps carry no information about the input.

Both derive from `AttributionWarning` (a `UserWarning`), so
``warnings.simplefilter("error", AttributionWarning)`` turns them into
errors and ``"ignore"`` silences them. Python's default filter shows a
warning once per calling line; a loop that should see each one can use
``warnings.simplefilter("always", AttributionWarning)``.

Example:
  >>> import numpy as np, tensorflow as tf, warnings
  >>> from graph_override import attribution
  >>> f = lambda x: tf.matmul(tf.nn.softsign(x), tf.constant([[1.0], [2.0]]))
  >>> with warnings.catch_warnings(record=True) as caught:
  ...     warnings.simplefilter("always")
  ...     result = attribution.deeplift(f, np.ones((1, 2), "float32"))
  >>> caught = [w for w in caught if issubclass(w.category, AttributionWarning)]
  >>> [w.category.__name__ for w in caught]
  ['CoverageWarning']
  >>> print(str(caught[0].message).split(": not linear")[0])
  deeplift does not cover Softsign (1 node(s): Softsign) on the path of model <lambda>
"""

import inspect
import os
import warnings

import numpy as np

__all__ = ["AttributionWarning", "CoverageWarning", "VANISHING", "VanishingMapsWarning",
           "completeness_text", "coverage_text", "vanishing_text", "warn"]

VANISHING = 1e-12  # maps at most this times max(1, largest |output|) vanish


class AttributionWarning(UserWarning):
    """Maps of an attribution method that were computed but are not what the
    method defines, or say nothing; issued on every call that meets it."""


class CoverageWarning(AttributionWarning):
    """Op types on the input-output path that the method does not cover
    (`coverage.coverage_report`), with the completeness gap where the method
    has one."""


class VanishingMapsWarning(AttributionWarning):
    """Every map of the batch is zero, or at most `VANISHING` times
    max(1, the largest absolute output)."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn(message, category):
    """`warnings.warn` of `message`, attributed to the first caller outside
    graph_override (the user's line, however deep the call went)."""
    level, frame = 1, inspect.currentframe()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            _PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _per_example(a):
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


def completeness_text(result):
    """'' or, for a result with a completeness ``delta`` (IG, DeepLIFT), how
    far the maps' sum is from f(x) - f(baseline): the largest |delta| and
    that example's |f(x) - f(baseline)|."""
    delta = getattr(result, "delta", None)
    if delta is None or len(delta) == 0:
        return ""
    delta = np.asarray(delta, np.float64)
    change = _per_example(np.asarray(result.maps, np.float64)).sum(axis=1) - delta
    worst = int(np.argmax(np.abs(delta)))
    gap, scale = abs(float(delta[worst])), abs(float(change[worst]))
    ratio = ("%.3g times |f(x) - f(baseline)| = %.3g" % (gap / scale, scale) if scale > 0
             else "where f(x) - f(baseline) is 0")
    return ("; completeness: the maps sum to f(x) - f(baseline) + delta, largest |delta| "
            "%.3g (example %d: %s)" % (gap, worst, ratio))


def coverage_text(report, result):
    """The `CoverageWarning` of `report` (a `coverage.CoverageReport`): what
    `graph-override explain` prints per op type, with the completeness gap
    of `result` (if any)."""
    return "; ".join("%s does not cover %s (%d node(s): %s) on the path of %s: %s" % (
        report.method, u["op"], u["count"], ", ".join(u["nodes"][:3])
        + (" ..." if u["count"] > 3 else ""), report.source, u["reason"])
        for u in report.uncovered) + completeness_text(result)


def vanishing_text(method, result, x, baseline=None, times_input=False):
    """None, or why the maps of `result` vanish (see the module docstring).
    Maps that are zero because the input is (gradient x input of x = 0,
    DeepLIFT and IG of x = baseline) do not count."""
    maps = np.asarray(result.maps)
    if maps.size == 0 or not np.all(np.isfinite(maps)):
        return None
    if times_input:
        moved = x if baseline is None else np.asarray(x, np.float64) - baseline
        if not np.any(moved):
            return None
    largest = float(np.max(np.abs(maps)))
    outputs = np.asarray(result.outputs) if result.outputs is not None else np.zeros(1)
    finite = outputs[np.isfinite(outputs)]
    output_scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    if largest > VANISHING * max(1.0, output_scale):
        return None
    how = ("is exactly 0" if largest == 0 else
           "has a largest |value| of %.3g, at most %g x max(1, largest |output|)" % (
               largest, VANISHING))
    return (
        "%s maps vanish: every map of the %d example(s) %s; the model's largest |output| is "
        "%.3g. They say nothing about the input. Common causes: batch normalization whose "
        "moving statistics were never calibrated (a Keras application built with "
        "weights=None; the attribution guide shows how to calibrate them), every unit on "
        "the path switched off for these inputs (dead ReLUs), or a target that does not "
        "depend on the input" % (method, maps.shape[0], how, output_scale))
