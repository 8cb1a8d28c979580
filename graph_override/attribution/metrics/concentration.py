"""Complexity metrics: how concentrated are the maps? Neither needs the model.

* `sparseness` (Chalasani et al. 2020): the Gini index of |maps| (1: all
  relevance on one feature; 0: spread evenly; higher: simpler).
* `complexity` (Bhatt et al. 2020): the entropy of |maps| / sum |maps|, in
  nats (lower: simpler).

Each example's map is flattened; Quantus's conventions are kept so that the
numbers agree with it: |maps| are divided by their largest value and 1e-7
is added before the Gini index (an all-zero map scores 0), and the entropy
takes log(p + 1e-12) (an all-zero map has no distribution: NaN).

The maps of a model of several inputs (a list, or a dict in its order) are
scored together: each example's maps of all the inputs flattened and
concatenated, one distribution. For one input's score, give its maps alone.
"""

import numpy as np

from graph_override.attribution.metrics import _several
from graph_override.attribution.metrics._common import Score
from graph_override.errors import AttributionError

__all__ = ["complexity", "sparseness"]


def _flat(maps, name):
    if _several.is_several(maps):  # several inputs: all their maps together
        maps = _several.concatenated(maps)
    maps = np.asarray(maps)
    if maps.ndim < 2 or not np.issubdtype(maps.dtype, np.number):
        raise AttributionError("%s: maps of shape %s; give a batch, first dimension the "
                               "examples" % (name, maps.shape))
    a = np.abs(maps.reshape(len(maps), -1).astype(np.float64))
    if not np.isfinite(a).all():
        raise AttributionError("%s: maps hold NaN or infinity" % name)
    return a


def sparseness(maps):
    """The Gini index of each example's |map| (see the module)."""
    a = _flat(maps, "sparseness")
    top = a.max(axis=1, keepdims=True)
    a = np.where(top > 0, a / np.where(top > 0, top, 1.0), a) + 1e-7
    a = np.sort(a, axis=1)
    n = a.shape[1]
    rank = np.arange(1, n + 1)
    scores = ((2 * rank - n - 1) * a).sum(axis=1) / (n * a.sum(axis=1))
    return Score("sparseness", scores, True)


def complexity(maps):
    """The entropy of each example's |map| as a distribution (see the module)."""
    a = _flat(maps, "complexity")
    total = a.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = a / total
        scores = -(p * np.log(p + 1e-12)).sum(axis=1)
    scores[total[:, 0] == 0] = np.nan
    return Score("complexity", scores, False)
