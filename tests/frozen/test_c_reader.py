"""The C GraphDef reader (graph_override/frozen/graphdef/_scan.c) against the
pure-Python one and against protobuf: the same names, op types, inputs and
counts, every input resolved to the node a dictionary lookup gives, the
same errors from `load` for any bytes, and appended nodes that parse to
what protobuf's own merge gives. Arbitrary bytes must never crash it."""

import os
import subprocess
import sys

import numpy as np
import pytest

import warm_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import graph_pb2, node_def_pb2

import test_graphdef_io
import test_patch_file
from graph_override import frozen
from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef import checks, graph_index, wire

_scan = wire._scan  # pylint: disable=protected-access
needs_c = pytest.mark.skipif(
    _scan is None and os.environ.get("GRAPH_OVERRIDE_REQUIRE_SPEEDUPS", "") in ("", "0"),
    reason="the C reader graph_override.frozen.graphdef._scan is not built")


@pytest.fixture(autouse=True)
def _c_reader_built():
    if _scan is None and os.environ.get("GRAPH_OVERRIDE_REQUIRE_SPEEDUPS", "") not in ("", "0"):
        pytest.fail("the C reader graph_override.frozen.graphdef._scan is not built")


def _python_index(data, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(wire, "_scan", None)
        return graph_index.read_index(data)


def _expected_resolution(graph_def):
    """(src, port) of every input, from the names (the reference)."""
    index = {n.name: i for i, n in enumerate(graph_def.node)}
    src, port = [], []
    for node in graph_def.node:
        for ref in node.input:
            if ref.startswith("^"):
                src.append(index.get(ref[1:], -1))
                port.append(-1)
            elif ":" in ref:
                name, _, digits = ref.rpartition(":")
                ok = digits.isdigit() and len(digits) <= 9
                src.append(index.get(name, -1) if ok else -1)
                port.append(int(digits) if ok else 0)
            else:
                src.append(index.get(ref, -1))
                port.append(0)
    return src, port


def _graphs():
    graphs = dict(test_patch_file.GRAPHS)
    graphs["synthetic"] = _synthetic(2000)
    graphs["one_node"] = test_graphdef_io._graph(test_graphdef_io._X)  # pylint: disable=protected-access
    return graphs


def _synthetic(nodes):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "tools"))
    try:
        import bench_frozen  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    return bench_frozen.synthetic_graph_def(nodes)


GRAPHS = _graphs()


@needs_c
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_both_readers_read_the_same_index(name, monkeypatch):
    graph_def = GRAPHS[name]
    data = graph_def.SerializeToString()
    c, py = graph_index.read_index(data), _python_index(data, monkeypatch)
    assert isinstance(c, graph_index.ScanIndex)
    assert c.raw_names == py.raw_names == [n.name.encode() for n in graph_def.node]
    assert c.ops == py.ops == [n.op for n in graph_def.node]
    assert c.raw_inputs == py.raw_inputs
    assert c.counts.tolist() == py.counts.tolist() == [len(n.input) for n in graph_def.node]
    assert c.unknown is py.unknown is False
    assert c.names == py.names and c.inputs == py.inputs
    assert [c.name(i) for i in range(len(c.ops))] == py.names
    assert list(c.lazy_names) == py.names
    assert c.library == py.library == (graph_def.library.SerializeToString()
                                       if graph_def.HasField("library") else b"")
    assert c.names_ok is c.ops_ok is True and c.dup == -1
    src, port = c.resolved
    assert (src.tolist(), port.tolist()) == _expected_resolution(graph_def)
    assert (src >= 0).all()
    for i in range(len(c.ops)):
        assert node_def_pb2.NodeDef.FromString(c.node_bytes(i)) == graph_def.node[i]
        assert c.node_bytes(i) == py.node_bytes(i)


def _node(name=b"x", op=b"Placeholder", inputs=()):
    fields = [(1, name), (2, op)] + [(3, i) for i in inputs]
    return test_patch_file._node_bytes(*fields)  # pylint: disable=protected-access


def _graph_bytes(*nodes):
    return b"".join(test_patch_file._field(1, n) for n in nodes)  # pylint: disable=protected-access


# Inputs of every form, resolved by hand: (input, src, port); x is node 0.
INPUTS = [
    (b"x", 0, 0), (b"x:0", 0, 0), (b"x:1", 0, 1), (b"x:01", 0, 1), (b"^x", 0, -1),
    (b"x:999999999", 0, 999999999),  # 9 digits: the most the C reader parses
    (b"x:9999999999", -1, 0),  # 10: left to Python, which refuses over int32
    (b"x:", -1, 0), (b"x:1a", -1, 0), (b"x:-1", -1, 0), (b":1", -1, 1), (b"^", -1, -1),
    (b"", -1, 0), (b"^x:1", -1, -1), (b"y", -1, 0), (b"x ", -1, 0), (b"X", -1, 0),
    (b"x:\xd9\xa1", -1, 0),  # an Arabic-Indic digit one: not ASCII
    (b"a:b:1", -1, 1), (b"\xff", -1, 0),
]


@needs_c
def test_every_form_of_input_resolves_as_the_reference_says():
    data = _graph_bytes(_node(), _node(b"y0", b"AddN", [i for i, _, _ in INPUTS]))
    scanned = _scan.scan(data)
    src = np.frombuffer(scanned[9], np.int32).tolist()
    port = np.frombuffer(scanned[10], np.int32).tolist()
    assert src == [s for _, s, _ in INPUTS]
    for (ref, s, p), got in zip(INPUTS, port):
        if s >= 0:
            assert got == p, ref


@needs_c
@pytest.mark.parametrize("name, ok", [
    (b"x", True), (b"a.b-c_d/e>f", True), (b".x", True), (b"0", True),
    (b"_x", False), (b"-x", False), (b"/x", False), (b">x", False), (b"", False),
    (b"a b", False), (b"a\nb", False), (b"a\n", False), (b"a:1", False),
    (b"\xc3\xa9", False),
])
def test_name_rules_match_tensorflows(name, ok):
    scanned = _scan.scan(_graph_bytes(_node(name)))
    assert scanned[6] is ok
    assert checks._well_formed([name], checks._NAME_CHARS, checks._BAD_START) is ok  # pylint: disable=protected-access


@needs_c
@pytest.mark.parametrize("op, ok", [
    (b"Sign", True), (b"My.Op>v2-x_y", True), (b"_Retval", True), (b"", False),
    (b"A/B", False), (b"A\nB", False), (b"A B", False),
])
def test_op_type_rules_match_tensorflows(op, ok):
    scanned = _scan.scan(_graph_bytes(_node(b"x", op)))
    assert scanned[7] is ok
    assert checks._well_formed([op.decode()], checks._OP_CHARS, checks._NO_BAD_START) is ok  # pylint: disable=protected-access


@needs_c
def test_the_first_repeated_name_is_reported_and_nothing_is_resolved():
    data = _graph_bytes(_node(b"a"), _node(b"b"), _node(b"c", b"Neg", [b"a"]), _node(b"b"),
                        _node(b"a"))
    scanned = _scan.scan(data)
    assert scanned[8] == 3
    assert scanned[9] is None and scanned[10] is None


@needs_c
@pytest.mark.parametrize("data", [
    b"\x0a\x05\x0a\x01x",  # a node without an op type
    b"\x0a\x0a\x0a\x01x\x12\x01A\x0a\x01y",  # two names
    b"\x0a\x06\x0a\x01x\x12\x01",  # a truncated field
    b"\x0a\x06\x0a\x01x\x12\x01\xff\x0a",  # an op type that is not UTF-8 ... and truncated
    b"\x0a\x06\x0a\x01x\x12\x01\xff",  # an op type that is not UTF-8
    b"\x08\x01",  # field 1 with a varint
    b"\x0b\x0c",  # a group
    b"\x0a\x05\x08\x01\x12\x01A",  # a name with a varint
    b"\x12\x00\x12\x00",  # two libraries
    b"\x00",  # field 0
    b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a varint over 10 bytes
])
def test_what_it_does_not_read_as_protobuf_does_is_left_to_python(data):
    assert _scan.scan(data) is None


def _varint(n):
    return test_graphdef_io._varint(n)  # pylint: disable=protected-access


# Keys and lengths at the limits of the wire format: {name: (bytes, whether
# protobuf 7 reads them)}. Protobuf 4.25 (TensorFlow 2.15) reads lengths of
# 6 to 10 bytes that protobuf 7 refuses; the C reader refuses what either
# refuses.
EDGES = {
    "key_of_2_to_the_32": (_varint(1 << 32 | 5) + bytes(4), False),
    "key_of_the_last_field_number": (_varint((1 << 32) - 3) + bytes(4), True),
    "key_padded_to_6_bytes": (b"\xb0\x80\x80\x80\x80\x00\x01", False),  # field 6, varint
    "value_of_10_bytes": (b"\x18" + b"\xff" * 9 + b"\x01", True),
    "value_of_11_bytes": (b"\x18" + b"\xff" * 10 + b"\x01", False),
    "length_of_10_bytes": (b"\x22" + b"\x80" * 9 + b"\x00", False),
    "length_padded_to_6_bytes": (b"\x22\x80\x80\x80\x80\x80\x00", False),
    "wire_type_6": (_varint(6 << 3 | 6), False),
    "end_group_alone": (_varint(6 << 3 | 4), False),
}


@needs_c
@pytest.mark.parametrize("name", sorted(EDGES))
def test_keys_and_lengths_at_the_limits_are_read_only_where_protobuf_reads_them(name):
    data, protobuf_7_reads = EDGES[name]
    node = _node()
    top = [data, test_patch_file._field(1, node) + data]  # pylint: disable=protected-access
    inside = test_patch_file._field(1, node + data)  # pylint: disable=protected-access
    for graph in top + [inside]:
        scanned, count = _scan.scan(graph), _scan.node_count(graph)
        try:
            parsed = wire.parse_nodes(graph)
        except Exception:  # pylint: disable=broad-except
            parsed = None
        if count is not None:  # then protobuf reads it too
            assert parsed is not None and count == len(parsed.node)
        if scanned is not None:  # protobuf reads the whole graph as the C reader did
            nodes = graph_pb2.GraphDef.FromString(graph).node
            assert [n.name for n in nodes] == ["x"] * len(scanned[2]) == (
                [] if graph is data else ["x"])
        if not protobuf_7_reads:
            assert scanned is None
            assert count is None or graph is inside  # node_count reads the top level only


@needs_c
def test_fields_it_does_not_read_are_skipped_whatever_their_wire_type():
    extra = (b"\x28\x96\x01"  # field 5, a varint
             + b"\x31" + bytes(8)  # field 6, 64-bit
             + b"\x3d" + bytes(4))  # field 7, 32-bit
    node = _node(b"x", b"Placeholder") + extra
    scanned = _scan.scan(extra + test_patch_file._field(1, node) + extra)  # pylint: disable=protected-access
    assert scanned is not None and scanned[2] == ["Placeholder"]


def _mutants(data, edits):
    return test_graphdef_io._mutate(data, edits)  # pylint: disable=protected-access


_SMALL = GRAPHS["binarized_mlp"].SerializeToString()


def _load_outcome(path):
    try:
        return frozen.load(path), None
    except GraphDefError as e:
        return None, str(e)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=test_graphdef_io._EDITS)  # pylint: disable=protected-access
def test_mutated_graphs_load_or_fail_alike_with_both_readers(edits):
    import tempfile  # pylint: disable=import-outside-toplevel
    data = _mutants(_SMALL, edits)
    with tempfile.TemporaryDirectory() as folder:
        path = test_graphdef_io._write(os.path.join(folder, "m.pb"), data)  # pylint: disable=protected-access
        c = _load_outcome(path)
        saved, wire._scan = wire._scan, None
        try:
            py = _load_outcome(path)
        finally:
            wire._scan = saved
    assert c == py


@needs_c
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(st.binary(max_size=300),
                      st.builds(_mutants, st.just(_SMALL), test_graphdef_io._EDITS)))  # pylint: disable=protected-access
def test_any_bytes_give_none_or_spans_inside_them(data):
    scanned = _scan.scan(data)
    count = _scan.node_count(data)
    if scanned is None:
        return
    nodes = np.frombuffer(scanned[0], np.int32).reshape(-1, 3)
    names = np.frombuffer(scanned[1], np.int32).reshape(-1, 2)
    inputs = np.frombuffer(scanned[3], np.int32).reshape(-1, 2)
    counts = np.frombuffer(scanned[4], np.int32)
    assert count == len(nodes) == len(names) == len(scanned[2]) == len(counts)
    assert counts.sum() == len(inputs)
    assert ((nodes[:, 0] < nodes[:, 1]) & (nodes[:, 1] <= nodes[:, 2])).all()
    assert (nodes[:, 2] <= len(data)).all()
    for spans in (names, inputs):
        assert ((spans >= 0).all() and (spans.sum(axis=1) <= len(data)).all())
    # protobuf agrees on what the nodes are
    parsed = wire.parse_nodes(data)
    assert [data[s:e] for _, s, e in nodes.tolist()] == list(parsed.node)
    if scanned[9] is not None:
        src = np.frombuffer(scanned[9], np.int32)
        assert len(src) == len(inputs) and (src < len(nodes)).all() and (src >= -1).all()


def _attr_entry(value):
    entry = node_def_pb2.NodeDef()
    entry.attr["_gradient_op_type"].s = value
    return entry.SerializeToString()


@needs_c
@pytest.mark.parametrize("name", ["binarized_mlp", "synthetic", "keras_dense", "v1_while"])
def test_appending_gives_protobufs_merge_and_keeps_every_other_byte(name):
    graph_def = GRAPHS[name]
    data = graph_def.SerializeToString()
    index = graph_index.read_index(data)
    suffix, other = (_attr_entry(b"Identity"), _attr_entry(b"graph_override.ste_sign"))
    picks = {i: (suffix if i % 2 else other) for i in range(0, len(graph_def.node), 3)}
    got = index.append_to_nodes(data, picks)
    assert got == wire.append_to_nodes(data, picks)  # the protobuf path, byte for byte
    expected = graph_pb2.GraphDef()
    expected.CopyFrom(graph_def)
    for i in picks:
        expected.node[i].MergeFromString(picks[i])
    assert graph_pb2.GraphDef.FromString(got) == expected
    assert wire.node_count(got) == len(graph_def.node)


@needs_c
def test_appending_rewrites_a_long_length_prefix_and_grows_past_a_varint_byte():
    node = _node(b"x", b"Placeholder")
    long_head = b"\x0a" + bytes([len(node) | 0x80, 0]) + node  # a 2-byte length for < 128
    data = long_head + test_patch_file._field(1, _node(b"y", b"Sign", [b"x"]))  # pylint: disable=protected-access
    index = graph_index.read_index(data)
    entry = _attr_entry(b"Identity")
    got = index.append_to_nodes(data, {0: entry, 1: b""})
    parsed = graph_pb2.GraphDef.FromString(got)
    assert [n.name for n in parsed.node] == ["x", "y"]
    assert parsed.node[0].attr["_gradient_op_type"].s == b"Identity"
    assert got.startswith(b"\x0a" + bytes([len(node) + len(entry)]) + node)  # minimal now
    assert got.endswith(data[3 + len(node):])  # node y kept as it was
    grown = index.append_to_nodes(data, {1: b"\x1a\x7f" + b"z" * 127})  # over 127 bytes
    assert list(graph_pb2.GraphDef.FromString(grown).node[1].input) == ["x", "z" * 127]
    assert grown.startswith(long_head)
    with pytest.raises(ValueError):
        _scan.append(data, index.spans, np.array([1, 0], np.int64), np.array([0, 0], np.int64),
                     [b""])
    with pytest.raises(ValueError):
        _scan.append(data, index.spans, np.array([5], np.int64), np.array([0], np.int64), [b""])
    with pytest.raises(TypeError):
        _scan.append(data, index.spans, np.array([0], np.int64), np.array([0], np.int64), ["s"])


def test_spans_index_like_a_list():
    spans = graph_index._Spans(b"abcdef", np.array([0, 2, 3, 3], np.int64))  # pylint: disable=protected-access
    assert len(spans) == 2 and spans[0] == b"ab" and spans[-1] == b"def"
    assert spans[:] == [b"ab", b"def"] and list(spans) == [b"ab", b"def"]
    with pytest.raises(IndexError):
        spans[2]  # pylint: disable=pointless-statement
    with pytest.raises(IndexError):
        spans[-3]  # pylint: disable=pointless-statement


def test_the_environment_variable_turns_the_c_reader_off():
    code = ("from graph_override.frozen.graphdef import wire; print(wire.speedups())")
    out = {}
    for value in ("1", "0"):
        env = dict(os.environ, GRAPH_OVERRIDE_PURE_PYTHON=value, TF_CPP_MIN_LOG_LEVEL="3")
        out[value] = warm_python.run([sys.executable, "-c", code], env=env, check=True,
                                    capture_output=True, text=True).stdout.split()[-1]
    assert out["1"] == "False"
    assert out["0"] == str(_scan is not None)


@needs_c
def test_the_built_reader_is_newer_than_its_sources():
    """An editable install builds the module once; after a change to its C
    sources `pip install -e .` must run again, or the tests would test the
    old build."""
    built = _scan.__file__
    folder = os.path.dirname(built)
    sources = [os.path.join(folder, name) for name in ("_scan.c", "_scan_wire.h",
                                                        "_scan_names.h")]
    sources = [s for s in sources if os.path.exists(s)]  # a wheel ships none
    # A second of slack: the build copies the module with its time cut to
    # whole seconds, so a build in the second of an edit looks older.
    stale = [s for s in sources if os.path.getmtime(s) > os.path.getmtime(built) + 1]
    assert not stale, ("%s is older than %s: run `python -m pip install -e .` again"
                       % (built, ", ".join(stale)))


# --- names that collide in the hash table ---------------------------------

PROBE_LIMIT = 128  # _scan_names.h: a lookup gives up after this many slots


def _colliding_names(count, mask=511, slot=0):
    """`count` node names whose hash, in this process, puts them in the
    same slot of a table of mask + 1 slots (and of every smaller one)."""
    names, k = [], 0
    while len(names) < count:
        name = b"n%d" % k
        if _scan._name_hash(name) & mask == slot:  # pylint: disable=protected-access
            names.append(name)
        k += 1
    return names


@needs_c
def test_the_name_hash_is_seeded_per_process():
    """Three processes (loading the extension alone) hash a name three ways."""
    code = ("import importlib.util as u, sys; s = u.spec_from_file_location('_scan', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(m._name_hash(b'x'))")
    seen = {subprocess.run([sys.executable, "-c", code, _scan.__file__], capture_output=True,
                           text=True, check=True).stdout.strip() for _ in range(3)}
    assert len(seen) == 3 and "" not in seen


@needs_c
@pytest.mark.parametrize("count,read", [(PROBE_LIMIT, True), (PROBE_LIMIT + 1, False)])
def test_colliding_names_past_the_probe_limit_take_the_python_path(count, read, monkeypatch):
    """The table holds PROBE_LIMIT names of one slot; one more and the C
    reader gives the file to the Python path, which reads it the same."""
    names = _colliding_names(count)
    nodes = [_node(names[0])] + [_node(n, b"Identity", [names[0]]) for n in names[1:]]
    data = _graph_bytes(*nodes)
    assert (_scan.scan(data) is not None) == read
    index, py = graph_index.read_index(data), _python_index(data, monkeypatch)
    assert isinstance(index, graph_index.ScanIndex) == read
    assert index.names == py.names == [n.decode() for n in names]
    assert index.inputs == py.inputs == [names[0].decode()] * (count - 1)
    if read:
        assert index.resolved[0].tolist() == [0] * (count - 1)


@needs_c
@pytest.mark.parametrize("missing,read", [(False, True), (True, False)])
def test_an_input_lookup_past_the_probe_limit_takes_the_python_path(missing, read, monkeypatch):
    """128 names fill slots 0-127; an input naming a 129th name of slot 0
    probes all of them (too many), an input naming the last one does not."""
    names = _colliding_names(PROBE_LIMIT + 1)
    reader = _colliding_names(1, slot=400)[0]
    wanted = names[-1] if missing else names[-2]
    nodes = [_node(n) for n in names[:-1]] + [_node(reader, b"Identity", [wanted])]
    data = _graph_bytes(*nodes)
    assert (_scan.scan(data) is not None) == read
    index, py = graph_index.read_index(data), _python_index(data, monkeypatch)
    assert isinstance(index, graph_index.ScanIndex) == read
    assert index.names == py.names and index.inputs == py.inputs == [wanted.decode()]
    if read:
        assert index.resolved[0].tolist() == [PROBE_LIMIT - 1]
