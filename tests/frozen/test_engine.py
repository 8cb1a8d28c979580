"""The patch engine: one pipeline (select -> check fits -> rewrite ->
verify -> write) over its node sources. Gradient names are set on top-level
nodes one way, whatever the caller (`patch`, `make_portable`, `patch_file`)
and whatever the graph; the stop_gradient form is stamped one way, on
top-level and function-body nodes alike; graphs kept as bytes only ever get
names; and every write refuses a graph over 2 GB in one place."""

import os

import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override import frozen
from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef import graph_index
from graph_override.frozen.graphdef import io
from graph_override.frozen.graphdef.views import View
from graph_override.frozen.patching import engine, sources

STE = "graph_override.ste_sign(clip_value=1.0)"


def _sign_graph(named=False):
    """x -> Sign y -> Sign z, y carrying a gradient name if `named`."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.sign(tf.sign(x, name="y"), name="z")
    graph_def = g.as_graph_def()
    if named:
        graph_def.node[1].attr["_gradient_op_type"].s = b"Identity"
    return graph_def


def _with_loop():
    """A top-level Sign and a Sign inside a functional While body."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        top = tf.sign(x, name="top")
        _, h = tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.sign(h) + h),
                             [tf.constant(0), top])
        tf.identity(h, name="y")
    return g.as_graph_def()


@pytest.fixture
def set_names_calls(monkeypatch):
    calls = []
    real = sources.GraphNodes.set_names

    def spy(self, data, sets, rules, entries, pairs=None, order=None):
        calls.append(sorted(sets))
        return real(self, data, sets, rules, entries, pairs, order)

    monkeypatch.setattr(sources.GraphNodes, "set_names", spy)
    return calls


@pytest.mark.usefixtures("reader")
@pytest.mark.parametrize("case", ["patch", "patch_replacing", "patch_removing_too",
                                  "patch_with_function_body", "patch_file"])
def test_names_are_set_on_top_level_nodes_one_way(tmp_path, set_names_calls, case):
    graph_def = _with_loop() if case == "patch_with_function_body" else _sign_graph(
        named=case in ("patch_replacing", "patch_removing_too"))
    rules = {"patch_removing_too": ["Sign=ste_sign", frozen.parse_rule(
        "gradient:Identity=remove")]}.get(case, ["Sign=ste_sign"])
    if case == "patch_file":
        model = str(tmp_path / "model.pb")
        frozen.save(graph_def, model)
        frozen.patch_file(model, str(tmp_path / "out.pb"), rules)
        new = graph_pb2.GraphDef.FromString((tmp_path / "out.pb").read_bytes())
    else:
        new, report = frozen.patch(graph_def, rules)
        assert {c.after for c in report.changes if c.action == "set"} == {STE}
    top = [i for i, n in enumerate(new.node) if n.op == "Sign"]
    assert set_names_calls == [top]  # once, with every top-level node named
    for i in top:
        assert new.node[i].attr["_gradient_op_type"].s.decode() == STE
    # A name replaced by an appended entry leaves one entry, the new one.
    data = new.SerializeToString(deterministic=True)
    assert data.count(b"_gradient_op_type") == len(top) + (
        case == "patch_with_function_body")


def test_a_name_removed_and_a_name_set_in_one_patch():
    graph_def = _sign_graph(named=True)
    rules = [frozen.parse_rule("gradient:Identity=remove"), "Sign=ste_sign"]
    new, report = frozen.patch(graph_def, rules)
    assert [(c.node, c.action, c.before, c.after) for c in report.changes] == [
        ("y", "remove", "Identity", None), ("z", "set", None, STE)]
    assert "_gradient_op_type" not in new.node[1].attr
    expected = graph_pb2.GraphDef()
    expected.CopyFrom(graph_def)
    del expected.node[1].attr["_gradient_op_type"]
    expected.node[2].attr["_gradient_op_type"].s = STE.encode()
    assert new == expected


def test_top_level_and_body_nodes_get_the_stop_gradient_form_one_way(monkeypatch):
    stamped = []
    real = sources.stamp_over

    def spy(node, *args, **kwargs):
        stamped.append(node.name)
        return real(node, *args, **kwargs)

    monkeypatch.setattr(sources, "stamp_over", spy)
    from graph_override.frozen.patching import library  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(library, "stamp_over", spy)
    graph_def = _with_loop()
    new, report = frozen.make_portable(graph_def, ["Sign=ste_sign"])
    body = [c.node for c in report.changes if "/" in c.node]
    assert len(stamped) == 2 and "top" in stamped
    assert len(body) == 1 and body[0].endswith("/" + [s for s in stamped if s != "top"][0])
    assert {c.action for c in report.changes} == {"rewrite"}
    assert report.nodes_added > 0
    assert [n.op for n in new.node if n.name == "top"] == ["Sub"]


@pytest.mark.usefixtures("reader")
@pytest.mark.parametrize("rule, needs_message", [
    ("Sign=ste_sign", False), ("Sign=remove", True), ("gradient:Identity=remove", True)])
def test_a_graph_kept_as_bytes_only_ever_gets_names(rule, needs_message):
    graph_def = _sign_graph()
    data = graph_def.SerializeToString()
    graph = sources.GraphNodes(View(data=data, index=graph_index.read_index(data)))
    assert graph.graph_def is None
    if needs_message:
        with pytest.raises(engine.NeedsMessage):
            engine.run(graph, [frozen.parse_rule(rule)], what="patch",
                       on_no_match="ignore")
        return
    new, report, owner = engine.run(graph, [frozen.parse_rule(rule)], what="patch")
    assert isinstance(new, bytes) and sorted(owner) == [1, 2]
    expected, expected_report = frozen.patch(graph_def, [rule])
    assert graph_pb2.GraphDef.FromString(new) == expected
    assert list(report.changes) == list(expected_report.changes)


def test_every_write_refuses_a_graph_over_2_gb_in_one_place(tmp_path, monkeypatch):
    graph_def = _sign_graph()
    size = len(graph_def.SerializeToString())
    monkeypatch.setattr(io, "MAX_BYTES", size - 1)
    expected = ("%s: the graph is %d bytes, over protobuf's limit of %d (2 GB); "
                "nothing was written." % (tmp_path / "a.pb", size, size - 1))
    with pytest.raises(GraphDefError) as raised:
        io.write_bytes(graph_def.SerializeToString(), str(tmp_path / "a.pb"))
    assert str(raised.value).startswith(expected)
    with pytest.raises(GraphDefError, match="over protobuf's limit"):
        frozen.save(graph_def, str(tmp_path / "b.pb"))
    model = tmp_path / "model.pb"
    model.write_bytes(graph_def.SerializeToString())
    monkeypatch.setattr(io, "MAX_BYTES", size)  # the input reads, the output is over
    with pytest.raises(GraphDefError, match="over protobuf's limit"):
        frozen.patch_file(str(model), str(tmp_path / "c.pb"), ["Sign=ste_sign"])
    assert sorted(os.listdir(tmp_path)) == ["model.pb"]
