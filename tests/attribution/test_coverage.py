"""The coverage report (graph_override.attribution.coverage and `inspect
--method`): the op types on the input-output path a method does not cover,
on small graphs and on a frozen Keras MobileNetV2."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2)

from graph_override import cli, frozen
from graph_override.attribution import method_table
from graph_override.attribution.coverage import coverage_report
from graph_override.errors import AttributionError, ConversionError


def _mlp():
    """x -> MatMul -> Relu -> Elu -> logits; probs = Softmax(logits); an
    unused Tanh branch hangs off x."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant(np.ones((3, 3), np.float32))
        h = tf.nn.relu(tf.matmul(x, w), name="relu")
        e = tf.nn.elu(tf.matmul(h, w), name="elu")
        logits = tf.identity(tf.matmul(e, w), name="logits")
        tf.nn.softmax(logits, name="probs")
        tf.tanh(x, name="side")
    return g.as_graph_def()


def _uncovered(report):
    return {u["op"]: (u["count"], u["nodes"]) for u in report.uncovered}


@pytest.mark.parametrize("method, expected", [
    ("guided_backprop", {"Elu": (1, ["elu"])}),
    ("deconvnet", {"Elu": (1, ["elu"])}),
    ("deeplift", {}),
    ("eps_lrp", {}),
    ("saliency", {}),
    ("integrated_gradients", {}),
])
def test_the_path_to_the_logits(method, expected):
    report = coverage_report(_mlp(), method, inputs="x:0", outputs="logits:0")
    assert _uncovered(report) == expected
    assert report.ok is (not expected)
    # x, 3 MatMul, Relu, Elu, logits; the weights (Const) do not depend on x,
    # and probs and side are not on the way to the logits.
    assert report.path_nodes == 7
    if method_table.METHODS[method].rules:
        assert report.covered == {op: 1 for op in ("Relu", "Elu")
                                  if op in method_table.METHODS[method].rules}
    else:
        assert report.covered == {}


def test_default_ends_take_every_placeholder_and_every_unread_node():
    report = coverage_report(_mlp(), "eps_lrp")
    assert report.inputs == ["x:0"]
    assert sorted(report.outputs) == ["probs:0", "side:0"]
    assert _uncovered(report) == {"Softmax": (1, ["probs"])}  # Tanh is covered
    assert "Softmax" in report.format() and "NOT covered by eps_lrp" in report.format()
    # DeepLIFT has a Softmax rule
    assert coverage_report(_mlp(), "deeplift").covered["Softmax"] == 1


def test_linear_data_movement_and_running_sums_are_covered():
    """Cumsum (its axis is an int input), ReverseV2, Roll, BroadcastTo,
    GatherNd, SpaceToBatchND / BatchToSpaceND (dilated convolutions) and
    EnsureShape are linear in their float input: every method keeps their
    gradient."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="x")
        h = tf.cumsum(x, axis=1, name="cumsum")
        h = tf.reverse(h, [2], name="reverse")
        h = tf.roll(h, 1, axis=1, name="roll")
        h = tf.raw_ops.BatchToSpaceND(input=tf.raw_ops.SpaceToBatchND(
            input=h, block_shape=[2, 2], paddings=[[0, 0], [0, 0]]),
            block_shape=[2, 2], crops=[[0, 0], [0, 0]], name="b2s")
        h = tf.ensure_shape(h, [None, 4, 4, 2], name="ensure")
        h = tf.gather_nd(h, [[0], [1]], batch_dims=0, name="gather_nd")
        h = tf.broadcast_to(tf.reduce_sum(h, axis=[1, 2, 3]), [3, 2], name="broadcast")
        tf.identity(tf.nn.relu(h), name="y")
    graph_def = g.as_graph_def()
    ops = {n.op for n in graph_def.node}
    expected = {"Cumsum", "ReverseV2", "Roll", "SpaceToBatchND", "BatchToSpaceND",
                "EnsureShape", "GatherNd", "BroadcastTo"}
    assert expected <= ops
    for method in ("deeplift", "eps_lrp", "guided_backprop"):
        report = coverage_report(graph_def, method, inputs="x", outputs="y")
        assert report.uncovered == [], method
        assert report.covered == {"Relu": 1}
        # x, the 8 ops, Sum, Relu, y: all but the Relu are linear
        assert report.linear == report.path_nodes - 1 == 11
    assert expected <= method_table.LINEAR_OPS


def test_training_mode_batch_norm_is_reported_for_every_method():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="x")
        scale, offset = tf.ones([2]), tf.zeros([2])
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(x, scale, offset, is_training=True,
                                                   name="bn_train")
        mean, var = tf.zeros([2]), tf.ones([2])
        z, _, _ = tf.compat.v1.nn.fused_batch_norm(y, scale, offset, mean=mean,
                                                   variance=var, is_training=False,
                                                   name="bn_infer")
        tf.identity(tf.nn.relu(z), name="y")
    graph_def = g.as_graph_def()
    ops = {n.name: n.op for n in graph_def.node}
    assert ops["bn_train"].startswith("FusedBatchNorm") and ops["bn_infer"] == ops["bn_train"]
    for method in ("saliency", "deeplift", "guided_backprop"):
        report = coverage_report(graph_def, method, inputs="x", outputs="y")
        assert [(u["op"], u["nodes"]) for u in report.uncovered] == [
            (ops["bn_train"], ["bn_train"])], method
        assert "training mode" in report.uncovered[0]["reason"]


def test_a_tf1_while_loop_is_reported_and_tf1_cond_routing_is_linear():
    """A TF1 while loop's Enter/Exit/NextIteration are reported under every
    method with what to do (no rule can help: tf.gradients cannot cross the
    loop after import); TF1 tf.cond's Switch and Merge only route the
    gradient, so they count as linear, in the loop's body too."""
    v1 = tf.compat.v1
    was_v2 = v1.control_flow_v2_enabled()
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = v1.placeholder(tf.float32, [None, 3], name="x")
            _, looped = v1.while_loop(lambda i, a: i < 3,
                                      lambda i, a: (i + 1, tf.nn.relu(a * 2.0)),
                                      [tf.constant(0), tf.nn.relu(x)])
            routed = tf.cond(tf.constant(True), lambda: looped * 1.0, lambda: looped)
            tf.identity(routed, name="y")
            tf.identity(tf.cond(tf.constant(True), lambda: x * 3.0, lambda: x), name="z")
    finally:
        if was_v2:
            v1.enable_control_flow_v2()
    graph_def = g.as_graph_def()
    ops = {n.op for n in graph_def.node}
    assert {"Enter", "Exit", "NextIteration", "Switch", "Merge"} <= ops
    for method in ("guided_backprop", "deeplift", "saliency"):
        report = coverage_report(graph_def, method, inputs="x", outputs="y")
        assert sorted(u["op"] for u in report.uncovered) == ["Enter", "Exit",
                                                             "NextIteration"], method
        for u in report.uncovered:
            assert u["reason"].startswith("part of a TF1 while loop"), u
            assert "control flow v2" in u["reason"] and "--map" not in u["reason"]
        # the cond alone, without the loop: every node covered
        alone = coverage_report(graph_def, method, inputs="x", outputs="z")
        assert alone.ok, alone.format()
        assert alone.linear >= 3  # Switch, Merge, Mul at least
    assert method_table.LINEAR_OPS >= {"Switch", "Merge"}


def test_raw_ops_custom_ops_and_dead_gradient_names():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        s = tf.raw_ops.Softsign(features=x, name="softsign")
        c = tf.identity(s, name="custom")
        with g.gradient_override_map({"Sign": "CustomGradient-5551"}):
            d = tf.sign(c, name="dead")
        tf.identity(tf.nn.relu(d + c), name="y")
    graph_def = g.as_graph_def()
    for node in graph_def.node:
        if node.name == "custom":
            node.op = "MyCustomOp"
    found = _uncovered(coverage_report(graph_def, "deeplift", inputs="x", outputs="y"))
    assert set(found) == {"Softsign", "MyCustomOp", "Sign"}
    reasons = {u["op"]: u["reason"] for u in coverage_report(
        graph_def, "saliency", inputs="x", outputs="y").uncovered}
    # A gradient method covers Softsign (its own gradient is the method's).
    assert set(reasons) == {"MyCustomOp", "Sign"}
    assert "CustomGradient-5551" in reasons["Sign"]
    assert "MyCustomOp" in reasons["MyCustomOp"]


def test_function_bodies_are_on_the_path():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        _, h = tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(h) + h),
                             [tf.constant(0), x])
        tf.identity(tf.nn.relu(h), name="y")
    report = coverage_report(g.as_graph_def(), "guided_backprop", inputs="x", outputs="y")
    (entry,) = report.uncovered
    assert entry["op"] == "Tanh" and entry["count"] == 1
    assert "/" in entry["nodes"][0]  # FUNCTION/NODE
    assert report.covered == {"Relu": 1}
    assert coverage_report(g.as_graph_def(), "deeplift", inputs="x", outputs="y").ok


def test_a_control_input_is_not_on_the_path():
    """No gradient flows through a control dependency: a Softplus the
    logits wait for but do not read is not reported."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        side = tf.nn.softplus(x, name="side")
        h = tf.nn.relu(x, name="relu")
        with tf.control_dependencies([side]):
            tf.identity(h, name="logits")
    report = coverage_report(g.as_graph_def(), "guided_backprop", inputs="x:0",
                             outputs="logits:0")
    assert report.ok and report.covered == {"Relu": 1}
    assert report.path_nodes == 3  # x, relu, logits


@pytest.mark.parametrize("kwargs, error, match", [
    ({"method": "deeplfit"}, AttributionError, "Did you mean 'deeplift'"),
    ({"method": "deeplift", "inputs": "nope:0"}, ConversionError, "no node 'nope'"),
    ({"method": "deeplift", "outputs": "logit"}, ConversionError, "Did you mean 'logits:0'"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        coverage_report(_mlp(), **kwargs)


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_status_and_usage_errors(tmp_path, capsys):
    model = str(tmp_path / "mlp.pb")
    frozen.save(_mlp(), model)
    code, out, _ = _main(capsys, "inspect", model, "--method", "guided_backprop",
                         "--inputs", "x:0", "--outputs", "logits:0")
    assert code == 1 and "Elu" in out and "elu" in out
    code, out, _ = _main(capsys, "inspect", model, "--method", "deeplift",
                         "--inputs", "x:0", "--outputs", "logits:0")
    assert code == 0 and "every op type on the path is covered" in out
    code, out, _ = _main(capsys, "inspect", model, "--method", "eps_lrp", "--json")
    import json  # pylint: disable=import-outside-toplevel
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["file"] == model
    assert [u["op"] for u in data["uncovered"]] == ["Softmax"]
    for argv, match in (
            (["--method", "deeplfit"], "Did you mean 'deeplift'?"),
            (["--method", "deeplift", "--inputs", "nope"], "no node 'nope'"),
            (["--inputs", "x:0"], "--inputs and --outputs go with --method")):
        code, _, err = _main(capsys, "inspect", model, *argv)
        assert code == 2 and match in err, err
    code, _, err = _main(capsys, "inspect", str(tmp_path / "missing.pb"), "--method",
                         "deeplift")
    assert code == 2 and "missing.pb" in err


def test_cli_map_counts_the_users_op_types_as_covered(tmp_path, monkeypatch, capsys):
    """``inspect --method NAME --map OP=MODULE:FUNCTION``: what the report's
    own hint suggests, parsed as ``explain --map`` parses it."""
    model = str(tmp_path / "mlp.pb")
    frozen.save(_mlp(), model)
    (tmp_path / "inspect_elu_rules.py").write_text(
        "def passthrough(op, grad):\n    return grad\n")
    monkeypatch.chdir(tmp_path)
    path = ["inspect", model, "--method", "guided_backprop", "--inputs", "x:0",
            "--outputs", "logits:0"]
    code, out, _ = _main(capsys, *path)
    assert code == 1 and "--map Elu=MODULE:FUNCTION" in out
    code, out, err = _main(capsys, *path, "--map", "Elu=inspect_elu_rules:passthrough")
    assert code == 0 and "every op type on the path is covered" in out, err
    assert "2 covered by its rules (Elu 1, Relu 1)" in out
    code, out, _ = _main(capsys, *path, "--map", "Elu=ste_sign", "--json")
    import json  # pylint: disable=import-outside-toplevel
    data = json.loads(out)
    assert code == 0 and data["covered"] == {"Elu": 1, "Relu": 1} and data["uncovered"] == []
    for argv, match in (
            (path + ["--map", "elu=ste_sign"], "'Elu'"),
            (path + ["--map", "Elu=inspect_no_such_module:f"], "inspect_no_such_module"),
            (path + ["--map", "Elu"], "expected SELECTOR=ACTION"),
            (["inspect", model, "--map", "Elu=ste_sign"], "--map goes with --method")):
        code, _, err = _main(capsys, *argv)
        assert code == 2 and match in err, err


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    """Keras MobileNetV2 (alpha 0.35, 32x32, no weights) with a softmax
    head, frozen with convert_variables_to_constants_v2."""
    model = tf.keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10)
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 32, 32, 3], tf.float32, name="x"))
    fz = convert_variables_to_constants_v2(fn)
    path = str(tmp_path_factory.mktemp("mobilenet") / "mobilenet.pb")
    frozen.save(fz.graph.as_graph_def(), path)
    softmax = [n for n in fz.graph.as_graph_def().node if n.op == "Softmax"]
    return path, fz.inputs[0].name, fz.outputs[0].name, softmax[0].name


@pytest.mark.slow
def test_mobilenet_v2(mobilenet, capsys):
    path, x, y, softmax = mobilenet
    report = coverage_report(path, "guided_backprop", inputs=x, outputs=y)
    assert report.covered == {"Relu6": 35}  # 17 blocks x 2 + the last conv
    assert _uncovered(report) == {"Softmax": (1, [softmax])}
    # Up to the logits (the Softmax's input), everything is covered.
    logits = [n for n in frozen.load(path).node if n.name == softmax][0].input[0]
    assert coverage_report(path, "eps_lrp", inputs=x, outputs=logits).ok
    code, out, _ = _main(capsys, "inspect", path, "--method", "eps_lrp",
                         "--inputs", x, "--outputs", y)
    assert code == 1 and "Softmax" in out and "Relu6 35" in out
    # DeepLIFT's rules cover the Softmax too
    assert coverage_report(path, "deeplift", inputs=x, outputs=y).covered["Softmax"] == 1
