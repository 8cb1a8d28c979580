"""The stop_gradient form of an estimator, as nodes to splice into a GraphDef.

For a node computing y from x, `stamp` returns nodes computing

    out = stop_gradient(y) - (stop_gradient(h) - h),  h = x_finite * stop_gradient(g(x))

which is y bit for bit (the bracket is exactly +0; -0.0 and NaN survive) and
whose gradient, in plain TensorFlow, is dy * g(x) into x:
`graph_override.stopgrad.stop_gradient_form`, with the forward value
is the node's own output instead of the estimator's forward function, so the
outputs of the whole graph stay bitwise identical (tf.sign(0) is 0, the
estimator's sign gives +1 there).

The ops are built once per (estimator, parameters, dtype) in a scratch
tf.Graph by that function, so the maths is the one the stopgrad family
uses; each rewrite then writes the template's nodes, with
new names and inputs, as serialized GraphDef fields.
"""

import collections

import tensorflow as tf
from tensorflow.core.framework import node_def_pb2

from graph_override import estimators, stopgrad

__all__ = ["stamp"]

_X, _Y, _OUT = "graph_override_x", "graph_override_y", "graph_override_out"


# (estimator name, params items, dtype enum) -> the template's nodes; the
# last _KEEP built are kept.
_TEMPLATES = collections.OrderedDict()
_KEEP = 64


def _template(spec, params_items, dtype_enum):
    """The stop_gradient form's nodes as (name, serialized op field, inputs,
    serialized attrs); inputs named _X and _Y, the result named _OUT.
    Built once per estimator (its record), parameters and dtype."""
    key = (spec.name, params_items, dtype_enum)
    nodes = _TEMPLATES.get(key)
    if nodes is None:
        nodes = _TEMPLATES[key] = _build_template(spec, params_items, dtype_enum)
        while len(_TEMPLATES) > _KEEP:
            _TEMPLATES.popitem(last=False)
    return nodes


def _build_template(spec, params_items, dtype_enum):
    params = dict(params_items)
    dtype = tf.as_dtype(dtype_enum)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, name=_X)
        y = tf.compat.v1.placeholder(dtype, name=_Y)
        stopgrad.stop_gradient_form(spec, x, y, params, name=_OUT)
    out = []
    for node in graph.as_graph_def().node:
        if node.name in (_X, _Y):
            continue
        attrs = node_def_pb2.NodeDef()
        for key, value in node.attr.items():
            attrs.attr[key].CopyFrom(value)
        out.append((node.name, _field(b"\x12", node.op.encode("utf-8")), tuple(node.input),
                    attrs.SerializeToString(deterministic=True)))
    return tuple(out)


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SHORT = [bytes((n,)) for n in range(0x80)]


def _field(tag, data):
    """A length-delimited protobuf field: tag byte, length, bytes."""
    n = len(data)
    return tag + (_SHORT[n] if n < 0x80 else _varint(n)) + data


def _rename(ref, prefix, x_ref, y_ref, out_name):
    control = ref.startswith("^")
    body = ref[1:] if control else ref
    node, sep, index = body.partition(":")
    if node == _X:
        new = x_ref if not control else x_ref.split(":")[0]
    elif node == _Y:
        new = y_ref if not control else y_ref.split(":")[0]
    else:
        new = (out_name if node == _OUT else prefix + node) + sep + index
    return ("^" if control else "") + new


def stamp(estimator, params, dtype_enum, *, x_ref, y_ref, prefix, out_name,
          device=""):
    """Serialized nodes computing y's value with the estimator's gradient into x.

    Args:
      estimator: a linear estimator (not clip_gradient): its name, or its
        record, which needs no look-up.
      params: its normalized parameters.
      dtype_enum: the DataType enum of x and y.
      x_ref, y_ref: the input strings of x and y ("node" or "node:1").
      prefix: name prefix of the helper nodes.
      out_name: the name of the node giving the result.
      device: device of the new nodes.

    Returns:
      (names of the new nodes, their bytes as GraphDef ``node`` fields): the
      bytes appended to a serialized GraphDef add the nodes to it. Written
      directly rather than through NodeDef messages, which would cost ten
      times as much for graphs with many rewritten nodes.
    """
    names, chunks = [], []
    tail = (_field(b"\x22", device.encode("utf-8")) if device else b"")
    for name, op_field, inputs, attrs in _template(estimators.spec(estimator),
                                                   tuple(params.items()), int(dtype_enum)):
        new_name = out_name if name == _OUT else prefix + name
        names.append(new_name)
        body = [_field(b"\x0a", new_name.encode("utf-8")), op_field]
        body += [_field(b"\x1a", _rename(r, prefix, x_ref, y_ref, out_name).encode("utf-8"))
                 for r in inputs]
        body += [tail, attrs]
        chunks.append(_field(b"\x0a", b"".join(body)))
    return names, b"".join(chunks)
