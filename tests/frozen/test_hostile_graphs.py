"""Graphs and arguments that used to end in a traceback or a machine out of
memory: an op TensorFlow does not know inside a library function, a Const
that claims terabytes, None where a list belongs, a negative trainable."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, tensor_pb2

from graph_override import cli, frozen
from graph_override.errors import ConversionError, GraphDefError, RuleError
from graph_override.frozen.graphdef import consts


def _fill_model(elements):
    """x * w, w a Const of `elements` float32 values, all of them 1.0, stored
    as one value: the file is some 130 bytes."""
    g = graph_pb2.GraphDef()
    n = g.node.add(name="x", op="Placeholder")
    n.attr["dtype"].type = 1
    n.attr["shape"].shape.dim.add(size=1)
    c = g.node.add(name="w", op="Const")
    c.attr["dtype"].type = 1
    t = c.attr["value"].tensor
    t.dtype = 1
    t.tensor_shape.dim.add(size=elements)
    t.float_val.append(1.0)
    g.node.add(name="y", op="Mul", input=["x", "w"]).attr["T"].type = 1
    return g


@pytest.mark.parametrize("elements, words", [(2 ** 40, "more than a GraphDef can hold"),
                                             (2 ** 28 - 1, "refusing to allocate it")])
def test_convert_refuses_a_const_that_claims_too_much(tmp_path, capsys, elements, words):
    model = tmp_path / "model.pb"
    model.write_bytes(_fill_model(elements).SerializeToString())
    assert model.stat().st_size < 200
    code = cli.main(["convert", str(model), "-o", str(tmp_path / "saved"), "--inputs", "x",
                     "--outputs", "y", "--trainable", "w"])
    err = capsys.readouterr().err
    assert code == 2 and "Const 'w'" in err and words in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pb"]


def test_a_small_fill_is_still_trainable():
    fn = frozen.to_function(_fill_model(1000), ["x"], ["y"], trainable="w")
    np.testing.assert_array_equal(fn.weights[0].numpy(), np.ones(1000, np.float32))


@pytest.mark.parametrize("dims, claimed", [([], 4), ([0], 0), ([3, 0, 5], 0), ([2, 3], 24)])
def test_claimed_bytes_at_the_edges(dims, claimed):
    t = tensor_pb2.TensorProto(dtype=1)
    for d in dims:
        t.tensor_shape.dim.add(size=d)
    assert consts.claimed_bytes(t)[0] == claimed
    consts.check_claim("c", t, "m.pb")  # none of these is refused


def test_the_bounds_are_inclusive():
    t = tensor_pb2.TensorProto(dtype=4)  # uint8: one byte an element
    t.tensor_shape.dim.add(size=consts.MAX_FILL_BYTES + t.ByteSize() + 8)
    stored = t.ByteSize()
    t.tensor_shape.dim[0].size = consts.MAX_FILL_BYTES + stored
    assert t.ByteSize() == stored
    consts.check_claim("c", t, "m.pb")
    t.tensor_shape.dim[0].size += 1
    with pytest.raises(GraphDefError, match="fills"):
        consts.check_claim("c", t, "m.pb")
    t.tensor_shape.dim[0].size = -1
    with pytest.raises(GraphDefError, match="which no value has"):
        consts.check_claim("c", t, "m.pb")


def _loop_with_unknown_op():
    @tf.function
    def f(x):
        def body(i, v):
            return i + 1, tf.sign(v) * 2.0
        return tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1]

    g = f.get_concrete_function(tf.TensorSpec([2], tf.float32)).graph.as_graph_def()
    for function in g.library.function:
        for node in function.node_def:
            if node.op == "Mul":
                node.op = "NoSuchOp"
    return g


@pytest.mark.parametrize("portable", [False, True])
def test_patch_of_a_graph_with_an_unknown_op_in_a_body_has_no_traceback(tmp_path, capsys,
                                                                        portable):
    model = tmp_path / "model.pb"
    model.write_bytes(_loop_with_unknown_op().SerializeToString())
    code = cli.main(["patch", str(model), "-o", str(tmp_path / "out.pb"), "--map",
                     "Sign=ste_sign"] + (["--portable"] if portable else []))
    out, err = capsys.readouterr()
    assert "NoSuchOp" in out + err
    if portable:  # the stop_gradient form must import: it cannot here
        assert code == 1 and "does not import into TensorFlow" in err
    else:  # names set, written as it is, with a warning
        assert code == 0 and "unknown op type NoSuchOp" in out


def test_none_for_rules_inputs_or_outputs_says_what_is_expected():
    g = _fill_model(2)
    with pytest.raises(RuleError, match=r"rules: expected a list of rules .* got None"):
        frozen.patch(g, None)
    with pytest.raises(RuleError, match="got None"):
        frozen.make_portable(g, None)
    with pytest.raises(ConversionError, match=r"inputs must be a list of tensor names"):
        frozen.to_function(g, None, ["y"])
    with pytest.raises(ConversionError, match=r"outputs must be a list of tensor names"):
        frozen.to_function(g, ["x"], None)


def test_a_negative_trainable_is_refused_and_zero_takes_every_const():
    g = _fill_model(2)
    with pytest.raises(ConversionError, match="trainable=-1: .* cannot be negative"):
        frozen.to_function(g, ["x"], ["y"], trainable=-1)
    assert len(frozen.to_function(g, ["x"], ["y"], trainable=0).weights) == 1
