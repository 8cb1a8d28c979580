"""The TensorFlow ops that several estimator records share: forward pieces,
gradient multipliers, and the overrides family's builds of the sign-based
estimators. One record's own ops stay in its record (`estimators/table.py`).
"""

import tensorflow as tf

__all__ = ["approx_sign_larq", "const", "dorefa", "exact_divide", "heaviside", "in_clip", "mask",
           "sign_build", "sign_pm1", "swish_larq", "swish_multiplier", "ternary",
           "ternary_correction", "ternary_threshold"]


def const(value, like):
    """`value` as a constant of `like`'s dtype."""
    return tf.constant(value, dtype=like.dtype)


def mask(cond, like):
    """1 where `cond`, else 0, in `like`'s dtype."""
    return tf.cast(cond, like.dtype)


# --- forward ---------------------------------------------------------------

def sign_pm1(x):
    """+1 where x >= 0, else -1: sign(sign(x) + 0.1), as larq computes it."""
    return tf.sign(tf.sign(x) + const(0.1, x))


def heaviside(x):
    """1 where x > 0, else 0: relu(sign(x))."""
    return tf.nn.relu(tf.sign(x))


def exact_divide(x, n):
    """x / n for a constant n >= 1, computed as IEEE division in every mode.

    In a Session, Grappler's constant folding turns ``x / const`` into
    ``x * (1 / const)``, which is off by one ulp for some float16 values
    (9/15 becomes 0.5996 instead of 0.6), so Session and eager results would
    differ. DivNoNan equals RealDiv for n != 0 and is left alone.
    """
    return tf.math.divide_no_nan(x, n)


def ternary_threshold(x, params):
    """The threshold t of ste_tern: `threshold_value`, or with
    `ternary_weight_networks` 0.7 * sum(abs(x)) / size(x), as larq computes
    it (the division exact in every mode, see `exact_divide`)."""
    if params["ternary_weight_networks"]:
        total = const(0.7, x) * tf.reduce_sum(tf.abs(x))
        return exact_divide(total, tf.cast(tf.size(x), x.dtype))
    return const(params["threshold_value"], x)


def ternary(x, params):
    """sign(sign(x + t) + sign(x - t)), op for op as larq's ste_tern:
    sign(x) where abs(x) >= t, else +0 (NaN stays NaN)."""
    t = ternary_threshold(x, params)
    return tf.sign(tf.sign(x + t) + tf.sign(x - t))


def ternary_correction(x, s, params):
    """ternary(x) - s: added to s = sign(x) (values -1, 0, 1), it gives
    ternary(x) exactly, so a family can keep a Sign op that reads x."""
    return ternary(x, params) - s


def dorefa(x, k_bit):
    """round(clip(x, 0, 1) * n) / n with n = 2^k_bit - 1."""
    n = const(float(2 ** k_bit - 1), x)
    return exact_divide(tf.round(tf.clip_by_value(x, const(0.0, x), const(1.0, x)) * n), n)


# --- gradient multipliers --------------------------------------------------

def in_clip(x, clip_value):
    """abs(x) <= clip_value, the straight-through mask; None (everywhere)
    for None."""
    if clip_value is None:
        return None
    return tf.abs(x) <= const(clip_value, x)


def swish_multiplier(x, beta):
    """beta (2 - beta x tanh(beta x / 2)) / (1 + cosh(beta x)), 0 at +-inf."""
    # Half precision loses the formula (cosh overflows at |x| > 2.2 already
    # in float16), so compute in float32 and round once at the end.
    wide = x.dtype in (tf.float16, tf.bfloat16)
    xf = tf.cast(x, tf.float32) if wide else x
    b = tf.constant(beta, dtype=xf.dtype)
    two = tf.constant(2.0, dtype=xf.dtype)
    one = tf.constant(1.0, dtype=xf.dtype)
    bx = b * xf
    g = b * (two - bx * tf.tanh(bx / two)) / (one + tf.cosh(bx))
    # At x = +-inf the formula is inf/inf; its limit is 0.
    g = tf.where(tf.math.is_inf(xf), tf.zeros_like(g), g)
    return tf.cast(g, x.dtype) if wide else g


# --- larq's forms of gradients (beside the families', where they differ) ----

def approx_sign_larq(x, dy):
    """larq's ``where(|x| <= 1, (1 - |x|) * 2 * dy, 0)``: the families'
    ``dy * max(0, 2 - 2|x|)`` in another order, which can differ in the last
    bit."""
    abs_x = tf.abs(x)
    return tf.where(abs_x <= const(1.0, x), (const(1.0, x) - abs_x) * const(2.0, x) * dy,
                    tf.zeros([], dy.dtype))


def swish_larq(x, dy, beta):
    """larq's ``dy * beta * (2 - bx tanh(bx / 2)) / (1 + cosh(bx))``, in the
    input's own dtype (float16 overflows cosh beyond |bx| ~ 11, giving 0
    where the families' float32 form gives the small true value), except at
    x = +-inf, where larq's inf/inf is NaN and this gives the limit 0, as
    the families do."""
    bx = const(beta, x) * x
    g = dy * const(beta, x) * (const(2.0, x) - bx * tf.tanh(bx * const(0.5, x))) / (
        const(1.0, x) + tf.cosh(bx))
    return tf.where(tf.math.is_inf(x), tf.zeros([], g.dtype), g)


# --- overrides-family builds -----------------------------------------------

def sign_build(finish):
    """The overrides build of a sign-based estimator: the Sign that reads x
    carries the estimator's gradient; ``finish(x, s, params, override)``
    turns s = sign(x) into the forward value, every op it adds passing dy on
    unchanged (mapped to TensorFlow's "Identity")."""

    def build(x, params, grad_name, override):
        with override({"Sign": grad_name}):
            s = tf.sign(x)
        return finish(x, s, params, override)

    return build


def finish_sign_pm1(x, s, params, override):  # pylint: disable=unused-argument
    """sign(s + 0.1) == sign_pm1(x)."""
    with override({"Sign": "Identity"}):
        return tf.sign(s + tf.constant(0.1, dtype=x.dtype))


def finish_heaviside(x, s, params, override):  # pylint: disable=unused-argument
    """relu(s) == heaviside(x)."""
    with override({"Relu": "Identity"}):
        return tf.nn.relu(s)


def finish_ternary(x, s, params, override):
    """sign(s + stop_gradient(ternary(x) - s)) == ternary(x)."""
    correction = ternary_correction(x, s, params)
    with override({"Sign": "Identity"}):
        return tf.sign(s + tf.stop_gradient(correction))
