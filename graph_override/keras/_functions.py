"""larq's quantizer functions: `graph_override.tf2`'s forward values with
larq's gradient expressions, op for op.

tf2's estimators give larq's forward values and, for an upstream gradient of
1, larq's gradients. For any other upstream gradient dy they can differ from
larq's in two ways, both without numeric consequence for training but
visible bit for bit: a masked gradient is ``dy * 0`` there, which is -0.0
where dy < 0 (larq: ``tf.where(mask, dy, 0)``, always +0.0), and
swish_sign multiplies dy last (larq: first), which can change the last bit.
So here each function takes its forward value from the estimators tf2 uses
(`graph_override.estimators.forward`: the sign and threshold conventions live
there) and computes its gradient as larq 0.13.3 writes it. The forward is
called directly, not through tf2's own `tf.custom_gradient`, whose gradient
would be unused: one custom gradient per quantizer, not two nested, keeps the
traced training step smaller. The masked gradient selects a scalar zero
where larq writes ``tf.zeros_like(dy)`` (the same values; see `_where`).
DoReFa's k-bit step is larq's too: ``round(x * n) / n``, which
TensorFlow's graph optimizer turns into ``x * (1 / n)`` inside tf.function,
exactly as it does for larq (tf2.dorefa_quantize divides exactly instead).

Each function is a value and a gradient (`parts`), joined by one
`tf.custom_gradient`; the quantized layers take them apart to quantize their
input again in the backward pass.
"""

import tensorflow as tf

from graph_override import estimators

__all__ = ["approx_sign", "compact_parts", "dorefa_k_bit", "k_bit_value",
           "magnitude_aware_sign", "parts", "ste_heaviside", "ste_sign", "ste_tern",
           "swish_sign"]


def _where(mask, dy, values=None):
    """`values` (default dy) where `mask`, else +0.0, as larq's
    ``tf.where(mask, dy, tf.zeros_like(dy))`` but with a scalar zero that
    SelectV2 broadcasts: Grappler folds ``zeros_like(dy)`` into a constant of
    dy's full shape, which an instantiated training step then keeps allocated
    for as long as it lives (a batch of activations per input quantizer)."""
    return tf.where(mask, dy if values is None else values, tf.zeros([], dy.dtype))


def _in_clip(x, clip_value):
    """The straight-through mask, ``|x| <= clip_value``."""
    return tf.math.less_equal(tf.math.abs(x), clip_value)


def _clipped(x, dy, clip_value):
    if clip_value is None:
        return dy
    return _where(_in_clip(x, clip_value), dy)


def _forward(estimator, **params):
    """tf2's forward function of `estimator` (its input checked as tf2 checks
    it), without tf2's custom gradient."""
    params = estimators.normalize(estimator, params)

    def forward(x):
        return estimators.forward(estimator, estimators.check_float_input(x, estimator), params)
    return forward


def _with_gradient(value, gradient, x):
    """value(x) with dx = gradient(x, dy) (a `parts` pair)."""
    @tf.custom_gradient
    def quantize(x):
        return value(x), lambda dy: gradient(x, dy)

    return quantize(tf.convert_to_tensor(x))


def _value(estimator, **params):
    """tf2's forward function of `estimator`, as a value no tape differentiates."""
    forward = _forward(estimator, **params)
    return lambda x: tf.stop_gradient(forward(x))


def _clipped_gradient(clip_value):
    return lambda x, dy: _clipped(x, dy, clip_value)


def _approx_sign_gradient(x, dy):
    abs_x = tf.math.abs(x)
    return _where(tf.math.less_equal(abs_x, 1.0), dy, (1 - abs_x) * 2 * dy)


def _swish_sign_gradient(beta):
    def gradient(x, dy):
        b_x = beta * x
        return dy * beta * (2 - b_x * tf.tanh(b_x * 0.5)) / (1 + tf.cosh(b_x))
    return gradient


def _parts_ste_sign(clip_value=1.0):
    return _value("ste_sign", clip_value=clip_value), _clipped_gradient(clip_value)


def _parts_approx_sign():
    return _value("approx_sign"), _approx_sign_gradient


def _parts_swish_sign(beta=5.0):
    return _value("swish_sign", beta=beta), _swish_sign_gradient(beta)


def _parts_ste_heaviside(clip_value=1.0):
    return _value("ste_heaviside", clip_value=clip_value), _clipped_gradient(clip_value)


def _parts_ste_tern(threshold_value=0.05, ternary_weight_networks=False, clip_value=1.0):
    return (_value("ste_tern", threshold_value=threshold_value,
                   ternary_weight_networks=ternary_weight_networks, clip_value=clip_value),
            _clipped_gradient(clip_value))


def parts(name, **settings):
    """``(value, gradient)`` of the quantizer function `name` with
    `settings`: ``value(x)``, the quantized x, computed by ops no tape
    differentiates, and ``gradient(x, dy)``, x's gradient for the output's
    gradient dy. The function itself is ``value`` with ``gradient`` as its
    custom gradient; apart, they let a quantized layer compute both again in
    its backward pass without a custom gradient inside its own (which a
    SavedModel cannot keep)."""
    return _PARTS[name](**settings)


# --- the compact form ------------------------------------------------------
#
# ste_sign, ste_heaviside and ste_tern give -1, 0 or +1 (NaN for a NaN
# input), and their gradient is dy masked by ``|x| <= clip_value``. Between
# the forward and the backward pass a layer with a float32 or float64 input
# then needs neither x nor the quantized x in full: the quantized x in
# float16, which holds -1, 0, +1 and NaN exactly (one cast each way), and the
# mask, 3 bytes per element where the float layer keeps its input (4 bytes
# in float32). (An 8-bit float would hold them too, but TensorFlow casts it
# back three times slower than float16; a 16-bit input keeps itself, 2 bytes.)

CODES = tf.float16
"""The dtype a layer keeps its quantized input in, with the compact form."""


def compact_parts(name, dtype, **settings):
    """``(keep, restore)`` of the quantizer function `name` for an input of
    `dtype` where it has the compact form (ste_sign, ste_heaviside, ste_tern,
    on float32 and float64), else None. ``keep(x, q)``, with q the
    function's output for x, gives the tensors to keep: q as `CODES`, and the
    gradient's mask unless clip_value is None. ``restore(kept)`` gives
    ``(q, gradient)``: q again, bit for bit (a NaN's payload aside), and
    ``gradient(dy)``, x's gradient, as `parts` computes it."""
    dtype = tf.as_dtype(dtype).base_dtype
    if name not in ("ste_sign", "ste_heaviside", "ste_tern") or dtype.size <= CODES.size:
        return None
    clip_value = settings.get("clip_value", 1.0)

    def keep(x, q):
        if clip_value is None:
            return (tf.cast(q, CODES),)
        return tf.cast(q, CODES), _in_clip(x, clip_value)

    def restore(kept):
        q = tf.cast(kept[0], dtype)
        if clip_value is None:
            return q, lambda dy: dy
        return q, lambda dy: _where(kept[1], dy)
    return keep, restore


def ste_sign(x, clip_value=1.0):
    """Sign (sign(0) = +1) with the straight-through gradient: dy where
    ``|x| <= clip_value`` (None: everywhere), else 0."""
    return _with_gradient(*_parts_ste_sign(clip_value), x)


def approx_sign(x):
    """Sign with Bi-Real Net's gradient ``(1 - |x|) * 2 * dy`` for |x| <= 1, else 0."""
    return _with_gradient(*_parts_approx_sign(), x)


def swish_sign(x, beta=5.0):
    """Sign with the SignSwish gradient
    ``dy * beta * (2 - beta*x * tanh(beta*x / 2)) / (1 + cosh(beta*x))``."""
    return _with_gradient(*_parts_swish_sign(beta), x)


def ste_heaviside(x, clip_value=1.0):
    """1 for x > 0, 0 for x <= 0, with the straight-through gradient."""
    return _with_gradient(*_parts_ste_heaviside(clip_value), x)


def ste_tern(x, threshold_value=0.05, ternary_weight_networks=False, clip_value=1.0):
    """-1, 0 or +1 (the threshold itself maps to ±1), with the
    straight-through gradient."""
    return _with_gradient(*_parts_ste_tern(threshold_value, ternary_weight_networks,
                                           clip_value), x)


def _scale(x):
    """magnitude_aware_sign's scale: mean(|x|) over every axis but the last."""
    return tf.stop_gradient(tf.reduce_mean(tf.abs(x), axis=list(range(len(x.shape) - 1))))


def _parts_magnitude_aware_sign(clip_value=1.0):
    sign, sign_gradient = _parts_ste_sign(clip_value)
    # The gradient of ``scale * q`` for q is ``scale * dy`` (TensorFlow's Mul
    # gradient), which ste_sign's gradient then masks.
    return (lambda x: _scale(x) * sign(x),
            lambda x, dy: sign_gradient(x, _scale(x) * dy))


def magnitude_aware_sign(x, clip_value=1.0):
    """``mean(|x|) * ste_sign(x)``, the mean over every axis but the last,
    held constant in the gradient."""
    x = tf.convert_to_tensor(x)
    return _scale(x) * ste_sign(x, clip_value=clip_value)


def k_bit_value(x, k_bit):
    """``round(x * n) / n``, ``n = 2**k_bit - 1``: `dorefa_k_bit`'s value."""
    n = 2 ** k_bit - 1
    return tf.round(x * n) / n


def dorefa_k_bit(x, k_bit):
    """``round(x * n) / n``, ``n = 2**k_bit - 1`` (half to even), with the
    identity gradient; x is expected in [0, 1]."""
    @tf.custom_gradient
    def k_bit_with_identity_grad(x):
        return k_bit_value(x, k_bit), lambda dy: dy

    return k_bit_with_identity_grad(x)


_PARTS = {"ste_sign": _parts_ste_sign, "approx_sign": _parts_approx_sign,
          "swish_sign": _parts_swish_sign, "ste_heaviside": _parts_ste_heaviside,
          "ste_tern": _parts_ste_tern, "magnitude_aware_sign": _parts_magnitude_aware_sign}
