"""The stop_gradient form of an estimator, as NodeDefs to splice into a GraphDef.

For a node computing y from x, `stamp` returns nodes computing

    out = stop_gradient(y) - (stop_gradient(h) - h),  h = x_finite * stop_gradient(g(x))

which is y bit for bit (the bracket is exactly +0; -0.0 and NaN survive) and
whose gradient, in plain TensorFlow, is dy * g(x) into x: the identity of
`graph_override.stopgrad.apply_stop_gradient`, except that the forward value
is the node's own output instead of the estimator's forward function, so the
outputs of the whole graph stay bitwise identical (tf.sign(0) is 0, the
estimator's sign gives +1 there).

The ops are built once per (estimator, parameters, dtype) in a scratch
tf.Graph with the estimator's own gradient multiplier
(`graph_override.estimators.gradient_multiplier`), then copied with renamed
nodes, so the maths is the one the three families use.
"""

import functools

import tensorflow as tf
from tensorflow.core.framework import node_def_pb2

from graph_override import estimators

__all__ = ["stamp"]

_X, _Y, _OUT = "graph_override_x", "graph_override_y", "graph_override_out"


@functools.lru_cache(maxsize=64)
def _template(estimator, params_items, dtype_enum):
    """Serialized NodeDefs of the stop_gradient form; inputs named _X and _Y,
    the result named _OUT."""
    params = dict(params_items)
    dtype = tf.as_dtype(dtype_enum)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, name=_X)
        y = tf.compat.v1.placeholder(dtype, name=_Y)
        g = estimators.gradient_multiplier(estimator, x, params)
        finite_x = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
        h = finite_x if g is None else finite_x * tf.stop_gradient(g)
        tf.math.subtract(tf.stop_gradient(y), tf.stop_gradient(h) - h, name=_OUT)
    return tuple(n.SerializeToString() for n in graph.as_graph_def().node
                 if n.name not in (_X, _Y))


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
    """NodeDefs computing y's value with the estimator's gradient into x.

    Args:
      estimator: a linear estimator (not clip_gradient).
      params: its normalized parameters.
      dtype_enum: the DataType enum of x and y.
      x_ref, y_ref: the input strings of x and y ("node" or "node:1").
      prefix: name prefix of the helper nodes.
      out_name: the name of the node giving the result.
      device: device of the new nodes.

    Returns:
      A list of new `NodeDef` messages.
    """
    out = []
    for data in _template(estimator, tuple(params.items()), int(dtype_enum)):
        node = node_def_pb2.NodeDef.FromString(data)
        node.name = out_name if node.name == _OUT else prefix + node.name
        refs = [_rename(r, prefix, x_ref, y_ref, out_name) for r in node.input]
        del node.input[:]
        node.input.extend(refs)
        node.device = device
        out.append(node)
    return out
