"""GraphDef bytes that repeat a singular field (`library`, `versions`,
`debug_info`) are valid protobuf: a parser merges the occurrences, and
TensorFlow sees every function of every `library`. `patch_file` must keep
what such a parse keeps, with either reader, and write the same bytes
whether the C reader is built or not."""

import pytest
from tensorflow.core.framework import graph_pb2

import frozen_graphs
from graph_override import frozen
from graph_override.frozen.graphdef import wire

_KINDS = {  # every graph kind of tests/frozen_graphs.py
    "v1_while": frozen_graphs.v1_while, "v1_cond": frozen_graphs.v1_cond,
    "v2_while": frozen_graphs.v2_while, "v2_cond": frozen_graphs.v2_cond,
    "frozen_tf_function": frozen_graphs.frozen_tf_function,
    "frozen_tf_function_functional": lambda: frozen_graphs.frozen_tf_function(
        lower_control_flow=False),
    "graph_call": frozen_graphs.graph_call, "keras_dense": frozen_graphs.keras_dense,
    "keras_lstm": frozen_graphs.keras_lstm,
    "keras_lstm_functional": lambda: frozen_graphs.keras_lstm(lower_control_flow=False),
    "fake_quant": frozen_graphs.fake_quant, "matmul": frozen_graphs.matmul,
    "one_hot": frozen_graphs.one_hot, "product": frozen_graphs.product,
}
_RULES = ["Sign=ste_sign", "Identity=flip_gradient"]


@pytest.fixture(scope="module")
def graphs():
    return {name: build()[0] for name, build in _KINDS.items()}


def _part(**fields):
    """One serialized GraphDef holding only `fields` (messages to copy)."""
    part = graph_pb2.GraphDef()
    for name, value in fields.items():
        getattr(part, name).CopyFrom(value)
    return part.SerializeToString()


def _sign_graph():
    g = graph_pb2.GraphDef()
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1
    y = g.node.add(name="y", op="Sign", input=["x"])
    y.attr["T"].type = 1
    return g


def _repeated(graphs, empty_last):
    """A Sign graph whose library comes in two `library` fields (the v2
    While's functions split between them, or all in the first and an empty
    `library {}` after it), and whose versions and debug_info come in two
    parts each."""
    functions = graphs["v2_while"].library.function
    first, second = graph_pb2.GraphDef(), graph_pb2.GraphDef()
    first.library.function.extend(functions if empty_last else functions[:1])
    second.library.function.extend([] if empty_last else functions[1:])
    versions = [graph_pb2.GraphDef(), graph_pb2.GraphDef()]
    versions[0].versions.producer = 27
    versions[1].versions.min_consumer = 12
    debug = [graph_pb2.GraphDef(), graph_pb2.GraphDef()]
    debug[0].debug_info.files.append("a.py")
    debug[1].debug_info.files.append("b.py")
    second_library = (b"\x12\x00" if empty_last
                      else _part(library=second.library))
    return (_sign_graph().SerializeToString() + _part(library=first.library)
            + second_library + _part(versions=versions[0].versions)
            + _part(versions=versions[1].versions)
            + _part(debug_info=debug[0].debug_info) + _part(debug_info=debug[1].debug_info))


@pytest.mark.usefixtures("reader")
@pytest.mark.parametrize("empty_last", [True, False], ids=["empty_library_last", "split"])
def test_patch_keeps_every_function_of_repeated_library_fields(tmp_path, graphs, empty_last):
    data = _repeated(graphs, empty_last)
    merged = graph_pb2.GraphDef.FromString(data)  # protobuf's own merge
    assert len(merged.library.function) == len(graphs["v2_while"].library.function) == 2
    assert (merged.versions.producer, merged.versions.min_consumer) == (27, 12)
    assert list(merged.debug_info.files) == ["a.py", "b.py"]
    model = tmp_path / "model.pb"
    model.write_bytes(data)
    report = frozen.patch_file(str(model), str(tmp_path / "out.pb"), ["Sign=ste_sign"])
    expected, expected_report = frozen.patch(merged, ["Sign=ste_sign"])
    # The Sign inside the While body is patched too: the library was seen.
    assert [c.node for c in report.changes] == [c.node for c in expected_report.changes]
    assert len(report.changes) == 2
    out = graph_pb2.GraphDef.FromString((tmp_path / "out.pb").read_bytes())
    assert len(out.library.function) == 2
    assert out.versions == merged.versions
    assert out.debug_info == merged.debug_info
    assert out == expected


def _patched_bytes(model, out, rules, c_reader, monkeypatch):
    with monkeypatch.context() as m:
        if not c_reader:
            m.setattr(wire, "_scan", None)
        frozen.patch_file(model, out, rules, on_no_match="ignore", allow_replace=True)
    with open(out, "rb") as f:
        return f.read()


@pytest.mark.parametrize("empty_library", [False, True], ids=["as_built", "empty_library"])
@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_the_output_is_the_same_with_and_without_the_c_reader(tmp_path, monkeypatch,
                                                              graphs, kind, empty_library):
    """Also with an empty ``library {}`` after the nodes, as many real frozen
    models carry (a second, empty one where the graph has functions)."""
    if not wire.speedups():
        pytest.skip("the C reader graph_override.frozen.graphdef._scan is not built")
    model = str(tmp_path / "model.pb")
    with open(model, "wb") as f:
        f.write(graphs[kind].SerializeToString() + (b"\x12\x00" if empty_library else b""))
    # A PartitionedCall body refuses gradient names: patch only the top level there.
    rules = ([frozen.parse_rule(r, name_regex="^[^_]") for r in _RULES]
             if kind == "graph_call" else _RULES)
    with_c = _patched_bytes(model, str(tmp_path / "c.pb"), rules, True, monkeypatch)
    without = _patched_bytes(model, str(tmp_path / "python.pb"), rules, False, monkeypatch)
    assert with_c == without
