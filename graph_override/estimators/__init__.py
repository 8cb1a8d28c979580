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

import collections
import functools

import tensorflow as tf

from graph_override.errors import RuleError, UnknownEstimatorError
# table defines the records.
from graph_override.estimators import attribution_ops, table  # noqa: F401
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
    "covers",
    "dorefa",
    "exact_divide",
    "forward",
    "gradient",
    "gradient_multiplier",
    "heaviside",
    "larq_gradient",
    "name_params",
    "node_params",
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


def _reads(s, x, params, y):
    """The arguments after x: a rule (a record with op_types) also reads
    the op's output y, the forward's value unless given."""
    if s.op_types is None:
        return ()
    return (s.forward(x, params) if y is None else y,)


def gradient_multiplier(estimator, x, params, y=None):
    """g(x) with dx = dy * g(x), for estimators whose gradient is linear in
    dy; None where g(x) == 1 everywhere (the plain straight-through case).
    An attribution rule reads the op's output `y` too."""
    s = spec(estimator)
    if not s.linear:
        raise ValueError("%s has no gradient multiplier: its gradient is not "
                         "linear in dy" % s.name)
    return _multiplier(s, x, params, *_reads(s, x, params, y))


def _multiplier(s, x, params, *reads, **extra):
    """g(x), from the record's multiplier or its mask (1 where it holds, else
    0); None where g(x) == 1 everywhere."""
    if s.mask is None:
        return s.multiplier(x, params, *reads, **extra)
    held = s.mask(x, params)
    return None if held is None else tf.cast(held, x.dtype)


def larq_gradient(estimator, x, dy, params):
    """dx as larq 0.13.3 computes it (`graph_override.keras`'s quantizers):
    the record's `larq` form, else its mask as a select (dy where it holds,
    +0.0 elsewhere), else the families' gradient."""
    s = spec(estimator)
    if s.larq is not None:
        return s.larq(x, dy, params)
    if s.mask is not None:
        held = s.mask(x, params)
        # A scalar zero that the select broadcasts: Grappler would fold
        # zeros_like(dy) into a constant of dy's full shape, which a traced
        # training step keeps allocated.
        return dy if held is None else tf.where(held, dy, tf.zeros([], dy.dtype))
    return gradient(s, x, dy, params)


def gradient(estimator, x, dy, params, y=None):
    """dx for upstream gradient dy at input x (and output y, for a rule).
    A rule's gradient built into a graph runs as one fused function where
    that gives the same bits (`attribution_ops.fused_gradient`)."""
    s = spec(estimator)
    if s.op_types is not None:
        y = _reads(s, x, params, y)[0]
        fused = attribution_ops.fused_gradient(s, x, dy, params, y, functools.partial(_gradient, s))
        if fused is not None:
            return fused
    return _gradient(s, x, dy, params, y)


def _gradient(s, x, dy, params, y, **extra):
    if not s.linear:
        return s.gradient(x, dy, params, *_reads(s, x, params, y), **extra)
    g = _multiplier(s, x, params, *_reads(s, x, params, y), **extra)
    return dy if g is None else dy * g


def covers(estimator, op_type, where, what="", params=None):
    """Raises RuleError if `estimator` is a rule that does not cover op type
    `op_type` (`where` names the node: "node 'dense/Relu'", `what` the
    caller: "patch"), or if `params` (a patch rule's) set what the rule reads
    from the node (activation, alpha); estimators, which fit any same-shape
    op, pass. `estimator` is a name or its record, as everywhere here."""
    s = spec(estimator)
    if s.op_types is None:
        return
    estimator = s.name
    attribution_ops.check_op_type(estimator, s.op_types, op_type, where, what)
    given = sorted(p.name for p in s.params
                   if not p.in_name and (params or {}).get(p.name, p.default) != p.default)
    if given:
        raise RuleError(
            "%s%s on %s: %s choose the forward op of the family functions; on a "
            "node the rule reads the node's own op type and attrs. Drop %s from "
            "the rule." % (what + ": " if what else "", estimator, where,
                           " and ".join("%s=" % g for g in given), ", ".join(given)))


def node_params(estimator, params, op_type, alpha=None):
    """`params` for the stop_gradient form of a frozen node of `op_type`:
    a rule takes the node's type as ``activation`` (and its LeakyRelu
    `alpha`, when given); other estimators' params are returned as they are."""
    s = spec(estimator)
    if s.op_types is None:
        return params
    covers(s, op_type, "a node")
    out = dict(params, activation=op_type)
    if op_type == "LeakyRelu" and alpha is not None:
        out["alpha"] = float(alpha)
    return out


def registry_gradient(estimator, params):
    """A TensorFlow gradient function ``(op, dy)`` applying the estimator's
    gradient rule to the op's first input, for any op whose first input has
    the shape of its first output (Sign, Round, Floor, Identity, Relu, ...).
    Other inputs get None. A rule reads the op's type, output and (LeakyRelu)
    alpha, and raises RuleError on an op type it does not cover."""
    s = spec(estimator)
    params = dict(params)

    def estimator_gradient(op, dy, *unused_grads):
        if s.op_types is None:
            dx = gradient(s, op.inputs[0], dy, params)
        else:
            dx = gradient(s, op.inputs[0], dy,
                          attribution_ops.op_params(s.name, s.op_types, params, op),
                          y=op.outputs[0])
        return [dx] + [None] * (len(op.inputs) - 1)

    estimator_gradient.__qualname__ = "graph_override.estimators.%s_gradient" % s.name
    return estimator_gradient


def name_params(estimator, params):
    """The parameters of `params` that the self-describing name holds (not
    a rule's activation and alpha, which the gradient reads from the op)."""
    keep = spec(estimator).name_params
    return collections.OrderedDict((k, v) for k, v in params.items() if k in keep)


def signature_text(estimator):
    """``ste_sign(x, clip_value=1.0)``: the call with its defaults."""
    s = spec(estimator)
    return "%s(%s)" % (s.name, ", ".join(["x"] + [
        p.name if p.required else "%s=%r" % (p.name, p.default) for p in s.params]))


def table_markdown():
    """The estimator table of the docs (the families guide): one row per
    record, its signature, forward and gradient."""
    rows = ["| function | forward | backward, dy -> dx |", "|---|---|---|"]
    rows += ["| `%s` | %s | %s |" % ((signature_text(name),) + s.doc.row)
             for name, s in ESTIMATORS.items()]
    return "\n".join(rows)


__doc__ = __doc__.format(table=table_markdown())  # pylint: disable=redefined-builtin
