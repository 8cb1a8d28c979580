"""larq's quantizer functions, read from the estimator records: the forward
values `graph_override.tf2` computes and the gradient as larq 0.13.3 writes
it (`graph_override.estimators.larq_gradient`).

A record holds each gradient once (`graph_override.estimators.table`): a
straight-through estimator as its mask, which the families apply as
``dy * cast(mask)`` and larq as ``where(mask, dy, 0)`` (+0.0 where dy < 0 is
masked, where the product gives -0.0); approx_sign and swish_sign hold larq's
form beside the families' own, which computes the same formula in another
order (the last bit can differ). Change a record and both `tf2` and these
functions follow. The forward is called directly, not through tf2's own
`tf.custom_gradient`, whose gradient would be unused: one custom gradient per
quantizer, not two nested, keeps the traced training step smaller.
DoReFa's k-bit step is larq's: ``round(x * n) / n``, which TensorFlow's graph
optimizer turns into ``x * (1 / n)`` inside tf.function, exactly as it does
for larq (tf2.dorefa_quantize divides exactly instead).

Each function is a value and a gradient (`parts`), joined by one
`tf.custom_gradient`; the quantized layers take them apart to quantize their
input again in the backward pass.
"""

import inspect

import tensorflow as tf

from graph_override import estimators

__all__ = ["compact_parts", "defaults", "dorefa_k_bit", "function", "k_bit_value",
           "magnitude_aware_sign", "parts"]


def defaults(estimator):
    """{parameter: default} of the record `estimator`, in signature order."""
    return dict(estimators.spec(estimator).defaults)


def _with_gradient(value, gradient, x):
    """value(x) with dx = gradient(x, dy) (a `parts` pair)."""
    @tf.custom_gradient
    def quantize(x):
        return value(x), lambda dy: gradient(x, dy)

    return quantize(tf.convert_to_tensor(x))


def parts(name, **settings):
    """``(value, gradient)`` of the quantizer function `name` (an estimator
    record) with `settings`: ``value(x)``, the quantized x, computed by ops
    no tape differentiates, and ``gradient(x, dy)``, x's gradient for the
    output's gradient dy, as larq computes it. The function itself is
    ``value`` with ``gradient`` as its custom gradient; apart, they let a
    quantized layer compute both again in its backward pass without a custom
    gradient inside its own (which a SavedModel cannot keep). The record is
    read now, at each call."""
    spec = estimators.spec(name)
    params = estimators.normalize(spec, settings)

    def value(x):
        x = estimators.check_float_input(x, spec.name)
        return tf.stop_gradient(estimators.forward(spec, x, params))

    def gradient(x, dy):
        return estimators.larq_gradient(spec, x, dy, params)
    return value, gradient


def function(name):
    """The quantizer function of the record `name`: ``f(x, **settings)``
    with the record's parameters and defaults (``ste_sign(x,
    clip_value=1.0)``), its values tf2's, its gradient larq's."""
    spec = estimators.spec(name)
    signature = inspect.Signature(
        [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             default=p.default) for p in spec.params])

    def quantize(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        x = bound.arguments.pop("x")
        return _with_gradient(*parts(name, **bound.arguments), x)

    quantize.__name__ = quantize.__qualname__ = name
    quantize.__module__ = "graph_override.keras.quantizers"
    quantize.__signature__ = signature
    quantize.__doc__ = "%s\n\nq(x): %s\ndq/dx: %s\n\nReference: %s" % (
        spec.doc.summary, spec.doc.forward, spec.doc.gradient, spec.doc.paper)
    return quantize


# --- the compact form ------------------------------------------------------
#
# A sign-based straight-through estimator (ste_sign, ste_heaviside, ste_tern)
# gives -1, 0 or +1 (NaN for a NaN input), and its gradient is dy masked.
# Between the forward and the backward pass a layer with a float32 or float64
# input then needs neither x nor the quantized x in full: the quantized x in
# float16, which holds -1, 0, +1 and NaN exactly (one cast each way), and the
# mask, 3 bytes per element where the float layer keeps its input (4 bytes
# in float32). (An 8-bit float would hold them too, but TensorFlow casts it
# back three times slower than float16; a 16-bit input keeps itself, 2 bytes.)

CODES = tf.float16
"""The dtype a layer keeps its quantized input in, with the compact form."""


def compact_parts(name, dtype, **settings):
    """``(keep, restore)`` of the quantizer function `name` for an input of
    `dtype` where it has the compact form (a Sign-based record with a mask,
    on float32 and float64), else None. ``keep(x, q)``, with q the
    function's output for x, gives the tensors to keep: q as `CODES`, and the
    record's mask where it has one. ``restore(kept)`` gives
    ``(q, gradient)``: q again, bit for bit (a NaN's payload aside), and
    ``gradient(dy)``, x's gradient, as `parts` computes it."""
    spec = estimators.spec(name)
    dtype = tf.as_dtype(dtype).base_dtype
    if spec.mask is None or spec.op_type != "Sign" or dtype.size <= CODES.size:
        return None
    params = estimators.normalize(spec, settings)

    def keep(x, q):
        held = spec.mask(x, params)
        return (tf.cast(q, CODES),) if held is None else (tf.cast(q, CODES), held)

    def restore(kept):
        q = tf.cast(kept[0], dtype)
        if len(kept) == 1:
            return q, lambda dy: dy
        return q, lambda dy: tf.where(kept[1], dy, tf.zeros([], dy.dtype))
    return keep, restore


def _scale(x):
    """magnitude_aware_sign's scale: mean(|x|) over every axis but the last."""
    return tf.stop_gradient(tf.reduce_mean(tf.abs(x), axis=list(range(len(x.shape) - 1))))


def magnitude_parts(**settings):
    """`parts` of magnitude_aware_sign: ``mean(|x|) * ste_sign(x)``."""
    sign, sign_gradient = parts("ste_sign", **settings)
    # The gradient of ``scale * q`` for q is ``scale * dy`` (TensorFlow's Mul
    # gradient), which ste_sign's gradient then masks.
    return (lambda x: _scale(x) * sign(x),
            lambda x, dy: sign_gradient(x, _scale(x) * dy))


_STE_SIGN = function("ste_sign")
_CLIP_VALUE = defaults("ste_sign")["clip_value"]


def magnitude_aware_sign(x, clip_value=_CLIP_VALUE):
    """``mean(|x|) * ste_sign(x)``, the mean over every axis but the last,
    held constant in the gradient (Bi-Real Net's weight quantizer)."""
    x = tf.convert_to_tensor(x)
    return _scale(x) * _STE_SIGN(x, clip_value=clip_value)


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
