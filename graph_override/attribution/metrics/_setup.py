"""The start every metric makes: the model, x, the maps and the targets, checked."""

import numpy as np

from graph_override.attribution.metrics import _common, _several
from graph_override.errors import AttributionError

_MODEL_ARGS = ("inputs", "outputs", "session", "allow_ops")


def predictor(model, batch_size, model_args, metric):
    """A `_common.Predictor` for `model`; `model_args` only the model's own
    (inputs, outputs, session, allow_ops)."""
    unknown = sorted(set(model_args) - set(_MODEL_ARGS))
    if unknown:
        raise AttributionError("%s takes no option %s" % (metric, ", ".join(unknown)))
    return _common.Predictor(model, batch_size=batch_size, **model_args)


def start(metric, model, x, maps, target, batch_size, model_args):
    """(predict, x, maps, targets, outputs on x) for a metric of maps; for a
    model of several inputs (x a list or dict), x and the maps packed into
    one row per example (`_several`)."""
    if _several.is_several(x):
        predict = predictor(model, batch_size, model_args, metric)
        x, maps = _several.pack(predict, x, maps, metric=metric)
    else:
        x, maps = _common.check_maps(x, maps)
        predict = predictor(model, batch_size, model_args, metric)
    outputs = predict(x)
    targets = _common.resolve_targets(target, outputs)
    return predict, x, maps, targets, outputs


def picked(outputs, targets):
    """Each example's output at its target class (float64)."""
    return outputs[np.arange(len(targets)), targets].astype(np.float64)


def baseline_like(baseline, x, metric, predict=None):
    """The value a removed feature takes: a number, or an array that
    broadcasts to x (one image for all, or one per example); for several
    inputs (`predict.packed`), a number or one such value per input."""
    if predict is not None and predict.packed is not None:
        baseline = _several.pack_baseline(predict.packed, baseline, len(x), metric)
    b = np.asarray(baseline, dtype=x.dtype)
    try:
        return np.broadcast_to(b, x.shape)
    except ValueError:
        raise AttributionError("%s: baseline of shape %s does not broadcast to x's shape %s"
                               % (metric, b.shape, x.shape)) from None


def features_3d(a, n, features, channels):
    """`a` (x's shape) as (examples, features, channels): a feature's
    channels side by side (one channel where a feature is one element)."""
    return a.reshape(n, features, channels)
