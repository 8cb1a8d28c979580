"""graph_override.attribution.metrics against Quantus 0.6.0 (PyTorch backend)
on the same weights, inputs and maps.

One CNN (Conv2D, ReLU, MaxPool, Dense on 8x8x1 digits, an all-zero image
among them) is built as a Keras model and as its torch twin
(reference_networks.py, captum_maps.py). Our signed saliency maps are scored
by graph_override and, in the reference venv, by Quantus (quantus_scores.py),
with the same settings; where Quantus draws random numbers it is given the
draws graph_override made (same seed, same order). The inputs have one
channel, so Quantus's channel-first flattening and ours number the features
alike.

Where the conventions agree the scores are equal to float32 rounding (the
two frameworks' logits differ by ~1e-6). Where they differ the tests pin
the difference:
- the deletion curve (pixel flipping) starts at the unperturbed input:
  Quantus's PixelFlipping curve is ours without its first point;
- ties in the ranking: ours are broken by index (a stable sort), Quantus's
  by numpy's default sort; the maps here have no ties (checked), so the
  orders agree.
"""

import json

import numpy as np
import pytest

import reference_networks as nets
from graph_override.attribution import metrics, saliency

RTOL, ATOL = 1e-4, 1e-5
N = 6
LAYERS = nets.cnn()


@pytest.fixture(scope="module")
def case():
    arrays = nets.weights(LAYERS, seed=3)
    model = nets.keras_model(LAYERS, arrays)
    x, target = nets.inputs(LAYERS, n=N)
    a = saliency(model, x, target=target, abs=False).maps
    # The max pool's losers have a gradient of exactly 0: ties. A distinct
    # offset per feature, far below the gradients, makes the ranking unique
    # for the ranking metrics (the robustness metrics take the true map).
    offsets = np.random.RandomState(0).permutation(a[0].size).reshape(a.shape[1:]) * 1e-5
    ranked = (a + offsets).astype(np.float32)
    assert all(len(np.unique(row)) == row.size for row in ranked.reshape(N, -1))
    return model, arrays, x, target, a, ranked


def _draws(seed, count, shape, kind, **kw):
    generator = np.random.default_rng(seed)
    if kind == "uniform":
        return np.stack([generator.uniform(-kw["radius"], kw["radius"], shape)
                         for _ in range(count)])
    if kind == "normal":
        return np.stack([generator.normal(0.0, kw["std"], shape) for _ in range(count)])
    return np.stack([np.stack([generator.choice(kw["features"], kw["size"], replace=False)
                               for _ in range(shape[0])]) for _ in range(count)])


@pytest.fixture(scope="module")
def both(case, quantus, tmp_path_factory):
    """(ours, quantus's): {key: scores} for every metric compared."""
    model, arrays, x, target, a, ranked = case
    ours, entries, extra = {}, [], {}

    def add(key, metric, options, result, maps="a", **draws):
        ours[key] = result
        entries.append({"key": key, "metric": metric, "options": options, "maps": maps})
        extra.update({f"{k}.{key}": v for k, v in draws.items()})

    add("pf", "pixel_flipping", {"features_in_step": 4, "perturb_baseline": 0.0,
                                 "normalise": False, "abs": False},
        metrics.deletion(model, x, ranked, target, features_in_step=4).curve[:, 1:])
    add("pf_abs", "pixel_flipping", {"features_in_step": 8, "perturb_baseline": 0.5,
                                     "normalise": False, "abs": True},
        metrics.deletion(model, x, ranked, target, features_in_step=8, baseline=0.5,
                         abs=True).curve[:, 1:])
    add("rp", "region_perturbation", {"patch_size": 3, "regions_evaluation": 9,
                                      "perturb_baseline": 0.0, "order": "morf",
                                      "normalise": False, "abs": False},
        metrics.region_perturbation(model, x, ranked, target, patch_size=3, regions=9).curve)
    add("rp_lerf", "region_perturbation", {"patch_size": 2, "regions_evaluation": 16,
                                           "perturb_baseline": 0.0, "order": "lerf",
                                           "normalise": False, "abs": False},
        metrics.region_perturbation(model, x, ranked, target, patch_size=2, regions=16,
                                    order="lerf").curve)
    add("road", "road", {"noise": 0.0, "percentages": [5, 20, 50, 80],
                         "normalise": False, "abs": False},
        metrics.road(model, x, ranked, target, noise=0.0, percentages=[5, 20, 50, 80]).curve)
    fc = metrics.faithfulness_correlation(model, x, ranked, target, runs=20, subset_size=10,
                                          seed=7)
    add("fc", "faithfulness_correlation", {"nr_runs": 20, "subset_size": 10,
                                           "perturb_baseline": 0.0, "normalise": False,
                                           "abs": False, "return_aggregate": False},
        fc.scores, subsets=_draws(7, 20, (N,), "choice", features=64, size=10))
    options = {"abs": False}
    ms = metrics.max_sensitivity(model, x, "saliency", target, maps=a, samples=5,
                                 radius=0.1, seed=11, explain_options=options)
    add("ms", "max_sensitivity", {"nr_samples": 5, "lower_bound": 0.1, "normalise": False,
                                  "abs": False},
        ms.scores, maps="a_true", noise=_draws(11, 5, x.shape, "uniform", radius=0.1).reshape(5, N, -1))
    lle = metrics.local_lipschitz_estimate(model, x, "saliency", target, maps=a, samples=5,
                                           std=0.1, seed=12, explain_options=options)
    add("lle", "local_lipschitz_estimate", {"nr_samples": 5, "perturb_std": 0.1,
                                            "normalise": False, "abs": False},
        lle.scores, maps="a_true", noise=_draws(12, 5, x.shape, "normal", std=0.1).reshape(5, N, -1))
    rl = metrics.random_logit(model, x, "saliency", target, maps=a, seed=5,
                              explain_options=options)
    add("rl", "random_logit", {"num_classes": 10, "seed": 5, "normalise": False,
                               "abs": False}, rl.scores, maps="a_true")
    add("sparseness", "sparseness", {}, metrics.sparseness(ranked).scores)
    add("complexity", "complexity", {}, metrics.complexity(ranked).scores)
    path = tmp_path_factory.mktemp("quantus") / "request.npz"
    spec = json.dumps({"layers": LAYERS, "metrics": entries})
    np.savez(path, spec=spec, x=x, target=target, a=ranked, a_true=a, **arrays, **extra)
    return ours, quantus([path])[0]


@pytest.mark.parametrize("key", ["pf", "pf_abs", "rp", "rp_lerf", "fc", "ms", "lle", "rl",
                                 "sparseness", "complexity"])
def test_scores_equal_quantus(both, key):
    ours, theirs = both
    np.testing.assert_allclose(np.asarray(ours[key], np.float64), theirs[key],
                               rtol=RTOL, atol=ATOL, err_msg=key)


def test_road_equals_quantus_mean_accuracy(both):
    """Quantus's ROAD reports the accuracy over examples per percentage: the
    mean of our per-example curve."""
    ours, theirs = both
    np.testing.assert_array_equal(ours["road"].mean(axis=0), theirs["road"])
    assert set(np.unique(ours["road"])) <= {0.0, 1.0}


def test_the_comparison_is_not_vacuous(both):
    """The curves move and the scores differ between examples: equal numbers
    are not equal constants."""
    ours, _ = both
    assert np.ptp(ours["pf"]) > 0.1 and np.ptp(ours["rp"]) > 0.1
    for key in ("fc", "ms", "lle", "rl", "sparseness", "complexity"):
        finite = ours[key][np.isfinite(ours[key])]
        assert finite.size >= N - 1 and np.ptp(finite) > 0, key
    # The all-zero image: a baseline of 0 removes nothing, the output does
    # not move, and the correlation is undefined on both sides (NaN, which
    # assert_allclose counts as equal).
    assert np.isnan(ours["fc"][0]) and not np.isnan(ours["fc"][1:]).any()
