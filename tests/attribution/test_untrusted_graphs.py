"""A GraphDef from elsewhere, explained: the ops it would run that reach
outside the model are refused unless allowed by name (allow_ops=), a
library function that calls itself is refused before TensorFlow imports
it (which would kill the process), and a damaged Const or colocation attr
is a GraphDefError, not a crash or a TensorFlow traceback."""

import numpy as np
import pytest
import tensorflow as tf

from untrusted_graphs import damaged_model, recursive_graph, refuse_imports
from graph_override import attribution, frozen
from graph_override.attribution import saved_models
from graph_override.commands import explain
from graph_override.errors import AttributionError, ConversionError, GraphDefError

W = np.array([[1.0, -2.0], [0.5, 1.0]], np.float32)
X = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)


def _file_ops_model(folder):
    """x -> MatMul -> logits, whose output needs (control inputs) a WriteFile
    of `folder`/written.txt and a ReadFile of `folder`/secret.txt."""
    (folder / "secret.txt").write_text("secret")
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        write = tf.io.write_file(str(folder / "written.txt"), "pwned", name="write")
        read = tf.io.read_file(str(folder / "secret.txt"), name="read")
        with tf.control_dependencies([write, read]):
            tf.identity(tf.matmul(x, W), name="logits")
        # Off the path: nothing the output needs.
        tf.io.write_file(str(folder / "unused.txt"), "never", name="unused_write")
    path = folder / "model.pb"
    frozen.save(g.as_graph_def(), str(path))
    return path


def test_file_ops_on_the_path_are_refused_and_nothing_is_written(tmp_path):
    path = _file_ops_model(tmp_path)
    with pytest.raises(AttributionError) as info:
        attribution.saliency(str(path), X, 0, inputs="x:0", outputs="logits:0")
    message = str(info.value)
    for text in ("node 'write' (WriteFile), which writes files",
                 "node 'read' (ReadFile), which reads files", "nothing was run",
                 "allow_ops=['ReadFile', 'WriteFile']",
                 "--allow-op ReadFile --allow-op WriteFile"):
        assert text in message, (text, message)
    assert "unused_write" not in message  # off the path: not run, not refused
    assert not (tmp_path / "written.txt").exists()


def test_ops_allowed_by_name_run(tmp_path):
    path = _file_ops_model(tmp_path)
    with pytest.raises(AttributionError, match=r"allow_ops=\['ReadFile'\]"):
        attribution.Explainer(str(path), inputs="x", outputs="logits", allow_ops=["WriteFile"])
    assert not (tmp_path / "written.txt").exists()
    result = attribution.saliency(str(path), X, 0, inputs="x", outputs="logits",
                                  allow_ops=["WriteFile", "ReadFile"], abs=False)
    np.testing.assert_allclose(result.maps, np.tile(W[:, 0], (2, 1)))
    assert (tmp_path / "written.txt").read_text() == "pwned"  # the user allowed it
    assert not (tmp_path / "unused.txt").exists()  # off the path: never run


def test_a_file_op_inside_a_function_body_is_refused(tmp_path):
    target = str(tmp_path / "written.txt")

    @tf.function
    def inner(t):
        tf.io.write_file(target, "pwned")
        return t * 2.0

    @tf.function
    def outer(t):
        return inner(t) + 1.0

    concrete = outer.get_concrete_function(tf.TensorSpec([None, 2], tf.float32))
    graph_def = concrete.graph.as_graph_def()
    inputs, outputs = concrete.inputs[0].name, concrete.outputs[0].name
    with pytest.raises(AttributionError, match=r"/\w+' \(WriteFile\), which writes files"):
        attribution.Explainer(graph_def, inputs=inputs, outputs=outputs)
    with pytest.raises(AttributionError, match="allow_ops=\\['WriteFile'\\]"):
        attribution.gradient_input(graph_def, X, 0, inputs=inputs, outputs=outputs)
    assert not (tmp_path / "written.txt").exists()


def test_grad_cam_refuses_what_its_layer_needs(tmp_path):
    """The layer's own function runs what the layer depends on."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="x")
        read = tf.io.read_file(str(tmp_path / "nothing.txt"), name="read")
        h = tf.nn.relu(x, name="h")
        with tf.control_dependencies([read]):
            side = tf.identity(h, name="side")  # a 4-D tensor off the output's path
        tf.reduce_sum(h, axis=[1, 2], name="logits")
    explainer = attribution.Explainer(g.as_graph_def(), inputs="x", outputs="logits")
    with pytest.raises(AttributionError, match="node 'read' \\(ReadFile\\)"):
        explainer.attribute("grad_cam", np.ones((1, 4, 4, 1), np.float32), 0, layer=side.name)


def test_allow_ops_takes_op_type_names():
    assert saved_models.op_names("ReadFile") == ("ReadFile",)
    assert saved_models.op_names(["ReadFile", "PrintV2"]) == ("ReadFile", "PrintV2")
    with pytest.raises(AttributionError, match="expected op type names"):
        attribution.Explainer(lambda t: t, allow_ops=[1])
    with pytest.raises(AttributionError, match="give no inputs=.*allow_ops="):
        attribution.saliency(attribution.Explainer(lambda t: t), X, allow_ops=["ReadFile"])


def test_a_model_without_such_ops_needs_no_allowance():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.identity(tf.matmul(x, W), name="logits")
    result = attribution.saliency(g.as_graph_def(), X, 1, inputs="x", outputs="logits",
                                  abs=False)
    np.testing.assert_allclose(result.maps, np.tile(W[:, 1], (2, 1)))


# --- a library function that calls itself ---------------------------------

@pytest.fixture
def no_import(monkeypatch):
    """TensorFlow's import of a GraphDef fails loudly: a refusal must come
    first (importing these graphs would kill the test process)."""
    refuse_imports(monkeypatch)


@pytest.mark.parametrize("ring, how", [(("F",), "op"), (("F",), "call"),
                                       (("F", "G", "H"), "call")],
                         ids=["itself", "itself-by-call", "a-ring-of-three"])
def test_a_function_that_calls_itself_is_refused_before_tensorflow_imports_it(
        tmp_path, no_import, ring, how):
    graph_def = recursive_graph(ring, how)
    path = tmp_path / "recursive.pb"
    path.write_bytes(graph_def.SerializeToString())
    for model in (graph_def, str(path)):
        with pytest.raises(ConversionError, match="library function '%s' calls itself" % ring[0]):
            attribution.saliency(model, np.ones((1, 2), np.float32), inputs="x", outputs="y")
    with pytest.raises(ConversionError, match="calls itself \\(%s\\)" % " -> ".join(
            repr(n) for n in ring + ring[:1])):
        frozen.to_function(graph_def, ["x"], ["y"])


def test_a_call_cycle_is_found_at_any_depth():
    from graph_override.frozen.graphdef.functions import call_cycle  # pylint: disable=import-outside-toplevel
    ring = tuple("F%d" % i for i in range(3000))  # deeper than Python's recursion limit
    assert call_cycle(recursive_graph(ring, "call")) == list(ring) + [ring[0]]
    chain = recursive_graph(ring, "call")
    del chain.library.function[-1].node_def[:]  # the last calls nothing: no ring
    assert call_cycle(chain) is None


def test_inspect_method_refuses_it_too(tmp_path, capsys, no_import):
    from graph_override import cli  # pylint: disable=import-outside-toplevel
    path = tmp_path / "recursive.pb"
    path.write_bytes(recursive_graph(("F",), "call").SerializeToString())
    assert cli.main(["inspect", str(path), "--method", "saliency"]) == 1
    err = capsys.readouterr().err
    assert "library function 'F' calls itself" in err and err.count("\n") == 1


# --- damaged Consts and colocation ----------------------------------------

@pytest.mark.parametrize("how, message", [
    ("fill", "Const 'w' claims 2199023255552 bytes"),
    ("short", "Const 'w' packs 7 bytes for shape [2, 2] of 16 bytes"),
    ("negative", "Const 'w' has the shape [-3, 2], which no value has"),
    ("dtype", "Const 'w' is declared float32 but its value is float64"),
    ("strings", "Const 'w' is declared float32 but its value is string"),
    ("colocation", "node 'w' is to be colocated with node 'missing'"),
])
def test_a_damaged_const_or_colocation_is_refused_before_tensorflow_runs_it(
        no_import, how, message):
    with pytest.raises(GraphDefError, match=r"^<GraphDef>: " + message.replace("[", r"\[")
                       .replace("]", r"\]")):
        attribution.Explainer(damaged_model(how), inputs="x", outputs="logits")


def test_convert_refuses_a_colocation_with_a_missing_node():
    with pytest.raises(GraphDefError, match="to be colocated with node 'missing'"):
        frozen.to_function(damaged_model("colocation"), ["x"], ["logits"])


def test_a_graph_tensorflow_refuses_to_import_is_a_graph_def_error():
    """What no check here foresees still comes out as one GraphDefError."""
    graph_def = damaged_model(None)
    node = next(n for n in graph_def.node if n.name == "logits")
    node.attr["T"].type = tf.int32.as_datatype_enum  # Identity of a float as int32
    with pytest.raises(GraphDefError, match="^<GraphDef>: TensorFlow cannot import the graph"):
        frozen.to_function(graph_def, ["x"], ["logits"])


def test_the_cli_names_the_flag():
    parser = __import__("argparse").ArgumentParser()
    explain.configure(parser)
    args = parser.parse_args(["m.pb", "--inputs", "x", "--outputs", "y", "--method", "saliency",
                              "--data", "x.npy", "-o", "o.npy", "--allow-op", "ReadFile",
                              "--allow-op", "WriteFile"])
    assert args.allow_ops == ["ReadFile", "WriteFile"]
