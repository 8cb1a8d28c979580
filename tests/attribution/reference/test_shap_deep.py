"""graph_override.attribution.deeplift against SHAP 0.49.1's DeepExplainer.

SHAP's DeepExplainer is DeepLIFT with rules of its own for MaxPool (a
cross-max rescale) and Softmax (a decomposition into exp, sum and quotient),
which `deeplift_maxpool` and `deeplift_softmax` follow. shap_maps.py runs
it on the Keras twin of each network (reference_networks.py), under the
TensorFlow of the suite (2.21 or 2.15), in a subprocess with SHAP on its
path. With one background row SHAP's map is DeepLIFT from that reference:
ours must equal it to float32 rounding, and sum to f(x) - f(r) where SHAP's
do; with several, SHAP averages over them, and so does the mean of our maps
over the same references.
"""

import numpy as np
import pytest

import reference_networks as nets
from graph_override import attribution

# float32 rounding (7e-8 measured on the ReLU networks); a smooth activation's
# multiplier divides a difference of two float32 values (see test_captum.py)
RTOL, ATOL, SMOOTH_ATOL = 1e-5, 1e-6, 3e-5

NETS = {
    "cnn_relu_pool": nets.cnn(),
    "cnn_pool_relu": nets.cnn(order="pool_relu"),
    "cnn_same_softmax": nets.cnn(padding="same") + [{"type": "act", "fn": "softmax"}],
    "mlp_tanh_softmax": nets.mlp("tanh") + [{"type": "act", "fn": "softmax"}],
}
BACKGROUND = 3  # rows of the averaged case, on cnn_relu_pool
# one SHAP subprocess for the module: TensorFlow's start and SHAP's
# DeepExplainer (a few seconds per network) take most of a minute
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cases(shap_deep, tmp_path_factory):
    """{(name, rows): (layers, arrays, x, target, background, SHAP's result)}:
    every network with one background row, and cnn_relu_pool with
    BACKGROUND, all in one subprocess."""
    folder = tmp_path_factory.mktemp("shap")
    built = {}
    for name, layers in NETS.items():
        arrays = nets.weights(layers)
        x, target = nets.inputs(layers)
        rng = np.random.RandomState(4)
        for rows in (1, BACKGROUND) if name == "cnn_relu_pool" else (1,):
            background = rng.uniform(0, 1, (rows,) + x.shape[1:]).astype(np.float32)
            request = nets.request(folder / f"{name}_{rows}.npz", layers, arrays, x,
                                   background, target, [])
            built[name, rows] = [layers, arrays, x, target, background, request]
    for case, result in zip(built.values(), shap_deep([c[-1] for c in built.values()])):
        case[-1] = result
    return built


def _atol(name):
    return SMOOTH_ATOL if "tanh" in name else ATOL


@pytest.mark.parametrize("name", sorted(NETS))
def test_deeplift_equals_shap_deep_explainer(cases, name):
    layers, arrays, x, target, background, result = cases[name, 1]
    ours = attribution.deeplift(nets.keras_model(layers, arrays), x, target,
                                baseline=background[0])
    worst = float(np.abs(ours.maps - result["shap"]).max())
    np.testing.assert_allclose(ours.maps, result["shap"], rtol=RTOL, atol=_atol(name),
                               err_msg=f"{name}: largest difference {worst:.3g}")
    assert np.abs(ours.maps).max() > 1e-2
    # both sum to f(x) - f(r) (SHAP's expected value is f(r) here)
    change = result["logits"][np.arange(len(x)), target] - result["expected"][target]
    np.testing.assert_allclose(result["shap"].reshape(len(x), -1).sum(1), change, atol=1e-5)
    np.testing.assert_allclose(ours.delta, 0.0, atol=1e-5)


def test_mean_over_references_equals_shap_over_a_background(cases):
    layers, arrays, x, target, background, result = cases["cnn_relu_pool", BACKGROUND]
    explainer = attribution.Explainer(nets.keras_model(layers, arrays))
    mean = np.mean([explainer.attribute("deeplift", x, target, baseline=b).maps
                    for b in background], axis=0)
    np.testing.assert_allclose(mean, result["shap"], rtol=RTOL, atol=ATOL)


def test_max_pools_gradient_is_not_shaps(cases):
    """The old convention (MaxPool's gradient, DeepExplain's) differs from
    SHAP's by more than rounding on a CNN whose pool follows a ReLU."""
    layers, arrays, x, target, background, result = cases["cnn_relu_pool", 1]
    plain = attribution.deeplift(nets.keras_model(layers, arrays), x, target,
                                 baseline=background[0], rules=["MaxPool=MaxPool"])
    assert np.abs(plain.maps - result["shap"]).max() > 1e-2
