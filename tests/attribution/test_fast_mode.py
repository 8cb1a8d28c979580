"""The fast mode (`Explainer(mode="fast")`): every method's maps within a
stated tolerance of the exact mode's, the exact mode unchanged bit for bit,
and the compiled gradient traced once per rule set, not once per method,
batch size or call."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli
from graph_override.attribution import compiled, method_table, shared_weights
from graph_override.errors import AttributionError
from graph_override.estimators import attribution_ops
from graph_override.frozen.tf2 import graph as graph_lib
from graph_override.frozen.tf2.function import FrozenFunction

import methods_nets as nets
from tensorflow.python.eager import context  # pylint: disable=wrong-import-order

# Forward and backward optimized together round differently: on these small
# float32 nets the maps stay within this of the exact mode's (relative to the
# largest |map|); the guide states the differences measured on real models.
TOLERANCE = 1e-5

METHODS = [("saliency", {}), ("gradient_input", {}), ("smoothgrad", {"samples": 3, "seed": 1}),
           ("integrated_gradients", {"steps": 8}), ("grad_cam", {}), ("guided_backprop", {}),
           ("deconvnet", {}), ("eps_lrp", {"epsilon": 0.01}), ("deeplift", {"baseline": 0.1}),
           ("lrp", {"composite": "epsilon_plus"}), ("occlusion", {"patch": 3, "stride": 2})]


@pytest.fixture(scope="module")
def graph_def():
    return nets.cnn_graph_def()


@pytest.fixture(scope="module")
def explainers(graph_def):
    return {mode: attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", mode=mode)
            for mode in ("exact", "fast")}


def test_every_method_is_compared():
    assert sorted(m for m, _ in METHODS) == sorted(method_table.METHODS)


@pytest.mark.parametrize("method,options", METHODS, ids=[m for m, _ in METHODS])
def test_fast_maps_are_the_exact_maps_within_the_tolerance(explainers, method, options):
    x = nets.images(5, seed=3)
    target = np.array([0, 1, 2, 1, 0])
    exact = explainers["exact"].attribute(method, x, target, **options)
    fast = explainers["fast"].attribute(method, x, target, **options)
    scale = np.abs(exact.maps).max()
    assert scale > 0
    assert np.abs(fast.maps - exact.maps).max() <= TOLERANCE * scale
    np.testing.assert_array_equal(fast.targets, exact.targets)
    np.testing.assert_allclose(fast.outputs, exact.outputs, rtol=1e-5, atol=1e-6)
    if exact.delta is not None:
        np.testing.assert_allclose(fast.delta, exact.delta, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", [None, 2, lambda y: y[:, 1] - y[:, 0]],
                         ids=["argmax", "class", "callable"])
def test_fast_mode_takes_every_kind_of_target(explainers, target):
    x = nets.images(3, seed=4)
    exact = explainers["exact"].attribute("guided_backprop", x, target)
    fast = explainers["fast"].attribute("guided_backprop", x, target)
    assert np.abs(fast.maps - exact.maps).max() <= TOLERANCE * np.abs(exact.maps).max()


def test_the_exact_mode_is_the_eager_tape_gradient_bit_for_bit(graph_def, explainers):
    """The default mode is "exact", and its maps are the FrozenFunction's
    eager GradientTape gradient, as before the fast mode existed."""
    assert attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0").mode == "exact"
    x = nets.images(4, seed=5)
    target = np.array([2, 0, 1, 2])
    for method, rules in (("saliency", ()), ("guided_backprop",
                                            method_table.rule_strings("guided_backprop"))):
        function = FrozenFunction(graph_def, ["x:0"], ["logits:0"], rules=list(rules),
                                  on_no_match="ignore")
        tensor = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(tensor)
            scalars = tf.reduce_sum(function(tensor) * tf.one_hot(target, 3), axis=1)
        expected = tape.gradient(scalars, tensor).numpy()
        options = {"abs": False} if method == "saliency" else {}
        maps = explainers["exact"].attribute(method, x, target, **options).maps
        np.testing.assert_array_equal(maps, expected)


def _counting(monkeypatch):
    """Counts the graph imports of FrozenFunction (graph.wrap)."""
    calls = []
    wrap = graph_lib.wrap
    monkeypatch.setattr(graph_lib, "wrap", lambda *a, **k: calls.append(1) or wrap(*a, **k))
    return calls


def test_warm_up_is_paid_once_per_rule_set(graph_def, monkeypatch):
    """Saliency, gradient x input, IG and SmoothGrad share one imported graph
    and one compiled gradient across batch sizes and rows per call; a method
    with rules of its own adds one of each, once."""
    imports = _counting(monkeypatch)
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", mode="fast")
    for n in (1, 4):
        x = nets.images(n, seed=n)
        target = np.arange(n) % 3
        explainer.attribute("saliency", x, target)
        explainer.attribute("gradient_input", x, target)
        explainer.attribute("integrated_gradients", x, target, steps=4, internal_batch_size=8)
        explainer.attribute("smoothgrad", x, target, samples=3, seed=0, internal_batch_size=6)
    plain = explainer.function(x)
    assert compiled.compiled_gradient(explainer, plain).traces == 1
    assert len(imports) == 1
    for n in (2, 3):
        explainer.attribute("guided_backprop", nets.images(n, seed=n), np.arange(n) % 3)
    guided = explainer.function(x, method_table.rule_strings("guided_backprop"))
    assert compiled.compiled_gradient(explainer, guided).traces == 1
    assert len(imports) == 2
    explainer.attribute("guided_backprop", x)  # the argmax: one more trace, no import
    assert compiled.compiled_gradient(explainer, guided).traces == 2
    assert len(imports) == 2


def _functions_holding_weights():
    """The names of the runtime's functions (imported, derived for the
    gradient, compiled) that hold a float32 Const of at least
    `shared_weights.MIN_ELEMENTS` elements."""
    runtime = context.context()
    held = set()
    for name in runtime.list_function_names():
        for node in runtime.get_function_def(name).node_def:
            if node.op == "Const" and node.attr["dtype"].type == 1 and int(np.prod(
                    [d.size for d in node.attr["value"].tensor.tensor_shape.dim])) >= (
                        shared_weights.MIN_ELEMENTS):
                held.add(name)
    return held


def test_rule_sets_share_one_copy_of_the_weights(graph_def):
    """Three rule sets and Grad-CAM's two functions hold no copy of the dense
    layer's weight (288 floats) in any function they import, derive or
    compile: each reads one variable, bitwise the Const. A layer that is a
    weight is refused as in the exact mode."""
    before = _functions_holding_weights()
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", mode="fast")
    x = nets.images(3, seed=9)
    for method in ("saliency", "guided_backprop", "deeplift", "grad_cam"):
        explainer.attribute(method, x, 1)
    assert _functions_holding_weights() - before == set()
    held = [f for v in explainer._functions.values()  # pylint: disable=protected-access
            for f in (v if isinstance(v, tuple) else (v,)) if hasattr(f, "specs")]
    assert len(held) == 5  # three rule sets, Grad-CAM's layer and head
    weights = {id(w): w for f in held for w in f.weights}
    assert len(weights) == 1
    weight = next(iter(weights.values()))
    assert not weight.trainable
    assert weight.numpy().tobytes() == nets.cnn_params(0)["w"].tobytes()
    name = next(n.name for n in graph_def.node if n.op == "Const"
                and len(n.attr["value"].tensor.tensor_shape.dim) == 2)
    for mode in ("exact", "fast"):
        with pytest.raises(AttributionError, match="is not computed from the input x:0"):
            attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0",
                                  mode=mode).attribute("grad_cam", x, layer=name + ":0")


def test_grad_cam_finds_its_default_layer_once(graph_def, monkeypatch):
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    explainer.attribute("grad_cam", nets.images(2, seed=0))
    imports = []
    original = tf.compat.v1.import_graph_def
    monkeypatch.setattr(tf.compat.v1, "import_graph_def",
                        lambda *a, **k: imports.append(1) or original(*a, **k))
    explainer.attribute("grad_cam", nets.images(3, seed=1))
    assert imports == []


def test_mode_is_checked(graph_def, explainers):
    with pytest.raises(AttributionError, match=r"mode='quick': expected 'exact'"):
        attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", mode="quick")
    with pytest.raises(AttributionError, match="another mode="):
        attribution.attribute(explainers["exact"], "saliency", nets.images(1, 0), mode="fast")
    result = attribution.attribute(explainers["fast"], "saliency", nets.images(1, 0),
                                   mode="fast")
    assert result.maps.shape == (1, 8, 8, 1)


def test_explain_command_takes_mode(graph_def, tmp_path, capsys):
    model, data = tmp_path / "m.pb", tmp_path / "x.npy"
    model.write_bytes(graph_def.SerializeToString())
    x = nets.images(3, seed=6)
    np.save(data, x)
    for mode in ("exact", "fast"):
        assert cli.main(["explain", str(model), "--inputs", "x:0", "--outputs", "logits:0",
                         "--method", "deeplift", "--data", str(data), "--mode", mode,
                         "-o", str(tmp_path / (mode + ".npy"))]) == 0
    exact, fast = np.load(tmp_path / "exact.npy"), np.load(tmp_path / "fast.npy")
    assert np.abs(fast - exact).max() <= TOLERANCE * np.abs(exact).max()
    assert "wrote %s: deeplift maps of 3 example(s)" % (tmp_path / "fast.npy") in (
        capsys.readouterr().out)


def test_grad_cam_fast_mode_compiles_the_layer_and_the_head_once(graph_def):
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", mode="fast")
    exact = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    for n in (3, 5):
        x = nets.images(n, seed=n)
        fast_maps = explainer.attribute("grad_cam", x, 2).maps
        exact_maps = exact.attribute("grad_cam", x, 2).maps
        assert np.abs(exact_maps).max() > 0
        assert np.abs(fast_maps - exact_maps).max() <= TOLERANCE * np.abs(exact_maps).max()
    gradients = [v for v in explainer._functions.values()  # pylint: disable=protected-access
                 if isinstance(v, compiled.CompiledGradient)]
    assert [g.traces for g in gradients] == [1]


def test_one_call_functions_take_mode(graph_def):
    x = nets.images(2, seed=8)
    fast = attribution.guided_backprop(graph_def, x, 1, inputs="x:0", outputs="logits:0",
                                       mode="fast")
    exact = attribution.guided_backprop(graph_def, x, 1, inputs="x:0", outputs="logits:0")
    assert np.abs(fast.maps - exact.maps).max() <= TOLERANCE * np.abs(exact.maps).max()
    with pytest.raises(AttributionError, match="mode='slow'"):
        attribution.saliency(graph_def, x, inputs="x:0", outputs="logits:0", mode="slow")


@pytest.mark.parametrize("method", ["gradient_input", "deeplift"])
def test_fast_mode_explains_a_model_of_several_inputs(method):
    """Two inputs (a list in, a map per input out) in one compiled function."""
    rng = np.random.RandomState(0)
    w_a, w_b = rng.randn(6, 3).astype("float32"), rng.randn(2, 3).astype("float32")

    def two(a, b):
        return tf.matmul(tf.nn.relu(tf.reshape(a, [-1, 6])), w_a) + tf.matmul(tf.tanh(b), w_b)

    a, b = rng.randn(4, 2, 3).astype("float32"), rng.randn(4, 2).astype("float32")
    target = np.array([0, 2, 1, 2])
    exact = attribution.Explainer(two).attribute(method, [a, b], target)
    fast = attribution.Explainer(two, mode="fast").attribute(method, [a, b], target)
    assert len(fast.maps) == 2
    for got, want in zip(fast.maps, exact.maps):
        assert np.abs(want).max() > 0
        assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_fast_mode_builds_eps_lrp_from_separate_ops(graph_def, monkeypatch):
    """Traced with the model, eps_lrp's gradient is built from separate ops
    (`compiled.SEPARATE_RULES`: its XLA-compiled call was slower there),
    DeepLIFT's rescale rule stays compiled; the exact mode compiles both.
    The maps of both modes are checked above: the same ops either way."""
    if not attribution_ops._start_xla_quietly():  # pylint: disable=protected-access
        pytest.skip("this TensorFlow has no XLA: every rule is built from separate ops")
    built = []
    real = attribution_ops.fused_gradient

    def spy(spec, *args):
        fused = real(spec, *args)
        built.append((spec.name, fused is not None))
        return fused

    monkeypatch.setattr(attribution_ops, "fused_gradient", spy)
    x = nets.images(2, seed=4)
    for mode in ("fast", "exact"):
        explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0",
                                          mode=mode)
        for method in ("eps_lrp", "deeplift"):
            del built[:]
            explainer.attribute(method, x, 1)
            rule = "eps_lrp" if method == "eps_lrp" else "deeplift_rescale"
            fused = {f for name, f in built if name == rule}
            assert fused == {mode == "exact" or method == "deeplift"}
    with attribution_ops.separate_ops(["deeplift_rescale"]):
        with attribution_ops.separate_ops(["eps_lrp"]):
            assert attribution_ops._separate.rules == {"eps_lrp", "deeplift_rescale"}  # pylint: disable=protected-access
        assert attribution_ops._separate.rules == {"deeplift_rescale"}  # pylint: disable=protected-access
    assert attribution_ops._separate.rules == frozenset()  # pylint: disable=protected-access
