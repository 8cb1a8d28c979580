"""graph_override.attribution against PAIR's `saliency` 0.2.1 (saliency.tf1).

PAIR's GuidedBackprop is the TF1 idiom issue 21 starts from: it saves the
Session's variables, re-imports the graph's GraphDef under
gradient_override_map({'Relu': 'GuidedRelu'}) and differentiates one example
at a time. pair_maps.py runs it (and its plain GradientSaliency) in a
subprocess of the python under test, so under whichever TensorFlow runs the
suite (2.21 or 2.15), and freezes the same Session graph; our maps of that
frozen GraphDef (a batch, one call) must equal PAIR's to float32 rounding.
"""

import numpy as np
import pytest
import tensorflow as tf

import reference_networks as nets
from graph_override import attribution

RTOL, ATOL = 1e-5, 1e-6
NETS = {"mlp_relu": nets.mlp("relu"), "cnn_valid": nets.cnn(), "cnn_same": nets.cnn(padding="same")}


@pytest.fixture(scope="module")
def pair_results(pair_saliency, tmp_path_factory):
    """{name: (x, target, PAIR's result)}, all networks in one subprocess."""
    folder = tmp_path_factory.mktemp("pair")
    requests, inputs = [], {}
    for name, layers in NETS.items():
        inputs[name] = nets.inputs(layers)
        requests.append(nets.request(folder / f"{name}.npz", layers, nets.weights(layers),
                                     inputs[name][0], np.zeros_like(inputs[name][0]),
                                     inputs[name][1], []))
    return {name: inputs[name] + (result,)
            for name, result in zip(NETS, pair_saliency(requests))}


@pytest.fixture(scope="module", params=sorted(NETS))
def case(request, pair_results):
    """PAIR's maps of one network, and our Explainer of its frozen graph."""
    x, target, result = pair_results[request.param]
    graph_def = tf.compat.v1.GraphDef.FromString(result["frozen"].tobytes())
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    return request.param, x, target, result, explainer


def _assert_equal(ours, theirs, what):
    worst = float(np.max(np.abs(ours - theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL,
                               err_msg=f"{what}: largest difference {worst:.3g}")


def test_frozen_graph_is_pairs_network(case):
    name, x, _, result, explainer = case
    assert result["guided_backprop"].shape == x.shape
    _assert_equal(explainer.attribute("saliency", x, target=0).outputs, result["logits"],
                  f"{name}: logits")


def test_guided_backprop_equals_pair(case):
    name, x, target, result, explainer = case
    ours = explainer.attribute("guided_backprop", x, target=target).maps
    _assert_equal(ours, result["guided_backprop"], f"{name}: guided backprop")
    # Not a check that cannot fail: the guided map is not the gradient here.
    assert np.abs(ours - result["gradients"]).max() > 1e-3


def test_gradients_equal_pair(case):
    name, x, target, result, explainer = case
    ours = explainer.attribute("saliency", x, target=target, abs=False).maps
    _assert_equal(ours, result["gradients"], f"{name}: gradients")
