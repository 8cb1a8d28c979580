"""Randomization: do the maps depend on what they should?

* `random_logit` (Sixt et al. 2020): the similarity between each example's
  map for its target and its map for another class drawn at random (lower:
  the maps depend on the class explained).

The other class of each example is drawn as Quantus draws it (numpy's
RandomState(seed): an index into the classes other than the target), so
that both give the same classes for the same seed. Similarities: "spearman"
(rank correlation of the flattened maps), "pearson", or a function
(a, b) -> one number per example.
"""

import numpy as np

from graph_override.attribution.metrics import _common, _setup, _several
from graph_override.attribution.metrics._common import Score
from graph_override.errors import AttributionError

__all__ = ["SIMILARITIES", "other_classes", "random_logit"]


def _rank(a):
    """Ranks along each row, ties given their mean rank (as scipy's rankdata)."""
    from scipy.stats import rankdata

    return rankdata(a, axis=1)


SIMILARITIES = {
    "pearson": _common.pearson,
    "spearman": lambda a, b: _common.pearson(_rank(a), _rank(b)),
}


def other_classes(targets, classes, seed):
    """For each example a class other than its target, drawn as Quantus's
    RandomLogit draws it for `seed`."""
    if classes < 2:
        raise AttributionError("random_logit needs an output of at least 2 classes")
    draws = np.random.RandomState(seed).randint(0, classes - 1, len(targets))
    return draws + (draws >= targets)


def random_logit(model, x, explain="saliency", target=None, *, maps=None, similarity="spearman",
                 seed=42, explain_options=None, batch_size=_common.DEFAULT_BATCH_SIZE,
                 **model_args):
    """The random-logit check: similarity(Φ(x, target), Φ(x, other class)).

    Args:
      explain: a method name (its options in `explain_options`) or a
        function (x, targets) -> maps.
      maps: Φ(x, target) if already computed.
      similarity: a name of `SIMILARITIES` or a function (a, b) -> scores,
        a and b the flattened maps (examples x features).
      seed: the draw of the other classes (an int).
    """
    if callable(similarity):
        compare = similarity
    elif similarity in SIMILARITIES:
        compare = SIMILARITIES[similarity]
    else:
        raise AttributionError("similarity=%r: give one of %s or a function (a, b) -> scores"
                               % (similarity, ", ".join(sorted(SIMILARITIES))))
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise AttributionError("seed=%r: give an int" % (seed,))
    predict = _setup.predictor(model, batch_size, model_args, "random_logit")
    given = maps
    if _several.is_several(x):  # the maps of all the inputs compared together
        x, given = _several.pack(predict, x, maps, metric="random_logit")
    x = np.asarray(x)
    outputs = predict(x)
    targets = _common.resolve_targets(target, outputs)
    others = other_classes(targets, outputs.shape[-1], seed)
    phi = _common.Explain(predict, explain, explain_options)
    if given is None:
        maps = phi(x, targets)
    else:
        maps = given if predict.packed is not None else _common.check_maps(x, maps)[1]
    moved = phi(x, others)
    n = len(x)
    scores = np.asarray(compare(maps.reshape(n, -1).astype(np.float64),
                                moved.reshape(n, -1).astype(np.float64)), dtype=np.float64)
    return Score("random_logit", scores, False,
                 options={"similarity": similarity if isinstance(similarity, str)
                          else "function", "seed": seed,
                          "other_classes": [int(c) for c in others]})
