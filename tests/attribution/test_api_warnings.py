"""The Python API says what `graph-override explain` says: op types a rule
method does not cover and maps that vanish are warnings on every call
(Keras, TF2 function and frozen GraphDef forms), `coverage_report` takes
every model form the methods take, and a rule option out of range is
reported in the API's terms."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, frozen
from graph_override.attribution import coverage_report
from graph_override.errors import AttributionError

W1 = np.array([[1.0, -1.0, 0.5], [-2.0, 1.0, 1.0]], np.float32)
W2 = np.array([[1.0, -1.0], [-1.0, 2.0], [0.5, 1.0]], np.float32)
X = np.array([[1.0, 0.5], [-1.0, 2.0], [0.0, 0.0]], np.float32)

# Activations no rule of deeplift or guided backprop covers (a custom
# softplus is Exp, AddV2, Log: only AddV2 is linear).
ACTIVATIONS = {
    "Softsign": tf.nn.softsign,
    "Erf": tf.math.erf,
    "Elu": tf.nn.elu,
    "Exp": lambda t: tf.math.log(1.0 + tf.exp(t)),
    "Softmax": tf.nn.softmax,  # as in a classifier's head
}


def _graph_def(activation):
    """x [N, 2] -> MatMul W1 -> activation -> MatMul W2 -> logits [N, 2]."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        h = ACTIVATIONS[activation](tf.matmul(x, tf.constant(W1)))
        tf.identity(tf.matmul(h, tf.constant(W2)), name="logits")
    return g.as_graph_def()


def _keras(activation, bias=0.0):
    model = tf.keras.Sequential([
        tf.keras.Input((2,)),
        tf.keras.layers.Dense(3, activation=activation),
        tf.keras.layers.Dense(2)])
    model.layers[0].set_weights([W1, np.full(3, bias, np.float32)])
    model.layers[1].set_weights([W2, np.zeros(2, np.float32)])
    return model


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in caught if issubclass(w.category, attribution.AttributionWarning)]


@pytest.mark.parametrize("method, activation", [
    (m, a) for m in ("deeplift", "guided_backprop") for a in sorted(ACTIVATIONS)
    if not (m == "deeplift" and a == "Elu")])  # DeepLIFT has a rule for Elu
def test_an_uncovered_op_warns_on_every_call_of_a_frozen_graph(method, activation):
    explainer = attribution.Explainer(_graph_def(activation), inputs="x:0",
                                      outputs="logits:0")
    for _ in range(2):  # every call, not once per explainer
        result, caught = _caught(lambda: explainer.attribute(method, X, 0))
        assert [w.category for w in caught] == [attribution.CoverageWarning]
        message = str(caught[0].message)
        assert message.startswith("%s does not cover %s (1 node(s): " % (method, activation))
        assert "on the path of <GraphDef>" in message
        assert "rules=['%s=MODULE:FUNCTION']" % activation in message
        assert "--map" not in message
        if method == "deeplift":  # the completeness gap, as the result's delta says
            worst = int(np.argmax(np.abs(result.delta)))
            assert "largest |delta| %.3g (example %d: " % (
                abs(result.delta[worst]), worst) in message
            assert abs(result.delta[worst]) > 1e-3  # the gap is real
        else:
            assert "completeness" not in message


def test_an_uncovered_op_of_a_keras_model_warns_with_the_gap():
    model = _keras("softsign")
    result, caught = _caught(lambda: attribution.deeplift(model, X, target=1))
    assert len(caught) == 1 and caught[0].category is attribution.CoverageWarning
    message = str(caught[0].message)
    assert "deeplift does not cover Softsign" in message and "model sequential" in message
    change = result.maps.reshape(3, -1).sum(axis=1) - result.delta
    worst = int(np.argmax(np.abs(result.delta)))
    assert "%.3g times |f(x) - f(baseline)| = %.3g" % (
        abs(result.delta[worst]) / abs(change[worst]), abs(change[worst])) in message
    # The warning is attributed to the caller's line, not the package's.
    assert caught[0].filename == __file__
    # A rule of the caller's own covers the op: nothing to say.
    _, caught = _caught(lambda: attribution.deeplift(model, X, target=1,
                                                     rules=["Softsign=Identity"]))
    assert caught == []
    # A model the method covers: nothing to say either.
    _, caught = _caught(lambda: attribution.deeplift(_keras("relu"), X, target=0))
    assert caught == []


def _dead_keras():
    """Every hidden ReLU is off for inputs in [-1, 2]: all maps exactly 0."""
    return _keras("relu", bias=-100.0)


def _dead_graph_def():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        h = tf.nn.relu(tf.matmul(x, tf.constant(W1)) - 100.0)
        tf.identity(tf.matmul(h, tf.constant(W2)) + 1.0, name="logits")
    return g.as_graph_def()


# Every method but deconvnet, which passes dy whatever the ReLU's output (its
# maps do not vanish here), and Grad-CAM (a 4-D layer: its own test below).
VANISHING_METHODS = [m for m in attribution.METHODS if m not in ("deconvnet", "grad_cam")]


@pytest.mark.parametrize("form", ["keras", "frozen"])
@pytest.mark.parametrize("method", VANISHING_METHODS)
def test_maps_that_are_exactly_zero_warn(form, method):
    model = (attribution.Explainer(_dead_keras()) if form == "keras" else
             attribution.Explainer(_dead_graph_def(), inputs="x:0", outputs="logits:0"))
    options = {"integrated_gradients": {"steps": 4}, "smoothgrad": {"samples": 2, "seed": 0}}
    for _ in range(2):
        result, caught = _caught(lambda: model.attribute(method, X, 0,
                                                         **options.get(method, {})))
        assert not np.any(result.maps)
        assert [w.category for w in caught] == [attribution.VanishingMapsWarning]
        message = str(caught[0].message)
        assert message.startswith("%s maps vanish: every map of the 3 example(s) is "
                                  "exactly 0" % method)
        assert "weights=None" in message


def test_grad_cam_maps_that_are_exactly_zero_warn():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="x")
        a = tf.nn.relu(tf.nn.conv2d(x, tf.ones([1, 1, 1, 2]), 1, "SAME") - 100.0, name="a")
        tf.identity(tf.reduce_mean(a, axis=[1, 2]) + 1.0, name="logits")
    images = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 4, 4, 1)
    result, caught = _caught(lambda: attribution.grad_cam(
        g.as_graph_def(), images, 0, inputs="x:0", outputs="logits:0", layer="a"))
    assert result.maps.shape == (2, 4, 4) and not np.any(result.maps)
    assert [w.category for w in caught] == [attribution.VanishingMapsWarning]
    assert str(caught[0].message).startswith("grad_cam maps vanish")


def test_maps_below_the_threshold_warn_and_maps_above_it_do_not():
    """The threshold: VANISHING x max(1, largest |output|)."""
    for scale, warns in ((1e-14, True), (1e-8, False)):
        f = lambda t, s=scale: tf.matmul(t, tf.constant(W1 * s))  # noqa: E731
        result, caught = _caught(lambda f=f: attribution.saliency(f, X, 0))
        assert 0 < np.abs(result.maps).max() < 3 * scale
        assert [w.category for w in caught] == (
            [attribution.VanishingMapsWarning] if warns else []), scale
        if warns:
            assert "has a largest |value| of %.3g" % np.abs(result.maps).max() in str(
                caught[0].message)


def test_zero_maps_of_a_zero_input_are_no_warning_and_zero_maps_of_a_dead_net_are():
    """gradient x input of x = 0, DeepLIFT and IG of x = baseline are 0 by
    definition, not because the model lost its signal; the same maps of a
    network whose units are all off for X are."""
    live, dead = attribution.Explainer(_keras("relu")), attribution.Explainer(_dead_keras())
    cases = [(live, "gradient_input", np.zeros_like(X), {}, []),
             (live, "deeplift", X, {"baseline": X}, []),
             (live, "integrated_gradients", X, {"baseline": X, "steps": 2}, []),
             (dead, "gradient_input", X, {}, [attribution.VanishingMapsWarning]),
             (dead, "deeplift", X, {}, [attribution.VanishingMapsWarning]),
             (dead, "integrated_gradients", X, {"steps": 2},
              [attribution.VanishingMapsWarning])]
    for explainer, method, x, options, warns in cases:
        result, caught = _caught(lambda e=explainer, m=method, x=x, o=options:
                                 e.attribute(m, x, 0, **o))
        assert not np.any(result.maps), method
        assert [w.category for w in caught] == warns, (method, warns)


def test_warnings_can_be_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", attribution.AttributionWarning)
        with pytest.raises(attribution.VanishingMapsWarning):
            attribution.saliency(_dead_keras(), X, 0)


@pytest.mark.parametrize("epsilon, says", [
    (0.0, "eps_lrp(epsilon=0.0): epsilon must be > 0, got 0.0 (the default is "
          "epsilon=0.0001)"),
    (-1, "eps_lrp(epsilon=-1): epsilon must be > 0, got -1.0"),
    (float("nan"), "eps_lrp(epsilon=nan): epsilon must be finite, got nan"),
    ("0.1", "eps_lrp(epsilon='0.1'): epsilon must be a Python number, got str"),
])
def test_an_epsilon_out_of_range_speaks_of_the_api_argument(epsilon, says):
    with pytest.raises(AttributionError) as info:
        attribution.eps_lrp(_keras("relu"), X, 0, epsilon=epsilon)
    assert str(info.value).startswith(says), str(info.value)
    assert "--map" not in str(info.value) and "Relu=" not in str(info.value)


def test_a_numpy_epsilon_is_a_number():
    model = attribution.Explainer(_keras("relu"))
    expected = model.attribute("eps_lrp", X, 0, epsilon=0.5).maps
    for epsilon in (np.float32(0.5), np.float64(0.5)):
        np.testing.assert_array_equal(
            model.attribute("eps_lrp", X, 0, epsilon=epsilon).maps, expected)


def _uncovered(report):
    return [(u["op"], u["count"]) for u in report.uncovered]


def test_coverage_report_takes_every_model_form(tmp_path):
    keras = _keras("softsign")
    path = str(tmp_path / "softsign.pb")
    frozen.save(_graph_def("Softsign"), path)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.compat.v1.Variable(W1)
        logits = tf.matmul(tf.nn.softsign(tf.matmul(x, w)), tf.constant(W2), name="logits")
        with tf.compat.v1.Session(graph=g) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            reports = {"session": coverage_report(None, "deeplift", session=session,
                                                  inputs=x, outputs=logits)}
    reports.update({
        "keras": coverage_report(keras, "deeplift"),
        "keras with x": coverage_report(keras, "deeplift", x=X),
        "tf2 function": coverage_report(lambda t: keras(t), "deeplift", x=X),
        "explainer": coverage_report(attribution.Explainer(keras), "deeplift", x=X),
        "keras explainer": coverage_report(attribution.Explainer(keras), "deeplift"),
        "graph_def": coverage_report(_graph_def("Softsign"), "deeplift"),
        "path": coverage_report(path, "deeplift", inputs="x:0", outputs="logits:0"),
        "pb explainer": coverage_report(attribution.Explainer(
            path, inputs="x:0", outputs="logits:0"), "deeplift"),
    })
    for form, report in reports.items():
        assert _uncovered(report) == [("Softsign", 1)], form
        assert "rules=['Softsign=MODULE:FUNCTION']" in report.uncovered[0]["reason"], form
    assert reports["keras"].source == "model " + keras.name
    assert reports["path"].source == path
    assert coverage_report(_keras("relu"), "deeplift").covered == {"Relu": 1}


def test_coverage_report_says_what_a_callable_needs():
    with pytest.raises(AttributionError, match="give x="):
        coverage_report(lambda t: tf.nn.softsign(t), "deeplift")
    with pytest.raises(AttributionError, match="neither a GraphDef"):
        coverage_report(42, "deeplift")
    with pytest.raises(AttributionError, match="a TF2 callable or Keras model takes none"):
        coverage_report(_keras("relu"), "deeplift", inputs="x:0")
