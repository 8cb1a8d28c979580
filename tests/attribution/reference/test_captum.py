"""graph_override.attribution against Captum 0.8.0 (PyTorch 2.13) on the same weights.

Each network is built twice from one set of numpy weights: as a Keras model
(reference_networks.py), explained by graph_override.attribution, and as a
torch module (captum_maps.py, in the reference venv), explained by Captum.
Where the conventions agree the maps are equal to float32 rounding:
``abs(ours - captum) <= ATOL + RTOL * abs(captum)``. Inputs are digits (many
exact zeros), with an all-zero image (zero-bias units exactly at ReLU's
kink, max-pool windows that are ties); the DeepLIFT baseline equals the input
on all of one example and on half the pixels of another (x - r exactly 0).

Where they differ, the tests pin the difference:
- Integrated Gradients, riemann_trapezoid: Captum's weights are 1/n, halved
  at the ends, on the points k/(n-1): they sum to (n-1)/n. Ours sum to 1, so
  our map is Captum's times n/(n-1).
- DeepLIFT and MaxPool: we keep MaxPool's gradient (as DeepExplain does);
  Captum has a rescale-like MaxPool rule. Our map equals Captum's with its
  rule taken out (the same nn.MaxPool2d under a subclass, which Captum's
  exact type lookup misses), and differs from Captum's own where the rule
  applies: with the pool before the ReLU. With the ReLU right before the pool
  (Conv -> ReLU -> MaxPool, the usual order) Captum 0.8.0 does not apply its
  MaxPool rule at all (its map equals the one without the rule), so there
  our maps and Captum's agree, and neither sums to f(x) - f(r). Where every
  window's argmax is the same for the input and the reference (a network
  without biases and r = x / 2) Captum's rule is the gradient: the maps agree
  with the rule applied, and both sum to f(x) - f(r).
"""

import numpy as np
import pytest

import reference_networks as nets
from graph_override import attribution

# float32 rounding: the maps are O(1); measured differences are below 1e-6.
RTOL, ATOL = 1e-5, 1e-6
# DeepLIFT's multiplier (f(x) - f(r)) / (x - r) of a smooth activation
# divides a difference of two float32 values by x - r, down to 3e-3 here: an
# ulp of f (6e-8) becomes 2e-5 of the multiplier. TensorFlow's and torch's
# tanh, sigmoid, softplus and elu differ by an ulp, so their maps by up to
# 1e-5 (measured); ReLU's multiplier is exact (a ratio of equal numbers or 0).
DEEPLIFT_ATOL = 3e-5
STEPS = 16
RULES = ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid")

RELU_NETS = {
    "mlp_relu": nets.mlp("relu"),
    "cnn_valid": nets.cnn(),
    "cnn_same": nets.cnn(padding="same"),
    "cnn_pool_relu": nets.cnn(order="pool_relu"),
    "cnn_avgpool": nets.cnn(pool="avgpool"),
}
SMOOTH_NETS = {f"mlp_{fn}": nets.mlp(fn) for fn in ("tanh", "sigmoid", "softplus", "elu")}
# The same network as cnn_pool_relu and cnn_valid, their MaxPool hidden from
# Captum's DeepLIFT rules (only the torch side differs).
HIDDEN_POOL = {"cnn_pool_relu_no_rule": nets.cnn(order="pool_relu", captum_rule=False),
               "cnn_valid_no_rule": nets.cnn(captum_rule=False)}
# Pool before ReLU, no biases, r = x / 2: each window's argmax is the same
# for input and reference (ReLU and max pooling are positively homogeneous).
SAME_ARGMAX = "cnn_pool_relu_half_baseline"

RULE_FREE = [{"key": "saliency", "method": "saliency"},
             {"key": "saliency_abs", "method": "saliency", "abs": True},
             {"key": "gradient_input", "method": "input_x_gradient"}]
IG = [{"key": rule, "method": "integrated_gradients", "rule": rule, "n_steps": STEPS}
      for rule in RULES]
DEEPLIFT = [{"key": "deeplift", "method": "deeplift"},
            {"key": "deeplift_zero", "method": "deeplift", "zero_baseline": True}]
RELU_RULES = [{"key": "guided_backprop", "method": "guided_backprop"},
              {"key": "deconvnet", "method": "deconvolution"}]


def _baseline(x):
    """Uniform in [0, 1], but r = x on all of example 1 and on every other
    pixel of example 2 (x - r exactly 0 there)."""
    baseline = np.random.RandomState(1).uniform(0, 1, x.shape).astype(np.float32)
    baseline[1] = x[1]
    flat_x, flat_r = x[2].reshape(-1), baseline[2].reshape(-1)
    flat_r[::2] = flat_x[::2]
    baseline[2] = flat_r.reshape(x.shape[1:])
    return baseline


class Case:
    """One network: its weights, inputs, Keras explainer and Captum's maps."""

    def __init__(self, layers, folder, name, methods, half_baseline=False, split=None):
        self.layers = layers
        self.arrays = nets.weights(layers, biases=not half_baseline)
        self.x, self.target = nets.inputs(layers)
        self.baseline = self.x / 2 if half_baseline else _baseline(self.x)
        self.request = nets.request(folder / f"{name}.npz", layers, self.arrays, self.x,
                                    self.baseline, self.target, methods, split)
        self.captum = None
        self._explainer = None

    @property
    def explainer(self):
        if self._explainer is None:
            self._explainer = attribution.Explainer(nets.keras_model(self.layers, self.arrays))
        return self._explainer

    def ours(self, method, **options):
        return self.explainer.attribute(method, self.x, target=self.target, **options)


@pytest.fixture(scope="module")
def cases(captum, tmp_path_factory):
    """Every network of this module, Captum's maps computed in one subprocess."""
    folder = tmp_path_factory.mktemp("captum")
    everything = RULE_FREE + IG + DEEPLIFT
    built = {name: Case(layers, folder, name, everything + RELU_RULES)
             for name, layers in RELU_NETS.items()}
    built.update({name: Case(layers, folder, name, everything)
                  for name, layers in SMOOTH_NETS.items()})
    built.update({name: Case(layers, folder, name, DEEPLIFT)
                  for name, layers in HIDDEN_POOL.items()})
    built[SAME_ARGMAX] = Case(RELU_NETS["cnn_pool_relu"], folder, SAME_ARGMAX, DEEPLIFT[:1],
                              half_baseline=True)
    built[TWO_INPUTS] = Case(RELU_NETS["mlp_relu"], folder, TWO_INPUTS,
                             RULE_FREE + IG + DEEPLIFT + RELU_RULES, split=SPLIT)
    for case, result in zip(built.values(), captum([c.request for c in built.values()])):
        case.captum = result
    return built


def assert_maps_equal(ours, theirs, what, atol=ATOL):
    """Equal to float32 rounding; the message gives the largest difference."""
    assert ours.shape == theirs.shape, what
    worst = float(np.max(np.abs(ours - theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=atol,
                               err_msg=f"{what}: largest difference {worst:.3g}")


ALL_NETS = list(RELU_NETS) + list(SMOOTH_NETS)

# mlp_relu as a model of two inputs, the first 40 features and the other 24,
# concatenated before its first layer: Captum explains the tuple of both.
TWO_INPUTS, SPLIT = "mlp_relu_two_inputs", 40


@pytest.mark.parametrize("method, key, options", [
    ("saliency", "saliency", {"abs": False}), ("gradient_input", "gradient_input", {}),
    ("integrated_gradients", "riemann_middle", {"steps": STEPS, "rule": "riemann_middle"}),
    ("deeplift", "deeplift", {}), ("deeplift", "deeplift_zero", {"baseline": None}),
    ("guided_backprop", "guided_backprop", {}), ("deconvnet", "deconvnet", {})])
def test_two_inputs_equal_captum(cases, method, key, options):
    """A Keras model of two inputs (a list, a baseline per input) against
    Captum's attribution of the tuple of both inputs: the same maps per
    input, and the same completeness summed over both."""
    case = cases[TWO_INPUTS]
    keras = nets.tf.keras
    a, b = keras.Input((SPLIT,)), keras.Input((case.x.shape[1] - SPLIT,))
    inner = nets.keras_model(case.layers, case.arrays)
    model = keras.Model([a, b], inner(keras.layers.Concatenate()([a, b])))
    if method in ("integrated_gradients", "deeplift") and "baseline" not in options:
        options = dict(options, baseline=[case.baseline[:, :SPLIT], case.baseline[:, SPLIT:]])
    result = attribution.attribute(model, method, [case.x[:, :SPLIT], case.x[:, SPLIT:]],
                                   case.target, **options)
    assert [m.shape[1] for m in result.maps] == [SPLIT, case.x.shape[1] - SPLIT]
    theirs = case.captum[key]
    for ours, part in zip(result.maps, (theirs[:, :SPLIT], theirs[:, SPLIT:])):
        assert np.abs(part).max() > 0
        assert_maps_equal(ours, part, f"two inputs: {method} vs Captum's {key}")
    if key + ".delta" in case.captum:
        np.testing.assert_allclose(result.delta, case.captum[key + ".delta"], atol=1e-5)


@pytest.mark.parametrize("name", ALL_NETS)
def test_same_network_on_both_sides(cases, name):
    """The layouts (kernels, NHWC/NCHW, flatten order, padding) are right:
    the two networks give the same logits."""
    case = cases[name]
    logits = nets.keras_model(case.layers, case.arrays)(case.x).numpy()
    assert_maps_equal(logits, case.captum["logits"], f"{name}: logits")


@pytest.mark.parametrize("name", ALL_NETS)
@pytest.mark.parametrize("method, key, options", [
    ("saliency", "saliency", {"abs": False}),
    ("saliency", "saliency_abs", {"abs": True}),
    ("gradient_input", "gradient_input", {}),
])
def test_gradient_maps_equal_captum(cases, name, method, key, options):
    case = cases[name]
    maps = case.ours(method, **options).maps
    assert_maps_equal(maps, case.captum[key], f"{name}: {method} vs Captum's {key}")
    if name.startswith("cnn") and method == "saliency":
        # The all-zero image: its channels with bias 0 sit at ReLU's kink, and
        # every 2x2 window of those with bias 0.1 is a tie, which passes the
        # gradient on (to the same element in TensorFlow and in torch).
        assert np.abs(maps[0]).max() > 1e-2


@pytest.mark.parametrize("name", list(RELU_NETS))
@pytest.mark.parametrize("method, key", [("guided_backprop", "guided_backprop"),
                                         ("deconvnet", "deconvnet")])
def test_relu_rules_equal_captum(cases, name, method, key):
    """Guided backprop and deconvnet: Captum's GuidedBackprop and
    Deconvolution (ReLU modules' gradients replaced; MaxPool keeps its own)."""
    case = cases[name]
    ours = case.ours(method).maps
    assert_maps_equal(ours, case.captum[key], f"{name}: {method}")
    # The rule matters on these inputs: the map is not the plain gradient.
    assert np.abs(ours - case.captum["saliency"]).max() > 1e-3


# Every rule on one MLP and one CNN; the middle rule on the other networks.
IG_CASES = ([(name, rule) for name in ("mlp_relu", "cnn_valid") for rule in RULES]
            + [(name, "riemann_middle") for name in ALL_NETS if name not in ("mlp_relu",
                                                                             "cnn_valid")])


@pytest.mark.parametrize("name, rule", IG_CASES)
def test_integrated_gradients_equal_captum(cases, name, rule):
    """Same points and weights for left, right and middle; for the trapezoid
    Captum's weights sum to (n-1)/n, so ours are Captum's times n/(n-1)."""
    case = cases[name]
    result = case.ours("integrated_gradients", baseline=case.baseline, steps=STEPS, rule=rule)
    scale = STEPS / (STEPS - 1) if rule == "riemann_trapezoid" else 1.0
    assert_maps_equal(result.maps, scale * case.captum[rule], f"{name}: IG {rule}")
    if rule != "riemann_trapezoid":
        np.testing.assert_allclose(result.delta, case.captum[rule + ".delta"], atol=1e-5)


@pytest.mark.parametrize("name", list(SMOOTH_NETS) + ["mlp_relu", "cnn_avgpool"])
@pytest.mark.parametrize("key, zero", [("deeplift", False), ("deeplift_zero", True)])
def test_deeplift_equals_captum_without_max_pool(cases, name, key, zero):
    """DeepLIFT (rescale) on networks without MaxPool: the same maps, and
    both sum to f(x) - f(r) (delta ~ 0)."""
    case = cases[name]
    result = case.ours("deeplift", baseline=0.0 if zero else case.baseline)
    assert_maps_equal(result.maps, case.captum[key], f"{name}: {key}",
                      atol=ATOL if "relu" in name or "cnn" in name else DEEPLIFT_ATOL)
    np.testing.assert_allclose(result.delta, 0.0, atol=1e-5)
    np.testing.assert_allclose(case.captum[key + ".delta"], 0.0, atol=1e-5)
    # x - r is exactly 0 on example 1: its map is exactly 0 on both sides.
    if not zero:
        assert not result.maps[1].any() and not case.captum[key][1].any()


@pytest.mark.parametrize("name", ["cnn_valid", "cnn_same", "cnn_pool_relu"])
def test_deeplift_on_max_pool_equals_captum_without_its_rule(cases, name):
    """We keep MaxPool's gradient: our map is Captum's with its MaxPool rule
    taken out (the only change on the torch side)."""
    case = cases[name]
    ours = case.ours("deeplift", baseline=case.baseline)
    # cnn_same has no twin without the rule: Captum's own map, as its ReLU
    # feeds the pool (see test_captum_drops_its_max_pool_rule_after_a_relu).
    no_rule = cases.get(name + "_no_rule", case)
    no_rule_map = no_rule.captum["deeplift"]
    assert_maps_equal(ours.maps, no_rule_map, f"{name}: DeepLIFT, MaxPool's gradient")
    # ... and, with the gradient, summation to delta fails where a window's
    # argmax differs between input and reference (as in DeepExplain).
    assert np.abs(ours.delta).max() > 1e-2


def test_deeplift_max_pool_rule_is_the_whole_difference(cases):
    """Pool before ReLU: Captum applies its MaxPool rule and its map differs
    from ours by more than rounding; with the rule hidden they are equal."""
    ours = cases["cnn_pool_relu"].ours("deeplift", baseline=cases["cnn_pool_relu"].baseline)
    captum_rule = cases["cnn_pool_relu"].captum["deeplift"]
    captum_gradient = cases["cnn_pool_relu_no_rule"].captum["deeplift"]
    assert np.abs(ours.maps - captum_rule).max() > 1e-2
    assert_maps_equal(ours.maps, captum_gradient, "pool before ReLU, rule hidden")
    # Captum's rule brings its sums closer to f(x) - f(r) than the gradient does.
    assert (np.abs(cases["cnn_pool_relu"].captum["deeplift.delta"]).max()
            < np.abs(ours.delta).max())


def test_captum_drops_its_max_pool_rule_after_a_relu(cases):
    """Conv -> ReLU -> MaxPool: Captum 0.8.0's map is the same with and without
    its MaxPool rule (the rule is not applied), hence equal to ours."""
    with_rule = cases["cnn_valid"].captum["deeplift"]
    without = cases["cnn_valid_no_rule"].captum["deeplift"]
    np.testing.assert_array_equal(with_rule, without)
    assert np.abs(cases["cnn_valid"].captum["deeplift.delta"]).max() > 1e-2


def test_deeplift_max_pool_equals_captum_where_argmaxes_agree(cases):
    """Where each window's maximum is at the same place for input and
    reference, Captum's MaxPool rule is the gradient: the maps agree with the
    rule applied (pool before ReLU), and both sum to f(x) - f(r)."""
    case = cases[SAME_ARGMAX]
    ours = case.ours("deeplift", baseline=case.baseline)
    assert_maps_equal(ours.maps, case.captum["deeplift"], "same argmax: DeepLIFT")
    np.testing.assert_allclose(ours.delta, 0.0, atol=1e-5)
    np.testing.assert_allclose(case.captum["deeplift.delta"], 0.0, atol=1e-5)
    assert np.abs(ours.maps).max() > 1e-2
