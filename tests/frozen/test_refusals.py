"""Rules that cannot work on the nodes they select are refused up front, in
`patch`, `make_portable` and the CLI, and no rewritten graph that TensorFlow
would not import is returned."""

import numpy as np
import pytest
import tensorflow as tf

import frozen_graphs as fg
from graph_override import cli, frozen, tf2
from graph_override.frozen.patching import verify


@pytest.mark.parametrize("apply", [frozen.patch, frozen.make_portable])
def test_estimator_on_matmul_is_refused_naming_the_shapes(apply):
    graph_def, _, _ = fg.matmul()
    with pytest.raises(frozen.RuleError) as e:
        apply(graph_def, "MatMul=scale_gradient:scale=0.5", allow_replace=True)
    message = str(e.value)
    assert "'dense/MatMul' (op MatMul)" in message
    assert "(None, 2)" in message and "(None, 3)" in message
    assert "select such a node instead" in message


@pytest.mark.parametrize("apply", [frozen.patch, frozen.make_portable])
def test_estimator_on_one_hot_is_refused_naming_the_dtypes(apply):
    graph_def, _, _ = fg.one_hot()
    with pytest.raises(frozen.RuleError, match=r"'onehot' \(op OneHot\): its output is "
                                               r"float32 but its first input is int32"):
        apply(graph_def, "OneHot=ste_round")


def test_portable_matmul_would_not_import():
    """What the refusal prevents: with the shape check out of the way, the
    stop_gradient form of a MatMul does not import, and the import check
    after the rewrite refuses it."""
    graph_def, _, _ = fg.matmul()
    same_shape = verify._SAME_SHAPE_OPS  # pylint: disable=protected-access
    try:
        verify._SAME_SHAPE_OPS = same_shape | {"MatMul"}  # pylint: disable=protected-access
        with pytest.raises(frozen.RuleError, match="does not import into TensorFlow"):
            frozen.make_portable(graph_def, "MatMul=ste_round")
    finally:
        verify._SAME_SHAPE_OPS = same_shape  # pylint: disable=protected-access


@pytest.mark.parametrize("rule", ["MatMul=ste_round", "MatMul=scale_gradient:scale=0.5"])
def test_cli_refuses_and_writes_nothing(tmp_path, capsys, rule):
    graph_def, _, _ = fg.matmul()
    model = tmp_path / "model.pb"
    frozen.save(graph_def, model)
    for extra in ([], ["--portable"]):
        code = cli.main(["patch", str(model), "-o", str(tmp_path / "out.pb"), "--map", rule,
                         "--allow-replace"] + extra)
        _, err = capsys.readouterr()
        assert code == 1 and "dense/MatMul" in err and "first input" in err
        assert not (tmp_path / "out.pb").exists()


@pytest.mark.parametrize("portable", [False, True])
def test_fake_quant_takes_an_estimator(portable):
    """FakeQuant keeps its input's shape and dtype: ste_round passes dy
    through, also outside [min, max] where FakeQuant's own gradient is 0."""
    graph_def, _, _ = fg.fake_quant()
    x = np.array([-3.0, -0.5, 0.0, 0.4, 0.9, 2.5], np.float32)
    apply = frozen.make_portable if portable else frozen.patch
    fixed, report = apply(graph_def, "FakeQuantWithMinMaxVars=ste_round")
    assert [c.node for c in report.changes] == ["quant"]
    importer = None if portable else frozen.import_graph_def
    y0, dx0 = fg.run(graph_def, x)
    y1, dx1 = fg.run(fixed, x, importer=importer)
    np.testing.assert_array_equal(y1, y0)
    np.testing.assert_array_equal(dx0, [0, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(dx1, np.ones_like(x))


@pytest.mark.parametrize("apply, rule", [
    (frozen.patch, "Mul=scale_gradient:scale=0.5"),
    (frozen.patch, "Mul=flip_gradient"),
    (frozen.patch, "Mul=clip_gradient:clip_value_min=-1,clip_value_max=1"),
    (frozen.make_portable, "Mul=scale_gradient:scale=0.5"),
    (frozen.make_portable, "Mul=flip_gradient:scale=2"),
])
def test_gradient_estimators_on_a_product_need_allow_replace(apply, rule):
    graph_def, _, _ = fg.product()
    with pytest.raises(frozen.RuleError, match=r"node 'c' \(op Mul\) would replace its "
                                               r"gradient.*allow_replace=True"):
        apply(graph_def, rule)


@pytest.mark.parametrize("portable", [False, True])
def test_scale_gradient_on_a_product_replaces_it_when_allowed(portable):
    """c = a * b: with allow_replace dc/da is the scale itself (0.5), not
    0.5 * b; on the Identity after the product it is 0.5 * b, as the tf2
    family gives."""
    graph_def, _, _ = fg.product()
    apply = frozen.make_portable if portable else frozen.patch
    importer = None if portable else frozen.import_graph_def
    x = np.array([1.0, 2.0, 3.0], np.float32)
    replaced, _ = apply(graph_def, "Mul=scale_gradient:scale=0.5", allow_replace=True)
    _, dx = fg.run(replaced, x, importer=importer)
    np.testing.assert_array_equal(dx, [0.5, 0.5, 0.5])
    scaled, _ = apply(graph_def, frozen.parse_rule("Identity=scale_gradient:scale=0.5",
                                                   name_regex="^y$"))
    _, dx = fg.run(scaled, x, importer=importer)
    b = np.array([3.0, -2.0, 0.0], np.float32)
    with tf.GradientTape() as tape:
        xt = tf.constant(x)
        tape.watch(xt)
        ref = tape.gradient(tf2.scale_gradient(xt * b, 0.5), xt)
    np.testing.assert_array_equal(dx, ref.numpy())
    np.testing.assert_array_equal(dx, 0.5 * b)
