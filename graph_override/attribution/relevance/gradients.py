"""The gradient functions that carry relevance backwards: registered once,
set on the nodes of the prepared graph (`prepare`) by name, each reading
what it needs from its node's attributes.

* `layer_gradient` on a layer op: the node's rule (``_lrp_rule``, the text
  of `rules.LayerRule.encode`; z_box's bounds in ``_lrp_low`` and
  ``_lrp_high``), its bias the BiasAdd after it (``_lrp_bias``), its input
  known to be non-negative or not (``_lrp_nonneg``);
* `proportional_gradient` on AvgPool, Mean, Sum, a residual AddV2 or AddN
  and (as an option) MaxPool: each input gets relevance in proportion to
  its share of the output, x * g^T(R / stab(g(x))) with g the op (Zennit's
  `Norm`);
* `pass_gradient` on activations and on elementwise shifts and scalings
  that no layer took in: the relevance passes unchanged (Zennit's `Pass`).

The gradient of the whole graph, started from the target output's
relevance, is then the relevance of the input.
"""

import tensorflow as tf

from graph_override import registry
from graph_override._tensorflow import compat
from graph_override.attribution.relevance import layer_math, rules

__all__ = ["LAYER", "PASS", "PROPORTIONAL", "layer_gradient", "pass_gradient",
           "proportional_gradient"]


def _attr(op, key, default=None):
    try:
        return op.get_attr(key)
    except ValueError:
        return default


def layer_gradient(op, dy):
    """The relevance of a layer op's input under its node's rule."""
    name, params = rules.decode(_attr(op, "_lrp_rule").decode())
    lay = layer_math.layer(op)
    z, bias = op.outputs[0], None
    if _attr(op, "_lrp_bias", False):
        (add,) = [c for c in op.outputs[0].consumers() if c.type == "BiasAdd"]
        z, bias = add.outputs[0], add.inputs[1]
    low = high = None
    if name == "z_box":
        low = tf.constant(tf.make_ndarray(_attr(op, "_lrp_low")), lay.x.dtype)
        high = tf.constant(tf.make_ndarray(_attr(op, "_lrp_high")), lay.x.dtype)
    r_in = layer_math.relevance(name, params, lay, dy, z, bias,
                                bool(_attr(op, "_lrp_nonneg", False)), low, high)
    grads = [None] * len(op.inputs)
    grads[lay.data_index] = r_in
    return grads


def proportional_gradient(op, dy):
    """Each live input's share of the relevance (``_lrp_live``: which
    inputs depend on the model's input)."""
    live = list(_attr(op, "_lrp_live", [True] * len(op.inputs)))
    stabilizer = float(_attr(op, "_lrp_stabilizer", 1e-6))
    s = dy / layer_math.stabilize(op.outputs[0], stabilizer)
    if op.type in ("MaxPool", "MaxPoolV2"):
        # proportional max pooling: the window's sum shared out, as an
        # average pool's transpose computes it (its count cancels)
        x = op.inputs[0]
        ksize, strides = (_attr(op, "ksize"), _attr(op, "strides")) if op.type == "MaxPool" \
            else (op.inputs[1], op.inputs[2])
        avg = tf.raw_ops.AvgPool(value=x, ksize=ksize, strides=strides,
                                 padding=_attr(op, "padding"),
                                 data_format=_attr(op, "data_format"))
        s = dy / layer_math.stabilize(avg, stabilizer)
        grad = tf.raw_ops.AvgPoolGrad(orig_input_shape=tf.shape(x), grad=s, ksize=ksize,
                                      strides=strides, padding=_attr(op, "padding"),
                                      data_format=_attr(op, "data_format"))
        return [x * grad] + [None] * (len(op.inputs) - 1)
    grads = compat.lookup_gradient(op.type)(op, s)
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    return [x * g if (g is not None and keep) else None
            for x, g, keep in zip(op.inputs, grads, live)]


def pass_gradient(op, dy, *unused):
    """The relevance unchanged to the op's live input (``_lrp_live``; the
    first where the node does not say); an op's other outputs (a
    FusedBatchNorm's statistics) carry none."""
    live = list(_attr(op, "_lrp_live", [True] + [False] * (len(op.inputs) - 1)))
    return [dy if keep else None for keep in live]


LAYER = registry.register_gradient(layer_gradient, name="graph_override.lrp.layer")
PROPORTIONAL = registry.register_gradient(proportional_gradient,
                                          name="graph_override.lrp.proportional")
PASS = registry.register_gradient(pass_gradient, name="graph_override.lrp.pass")
