"""Real frozen models: Keras MobileNetV2 (Relu6, depthwise convolutions,
inference-mode batch normalization) and ResNet50 (Relu, residual additions,
a MaxPool), weights=None, frozen with convert_variables_to_constants_v2 as a
user would. Guided backprop, epsilon-LRP, DeepLIFT and IG through the frozen
GraphDef and through the Keras model give the same maps, and DeepLIFT's
attributions sum to f(x) - f(baseline).

The models come from tools/bench_attribution.py (the benchmark explains the
same MobileNetV2): 32x32 inputs, 10 classes, batch normalization statistics
calibrated on random inputs so that activations keep their scale (with the
raw weights=None statistics MobileNetV2's logits are about 1e-11).
"""

import gc

import numpy as np
import pytest

from graph_override import attribution
from graph_override.attribution.coverage import coverage_report

pytestmark = pytest.mark.slow  # each model: freezing and one graph per rule set

SIZE = 32
METHODS = {"guided_backprop": {}, "eps_lrp": {}, "deeplift": {},
           "integrated_gradients": {"steps": 8}}
# Both forms freeze the same Keras graph and run it the same way; float
# rounding is all that may differ.
RTOL = 1e-5


@pytest.fixture(scope="module", params=[("MobileNetV2", {"alpha": 0.35}), ("ResNet50", {})],
                ids=["mobilenet_v2", "resnet50"])
def real(request, load_tool):
    """The model's name, the GraphDef, 2 examples x, `maps(method)` for the
    Keras model and its frozen .pb, and `saliency(x, targets)` of the .pb."""
    bench = load_tool("bench_attribution")
    name, kwargs = request.param
    model = bench.keras_application(name, SIZE, classes=10, **kwargs)
    graph_def, input_name, output_name = bench.freeze(model, SIZE)
    x = np.random.RandomState(2).uniform(-1, 1, (2, SIZE, SIZE, 3)).astype(np.float32)
    done = {}

    def frozen():
        return attribution.Explainer(graph_def, inputs=input_name, outputs=output_name)

    def maps(method):
        """(from the Keras model, from the frozen .pb), computed once. Each
        method gets Explainers of its own, dropped after: an Explainer keeps
        each method's patched graph and function, about a gigabyte per method
        of ResNet50, and the worker's memory would hold them all."""
        if method not in done:
            done[method] = (attribution.Explainer(model).attribute(method, x, None,
                                                                   **METHODS[method]),
                            frozen().attribute(method, x, None, **METHODS[method]))
            gc.collect()
        return done[method]

    def saliency(inputs, targets, **options):
        result = frozen().attribute("saliency", inputs, targets, **options)
        gc.collect()
        return result
    return dict(name=name, graph_def=graph_def, x=x, input=input_name, output=output_name,
                maps=maps, saliency=saliency)


@pytest.mark.parametrize("method", list(METHODS))
def test_frozen_pb_and_keras_model_give_the_same_maps(real, method):
    from_keras, from_pb = real["maps"](method)
    np.testing.assert_array_equal(from_keras.targets, from_pb.targets)
    scale = np.abs(from_keras.maps).max()
    assert scale > 0
    np.testing.assert_allclose(from_pb.maps, from_keras.maps, rtol=0, atol=RTOL * scale)


@pytest.mark.parametrize("method", ["guided_backprop", "eps_lrp", "deeplift"])
def test_the_rules_reach_the_activations(real, method):
    """The maps are not the plain gradient's (times the input): the rules
    patched every activation, Relu6 included. On ResNet50, a ReLU network,
    epsilon-LRP is gradient x input up to epsilon (Ancona et al., ICLR 2018):
    it differs only where 0 < x is of the order of epsilon."""
    plain = real["saliency"](real["x"], None, abs=False).maps
    if method != "guided_backprop":
        plain = plain * real["x"]
    got = real["maps"](method)[1].maps
    difference = np.abs(got - plain).max() / np.abs(plain).max()
    if method == "eps_lrp" and real["name"] == "ResNet50":
        assert 0 < difference < 0.1
    else:
        assert difference > 0.1, method
    report = coverage_report(real["graph_def"], method, inputs=[real["input"]],
                             outputs=[real["output"]])
    assert report.ok, report.format()
    activation = {"MobileNetV2": "Relu6", "ResNet50": "Relu"}[real["name"]]
    assert report.covered[activation] == {"MobileNetV2": 35, "ResNet50": 49}[real["name"]]


def test_deeplift_sums_to_the_output_difference(real):
    """Summation to delta: sum of attributions = f(x) - f(0) for the target.
    It holds to float rounding on both: MobileNetV2 has no MaxPool, and
    ResNet50's one MaxPool has DeepLIFT's own rule (SHAP's; with MaxPool's
    gradient the gap was up to 4e-4 of the outputs there)."""
    result = real["maps"]("deeplift")[1]
    zero = real["saliency"](np.zeros_like(real["x"]), result.targets)
    rows = np.arange(len(result.targets))
    difference = (result.outputs[rows, result.targets].astype(np.float64)
                  - zero.outputs[rows, result.targets])
    total = result.maps.reshape(len(rows), -1).sum(axis=1, dtype=np.float64)
    # The library takes f(x) and f(0) from its doubled batch, this test from
    # batches of their own: float32 rounding of the logits apart (ResNet50's
    # logits, about 30, differ by 6e-4 between batch sizes).
    np.testing.assert_allclose(result.delta, total - difference, rtol=0,
                               atol=1e-4 * np.abs(result.outputs).max())
    # Relative to the logits' size: f(x) - f(0) alone can be small for an
    # example (a cancellation), and float32 rounding is relative to f.
    scale = np.maximum.reduce([np.abs(difference), np.abs(result.outputs[rows, result.targets]),
                               np.abs(zero.outputs[rows, result.targets])])
    relative = np.abs(result.delta) / scale
    print("%s: DeepLIFT delta %s, f(x) - f(0) %s, |delta| / max(|f(x)|, |f(0)|, "
          "|f(x) - f(0)|) %s" % (real["name"], result.delta, difference, relative))
    assert relative.max() < 1e-4
