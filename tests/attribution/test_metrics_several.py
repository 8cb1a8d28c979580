"""Metrics of a model of several inputs: a model of two inputs that are the
two halves of another model's one input scores exactly what that model
scores (every metric defined for several inputs: the features of all the
inputs ranked together, every input perturbed, the maps taken together,
the regions and pixels of every image ranked together); an input that is
not images, or maps that do not fit their input, are refused naming it."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import metrics
from graph_override.errors import AttributionError

RNG = np.random.RandomState(7)
W1 = RNG.randn(10, 6).astype(np.float32)
W2 = RNG.randn(6, 4).astype(np.float32)
X = RNG.randn(6, 10).astype(np.float32)
X[0, :2] = 0.0  # exact zeros: ties among the maps' values
CUT = 4  # a: the first 4 features, b: the other 6


def _model(x):
    return tf.matmul(tf.nn.relu(tf.matmul(x, W1)), W2, name="logits")


@pytest.fixture(scope="module")
def models():
    """(one input x [N, 10], two inputs a [N, 4] and b [N, 6] concatenated
    into the same model), both frozen graphs."""
    with tf.Graph().as_default() as one:
        _model(tf.compat.v1.placeholder(tf.float32, [None, 10], name="x"))
    with tf.Graph().as_default() as two:
        a = tf.compat.v1.placeholder(tf.float32, [None, CUT], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 10 - CUT], name="b")
        _model(tf.concat([a, b], axis=1))
    return (attribution.Explainer(one.as_graph_def(), inputs="x:0", outputs="logits:0"),
            attribution.Explainer(two.as_graph_def(), inputs=["a:0", "b:0"],
                                  outputs="logits:0"))


def _halves(array):
    return [array[:, :CUT], array[:, CUT:]]


@pytest.fixture(scope="module")
def maps(models):
    maps = models[0].attribute("gradient_input", X, 1).maps
    maps[1, 3] = maps[1, 7]  # a tie across the two inputs
    return maps


def _equal(a, b):
    np.testing.assert_array_equal(a.scores, b.scores)
    assert (a.curve is None) == (b.curve is None)
    if a.curve is not None:
        np.testing.assert_array_equal(a.curve, b.curve)
        np.testing.assert_array_equal(a.steps, b.steps)


CASES = [("deletion", {"features_in_step": 1}),
         ("deletion", {"features_in_step": 3, "abs": True, "baseline": 0.5}),
         ("insertion", {"features_in_step": 2}),
         ("faithfulness_correlation", {"runs": 6, "subset_size": 3, "seed": 2})]


@pytest.mark.parametrize("metric, options", CASES)
def test_two_halves_score_what_the_one_input_model_scores(models, maps, metric, options):
    one, two = models
    want = getattr(metrics, metric)(one, X, maps, 1, **options)
    got = getattr(metrics, metric)(two, _halves(X), _halves(maps), 1, **options)
    _equal(got, want)
    by_name = getattr(metrics, metric)(two, {"b": X[:, CUT:], "a": X[:, :CUT]},
                                       {"a": maps[:, :CUT], "b:0": maps[:, CUT:]}, 1, **options)
    _equal(by_name, want)
    assert np.isfinite(want.scores).any()


def test_a_baseline_per_input_is_the_one_inputs_baseline_split(models, maps):
    one, two = models
    b_base = RNG.randn(len(X), 10 - CUT).astype(np.float32)
    want = metrics.insertion(one, X, maps, 1, features_in_step=1, baseline=np.concatenate(
        [np.full((len(X), CUT), 0.25, np.float32), b_base], axis=1))
    got = metrics.insertion(two, _halves(X), _halves(maps), 1, features_in_step=1,
                            baseline=[0.25, b_base])
    _equal(got, want)
    assert got.options["baseline"] == "array"
    with pytest.raises(AttributionError, match=r"insertion: the baseline of input b:0 has "
                                               r"shape \(3,\), which does not broadcast"):
        metrics.insertion(two, _halves(X), _halves(maps), 1, baseline=[0.0, np.ones(3)])


@pytest.mark.parametrize("metric, options", [
    ("max_sensitivity", {"samples": 3, "radius": 0.3, "seed": 5}),
    ("local_lipschitz_estimate", {"samples": 3, "std": 0.2, "seed": 5}),
    ("random_logit", {"seed": 3}),
    ("random_logit", {"seed": 3, "similarity": "pearson"})])
def test_every_input_is_perturbed_and_explained_again_together(models, metric, options):
    """One draw of all the inputs' values per sample; the maps of both
    inputs explained again and compared together: the one-input scores."""
    one, two = models
    want = getattr(metrics, metric)(one, X, "gradient_input", 1, **options)
    got = getattr(metrics, metric)(two, _halves(X), "gradient_input", 1, **options)
    _equal(got, want)
    assert np.all(want.scores > 0) or metric == "random_logit"
    computed = one.attribute("gradient_input", X, 1).maps  # given: as float64, either way
    _equal(getattr(metrics, metric)(two, _halves(X), "gradient_input", 1,
                                    maps=_halves(computed), **options),
           getattr(metrics, metric)(one, X, "gradient_input", 1, maps=computed, **options))


@pytest.mark.parametrize("metric", ["sparseness", "complexity"])
def test_the_maps_of_several_inputs_are_scored_together(maps, metric):
    want = getattr(metrics, metric)(maps)
    _equal(getattr(metrics, metric)(_halves(maps)), want)
    _equal(getattr(metrics, metric)({"a": maps[:, :CUT], "b": maps[:, CUT:]}), want)
    assert not np.array_equal(getattr(metrics, metric)(maps[:, :CUT]).scores, want.scores)


def test_evaluate_runs_the_metrics_on_several_inputs(models, maps):
    one, two = models
    names = ["deletion", "sparseness", "local_lipschitz_estimate"]
    options = {"local_lipschitz_estimate": {"samples": 2, "seed": 0}}
    want = metrics.evaluate(one, X, maps, names, 1, explain="gradient_input", options=options)
    got = metrics.evaluate(two, _halves(X), _halves(maps), names, 1, explain="gradient_input",
                           options=options)
    for name in names:
        _equal(got[name], want[name])


@pytest.fixture(scope="module")
def image_models():
    """(one image x [N, 4, 4, 1], two images a and b [N, 2, 4, 1] stacked
    along the height into the same model)."""
    w = RNG.randn(16, 3).astype(np.float32)

    def model(x):
        return tf.matmul(tf.nn.relu(tf.reshape(x, [-1, 16]) - 0.1), w, name="logits")

    with tf.Graph().as_default() as one:
        model(tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="x"))
    with tf.Graph().as_default() as two:
        model(tf.concat([tf.compat.v1.placeholder(tf.float32, [None, 2, 4, 1], name=n)
                         for n in ("a", "b")], axis=1))
    return (attribution.Explainer(one.as_graph_def(), inputs="x:0", outputs="logits:0"),
            attribution.Explainer(two.as_graph_def(), inputs=["a:0", "b:0"],
                                  outputs="logits:0"))


@pytest.mark.parametrize("order", ["morf", "lerf", "random"])
def test_region_perturbation_ranks_every_images_regions_together(image_models, order):
    """Regions of 2x2 pixels on each input's own grid, ranked together: two
    images that are the top and bottom halves of one score what it scores."""
    one, two = image_models
    images = RNG.uniform(0, 1, (3, 4, 4, 1)).astype(np.float32)
    image_maps = one.attribute("gradient_input", images, 2).maps
    image_maps[0, 0, :2] = image_maps[0, 2, :2] = 0.0  # tied regions, one in each input
    want = metrics.region_perturbation(one, images, image_maps, 2, patch_size=2, order=order,
                                       seed=1, baseline=0.5)
    got = metrics.region_perturbation(two, [images[:, :2], images[:, 2:]],
                                      [image_maps[:, :2], image_maps[:, 2:]], 2, patch_size=2,
                                      order=order, seed=1, baseline=[0.5, 0.5])
    _equal(got, want)
    assert want.curve.shape == (3, 4) and np.abs(want.curve).max() > 0
    with pytest.raises(AttributionError, match=r"patch_size=3 is larger than the image of "
                                               r"input a:0 \(2x4\)"):
        metrics.region_perturbation(two, [images[:, :2], images[:, 2:]],
                                    [image_maps[:, :2], image_maps[:, 2:]], 2, patch_size=3)


@pytest.mark.parametrize("order", ["morf", "lerf"])
def test_road_ranks_every_images_pixels_together_and_imputes_each_in_its_image(
        image_models, order):
    """p % of all the pixels of both images, ranked together, each image's
    imputed within it (noise drawn example by example, input by input): a
    loop over `_imputation.impute` as the docstring states it."""
    from graph_override.attribution.metrics import _imputation

    two = image_models[1]
    rng = np.random.RandomState(3)
    a = rng.uniform(0, 1, (3, 2, 4, 1)).astype(np.float32)
    b = rng.uniform(0, 1, (3, 3, 3, 1)).astype(np.float32)
    with tf.Graph().as_default() as g:  # images of two sizes
        pa = tf.compat.v1.placeholder(tf.float32, [None, 2, 4, 1], name="a")
        pb = tf.compat.v1.placeholder(tf.float32, [None, 3, 3, 1], name="b")
        tf.matmul(tf.concat([tf.reshape(pa, [-1, 8]), tf.reshape(pb, [-1, 9])], 1),
                  rng.randn(17, 3).astype(np.float32), name="logits")
    del two
    model = attribution.Explainer(g.as_graph_def(), inputs=["a:0", "b:0"], outputs="logits:0")
    maps = model.attribute("gradient_input", [a, b]).maps  # each example's top class
    percentages = (10, 30, 40)
    got = metrics.road(model, [a, b], maps, percentages=percentages, order=order,
                       noise=1.0, seed=4)
    flat = np.concatenate([maps[0].reshape(3, -1), maps[1].reshape(3, -1)], axis=1)
    ranked = np.argsort(-flat if order == "morf" else flat, axis=1, kind="stable")
    generator = np.random.default_rng(4)
    want = np.empty((3, 3))
    for j, p in enumerate(percentages):
        count = int(17 * p / 100)
        moved = [a.copy(), b.copy()]
        for i in range(3):
            chosen = ranked[i, :count]
            for k, (start, stop) in enumerate([(0, 8), (8, 17)]):
                moved[k][i] = _imputation.impute(
                    [a, b][k][i], chosen[(chosen >= start) & (chosen < stop)] - start, 1.0,
                    generator)
        predicted = np.argmax(model.attribute("saliency", moved, 0).outputs, axis=1)
        want[:, j] = predicted == np.argmax(model.attribute("saliency", [a, b], 0).outputs,
                                            axis=1)
    np.testing.assert_array_equal(got.curve, want)
    assert 0 < want.sum() < want.size  # some examples change class, some do not


@pytest.mark.parametrize("metric", ["region_perturbation", "road"])
def test_image_metrics_refuse_an_input_that_is_not_images_naming_it(models, metric):
    with pytest.raises(AttributionError, match=r"%s takes images \(examples, height, width, "
                                               r"channels\); the input a:0 has shape \(6, 4\)"
                                               % metric):
        getattr(metrics, metric)(models[1], _halves(X), _halves(X), 0)


def test_maps_that_do_not_fit_their_input_are_refused_naming_it(models, maps):
    two = models[1]
    with pytest.raises(AttributionError, match=r"deletion: the model has 2 inputs \(a:0, "
                                               r"b:0\): give the maps as the inputs are"):
        metrics.deletion(two, _halves(X), maps, 1)
    with pytest.raises(AttributionError, match=r"deletion: the maps of input a:0 have shape "
                                               r"\(6, 5\); give one map of the input's shape"):
        metrics.deletion(two, _halves(X), [maps[:, :5], maps[:, 5:]], 1)
    with pytest.raises(AttributionError, match=r"different numbers of examples: x\[0\] "
                                               r"\(input a:0\) 6, x\[1\] \(input b:0\) 5"):
        metrics.deletion(two, [X[:, :CUT], X[:5, CUT:]], _halves(maps), 1)
    bad = _halves(maps)
    bad[1] = bad[1].copy()
    bad[1][0, 0] = np.nan
    with pytest.raises(AttributionError, match="deletion: maps hold NaN"):
        metrics.deletion(two, _halves(X), bad, 1)
