"""`frozen.patch_file` (what `graph-override patch` runs): the bytes path
must give what load + patch + save gives, refuse what they refuse with the
same message, and keep every byte of the input it does not change; and the
C-level views it rests on (`frozen.graphdef.wire`) must see what a full parse sees."""

import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from tensorflow.core.framework import graph_pb2, node_def_pb2

import frozen_graphs
import test_graphdef_io as test_frozen_io
from graph_override import frozen
from graph_override.errors import GraphDefError, GraphOverrideError
from graph_override.frozen.graphdef import graph_index, wire
from graph_override.frozen.patching import patch_file

# Every test runs with the C reader and with the pure-Python one.
pytestmark = pytest.mark.usefixtures("reader")


def _binarized_mlp():
    """A frozen binarized MLP the way a TF1 training script leaves one:
    Const weights, MatMul, BiasAdd, Sign, dropout folded away, a Softmax."""
    rng = np.random.RandomState(0)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        h = x
        for i, width in enumerate((16, 16)):
            w = tf.constant(rng.randn(h.shape[1], width).astype(np.float32), name="w%d" % i)
            b = tf.constant(rng.randn(width).astype(np.float32), name="b%d" % i)
            h = tf.sign(tf.nn.bias_add(tf.matmul(h, tf.sign(w)), b), name="act%d" % i)
            h = tf.identity(h, name="block%d/out" % i)
        logits = tf.matmul(h, tf.constant(rng.randn(16, 3).astype(np.float32)))
        tf.nn.softmax(logits, name="y")
    return g.as_graph_def()


def _with_dead_names():
    """Sign nodes carrying a tf.custom_gradient name no process can resolve."""
    g = _binarized_mlp()
    for node in g.node:
        if node.op == "Sign":
            node.attr["_gradient_op_type"].s = b"CustomGradient-31337"
    return g


def _graphs():
    graphs = {"binarized_mlp": _binarized_mlp(), "dead_names": _with_dead_names()}
    for name in ("v1_while", "v1_cond", "v2_while", "fake_quant", "product", "matmul",
                 "one_hot"):
        graphs[name] = getattr(frozen_graphs, name)()[0]
    graphs["frozen_loop"] = frozen_graphs.frozen_tf_function()[0]
    graphs["keras_dense"] = frozen_graphs.keras_dense()[0]
    return graphs


GRAPHS = _graphs()
RULES = {
    "sign": ["Sign=ste_sign"],
    "sign_clip": ["Sign=ste_sign:clip_value=0.5", "Identity=flip_gradient:scale=0.5"],
    "round_quant": ["Round=ste_round", "FakeQuantWithMinMaxVars=ste_sign"],
    "select": ["Sign=approx_sign"],
    "registered": ["Sign=Identity"],
    "remove": ["gradient:CustomGradient-*=remove"],
    "matmul": ["MatMul=scale_gradient:scale=0.5"],
    "replace": ["Mul=flip_gradient"],
}
_BYTES_PATH = {("binarized_mlp", r) for r in ("sign", "sign_clip", "select", "registered")}


def _outcome(fn):
    """(result, None) or (None, (error type, message))."""
    try:
        return fn(), None
    except GraphOverrideError as e:
        return None, (type(e), str(e))


def _message_path(model, out, rules):
    graph_def = frozen.load(model)
    new, report = frozen.patch(graph_def, rules, on_no_match="ignore")
    frozen.save(new, out)
    return new, report


@pytest.mark.parametrize("rules", sorted(RULES))
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_patch_file_gives_what_load_patch_save_gives(tmp_path, graph, rules):
    model = test_frozen_io._write(tmp_path / "model.pb", GRAPHS[graph].SerializeToString())
    expected, error = _outcome(lambda: _message_path(model, str(tmp_path / "a.pb"),
                                                     RULES[rules]))
    report, got_error = _outcome(lambda: frozen.patch_file(
        model, str(tmp_path / "b.pb"), RULES[rules], on_no_match="ignore"))
    assert got_error == error
    if error is not None:
        assert not os.path.exists(tmp_path / "b.pb")
        return
    new, expected_report = expected
    written = graph_pb2.GraphDef.FromString((tmp_path / "b.pb").read_bytes())
    assert written == new
    assert list(report.changes) == list(expected_report.changes)
    assert report.rule_matches == expected_report.rule_matches
    assert report.warnings == expected_report.warnings
    assert report.nodes_added == expected_report.nodes_added
    assert report.gradient_failures_left == frozen.inspect(new).gradient_failures
    assert report.to_dict() == expected_report.to_dict()


@pytest.mark.parametrize("graph, rules", sorted(_BYTES_PATH))
def test_the_bytes_path_keeps_every_byte_it_does_not_change(tmp_path, monkeypatch,
                                                            graph, rules):
    def no_message_path(*args, **kwargs):
        raise AssertionError("the message path was taken")

    monkeypatch.setattr(patch_file, "_message_path", no_message_path)
    data = GRAPHS[graph].SerializeToString()
    model = test_frozen_io._write(tmp_path / "model.pb", data)
    report = frozen.patch_file(model, str(tmp_path / "out.pb"), RULES[rules])
    assert len(report.changes) > 0
    before, after = wire.parse_nodes(data), wire.parse_nodes((tmp_path / "out.pb").read_bytes())
    assert len(after.node) == len(before.node)
    changed = {c.node for c in report.changes}
    for old, new in zip(before.node, after.node):
        assert new.startswith(old)
        name = node_def_pb2.NodeDef.FromString(old).name
        assert (new != old) == (name in changed)
    assert after.versions == before.versions


def test_the_bytes_path_is_taken_for_graphs_it_can_do(tmp_path, monkeypatch):
    """And not for those it cannot: a library, gradient names, text."""
    taken = []
    real = patch_file._message_path
    monkeypatch.setattr(patch_file, "_message_path",
                        lambda *a, **k: taken.append(a[0]) or real(*a, **k))
    cases = {"plain.pb": ("binarized_mlp", True), "library.pb": ("v2_while", False),
             "named.pb": ("dead_names", False), "text.pbtxt": ("binarized_mlp", False)}
    for name, (graph, bytes_path) in cases.items():
        path = str(tmp_path / name)
        frozen.save(GRAPHS[graph], path)
        frozen.patch_file(path, None, ["Sign=ste_sign"])
        assert (path not in taken) == bytes_path, name


@pytest.mark.parametrize("name", sorted(test_frozen_io.INVALID_GRAPHS))
def test_graphs_load_refuses_are_refused_with_the_same_message(tmp_path, name):
    graph_def, _ = test_frozen_io.INVALID_GRAPHS[name]
    model = test_frozen_io._write(tmp_path / "model.pb", graph_def.SerializeToString())
    with pytest.raises(GraphDefError) as expected:
        frozen.load(model)
    with pytest.raises(GraphDefError) as got:
        frozen.patch_file(model, str(tmp_path / "out.pb"), ["Sign=ste_sign"],
                          on_no_match="ignore")
    assert str(got.value) == str(expected.value)
    assert sorted(os.listdir(tmp_path)) == ["model.pb"]


def test_an_empty_input_name_is_refused_naming_the_node(tmp_path):
    g = graph_pb2.GraphDef()
    g.node.add(name="x", op="Placeholder")
    g.node.add(name="y", op="Sign", input=["x", ""])
    model = test_frozen_io._write(tmp_path / "model.pb", g.SerializeToString())
    for fn in (lambda: frozen.load(model),
               lambda: frozen.patch_file(model, str(tmp_path / "o.pb"), ["Sign=ste_sign"])):
        with pytest.raises(GraphDefError, match=r"node 'y' \(op Sign\) has input ''"):
            fn()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=test_frozen_io._EDITS)
def test_mutated_files_give_the_same_result_or_error_on_both_paths(tmp_path_factory, edits):
    folder = tmp_path_factory.mktemp("fuzz")
    data = test_frozen_io._mutate(test_frozen_io.DATA, edits)
    model = test_frozen_io._write(folder / "fuzz.pb", data)
    expected, error = _outcome(lambda: _message_path(model, str(folder / "a.pb"),
                                                     ["Sign=ste_sign"]))
    report, got_error = _outcome(lambda: frozen.patch_file(
        model, str(folder / "b.pb"), ["Sign=ste_sign"], on_no_match="ignore"))
    assert got_error == error
    if error is None:
        assert graph_pb2.GraphDef.FromString((folder / "b.pb").read_bytes()) == expected[0]
        assert list(report.changes) == list(expected[1].changes)


# ---- frozen.graphdef.wire: what the C-level views see --------------------------------

def _varint(n):
    return test_frozen_io._varint(n)


def _field(number, payload):
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_UNKNOWN = _varint(99 << 3) + b"\x01"  # field 99, a varint


def _node_with_tensor(dim_extra=b"", tensor_extra=b"", attr_extra=b"", node_extra=b""):
    """A Const NodeDef's bytes with extra bytes at one depth: in a shape's
    dim, the tensor, the AttrValue, or the node itself."""
    dim = _field(2, _varint(1 << 3) + _varint(3) + dim_extra)  # TensorShapeProto.dim
    tensor = _field(2, dim) + _varint(1 << 3) + _varint(1) + tensor_extra  # shape, dtype
    value = _field(8, tensor) + attr_extra  # AttrValue.tensor
    entry = _field(1, b"value") + _field(2, value)
    return (_field(1, b"c") + _field(2, b"Const") + _field(5, entry) + node_extra)


@pytest.mark.parametrize("where", ["dim", "tensor", "attr", "node", "library", "versions",
                                   "none"])
def test_unknown_fields_are_seen_at_every_depth(where):
    extra = {k: _UNKNOWN if k == where else b"" for k in ("dim", "tensor", "attr", "node")}
    node = _node_with_tensor(extra["dim"] + b"", extra["tensor"], extra["attr"],
                             extra["node"])
    data = _field(1, node)
    if where == "library":  # a FunctionDef whose signature holds field 99
        data += _field(2, _field(1, _field(1, _field(1, b"f") + _UNKNOWN)))
    if where == "versions":
        data += _field(4, _varint(1 << 3) + _varint(5) + _UNKNOWN)
    full = graph_pb2.GraphDef.FromString(data)
    size = len(full.SerializeToString())
    full.DiscardUnknownFields()
    has_unknown = len(full.SerializeToString()) != size  # what protobuf itself says
    assert has_unknown == (where != "none")
    assert wire.has_unknown_fields(data) == has_unknown
    assert graph_index.read_index(data).unknown == has_unknown


def test_a_known_field_with_the_wrong_wire_type_is_unknown():
    node = _field(1, b"c") + _field(2, b"Const") + _varint(4 << 3) + _varint(7)  # device
    data = _field(1, node)
    assert wire.has_unknown_fields(data)
    assert graph_index.read_index(data).unknown
    assert graph_index.read_index(_field(1, _field(1, b"c") + _varint(2 << 3) + _varint(7))) is None


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_the_index_is_what_a_full_parse_gives(graph):
    graph_def = GRAPHS[graph]
    data = graph_def.SerializeToString()
    index = graph_index.read_index(data)
    assert index.names == [n.name for n in graph_def.node]
    assert index.ops == [n.op for n in graph_def.node]
    assert index.inputs == [i for n in graph_def.node for i in n.input]
    assert index.counts.tolist() == [len(n.input) for n in graph_def.node]
    assert index.unknown is False
    assert list(index.lazy_names) == index.names


def _node_bytes(*fields):
    return b"".join(_field(number, payload) for number, payload in fields)


_T_FLOAT = _field(1, b"T") + _field(2, _varint(6 << 3) + _varint(1))  # attr T: float


def _layouts():
    """The same graph (x -> y = Sign(x) -> z = AddN(x, y)) laid out in ways
    protobuf accepts but does not write: {name: (bytes, as written)}."""
    x = _node_bytes((1, b"x"), (2, b"Placeholder"), (5, _field(1, b"dtype")
                                                        + _field(2, _varint(6 << 3) + _varint(1))))
    y_fields = [(1, b"y"), (2, b"Sign"), (3, b"x"), (5, _T_FLOAT)]
    z = _node_bytes((1, b"z"), (2, b"AddN"), (3, b"x"), (3, b"y"), (5, _T_FLOAT),
                    (5, _field(1, b"N") + _field(2, _varint(3 << 3) + _varint(2))))
    versions = _field(4, _varint(1 << 3) + _varint(27))

    def graph(y, nodes_first=True, x_head=None):
        nodes = (x_head or _field(1, x)) + _field(1, _node_bytes(*y)) + _field(1, z)
        return nodes + versions if nodes_first else versions + nodes

    canonical = graph(y_fields)
    return canonical, {
        "input_after_attr": graph([y_fields[0], y_fields[1], y_fields[3], y_fields[2]]),
        "op_before_name": graph([y_fields[1], y_fields[0], y_fields[2], y_fields[3]]),
        "versions_first": graph(y_fields, nodes_first=False),
        "long_length_prefix": graph(y_fields, x_head=b"\x0a" + bytes([len(x) | 0x80, 0]) + x),
    }


@pytest.mark.parametrize("layout", sorted(_layouts()[1]))
def test_layouts_protobuf_does_not_write_take_the_slow_path_with_the_same_result(
        tmp_path, layout, reader):
    canonical, layouts = _layouts()
    data = layouts[layout]
    expected = graph_pb2.GraphDef.FromString(canonical)
    assert graph_pb2.GraphDef.FromString(data) == expected  # the same graph
    assert graph_index.read_index(canonical).counts.tolist() == [0, 1, 2]
    if reader == "python":
        assert graph_index.read_index(data) is None  # not the fast layout: the slow path
    else:  # the C reader reads any layout protobuf reads
        index = graph_index.read_index(data)
        assert (index.raw_names, index.ops, index.raw_inputs) == (
            [b"x", b"y", b"z"], ["Placeholder", "Sign", "AddN"], [b"x", b"x", b"y"])
        assert index.counts.tolist() == [0, 1, 2]
        assert [a.tolist() for a in index.resolved] == [[0, 0, 1], [0, 0, 0]]
    model = test_frozen_io._write(tmp_path / "model.pb", data)
    assert frozen.load(model) == expected
    report = frozen.patch_file(model, str(tmp_path / "out.pb"), ["Sign=ste_sign"])
    assert [c.node for c in report.changes] == ["y"]
    fixed, _ = frozen.patch(expected, ["Sign=ste_sign"])
    assert graph_pb2.GraphDef.FromString((tmp_path / "out.pb").read_bytes()) == fixed


def test_input_counts_of_a_node_with_hundreds_of_inputs():
    with tf.Graph().as_default() as g:
        xs = [tf.compat.v1.placeholder(tf.float32, [2], name="x%d" % i) for i in range(300)]
        total = tf.add_n(xs, name="sum")
        tf.add_n([total, xs[0], xs[1]], name="y")
    graph_def = g.as_graph_def()
    index = graph_index.read_index(graph_def.SerializeToString())
    assert index.counts.tolist() == [len(n.input) for n in graph_def.node]
    assert index.counts.max() == 300
