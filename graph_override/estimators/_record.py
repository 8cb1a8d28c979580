"""The estimator record, its parameters and the table that holds the records.

An estimator is one `EstimatorSpec`, made by `define` in `estimators/table.py`:
its parameters (each a `Param` with its default, its check and its line of
documentation), its forward function and its gradient as TensorFlow ops, how
the overrides family builds it, and its documentation (`Doc`). Everything
else (the three families' functions, the built-in gradient names, ``--map``,
the portable form, Keras registration, the docstrings and the docs table) is
read from the table, so a name the table does not hold is an error everywhere.
"""

import collections
import difflib
import math
import numbers
import types
from typing import Any, Callable, NamedTuple, Optional, Tuple

from graph_override.errors import UnknownEstimatorError

REQUIRED = object()
"""The default of a parameter that has none (scale_gradient's scale)."""

_TABLE = collections.OrderedDict()
ESTIMATORS = types.MappingProxyType(_TABLE)
"""Every estimator's `EstimatorSpec`, by name, in the order of the table."""


class Param(NamedTuple):
    """One parameter of an estimator.

    Attributes:
      name: the keyword, e.g. "clip_value".
      default: its default, or `REQUIRED`.
      check: ``check(estimator, name, value) -> value``: the value as the
        estimator uses it (numbers as float, k_bit as int); TypeError or
        ValueError naming the estimator otherwise.
      doc: its line in the docstrings' Args section.
      in_name: False for a parameter that only chooses the forward op of
        the family functions (an attribution rule's `activation` and
        `alpha`): it is not part of the self-describing gradient name,
        since a gradient function reads those from the op it differentiates.
    """

    name: str
    default: Any
    check: Callable
    doc: str
    in_name: bool = True

    @property
    def required(self):
        return self.default is REQUIRED


def number(name, default, doc, *, allow_none=False, minimum=None, allow_inf=False,
           positive=False, unsigned_zero=False, in_name=True):
    """A `Param` that takes a plain Python number (float), optionally None;
    with `unsigned_zero`, -0.0 becomes +0.0 (so that x - t never yields a
    signed zero that x + (-t) would not)."""

    def check(estimator, key, value):
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            # Tensors and arrays are refused on purpose: the value becomes part
            # of the registered gradient name, so it must be a plain number.
            raise TypeError("%s(%s=...) must be a Python number%s, got %s" % (
                estimator, key, " or None" if allow_none else "", type(value).__name__))
        value = float(value)
        if math.isnan(value) or (math.isinf(value) and not allow_inf):
            raise ValueError("%s(%s=...) must be finite, got %r" % (estimator, key, value))
        if minimum is not None and value < minimum:
            raise ValueError("%s(%s=...) must be >= %s, got %r" % (
                estimator, key, minimum, value))
        if positive and value <= 0:
            raise ValueError("%s(%s=...) must be > 0, got %r" % (estimator, key, value))
        return value + 0.0 if unsigned_zero else value

    return Param(name, default, check, doc, in_name)


def flag(name, default, doc):
    """A `Param` that is True or False (0 and 1 are accepted too, as names and
    rules written with them were)."""

    def check(estimator, key, value):
        if isinstance(value, bool) or (isinstance(value, numbers.Integral)
                                       and value in (0, 1)):
            return bool(value)
        raise TypeError("%s(%s=...) must be True or False, got %r" % (estimator, key, value))

    return Param(name, default, check, doc)


def integer(name, default, doc, *, low, high, in_name=True):
    """A `Param` that is an integer from `low` to `high`."""

    def check(estimator, key, value):
        if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                or not low <= value <= high):
            raise ValueError("%s(%s=...) must be an integer from %d to %d, got %r" % (
                estimator, key, low, high, value))
        return int(value)

    return Param(name, default, check, doc, in_name=in_name)


def choice(name, default, doc, *, choices, in_name=True):
    """A `Param` that is one of the strings `choices`."""

    def check(estimator, key, value):
        if not isinstance(value, str) or value not in choices:
            raise ValueError("%s(%s=...) must be one of %s, got %r" % (
                estimator, key, ", ".join(repr(c) for c in choices), value))
        return value

    return Param(name, default, check, doc, in_name)


class Doc(NamedTuple):
    """An estimator's documentation, rendered into the docstrings of its three
    functions (`graph_override._families.docstrings`) and the table of the families guide.

    Attributes:
      summary: the first line of the docstring.
      forward, gradient: the formulas, as the docstring shows them.
      row: (forward, gradient) as the cells of the docs table.
      example: the parameters of the docstring example (also the demo's).
      values, grads: what the example prints for x = [-1.5, 0.0, 1.5]
        (grads None: the example prints no gradient).
      paper: the reference, or "".
      plot: the parameters scripts/plot_estimators.py draws (None: `example`).
      x: the example's input, as Python source.
    """

    summary: str
    forward: str
    gradient: str
    row: Tuple[str, str]
    example: dict
    values: str
    grads: Optional[str]
    paper: str = ""
    plot: Optional[dict] = None
    x: str = "[-1.5, 0.0, 1.5]"


class EstimatorSpec(NamedTuple):
    """One estimator, the only place it is defined.

    Attributes:
      name: the public name of its functions ("ste_sign").
      op_type: the TensorFlow op type whose gradient it replaces: the op the
        overrides family re-routes, and what ``--map`` checks scaling
        estimators against ("Sign", "Round", "Identity", ...).
      params: its `Param` s, in signature order.
      forward: ``forward(x, params) -> y``, TensorFlow ops; the same ops in
        every family, hence bitwise-equal results.
      multiplier: ``multiplier(x, params) -> g(x)`` for a gradient linear in
        dy (dx = dy * g(x)); None returned where g(x) == 1 everywhere.
      gradient: ``gradient(x, dy, params) -> dx`` for a gradient that is not
        linear in dy (no stop_gradient form exists); None otherwise.
      build: ``build(x, params, grad_name, override) -> y``: the overrides
        family's graph, `override` being the graph's
        ``gradient_override_map``. None: the forward under
        ``{op_type: grad_name}``, which must then be one `op_type` op on x.
      doc: its `Doc`.
      check: ``check(estimator, params)``: a check across parameters, or None.
      mask: ``mask(x, params) -> bool tensor``, for a straight-through
        gradient: dy passes where the mask holds, else 0 (None returned: it
        passes everywhere). The families compute it as ``dy * cast(mask)``
        (-0.0 where dy < 0 is masked), larq as ``where(mask, dy, 0)`` (+0.0),
        so the mask is written once and both forms read it.
      larq: ``larq(x, dy, params) -> dx``, the gradient as larq 0.13.3
        computes it, beside the families' own where the two differ in their
        last bits (larq's order of operations) or at a boundary; None: larq's
        is the mask's select, or larq has no such estimator.
      op_types: for an attribution rule, the op types whose gradient it
        defines (it reads the op's type, input x and output y, see
        `graph_override.estimators.attribution_ops`); None for an estimator, which
        fits any op whose output has its input's shape. A rule's
        `multiplier` and `gradient` also take y, as their last argument,
        and its params hold the op's type as ``activation`` (and LeakyRelu's
        ``alpha``).
    """

    name: str
    op_type: str
    params: Tuple[Param, ...]
    forward: Callable
    multiplier: Optional[Callable]
    gradient: Optional[Callable]
    build: Optional[Callable]
    doc: Doc
    check: Optional[Callable] = None
    op_types: Optional[Tuple[str, ...]] = None
    mask: Optional[Callable] = None
    larq: Optional[Callable] = None

    @property
    def linear(self):
        """Whether the gradient is dy * g(x) (it then has a stop_gradient form)."""
        return self.gradient is None

    @property
    def defaults(self):
        """((name, default), ...) in signature order; None for a required one."""
        return tuple((p.name, None if p.required else p.default) for p in self.params)

    @property
    def name_params(self):
        """The names of the parameters that the gradient name holds."""
        return tuple(p.name for p in self.params if p.in_name)


def define(name, *, op_type, forward, doc, params=(), multiplier=None, gradient=None,
           mask=None, larq=None, build=None, check=None, op_types=None):
    """Adds an estimator to the table; returns its `EstimatorSpec`.

    Give one of `mask` (a straight-through gradient), `multiplier` (a
    gradient dy * g(x)) or `gradient` (any other). See `EstimatorSpec` for
    the arguments.
    """
    if not name.isidentifier() or name in _TABLE:
        raise ValueError("estimator %r: %s" % (name, "defined twice" if name in _TABLE
                                               else "not a Python identifier"))
    names = [p.name for p in params]
    bad = [n for n in names if not n.isidentifier() or n in ("x", "name")]
    if bad or len(set(names)) != len(names):
        raise ValueError("estimator %r: parameters must be distinct identifiers other "
                         "than x and name, got %s" % (name, names))
    if [multiplier, gradient, mask].count(None) != 2:
        raise ValueError("estimator %r: give one of mask (dy where it holds), "
                         "multiplier (dx = dy * g(x)) or gradient (dx from x and dy)" % name)
    spec = EstimatorSpec(name, op_type, tuple(params), forward, multiplier, gradient,
                         build, doc, check, None if op_types is None else tuple(op_types),
                         mask, larq)
    _TABLE[name] = spec
    return spec


def suggestions(name, limit=3):
    """Estimator names that look like `name`, best first."""
    return difflib.get_close_matches(str(name), list(_TABLE), n=limit, cutoff=0.6)


def spec(estimator, where=None):
    """The `EstimatorSpec` of `estimator`: the one look-up of a name in the
    table. A record is returned as it is, so that code which resolved a
    name once passes the record on and never looks it up again.

    Raises:
      UnknownEstimatorError: no estimator of that name; the message starts
        with `where` (default: the name), suggests the closest names and
        lists them all.
    """
    if isinstance(estimator, EstimatorSpec):
        return estimator
    try:
        return _TABLE[estimator]
    except (KeyError, TypeError):
        pass
    close = suggestions(estimator) if isinstance(estimator, str) else []
    raise UnknownEstimatorError("%s: no estimator of that name.%s Estimators: %s." % (
        where or repr(estimator),
        " Did you mean %s?" % " or ".join(repr(c) for c in close) if close else "",
        ", ".join(_TABLE)))


def normalize(estimator, params):
    """Checks `params` for `estimator` (a name or its record) and fills in
    defaults.

    Returns:
      An ordered dict of every parameter, numbers as float (k_bit as int).

    Raises:
      UnknownEstimatorError: `estimator` is not in the table.
      TypeError, ValueError: unknown or missing parameter, or a value out of
        range; the message names the estimator.
    """
    s = spec(estimator)
    estimator = s.name
    known = [p.name for p in s.params]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise TypeError("%s() got unknown parameter(s) %s; it takes %s" % (
            estimator, ", ".join(unknown), ", ".join(known) or "none"))
    out = collections.OrderedDict()
    for p in s.params:
        value = params.get(p.name, p.default)
        if p.required and (value is REQUIRED or value is None):
            raise TypeError("%s() missing required parameter %r" % (estimator, p.name))
        out[p.name] = p.check(estimator, p.name, value)
    if s.check is not None:
        s.check(estimator, out)
    return out
