"""Reading and writing GraphDef files: every bad input gives a GraphDefError
that names the file, and nothing is ever half written."""

import os

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import graph_pb2

from graph_override import frozen
from graph_override.frozen import io as _graphdef_io
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
