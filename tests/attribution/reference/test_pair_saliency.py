"""graph_override.attribution against PAIR's `saliency` 0.2.1 (saliency.tf1).

PAIR's GuidedBackprop is the TF1 idiom issue 21 starts from: it saves the
Session's variables, re-imports the graph's GraphDef under
gradient_override_map({'Relu': 'GuidedRelu'}) and differentiates one example
at a time. pair_maps.py runs it (and its plain GradientSaliency) in a
subprocess of the python under test, so under whichever TensorFlow runs the
suite (2.21 or 2.15), and freezes the same Session graph; our maps of that
frozen GraphDef (a batch, one call) must equal PAIR's to float32 rounding.

PAIR's Integrated Gradients is none of our Riemann rules: it averages the
gradient at n points k/(n-1), k = 0..n-1, each with weight 1/n. Its map is
ours with riemann_trapezoid (the same points, weights 1/(n-1) halved at the
ends) rescaled and with the two ends added back:
((n-1) * trapezoid + (x - b) * (g(b) + g(x)) / 2) / n, g the gradient.
"""

import numpy as np
import pytest
import tensorflow as tf

import reference_networks as nets
from graph_override import attribution

RTOL, ATOL = 1e-5, 1e-6
STEPS = 16
IG = [{"key": "integrated_gradients", "method": "integrated_gradients", "n_steps": STEPS}]
NETS = {"mlp_relu": nets.mlp("relu"), "cnn_valid": nets.cnn(), "cnn_same": nets.cnn(padding="same")}


@pytest.fixture(scope="module")
def pair_results(pair_saliency, tmp_path_factory):
    """{name: (x, target, baseline, PAIR's result)}, all networks in one subprocess."""
    folder = tmp_path_factory.mktemp("pair")
    requests, inputs = [], {}
    for name, layers in NETS.items():
        x, target = nets.inputs(layers)
        baseline = np.random.RandomState(2).uniform(0, 0.5, x.shape).astype(np.float32)
        inputs[name] = x, target, baseline
        requests.append(nets.request(folder / f"{name}.npz", layers, nets.weights(layers),
                                     x, baseline, target, IG))
    return {name: inputs[name] + (result,)
            for name, result in zip(NETS, pair_saliency(requests))}


@pytest.fixture(scope="module", params=sorted(NETS))
def case(request, pair_results):
    """PAIR's maps of one network, and our Explainer of its frozen graph."""
    x, target, baseline, result = pair_results[request.param]
    graph_def = tf.compat.v1.GraphDef.FromString(result["frozen"].tobytes())
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    return request.param, x, target, result, explainer, baseline


def _assert_equal(ours, theirs, what):
    worst = float(np.max(np.abs(ours - theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL,
                               err_msg=f"{what}: largest difference {worst:.3g}")


def test_frozen_graph_is_pairs_network(case):
    name, x, _, result, explainer, _ = case
    assert result["guided_backprop"].shape == x.shape
    _assert_equal(explainer.attribute("saliency", x, target=0).outputs, result["logits"],
                  f"{name}: logits")


def test_guided_backprop_equals_pair(case):
    name, x, target, result, explainer, _ = case
    ours = explainer.attribute("guided_backprop", x, target=target).maps
    _assert_equal(ours, result["guided_backprop"], f"{name}: guided backprop")
    # Not a check that cannot fail: the guided map is not the gradient here.
    assert np.abs(ours - result["gradients"]).max() > 1e-3


def test_gradients_equal_pair(case):
    name, x, target, result, explainer, _ = case
    ours = explainer.attribute("saliency", x, target=target, abs=False).maps
    _assert_equal(ours, result["gradients"], f"{name}: gradients")


def test_integrated_gradients_match_pair(case):
    name, x, target, result, explainer, baseline = case
    trapezoid = explainer.attribute("integrated_gradients", x, target=target,
                                    baseline=baseline, steps=STEPS,
                                    rule="riemann_trapezoid").maps
    ends = sum(explainer.attribute("saliency", point, target=target, abs=False).maps
               for point in (baseline, x))
    pair_rule = ((STEPS - 1) * trapezoid + (x - baseline) * ends / 2) / STEPS
    _assert_equal(pair_rule, result["integrated_gradients"], f"{name}: IG")
    # The rules do differ by more than rounding.
    assert np.abs(trapezoid - result["integrated_gradients"]).max() > 1e-3
