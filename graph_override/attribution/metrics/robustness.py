"""Robustness: do the maps stay put when the input barely moves?

* `max_sensitivity` (Yeh et al. 2019): the largest relative change of the
  maps, ||Φ(x + δ) - Φ(x)|| / ||Φ(x)||, over `samples` draws of δ uniform in
  [-radius, radius] (lower: more robust).
* `local_lipschitz_estimate` (Alvarez-Melis & Jaakkola 2018): the largest
  ||Φ(x) - Φ(x')|| / ||x - x'|| over `samples` draws x' = x + N(0, std²)
  (lower: more robust).

Φ is a method of `graph_override.attribution` by name (with its options),
or a function (x, targets) -> maps; each example keeps its target. Norms are
Frobenius norms over each example's whole map. The draws come from numpy's
Generator for `seed`, one draw of x's shape per sample. For a model of
several inputs (x a list or dict), one draw of all the inputs' values per
sample perturbs every input, and the norms span all the inputs (`_several`).
"""

import numpy as np

from graph_override.attribution.metrics import _common, _setup, _several
from graph_override.attribution.metrics._common import Score
from graph_override.errors import AttributionError

__all__ = ["local_lipschitz_estimate", "max_sensitivity"]


def _norm(a):
    return np.sqrt((a.reshape(len(a), -1).astype(np.float64) ** 2).sum(axis=1))


def _run(name, model, x, explain, target, maps, samples, draw, denominator, options,
         batch_size, model_args, explain_options):
    samples = _common.positive_int(samples, "samples")
    predict = _setup.predictor(model, batch_size, model_args, name)
    given = maps
    if _several.is_several(x):  # every input perturbed; norms over all of them
        x, given = _several.pack(predict, x, maps, metric=name)
    x = np.asarray(x)
    if x.ndim < 2 or not np.issubdtype(x.dtype, np.floating):
        raise AttributionError("x has shape %s and dtype %s: give a float batch, first "
                               "dimension the examples" % (x.shape, x.dtype))
    targets = _common.resolve_targets(target, predict(x))
    phi = _common.Explain(predict, explain, explain_options)
    if given is None:
        maps = phi(x, targets)
    else:
        maps = given if predict.packed is not None else _common.check_maps(x, maps)[1]
    worst = np.full(len(x), -np.inf)
    for _ in range(samples):
        moved = (x + draw(x.shape)).astype(x.dtype)
        change = _norm(phi(moved, targets) - maps)
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = np.maximum(worst, change / denominator(maps, x, moved))
    return Score(name, worst, False, options=dict(options, samples=samples,
                                                  explain=explain if isinstance(explain, str)
                                                  else getattr(explain, "__name__", "function")))


def max_sensitivity(model, x, explain="saliency", target=None, *, maps=None, samples=200,
                    radius=0.2, seed=None, explain_options=None,
                    batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """Max-sensitivity: max over `samples` uniform draws in [-radius, radius]
    of ||Φ(x+δ) - Φ(x)|| / ||Φ(x)|| per example (inf where Φ(x) is all zero
    and the perturbed map is not; NaN where both are zero).

    Args:
      explain: a method name (its options in `explain_options`) or a
        function (x, targets) -> maps.
      maps: Φ(x) if already computed (else computed).
    """
    if not radius > 0:
        raise AttributionError("radius=%r: give a positive number" % (radius,))
    generator = _common.rng(seed)
    return _run("max_sensitivity", model, x, explain, target, maps, samples,
                lambda shape: generator.uniform(-radius, radius, shape),
                lambda maps_, x_, moved: _norm(maps_),
                {"radius": radius, "seed": seed}, batch_size, model_args, explain_options)


def local_lipschitz_estimate(model, x, explain="saliency", target=None, *, maps=None,
                             samples=200, std=0.1, seed=None, explain_options=None,
                             batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """Local Lipschitz estimate: max over `samples` draws x' = x + N(0, std²)
    of ||Φ(x) - Φ(x')|| / ||x - x'|| per example. Arguments as
    `max_sensitivity`."""
    if not std > 0:
        raise AttributionError("std=%r: give a positive number" % (std,))
    generator = _common.rng(seed)
    return _run("local_lipschitz_estimate", model, x, explain, target, maps, samples,
                lambda shape: generator.normal(0.0, std, shape),
                lambda maps_, x_, moved: _norm(moved.astype(np.float64) - x_),
                {"std": std, "seed": seed}, batch_size, model_args, explain_options)
