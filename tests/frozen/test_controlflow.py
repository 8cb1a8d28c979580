"""TF1 while loops (control flow v1) in frozen graphs: TensorFlow cannot
differentiate them after import, so inspect reports them (exit 1) and patch
says so; TF1 tf.cond differentiates and is not reported."""

import json

import numpy as np
import pytest
import tensorflow as tf

import frozen_graphs as fg
from graph_override import cli, frozen

OUTER_CONTEXT = "'NoneType' object has no attribute 'outer_context'"


@pytest.fixture(scope="module")
def v1_while():
    return fg.v1_while()[0]


@pytest.fixture(scope="module")
def lowered():
    """A tf.function's while loop as convert_variables_to_constants_v2
    freezes it by default: lowered to TF1 control flow."""
    return fg.frozen_tf_function()


@pytest.mark.parametrize("patched", [False, True])
def test_tensorflow_cannot_differentiate_a_v1_loop_after_import(v1_while, patched):
    graph_def = frozen.patch(v1_while, "Sign=ste_sign")[0] if patched else v1_while
    with pytest.raises(AttributeError, match=OUTER_CONTEXT):
        fg.run(graph_def, importer=frozen.import_graph_def)


def test_inspect_reports_the_loop(v1_while, lowered):
    report = frozen.inspect(v1_while)
    assert report.v1_loops == [{"loop": "while", "exits": ["while/Exit", "while/Exit_1"],
                                "nodes": 7}]
    assert not report.ok and report.gradient_failures == []
    text = report.format()
    assert "every differentiable node has a gradient" not in text
    assert "1 TF1 while loop(s)" in text and "lower_control_flow=False" in text
    loops = frozen.inspect(lowered[0]).v1_loops
    assert len(loops) == 1 and loops[0]["exits"]


def test_a_loop_of_integers_only_is_not_reported():
    with tf.Graph().as_default() as g, fg.control_flow_v1():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        n = tf.compat.v1.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        tf.identity(x * tf.cast(n, tf.float32), name="y")
    graph_def = g.as_graph_def()
    assert {"Enter", "Exit"} <= {n.op for n in graph_def.node}
    assert frozen.inspect(graph_def).v1_loops == []
    _, dx = fg.run(graph_def, np.ones(3, np.float32))
    np.testing.assert_array_equal(dx, [3.0, 3.0, 3.0])


def test_v1_cond_differentiates_after_import_and_is_not_reported():
    graph_def, _, _ = fg.v1_cond()
    assert frozen.inspect(graph_def).v1_loops == []
    fixed, _ = frozen.patch(graph_def, "Sign=ste_sign")
    _, dx = fg.run(fixed, importer=frozen.import_graph_def)
    np.testing.assert_array_equal(dx, [1.0, 3.0, 3.0])  # d(2 ste_sign(x) + x)/dx


def test_the_meta_graph_differentiates_the_loop():
    """Part of the advice given: the MetaGraph keeps the loop's context.
    (Re-exporting with control flow v2: tests/frozen/test_function_library.py.)"""
    with tf.Graph().as_default() as g, fg.control_flow_v1():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(fg._loop(x), name="y")  # pylint: disable=protected-access
        meta = tf.compat.v1.train.export_meta_graph(graph=g)
    with tf.Graph().as_default() as g2:
        tf.compat.v1.train.import_meta_graph(meta)
        dx, = tf.gradients(g2.get_tensor_by_name("y:0"), g2.get_tensor_by_name("x:0"))
        with tf.compat.v1.Session() as sess:
            value = sess.run(dx, {"x:0": fg.X_VALUE})
    np.testing.assert_array_equal(value, [1.0, 1.0, 1.0])  # Sign's own gradient


def test_gradients_that_do_not_cross_the_loop_still_work():
    with tf.Graph().as_default() as g, fg.control_flow_v1():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(fg._loop(x), name="looped")  # pylint: disable=protected-access
        tf.identity(tf.sign(x, name="direct"), name="y")
    fixed, report = frozen.patch(g.as_graph_def(), frozen.parse_rule(
        "Sign=ste_sign", name_regex="^direct$"))
    assert report.warnings and "1 TF1 while loop(s) (while)" in report.warnings[0]
    _, dx = fg.run(fixed, importer=frozen.import_graph_def)
    np.testing.assert_array_equal(dx, [0.0, 1.0, 1.0])


def test_cli_inspect_exits_1_and_patch_warns(v1_while, tmp_path, capsys):
    model = tmp_path / "loop.pb"
    frozen.save(v1_while, model)
    assert cli.main(["inspect", str(model)]) == 1
    out, _ = capsys.readouterr()
    assert "1 TF1 while loop(s)" in out and "while/Exit" in out and "what to do" in out
    assert cli.main(["inspect", str(model), "--json"]) == 1
    data = json.loads(capsys.readouterr()[0])
    assert data["ok"] is False and data["v1_loops"][0]["loop"] == "while"
    assert cli.main(["patch", str(model), "-o", str(tmp_path / "o.pb"),
                     "--map", "Sign=ste_sign"]) == 0
    out, _ = capsys.readouterr()
    assert "warning: the graph holds 1 TF1 while loop(s)" in out and "patched or not" in out
    assert cli.main(["patch", str(model), "--dry-run", "--json",
                     "--map", "Sign=ste_sign"]) == 0
    data = json.loads(capsys.readouterr()[0])
    assert "TF1 while loop" in data["warnings"][0]


@pytest.fixture(scope="module")
def lstm():
    """A Keras LSTM frozen both ways, an input batch and Keras' own
    gradient of sum(outputs)."""
    lowered_graph, x, y, model = fg.keras_lstm(lower_control_flow=True)
    functional_graph, _, y2, _ = fg.keras_lstm(lower_control_flow=False)
    x_value = np.random.RandomState(2).randn(2, 5, 3).astype(np.float32)
    xt = tf.constant(x_value)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        total = tf.reduce_sum(model(xt, training=False))
    return (lowered_graph, functional_graph, x, y, y2, x_value,
            tape.gradient(total, xt).numpy())


def test_keras_lstm_lowered_loop_is_reported_and_fails(lstm):
    lowered_graph, _, x, y, _, x_value, _ = lstm
    report = frozen.inspect(lowered_graph)
    assert len(report.v1_loops) == 1 and report.v1_loops[0]["loop"].endswith("/while")
    assert report.gradient_failures == []  # TensorListReserve lies on no float path
    with pytest.raises(AttributeError, match=OUTER_CONTEXT):
        fg.run(lowered_graph, x_value, x, y)


def test_keras_lstm_functional_loop_differentiates(lstm):
    """The advice: freeze with lower_control_flow=False."""
    _, functional_graph, x, _, y2, x_value, reference = lstm
    report = frozen.inspect(functional_graph)
    assert report.ok and report.v1_loops == [] and report.functions == 2
    _, dx = fg.run(functional_graph, x_value, x, y2)
    np.testing.assert_allclose(dx, reference, rtol=1e-5, atol=1e-6)
