"""Reading and writing GraphDef files: every bad input gives a GraphDefError
that names the file, and nothing is ever half written."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import warm_python
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import function_pb2, graph_pb2

from graph_override import frozen
from graph_override.frozen.graphdef import io as _graphdef_io
from graph_override.errors import GraphDefError, GraphOverrideError


def _small_graph_def():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        w = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3), name="w")
        tf.sign(tf.matmul(x, w), name="y")
    return g.as_graph_def()


GRAPH = _small_graph_def()
DATA = GRAPH.SerializeToString()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _files(folder):
    return sorted(os.listdir(folder))


@pytest.fixture(scope="module")
def saved_model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "model"
    module = tf.Module()
    module.v = tf.Variable(1.0)
    module.f = tf.function(lambda x: x * module.v,
                           input_signature=[tf.TensorSpec([], tf.float32)])
    tf.saved_model.save(module, str(path))
    return path


def test_binary_and_text_round_trip(tmp_path):
    for name in ("model.pb", "model.pbtxt"):
        path = tmp_path / name
        frozen.save(GRAPH, path)
        assert frozen.load(path) == GRAPH
    assert (tmp_path / "model.pbtxt").read_text().startswith("node {")
    assert (tmp_path / "model.pb").read_bytes() == GRAPH.SerializeToString(deterministic=True)
    # A text GraphDef under a .pb name is still read.
    os.replace(tmp_path / "model.pbtxt", tmp_path / "text.pb")
    assert frozen.load(tmp_path / "text.pb") == GRAPH


def _duplicate():
    g = graph_pb2.GraphDef()
    g.CopyFrom(GRAPH)
    g.node.add().CopyFrom(g.node[0])
    return g.SerializeToString()


def _dangling():
    g = graph_pb2.GraphDef()
    g.CopyFrom(GRAPH)
    g.node[-1].input[0] = "MatMul_that_is_gone:0"
    return g.SerializeToString()


BAD_FILES = {
    "empty.pb": (b"", "the file is empty"),
    "truncated.pb": (DATA[:len(DATA) // 2], "not a GraphDef, or a truncated"),
    "random.pb": (np.random.RandomState(0).bytes(4096), "not a GraphDef"),
    "notes.txt": (b"These are my notes about the model.\nNothing to parse.\n",
                  "not a GraphDef"),
    "duplicate.pb": (_duplicate(), "two nodes are named 'x'"),
    "dangling.pb": (_dangling(), "no node is named 'MatMul_that_is_gone'"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_files_name_the_file(tmp_path, name):
    data, match = BAD_FILES[name]
    path = _write(tmp_path / name, data)
    with pytest.raises(GraphDefError, match=match) as info:
        frozen.load(path)
    assert path in str(info.value)


def test_saved_model_file_and_directory(saved_model_dir):
    pb = str(saved_model_dir / "saved_model.pb")
    with pytest.raises(GraphDefError, match="this is a SavedModel") as info:
        frozen.load(pb)
    assert pb in str(info.value) and "convert_variables_to_constants_v2" in str(info.value)
    with pytest.raises(GraphDefError, match="is a directory.*SavedModel directory"):
        frozen.load(saved_model_dir)


def test_missing_file_and_plain_directory(tmp_path):
    with pytest.raises(GraphDefError, match="missing.pb: no such file"):
        frozen.load(tmp_path / "missing.pb")
    with pytest.raises(GraphDefError, match="is a directory"):
        frozen.load(tmp_path)


def test_save_refuses_to_overwrite_unless_told(tmp_path):
    path = tmp_path / "model.pb"
    frozen.save(GRAPH, path)
    other = graph_pb2.GraphDef()
    other.node.add(name="z", op="NoOp")
    with pytest.raises(GraphDefError, match="exists already.*overwrite=True"):
        frozen.save(other, path)
    with pytest.raises(GraphDefError, match="is the input file"):
        frozen.save(other, path, source=path)
    assert frozen.load(path) == GRAPH
    frozen.save(other, path, overwrite=True)
    assert frozen.load(path) == other
    assert _files(tmp_path) == ["model.pb"]


def test_save_into_a_missing_folder_or_a_directory(tmp_path):
    with pytest.raises(GraphDefError, match="folder .*does not exist"):
        frozen.save(GRAPH, tmp_path / "nope" / "model.pb")
    with pytest.raises(GraphDefError, match="is a directory"):
        frozen.save(GRAPH, tmp_path)
    assert _files(tmp_path) == []


def test_save_refuses_a_graph_over_the_protobuf_limit_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(_graphdef_io, "MAX_BYTES", len(DATA) - 1)
    with pytest.raises(GraphDefError, match="over protobuf's limit.*nothing was written"):
        frozen.save(GRAPH, tmp_path / "big.pb")
    assert _files(tmp_path) == []
    assert _graphdef_io.MAX_BYTES != frozen.MAX_BYTES == 2 ** 31 - 1


def test_save_leaves_no_partial_file_when_the_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "model.pb"
    path.write_bytes(b"old contents")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_graphdef_io.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        frozen.save(GRAPH, path, overwrite=True)
    assert path.read_bytes() == b"old contents"
    assert _files(tmp_path) == ["model.pb"]


def test_validate_in_memory_graph():
    g = graph_pb2.GraphDef.FromString(_duplicate())
    with pytest.raises(GraphDefError, match="<GraphDef>: two nodes are named 'x'"):
        frozen.validate(g)
    frozen.validate(GRAPH)  # no exception


def test_text_input_with_errors_names_the_file(tmp_path):
    path = _write(tmp_path / "bad.pbtxt", b'node { name: "x" op: "Placeholder" ')
    with pytest.raises(GraphDefError, match="bad.pbtxt: not a GraphDef"):
        frozen.load(path)


def _mutate(data, edits):
    out = bytearray(data)
    for kind, pos, value in edits:
        if not out:
            break
        pos %= len(out)
        if kind == 0:
            out[pos] = value
        elif kind == 1:
            out.insert(pos, value)
        elif kind == 2:
            del out[pos]
        else:
            del out[pos:]
    return bytes(out)


_EDITS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10 ** 6),
                            st.integers(0, 255)), min_size=1, max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=_EDITS)
def test_mutated_binary_graphdefs_give_a_graphdef_or_our_error(edits):
    data = _mutate(DATA, edits)
    try:
        graph_def = frozen.parse_graph_def(data, "fuzz.pb")
    except GraphDefError as e:
        assert "fuzz.pb" in str(e)
    else:
        frozen.validate(graph_def)
        frozen.inspect(graph_def)
        for apply in (frozen.patch, frozen.make_portable):
            try:
                apply(graph_def, "Sign=ste_sign", on_no_match="ignore")
            except GraphOverrideError:
                pass


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(position=st.integers(0, len(DATA) - 1), value=st.integers(0, 255))
def test_graphs_with_one_byte_changed_patch_or_raise_our_errors(position, value):
    """One changed byte often still parses (a name, an attr value, a dtype):
    patch and make_portable must then work or raise the project's errors."""
    data = _mutate(DATA, [(0, position, value)])
    try:
        graph_def = frozen.parse_graph_def(data, "fuzz.pb")
    except GraphDefError:
        return
    for apply in (frozen.patch, frozen.make_portable):
        try:
            new, _ = apply(graph_def, "Sign=ste_sign", on_no_match="ignore")
        except GraphOverrideError:
            continue
        frozen.validate(new)


TEXT = str(GRAPH).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=_EDITS)
def test_mutated_text_graphdefs_give_a_graphdef_or_our_error(edits):
    data = _mutate(TEXT, edits)
    try:
        graph_def = frozen.parse_graph_def(data, "fuzz.pbtxt")
    except GraphDefError as e:
        assert "fuzz.pbtxt" in str(e)
    else:
        frozen.inspect(graph_def)


# ---- What TensorFlow's importer refuses is refused at load -----------------

def _graph(*nodes, library=None):
    """A GraphDef from (name, op, inputs[, attrs]) tuples; T is float."""
    g = graph_pb2.GraphDef()
    for spec in nodes:
        name, op, inputs = spec[:3]
        node = g.node.add(name=name, op=op, input=inputs)
        node.attr["T"].type = tf.float32.as_datatype_enum
        for key, value in (spec[3] if len(spec) > 3 else {}).items():
            node.attr[key].CopyFrom(value)
    if library is not None:
        g.library.CopyFrom(library)
    return g


def _int_attr(i):
    return tf.compat.v1.AttrValue(i=i)


_X = ("x", "Placeholder", [])
_SPLIT = ("s", "Split", ["dim", "x"], {"num_split": _int_attr(3)})
_DIM = ("dim", "Const", [])

INVALID_GRAPHS = {
    "cycle": (_graph(_X, ("a", "Sign", ["b"]), ("b", "Neg", ["a"]), ("y", "Sign", ["b"])),
              r"nodes 'a' -> 'b' -> 'a' form a cycle"),
    "long_cycle": (_graph(_X, ("a", "AddV2", ["x", "c"]), ("b", "Sign", ["a"]),
                          ("c", "Neg", ["b"])), r"'a' -> 'b' -> 'c' -> 'a' form a cycle"),
    "reads_itself": (_graph(_X, ("a", "AddV2", ["x", "a"])),
                     r"node 'a' \(op AddV2\) has input 'a': the node reads its own output"),
    "waits_for_itself": (_graph(_X, ("a", "Sign", ["x", "^a"])),
                         r"input '\^a': the node reads its own control output"),
    "output_99": (_graph(_X, ("a", "Sign", ["x:99"])),
                  r"input 'x:99': node 'x' \(op Placeholder\) has only output 0, so "
                  r"output 99 does not exist"),
    "split_output_3": (_graph(_X, _DIM, _SPLIT, ("a", "Sign", ["s:3"])),
                       r"node 's' \(op Split\) has outputs 0..2 only, so output 3"),
    "unpack_default_count": (_graph(_X, ("u", "Unpack", ["x"], {"num": _int_attr(2)}),
                                    ("a", "Sign", ["u:2"])),
                             r"node 'u' \(op Unpack\) has outputs 0..1 only"),
    "noop_output": (_graph(_X, ("n", "NoOp", []), ("a", "Sign", ["n"])),
                    r"node 'n' \(op NoOp\) has no outputs, so output 0"),
    "dangling_control": (_graph(_X, ("a", "Sign", ["x", "^missing"])),
                         r"input '\^missing', but no node is named 'missing'"),
    "bad_port": (_graph(_X, ("a", "Sign", ["x:one"])), r"input 'x:one'"),
    "port_over_int32": (_graph(_X, ("a", "Sign", ["x:99999999999999999999"])),
                        r"the input 'x:9{20}' is malformed"),
    "newline_in_name": (_graph(_X, ("a\nb", "Sign", ["x"])),
                        r"node #1 has the invalid name 'a\\nb'"),
    "newline_in_op": (_graph(_X, ("a", "Sign\nNeg", ["x"])),
                      r"node 'a' has the invalid op type 'Sign\\nNeg'"),
}


@pytest.mark.parametrize("name", sorted(INVALID_GRAPHS))
def test_graphs_tensorflow_refuses_are_refused_naming_file_and_node(tmp_path, name, reader):
    graph_def, match = INVALID_GRAPHS[name]
    with pytest.raises(GraphDefError, match=match):
        frozen.validate(graph_def)
    path = _write(tmp_path / (name + ".pb"), graph_def.SerializeToString())
    with pytest.raises(GraphDefError, match=match) as info:
        frozen.load(path)
    assert str(info.value).startswith(path + ": ")
    # TensorFlow agrees: importing it fails too.
    with tf.Graph().as_default():
        with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
            tf.compat.v1.import_graph_def(graph_def, name="")


@pytest.mark.parametrize("name", ["cycle", "output_99", "dangling_control"])
def test_patch_command_refuses_them_with_exit_2_and_writes_nothing(tmp_path, capsys, name):
    from graph_override import cli  # pylint: disable=import-outside-toplevel
    path = _write(tmp_path / "model.pb", INVALID_GRAPHS[name][0].SerializeToString())
    code = cli.main(["patch", path, "-o", str(tmp_path / "out.pb"), "--map", "Sign=ste_sign"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "model.pb: node" in err and "wrote" not in err
    assert _files(tmp_path) == ["model.pb"]


def _while_loop_graph():
    """A TF1 while loop (control flow v1): its NextIteration -> Merge edges
    are the one legal kind of cycle."""
    enabled = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g:
            x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
            _, y = tf.compat.v1.while_loop(lambda i, v: i < 3,
                                           lambda i, v: (i + 1, tf.sign(v) * 0.5),
                                           [tf.constant(0), x])
            tf.identity(y, name="y")
    finally:
        if enabled:
            tf.compat.v1.enable_control_flow_v2()
    return g.as_graph_def()


def test_a_loop_lowered_by_freezing_is_not_a_cycle(tmp_path):
    """convert_variables_to_constants_v2 lowers a tf.function's while loop to
    TF1 control flow and may list the Merge after its NextIteration: the
    back edge then points forward in node order and must still be allowed."""
    import frozen_graphs  # pylint: disable=import-outside-toplevel
    graph_def, _, _, _ = frozen_graphs.frozen_tf_function()
    index = {n.name: i for i, n in enumerate(graph_def.node)}
    forward_back_edges = [
        n.name for n in graph_def.node if n.op == "Merge"
        for i in n.input if graph_def.node[index[i.split(":")[0]]].op == "NextIteration"
        and index[i.split(":")[0]] < index[n.name]]
    assert forward_back_edges  # the case this test is about
    path = tmp_path / "lowered.pb"
    frozen.save(graph_def, path)
    assert len(frozen.load(path).node) == len(graph_def.node)


def test_a_tf1_while_loop_is_not_a_cycle(tmp_path):
    graph_def = _while_loop_graph()
    ops = {n.op for n in graph_def.node}
    assert {"NextIteration", "Merge", "Enter", "Exit"} <= ops
    path = tmp_path / "loop.pb"
    frozen.save(graph_def, path)
    loaded = frozen.load(path)
    fixed, report = frozen.patch(loaded, ["Sign=ste_sign"])
    assert len(report.changes) == 1
    frozen.save(fixed, tmp_path / "fixed.pb")
    # Cutting the loop's back edge out of Merge and into a plain op is a cycle.
    broken = graph_pb2.GraphDef.FromString(fixed.SerializeToString())
    merge = next(n for n in broken.node if n.op == "Merge" and any(
        i.endswith("NextIteration") for i in n.input))
    merge.op = "Identity"
    merge.input[:] = [i for i in merge.input if i.endswith("NextIteration")]
    del merge.attr["N"]
    with pytest.raises(GraphDefError, match="form a cycle"):
        frozen.validate(broken)


def test_output_counts_that_cannot_be_computed_are_not_refused():
    """An input index is only refused when the producer's output count is
    known; validate raises GraphDefError otherwise (see the test below)."""
    unknown_op = _graph(_X, ("c", "SomeCustomOpNotRegisteredHere", ["x"]),
                        ("a", "Sign", ["c:5"]))
    no_attr = _graph(_X, _DIM, ("s", "Split", ["dim", "x"]), ("a", "Sign", ["s:7"]))
    # num_split missing: the count is unknown
    identity_n = _graph(_X, ("i", "IdentityN", ["x", "x"]), ("a", "Sign", ["i:1"]))
    del identity_n.node[1].attr["T"]
    refused = []
    for name, graph in (("unknown op", unknown_op), ("Split without num_split", no_attr),
                        ("IdentityN without T", identity_n)):
        try:
            frozen.validate(graph)
        except GraphDefError as e:
            refused.append((name, str(e)))
    assert refused == []


def test_output_counts_of_list_attrs_and_library_functions():
    types = tf.compat.v1.AttrValue()
    types.list.type.extend([tf.float32.as_datatype_enum] * 2)
    identity_n = _graph(_X, ("i", "IdentityN", ["x", "x"], {"T": types}),
                        ("a", "Sign", ["i:1"]), ("b", "Sign", ["i:2"]))
    with pytest.raises(GraphDefError, match=r"'i' \(op IdentityN\) has outputs 0..1 only"):
        frozen.validate(identity_n)

    library = function_pb2.FunctionDefLibrary()
    signature = library.function.add().signature
    signature.name = fname = "two_outputs"
    signature.input_arg.add(name="a", type=tf.float32.as_datatype_enum)
    for out in ("sum", "product"):
        signature.output_arg.add(name=out, type=tf.float32.as_datatype_enum)
    calls = _graph(_X, ("f", fname, ["x"]), ("a", "Sign", ["f:1"]),
                   library=library)
    frozen.validate(calls)
    calls.node[-1].input[0] = "f:2"
    with pytest.raises(GraphDefError, match=r"node 'f' \(op %s\) has outputs 0..1 only"
                       % fname):
        frozen.validate(calls)


def _with_unknown_field_in_node(graph_def, index):
    """The GraphDef's bytes with field 99 (unknown to NodeDef) in node `index`."""
    out = b""
    for i, node in enumerate(graph_def.node):
        body = node.SerializeToString() + (b"\x98\x06\x01" if i == index else b"")
        out += b"\x0a" + _varint(len(body)) + body
    return out


def _varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def test_unknown_fields_inside_a_node_are_refused(tmp_path):
    path = _write(tmp_path / "model.pb", _with_unknown_field_in_node(GRAPH, 2))
    with pytest.raises(GraphDefError, match=r"model.pb: node '%s' \(op %s\) holds fields "
                       r"that a NodeDef" % (GRAPH.node[2].name, GRAPH.node[2].op)):
        frozen.load(path)
    attr = GRAPH.node[1].attr["value"].SerializeToString() + b"\x98\x06\x01"
    bad = graph_pb2.GraphDef.FromString(DATA)
    bad.node[1].attr["value"].ParseFromString(attr)  # unknown field in an AttrValue
    path = _write(tmp_path / "attr.pb", bad.SerializeToString())
    with pytest.raises(GraphDefError, match="node 'w' .*holds fields"):
        frozen.load(path)


# ---- Reading: regular files only, bounded, format by content ---------------

def test_a_binary_graphdef_named_pbtxt_loads(tmp_path):
    path = _write(tmp_path / "model.pbtxt", DATA)
    assert frozen.load(path) == GRAPH
    path = _write(tmp_path / "broken.pbtxt", DATA[:len(DATA) // 2])
    with pytest.raises(GraphDefError, match="content looks binary although the name "
                       "says text; both formats were tried"):
        frozen.load(path)


def test_metagraph_files_get_a_freezing_hint(tmp_path):
    with tf.Graph().as_default() as g:
        v = tf.compat.v1.Variable(1.0, name="v")
        tf.sign(v, name="y")
        tf.compat.v1.train.Saver()
        for name, as_text in (("model.meta", False), ("model_meta.pbtxt", True)):
            tf.compat.v1.train.export_meta_graph(str(tmp_path / name), graph=g,
                                                 as_text=as_text)
    for name in ("model.meta", "model_meta.pbtxt"):
        path = str(tmp_path / name)
        with pytest.raises(GraphDefError, match="this is a MetaGraphDef") as info:
            frozen.load(path)
        assert str(info.value).startswith(path + ": ")
        assert "convert_variables_to_constants" in str(info.value)


def test_reading_stops_after_max_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(_graphdef_io, "MAX_BYTES", 100)
    path = _write(tmp_path / "big.pb", DATA)
    with pytest.raises(GraphDefError, match="big.pb: is over 100 bytes"):
        frozen.load(path)
    reads = []
    real_read = _graphdef_io.os.fdopen

    def counting_fdopen(*args, **kwargs):
        f = real_read(*args, **kwargs)

        class Counting:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

            def read(self, n=-1):
                reads.append(n)
                return f.read(n)
        return Counting()

    monkeypatch.setattr(_graphdef_io.os, "fdopen", counting_fdopen)
    with pytest.raises(GraphDefError, match="is over 100 bytes"):
        frozen.load(path)
    assert 0 < sum(reads) <= 101


_READ_SPECIAL = r"""
import os, sys
from graph_override import frozen
from graph_override.errors import GraphDefError
for path in sys.argv[1:]:
    try:
        frozen.load(path)
    except GraphDefError as e:
        print(e)
"""


def test_devices_and_pipes_are_refused_without_reading(tmp_path):
    fifo = str(tmp_path / "pipe.pb")
    os.mkfifo(fifo)  # no writer: opening it for reading would block
    out = warm_python.run([sys.executable, "-c", _READ_SPECIAL, "/dev/zero", fifo],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.splitlines() == [
        "/dev/zero: is a character device, not a regular file; expected a GraphDef file "
        "(.pb or .pbtxt). Nothing was read.",
        "%s: is a named pipe (FIFO), not a regular file; expected a GraphDef file "
        "(.pb or .pbtxt). Nothing was read." % fifo]


def test_messages_name_the_path_as_given_never_a_temporary_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write("given.pbtxt", b"node { name: 'x' op: 'Placeholder' } garbage")
    with pytest.raises(GraphDefError) as info:
        frozen.load("given.pbtxt")
    assert str(info.value).startswith("given.pbtxt: ")
    bad = graph_pb2.GraphDef.FromString(INVALID_GRAPHS["cycle"][0].SerializeToString())
    with pytest.raises(GraphDefError) as info:
        frozen.save(bad, "out.pb")
    assert str(info.value).startswith("out.pb (nothing was written): nodes ")
    assert ".tmp" not in str(info.value)
    assert _files(tmp_path) == ["given.pbtxt"]


# ---- Writing: exclusive, atomic, reproducible ------------------------------

def test_two_saves_racing_for_one_new_file_one_wins(tmp_path, monkeypatch):
    """Both pass check_output_path; the target appears before either's final
    step. Only one may report success; the other's result is not lost
    silently but refused."""
    target = str(tmp_path / "fixed.pb")
    barrier = threading.Barrier(2, timeout=60)
    real_validate = _graphdef_io.validate

    def validate_then_meet(*args, **kwargs):
        real_validate(*args, **kwargs)
        barrier.wait()

    monkeypatch.setattr(_graphdef_io, "validate", validate_then_meet)
    graphs = [GRAPH, _graph(_X, ("other", "Sign", ["x"]))]
    outcome = {}

    def save(k):
        try:
            frozen.save(graphs[k], target)
            outcome[k] = "wrote"
        except GraphDefError as e:
            outcome[k] = str(e)

    threads = [threading.Thread(target=save, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    winners = [k for k, v in outcome.items() if v == "wrote"]
    assert len(winners) == 1, outcome
    loser = outcome[1 - winners[0]]
    assert loser.startswith(target + ": appeared while the graph was being written")
    monkeypatch.undo()
    assert frozen.load(target) == graphs[winners[0]]
    assert _files(tmp_path) == ["fixed.pb"]
    frozen.save(graphs[1 - winners[0]], target, overwrite=True)  # --force replaces
    assert frozen.load(target) == graphs[1 - winners[0]]


_PATCH_ONCE = r"""
import sys
from graph_override import cli
sys.exit(cli.main(["patch", sys.argv[1], "-o", sys.argv[2], "--map", "Sign=ste_sign",
                   "--map", "Identity=flip_gradient:scale=0.5"]))
"""


@pytest.mark.slow
def test_patch_output_is_the_same_bytes_in_every_process(tmp_path):
    """Attr maps are hash tables whose order can differ per process; five
    fresh processes must still write identical files."""
    g = graph_pb2.GraphDef()
    g.CopyFrom(GRAPH)
    for i in range(20):
        node = g.node.add(name="id_%d" % i, op="Identity", input=["y"])
        for key in ("T", "_class", "_output_shapes", "zeta", "alpha"):
            node.attr[key].type = tf.float32.as_datatype_enum
    model = _write(tmp_path / "model.pb", g.SerializeToString())
    procs = [subprocess.Popen([sys.executable, "-c", _PATCH_ONCE, model,
                               str(tmp_path / ("out%d.pb" % k))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for k in range(5)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    outputs = {(tmp_path / ("out%d.pb" % k)).read_bytes() for k in range(5)}
    assert len(outputs) == 1
    # The bytes path keeps the input's bytes and appends the attrs: the
    # same graph as patch() gives.
    expected, _ = frozen.patch(frozen.load(model), ["Sign=ste_sign",
                                                    "Identity=flip_gradient:scale=0.5"])
    assert graph_pb2.GraphDef.FromString(outputs.pop()) == expected
