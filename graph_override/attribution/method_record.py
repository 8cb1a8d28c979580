"""The attribution method record, its options and the table that holds the
records: one `define` per method, in `graph_override.attribution.method_table`.

A record is everything about one method: its function, its options (each an
`Option`: default, check, line of documentation, command-line `Flag`), the
gradient rules it sets on the model, its batch layout and its one-line
summary. The engine (`Explainer.attribute`), the one-call functions
(`attribution.saliency`, ...), `graph-override explain`'s flags, the
coverage report and the guide's table of methods are all read from the
records, so adding a method is adding a record (docs/architecture.md, "Where
to add things"). Nothing here imports TensorFlow: the command line checks a
method and its flags before TensorFlow is imported.

Example:
  >>> from graph_override.attribution import method_table
  >>> spec = method_table.method_spec("integrated_gradients")
  >>> spec.defaults["steps"], spec.baseline, spec.batch
  (50, True, 'inputs')
  >>> [f.name for f in spec.flags]
  ['--steps', '--rule']
"""

import collections
import difflib
import importlib
import types
from typing import Any, Callable, NamedTuple, Optional, Tuple

from graph_override.errors import AttributionError

__all__ = ["BATCH_LAYOUTS", "Flag", "METHODS", "MethodSpec", "Option", "define",
           "method_spec", "rule_strings", "table_markdown"]

_TABLE = collections.OrderedDict()
METHODS = types.MappingProxyType(_TABLE)
"""Every method's `MethodSpec`, by name, in the order of the table."""

BATCH_LAYOUTS = types.MappingProxyType({
    "inputs": "the inputs (or points made from them), one model batch per point",
    "inputs+references": "the inputs, then their baselines, in one batch: N + 1 rows "
                         "(one baseline for all) or 2N; the batch dimension must be free",
})
"""How a method's rows go through the model: the values of `MethodSpec.batch`."""


class Flag(NamedTuple):
    """An option's flag of `graph-override explain`.

    Attributes:
      name: the flag, e.g. "--epsilon".
      parse: ``parse(text) -> value``, the argparse type (raising
        ``argparse.ArgumentTypeError`` with the message); None for a switch
        (no value) or a string.
      const: a switch's value (``--no-abs`` stores False); None: the flag
        takes a value.
      metavar: the value's name in the help.
      choices: the values it takes, or None.
    """

    name: str
    parse: Optional[Callable] = None
    const: Any = None
    metavar: Optional[str] = None
    choices: Optional[Tuple[str, ...]] = None


class Option(NamedTuple):
    """One option of a method (a keyword of its function).

    Attributes:
      name: the keyword, e.g. "steps".
      default: its default.
      doc: its line in the docstring and the flag's help.
      check: ``check(method, value) -> value``: the value as the method uses
        it, AttributionError naming the method otherwise; None: taken as
        given (the function checks what depends on other options).
      flag: its `Flag` on the command line, or None.
      rule: True for a parameter of the method's rules (epsilon): set on the
        rules and checked by their estimator, not passed to the function.
    """

    name: str
    default: Any
    doc: str
    check: Optional[Callable] = None
    flag: Optional[Flag] = None
    rule: bool = False


class MethodSpec(NamedTuple):
    """One attribution method, the only place it is defined.

    Attributes:
      name: its name, as `attribute`, ``--method`` and the one-call
        function (`attribution.<name>`) take it.
      function: ``function(context, x, target, **options) -> Attribution``,
        or its place as "module:function" (imported on first use, so the
        table loads without TensorFlow). `context` is the engine's call
        context (``resolve``, ``outputs``, ``gradient``; see
        `graph_override.attribution.engine`).
      options: its `Option` s, in signature order.
      rule_specs: the gradient rules it sets, each (estimator, default
        parameters, op types); op types None: those the estimator's record
        covers (`estimators.spec(name).op_types`).
      times_input: whether its maps are a gradient times the input (or
        times input - baseline): maps of an input of zeros say nothing.
      batch: its batch layout, a key of `BATCH_LAYOUTS`.
      summary: one line: what it computes, and the paper.
    """

    name: str
    function: Any
    options: Tuple[Option, ...]
    rule_specs: Tuple[tuple, ...]
    times_input: bool
    batch: str
    summary: str

    @property
    def run(self):
        """The method's function (imported on first use)."""
        if callable(self.function):
            return self.function
        module, name = self.function.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def rules(self):
        """op type -> (estimator, default parameters), in the rules' order."""
        out = collections.OrderedDict()
        for estimator, params, op_types in self.rule_specs:
            if op_types is None:
                from graph_override import estimators  # pylint: disable=import-outside-toplevel
                op_types = estimators.spec(estimator).op_types or (
                    estimators.spec(estimator).op_type,)
            for op in op_types:
                out.setdefault(op, (estimator, params))
        return types.MappingProxyType(out)

    @property
    def rule_params(self):
        """The parameters its rules take (e.g. ``("epsilon",)``); DeepLIFT's
        ``shared_reference`` is set by the engine from the baseline."""
        return tuple(sorted({k for _, params, _ in self.rule_specs for k in params}))

    @property
    def baseline(self):
        """Whether it compares the input with a baseline (its option
        ``baseline``, zeros unless given)."""
        return any(o.name == "baseline" for o in self.options)

    @property
    def defaults(self):
        """{option: default}, in signature order."""
        return collections.OrderedDict((o.name, o.default) for o in self.options)

    @property
    def flags(self):
        """Its options' `Flag` s."""
        return tuple(o.flag for o in self.options if o.flag is not None)

    def checked(self, options):
        """(the function's options, the rules' options): `options` checked
        (`Option.check`; a rule option by its rules' estimators), the
        function's completed with their defaults.

        Raises:
          AttributionError: an option the method does not take, or a value
            its check refuses.
        """
        known = [o.name for o in self.options]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise AttributionError("%s takes no option %s; its options: %s" % (
                self.name, ", ".join(unknown), ", ".join(known) or "none"))
        own, rule = collections.OrderedDict(), {}
        for o in self.options:
            if o.rule:
                if o.name in options:
                    rule[o.name] = self._rule_value(o.name, options[o.name])
                continue
            value = options.get(o.name, o.default)
            own[o.name] = value if o.check is None else o.check(self.name, value)
        return own, rule

    def _rule_value(self, key, given):
        """A rule option's value as its rules take it (a NumPy float as a
        Python float), checked by their estimators; out of range (epsilon),
        refused in the API's terms: the argument as the caller gave it, not
        the rule string it becomes."""
        from graph_override.estimators import normalize  # pylint: disable=import-outside-toplevel
        value = given
        for estimator, params, _ in self.rule_specs:
            if key not in params:
                continue
            try:
                value = normalize(estimator, {key: given})[key]
            except (TypeError, ValueError) as e:
                why = str(e).replace("%s(%s=...)" % (estimator, key), key)
                raise AttributionError("%s(%s=%r): %s (the default is %s=%r)" % (
                    self.name, key, given, why, key, self.defaults[key])) from None
        return value

    def docstring(self):
        """The one-call function's docstring: the summary, then the options."""
        lines = [self.summary[0].upper() + self.summary[1:] + "."]
        if self.options:
            lines += ["", "Options (and their `graph-override explain` flags):"]
            lines += ["  %s=%r%s: %s" % (o.name, o.default, " (%s)" % o.flag.name
                                         if o.flag else "", o.doc) for o in self.options]
        lines += ["", "Batch: %s." % BATCH_LAYOUTS[self.batch]]
        return "\n".join(lines)

    def row(self):
        """Its row of the guide's table of methods (`table_markdown`)."""
        rules = "; ".join("`%s%s` on %s" % (
            estimator, "(%s)" % ", ".join("%s=%r" % kv for kv in sorted(params.items()))
            if params else "", ", ".join(op for op, (e, _) in self.rules.items()
                                         if e == estimator))
            for estimator, params, _ in self.rule_specs) or "none: the model's gradient"
        options = ", ".join("`%s=%r`%s" % (o.name, o.default, " (`%s`)" % o.flag.name
                                            if o.flag else "") for o in self.options)
        return "| `%s` | %s | %s | %s | %s |" % (
            self.name, self.summary, rules, options or "none",
            "x and baselines" if self.batch == "inputs+references" else "x")


def define(name, *, function, summary, options=(), rules=(), times_input=False,
           batch="inputs"):
    """Adds a method to the table; returns its `MethodSpec`.

    Args:
      name: a Python identifier, not yet in the table.
      function: ``function(context, x, target, **options)`` or
        "module:function" (see `MethodSpec`).
      summary: what it computes, and the paper (one line).
      options: its `Option` s.
      rules: its gradient rules: (estimator, default parameters) pairs (the
        op types those of the estimator's record), or (estimator,
        parameters, op types).
      times_input: see `MethodSpec`.
      batch: a key of `BATCH_LAYOUTS`.

    Raises:
      ValueError: a name defined twice or not an identifier, options that
        repeat, an unknown batch layout, a rule option no rule takes.
    """
    if not name.isidentifier() or name in _TABLE:
        raise ValueError("method %r: %s" % (name, "defined twice" if name in _TABLE
                                            else "not a Python identifier"))
    names = [o.name for o in options]
    reserved = {"model", "x", "target", "inputs", "outputs", "session", "rules", "allow_ops"}
    if len(set(names)) != len(names) or set(names) & reserved:
        raise ValueError("method %r: options must be distinct and none of %s, got %s" % (
            name, ", ".join(sorted(reserved)), names))
    if batch not in BATCH_LAYOUTS:
        raise ValueError("method %r: batch=%r is not one of %s" % (
            name, batch, ", ".join(BATCH_LAYOUTS)))
    rule_specs = tuple((r[0], types.MappingProxyType(dict(r[1])),
                        None if len(r) < 3 else tuple(r[2])) for r in rules)
    spec = MethodSpec(name, function, tuple(options), rule_specs, times_input, batch,
                      summary)
    stray = [o.name for o in options if o.rule and o.name not in spec.rule_params]
    if stray:
        raise ValueError("method %r: rule option(s) %s: no rule of it takes them" % (
            name, ", ".join(stray)))
    _TABLE[name] = spec
    return spec


def method_spec(name):
    """The `MethodSpec` of `name` (a record is returned as it is).

    Raises:
      AttributionError: no such method (the message suggests the nearest).
    """
    if isinstance(name, MethodSpec):
        return name
    spec = _TABLE.get(name) if isinstance(name, str) else None
    if spec is None:
        close = difflib.get_close_matches(str(name), list(_TABLE), n=2, cutoff=0.5)
        raise AttributionError(
            "method=%r is not an attribution method.%s Methods: %s." % (
                name, (" Did you mean %s?" % " or ".join(repr(c) for c in close))
                if close else "", ", ".join(_TABLE)))
    return spec


def rule_strings(method, **params):
    """The method's rules as ``frozen.patch`` rule strings, in op-type order.

    Args:
      method: a method name.
      **params: rule parameters overriding the defaults (e.g. ``epsilon``).

    Raises:
      AttributionError: unknown method, or a parameter the method's rules
        do not take.
    """
    spec = method_spec(method)
    unknown = set(params) - set(spec.rule_params)
    if unknown:
        raise AttributionError(
            "method %r takes no rule parameter %s; it takes %s." % (
                spec.name, ", ".join(sorted(unknown)),
                ", ".join(spec.rule_params) or "none"))
    out = []
    for op, (estimator, defaults) in spec.rules.items():
        merged = {k: v for k, v in dict(defaults, **params).items() if k in defaults}
        text = ",".join("%s=%r" % kv for kv in sorted(merged.items()))
        out.append("%s=%s%s" % (op, estimator, ":" + text if text else ""))
    return out


def table_markdown():
    """The guide's table of methods (docs/guide/attribution.md), one row per
    record."""
    return "\n".join(["| method | what it computes | rules (estimator on op types) | "
                      "options (`explain` flag) | batch |",
                      "|---|---|---|---|---|"] + [s.row() for s in _TABLE.values()])
