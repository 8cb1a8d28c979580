"""GraphDefs a hostile or damaged file may hold, made in memory: a library
function that calls itself (TensorFlow's import would crash on it), a Const
or a colocation attr TensorFlow cannot use. Shared by the tests of
graph_override.attribution and of `graph-override explain`."""

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

W = np.array([[1.0, -2.0], [0.5, 1.0]], np.float32)

_CALL = ('attr { key: "Tin" value { list { type: DT_FLOAT } } } '
         'attr { key: "Tout" value { list { type: DT_FLOAT } } } '
         'attr { key: "f" value { func { name: "%s" } } }')


def _function(name, callee, how):
    body = ('node_def { name: "c" op: "%s" input: "a" }' % callee if how == "op" else
            'node_def { name: "c" op: "PartitionedCall" input: "a" %s }' % (_CALL % callee))
    out = "c:b:0" if how == "op" else "c:output:0"
    return ('function { signature { name: "%s" input_arg { name: "a" type: DT_FLOAT } '
            'output_arg { name: "b" type: DT_FLOAT } } %s ret { key: "b" value: "%s" } }'
            % (name, body, out))


def recursive_graph(ring=("F",), how="op"):
    """x -> y, where y calls library function ring[0], which calls
    ring[1], ... and the last calls ring[0] again: as a node of op type F
    (how="op") or a PartitionedCall (how="call"). TensorFlow's import
    recurses without end on it (SIGSEGV)."""
    text = ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
            'node { name: "y" op: "%s" input: "x" %s }' % (
                (ring[0], "") if how == "op" else ("PartitionedCall", _CALL % ring[0]))
            + "library { %s }" % " ".join(
                _function(name, ring[(i + 1) % len(ring)], how) for i, name in enumerate(ring)))
    return text_format.Parse(text, graph_pb2.GraphDef())


def _damage(node, how):
    tensor = node.attr["value"].tensor
    if how == "fill":  # a few bytes that claim 2 TiB
        tensor.ClearField("tensor_content")
        tensor.float_val[:] = [1.0]
        tensor.tensor_shape.dim[1].size = 2 ** 38
    elif how == "short":
        tensor.tensor_content = b"\0" * 7
    elif how == "negative":
        tensor.tensor_shape.dim[0].size = -3
    elif how == "dtype":
        tensor.dtype = tf.float64.as_datatype_enum
    elif how == "strings":  # TensorFlow aborts the process on this one
        tensor.ClearField("tensor_content")
        tensor.dtype = tf.string.as_datatype_enum
        tensor.string_val.append(b"a")
    elif how == "colocation":
        node.attr["_class"].list.s.append(b"loc:@missing")


def damaged_model(how):
    """x -> MatMul(x, Const w) -> logits, with w damaged as `how` says."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.identity(tf.matmul(x, tf.constant(W, name="w")), name="logits")
    graph_def = g.as_graph_def()
    _damage(next(n for n in graph_def.node if n.name == "w"), how)
    return graph_def


def refuse_imports(monkeypatch):
    """Makes TensorFlow's import of a GraphDef fail loudly (AssertionError):
    a refusal must come first. Importing a recursive graph would kill the
    test process, and running a damaged Const abort it; with this, code
    that lacks the refusal fails the test instead."""
    def refused(*args, **kwargs):
        raise AssertionError("TensorFlow was asked to import the graph")

    monkeypatch.setattr(tf.compat.v1, "import_graph_def", refused)
