"""Models of several inputs: every method on a model of two inputs gives
the maps of the same model written with one input, the two concatenated,
split; numpy references; the same maps from a Keras functional model (a
list or a dict of inputs), a Session graph, a frozen .pb and a TF2 function
of two tensors; a baseline per input; completeness summed over the inputs;
inputs that do not fit are AttributionErrors naming the input."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, frozen
from graph_override.attribution import method_table
from graph_override.errors import AttributionError

import methods_nets as nets
import test_methods_forms

# a [N, 2, 2, 3] -> 1x1 Conv2D (W1, B1) -> Relu "ha" -> mean over height and
# width -> W2; b [N, 3] -> Wb + Bb -> Relu "hb" -> W3; logits = the sum + B2.
RNG = np.random.RandomState(11)
W1 = RNG.randn(3, 4).astype(np.float32)
B1 = np.array([0.5, -5.0, 0.0, 0.25], np.float32)  # unit 1 dead
W2 = RNG.randn(4, 3).astype(np.float32)
WB = RNG.randn(3, 4).astype(np.float32)
BB = np.array([0.1, 0.0, -0.3, 0.2], np.float32)
W3 = RNG.randn(4, 3).astype(np.float32)
B2 = np.array([0.1, -0.2, 0.0], np.float32)
A = RNG.randn(4, 2, 2, 3).astype(np.float32)
B = RNG.randn(4, 3).astype(np.float32)
TARGET = np.array([0, 2, 1, 2])
RTOL, ATOL = 1e-5, 1e-6


def two(a, b):
    ha = tf.nn.relu(tf.nn.conv2d(a, tf.constant(W1[None, None]), 1, "VALID") + B1, name="ha")
    hb = tf.nn.relu(tf.matmul(b, WB) + BB, name="hb")
    return tf.add(tf.matmul(tf.reduce_mean(ha, axis=[1, 2]), W2) + tf.matmul(hb, W3), B2,
                  name="logits")


def concatenated(x):
    """The same model of one input: a's 12 values, then b's 3."""
    return two(tf.reshape(x[:, :12], [-1, 2, 2, 3]), x[:, 12:])


def _graph_def():
    with tf.Graph().as_default() as g:
        two(tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 3], name="a"),
            tf.compat.v1.placeholder(tf.float32, [None, 3], name="b"))
    return g.as_graph_def()


@pytest.fixture(scope="module")
def graph_model():
    return attribution.Explainer(_graph_def(), inputs=["a:0", "b:0"], outputs="logits:0")


def _split(maps):
    return [maps[:, :12].reshape(-1, 2, 2, 3), maps[:, 12:]]


def _rule(pre, dh, rule, ref=None, epsilon=None):
    if rule == "plain":
        return dh * (pre > 0)
    if rule == "guided":
        return dh * (dh > 0) * (pre > 0)
    if rule == "eps":
        return dh * np.maximum(pre, 0) / (pre + epsilon * np.where(pre >= 0, 1.0, -1.0))
    moved = np.abs(pre - ref) >= 1e-10  # DeepLIFT's rescale
    slope = (np.maximum(pre, 0) - np.maximum(ref, 0)) / np.where(moved, pre - ref, 1.0)
    return dh * np.where(moved, slope, pre > 0)


def _gradient(a, b, target, rule="plain", ref=(None, None), epsilon=None):
    """[d logits[target] / da, / db] in float64, the Relus' gradient by `rule`."""
    pre_a = a.astype(np.float64) @ W1 + B1
    pre_b = b.astype(np.float64) @ WB + BB
    dha = np.broadcast_to((W2[:, target].T / 4.0)[:, None, None, :], pre_a.shape)
    ref_a = None if ref[0] is None else ref[0].astype(np.float64) @ W1 + B1
    ref_b = None if ref[1] is None else ref[1].astype(np.float64) @ WB + BB
    return [_rule(pre_a, dha, rule, ref_a, epsilon) @ W1.T,
            _rule(pre_b, W3[:, target].T, rule, ref_b, epsilon) @ WB.T]


SEVERAL = list(method_table.METHODS)


# Occlusion's patch spans each input's own axes, not the concatenated row's.
@pytest.mark.parametrize("method", [m for m in SEVERAL if m not in ("grad_cam", "occlusion")])
def test_the_maps_are_those_of_the_concatenated_model_split(graph_model, method):
    """Every method (Grad-CAM explains a layer, not the inputs: below). For
    SmoothGrad, each input's noise follows its own value range: the
    concatenated model has the same maps with stdev_spread=0 only."""
    options = dict(test_methods_forms.CASES[method])
    if method == "smoothgrad":
        options["stdev_spread"] = 0.0
    result = graph_model.attribute(method, [A, B], TARGET, **options)
    one = attribution.attribute(concatenated, method,
                                np.concatenate([A.reshape(4, -1), B], axis=1), TARGET,
                                **options)
    assert isinstance(result.maps, list) and len(result.maps) == 2
    for got, want in zip(result.maps, _split(one.maps)):
        assert np.abs(want).max() > 0
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=method)
    np.testing.assert_allclose(result.outputs, one.outputs, rtol=RTOL, atol=ATOL)
    if one.delta is not None:
        np.testing.assert_allclose(result.delta, one.delta, rtol=1e-4, atol=1e-5)


def test_numpy_references_with_a_baseline_per_input(graph_model):
    grads = _gradient(A, B, TARGET)
    for got, g, x in zip(graph_model.attribute("gradient_input", [A, B], TARGET).maps, grads,
                         (A, B)):
        np.testing.assert_allclose(got, g * x, rtol=RTOL, atol=ATOL)
    guided = graph_model.attribute("guided_backprop", [A, B], TARGET).maps
    for got, want in zip(guided, _gradient(A, B, TARGET, "guided")):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    eps = graph_model.attribute("eps_lrp", [A, B], TARGET, epsilon=0.01).maps
    for got, g, x in zip(eps, _gradient(A, B, TARGET, "eps", epsilon=0.01), (A, B)):
        np.testing.assert_allclose(got, g * x, rtol=1e-4, atol=ATOL)
    # DeepLIFT, a baseline per input: a number for a, one example's shape for b
    ref_a, ref_b = np.full_like(A, 0.2), np.tile(B[3:], (4, 1))
    result = graph_model.attribute("deeplift", [A, B], TARGET, baseline=[0.2, B[3]])
    for got, g, x, r in zip(result.maps, _gradient(A, B, TARGET, "rescale", (ref_a, ref_b)),
                            (A, B), (ref_a, ref_b)):
        np.testing.assert_allclose(got, (x - r) * g, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(result.maps[1][3], 0.0)  # b equal to its baseline
    np.testing.assert_allclose(result.delta, 0.0, atol=2e-5)  # summed over both inputs
    # SmoothGrad: each input's noise in its own value range
    smooth = graph_model.attribute("smoothgrad", [A, B], TARGET, samples=3, seed=4).maps
    rng = np.random.default_rng(4)
    spread = [0.15 * np.ptp(v.reshape(4, -1), axis=1).reshape((4,) + (1,) * (v.ndim - 1))
              for v in (A, B)]
    want = [np.zeros(A.shape), np.zeros(B.shape)]
    for _ in range(3):
        noise = rng.normal(size=(4, 15))
        noisy = [(A + noise[:, :12].reshape(A.shape) * spread[0]).astype(np.float32),
                 (B + noise[:, 12:] * spread[1]).astype(np.float32)]
        want = [w + g / 3 for w, g in zip(want, _gradient(*noisy, TARGET))]
    for got, w in zip(smooth, want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)


def test_integrated_gradients_is_complete_over_both_inputs(graph_model):
    result = graph_model.attribute("integrated_gradients", [A, B], TARGET, steps=2000,
                                   internal_batch_size=8000, baseline=[None, 0.5])
    change = (result.outputs[np.arange(4), TARGET]
              - graph_model.attribute("saliency", [np.zeros_like(A), np.full_like(B, 0.5)],
                                      TARGET).outputs[np.arange(4), TARGET])
    sums = [m.reshape(4, -1).sum(axis=1, dtype=np.float64) for m in result.maps]
    np.testing.assert_allclose(sums[0] + sums[1] - change, result.delta, atol=1e-5)
    assert np.all(np.abs(result.delta) <= 1e-4 * np.abs(change).max())
    assert np.all(np.abs(sums[1]) > 100 * np.abs(result.delta))  # b's maps are needed


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    """{form: (Explainer, how x is given)} of the same two-input model."""
    keras = nets.keras_module()
    a, b = keras.Input((2, 2, 3), name="a"), keras.Input((3,), name="b")
    layers = [keras.layers.Conv2D(4, 1, activation="relu"),
              keras.layers.Dense(3, use_bias=False), keras.layers.Dense(4, activation="relu"),
              keras.layers.Dense(3)]
    la = layers[1](keras.layers.GlobalAveragePooling2D()(layers[0](a)))
    model = keras.Model([a, b], keras.layers.Add()([la, layers[3](layers[2](b))]))
    for layer, weights in zip(layers, [[W1[None, None], B1], [W2], [WB, BB], [W3, B2]]):
        layer.set_weights(weights)
    graph = tf.Graph()
    with graph.as_default():
        pa = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 3], name="a")
        pb = tf.compat.v1.placeholder(tf.float32, [None, 3], name="b")
        w = tf.compat.v1.Variable(W3)
        logits = two(pa, pb) + 0.0 * tf.reduce_sum(w)
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
        graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
            session, graph.as_graph_def(), [logits.op.name])
    path = str(tmp_path_factory.mktemp("two") / "two.pb")
    frozen.save(graph_def, path)
    out = {"session": (attribution.Explainer(session=session, inputs=[pa, pb],
                                             outputs=logits), list),
           "pb": (attribution.Explainer(path, inputs=["a:0", "b:0"],
                                        outputs=logits.name), list),
           "keras": (attribution.Explainer(model), list),
           "keras dict": (attribution.Explainer(model), dict),
           "tf2 function": (attribution.Explainer(tf.function(two)), list)}
    session.close()
    return out


# LRP: the Keras form puts B2 in the b branch's last layer, the graph after
# the add, and LRP's maps depend on where a bias is (its forms on one model:
# test_lrp_several_inputs.py)
@pytest.mark.parametrize("method", [m for m in SEVERAL if m != "lrp"])
def test_the_forms_give_the_same_maps(forms, method):
    options = dict(test_methods_forms.CASES[method])
    if method == "occlusion":  # the images' patch does not fit these inputs
        options = {"patch": 1, "baseline": 0.5}
    results = {}
    for form, (explainer, kind) in forms.items():
        x = {"b": B, "a": A} if kind is dict else [A, B]
        results[form] = explainer.attribute(method, x, TARGET, **options)
    reference = results.pop("session")
    for form, result in results.items():
        maps = result.maps
        if method == "grad_cam":  # the layer's maps, one per example
            np.testing.assert_allclose(maps, reference.maps, rtol=RTOL, atol=ATOL)
            assert maps.shape == (4, 2, 2) and np.abs(maps).max() > 0
            continue
        if form == "keras dict":
            assert sorted(maps) == ["a", "b"]
            maps = [maps["a"], maps["b"]]
        for got, want in zip(maps, reference.maps):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=form)


def test_grad_cam_of_a_layer_of_one_input(graph_model):
    maps = graph_model.attribute("grad_cam", [A, B], TARGET).maps  # the last 4-D: ha
    h = np.maximum(A.astype(np.float64) @ W1 + B1, 0)
    want = np.maximum((h * (W2[:, TARGET].T / 4.0)[:, None, None, :]).sum(axis=-1), 0)
    np.testing.assert_allclose(maps, want, rtol=RTOL, atol=ATOL)
    with pytest.raises(AttributionError, match=r"resize=True\): the model has several inputs"):
        graph_model.attribute("grad_cam", [A, B], TARGET, resize=True)


@pytest.mark.parametrize("x, baseline, says", [
    ([A], None, r"x has 1 arrays; the model has 2 input\(s\) \(a:0, b:0\)"),
    ([A, B, B], None, r"x has 3 arrays; the model has 2 input\(s\)"),
    (A, None, r"the model has 2 inputs \(a:0, b:0\): give x as a list of 2 arrays"),
    ({"a": A, "c": B}, None, r"x has no array for the input b:0 \(its keys: 'a', 'c'\)"),
    ({"a": A, "b:0": B, "c": B}, None, r"x has an array for 'c', which the model does not "
                                       r"take as an input; its inputs: a:0, b:0"),
    ([A, B[:3]], None, r"different numbers of examples: x\[0\] \(input a:0\) 4, "
                       r"x\[1\] \(input b:0\) 3"),
    ([A, np.ones((4, 5), np.float32)], None, r"the input b:0 has shape \(5,\) per example; "
                                             r"the model's input b:0 takes \(None, 3\)"),
    ([A, B.astype(np.int32)], None, r"x\[1\] \(input b:0\): x has dtype int32"),
    ([A, B], [0.0], r"baseline has 1 values; the model has 2 inputs \(a:0, b:0\)"),
    ([A, B], [0.0, np.ones(4)], r"baseline for input b:0 has shape \(4,\); expected"),
])
def test_inputs_that_do_not_fit_are_refused_naming_the_input(graph_model, x, baseline, says):
    with pytest.raises(AttributionError, match=says):
        graph_model.attribute("integrated_gradients", x, 0, baseline=baseline, steps=2)


def test_a_keras_model_of_two_inputs_names_its_inputs(forms):
    explainer = forms["keras"][0]
    with pytest.raises(AttributionError, match=r"x has 3 arrays; the model has 2 input\(s\) "
                                               r"\(a, b\)"):
        explainer.attribute("saliency", [A, B, B])
    with pytest.raises(AttributionError, match=r"x has no array for the input b"):
        explainer.attribute("saliency", {"a": A, "bb": B})
    with pytest.raises(AttributionError, match=r"x for the input b has shape \(2,\) per "
                                               r"example; the input of model"):
        explainer.attribute("saliency", [A, B[:, :2]])


def test_the_coverage_report_takes_several_inputs(forms):
    keras_model = forms["keras"][0].model
    for model, kwargs in [(keras_model, dict(x=[A, B])),
                          (_graph_def(), dict(inputs=["a:0", "b:0"], outputs="logits:0"))]:
        report = attribution.coverage_report(model, "deeplift", **kwargs)
        assert report.ok and len(report.inputs) == 2
        assert report.covered == {"Relu": 2}  # one on the path of each input


def test_a_function_of_keywords_takes_a_dict_and_grad_cam_a_tensor_name(forms, graph_model):
    """A dict calls a TF2 function with keywords (its keys, whatever their
    order); a Keras layer's name, which Grad-CAM takes for a model of one
    input, is refused for two, naming what to pass instead."""
    by_keyword = attribution.Explainer(tf.function(lambda b, a: two(a, b)))
    maps = by_keyword.attribute("gradient_input", {"a": A, "b": B}, TARGET).maps
    want = graph_model.attribute("gradient_input", [A, B], TARGET).maps
    np.testing.assert_allclose(maps["a"], want[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(maps["b"], want[1], rtol=RTOL, atol=ATOL)
    keras_model = forms["keras"][0]
    conv = keras_model.model.layers[[type(la).__name__ for la in keras_model.model.layers]
                                    .index("Conv2D")].name
    with pytest.raises(AttributionError, match="has several inputs; give the layer as a "
                                               "tensor name of the frozen graph"):
        keras_model.attribute("grad_cam", [A, B], TARGET, layer=conv)
