"""Faithfulness: do the features the maps rank highest move the model most?

* `deletion` (pixel flipping; Bach et al. 2015, Petsiuk et al. 2018):
  features removed most relevant first, the target's output after each
  step; the area under that curve (lower: more faithful).
* `insertion` (Petsiuk et al. 2018): from the baseline, features put back
  most relevant first; the area (higher: more faithful).
* `region_perturbation` (Samek et al. 2017): square regions removed by their
  summed relevance; AOPC, the mean drop of the output (higher: more
  faithful for "morf").
* `road` (Rong et al. 2022): the most relevant pixels removed and imputed
  from their neighbours (noisy linear imputation), so the removal itself
  leaks no shape; the share of examples still classified as their target
  at each percentage (lower: more faithful).
* `faithfulness_correlation` (Bhatt et al. 2020): Pearson correlation, over
  random subsets of features, between the subsets' summed relevance and the
  output's drop when they are removed (higher: more faithful).

Conventions (and how they meet Quantus's, which tests compare number for
number): a feature is one element of the maps, or a pixel with all its
channels where the maps have no channel axis; features are ranked by value
(`abs=True` ranks |value|), ties in index order; a removed feature takes
`baseline` (a number or an array broadcast to x). Every curve starts with
the unperturbed input (Quantus's pixel-flipping curve is ours without its
first point, and its AUC is ours times the number of steps). A model of
several inputs: x, the maps and a baseline given per input (a list or a
dict), the features of all the inputs ranked together (`_several`).
"""

import numpy as np

from graph_override.attribution.metrics import _common, _setup, _several
from graph_override.attribution.metrics._common import Score
from graph_override.errors import AttributionError

__all__ = ["deletion", "faithfulness_correlation", "insertion", "region_perturbation", "road"]


def _plain_number(value):
    return not _several.is_several(value) and np.ndim(value) == 0


def _steps(features, features_in_step):
    k = (max(1, _common.ceil_div(features, 100)) if features_in_step is None
         else _common.positive_int(features_in_step, "features_in_step"))
    count = _common.ceil_div(features, k)
    return k, count, np.minimum(np.arange(count + 1) * k, features) / features


def _curve(name, model, x, maps, target, baseline, features_in_step, abs, batch_size,
           model_args, insert):
    predict, x, maps, targets, outputs = _setup.start(name, model, x, maps, target,
                                                      batch_size, model_args)
    n = len(x)
    features, channels = _common.feature_view(x, maps)
    k, count, steps = _steps(features, features_in_step)
    ranked = _common.order(np.abs(maps) if abs else maps)
    base = _setup.features_3d(_setup.baseline_like(baseline, x, name, predict), n, features,
                              channels)
    source = _setup.features_3d(x, n, features, channels)
    current = (base if insert else source).copy()
    fill = source if insert else base
    rows = np.arange(n)[:, None]
    curve = np.empty((n, count + 1))
    curve[:, 0] = _setup.picked(predict(current.reshape(x.shape)) if insert else outputs,
                                targets)
    for s in range(count):
        idx = ranked[:, s * k:(s + 1) * k]
        current[rows, idx] = fill[rows, idx]
        curve[:, s + 1] = _setup.picked(predict(current.reshape(x.shape)), targets)
    options = {"baseline": baseline if _plain_number(baseline) else "array",
               "features_in_step": k, "abs": abs}
    return Score(name, _common.trapezoid(curve, steps), insert, curve, steps,
                 {k_: (float(v) if isinstance(v, np.floating) else v)
                  for k_, v in options.items()})


def deletion(model, x, maps, target=None, *, baseline=0.0, features_in_step=None, abs=False,
             batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """The deletion curve (pixel flipping): the target's output as features
    are set to `baseline`, most relevant first, `features_in_step` at a time
    (default: about 100 steps); score, the area under it over the fraction
    removed (lower: more faithful).

    Args:
      model: any model form of `graph_override.attribution` (with `inputs`,
        `outputs`, `session`, `allow_ops` as there) or an `Explainer`.
      x: the inputs (examples first); maps: their maps (x's shape, or
        without the channel axis).
      target: None (the argmax of the output on x), a class, or one per
        example.
      batch_size: rows per model call.

    Returns:
      A `Score` with `curve` (examples x (steps + 1)) and `steps` (the
      fraction of features removed, from 0 to 1).
    """
    return _curve("deletion", model, x, maps, target, baseline, features_in_step, abs,
                  batch_size, model_args, insert=False)


def insertion(model, x, maps, target=None, *, baseline=0.0, features_in_step=None, abs=False,
              batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """The insertion curve: from `baseline` (a number, or e.g. a blurred copy
    of x), features put back most relevant first; score, the area under the
    target's output over the fraction inserted (higher: more faithful).
    Arguments as `deletion`."""
    return _curve("insertion", model, x, maps, target, baseline, features_in_step, abs,
                  batch_size, model_args, insert=True)


def _blocks(h, w, patch):
    """Each square region as (row slice, column slice): the image padded to a
    multiple of `patch` (half before, half after), the padding left out;
    regions row by row."""
    def cuts(size):
        pad = (patch - size % patch) % patch
        first = -(pad // 2)
        return [(max(a, 0), min(a + patch, size)) for a in range(first, size, patch)]
    return [(slice(*r), slice(*c)) for r in cuts(h) for c in cuts(w)]


def region_perturbation(model, x, maps, target=None, *, patch_size=8, regions=100,
                        order="morf", baseline=0.0, seed=None,
                        batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """Region perturbation (Samek et al. 2017): square regions of
    `patch_size` pixels (all channels) ranked by their summed relevance
    ("morf": most relevant first, "lerf": least, "random": seeded), set to
    `baseline` one after another, up to `regions` of them; the curve is the
    drop of the target's output, f(x) - f(x perturbed), after each region;
    the score its mean (AOPC; higher: more faithful for "morf").

    x is a batch of images (examples, height, width, channels). Regions at
    the border are cut where the padded grid leaves the image (Quantus's
    padding). Other arguments as `deletion`. A model of several image
    inputs (x, maps and a baseline given per input): the regions of every
    input, each on its own grid, ranked together (ties in the model's input
    order, then row by row), each step removing the next wherever it is.
    """
    if not _several.is_several(x) and np.ndim(x) != 4:
        raise AttributionError("region_perturbation takes images (examples, height, width, "
                               "channels); x has shape %s" % (np.shape(x),))
    if order not in ("morf", "lerf", "random"):
        raise AttributionError("order=%r: give 'morf', 'lerf' or 'random'" % (order,))
    patch_size = _common.positive_int(patch_size, "patch_size")
    regions = _common.positive_int(regions, "regions")
    predict, x, maps, targets, outputs = _setup.start(
        "region_perturbation", model, x, maps, target, batch_size, model_args)
    base = _setup.baseline_like(baseline, x, "region_perturbation", predict)
    images, pack = _images(predict, x, maps, base)
    n = len(x)
    blocks = []
    for k, (image, _, _, name) in enumerate(images):
        h, w = image.shape[1:3]
        if patch_size > min(h, w):
            raise AttributionError("patch_size=%d is larger than the image%s (%dx%d)"
                                   % (patch_size, name, h, w))
        blocks += [(k, r, c) for r, c in _blocks(h, w, patch_size)]
    sums = np.stack([images[k][1][:, r, c].sum(axis=(1, 2)) for k, r, c in blocks], axis=1)
    if order == "random":
        generator = _common.rng(seed)
        ranked = np.stack([generator.permutation(len(blocks)) for _ in range(n)])
    else:
        ranked = np.argsort(-sums if order == "morf" else sums, axis=1, kind="stable")
    current = [image.copy() for image, _, _, _ in images]
    before = _setup.picked(outputs, targets)
    count = min(regions, len(blocks))
    curve = np.empty((n, count))
    for s in range(count):
        for i in range(n):
            k, r, c = blocks[ranked[i, s]]
            current[k][i, r, c] = images[k][2][i, r, c]
        curve[:, s] = before - _setup.picked(predict(pack(current)), targets)
    return Score("region_perturbation", curve.mean(axis=1), order != "lerf", curve,
                 np.arange(1, count + 1, dtype=np.float64),
                 {"patch_size": patch_size, "regions": count, "order": order,
                  "seed": seed})


def _images(predict, x, maps, base, metric="region_perturbation"):
    """([(images, pixel maps, baseline, name) per image input], a function
    that makes the model's batch of the images): one input as it is; several
    unpacked from their packed rows, each refused by name if not images."""
    packed = predict.packed
    if packed is None:
        return [(x, maps if maps.ndim == 3 else maps.sum(axis=-1), base, "")], \
            lambda arrays: arrays[0]
    parts = []
    for name, image, pixel, value in zip(packed.names, packed.unpack(x), packed.unpack(maps),
                                         packed.unpack(np.asarray(base, x.dtype))):
        if image.ndim != 4:
            raise AttributionError("%s takes images (examples, height, width, channels); "
                                   "the input %s has shape %s" % (metric, name, image.shape))
        parts.append((image, pixel.sum(axis=-1), value, " of input %s" % name))
    return parts, packed.pack


def faithfulness_correlation(model, x, maps, target=None, *, runs=100, subset_size=224,
                             baseline=0.0, seed=None, batch_size=_common.DEFAULT_BATCH_SIZE,
                             **model_args):
    """Faithfulness correlation (Bhatt et al. 2020): `runs` random subsets of
    `subset_size` features (seeded), each set to `baseline`; the score is the
    Pearson correlation between the subsets' summed relevance and the drop
    of the target's output (NaN where either does not vary)."""
    runs = _common.positive_int(runs, "runs")
    subset_size = _common.positive_int(subset_size, "subset_size")
    predict, x, maps, targets, outputs = _setup.start(
        "faithfulness_correlation", model, x, maps, target, batch_size, model_args)
    n = len(x)
    features, channels = _common.feature_view(x, maps)
    if subset_size > features:
        raise AttributionError("subset_size=%d: the maps have %d features"
                               % (subset_size, features))
    generator = _common.rng(seed)
    base = _setup.features_3d(_setup.baseline_like(baseline, x, "faithfulness_correlation",
                                                   predict), n, features, channels)
    flat_maps = maps.reshape(n, features)
    before = _setup.picked(outputs, targets)
    relevance = np.empty((n, runs))
    drops = np.empty((n, runs))
    rows = np.arange(n)[:, None]
    for run in range(runs):
        subsets = np.stack([generator.choice(features, subset_size, replace=False)
                            for _ in range(n)])
        current = _setup.features_3d(x, n, features, channels).copy()
        current[rows, subsets] = base[rows, subsets]
        drops[:, run] = before - _setup.picked(predict(current.reshape(x.shape)), targets)
        relevance[:, run] = flat_maps[rows, subsets].sum(axis=1)
    return Score("faithfulness_correlation", _common.pearson(relevance, drops), True,
                 options={"runs": runs, "subset_size": subset_size, "seed": seed})


def road(model, x, maps, target=None, *, percentages=tuple(range(1, 100, 2)), order="morf",
         noise=0.01, seed=None, batch_size=_common.DEFAULT_BATCH_SIZE, **model_args):
    """ROAD (Rong et al. 2022), remove and debias: for each percentage p, the
    p % most relevant pixels ("lerf": least) are imputed from their
    neighbours (noisy linear imputation: each removed pixel the weighted mean
    of its 8 neighbours, solved jointly, plus `noise` x a seeded normal
    draw); the curve is 1 where the example is still classified as its
    target, else 0; the score its mean over percentages (lower: more
    faithful for "morf").

    x is a batch of images (examples, height, width, channels); maps with a
    channel axis rank pixels by their sum over channels. Needs SciPy (a
    requirement of scikit-learn, which graph_override requires). A model of
    several image inputs (x and the maps given per input): the pixels of
    every input ranked together, p % of all of them removed, each input's
    imputed from its neighbours in its own image (the noise drawn example by
    example, in the model's input order).
    """
    from graph_override.attribution.metrics import _imputation

    if not _several.is_several(x) and np.ndim(x) != 4:
        raise AttributionError("road takes images (examples, height, width, channels); x has "
                               "shape %s" % (np.shape(x),))
    if order not in ("morf", "lerf"):
        raise AttributionError("order=%r: give 'morf' or 'lerf'" % (order,))
    percentages = [float(p) for p in percentages]
    if not percentages or any(not 0 <= p <= 100 for p in percentages):
        raise AttributionError("percentages=%r: give numbers from 0 to 100" % (percentages,))
    predict, x, maps, targets, _ = _setup.start("road", model, x, maps, target, batch_size,
                                                model_args)
    images, pack = _images(predict, x, maps, x, "road")
    n = len(x)
    pixel_maps = np.concatenate([m.reshape(n, -1) for _, m, _, _ in images], axis=1)
    ends = np.cumsum([0] + [m[0].size for _, m, _, _ in images])
    ranked = _common.order(pixel_maps if order == "morf" else -pixel_maps)
    generator = _common.rng(seed)
    curve = np.empty((n, len(percentages)))
    for j, p in enumerate(percentages):
        count = int(pixel_maps.shape[1] * p / 100)
        imputed = [np.empty_like(image) for image, _, _, _ in images]
        for i in range(n):
            chosen = ranked[i, :count]
            for k, (image, _, _, _) in enumerate(images):
                mine = chosen[(chosen >= ends[k]) & (chosen < ends[k + 1])] - ends[k]
                imputed[k][i] = _imputation.impute(image[i], mine, noise, generator)
        curve[:, j] = (np.argmax(predict(pack(imputed)), axis=1) == targets).astype(np.float64)
    return Score("road", curve.mean(axis=1), order == "lerf", curve,
                 np.asarray(percentages), {"order": order, "noise": noise, "seed": seed})
