"""Nodes inside a GraphDef's function library: functional While/If bodies
(control flow v2, tf.function frozen without lowering) and PartitionedCall
bodies. inspect lists them as FUNCTION/NODE, rules select them, and the
patched graphs differentiate with the new gradient; where an override
cannot take effect (a PartitionedCall body) patch refuses."""

import json

import numpy as np
import pytest
import tensorflow as tf

import frozen_graphs as fg
from graph_override import cli, frozen, tf2
from graph_override.errors import NoMatchError

DEAD = "CustomGradient-424242"


def _body(graph_def, prefix):
    names = [f.signature.name for f in graph_def.library.function
             if f.signature.name.startswith(prefix)]
    assert len(names) == 1, names
    return names[0]


@pytest.fixture(scope="module")
def cell():
    """A binarized recurrent cell in a frozen tf.function, its loop kept
    functional, and the same cell with the tf2 family's ste_sign."""
    graph_def, x, y, w = fg.frozen_tf_function(lower_control_flow=False)
    x_value = np.random.RandomState(1).randn(2, 4).astype(np.float32)
    xt = tf.constant(x_value)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        h = xt
        for _ in range(3):
            h = tf2.ste_sign(tf.matmul(h, w) + xt)
        total = tf.reduce_sum(h)
    return graph_def, x, y, x_value, tape.gradient(total, xt).numpy()


def test_inspect_lists_the_sign_in_a_while_body():
    graph_def, _, _ = fg.v2_while()
    report = frozen.inspect(graph_def)
    body = _body(graph_def, "while_body")
    assert [z["node"] for z in report.zero_gradients] == [body + "/Sign"]
    assert not report.ok and report.gradient_failures == []


@pytest.mark.parametrize("portable", [False, True])
def test_sign_in_a_while_body_is_patched(portable):
    graph_def, _, _ = fg.v2_while()
    body = _body(graph_def, "while_body")
    apply = frozen.make_portable if portable else frozen.patch
    fixed, report = apply(graph_def, "Sign=ste_sign")
    assert [(c.node, c.action) for c in report.changes] == [
        (body + "/Sign", "rewrite" if portable else "set")]
    y0, dx0 = fg.run(graph_def)
    y1, dx1 = fg.run(fixed, importer=None if portable else frozen.import_graph_def)
    np.testing.assert_array_equal(y1, y0)
    np.testing.assert_array_equal(dx0, [1.0, 1.0, 1.0])  # Sign's zero gradient
    # h <- ste_sign(h) + h twice from [-2, 0.5, 0]: h stays outside [-1, 1]
    # from -2; 0.5 leaves it after one step; 0 stays 0.
    np.testing.assert_array_equal(dx1, [1.0, 2.0, 4.0])
    assert frozen.inspect(fixed).zero_gradients == []


@pytest.mark.parametrize("portable", [False, True])
def test_sign_in_an_if_branch_is_patched(portable):
    graph_def, _, _ = fg.v2_cond()
    apply = frozen.make_portable if portable else frozen.patch
    fixed, _ = apply(graph_def, "Sign=ste_sign")
    _, dx = fg.run(fixed, importer=None if portable else frozen.import_graph_def)
    np.testing.assert_array_equal(dx, [0.0, 2.0, 2.0])  # 2 * [|x| <= 1]


@pytest.mark.parametrize("portable", [False, True])
def test_frozen_tf_function_matches_the_tf2_family(cell, portable):
    """Differentiating the original first, then the patched graph, in one
    process: the changed functions get new names, so TensorFlow's derived
    functions (while_cond_N_rewritten) do not clash."""
    graph_def, x, y, x_value, reference = cell
    _, dx0 = fg.run(graph_def, x_value, x, y)
    np.testing.assert_array_equal(dx0, 0.0)
    apply = frozen.make_portable if portable else frozen.patch
    fixed, report = apply(graph_def, "Sign=ste_sign")
    assert len(report.changes) == 1 and "/Sign" in report.changes[0].node
    old = {f.signature.name for f in graph_def.library.function}
    new = {f.signature.name for f in fixed.library.function}
    assert len(old) == len(new) == 2 and not old & new
    _, dx = fg.run(fixed, x_value, x, y,
                   importer=None if portable else frozen.import_graph_def)
    np.testing.assert_allclose(dx, reference, rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(dx) > 0


def test_rules_select_function_nodes_by_address():
    graph_def, _, _ = fg.v2_while()
    body = _body(graph_def, "while_body")
    _, report = frozen.patch(graph_def, frozen.parse_rule(
        "*=ste_sign", name_regex="^%s/Sign$" % body))
    assert [c.node for c in report.changes] == [body + "/Sign"]
    with pytest.raises(NoMatchError, match="selected no node"):
        frozen.patch(graph_def, frozen.parse_rule("Sign=ste_sign", name_regex="^Sign$"))


def test_dead_gradient_name_in_a_body_is_reported_and_repaired():
    graph_def, _, _ = fg.v2_while()
    body = _body(graph_def, "while_body")
    for function in graph_def.library.function:
        for node in function.node_def:
            if node.op == "Sign":
                node.attr[frozen.GRADIENT_ATTR].s = DEAD.encode()
    report = frozen.inspect(graph_def)
    assert [(f["node"], f["gradient"]) for f in report.gradient_failures] == [
        (body + "/Sign", DEAD)]
    assert report.gradient_names[0]["nodes"] == [body + "/Sign"]
    with pytest.raises(LookupError):
        fg.run(graph_def)
    fixed, report = frozen.patch(graph_def, "gradient:CustomGradient-*=ste_sign")
    assert [(c.before, c.action) for c in report.changes] == [(DEAD, "set")]
    _, dx = fg.run(fixed, importer=frozen.import_graph_def)
    np.testing.assert_array_equal(dx, [1.0, 2.0, 4.0])
    removed, _ = frozen.patch(graph_def, "gradient:CustomGradient-*=remove")
    _, dx = fg.run(removed)
    np.testing.assert_array_equal(dx, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("apply", [frozen.patch, frozen.make_portable])
def test_partitioned_call_body_is_refused(apply):
    """TensorFlow differentiates a PartitionedCall body with SymbolicGradient
    (C++), which ignores gradient names: setting one would be a silent
    no-op."""
    graph_def, _, _ = fg.graph_call()
    with pytest.raises(frozen.RuleError, match="PartitionedCall.*silently ignored.*"
                                               "convert_variables_to_constants_v2"):
        apply(graph_def, "Sign=ste_sign")
    report = frozen.inspect(graph_def)
    assert report.gradient_failures == []  # the call itself has a gradient
    assert "inside a PartitionedCall body" in report.zero_gradients[0]["reason"]


def test_a_name_set_in_a_partitioned_call_body_is_ignored_by_tensorflow():
    """Why the refusal: TensorFlow's own behaviour with such a name."""
    graph_def, _, _ = fg.graph_call()
    for function in graph_def.library.function:
        for node in function.node_def:
            if node.op == "Sign":
                node.attr[frozen.GRADIENT_ATTR].s = b"graph_override.ste_sign(clip_value=1.0)"
    _, dx = fg.run(graph_def, importer=frozen.import_graph_def)
    np.testing.assert_array_equal(dx, 0.0)


def test_cli_patches_a_while_body(tmp_path, capsys):
    graph_def, _, _ = fg.v2_while()
    body = _body(graph_def, "while_body")
    model = tmp_path / "model.pb"
    frozen.save(graph_def, model)
    assert cli.main(["inspect", str(model), "--json"]) == 1
    data = json.loads(capsys.readouterr()[0])
    assert data["zero_gradients"][0]["node"] == body + "/Sign"
    assert cli.main(["patch", str(model), "-o", str(tmp_path / "fixed.pb"),
                     "--map", "Sign=ste_sign", "--portable"]) == 0
    out, _ = capsys.readouterr()
    assert body + "/Sign" in out and "rewrite" in out
    _, dx = fg.run(frozen.load(tmp_path / "fixed.pb"))
    np.testing.assert_array_equal(dx, [1.0, 2.0, 4.0])


LIBRARY = """
node { name: "call" op: "PartitionedCall"
       attr { key: "f" value { func { name: "outer"
              attr { key: "g" value { func { name: "body" } } } } } } }
node { name: "direct" op: "body" }
library {
  function { signature { name: "outer" } node_def { name: "n" op: "body" } }
  function { signature { name: "body" } }
  function { signature { name: "branches" }
             node_def { name: "m" op: "StatelessIf" attr { key: "branches" value {
               list { func { name: "body" } func { name: "other" } } } } } }
  function { signature { name: "other" } }
  function { signature { name: "unrelated" } }
  gradient { function_name: "body" gradient_func: "other" }
}
"""


def _references(graph_def, old_names):
    """The library's function names, and every function name the graph
    refers to: calls by op type (to a function, or to one of `old_names`),
    function attrs at any depth, gradient entries."""
    functions = {f.signature.name for f in graph_def.library.function}
    refs = []

    def funcs(values):
        for value in values:
            for func in ([value.func] if value.HasField("func") else
                         value.list.func if value.HasField("list") else []):
                refs.append(func.name)
                funcs(func.attr.values())

    for nodes in [graph_def.node] + [f.node_def for f in graph_def.library.function]:
        for node in nodes:
            if node.op in functions or node.op in old_names:
                refs.append(node.op)
            funcs(node.attr.values())
    for gradient in graph_def.library.gradient:
        refs += [gradient.function_name, gradient.gradient_func]
    return functions, refs


@pytest.mark.parametrize("caller", ["patch", "to_function"])
def test_renamed_functions_leave_no_reference_to_an_old_name(caller):
    """patch's hash renaming and to_function's per-import renaming share one
    helper; a function named inside another function attr's attrs is
    renamed too."""
    from google.protobuf import text_format  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.patching import library  # pylint: disable=import-outside-toplevel
    from graph_override.frozen.tf2 import graph  # pylint: disable=import-outside-toplevel
    graph_def = text_format.Parse(LIBRARY, tf.compat.v1.GraphDef())
    original = graph_def.SerializeToString()
    if caller == "patch":
        mapping = library.rename_changed_functions(graph_def, {"body"})
        renamed = graph_def
        # "unrelated" neither calls nor is called next to "body".
        assert set(mapping) == {"body", "outer", "branches", "other"}
        assert len({new.rpartition("_go")[2] for new in mapping.values()}) == 1
        again = text_format.Parse(LIBRARY, tf.compat.v1.GraphDef())
        assert library.rename_changed_functions(again, {"body"}) == mapping  # deterministic
    else:
        renamed = graph.with_unique_function_names(graph_def)
        assert graph_def.SerializeToString() == original  # a copy; the input is kept
        assert all("_frozen_fn_" in f.signature.name for f in renamed.library.function)
    functions, refs = _references(renamed, {"body", "outer", "branches", "other",
                                            "unrelated"})
    assert len(refs) == 8
    assert set(refs) <= functions, sorted(set(refs) - functions)
