"""The DeepLIFT rules of MaxPool and Softmax (the records ``deeplift_maxpool``
and ``deeplift_softmax`` of `graph_override.estimators.table`): gradients
that read the op's batch [inputs; references] as ``deeplift_rescale`` does,
so that a network's attributions sum to f(x) - f(r) through max pooling and
a softmax, as SHAP's DeepExplainer defines them (``shap/explainers/_deep/
deep_tf.py``: ``maxpool``, ``softmax``) after Shrikumar et al. (ICML 2017).

MaxPool, for each pooling window with input x (output y) and reference r
(output y_r), c = max(y, y_r): the change y - y_r is split into c - y_r,
routed to the window's argmax in x, and y - c, routed to its argmax in r
(TensorFlow's MaxPoolGrad: the first maximum where several are equal); the
multiplier at each input position is the sum routed there over x - r, 0 where
|x - r| < threshold (SHAP's 1e-7). Each routed amount is 0 where x = r at
its position, so sum(m * (x - r)) = sum(dy * (y - y_r)) exactly.

Softmax, s = e / sum(e) with e = exp(z - max(z)) per row (the input z on
the last axis), decomposed as SHAP does: the exponential by the rescale rule
((e_x - e_r) / (zc_x - zc_r), its derivative e_x where |zc_x - zc_r| <
threshold), the quotient by the Shapley values of its two inputs: e_i gets
0.5 (1 / S_x + 1 / S_r) and the sum S gets -0.5 (e_x,i + e_r,i) / (S_x S_r)
(the closed form of SHAP's 0.5 (s(x, x) - s(x, r) + s(r, x) - s(r, r)) /
(S_x - S_r), which needs no guard), and the multipliers of the centred
input are carried to z by (zc_x - zc_r) / (z_x - z_r) where |z_x - z_r| >=
threshold (SHAP's 1e-6). As in SHAP, an input of the quotient that changes
by less than 1e-7 gets 0. The attributions sum to s(x) - s(r) exactly,
except where an input equals its reference (|z_x - z_r| < threshold) while
the two rows' maxima differ: that logit's share is then its multiplier
times a difference of 0 (SHAP's convention).

Both return the multipliers for the inputs' rows and the same for the
references' (SHAP's and Captum's tiling), or 0 for the one shared
reference row.
"""

import tensorflow as tf

from graph_override.estimators import attribution_ops
from graph_override.estimators.ops import const

__all__ = ["MAXPOOL_OPS", "SOFTMAX_OPS", "maxpool_forward", "maxpool_gradient",
           "pool_attrs", "softmax_gradient"]

MAXPOOL_OPS = ("MaxPool",)
"""The op types deeplift_maxpool covers."""

SOFTMAX_OPS = ("Softmax",)
"""The op types deeplift_softmax covers."""


def _window(value, data_format):
    """An int or a list of 2 or 4 ints as MaxPool's 4 ints."""
    if isinstance(value, int):
        value = [value, value]
    value = [int(v) for v in value]
    if len(value) == 4:
        return value
    return [1, 1] + value if data_format == "NCHW" else [1] + value + [1]


def pool_attrs(params):
    """MaxPool's attrs from `params` (the family functions' ints, or the
    op's own lists, which `attribution_ops.op_params` reads)."""
    data_format = params.get("data_format", "NHWC")
    return dict(ksize=_window(params["ksize"], data_format),
                strides=_window(params["strides"], data_format),
                padding=params["padding"], data_format=data_format,
                explicit_paddings=list(params.get("explicit_paddings", [])))


def maxpool_forward(x, params):
    """MaxPool with the params' window (one MaxPool op)."""
    attrs = pool_attrs(params)
    return tf.raw_ops.MaxPool(input=x, ksize=attrs["ksize"], strides=attrs["strides"],
                              padding=attrs["padding"],
                              explicit_paddings=attrs["explicit_paddings"],
                              data_format=attrs["data_format"])


def _halves(x, y, shared, rule):
    """(n, inputs of x, references of x, of y): the batch [inputs;
    references] split, the shared reference broadcast to n rows."""
    n = attribution_ops.batch_inputs(x, attribution_ops.where(y), shared, rule)
    x_in, x_ref, y_in, y_ref = x[:n], x[n:], y[:n], y[n:]
    if shared:
        rows = tf.stack([n] + [1] * (x.shape.rank - 1))
        x_ref, y_ref = tf.tile(x_ref, rows), tf.tile(y_ref, rows)
    return n, x_in, x_ref, y_in, y_ref


def _both(m, x, n, shared):
    """The inputs' multipliers for the whole batch: [m; m], or [m; 0]."""
    return tf.concat([m, tf.zeros_like(x[n:]) if shared else m], axis=0)


def maxpool_gradient(x, dy, params, y):
    """dx of MaxPool under DeepLIFT (see the module docstring); dy is read
    on the inputs' rows (the target is theirs)."""
    shared = params.get("shared_reference", False)
    n, x_in, x_ref, y_in, y_ref = _halves(x, y, shared, "deeplift_maxpool")
    dy_in = dy[:n]
    cross = tf.maximum(y_in, y_ref)
    attrs = pool_attrs(params)

    def routed(orig_input, orig_output, grad):
        return tf.raw_ops.MaxPoolGrad(orig_input=orig_input, orig_output=orig_output,
                                      grad=grad, **attrs)

    total = (routed(x_in, y_in, dy_in * (cross - y_ref))
             + routed(x_ref, y_ref, dy_in * (y_in - cross)))
    delta = x_in - x_ref
    small = tf.abs(delta) < const(params["threshold"], delta)
    safe = tf.where(small, tf.ones_like(delta), delta)
    m = tf.where(small, tf.zeros_like(delta), total / safe)
    return _both(m, x, n, shared)


def softmax_gradient(x, dy, params, y):  # pylint: disable=unused-argument
    """dx of Softmax (last axis) under DeepLIFT, SHAP's decomposition (see
    the module docstring)."""
    shared = params.get("shared_reference", False)
    n, z, r, _, _ = _halves(x, y, shared, "deeplift_softmax")
    threshold = const(params["threshold"], z)
    half = const(0.5, z)
    zc = z - tf.reduce_max(z, axis=-1, keepdims=True)
    rc = r - tf.reduce_max(r, axis=-1, keepdims=True)
    ex, er = tf.exp(zc), tf.exp(rc)
    sx = tf.reduce_sum(ex, axis=-1, keepdims=True)
    sr = tf.reduce_sum(er, axis=-1, keepdims=True)
    dy_in = dy[:n]
    # the quotient e / S: Shapley values of its two inputs, as multipliers,
    # 0 where the input does not change (SHAP's 1e-7)
    unchanged = const(1e-7, z)
    to_sum = tf.where(tf.abs(sx - sr) < unchanged, tf.zeros_like(sx), tf.reduce_sum(
        dy_in * -half * (ex + er), axis=-1, keepdims=True) / (sx * sr))
    to_e = tf.where(tf.abs(ex - er) < unchanged, tf.zeros_like(ex),
                    dy_in * half * (const(1.0, z) / sx + const(1.0, z) / sr)) + to_sum
    # the exponential: the rescale rule on the centred input
    dzc = zc - rc
    small_c = tf.abs(dzc) < threshold
    to_zc = to_e * tf.where(small_c, ex, (ex - er) / tf.where(small_c, tf.ones_like(dzc), dzc))
    # the centring: carried to z where z differs from r
    dz = z - r
    small = tf.abs(dz) < threshold
    m = tf.where(small, to_zc, to_zc * dzc / tf.where(small, tf.ones_like(dz), dz))
    return _both(m, x, n, shared)
