"""`Explainer(keep_functions=N)`: at most N rule sets' functions kept after a call, the
least recently used let go (TensorFlow's copies of its weights with it), and
a rule set made again gives the same maps, bit for bit."""

import gc

import numpy as np
import pytest

from graph_override import attribution
from graph_override.attribution import compiled, shared_weights
from graph_override.errors import AttributionError

import methods_nets as nets
from tensorflow.python.eager import context  # pylint: disable=wrong-import-order

METHODS = ("guided_backprop", "deconvnet", "eps_lrp", "deeplift", "grad_cam", "saliency",
           "lrp")


@pytest.fixture(scope="module")
def graph_def():
    return nets.cnn_graph_def()


def _explainer(graph_def, **kwargs):
    return attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0", **kwargs)


def _held_copies():
    """How many functions of the runtime (imported, derived for the gradient,
    optimized) hold the dense layer's weight (288 floats) as a Const."""
    gc.collect()
    runtime = context.context()
    count = 0
    for name in runtime.list_function_names():
        count += any(
            node.op == "Const" and node.attr["dtype"].type == 1 and int(np.prod(
                [d.size for d in node.attr["value"].tensor.tensor_shape.dim])) >= (
                    shared_weights.MIN_ELEMENTS)
            for node in runtime.get_function_def(name).node_def)
    return count


def _held(explainer):
    """The rule sets' functions the Explainer holds."""
    return [v for v in explainer._functions.values()  # pylint: disable=protected-access
            if hasattr(v, "specs") or (isinstance(v, tuple) and any(
                hasattr(f, "specs") for f in v))]


@pytest.mark.parametrize("keep", [0, -1, True, 1.5, "2"])
def test_keep_functions_is_checked(graph_def, keep):
    with pytest.raises(AttributionError, match=r"keep_functions=.*expected None"):
        _explainer(graph_def, keep_functions=keep)


def test_the_least_recently_used_rule_sets_go_and_come_back_bit_for_bit(graph_def):
    """keep_functions=2 over seven methods (six rule sets: saliency's is the
    unpatched one, which every call's input check reads, Grad-CAM's a pair,
    LRP's its prepared graph) keeps the two the last call used, and the
    runtime's functions that hold the weights are then those of an
    Explainer that ran only saliency and LRP: the others' were removed, not
    only forgotten. Each method's maps, its rule set made again, are the
    unbounded Explainer's bits."""
    x = nets.images(3, seed=2)
    target = np.array([0, 2, 1])
    before = _held_copies()
    last_two = _explainer(graph_def)  # the rule sets the last two calls used
    last_two.attribute("saliency", x, target)
    last_two.attribute("lrp", x, target)
    assert len(_held(last_two)) == 2
    kept = _held_copies() - before
    assert kept >= 2
    del last_two
    assert _held_copies() == before  # an Explainer let go takes its copies along
    bounded = _explainer(graph_def, keep_functions=2)
    maps = {m: bounded.attribute(m, x, target).maps for m in METHODS}
    assert len(_held(bounded)) == 2
    assert _held_copies() - before == kept
    again = {m: bounded.attribute(m, x, target).maps for m in reversed(METHODS)}
    unbounded = _explainer(graph_def)
    for method in METHODS:
        want = unbounded.attribute(method, x, target).maps
        assert np.abs(want).max() > 0
        assert maps[method].tobytes() == want.tobytes(), method
        assert again[method].tobytes() == want.tobytes(), method
    assert len(_held(unbounded)) == 7
    assert _held_copies() - before > 3 * kept


def test_the_fast_mode_lets_the_compiled_gradient_go_with_its_function(graph_def):
    """A compiled gradient is made for one function: it goes with it, and the
    rule set made again is compiled again (traced once more)."""
    x = nets.images(2, seed=4)
    explainer = _explainer(graph_def, mode="fast", keep_functions=1)
    first = explainer.attribute("guided_backprop", x, 1).maps
    explainer.attribute("deconvnet", x, 1)
    gradients = [v for v in explainer._functions.values()  # pylint: disable=protected-access
                 if isinstance(v, compiled.CompiledGradient)]
    assert len(gradients) == 1 and len(_held(explainer)) == 1
    again = explainer.attribute("guided_backprop", x, 1).maps
    assert again.tobytes() == first.tobytes()
    gradients = [v for v in explainer._functions.values()  # pylint: disable=protected-access
                 if isinstance(v, compiled.CompiledGradient)]
    assert [g.traces for g in gradients] == [1]


def test_a_call_keeps_every_function_it_uses(graph_def):
    """keep_functions=1: Grad-CAM's call reads the unpatched function and its
    own pair, and keeps both, so a second batch makes nothing again."""
    explainer = _explainer(graph_def, keep_functions=1)
    explainer.attribute("guided_backprop", nets.images(2, seed=5), 0)
    for n in (2, 3):
        explainer.attribute("grad_cam", nets.images(n, seed=n), 2)
        assert len(_held(explainer)) == 2
    assert explainer._kept.released == 1  # pylint: disable=protected-access
