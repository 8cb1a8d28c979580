"""Metrics of a model of several inputs: the inputs, their maps and
baselines packed into one row per example (`graph_override.attribution.
several`: each input flattened, in the model's order), so that a metric
runs on one array as it does for one input, and the model is fed each input
its part.

The conventions this gives (Quantus has none for several inputs):

* deletion, insertion, faithfulness_correlation: a feature is one element
  of any input's map; the features of all the inputs are ranked together by
  their map values (ties in the model's input order, then index order), and
  a step removes (or inserts) the next features wherever they are; a random
  subset is drawn from all the inputs' features together. A model of two
  inputs that are the two halves of another model's one input scores
  exactly what that model scores.
* max_sensitivity, local_lipschitz_estimate: every input is perturbed (one
  draw of all the inputs' values per sample), and the norms are taken over
  all the inputs' maps (and values) together.
* random_logit: the similarity of the maps of all the inputs together.
* sparseness, complexity (the maps alone): of all the inputs' maps together,
  flattened and concatenated; call the metric on one input's maps for that
  input's score.
* region_perturbation: the square regions of every image input (each on
  its own grid) ranked together by their summed relevance.
* ROAD: the pixels of every image input ranked together, p % of all of
  them removed, each imputed from its neighbours in its own image.
* region_perturbation and ROAD refuse an input that is not a batch of
  images, naming it.

The maps of several inputs are given as the inputs are (a list in the
model's order, or a dict keyed by input names), each of its input's shape.
"""

import numpy as np

from graph_override.attribution import several
from graph_override.errors import AttributionError

__all__ = ["concatenated", "is_several", "pack", "pack_baseline", "pack_maps"]

is_several = several.is_several


def _float(value, what):
    array = np.asarray(value)
    if array.ndim < 1 or not np.issubdtype(array.dtype, np.floating):
        raise AttributionError("%s has shape %s and dtype %s: give a float batch, first "
                               "dimension the examples" % (what, array.shape, array.dtype))
    return array


def pack(predict, x, maps=None, metric="the metric"):
    """(x, maps) packed: x as [N, total] (its dtype), maps as float64
    [N, total] (None stays None); `predict` (a `_common.Predictor`) told how
    to unpack what it is fed."""
    names = predict.explainer.input_names(x)
    packed, arrays = several.arrange(x, names, _float)
    predict.packed = packed
    packed_maps = None if maps is None else pack_maps(packed, maps, metric)
    return packed.pack(arrays), packed_maps


def pack_baseline(packed, baseline, n, metric="the metric"):
    """A baseline for `n` examples of several inputs: a number for all as it
    is, or one per input (a list or dict as the inputs are; each a number,
    one example or one per example) broadcast to its input and packed."""
    if packed is None or (not is_several(baseline) and np.ndim(baseline) == 0):
        return baseline
    if not is_several(baseline):
        raise AttributionError("%s: the model has %d inputs (%s): give the baseline as a "
                               "number for all, or one per input (a list or a dict)" % (
                                   metric, len(packed.names), ", ".join(packed.names)))
    parts = []
    for value, shape, name in zip(packed.ordered(baseline, "%s: baseline" % metric),
                                  packed.shapes, packed.names):
        try:
            parts.append(np.broadcast_to(np.asarray(value, packed.dtype), (n,) + shape))
        except ValueError:
            raise AttributionError("%s: the baseline of input %s has shape %s, which does "
                                   "not broadcast to the input's %s" % (
                                       metric, name, np.shape(value), (n,) + shape)) from None
    return packed.pack(parts)


def pack_maps(packed, maps, metric="the metric", dtype=np.float64):
    """The maps of several inputs (a list or dict as the inputs were given,
    each of its input's shape) as [N, total] of `dtype` (None: the maps'
    own, as a method returns them for one input)."""
    if not is_several(maps):
        raise AttributionError(
            "%s: the model has %d inputs (%s): give the maps as the inputs are given, one "
            "array per input (a list or a dict), not one array of shape %s" % (
                metric, len(packed.names), ", ".join(packed.names), np.shape(maps)))
    values = packed.ordered(maps, "%s: maps" % metric)
    parts = []
    for value, shape, name in zip(values, packed.shapes, packed.names):
        array = np.asarray(value)
        if array.shape[1:] != tuple(shape):
            raise AttributionError(
                "%s: the maps of input %s have shape %s; give one map of the input's shape "
                "per example (%s per example)" % (metric, name, array.shape, tuple(shape)))
        parts.append(array.reshape(len(array), -1))
    counts = {len(p) for p in parts}
    if len(counts) > 1:
        raise AttributionError("%s: the maps hold different numbers of examples per input: %s"
                               % (metric, ", ".join("%s %d" % (n, len(p))
                                                    for n, p in zip(packed.names, parts))))
    packed_maps = np.concatenate(parts, axis=1)
    if dtype is not None:
        packed_maps = packed_maps.astype(dtype)
    if not np.isfinite(packed_maps).all():
        raise AttributionError("%s: maps hold NaN or infinity: the metrics order features by "
                               "their values" % metric)
    return packed_maps


def concatenated(maps):
    """The maps of several inputs (a list, or a dict in its order) flattened
    per example and concatenated."""
    values = list(maps.values()) if isinstance(maps, dict) else list(maps)
    arrays = [np.asarray(v) for v in values]
    if not arrays or any(a.ndim < 1 for a in arrays) or len({len(a) for a in arrays}) > 1:
        raise AttributionError("maps of several inputs: give one array per input, each with "
                               "one map per example (the same number of examples); got "
                               "shapes %s" % ", ".join(str(a.shape) for a in arrays))
    return np.concatenate([a.reshape(len(a), -1) for a in arrays], axis=1)
