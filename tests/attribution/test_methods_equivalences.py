"""The published equivalences (Ancona et al., ICLR 2018) and DeepLIFT's
summation to delta, on dense networks, through every model form's engine."""

import numpy as np
import pytest

from graph_override import attribution

import methods_nets as nets

SIZES = [6, 10, 8, 3]


@pytest.fixture(scope="module")
def inputs():
    x = np.random.RandomState(7).normal(0, 1, (5, SIZES[0])).astype("float32")
    x[0] = 0.0  # an example that is its own (zero) baseline
    x[1, :3] = 0.0
    return x


def _explainer(activation, bias=True, seed=3, form="graph"):
    params = nets.dense_params(SIZES, seed, bias=bias)
    if form == "keras":  # the activations inside Keras layers
        return attribution.Explainer(nets.dense_keras_model(params, activation))
    graph_def = nets.dense_graph_def(params, activation)
    return attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")


@pytest.fixture(scope="module")
def relu_net():
    return _explainer("relu")


@pytest.fixture(scope="module")
def relu_net_without_biases():
    return _explainer("relu", bias=False)


@pytest.mark.parametrize("epsilon", [1e-4, 1e-2])
def test_eps_lrp_equals_gradient_times_input_on_a_relu_net_up_to_epsilon(
        relu_net, inputs, epsilon):
    lrp = relu_net.attribute("eps_lrp", inputs, target=[0, 1, 2, 0, 1], epsilon=epsilon)
    gxi = relu_net.attribute("gradient_input", inputs, target=[0, 1, 2, 0, 1])
    # Relu's rule is dy * relu(x) / (x + eps s(x)) = dy [x > 0] x / (x + eps):
    # off the gradient by a factor x / (x + eps), within eps / x of 1.
    np.testing.assert_allclose(lrp.maps, gxi.maps, rtol=50 * epsilon, atol=1e-6)
    assert np.abs(lrp.maps - gxi.maps).max() > 0  # epsilon does change something
    np.testing.assert_array_equal(lrp.maps[0], 0.0)  # x = 0: exact zeros


def test_deeplift_with_a_zero_baseline_equals_gradient_times_input_without_biases(
        relu_net_without_biases, inputs):
    net = relu_net_without_biases
    deeplift = net.attribute("deeplift", inputs, target=2)
    gxi = net.attribute("gradient_input", inputs, target=2)
    np.testing.assert_allclose(deeplift.maps, gxi.maps, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(deeplift.maps[0], 0.0)  # x == r


def test_deeplift_differs_from_gradient_times_input_with_biases(relu_net, inputs):
    deeplift = relu_net.attribute("deeplift", inputs, target=2)
    gxi = relu_net.attribute("gradient_input", inputs, target=2)
    assert np.abs(deeplift.maps - gxi.maps).max() > 1e-3


@pytest.mark.parametrize("form", ["graph", "keras"])
@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid", "softplus", "elu"])
def test_deeplift_sums_to_delta(activation, form, inputs):
    net = _explainer(activation, form=form)
    baseline = np.random.RandomState(11).normal(0, 0.5, SIZES[0]).astype("float32")
    for base in (None, baseline):
        result = net.attribute("deeplift", inputs, target=[0, 1, 2, 1, 0], baseline=base)
        base = np.zeros(SIZES[0], "float32") if base is None else base
        f_x = net.attribute("saliency", inputs).outputs
        f_r = net.attribute("saliency", np.tile(base, (len(inputs), 1))).outputs
        rows = np.arange(len(inputs))
        expected = (f_x[rows, [0, 1, 2, 1, 0]].astype("float64")
                    - f_r[rows, [0, 1, 2, 1, 0]])
        total = result.maps.sum(axis=1, dtype=np.float64)
        np.testing.assert_allclose(total, expected, rtol=1e-5, atol=1e-6)
        # delta uses the outputs of the doubled batch: float rounding apart
        np.testing.assert_allclose(result.delta, total - expected, atol=1e-6)
        assert np.abs(result.delta).max() <= 1e-5 * np.abs(expected).max() + 1e-6


def test_deeplift_of_an_input_equal_to_its_baseline_is_exactly_zero(relu_net, inputs):
    result = relu_net.attribute("deeplift", inputs, target=0, baseline=inputs)
    np.testing.assert_array_equal(result.maps, 0.0)
    np.testing.assert_array_equal(result.delta, 0.0)


def test_integrated_gradients_completeness_delta_falls_as_steps_grow(inputs):
    net = _explainer("tanh")
    deltas = [np.abs(net.attribute("integrated_gradients", inputs, target=1, steps=s,
                                   rule="riemann_left").delta).max()
              for s in (4, 16, 64)]
    assert deltas[0] > deltas[1] > deltas[2], deltas
    trapezoid = np.abs(net.attribute("integrated_gradients", inputs, target=1,
                                     steps=64).delta).max()
    assert trapezoid < deltas[2]  # second order beats first order
