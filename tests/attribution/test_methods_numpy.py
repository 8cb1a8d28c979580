"""Numpy references for the methods on tiny hand-built nets; targets,
baselines, options, exact zeros, ties and the errors."""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import methods
from graph_override.errors import AttributionError

import methods_nets as nets

# One hidden layer, with a dead unit (bias -5) and a unit whose pre-activation
# is exactly 0 at x = 0 (bias 0, where Relu's gradient is 0).
W1 = np.array([[1.0, -2.0, 0.5, 1.0], [0.5, 1.0, -1.0, 2.0], [-1.0, 0.5, 2.0, 0.0]], "float32")
B1 = np.array([0.5, -5.0, 0.0, 0.25], "float32")
W2 = np.array([[1.0, -1.0], [2.0, 0.5], [-0.5, 1.5], [1.0, 1.0]], "float32")
B2 = np.array([0.1, -0.2], "float32")
X = np.array([[0.0, 0.0, 0.0], [1.0, -0.5, 2.0], [-1.0, 1.0, 0.5], [0.3, 0.3, -0.3]],
             "float32")


def _numpy_forward(x):
    pre = x @ W1 + B1
    return pre, np.maximum(pre, 0) @ W2 + B2


def _numpy_gradient(x, target, rule="plain"):
    """d logits[target] / dx through the Relu with `rule`: plain (its
    gradient), guided (dy > 0 and y > 0) or deconv (dy > 0)."""
    pre, _ = _numpy_forward(x)
    dy = W2[:, target].T  # dlogit/dh, per example
    if rule == "plain":
        dpre = dy * (pre > 0)
    elif rule == "guided":
        dpre = dy * (dy > 0) * (pre > 0)
    else:
        dpre = dy * (dy > 0)
    return dpre @ W1.T


@pytest.fixture(scope="module")
def net():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        h = tf.nn.relu(tf.matmul(x, W1) + B1)
        tf.identity(tf.matmul(h, W2) + B2, name="logits")
    return attribution.Explainer(g.as_graph_def(), inputs="x", outputs="logits")


def test_saliency_and_gradient_times_input_equal_numpy(net):
    target = np.array([0, 1, 0, 1])
    grads = _numpy_gradient(X, target)
    np.testing.assert_allclose(net.attribute("saliency", X, target).maps, np.abs(grads),
                               rtol=1e-6)
    np.testing.assert_allclose(net.attribute("saliency", X, target, abs=False).maps, grads,
                               rtol=1e-6)
    result = net.attribute("gradient_input", X, target)
    np.testing.assert_allclose(result.maps, grads * X, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(result.maps[0], 0.0)  # x = 0: exact zeros
    _, logits = _numpy_forward(X)
    np.testing.assert_allclose(result.outputs, logits, rtol=1e-6)
    np.testing.assert_array_equal(result.targets, target)


@pytest.mark.parametrize("method,rule", [("guided_backprop", "guided"),
                                         ("deconvnet", "deconv")])
def test_guided_backprop_and_deconvnet_equal_numpy(net, method, rule):
    for target in (0, 1):
        result = net.attribute(method, X, target)
        expected = _numpy_gradient(X, np.full(len(X), target), rule)
        np.testing.assert_allclose(result.maps, expected, rtol=1e-6, atol=1e-7)
    guided = net.attribute("guided_backprop", X, 1).maps
    assert not np.allclose(guided, _numpy_gradient(X, np.ones(4, int)))  # the rule matters


def test_the_dead_unit_gives_exact_zeros():
    # x = 0 leaves every hidden unit but the first at pre-activation <= 0
    pre, _ = _numpy_forward(X[:1])
    assert pre[0, 1] < 0 and pre[0, 2] == 0
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        h = tf.nn.relu(tf.matmul(x, W1[:, 1:3]) + B1[1:3])  # the dead and the zero unit
        tf.identity(tf.matmul(h, W2[1:3]), name="logits")
    for method in ("saliency", "guided_backprop", "deconvnet", "gradient_input"):
        maps = attribution.attribute(g.as_graph_def(), method, X[:1], 0, inputs="x",
                                     outputs="logits").maps
        if method == "deconvnet":  # ignores the forward: dy > 0 passes
            assert np.abs(maps).max() > 0
        else:
            np.testing.assert_array_equal(maps, 0.0)


def test_targets_none_int_array_and_callable(net):
    _, logits = _numpy_forward(X)
    default = net.attribute("saliency", X)
    np.testing.assert_array_equal(default.targets, logits.argmax(axis=1))
    as_int = net.attribute("saliency", X, 1)
    as_array = net.attribute("saliency", X, np.ones(4, np.int32))
    np.testing.assert_array_equal(as_int.maps, as_array.maps)
    as_callable = net.attribute("saliency", X, lambda y: y[:, 1] - y[:, 0], abs=False)
    expected = _numpy_gradient(X, np.ones(4, int)) - _numpy_gradient(X, np.zeros(4, int))
    np.testing.assert_allclose(as_callable.maps, expected, rtol=1e-6, atol=1e-7)
    assert as_callable.targets is None


def test_a_tie_in_the_output_explains_the_first_class():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.concat([x[:, :1] * 2.0, x[:, 1:] * 2.0, -x[:, 1:]], axis=1, name="logits")
    for method in ("saliency", "deeplift", "integrated_gradients"):
        with (pytest.warns(UserWarning, match="change no node") if method == "deeplift"
              else contextlib.nullcontext()):  # a linear model: no rule applies
            result = attribution.attribute(g.as_graph_def(), method,
                                           np.array([[1.0, 1.0], [1.0, 3.0]], "float32"),
                                           inputs="x", outputs="logits")
        np.testing.assert_array_equal(result.targets, [0, 1])  # a tie: the first maximum
        np.testing.assert_allclose(result.maps[0], [2.0, 0.0], rtol=1e-6)


def test_a_scalar_output_per_example_needs_no_target():
    result = attribution.gradient_input(lambda t: tf.reduce_sum(t * t, axis=1),
                                        np.array([[1.0, -2.0], [0.0, 3.0]], "float32"))
    np.testing.assert_array_equal(result.maps, [[2.0, 8.0], [0.0, 18.0]])
    with pytest.raises(AttributionError, match=r"output has shape \(2,\), not \(examples, "
                                               r"classes\).*callable"):
        attribution.saliency(lambda t: tf.reduce_sum(t, axis=1), np.ones((2, 2), "float32"), 0)


def test_integrated_gradients_on_a_linear_model_is_exact_and_zero_at_the_baseline():
    w = tf.constant([[2.0, 0.0], [-1.0, 1.0], [0.5, 3.0]])
    x = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]], "float32")
    for rule in methods.RIEMANN_RULES:
        result = attribution.integrated_gradients(lambda t: tf.matmul(t, w), x, 0, steps=3,
                                                  rule=rule, baseline=0.5)
        np.testing.assert_allclose(result.maps, (x - 0.5) * [2.0, -1.0, 0.5], rtol=1e-6)
        np.testing.assert_allclose(result.delta, 0.0, atol=1e-6)
        np.testing.assert_array_equal(result.maps[1], 0.0)  # x == baseline


@pytest.mark.parametrize("rule", methods.RIEMANN_RULES)
def test_riemann_points_and_weights(rule):
    points, weights = methods.riemann(rule, 4)
    assert weights.sum() == pytest.approx(1.0, abs=1e-15)
    expected = {"riemann_left": [0, 0.25, 0.5, 0.75], "riemann_right": [0.25, 0.5, 0.75, 1],
                "riemann_middle": [0.125, 0.375, 0.625, 0.875],
                "riemann_trapezoid": [0, 1 / 3, 2 / 3, 1]}[rule]
    np.testing.assert_allclose(points, expected)


def test_smoothgrad_is_repeatable_and_without_noise_is_the_gradient(net):
    a = net.attribute("smoothgrad", X, 0, samples=4, seed=5)
    b = net.attribute("smoothgrad", X, 0, samples=4, seed=5)
    np.testing.assert_array_equal(a.maps, b.maps)
    c = net.attribute("smoothgrad", X, 0, samples=4, seed=6)
    assert not np.array_equal(a.maps, c.maps)
    still = net.attribute("smoothgrad", X, 0, samples=2, stdev_spread=0.0)
    np.testing.assert_allclose(still.maps, _numpy_gradient(X, np.zeros(4, int)), rtol=1e-6)
    squared = net.attribute("smoothgrad", X, 0, samples=2, stdev_spread=0.0, magnitude=True)
    np.testing.assert_allclose(squared.maps, _numpy_gradient(X, np.zeros(4, int)) ** 2,
                               rtol=1e-5)


def test_internal_batch_size_groups_steps_without_changing_the_maps(net):
    for method, options in (("integrated_gradients", {"steps": 7}),
                            ("smoothgrad", {"samples": 5, "seed": 2})):
        one = net.attribute(method, X, 0, **options)
        for rows in (4, 9, 1000):
            grouped = net.attribute(method, X, 0, internal_batch_size=rows, **options)
            np.testing.assert_allclose(grouped.maps, one.maps, rtol=1e-6, atol=1e-7)
    with pytest.raises(AttributionError, match="internal_batch_size=0: expected an int"):
        net.attribute("integrated_gradients", X, internal_batch_size=0)


def test_attribution_results_convert_to_arrays(net):
    result = net.attribute("saliency", X)
    assert np.asarray(result) is result.maps


@pytest.mark.parametrize("call,message", [
    (lambda n: n.attribute("salency", X), r"'salency' is not an attribution method\. Did "
                                          r"you mean 'saliency'"),
    (lambda n: n.attribute("saliency", X, 2), r"class 2 \(example 0\) is out of range: the "
                                              r"output has 2 classes, 0 to 1"),
    (lambda n: n.attribute("saliency", X, -1), "class -1 .* out of range"),
    (lambda n: n.attribute("saliency", X, [0, 1]), r"int array of shape \(4,\)"),
    (lambda n: n.attribute("saliency", X, 0.5), "target=0.5: expected a class index"),
    (lambda n: n.attribute("saliency", X, True), "target=True: expected a class index"),
    (lambda n: n.attribute("saliency", X, lambda y: y), r"must return one scalar per "
                                                        r"example"),
    (lambda n: n.attribute("saliency", X[:, :2]), r"x has shape \(4, 2\); the model's "
                                                  r"input x:0 takes \(None, 3\)"),
    (lambda n: n.attribute("saliency", X[0]), r"x has shape \(3,\)"),
    (lambda n: n.attribute("saliency", X.astype(int)), "dtype int64; attribution needs a "
                                                       "float input"),
    (lambda n: n.attribute("saliency", X, steps=3), "saliency takes no option steps; its "
                                                    "options: abs"),
    (lambda n: n.attribute("integrated_gradients", X, baseline=np.ones(2)),
     r"baseline has shape \(2,\); expected x's shape \(4, 3\)"),
    (lambda n: n.attribute("integrated_gradients", X, steps=0), "steps=0: expected an int"),
    (lambda n: n.attribute("integrated_gradients", X, rule="simpson"), "rule='simpson'"),
    (lambda n: n.attribute("smoothgrad", X, samples=0), "samples=0"),
    (lambda n: n.attribute("eps_lrp", X, epsilon=-1.0), r"eps_lrp\(epsilon=-1\.0\): .*"
                                                       r"epsilon"),
])
def test_bad_arguments_raise_attribution_errors_that_name_them(net, call, message):
    with pytest.raises(AttributionError, match=message):
        call(net)


def test_a_fixed_batch_is_refused_by_deeplift_and_enforced_elsewhere():
    graph_def = nets.dense_graph_def(nets.dense_params([3, 4, 2], 0), "relu", batch=1)
    explainer = attribution.Explainer(graph_def, inputs="x", outputs="logits")
    assert explainer.attribute("saliency", X[:1]).maps.shape == (1, 3)
    with pytest.raises(AttributionError, match=r"deeplift runs the inputs and their baselines "
                                               r"in one batch of n \+ 1 = 2 \(one baseline for "
                                               r"all\), but the input x:0 has a fixed batch "
                                               r"dimension of 1. Re-export .*None"):
        explainer.attribute("deeplift", X[:1])
    # A batch of 4 rows: 3 inputs and one shared baseline, or 2 and 2 baselines.
    fixed = attribution.Explainer(
        nets.dense_graph_def(nets.dense_params([3, 4, 2], 0), "relu", batch=4),
        inputs="x", outputs="logits")
    assert fixed.attribute("deeplift", X[:3], target=0).maps.shape == (3, 3)
    distinct = np.stack([X[0] * 0.5, X[1] * 0.25])
    assert fixed.attribute("deeplift", X[:2], target=0, baseline=distinct).maps.shape == (2, 3)
    with pytest.raises(AttributionError, match=r"one batch of 2 x 3 \(a baseline per example"
                                               r"\), .* fixed batch dimension of 4. .*or pass "
                                               r"batches of 2 examples"):
        fixed.attribute("deeplift", X[:3], baseline=np.stack([X[0], X[1], X[2]]) * 0.5)
    with pytest.raises(AttributionError, match="x has 2 examples; .* fixed batch dimension "
                                               "of 1: pass batches of that size"):
        explainer.attribute("saliency", X[:2])


def test_model_arguments_are_checked():
    graph_def = nets.dense_graph_def(nets.dense_params([3, 2], 0), None)
    with pytest.raises(AttributionError, match="inputs= is required"):
        attribution.Explainer(graph_def, outputs="logits")
    with pytest.raises(AttributionError, match="explains one output tensor"):
        attribution.Explainer(graph_def, inputs="x", outputs=["logits", "logits"])
    with pytest.raises(AttributionError, match=r"inputs=\['x', 'x:0'\] names a tensor twice"):
        attribution.Explainer(graph_def, inputs=["x", "x:0"], outputs="logits")
    with pytest.raises(AttributionError, match="a TF2 callable or Keras model takes none"):
        attribution.Explainer(lambda t: t, inputs="x")
    with pytest.raises(AttributionError, match="neither a GraphDef"):
        attribution.Explainer(42)
    with pytest.raises(AttributionError, match="returns tuple, not one tensor"):
        attribution.saliency(lambda t: (t, t), X)


def test_rules_of_the_callers_own_come_before_the_methods():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        h = tf.nn.relu(tf.matmul(tf.round(x * 3.0), W1) + B1)
        tf.identity(tf.matmul(h, W2) + B2, name="logits")
    graph_def = g.as_graph_def()
    with pytest.raises(AttributionError, match="does not depend on the input x:0"):
        attribution.saliency(graph_def, X, 0, inputs="x", outputs="logits")  # Round: None
    explainer = attribution.Explainer(graph_def, inputs="x", outputs="logits",
                                      rules=["Round=ste_round", "Relu=Identity"])
    through = 3.0 * (W1 @ W2[:, 0])  # Round straight through, every Relu passing dy
    for method in ("saliency", "guided_backprop", "deconvnet"):
        maps = explainer.attribute(method, X, 0).maps
        np.testing.assert_allclose(np.abs(maps), np.abs(np.tile(through, (4, 1))), rtol=1e-6)


def test_each_one_call_function_takes_its_methods_options_and_passes_them_on(net):
    import inspect  # pylint: disable=import-outside-toplevel
    options = {"saliency": {"abs": False}, "integrated_gradients": {"steps": 3},
               "smoothgrad": {"samples": 2, "seed": 0}, "eps_lrp": {"epsilon": 0.5},
               "deeplift": {"baseline": 0.25}, "occlusion": {"patch": 1, "baseline": 0.5}}
    for name in attribution.METHODS:
        function = getattr(attribution, name)
        taken = [p for p, v in inspect.signature(function).parameters.items()
                 if v.kind == v.KEYWORD_ONLY and p not in ("inputs", "outputs", "session",
                                                           "rules", "allow_ops", "batch_size",
                                                           "progress", "mode")]
        spec = attribution.METHODS[name]
        assert taken == [o.name for o in spec.options], name
        assert [v.default for p, v in inspect.signature(function).parameters.items()
                if p in taken] == [o.default for o in spec.options], name
        own = [p for p in inspect.signature(spec.run).parameters
               if p not in ("context", "x", "target")]
        assert own == [o.name for o in spec.options if not o.rule], name
        if name == "grad_cam":
            continue  # no 4-D layer in this net (tested in test_methods_forms.py)
        expected = net.attribute(name, X, 1, **options.get(name, {}))
        result = function(net, X, 1, **options.get(name, {}))
        np.testing.assert_array_equal(result.maps, expected.maps, err_msg=name)
    with pytest.raises(AttributionError, match="already has its model"):
        attribution.saliency(net, X, inputs="x")


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_deeplift_runs_one_reference_row_for_a_shared_baseline(activation, monkeypatch):
    """Zeros, a number, one example, or identical rows: one reference row
    after the inputs (test_a_fixed_batch_is_refused_by_deeplift_... shows
    N + 1 rows fill the batch), with the maps and deltas of the 2N-row batch,
    bit for bit on ReLU, to an ulp on Tanh (its kernel rounds by position in
    the tensor). Rows that differ, even by the sign of a zero, keep 2N."""
    graph_def = nets.dense_graph_def(nets.dense_params([3, 4, 2], 1), activation)
    explainer = attribution.Explainer(graph_def, inputs="x", outputs="logits")
    for baseline in (None, 0.25, X[0], np.stack([X[0]] * len(X))):
        assert methods.one_reference(baseline, X)
        shared = explainer.attribute("deeplift", X, target=1, baseline=baseline)
        with monkeypatch.context() as patch:
            patch.setattr(methods, "one_reference", lambda b, x: False)
            doubled = explainer.attribute("deeplift", X, target=1, baseline=baseline)
        if activation == "relu":
            np.testing.assert_array_equal(shared.maps, doubled.maps)
            np.testing.assert_array_equal(shared.delta, doubled.delta)
        np.testing.assert_allclose(shared.maps, doubled.maps, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(shared.delta, doubled.delta, atol=1e-6)
        assert np.all(np.abs(shared.delta) < 1e-5) and np.any(shared.maps != 0)
    assert not methods.one_reference(np.stack([X[0], X[1], X[0], X[0]]), X)
    signed = np.zeros_like(X)
    signed[1, 0] = -0.0
    assert not methods.one_reference(signed, X)


@pytest.mark.parametrize("method", [m for m in attribution.METHODS
                                    if m != "grad_cam"])  # Grad-CAM: of 4-D layers
def test_a_batch_of_no_examples_gives_no_maps(method):
    """Zero examples: empty maps (and deltas), as a loop over no batches
    would give, not a reshape error."""
    w = tf.constant([[1.0, -1.0], [2.0, 0.5]])
    result = attribution.attribute(lambda t: tf.nn.relu(tf.matmul(t, w)), method,
                                   np.zeros((0, 2), np.float32), target=0,
                                   **({"patch": 1} if method == "occlusion" else {}))
    assert result.maps.shape == (0, 2)
    spec = attribution.METHODS[method]
    if spec.baseline and spec.times_input:  # completeness: IG and DeepLIFT
        assert result.delta.shape == (0,)


def test_deeplift_builds_the_baseline_array_once(monkeypatch):
    """The row count is chosen from the same array the method uses: one
    array of x's size per call, not one for the choice and one for the maps.
    The maps are those of a baseline given as the full array."""
    from graph_override.attribution import targets  # pylint: disable=import-outside-toplevel
    graph_def = nets.dense_graph_def(nets.dense_params([3, 4, 2], 1), "relu")
    explainer = attribution.Explainer(graph_def, inputs="x", outputs="logits")
    built, own = [], targets.baseline_for
    monkeypatch.setattr(targets, "baseline_for",
                        lambda b, x, *a, **k: built.append(b) or own(b, x, *a, **k))
    for baseline in (None, 0.25, X[0]):
        del built[:]
        result = explainer.attribute("deeplift", X, target=1, baseline=baseline)
        made = [b for b in built if not (isinstance(b, np.ndarray) and b.shape == X.shape)]
        assert len(made) == 1, (baseline, built)
        full = own(baseline, X)
        np.testing.assert_array_equal(
            result.maps, explainer.attribute("deeplift", X, target=1, baseline=full).maps)
