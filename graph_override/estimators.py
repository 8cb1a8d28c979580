"""The estimators' mathematics, shared by the three families.

Each estimator is a forward function and a gradient rule, written once here
and used by `graph_override.overrides`, `graph_override.stopgrad` and
`graph_override.tf2`, so the three agree by construction: the forward is the
same sequence of TensorFlow ops (bitwise equal results), the gradient the
same formula.

| estimator | forward | gradient dy -> dx |
|---|---|---|
| ste_sign | +1 where x >= 0, else -1 | dy * [abs(x) <= clip_value] |
| approx_sign | as ste_sign | dy * max(0, 2 - 2 abs(x)) |
| swish_sign | as ste_sign | dy * b(2 - bx tanh(bx/2)) / (1 + cosh(bx)) |
| ste_heaviside | 1 where x > 0, else 0 | as ste_sign |
| ste_tern | sign(sign(x + t) + sign(x - t)): sign(x) where abs(x) >= t, else 0 | as ste_sign |
| ste_round | round half to even | dy |
| ste_floor | floor | dy |
| dorefa_quantize | round(clip(x, 0, 1) n) / n, n = 2^k - 1 | dy * [0 <= x <= 1] |
| flip_gradient | x | -scale dy |
| scale_gradient | x | scale dy |
| clip_gradient | x | clip(dy, min, max) |
"""

import collections
import math
import numbers

import tensorflow as tf

__all__ = [
    "ESTIMATORS",
    "EstimatorSpec",
    "FLOAT_DTYPES",
    "check_float_input",
    "forward",
    "gradient",
    "gradient_multiplier",
    "normalize",
    "registry_gradient",
]

FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)

EstimatorSpec = collections.namedtuple(
    "EstimatorSpec", ["name", "defaults", "op_type", "linear"])
EstimatorSpec.__doc__ = """An estimator's name, its parameters with their
defaults (in signature order), the TensorFlow op type whose gradient it
replaces, and whether its gradient is linear in dy (dx = dy * g(x))."""

ESTIMATORS = collections.OrderedDict((s.name, s) for s in [
    EstimatorSpec("ste_sign", (("clip_value", 1.0),), "Sign", True),
    EstimatorSpec("approx_sign", (), "Sign", True),
    EstimatorSpec("swish_sign", (("beta", 5.0),), "Sign", True),
    EstimatorSpec("ste_heaviside", (("clip_value", 1.0),), "Sign", True),
    EstimatorSpec("ste_tern", (("threshold_value", 0.05),
                               ("ternary_weight_networks", False),
                               ("clip_value", 1.0)), "Sign", True),
    EstimatorSpec("ste_round", (), "Round", True),
    EstimatorSpec("ste_floor", (), "Floor", True),
    EstimatorSpec("dorefa_quantize", (("k_bit", 2),), "Round", True),
    EstimatorSpec("flip_gradient", (("scale", 1.0),), "Identity", True),
    EstimatorSpec("scale_gradient", (("scale", None),), "Identity", True),
    EstimatorSpec("clip_gradient",
                  (("clip_value_min", None), ("clip_value_max", None)),
                  "Identity", False),
])


def _number(estimator, key, value, *, allow_none=False, minimum=None,
            allow_inf=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        # Tensors and arrays are refused on purpose: the value becomes part of
        # the registered gradient name, so it must be a plain number.
        raise TypeError("%s(%s=...) must be a Python number%s, got %s" % (
            estimator, key, " or None" if allow_none else "",
            type(value).__name__))
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError("%s(%s=...) must be finite, got %r" % (estimator, key, value))
    if minimum is not None and value < minimum:
        raise ValueError("%s(%s=...) must be >= %s, got %r" % (
            estimator, key, minimum, value))
    return value


def normalize(estimator, params):
    """Checks `params` for `estimator` and fills in defaults.

    Returns:
      An ordered dict of every parameter, numbers as float (k_bit as int).

    Raises:
      TypeError, ValueError: unknown estimator, unknown or missing parameter,
        or a value out of range; the message names the estimator.
    """
    if estimator not in ESTIMATORS:
        raise ValueError("unknown estimator %r; known: %s" % (
            estimator, ", ".join(ESTIMATORS)))
    spec = ESTIMATORS[estimator]
    known = dict(spec.defaults)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise TypeError("%s() got unknown parameter(s) %s; it takes %s" % (
            estimator, ", ".join(unknown), ", ".join(known) or "none"))
    out = collections.OrderedDict()
    for key, default in spec.defaults:
        out[key] = params.get(key, default)
    e = estimator
    if "clip_value" in out:
        out["clip_value"] = _number(e, "clip_value", out["clip_value"],
                                    allow_none=True, minimum=0.0)
    if "beta" in out:
        out["beta"] = _number(e, "beta", out["beta"])
        if out["beta"] <= 0:
            raise ValueError("%s(beta=...) must be > 0, got %r" % (e, out["beta"]))
    if "threshold_value" in out:
        # + 0.0 turns -0.0 into +0.0, so x - t never yields a signed zero
        # that x + (-t) would not.
        out["threshold_value"] = _number(e, "threshold_value",
                                         out["threshold_value"], minimum=0.0) + 0.0
    if "ternary_weight_networks" in out:
        twn = out["ternary_weight_networks"]
        # 0 and 1 are accepted too, as names and rules written with them were.
        if isinstance(twn, bool) or (isinstance(twn, numbers.Integral)
                                     and twn in (0, 1)):
            out["ternary_weight_networks"] = bool(twn)
        else:
            raise TypeError("%s(ternary_weight_networks=...) must be True or "
                            "False, got %r" % (e, twn))
    if "k_bit" in out:
        k = out["k_bit"]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= 16:
            raise ValueError("%s(k_bit=...) must be an integer from 1 to 16, "
                             "got %r" % (e, k))
        out["k_bit"] = int(k)
    if "scale" in out:
        if out["scale"] is None:
            raise TypeError("%s() missing required parameter 'scale'" % e)
        out["scale"] = _number(e, "scale", out["scale"])
    if e == "clip_gradient":
        lo = out["clip_value_min"]
        hi = out["clip_value_max"]
        if lo is None or hi is None:
            raise TypeError("clip_gradient() needs clip_value_min and "
                            "clip_value_max")
        lo = _number(e, "clip_value_min", lo, allow_inf=True)
        hi = _number(e, "clip_value_max", hi, allow_inf=True)
        if lo > hi:
            raise ValueError("clip_gradient(clip_value_min=%r, clip_value_max=%r): "
                             "min must not exceed max" % (lo, hi))
        out["clip_value_min"], out["clip_value_max"] = lo, hi
    return out


def check_float_input(x, estimator):
    """Converts `x` to a tensor and checks that it is floating point."""
    x = tf.convert_to_tensor(x)
    if x.dtype.base_dtype not in FLOAT_DTYPES:
        raise TypeError(
            "%s() needs a float16, bfloat16, float32 or float64 tensor, got "
            "%s (tensor %s). Cast it first, e.g. tf.cast(x, tf.float32)." % (
                estimator, x.dtype.name, getattr(x, "name", "<eager>")))
    return x


def _const(value, like):
    return tf.constant(value, dtype=like.dtype)


# --- forward ---------------------------------------------------------------

def sign_pm1(x):
    """+1 where x >= 0, else -1: sign(sign(x) + 0.1), as larq computes it."""
    return tf.sign(tf.sign(x) + _const(0.1, x))


def heaviside(x):
    """1 where x > 0, else 0: relu(sign(x))."""
    return tf.nn.relu(tf.sign(x))


def ternary_threshold(x, params):
    """The threshold t of ste_tern: `threshold_value`, or with
    `ternary_weight_networks` 0.7 * sum(abs(x)) / size(x), as larq computes
    it (the division exact in every mode, see `exact_divide`)."""
    if params["ternary_weight_networks"]:
        total = _const(0.7, x) * tf.reduce_sum(tf.abs(x))
        return exact_divide(total, tf.cast(tf.size(x), x.dtype))
    return _const(params["threshold_value"], x)


def ternary(x, params):
    """sign(sign(x + t) + sign(x - t)), op for op as larq's ste_tern:
    sign(x) where abs(x) >= t, else +0 (NaN stays NaN)."""
    t = ternary_threshold(x, params)
    return tf.sign(tf.sign(x + t) + tf.sign(x - t))


def ternary_correction(x, s, params):
    """ternary(x) - s: added to s = sign(x) (values -1, 0, 1), it gives
    ternary(x) exactly, so a family can keep a Sign op that reads x."""
    return ternary(x, params) - s


def exact_divide(x, n):
    """x / n for a constant n >= 1, computed as IEEE division in every mode.

    In a Session, Grappler's constant folding turns ``x / const`` into
    ``x * (1 / const)``, which is off by one ulp for some float16 values
    (9/15 becomes 0.5996 instead of 0.6), so Session and eager results would
    differ. DivNoNan equals RealDiv for n != 0 and is left alone.
    """
    return tf.math.divide_no_nan(x, n)


def dorefa(x, k_bit):
    n = _const(float(2 ** k_bit - 1), x)
    return exact_divide(tf.round(tf.clip_by_value(x, _const(0.0, x), _const(1.0, x)) * n), n)


def forward(estimator, x, params):
    """The estimator's forward function; `params` as from `normalize`."""
    if estimator in ("ste_sign", "approx_sign", "swish_sign"):
        return sign_pm1(x)
    if estimator == "ste_heaviside":
        return heaviside(x)
    if estimator == "ste_tern":
        return ternary(x, params)
    if estimator == "ste_round":
        return tf.round(x)
    if estimator == "ste_floor":
        return tf.floor(x)
    if estimator == "dorefa_quantize":
        return dorefa(x, params["k_bit"])
    return tf.identity(x)


# --- gradient --------------------------------------------------------------

def _mask(cond, like):
    return tf.cast(cond, like.dtype)


def _swish_multiplier(x, beta):
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


def gradient_multiplier(estimator, x, params):
    """g(x) with dx = dy * g(x), for estimators whose gradient is linear in
    dy; None where g(x) == 1 everywhere (the plain straight-through case)."""
    if estimator in ("ste_sign", "ste_heaviside", "ste_tern"):
        c = params["clip_value"]
        if c is None:
            return None
        return _mask(tf.abs(x) <= _const(c, x), x)
    if estimator == "approx_sign":
        return tf.maximum(_const(0.0, x), _const(2.0, x) - _const(2.0, x) * tf.abs(x))
    if estimator == "swish_sign":
        return _swish_multiplier(x, params["beta"])
    if estimator in ("ste_round", "ste_floor"):
        return None
    if estimator == "dorefa_quantize":
        return _mask(tf.logical_and(x >= _const(0.0, x), x <= _const(1.0, x)), x)
    if estimator == "flip_gradient":
        return _const(-params["scale"], x)
    if estimator == "scale_gradient":
        return _const(params["scale"], x)
    raise ValueError("%s has no gradient multiplier: its gradient is not "
                     "linear in dy" % estimator)


def gradient(estimator, x, dy, params):
    """dx for upstream gradient dy at input x."""
    if estimator == "clip_gradient":
        return tf.clip_by_value(dy, _const(params["clip_value_min"], dy),
                                _const(params["clip_value_max"], dy))
    g = gradient_multiplier(estimator, x, params)
    return dy if g is None else dy * g


def registry_gradient(estimator, params):
    """A TensorFlow gradient function ``(op, dy)`` applying the estimator's
    gradient rule to the op's first input, for any op whose first input has
    the shape of its first output (Sign, Round, Floor, Identity, Relu, ...).
    Other inputs get None."""
    params = dict(params)

    def estimator_gradient(op, dy, *unused_grads):
        dx = gradient(estimator, op.inputs[0], dy, params)
        return [dx] + [None] * (len(op.inputs) - 1)

    estimator_gradient.__qualname__ = "graph_override.estimators.%s_gradient" % estimator
    return estimator_gradient
