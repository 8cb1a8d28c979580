"""The estimators' mathematics, shared by the three families.

Each estimator is one record in `graph_override/estimators/table.py` (an
`EstimatorSpec`): its parameters, its forward function and its gradient as
TensorFlow ops, how the overrides family builds it, and its documentation.
`graph_override.overrides`, `graph_override.stopgrad` and
`graph_override.tf2` make their functions from the records, so the three
agree by construction: the forward is the same sequence of TensorFlow ops
(bitwise equal results), the gradient the same formula. A name the table
does not hold raises `UnknownEstimatorError` everywhere.

{table}
"""

import tensorflow as tf

from graph_override.errors import UnknownEstimatorError
from graph_override.estimators import table  # noqa: F401  (defines the records)
from graph_override.estimators._record import (ESTIMATORS, REQUIRED, Doc, EstimatorSpec,
                                               Param, normalize, spec, suggestions)
from graph_override.estimators.ops import (dorefa, exact_divide, heaviside, sign_pm1,
                                           ternary, ternary_correction, ternary_threshold)

__all__ = [
    "ESTIMATORS",
    "Doc",
    "EstimatorSpec",
    "FLOAT_DTYPES",
    "Param",
    "REQUIRED",
    "UnknownEstimatorError",
    "check_float_input",
    "dorefa",
    "exact_divide",
    "forward",
    "gradient",
    "gradient_multiplier",
    "heaviside",
    "normalize",
    "registry_gradient",
    "sign_pm1",
    "signature_text",
    "spec",
    "suggestions",
    "table_markdown",
    "ternary",
    "ternary_correction",
    "ternary_threshold",
]

FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def check_float_input(x, estimator):
    """Converts `x` to a tensor and checks that it is floating point."""
    x = tf.convert_to_tensor(x)
    if x.dtype.base_dtype not in FLOAT_DTYPES:
        raise TypeError(
            "%s() needs a float16, bfloat16, float32 or float64 tensor, got "
            "%s (tensor %s). Cast it first, e.g. tf.cast(x, tf.float32)." % (
                estimator, x.dtype.name, getattr(x, "name", "<eager>")))
    return x


def forward(estimator, x, params):
    """The estimator's forward function; `params` as from `normalize`."""
    return spec(estimator).forward(x, params)


def gradient_multiplier(estimator, x, params):
    """g(x) with dx = dy * g(x), for estimators whose gradient is linear in
    dy; None where g(x) == 1 everywhere (the plain straight-through case)."""
    s = spec(estimator)
    if not s.linear:
        raise ValueError("%s has no gradient multiplier: its gradient is not "
                         "linear in dy" % estimator)
    return s.multiplier(x, params)


def gradient(estimator, x, dy, params):
    """dx for upstream gradient dy at input x."""
    s = spec(estimator)
    if not s.linear:
        return s.gradient(x, dy, params)
    g = s.multiplier(x, params)
    return dy if g is None else dy * g


def registry_gradient(estimator, params):
    """A TensorFlow gradient function ``(op, dy)`` applying the estimator's
    gradient rule to the op's first input, for any op whose first input has
    the shape of its first output (Sign, Round, Floor, Identity, Relu, ...).
    Other inputs get None."""
    spec(estimator)
    params = dict(params)

    def estimator_gradient(op, dy, *unused_grads):
        dx = gradient(estimator, op.inputs[0], dy, params)
        return [dx] + [None] * (len(op.inputs) - 1)

    estimator_gradient.__qualname__ = "graph_override.estimators.%s_gradient" % estimator
    return estimator_gradient


def signature_text(estimator):
    """``ste_sign(x, clip_value=1.0)``: the call with its defaults."""
    return "%s(%s)" % (estimator, ", ".join(["x"] + [
        p.name if p.required else "%s=%r" % (p.name, p.default)
        for p in spec(estimator).params]))


def table_markdown():
    """The estimator table of the docs (the families guide): one row per
    record, its signature, forward and gradient."""
    rows = ["| function | forward | backward, dy -> dx |", "|---|---|---|"]
    rows += ["| `%s` | %s | %s |" % ((signature_text(name),) + s.doc.row)
             for name, s in ESTIMATORS.items()]
    return "\n".join(rows)


__doc__ = __doc__.format(table=table_markdown())  # pylint: disable=redefined-builtin
