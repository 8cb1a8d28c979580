"""The sanity checks (Adebayo et al. 2018): the cascading randomization of a
frozen model's weights, top layer first, in copies of the GraphDef, and the
random-logit check for several methods."""

import hashlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, frozen
from graph_override.attribution import method_table, sanity
from graph_override.attribution.metrics import randomization as metrics_randomization
from graph_override.errors import AttributionError

import methods_nets as nets


def _keras_cnn():
    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((6, 6, 1)), layers.Conv2D(3, 3, activation="relu", name="conv"),
        layers.Flatten(), layers.Dense(5, activation="relu", name="dense"),
        layers.Dense(3, name="logits")])


@pytest.fixture(scope="module")
def cnn():
    return _keras_cnn()


@pytest.fixture(scope="module")
def x():
    return np.random.RandomState(0).uniform(0, 1, (4, 6, 6, 1)).astype(np.float32)


@pytest.fixture(scope="module")
def report(cnn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attribution.AttributionWarning)
        return sanity.randomization(cnn, x, seed=3)


def _layer_names(found):
    return [name.split("/")[1].rsplit("_", 1)[0] if "_1/" in name else name.split("/")[1]
            for name, _, _ in found]


def test_the_layers_are_found_with_their_biases_top_first(cnn, x):
    graph = attribution.Explainer(cnn).model_graph(x)
    found = sanity.layers(graph.graph_def, graph.output)
    assert _layer_names(found) == ["logits", "dense", "conv"]
    # Keras 3 adds a convolution's bias through Reshape and Squeeze: found too
    assert all(bias is not None for _, _, bias in found)


def test_the_cascade_redraws_the_top_layers_first_and_keeps_the_rest(cnn, x):
    graph = attribution.Explainer(cnn).model_graph(x)
    before = graph.graph_def.SerializeToString()
    found = sanity.layers(graph.graph_def, graph.output)
    consts = {n.name: tf.make_ndarray(n.attr["value"].tensor)
              for n in graph.graph_def.node if n.op == "Const"}
    stages = sanity.randomized(graph.graph_def, found, seed=0)
    assert len(stages) == 3
    for k, stage in enumerate(stages):
        changed = {n.name for n in stage.node if n.op == "Const"
                   and not np.array_equal(tf.make_ndarray(n.attr["value"].tensor),
                                          consts[n.name])}
        assert changed == {c for _, *pair in found[:k + 1] for c in pair}
    assert graph.graph_def.SerializeToString() == before  # the model's graph is a copy


def test_every_method_of_the_table_is_checked_and_the_outputs_change(report):
    assert report.methods == tuple(method_table.METHODS)
    assert len(report.layers) == 3 and (report.output_change > 1e-3).all()
    for method, scores in report.scores.items():
        assert scores.shape == (3, 4), method


@pytest.mark.parametrize("method", ["saliency", "gradient_input", "integrated_gradients",
                                    "deeplift", "eps_lrp"])
def test_randomizing_every_layer_changes_gradient_maps(report, method):
    """Similarity well below 1 once every layer is re-drawn (the rank
    correlation of |maps| of 36 pixels; 1 would be the same ranking)."""
    assert report.mean()[method][-1] < 0.6
    # (an example whose map of the randomized model is constant, every unit
    # on its path off, has no rank correlation: NaN)
    assert np.nanmax(report.scores[method][-1]) < 0.9


def test_the_same_seed_gives_the_same_results_and_another_does_not(cnn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attribution.AttributionWarning)
        first = sanity.randomization(cnn, x, ["saliency"], 0, seed=7)
        again = sanity.randomization(cnn, x, ["saliency"], 0, seed=7)
        other = sanity.randomization(cnn, x, ["saliency"], 0, seed=8)
    np.testing.assert_array_equal(first.scores["saliency"], again.scores["saliency"])
    np.testing.assert_array_equal(first.output_change, again.output_change)
    assert not np.array_equal(first.scores["saliency"], other.scores["saliency"])


def test_a_frozen_graph_on_disk_is_not_changed(tmp_path):
    params = nets.dense_params([4, 6, 3], seed=1)
    path = tmp_path / "mlp.pb"
    frozen.save(nets.dense_graph_def(params, "relu"), str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    x = np.random.RandomState(1).uniform(-1, 1, (5, 4)).astype(np.float32)
    result = sanity.randomization(str(path), x, ["gradient_input"], 1, inputs="x:0",
                                  outputs="logits:0", seed=0, absolute=False)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert len(result.layers) == 2 and result.scores["gradient_input"].shape == (2, 5)
    assert result.mean()["gradient_input"][-1] < 0.9
    assert "| gradient_input |" in result.table()


def test_top_limits_the_cascade_and_a_model_without_layers_is_refused(cnn, x):
    result = sanity.randomization(cnn, x, "saliency", 0, top=1, seed=0)
    assert len(result.layers) == 1 and result.scores["saliency"].shape == (1, 4)
    with pytest.raises(AttributionError, match="no layer .* with Const weights"):
        sanity.randomization(lambda t: tf.nn.relu(t) * 2.0, x, "saliency", 0)
    with pytest.raises(AttributionError, match="'salency' is not an attribution method"):
        sanity.randomization(cnn, x, "salency")
    with pytest.raises(AttributionError, match="a model of one input"):
        sanity.randomization(cnn, [x, x], "saliency")
    with pytest.raises(AttributionError, match="similarity='ssim'"):
        sanity.randomization(cnn, x, "saliency", similarity="ssim")


def test_random_logit_for_several_methods_is_the_metrics_check(cnn, x):
    scores = sanity.random_logit(cnn, x, ["saliency", "gradient_input"], seed=5)
    assert set(scores) == {"saliency", "gradient_input"}
    alone = metrics_randomization.random_logit(cnn, x, "gradient_input", seed=5)
    np.testing.assert_array_equal(scores["gradient_input"].scores, alone.scores)
    assert scores["saliency"].options["other_classes"] == alone.options["other_classes"]


# Options of every method of the table, other than its defaults where it has
# any: a new method fails `test_every_method_of_the_table_runs_with_its_options`
# until it has a line here (and runs in both checks with it).
OPTIONS = {
    "saliency": {"abs": False},
    "gradient_input": {},
    "integrated_gradients": {"steps": 4, "baseline": 0.5},
    "smoothgrad": {"samples": 3, "seed": 2, "magnitude": True},
    "grad_cam": {"resize": True},
    "guided_backprop": {},
    "deconvnet": {},
    "eps_lrp": {"epsilon": 0.01},
    "deeplift": {"baseline": 0.5},
    "lrp": {"composite": "zplus", "start": "one"},
    "occlusion": {"patch": 2, "stride": 2, "baseline": 0.5},
}


def _recording(seen):
    """A similarity that keeps the maps it is given (their first argument:
    the model as given, or the target's for random logit)."""
    def similarity(a, b):
        seen.append(a)
        return np.ones(len(a))
    return similarity


@pytest.mark.slow  # every method, twice in each check
def test_every_method_of_the_table_runs_with_its_options(cnn, x):
    """Each record, labelled, with options of its own: both checks run it
    with exactly those options (the maps they compare are `attribute`'s)."""
    assert set(OPTIONS) == set(method_table.METHODS)
    runs = {"%s (own)" % m: (m, o) for m, o in OPTIONS.items()}
    target = np.array([0, 1, 2, 0])
    seen_cascade, seen_logit = [], []
    graph = attribution.Explainer(cnn).model_graph(x)  # frozen once, for every method
    model = dict(model=graph.graph_def, inputs=graph.input, outputs=graph.output)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attribution.AttributionWarning)
        report = sanity.randomization(x=x, methods=runs, target=target, top=1, seed=0,
                                      absolute=False, similarity=_recording(seen_cascade),
                                      **model)
        logit = sanity.random_logit(x=x, methods=runs, target=target,
                                    similarity=_recording(seen_logit), **model)
        assert report.methods == tuple(runs) and tuple(logit) == tuple(runs)
        explainer = attribution.Explainer(graph.graph_def, inputs=graph.input,
                                          outputs=graph.output)
        for (label, (method, options)), a, b in zip(runs.items(), seen_cascade, seen_logit):
            chosen = dict(sanity.default_options(method, x), **options)
            assert report.runs[label] == (method, chosen)
            maps = explainer.attribute(method, x, target, **chosen).maps
            np.testing.assert_allclose(a, maps.reshape(4, -1), rtol=1e-5, atol=1e-6,
                                       err_msg=label)
            np.testing.assert_allclose(b, maps.reshape(4, -1), rtol=1e-5, atol=1e-6,
                                       err_msg=label)


def test_one_method_under_several_settings_side_by_side(cnn, x):
    runs = {"z+": ("lrp", {"composite": "zplus"}), "LRP-0": ("lrp", {"composite": "z"}),
            "gradient": "saliency"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", attribution.AttributionWarning)
        report = sanity.randomization(cnn, x, runs, 0, top=1, seed=0,
                                      options={"gradient": {"abs": False}})
    assert report.methods == ("z+", "LRP-0", "gradient")
    assert report.runs["gradient"] == ("saliency", {"abs": False})
    assert not np.array_equal(report.scores["z+"], report.scores["LRP-0"])
    assert report.table().splitlines()[2].startswith("| z+ | ")


def test_options_are_checked_before_any_model_is_run(x, tmp_path):
    missing = str(tmp_path / "no_such_model.pb")  # never opened: the options fail first
    with pytest.raises(AttributionError, match="occ: occlusion takes no option strid"):
        sanity.randomization(missing, x, {"occ": ("occlusion", {"strid": 2})},
                             inputs="x:0", outputs="y:0")
    with pytest.raises(AttributionError, match="'zplu' is not an LRP composite"):
        sanity.random_logit(missing, x, {"z+": ("lrp", {"composite": "zplu"})},
                            inputs="x:0", outputs="y:0")
    with pytest.raises(AttributionError, match="options for 'lrp', which are not among"):
        sanity.randomization(missing, x, ["saliency"], options={"lrp": {"composite": "z"}},
                             inputs="x:0", outputs="y:0")
    with pytest.raises(AttributionError, match=r"methods\['a'\] = 3: give a method's name"):
        sanity.randomization(missing, x, {"a": 3})
    with pytest.raises(AttributionError, match="give names, or a mapping label"):
        sanity.random_logit(missing, x, [("lrp", {"composite": "z"})])
    assert list(tmp_path.iterdir()) == []
