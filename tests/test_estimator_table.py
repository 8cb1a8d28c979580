"""The estimator table (graph_override/estimators/table.py) is the one place
an estimator is defined: everything else is derived from it, a name it does
not hold is an error everywhere, and adding one record (the recipe of
docs/architecture.md) is all it takes to add an estimator."""

import inspect
import os
import pathlib
import shutil
import sys
import textwrap

import pytest

import warm_python
import tensorflow as tf

from graph_override import _docs, _family, estimators, overrides, registry, stopgrad, tf2
from graph_override.commands import demo
from graph_override.errors import UnknownEstimatorError

ROOT = pathlib.Path(__file__).resolve().parent.parent



def recipe_record():
    """The record docs/architecture.md's recipe adds ("Where to add things",
    "An estimator"): its python block."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    recipe = text[text.index("**An estimator.**"):text.index("**A migration idiom.**")]
    block = recipe[recipe.index("```python\n") + len("```python\n"):]
    return block[:block.index("```")]


@pytest.mark.parametrize("call", [
    lambda: estimators.spec("ste_sing"),
    lambda: estimators.normalize("ste_sing", {}),
    lambda: estimators.forward("ste_sing", tf.constant([1.0]), {}),
    lambda: estimators.gradient("ste_sing", tf.constant([1.0]), tf.constant([1.0]), {}),
    lambda: estimators.gradient_multiplier("ste_sing", tf.constant([1.0]), {}),
    lambda: estimators.registry_gradient("ste_sing", {}),
    lambda: overrides.gradient_name("ste_sing"),
    lambda: tf2.Estimator("ste_sing"),
    lambda: _docs.docstring("ste_sing", "tf2"),
], ids=["spec", "normalize", "forward", "gradient", "multiplier", "registry_gradient",
        "gradient_name", "Estimator", "docstring"])
def test_an_unknown_name_raises_everywhere_and_suggests_the_nearest(call):
    with pytest.raises(UnknownEstimatorError, match="'ste_sing'.*Did you mean 'ste_sign'"):
        call()


@pytest.mark.parametrize("apply", [overrides._apply, stopgrad._apply, tf2._apply],  # pylint: disable=protected-access
                         ids=["overrides", "stopgrad", "tf2"])
def test_a_family_never_falls_through_to_a_default(apply):
    with tf.Graph().as_default():
        # Not "ste_ceil": the architecture recipe's example, which someone
        # following the recipe adds for real.
        with pytest.raises(UnknownEstimatorError, match="ste_not_in_the_table"):
            apply("ste_not_in_the_table", tf.constant([0.5]), None, {})


def test_the_families_are_the_table():
    names = set(estimators.ESTIMATORS)
    assert set(_family.ESTIMATOR_FUNCTIONS) == names
    assert set(tf2.__all__) == names | {"Estimator", "OpWithGradient", "allow_op_functions",
                                        "op_with_gradient"}
    assert set(overrides.__all__) == names | {"gradient_name"}
    assert set(stopgrad.__all__) == names
    for name, spec in estimators.ESTIMATORS.items():
        sig = inspect.signature(getattr(tf2, name))
        want = ["x"] + [p.name for p in spec.params] + ["name"]
        assert list(sig.parameters) == want, name
        for p in spec.params:
            default = sig.parameters[p.name].default
            assert default is (inspect.Parameter.empty if p.required else p.default), name
        assert inspect.getdoc(getattr(stopgrad, name)).startswith(spec.doc.summary)
    with pytest.raises(TypeError):
        estimators.ESTIMATORS["ste_not_in_the_table"] = estimators.ESTIMATORS["ste_round"]


def test_the_families_guide_shows_the_table_of_the_records():
    page = (ROOT / "docs" / "guide" / "families.md").read_text()
    assert estimators.table_markdown() in page
    assert estimators.table_markdown() in estimators.__doc__


def test_the_demo_checks_every_estimator():
    assert [row[0] for row in demo._families_table()] == list(estimators.ESTIMATORS)  # pylint: disable=protected-access


def test_a_record_whose_forward_is_not_one_op_needs_a_build():
    """Without a build, the overrides family puts the forward under the
    override map; a forward of several ops of that type would give each of
    them the estimator's gradient, so it is refused."""
    spec = estimators.ESTIMATORS["ste_round"]._replace(
        name="double_round", forward=lambda x, p: tf.round(tf.round(x) * 0.5))
    with tf.Graph().as_default():
        x = tf.constant([0.5, 1.5])
        with pytest.raises(TypeError, match="double_round.*not one Round op on x.*give its record a build"):
            overrides._build(spec, x, {}, "Identity")  # pylint: disable=protected-access


def test_a_parameter_without_default_is_required_everywhere():
    with pytest.raises(TypeError, match="missing required parameter 'clip_value_max'"):
        estimators.normalize("clip_gradient", {"clip_value_min": -1.0})
    assert registry.estimator_suggestions("clip_gradien")[0] == "clip_gradient"


# ------------------------------------------------- adding an estimator: the recipe

_CHECK = textwrap.dedent('''
    import inspect, json, os, subprocess, sys
    import numpy as np
    import tensorflow as tf
    import keras
    import graph_override
    from graph_override import cli, estimators, frozen, overrides, stopgrad, testing, tf2
    assert graph_override.__file__.startswith(sys.argv[1]), graph_override.__file__
    out = {}
    x = np.array([-2.5, -1.5, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5], np.float32)
    dy = np.linspace(-1.0, 1.0, x.size).astype(np.float32)
    want = np.ceil(x)
    for fam, mode in [(overrides, "graph"), (stopgrad, "graph"), (stopgrad, "eager"),
                      (stopgrad, "function"), (tf2, "graph"), (tf2, "eager"), (tf2, "function")]:
        for dtype in (np.float16, np.float32, np.float64):
            r = testing.evaluate(fam.ste_ceil, x.astype(dtype), mode, upstream=dy.astype(dtype))
            assert r.outputs.dtype == dtype
            np.testing.assert_array_equal(r.outputs, want.astype(dtype), err_msg=fam.__name__)
            assert np.array_equal(np.signbit(r.outputs), np.signbit(want)), (fam, mode)
            np.testing.assert_array_equal(r.gradients[0], dy.astype(dtype))
        assert "ste_ceil" in fam.__all__
        assert str(inspect.signature(fam.ste_ceil)) == "(x, name=None)"
        assert "Forward:  q(x) = ceil(x)" in fam.ste_ceil.__doc__
    # The overrides family re-routes the Ceil op itself.
    with tf.Graph().as_default() as g:
        overrides.ste_ceil(tf.constant(x))
        ceil = [op for op in g.get_operations() if op.type == "Ceil"]
        out["attr"] = ceil[0].get_attr("_gradient_op_type").decode()
    # The docs: the docstring examples run, the guide's table has its row.
    import doctest
    for fam in (overrides, stopgrad, tf2):
        test = doctest.DocTestFinder().find(fam.ste_ceil, "ste_ceil", globs={})[0]
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.summarize(verbose=False).failed == 0, fam
    out["row"] = [r for r in estimators.table_markdown().splitlines() if "ste_ceil" in r]
    # graph-override patch --map Ceil=ste_ceil, with and without --portable.
    folder = sys.argv[2]
    with tf.Graph().as_default() as g:
        t = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        tf.math.ceil(t * 1.0, name="y")
    frozen.save(g.as_graph_def(), os.path.join(folder, "model.pb"))
    for extra in ([], ["--portable"]):
        target = os.path.join(folder, "out%d.pb" % len(extra))
        code = cli.main(["patch", os.path.join(folder, "model.pb"), "-o", target,
                         "--map", "Ceil=ste_ceil"] + extra)
        assert code == 0, code
        graph_def = frozen.load(target)
        with tf.Graph().as_default():
            if extra:  # plain TensorFlow differentiates the portable form
                tf.compat.v1.import_graph_def(graph_def, name="")
            else:
                frozen.import_graph_def(graph_def, name="")
            g = tf.compat.v1.get_default_graph()
            xt, yt = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("y:0")
            dx, = tf.gradients(yt, xt, grad_ys=tf.constant(dy))
            with tf.compat.v1.Session() as sess:
                y_value, dx_value = sess.run([yt, dx], {xt: x})
        np.testing.assert_array_equal(y_value, want)
        np.testing.assert_array_equal(dx_value, dy)
        out["attrs%d" % len(extra)] = sorted(
            n.attr["_gradient_op_type"].s.decode() for n in graph_def.node
            if "_gradient_op_type" in n.attr)
    # Keras saves tf2.Estimator("ste_ceil") by name and loads it.
    inputs = keras.Input((x.size,))
    layer = keras.layers.Dense(x.size, activation=tf2.Estimator("ste_ceil"),
                               kernel_initializer="identity", use_bias=False)
    model = keras.Model(inputs, layer(inputs))
    path = os.path.join(folder, "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.layers[-1].activation == tf2.Estimator("ste_ceil")
    np.testing.assert_array_equal(loaded(x[None]).numpy()[0], want)
    print(json.dumps(out))
''')


@pytest.mark.slow
def test_adding_an_estimator_is_one_record(tmp_path):
    """docs/architecture.md's recipe, followed with a ste_ceil: one record in
    a copy of the package, and every family, `--map` (also --portable),
    Keras saving and the docs have it, agreeing with numpy's ceil."""
    package = tmp_path / "src" / "graph_override"
    shutil.copytree(ROOT / "graph_override", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "estimators" / "table.py", "a") as table:
        table.write("\n\n" + recipe_record())
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "src"), TF_CPP_MIN_LOG_LEVEL="3")
    proc = warm_python.run([sys.executable, "-c", _CHECK, str(package), str(work)],
                          env=env, cwd=str(work), capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json  # pylint: disable=import-outside-toplevel
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["attr"] == "graph_override.ste_ceil()"
    assert out["attrs0"] == ["graph_override.ste_ceil()"]
    assert out["attrs1"] == []  # the portable form names no gradient
    assert out["row"] == ["| `ste_ceil(x)` | ceil | dy |"]
