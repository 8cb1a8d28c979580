"""A method is one record (graph_override/attribution/method_table.py):
its numpy reference here, its case across the model forms, the guide's
table, the flags of `graph-override explain` and the one-call functions are
read from the records, and adding one record (the recipe of
docs/architecture.md, "An attribution method") is all it takes to add a
method."""

import inspect
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen
from graph_override.attribution import method_record, method_table, methods
from graph_override.commands import _explain_options
from graph_override.errors import AttributionError

import test_methods_forms

ROOT = pathlib.Path(__file__).resolve().parents[2]

# x [N, 2, 2, 3] -> 1x1 Conv2D (W1) + B1 -> Relu "h" [N, 2, 2, 4] -> mean over
# height and width -> MatMul W2 + B2 -> logits [N, 3]; unit 1 dead (bias -5).
RNG = np.random.RandomState(5)
W1 = RNG.randn(3, 4).astype(np.float32)
B1 = np.array([0.5, -5.0, 0.0, 0.25], np.float32)
W2 = RNG.randn(4, 3).astype(np.float32)
B2 = np.array([0.1, -0.2, 0.0], np.float32)
X = RNG.randn(3, 2, 2, 3).astype(np.float32)
TARGET = np.array([0, 2, 1])


def _graph_def():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 3], name="x")
        pre = tf.nn.conv2d(x, tf.constant(W1[None, None]), 1, "VALID") + B1
        h = tf.nn.relu(pre, name="h")
        tf.identity(tf.matmul(tf.reduce_mean(h, axis=[1, 2]), W2) + B2, name="logits")
    return g.as_graph_def()


def _gradient(x, target, rule="plain", reference=None, epsilon=None):
    """d logits[target] / dx in float64, the Relu's gradient replaced by `rule`."""
    x = x.astype(np.float64)
    pre = x @ W1 + B1
    dh = np.broadcast_to((W2[:, target].T / 4.0)[:, None, None, :], pre.shape)
    if rule == "plain":
        dpre = dh * (pre > 0)
    elif rule == "guided":
        dpre = dh * (dh > 0) * (pre > 0)
    elif rule == "deconv":
        dpre = dh * (dh > 0)
    elif rule == "eps":
        dpre = dh * np.maximum(pre, 0) / (pre + epsilon * np.where(pre >= 0, 1.0, -1.0))
    else:  # DeepLIFT's rescale against the reference's pre-activations
        ref = reference.astype(np.float64) @ W1 + B1
        moved = np.abs(pre - ref) >= 1e-10
        slope = (np.maximum(pre, 0) - np.maximum(ref, 0)) / np.where(moved, pre - ref, 1.0)
        dpre = dh * np.where(moved, slope, pre > 0)
    return dpre @ W1.T


def _integrated(x, target, steps):
    k = np.arange(steps)
    weights = np.full(steps, 1.0 / (steps - 1))
    weights[[0, -1]] /= 2.0
    total = sum(w * _gradient((a * x).astype(np.float32), target)
                for a, w in zip(k / (steps - 1), weights))
    return x * total


def _smoothgrad(x, target, samples, seed):
    flat = x.reshape(len(x), -1)
    sigma = (0.15 * (flat.max(axis=1) - flat.min(axis=1)))[:, None, None, None]
    rng = np.random.default_rng(seed)
    return sum(_gradient((x + rng.normal(size=x.shape) * sigma).astype(np.float32), target)
               for _ in range(samples)) / samples


def _grad_cam(x, target):
    h = np.maximum(x.astype(np.float64) @ W1 + B1, 0)
    return np.maximum((h * (W2[:, target].T / 4.0)[:, None, None, :]).sum(axis=-1), 0)


# One numpy reference per method record: reference(x, target, **options) ->
# maps, with the options of its case (CASES of test_methods_forms.py). A
# record without one fails test_every_method_has_a_numpy_reference_and_cases.
NUMPY_REFERENCES = {
    "saliency": lambda x, t: np.abs(_gradient(x, t)),
    "gradient_input": lambda x, t: _gradient(x, t) * x,
    "integrated_gradients": lambda x, t, steps: _integrated(x, t, steps),
    "smoothgrad": lambda x, t, samples, seed: _smoothgrad(x, t, samples, seed),
    "grad_cam": lambda x, t: _grad_cam(x, t),
    "guided_backprop": lambda x, t: _gradient(x, t, "guided"),
    "deconvnet": lambda x, t: _gradient(x, t, "deconv"),
    "eps_lrp": lambda x, t, epsilon: _gradient(x, t, "eps", epsilon=epsilon) * x,
    "deeplift": lambda x, t, baseline: (x - baseline) * _gradient(
        x, t, "rescale", reference=np.full_like(x, baseline)),
}


def untested():
    """{method: what its tests lack}: the records without a numpy reference
    here or a case in test_methods_forms.CASES."""
    out = {}
    for name in method_table.METHODS:
        lacks = [what for what, table in (("a numpy reference", NUMPY_REFERENCES),
                                          ("a case across the forms", test_methods_forms.CASES))
                 if name not in table]
        if lacks:
            out[name] = " and ".join(lacks)
    return out


def test_every_method_has_a_numpy_reference_and_cases():
    assert untested() == {}
    assert set(NUMPY_REFERENCES) == set(method_table.METHODS)
    assert set(test_methods_forms.CASES) == set(method_table.METHODS)


@pytest.fixture(scope="module")
def explainer():
    return attribution.Explainer(_graph_def(), inputs="x", outputs="logits")


@pytest.mark.parametrize("method", list(method_table.METHODS))
def test_every_method_equals_its_numpy_reference(explainer, method):
    options = dict(test_methods_forms.CASES[method])
    result = explainer.attribute(method, X, TARGET, **options)
    expected = NUMPY_REFERENCES[method](X, TARGET, **options)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(result.maps, expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(result.targets, TARGET)


def test_the_guide_shows_the_table_of_the_records():
    page = (ROOT / "docs" / "guide" / "attribution.md").read_text()
    assert method_table.table_markdown() in page
    rows = method_table.table_markdown().splitlines()[2:]
    assert [r.split("`")[1] for r in rows] == list(method_table.METHODS)
    assert "| `eps_lrp` |" in rows[7] and "`--epsilon`" in rows[7]


def test_the_flags_of_explain_are_the_records_options():
    flags = _explain_options.METHOD_FLAGS
    assert flags == _explain_options.method_flags()
    want = [(o.flag.name, o.name, name) for name, spec in method_table.METHODS.items()
            for o in spec.options if o.flag is not None]
    assert [(f, k, m) for f, k, ms in flags for m in ms] == sorted(
        want, key=lambda w: [f for f, _, _ in flags].index(w[0]))
    assert ("--epsilon", "epsilon", ("eps_lrp",)) in flags


def test_a_record_is_checked_when_defined():
    for kwargs, says in [
            (dict(name="saliency"), "defined twice"),
            (dict(name="not valid"), "not a Python identifier"),
            (dict(options=[method_record.Option("x", 1, "")]), "options must be distinct"),
            (dict(batch="pairs"), "batch='pairs' is not one of"),
            (dict(options=[method_record.Option("epsilon", 1.0, "", rule=True)]),
             "no rule of it takes them")]:
        args = dict(dict(name="toy_method", function=methods.saliency, summary="a toy"),
                    **kwargs)
        with pytest.raises(ValueError, match=says):
            method_record.define(args.pop("name"), **args)
    assert "toy_method" not in method_table.METHODS


# ------------------------------------------------- adding a method: the recipe

def recipe_block():
    """The python block of docs/architecture.md's recipe ("Where to add
    things", "An attribution method")."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    recipe = text[text.index("**An attribution method.**"):text.index("**A migration idiom.**")]
    block = recipe[recipe.index("```python\n") + len("```python\n"):]
    return block[:block.index("```")]


@pytest.fixture
def gradient_power():
    """The recipe's record, defined in process (the names of method_table
    and `methods` in scope, as in the package), removed afterwards."""
    namespace = dict(vars(method_table), methods=methods)
    exec(compile(recipe_block(), "docs/architecture.md", "exec"), namespace)  # pylint: disable=exec-used
    try:
        yield method_table.METHODS["gradient_power"]
    finally:
        del method_record._TABLE["gradient_power"]  # pylint: disable=protected-access


def test_adding_a_method_is_one_record(gradient_power, explainer, tmp_path, capsys,
                                       monkeypatch):
    grads = _gradient(X, TARGET)
    # the API: attribute, the Explainer, the one-call function and its signature
    np.testing.assert_allclose(explainer.attribute("gradient_power", X, TARGET).maps,
                               grads ** 2, rtol=2e-5, atol=1e-9)
    function = attribution.gradient_power
    assert "power=2" in str(inspect.signature(function))
    assert function.__doc__.startswith("The gradient to a power")
    np.testing.assert_allclose(function(explainer, X, TARGET, power=3).maps, grads ** 3,
                               rtol=2e-5, atol=1e-9)
    assert "gradient_power" in dir(attribution)
    with pytest.raises(AttributionError, match="gradient_power takes no option epsilon; "
                                               "its options: power"):
        explainer.attribute("gradient_power", X, epsilon=0.1)
    # the command line: its flag, passed on, and refused with another method
    assert ("--power", "power", ("gradient_power",)) in _explain_options.METHOD_FLAGS
    monkeypatch.chdir(tmp_path)
    frozen.save(_graph_def(), "model.pb")
    np.save("x.npy", X)
    argv = ["explain", "model.pb", "--inputs", "x:0", "--outputs", "logits:0",
            "--data", "x.npy", "--target", "0,2,1"]
    assert cli.main(argv + ["--method", "gradient_power", "--power", "3", "-o", "m.npy"]) == 0
    np.testing.assert_allclose(np.load("m.npy"), grads ** 3, rtol=2e-5, atol=1e-9)
    assert cli.main(argv + ["--method", "saliency", "--power", "3", "-o", "s.npy"]) == 2
    assert "--power: only gradient_power takes it, not saliency" in capsys.readouterr().err
    # the docs: the table has its row, so the guide's check fails until pasted
    row = "| `gradient_power` | the gradient to a power (an example of the recipe) | " \
          "none: the model's gradient | `power=2` (`--power`) | x |"
    assert method_table.table_markdown().splitlines()[-1] == row
    page = (ROOT / "docs" / "guide" / "attribution.md").read_text()
    assert method_table.table_markdown() not in page
    # the tests' lists: it has no numpy reference and no case yet
    assert untested() == {"gradient_power": "a numpy reference and a case across the forms"}
    assert "gradient_power" in [m for m in attribution.METHODS if m != "grad_cam"]
