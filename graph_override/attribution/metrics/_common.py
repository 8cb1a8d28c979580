"""What every metric shares: the model as a batched prediction function,
the targets, the maps' features and the `Score` a metric returns.

A metric reads the model only through `Predictor` (outputs for a batch,
`batch_size` rows per model call) and, where it explains perturbed inputs
again, through `Explain` (maps for a batch). Both take every model form the
attribution methods take, through `graph_override.attribution.Explainer`.
"""

import dataclasses
import math

import numpy as np

from graph_override.errors import AttributionError

__all__ = ["Explain", "Predictor", "Score", "check_maps", "feature_view", "order",
           "pearson", "resolve_targets", "rng", "trapezoid"]

DEFAULT_BATCH_SIZE = 64


@dataclasses.dataclass(frozen=True)
class Score:
    """What a metric measured, per example.

    Attributes:
      metric: the metric's name.
      scores: one number per example (float64, shape (N,)).
      higher_is_better: how to read `scores`.
      curve: for the curve metrics, the measured values per example and
        step (N, S); else None.
      steps: the curve's x axis (S,), e.g. the fraction of features removed.
      options: the settings the metric ran with (for a report).
    """

    metric: str
    scores: np.ndarray
    higher_is_better: bool
    curve: np.ndarray = None
    steps: np.ndarray = None
    options: dict = dataclasses.field(default_factory=dict)

    def mean(self):
        """The mean over examples, NaN scores left out (NaN when all are)."""
        finite = self.scores[~np.isnan(self.scores)]
        return float(finite.mean()) if finite.size else float("nan")

    def as_dict(self):
        """A JSON-ready summary: the metric, its mean, each example's score
        and, for a curve metric, the mean curve and its x axis."""
        out = {"metric": self.metric, "mean": self.mean(),
               "higher_is_better": self.higher_is_better,
               "scores": [None if np.isnan(s) else float(s) for s in self.scores],
               "options": self.options}
        if self.curve is not None:
            out["steps"] = [float(s) for s in self.steps]
            out["mean_curve"] = [float(v) for v in np.nanmean(self.curve, axis=0)]
        return out


def _explainer(model, inputs, outputs, session, allow_ops):
    from graph_override.attribution.engine import Explainer  # TensorFlow on first use

    if isinstance(model, Explainer):
        return model
    return Explainer(model, inputs=inputs, outputs=outputs, session=session,
                     allow_ops=allow_ops)


class Predictor:
    """The model's outputs for a batch, `batch_size` rows per model call.

    Args:
      model: any model form of `graph_override.attribution` (a TF2 callable
        or Keras model, a frozen GraphDef or its path with `inputs` and
        `outputs`, a Session's graph) or an `Explainer`.
      batch_size: rows per model call (memory is bounded by it).
    """

    def __init__(self, model, *, inputs=None, outputs=None, session=None, allow_ops=(),
                 batch_size=DEFAULT_BATCH_SIZE):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise AttributionError("batch_size=%r: give a positive int (rows per model call)"
                                   % (batch_size,))
        self.batch_size = batch_size
        self.calls = 0
        self.explainer = _explainer(model, inputs, outputs, session, allow_ops)
        self.packed = None  # several inputs: how a row holds them (`_several.pack`)

    def __call__(self, x):
        x = np.asarray(x)
        parts = []
        for start in range(0, max(len(x), 1), self.batch_size):
            parts.append(self._one(x[start:start + self.batch_size]))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _one(self, x):
        self.calls += 1
        import tensorflow as tf

        from graph_override._tensorflow import compat

        with compat.eager_scope():
            if self.packed is not None:  # several inputs: each fed its part of the rows
                function = self.explainer.function(x, (), self.packed)
                dtypes = [s.dtype.as_numpy_dtype for s in function.specs()[0]]
                return function(*[tf.constant(a.astype(d, copy=False)) for a, d in zip(
                    self.packed.unpack(x), dtypes)]).numpy()
            function = self.explainer.function(x)
            return function(tf.constant(x.astype(function.specs()[0][0].dtype.as_numpy_dtype,
                                                 copy=False))).numpy()


class Explain:
    """Maps of a method for a batch: `method` (a name of
    `graph_override.attribution.METHODS` with its `options`), run through the
    predictor's `Explainer`; or a function ``explain(x, targets) -> maps``."""

    def __init__(self, predictor, method, options=None):
        if callable(method):
            self._function = method
        elif isinstance(method, str):
            explainer, options = predictor.explainer, dict(options or {})
            self._function = lambda x, t: explainer.attribute(method, x, t, **options).maps
        else:
            raise AttributionError("explain=%r: give a method name such as 'saliency' or a "
                                   "function (x, targets) -> maps" % (method,))
        self.batch_size = predictor.batch_size
        self._predictor = predictor

    def __call__(self, x, targets):
        packed = self._predictor.packed
        parts = []
        for s in range(0, len(x), self.batch_size):
            rows = x[s:s + self.batch_size]
            if packed is None:
                parts.append(np.asarray(self._function(rows, targets[s:s + self.batch_size])))
                continue
            from graph_override.attribution.metrics._several import pack_maps

            maps = self._function(packed.structure(packed.unpack(rows)),
                                  targets[s:s + self.batch_size])
            parts.append(pack_maps(packed, maps, "the maps of the explain method", None))
        return np.concatenate(parts)


def resolve_targets(target, outputs):
    """One class per example: None (the argmax of `outputs`), an int for all,
    or an int array with one class per example (checked against the output)."""
    n, classes = outputs.shape[0], outputs.shape[-1]
    if outputs.ndim != 2:
        raise AttributionError("the model's output has shape %s: the metrics take an output "
                               "of shape (examples, classes)" % (outputs.shape,))
    if target is None:
        return np.argmax(outputs, axis=1)
    t = np.asarray(target)
    if t.ndim == 0:
        t = np.full(n, t)
    if t.shape != (n,) or not np.issubdtype(t.dtype, np.integer):
        raise AttributionError("target=%r: give None, an int, or one int per example (%d)"
                               % (target, n))
    bad = (t < 0) | (t >= classes)
    if bad.any():
        raise AttributionError("target: class %d (example %d) is outside the output's %d "
                               "classes" % (t[bad][0], int(np.flatnonzero(bad)[0]), classes))
    return t.astype(np.int64)


def check_maps(x, maps):
    """(x, maps) as float arrays; maps of x's shape, or of x's shape without
    its last (channel) axis, one number per pixel."""
    x = np.asarray(x)
    maps = np.asarray(maps)
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.floating):
        raise AttributionError("x has shape %s and dtype %s: give a float batch, first "
                               "dimension the examples" % (x.shape, x.dtype))
    if maps.shape != x.shape and maps.shape != x.shape[:-1]:
        raise AttributionError(
            "maps have shape %s, x %s: give maps of x's shape, or of x's shape without the "
            "channel axis (one number per pixel)" % (maps.shape, x.shape))
    if not np.isfinite(maps).all():
        raise AttributionError("maps hold NaN or infinity (example %d): the metrics order "
                               "features by their values" % int(np.flatnonzero(
                                   ~np.isfinite(maps.reshape(len(maps), -1)).all(1))[0]))
    return x, maps.astype(np.float64)


def feature_view(x, maps):
    """(n_features, channels): a feature is one element of the maps; where the
    maps have no channel axis, a feature is a pixel with all its channels."""
    per_pixel = maps.shape != x.shape
    features = int(np.prod(maps.shape[1:]))
    return features, (x.shape[-1] if per_pixel else 1)


def order(values):
    """Feature indices per example, largest value first; ties in index order
    (a stable sort, so the order is the same on every numpy)."""
    return np.argsort(-values.reshape(len(values), -1), axis=1, kind="stable")


def rng(seed):
    """numpy's Generator for `seed` (an int; None draws fresh entropy)."""
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)):
        raise AttributionError("seed=%r: give an int or None" % (seed,))
    return np.random.default_rng(seed)


def pearson(a, b):
    """Pearson's correlation of each row of `a` with the same row of `b`
    (NaN where either row does not vary)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (a * b).sum(axis=1) / denominator, np.nan)


def trapezoid(curve, steps):
    """The area under each row of `curve` over the x axis `steps` (the
    trapezoidal rule)."""
    widths = np.diff(steps)
    return ((curve[:, 1:] + curve[:, :-1]) * widths).sum(axis=1) / 2.0


def positive_int(value, name):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise AttributionError("%s=%r: give a positive int" % (name, value))
    return int(value)


def ceil_div(a, b):
    return int(math.ceil(a / b))
