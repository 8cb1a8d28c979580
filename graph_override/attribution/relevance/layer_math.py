"""The LRP rules of `rules` as TensorFlow ops, on one layer op of a graph.

`layer(op)` reads a layer op (MatMul, Conv2D, DepthwiseConv2dNative,
Conv2DBackpropInput) as f(x, W) and its transpose f^T(s, W), both built from
the op's own attributes (strides, padding, dilations, transposes), so the
modified forward passes and the backward pass of each rule are the op's
own computation with other inputs and weights. `relevance` is a rule's
formula. Where the layer's input is known to be non-negative (it comes from
a ReLU), the x- terms are left out: they are exactly zero.
"""

import tensorflow as tf

__all__ = ["LAYER_OPS", "Layer", "layer", "relevance", "stabilize"]

LAYER_OPS = ("MatMul", "Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput")
"""The op types a layer is made of (with the BiasAdd after it)."""

SAFE_DIVIDE = 1e-7
"""What a stabilizer of 0 divides by where z is exactly 0 (Keras's epsilon,
iNNvestigate's ``safe_divide``)."""


class Layer:
    """One layer op as x, W, f(x, W) and f^T(s, W)."""

    def __init__(self, op):
        t = op.type
        self.data_index = 2 if t == "Conv2DBackpropInput" else 0
        self.x = op.inputs[self.data_index]
        self.w = op.inputs[1]
        attrs = {k: op.get_attr(k) for k in _ATTRS[t] if _has_attr(op, k)}
        x = self.x
        if t == "MatMul":
            tb = attrs["transpose_b"]
            self.forward = lambda a, k: tf.linalg.matmul(a, k, transpose_b=tb)
            self.transpose = lambda s, k: tf.linalg.matmul(s, k, transpose_b=not tb)
        elif t == "Conv2D":
            self.forward = lambda a, k: tf.raw_ops.Conv2D(input=a, filter=k, **attrs)
            self.transpose = lambda s, k: tf.raw_ops.Conv2DBackpropInput(
                input_sizes=tf.shape(x), filter=k, out_backprop=s, **attrs)
        elif t == "DepthwiseConv2dNative":
            self.forward = lambda a, k: tf.raw_ops.DepthwiseConv2dNative(
                input=a, filter=k, **attrs)
            self.transpose = lambda s, k: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
                input_sizes=tf.shape(x), filter=k, out_backprop=s, **attrs)
        else:  # Conv2DBackpropInput: a transposed convolution of its third input
            sizes = op.inputs[0]
            self.forward = lambda a, k: tf.raw_ops.Conv2DBackpropInput(
                input_sizes=sizes, filter=k, out_backprop=a, **attrs)
            self.transpose = lambda s, k: tf.raw_ops.Conv2D(input=s, filter=k, **attrs)


_CONV = ("strides", "padding", "explicit_paddings", "data_format", "dilations")
_ATTRS = {
    "MatMul": ("transpose_b",),
    "Conv2D": _CONV + ("use_cudnn_on_gpu",),
    "Conv2DBackpropInput": _CONV + ("use_cudnn_on_gpu",),
    "DepthwiseConv2dNative": _CONV,
}


def _has_attr(op, key):
    try:
        op.get_attr(key)
    except ValueError:
        return False
    return True


def layer(op):
    """The `Layer` of `op`."""
    return Layer(op)


def stabilize(z, stabilizer):
    """z + stabilizer * sign(z), sign(0) = +1 (Zennit's ``stabilize``); for
    a stabilizer of 0, z with 1e-7 where it is exactly 0."""
    zero = tf.zeros([], z.dtype)
    if stabilizer == 0.0:
        return tf.where(tf.equal(z, zero), tf.constant(SAFE_DIVIDE, z.dtype), z)
    eps = tf.constant(stabilizer, z.dtype)
    return z + tf.where(z >= zero, eps, -eps)


def _pos(t):
    return tf.maximum(t, tf.zeros([], t.dtype))


def _neg(t):
    return tf.minimum(t, tf.zeros([], t.dtype))


def _plus(*terms):
    terms = [t for t in terms if t is not None]
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def relevance(rule, params, lay, relevance_out, z, bias, nonneg, low=None, high=None):
    """The relevance of the layer's input x under `rule` (a `rules.RULES`
    name with `params`), from the relevance of its output z (bias included;
    `bias` the bias tensor or None). `nonneg`: x is known to be >= 0."""
    f, ft, x, w, r = lay.forward, lay.transpose, lay.x, lay.w, relevance_out
    if rule in ("z", "epsilon"):
        s = r / stabilize(z, params.get("epsilon", 0.0))
        return x * ft(s, w)
    stab = params.get("stabilizer", 0.0)
    if rule in ("zplus", "alpha_beta", "gamma"):
        return _signed(rule, params, lay, r, z, bias, nonneg, stab)
    if rule in ("w_square", "flat"):
        ones = tf.ones_like(x)
        wm = w * w if rule == "w_square" else tf.ones_like(w)
        b = bias * bias if rule == "w_square" and params["bias"] and bias is not None else None
        return ft(r / stabilize(_plus(f(ones, wm), b), stab), wm)
    if rule == "z_box":
        lo = tf.broadcast_to(tf.cast(low, x.dtype), tf.shape(x))
        hi = tf.broadcast_to(tf.cast(high, x.dtype), tf.shape(x))
        wp, wn = _pos(w), _neg(w)
        bp, bn = (None, None) if bias is None else (_pos(bias), _neg(bias))
        denominator = z - _plus(f(lo, wp), bp) - _plus(f(hi, wn), bn)
        s = r / stabilize(denominator, stab)
        return x * ft(s, w) - lo * ft(s, wp) - hi * ft(s, wn)
    raise ValueError("no LRP rule %r" % (rule,))


def _signed(rule, params, lay, r, z, bias, nonneg, stab):
    """zplus, alpha_beta and gamma: positive and negative parts of the
    inputs and weights, each part's own denominator."""
    f, ft, x, w = lay.forward, lay.transpose, lay.x, lay.w
    xp, xn = (x, None) if nonneg else (_pos(x), _neg(x))
    if rule == "gamma":
        g = tf.constant(params["gamma"], w.dtype)
        wp, wn = w + g * _pos(w), w + g * _neg(w)
        bp = None if bias is None else bias + g * _pos(bias)
        bn = None if bias is None else bias + g * _neg(bias)
    else:
        wp, wn = _pos(w), _neg(w)
        bp, bn = (None, None) if bias is None else (_pos(bias), _neg(bias))
        if rule == "alpha_beta" and params["bias"] != "split":
            bp = bn = bias if params["bias"] == "whole" else None

    def part(s, w_pos_inputs, w_neg_inputs):
        terms = [xp * ft(s, w_pos_inputs)]
        if xn is not None:
            terms.append(xn * ft(s, w_neg_inputs))
        return _plus(*terms)

    def denominator(w_pos_inputs, w_neg_inputs, b):
        return _plus(f(xp, w_pos_inputs), None if xn is None else f(xn, w_neg_inputs), b)

    if rule == "zplus":
        return part(r / stabilize(denominator(wp, wn, bp), stab), wp, wn)
    if rule == "alpha_beta":
        active = part(r / stabilize(denominator(wp, wn, bp), stab), wp, wn)
        if params["beta"] == 0.0:
            return active
        inhibit = part(r / stabilize(denominator(wn, wp, bn), stab), wn, wp)
        return (tf.constant(params["alpha"], x.dtype) * active
                - tf.constant(params["beta"], x.dtype) * inhibit)
    zero = tf.zeros([], z.dtype)
    sp = tf.where(z > zero, r, zero) / stabilize(denominator(wp, wn, bp), stab)
    sn = tf.where(z < zero, r, zero) / stabilize(denominator(wn, wp, bn), stab)
    return part(sp, wp, wn) + part(sn, wn, wp)
