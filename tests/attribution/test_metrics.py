"""graph_override.attribution.metrics against numpy references and the
metrics' defining properties, on linear models whose outputs are known in
closed form (Quantus's numbers: tests/attribution/reference/test_quantus.py).

A linear model f(x) = x W makes each metric exact: removing feature j moves
class c's output by -W[j, c] * x_j, so gradient x input is the exact
relevance and the curves can be written down.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli
from graph_override.attribution import AttributionError, Explainer, metrics
from graph_override.attribution.metrics import _imputation, randomization

W = np.array([[3.0, 0.0], [-1.0, 1.0], [2.0, 0.5], [0.0, -2.0]], np.float32)


def linear(x):
    return tf.matmul(tf.reshape(x, [-1, 4]), W)


def f(x):
    return np.asarray(x, np.float64).reshape(len(x), 4) @ W.astype(np.float64)


X = np.array([[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 0.0, 0.0], [2.0, -1.0, 1.0, 3.0]], np.float32)
T = np.array([0, 1, 0])


def _deletion_reference(x, maps, target, k, baseline, insert=False):
    """The deletion / insertion curve by a plain loop."""
    out = []
    for i in range(len(x)):
        ranked = sorted(range(maps[i].size), key=lambda j: (-maps[i].ravel()[j], j))
        cur = np.full_like(x[i], baseline) if insert else x[i].copy()
        row = [f(cur[None])[0, target[i]]]
        for s in range(0, len(ranked), k):
            for j in ranked[s:s + k]:
                cur.ravel()[j] = x[i].ravel()[j] if insert else baseline
            row.append(f(cur[None])[0, target[i]])
        out.append(row)
    return np.array(out)


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("insert", [False, True])
def test_deletion_and_insertion_equal_a_plain_loop(k, insert):
    maps = X * W[:, 0]  # gradient x input of class 0: ties (zeros) included
    run = metrics.insertion if insert else metrics.deletion
    score = run(linear, X, maps, T, features_in_step=k, baseline=0.25)
    np.testing.assert_allclose(score.curve, _deletion_reference(X, maps, T, k, 0.25, insert),
                               rtol=1e-6, atol=1e-6)
    assert score.steps[0] == 0.0 and score.steps[-1] == 1.0
    assert len(score.steps) == -(-4 // k) + 1  # a last step with fewer features when k does not divide
    trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it
    np.testing.assert_allclose(score.scores, trapezoid(score.curve, score.steps, axis=1))
    assert score.higher_is_better is insert


def test_deletion_starts_at_the_output_and_ends_at_the_baseline():
    score = metrics.deletion(linear, X, X * W[:, 0], 0, features_in_step=1)
    np.testing.assert_allclose(score.curve[:, 0], f(X)[:, 0], rtol=1e-6)
    np.testing.assert_array_equal(score.curve[:, -1], 0.0)  # f(0) = 0 exactly
    # The exact relevance, most relevant first: the curve falls while the
    # positive contributions go (3, then 1), stays at the zero one, and its
    # lowest point is the sum of the negative ones (-2), the lowest any
    # subset reaches.
    np.testing.assert_allclose(score.curve[0], [2.0, -1.0, -2.0, -2.0, 0.0], atol=1e-6)


def test_ties_are_broken_by_index():
    """Equal relevance: the lower index goes first, on every numpy."""
    maps = np.zeros((1, 4))
    score = metrics.deletion(linear, X[:1], maps, 0, features_in_step=1)
    # f = 3*1 - 1*2 + 2*0.5 + 0*(-1); features removed in order 0, 1, 2, 3
    np.testing.assert_allclose(score.curve[0], [2.0, -1.0, 1.0, 0.0, 0.0], atol=1e-6)


def test_maps_without_the_channel_axis_remove_whole_pixels():
    """(N, H, W, C) inputs with (N, H, W) maps: a feature is a pixel, all its
    channels set to the baseline together."""
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 2, 3, 2)
    model = lambda t: tf.reshape(tf.reduce_sum(t * t, axis=[1, 2, 3]), [-1, 1])  # noqa: E731
    maps = np.array([[[0.0, 5.0, 1.0], [2.0, 4.0, 3.0]]])
    score = metrics.deletion(model, x, maps, 0, features_in_step=1)
    sq = (x[0] ** 2).sum(axis=-1).ravel()  # per pixel
    order = [1, 4, 5, 3, 2, 0]
    expected = [sq.sum()] + [sq.sum() - sq[order[:s]].sum() for s in range(1, 7)]
    np.testing.assert_allclose(score.curve[0], expected)


def test_region_perturbation_equals_a_plain_loop_with_padding():
    """5x5 images, 2x2 regions: the grid is padded to 6x6 (0 before, 1 after),
    so the last row and column of regions are cut to 1 pixel."""
    rng = np.random.RandomState(0)
    x = rng.rand(2, 5, 5, 1).astype(np.float32)
    w = rng.randn(25, 3).astype(np.float32)
    model = lambda t: tf.matmul(tf.reshape(t, [-1, 25]), w)  # noqa: E731
    maps = rng.randn(2, 5, 5)
    score = metrics.region_perturbation(model, x, maps, [0, 2], patch_size=2, regions=9)
    blocks = [(slice(r, min(r + 2, 5)), slice(c, min(c + 2, 5)))
              for r in range(0, 5, 2) for c in range(0, 5, 2)]
    for i, t in enumerate([0, 2]):
        sums = [maps[i][b].sum() for b in blocks]
        cur = x[i, :, :, 0].astype(np.float64).copy()
        before = cur.ravel() @ w[:, t]
        for s, j in enumerate(np.argsort(-np.array(sums), kind="stable")):
            cur[blocks[j]] = 0.0
            assert score.curve[i, s] == pytest.approx(before - cur.ravel() @ w[:, t], abs=1e-5)
    assert score.curve.shape == (2, 9)
    np.testing.assert_allclose(score.scores, score.curve.mean(axis=1))


def test_region_perturbation_random_order_is_seeded():
    x = np.random.RandomState(1).rand(2, 4, 4, 1).astype(np.float32)
    model = lambda t: tf.reshape(tf.reduce_sum(t, axis=[1, 2, 3]), [-1, 1]) * 1.0  # noqa: E731
    a = metrics.region_perturbation(model, x, x[..., 0], 0, patch_size=2, order="random",
                                    seed=3)
    b = metrics.region_perturbation(model, x, x[..., 0], 0, patch_size=2, order="random",
                                    seed=3)
    np.testing.assert_array_equal(a.curve, b.curve)
    # every region removed once: after all four, the whole image is gone
    np.testing.assert_allclose(a.curve[:, -1], x.sum(axis=(1, 2, 3)), rtol=1e-6)


def test_faithfulness_correlation_is_one_for_the_exact_relevance():
    """For f linear, gradient x input summed over a subset is exactly the
    output's drop when the subset is set to 0: Pearson correlation 1."""
    rng = np.random.RandomState(2)
    x = rng.randn(3, 4).astype(np.float32)
    maps = x * W[:, 1]
    score = metrics.faithfulness_correlation(linear, x, maps, 1, runs=10, subset_size=2,
                                             seed=0)
    np.testing.assert_allclose(score.scores, 1.0, atol=1e-6)
    flipped = metrics.faithfulness_correlation(linear, x, -maps, 1, runs=10, subset_size=2,
                                               seed=0)
    np.testing.assert_allclose(flipped.scores, -1.0, atol=1e-6)


def test_road_imputes_a_constant_image_exactly_and_a_ramp_inside():
    image = np.full((5, 5, 2), 0.75, np.float32)
    out = _imputation.impute(image, [0, 6, 12, 24], 0.0, np.random.default_rng(0))
    np.testing.assert_allclose(out, image, atol=1e-6)
    ramp = np.tile(np.arange(5, dtype=np.float32)[None, :, None], (5, 1, 1))
    out = _imputation.impute(ramp, [12], 0.0, np.random.default_rng(0))  # centre pixel
    assert out[2, 2, 0] == pytest.approx(2.0, abs=1e-6)
    same = _imputation.impute(ramp, [], 0.0, np.random.default_rng(0))
    np.testing.assert_array_equal(same, ramp)


def test_road_curve_is_zero_one_and_seeded():
    rng = np.random.RandomState(3)
    x = rng.rand(4, 4, 4, 1).astype(np.float32)
    w = rng.randn(16, 3).astype(np.float32)
    model = lambda t: tf.matmul(tf.reshape(t, [-1, 16]), w)  # noqa: E731
    maps = x[..., 0] * w[:, 0].reshape(4, 4)
    a = metrics.road(model, x, maps, None, percentages=[0, 50, 100], noise=0.1, seed=1)
    b = metrics.road(model, x, maps, None, percentages=[0, 50, 100], noise=0.1, seed=1)
    np.testing.assert_array_equal(a.curve, b.curve)
    assert set(np.unique(a.curve)) <= {0.0, 1.0}
    np.testing.assert_array_equal(a.curve[:, 0], 1.0)  # 0 %: nothing removed, argmax kept


def test_max_sensitivity_of_a_constant_map_is_zero():
    """Saliency of a linear model does not depend on x: exactly 0."""
    score = metrics.max_sensitivity(linear, X[[0, 2]], "saliency", [0, 1], samples=4,
                                    radius=0.5, seed=0, explain_options={"abs": False})
    np.testing.assert_array_equal(score.scores, 0.0)
    assert score.higher_is_better is False


def test_local_lipschitz_estimate_of_gradient_input_is_bounded_by_the_weights():
    """Φ(x) = W[:, c] * x: ||Φ(x) - Φ(x')|| / ||x - x'|| <= max |W[:, c]|, and
    equals |w| where every weight has the same magnitude."""
    score = metrics.local_lipschitz_estimate(linear, X[[0, 2]], "gradient_input", [0, 0],
                                             samples=6, std=0.3, seed=0)
    assert (score.scores <= 3.0 + 1e-5).all() and (score.scores > 0).all()
    flat = lambda t: tf.matmul(tf.reshape(t, [-1, 4]), -2.0 * np.ones((4, 2), np.float32))  # noqa: E731
    score = metrics.local_lipschitz_estimate(flat, X[[0, 2]], "gradient_input", [0, 0],
                                             samples=3, std=0.3, seed=0)
    np.testing.assert_allclose(score.scores, 2.0, rtol=1e-5)


def test_random_logit_draws_quantus_classes_and_never_the_target():
    targets = np.array([0, 3, 9, 9, 5, 0])
    others = randomization.other_classes(targets, 10, 42)
    assert (others != targets).all() and ((others >= 0) & (others < 10)).all()
    draws = np.random.RandomState(42).randint(0, 9, len(targets))
    expected = [[c for c in range(10) if c != t][d] for t, d in zip(targets, draws)]
    np.testing.assert_array_equal(others, expected)
    with pytest.raises(AttributionError, match="at least 2 classes"):
        randomization.other_classes(np.array([0]), 1, 0)


def test_random_logit_scores_the_similarity_of_the_two_maps():
    """Two classes: the other class is the other column; saliency maps are
    the weight columns, so the score is their rank correlation."""
    score = metrics.random_logit(linear, X[[0]], "saliency", 0, seed=0,
                                 explain_options={"abs": False})
    from scipy.stats import spearmanr
    assert score.scores[0] == pytest.approx(spearmanr(W[:, 0], W[:, 1])[0])
    assert score.options["other_classes"] == [1]


def test_sparseness_and_complexity_extremes():
    one_hot = np.array([[0.0, 0.0, 0.0, -7.0]])
    uniform = np.full((1, 4), 2.0)
    zero = np.zeros((1, 4))
    s = metrics.sparseness(np.concatenate([one_hot, uniform, zero])).scores
    assert s[0] == pytest.approx(0.75, abs=1e-6) and s[1] == pytest.approx(0.0, abs=1e-12)
    assert s[2] == pytest.approx(0.0, abs=1e-12)
    c = metrics.complexity(np.concatenate([one_hot, uniform, zero])).scores
    assert c[0] == pytest.approx(0.0, abs=1e-9) and c[1] == pytest.approx(np.log(4))
    assert np.isnan(c[2])


@pytest.mark.parametrize("call, message", [
    (lambda: metrics.deletion(linear, X, np.zeros((3, 5)), 0), "maps have shape"),
    (lambda: metrics.deletion(linear, X, np.full((3, 4), np.nan), 0), "NaN"),
    (lambda: metrics.deletion(linear, X, X, 2), "class 2"),
    (lambda: metrics.deletion(linear, X, X, [0, 1]), "one int per example"),
    (lambda: metrics.deletion(linear, X, X, 0, batch_size=0), "batch_size"),
    (lambda: metrics.deletion(linear, X, X, 0, features_in_step=0), "features_in_step"),
    (lambda: metrics.deletion(linear, X.astype(int), X, 0), "float batch"),
    (lambda: metrics.deletion(linear, X, X, 0, baseline=np.zeros(3)), "broadcast"),
    (lambda: metrics.deletion(linear, X, X, 0, inputz="x:0"), "no option inputz"),
    (lambda: metrics.region_perturbation(linear, X, X, 0), "takes images"),
    (lambda: metrics.region_perturbation(
        linear, np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 2, 2)), 0, patch_size=3),
     "larger than the image"),
    (lambda: metrics.region_perturbation(
        linear, np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 2, 2)), 0, order="up"),
     "order="),
    (lambda: metrics.road(linear, np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 2, 2)), 0,
                          percentages=[120]), "percentages"),
    (lambda: metrics.faithfulness_correlation(linear, X, X, 0, subset_size=5), "4 features"),
    (lambda: metrics.max_sensitivity(linear, X, 3, 0), "method name"),
    (lambda: metrics.max_sensitivity(linear, X, "saliency", 0, radius=0), "radius"),
    (lambda: metrics.random_logit(linear, X, "saliency", 0, similarity="cosine"),
     "similarity="),
    (lambda: metrics.deletion(linear, X, X, 0, seed=1), "no option seed"),
    (lambda: metrics.road(linear, np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 2, 2)), 0,
                          seed="a"), "seed="),
])
def test_bad_input_says_what_and_where(call, message):
    with pytest.raises((AttributionError, TypeError), match=message):
        call()


def test_batches_bound_the_rows_per_model_call():
    """batch_size rows per call: the same curve, more calls."""
    explainer = Explainer(linear)
    x = np.repeat(X, 3, axis=0)
    maps = x * W[:, 0]
    small = metrics.deletion(explainer, x, maps, 0, features_in_step=2, batch_size=2)
    whole = metrics.deletion(explainer, x, maps, 0, features_in_step=2, batch_size=64)
    np.testing.assert_array_equal(small.curve, whole.curve)
    from graph_override.attribution.metrics import _common
    predictor = _common.Predictor(explainer, batch_size=4)
    predictor(x)
    assert predictor.calls == 3  # 9 rows, 4 per call


def test_evaluate_runs_several_and_checks_their_options():
    maps = X * W[:, 0]
    scores = metrics.evaluate(linear, X, maps, ["deletion", "sparseness", "max_sensitivity"],
                              T, explain="gradient_input",
                              options={"deletion": {"features_in_step": 2},
                                       "max_sensitivity": {"samples": 2, "seed": 0}})
    assert list(scores) == ["deletion", "sparseness", "max_sensitivity"]
    assert scores["deletion"].options["features_in_step"] == 2
    json.dumps({k: v.as_dict() for k, v in scores.items()})  # JSON-ready
    with pytest.raises(AttributionError, match="unknown metric 'delete'"):
        metrics.evaluate(linear, X, maps, ["delete"])
    with pytest.raises(AttributionError, match="deletion takes no option radius"):
        metrics.evaluate(linear, X, maps, ["deletion"], options={"deletion": {"radius": 1}})
    with pytest.raises(AttributionError, match="not among the metrics run"):
        metrics.evaluate(linear, X, maps, ["deletion"], options={"road": {"noise": 0}})


def test_plot_curves_draws_the_curve_metrics(tmp_path):
    pytest.importorskip("matplotlib")
    maps = X * W[:, 0]
    scores = metrics.evaluate(linear, X, maps, ["deletion", "insertion", "sparseness"], T)
    path = tmp_path / "curves.png"
    data = metrics.plot_curves(scores, path)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and path.read_bytes() == data
    with pytest.raises(ValueError, match="no curve metric among sparseness"):
        metrics.plot_curves({"sparseness": scores["sparseness"]})


@pytest.fixture(scope="module")
def frozen_files(tmp_path_factory):
    """A frozen linear model, its data and its gradient x input maps."""
    from graph_override.frozen.graphdef.io import save
    folder = tmp_path_factory.mktemp("evaluate")
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        tf.identity(tf.matmul(x, tf.constant(W)), name="logits")
    save(graph.as_graph_def(), str(folder / "model.pb"))
    np.save(folder / "x.npy", X)
    np.save(folder / "maps.npy", (X * W[:, 0]).astype(np.float32))
    return folder


def _evaluate(folder, *extra):
    return cli.main(["evaluate", str(folder / "model.pb"), "--inputs", "x:0", "--outputs",
                     "logits:0", "--data", str(folder / "x.npy"), "--maps",
                     str(folder / "maps.npy")] + list(extra))


def test_evaluate_command_writes_the_api_numbers(frozen_files, tmp_path, capsys):
    out = tmp_path / "scores.json"
    assert _evaluate(frozen_files, "--metric", "deletion,sparseness,random_logit",
                     "--explain", "gradient_input", "--set", "deletion.features_in_step=2",
                     "--seed", "4", "--target", "0", "-o", str(out)) == 0
    report = json.loads(out.read_text())
    api = metrics.deletion(linear, X, X * W[:, 0], 0, features_in_step=2)
    np.testing.assert_allclose(report["metrics"]["deletion"]["scores"], api.scores, rtol=1e-6)
    assert report["metrics"]["random_logit"]["options"]["seed"] == 4
    assert report["examples"] == 3 and report["explain"] == "gradient_input"
    printed = capsys.readouterr().out
    assert "deletion" in printed and "(lower is better)" in printed and str(out) in printed
    # an existing report is kept without --force
    before = out.read_bytes()
    assert _evaluate(frozen_files, "--metric", "sparseness", "-o", str(out)) == 2
    assert "exists already" in capsys.readouterr().err and out.read_bytes() == before


@pytest.mark.parametrize("extra, message", [
    (["--metric", "deletions"], "unknown metric deletions"),
    (["--metric", "max_sensitivity"], "--explain: max_sensitivity"),
    (["--metric", "deletion", "--set", "deletion.radius=1"], "takes no option radius"),
    (["--metric", "deletion", "--set", "road.noise=0"], "road is not among --metric"),
    (["--metric", "deletion", "--set", "noise"], "expected METRIC.OPTION=VALUE"),
    (["--metric", "sparseness", "--explain", "nope"], "--explain: "),
])
def test_evaluate_command_usage_errors(frozen_files, tmp_path, capsys, extra, message):
    out = tmp_path / "scores.json"
    assert _evaluate(frozen_files, *extra, "-o", str(out)) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_evaluate_command_refuses_maps_that_do_not_fit(frozen_files, tmp_path, capsys):
    np.save(tmp_path / "short.npy", np.zeros((2, 4), np.float32))
    code = cli.main(["evaluate", str(frozen_files / "model.pb"), "--inputs", "x:0",
                     "--outputs", "logits:0", "--data", str(frozen_files / "x.npy"),
                     "--maps", str(tmp_path / "short.npy"), "--metric", "deletion", "-o",
                     str(tmp_path / "s.json")])
    assert code == 2 and "holds 2 maps" in capsys.readouterr().err
