"""Patch rules: which nodes of a GraphDef to change, and how (see
`graph_override.frozen`)."""

import collections.abc
import dataclasses
import fnmatch
import itertools
import re
import warnings

from graph_override import builtin_names, estimators, registry, user_functions
from graph_override._tensorflow import compat
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, gradient_attr
from graph_override.errors import (NoMatchError, RuleError, UnknownGradientError,
                                   UnknownOpTypeError)

__all__ = ["Rule", "as_rules", "check_matches", "parse_rule", "select"]

@dataclasses.dataclass(frozen=True)
class Rule:
    """Which nodes to change (selectors, all given must match) and how (one
    action).

    Selectors: `op_type` (exact, e.g. "Sign"), `name_regex` (``re.search`` on
    the node name), `gradient_op_type` (a glob on the node's current
    ``_gradient_op_type``, e.g. "CustomGradient-*").

    Actions: `estimator` (+ `params`) sets a built-in estimator's gradient
    (a name, looked up once, or its record: the rule keeps the name and
    the record, `spec`);
    `gradient` sets a registered gradient name; `remove` deletes the
    ``_gradient_op_type`` attr, so the op's own gradient applies again.

    Example:
      >>> from graph_override.frozen import Rule, parse_rule
      >>> parse_rule("Identity=flip_gradient:scale=0.5") == Rule(
      ...     "Identity", estimator="flip_gradient", params={"scale": 0.5})
      True
      >>> Rule("Sign", estimator="ste_sign").target
      'graph_override.ste_sign(clip_value=1.0)'
    """

    op_type: str = None
    name_regex: str = None
    gradient_op_type: str = None
    estimator: str = None
    params: dict = None
    gradient: str = None
    remove: bool = False

    def __post_init__(self):
        if self.op_type is None and self.name_regex is None and self.gradient_op_type is None:
            raise RuleError("a rule needs a selector: op_type, name_regex or "
                            "gradient_op_type")
        actions = (self.estimator is not None) + (self.gradient is not None) + bool(self.remove)
        if actions != 1:
            raise RuleError("a rule needs exactly one action: estimator=..., "
                            "gradient=... or remove=True; got %d" % actions)
        if self.op_type is not None and not compat.is_op_type(self.op_type):
            hints = compat.op_type_suggestions(self.op_type)
            raise UnknownOpTypeError(
                "rule selects op type %r, which TensorFlow does not know.%s" % (
                    self.op_type, (" Did you mean %s?" % " or ".join(
                        repr(h) for h in hints)) if hints else ""))
        if self.name_regex is not None:
            try:
                re.compile(self.name_regex)
            except re.error as e:
                raise RuleError("rule name_regex %r is not a valid regular "
                                "expression: %s" % (self.name_regex, e)) from e
        if self.estimator is not None:
            # The one look-up of the name (none if given the record, as
            # parse_rule does); the record travels with the rule from here.
            try:
                spec = estimators.spec(self.estimator)
                params = estimators.normalize(spec, dict(self.params or {}))
            except (TypeError, ValueError) as e:
                raise RuleError("rule %s: %s" % (self.describe_selector(), e)) from e
            object.__setattr__(self, "estimator", spec.name)
            object.__setattr__(self, "params", dict(params))
            object.__setattr__(self, "_spec", spec)
        elif self.params:
            raise RuleError("rule parameters %r need an estimator" % (self.params,))
        if self.gradient is not None and not registry.is_resolvable(self.gradient):
            try:
                registry.resolve(self.gradient)
            except UnknownGradientError as e:
                raise RuleError("rule %s: %s" % (self.describe_selector(), e)) from e

    @property
    def spec(self):
        """The estimator's record (`estimators.EstimatorSpec`), or None."""
        return getattr(self, "_spec", None)

    @property
    def target(self):
        """The gradient name this rule sets, or None for `remove`."""
        if self.estimator is not None:
            return builtin_names.builtin_name(self.spec, self.params)  # normalized
        return self.gradient

    def describe_selector(self):
        parts = []
        if self.op_type is not None:
            parts.append("op type %s" % self.op_type)
        if self.name_regex is not None:
            parts.append("name ~ /%s/" % self.name_regex)
        if self.gradient_op_type is not None:
            parts.append("gradient %s" % self.gradient_op_type)
        return " and ".join(parts)

    def __str__(self):
        action = ("remove" if self.remove else self.target)
        return "%s -> %s" % (self.describe_selector(), action)


def _split_rule(text):
    """(SELECTOR, ACTION) split at the first '=' outside parentheses, so a
    selector may name a built-in gradient such as
    ``gradient:graph_override.ste_sign(clip_value=1.0)``."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "=" and depth == 0:
            return text[:i].strip(), text[i + 1:].strip()
    raise RuleError("--map %r: expected SELECTOR=ACTION, e.g. Sign=ste_sign "
                    "or Identity=flip_gradient:scale=0.5" % (text,))


def _selector_kwargs(text, selector, name_regex):
    """The `Rule` arguments that SELECTOR gives."""
    if selector.startswith("gradient:"):
        if not selector[len("gradient:"):]:
            raise RuleError("--map %r: 'gradient:' needs a name or glob" % text)
        return {"gradient_op_type": selector[len("gradient:"):]}
    if selector == "*":
        if name_regex is None:
            raise RuleError("--map %r: '*' selects every node; combine it with "
                            "a name regex (--select)" % text)
        return {}
    if selector:
        return {"op_type": selector}
    raise RuleError("--map %r: nothing before '='" % text)


def _params(text, param_text):
    """An estimator's parameters, ``KEY=VALUE,...``."""
    params = {}
    for item in filter(None, (p.strip() for p in param_text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise RuleError("--map %r: parameter %r should be KEY=VALUE"
                            % (text, item))
        if key.strip() in params:
            raise RuleError("--map %r: parameter %r is given twice; give each "
                            "parameter once" % (text, key.strip()))
        try:
            params[key.strip()] = builtin_names.parse_value(value)
        except ValueError as e:
            raise RuleError("--map %r: parameter %s: %s" % (
                text, key.strip(), e)) from None
    return params


def _action_kwargs(text, action):
    """The `Rule` arguments that ACTION gives."""
    try:
        return _action(text, action)
    except RuleError as e:
        message = str(e)
        if message.startswith("--map "):
            raise
        if message.startswith("%r: " % action):  # user_functions names the action
            message = message[len("%r: " % action):]
        raise RuleError("--map %r: %s" % (text, message)) from e


def _action(text, action):
    name, _, param_text = action.partition(":")
    spec = estimators.ESTIMATORS.get(name)  # the rule gets the record, not the name
    if spec is not None:
        if "=" not in param_text and user_functions.is_function_spec("m:" + param_text) and (
                param_text not in {p.name for p in spec.params}):
            user_functions.import_function(action)  # raises: MODULE collides with it
        return {"estimator": spec, "params": _params(text, param_text)}
    if action == "remove":
        return {"remove": True}
    if not action:
        raise RuleError("--map %r: nothing after '='" % text)
    if user_functions.is_function_spec(action):
        # The user's own function, imported because the user named it here
        # (never because a GraphDef carries the name).
        return {"gradient": str(user_functions.register_function(action))}
    close = registry.estimator_suggestions(name)
    if close and not registry.is_resolvable(action):
        raise RuleError(
            "--map %r: %r is neither a built-in estimator nor a registered "
            "gradient name. Did you mean %s? Estimators: %s." % (
                text, name, " or ".join(repr(c) for c in close),
                ", ".join(estimators.ESTIMATORS)))
    if not registry.is_resolvable(action) and re.fullmatch(r"[A-Za-z_][\w.]*\.\w+", action):
        module, _, function = action.rpartition(".")
        raise RuleError(
            "--map %r: no gradient is registered under %r. To use a function of "
            "your own, name it MODULE:FUNCTION, e.g. %s:%s (imported as "
            "python -m would, from the current directory or sys.path)."
            % (text, action, module, function))
    return {"gradient": action}


def parse_rule(text, *, name_regex=None):
    """Parses a CLI ``--map`` string into a `Rule`.

    Syntax: ``SELECTOR=ACTION``. SELECTOR is an op type (``Sign``), ``*``
    (any op type; use with `name_regex`) or ``gradient:GLOB`` (nodes whose
    ``_gradient_op_type`` matches, e.g. ``gradient:CustomGradient-*``).
    ACTION is a built-in estimator with optional parameters
    (``ste_sign``, ``flip_gradient:scale=0.5``,
    ``ste_tern:threshold_value=0.1,clip_value=1``,
    ``ste_tern:ternary_weight_networks=True``, ``ste_sign:clip_value=None``),
    ``remove``, a registered gradient name (``Identity``), or a gradient
    function of the user's own, ``MODULE:FUNCTION``, imported and registered
    under that name (`graph_override.user_functions`). A parameter
    value is a number, True, False or None (also lower case), as the
    estimator takes it.

    Example:
      >>> from graph_override.frozen import parse_rule
      >>> str(parse_rule("gradient:CustomGradient-*=remove"))
      'gradient CustomGradient-* -> remove'

    Raises:
      RuleError: malformed text (the message quotes it).
      UnknownOpTypeError: the op type is unknown (with suggestions).
    """
    if not isinstance(text, str) or "=" not in text:
        raise RuleError("--map %r: expected SELECTOR=ACTION, e.g. Sign=ste_sign "
                        "or Identity=flip_gradient:scale=0.5" % (text,))
    selector, action = _split_rule(text)
    kwargs = {"name_regex": name_regex}
    kwargs.update(_selector_kwargs(text, selector, name_regex))
    kwargs.update(_action_kwargs(text, action))
    try:
        return Rule(**kwargs)
    except RuleError as e:
        raise RuleError("--map %r: %s" % (text, e)) from e


def as_rules(rules):
    if isinstance(rules, (Rule, str)):
        rules = [rules]
    elif isinstance(rules, dict):
        rules = ["%s=%s" % kv for kv in rules.items()]
    elif not isinstance(rules, collections.abc.Iterable):
        raise RuleError("rules: expected a list of rules such as ['Sign=ste_sign'], "
                        "a dict {'Sign': 'ste_sign'} or one rule, got %r" % (rules,))
    out = [r if isinstance(r, Rule) else parse_rule(r) for r in rules]
    if not out:
        raise RuleError("no rules given")
    return out


def select(graph_def, view, rules):
    """{rule index: [node indices]} and {node index: rule index}, the first
    rule selecting a node winning. `graph_def` is read only for rules
    that select by gradient name."""
    attrs = None
    selected, owner = {}, {}
    for r, rule in enumerate(rules):
        if rule.op_type is not None:  # compress and map run in C
            idx = list(itertools.compress(range(len(view.ops)),
                                          map(rule.op_type.__eq__, view.ops)))
        else:
            idx = range(len(view.ops))
        if rule.name_regex is not None:
            search = re.compile(rule.name_regex).search
            names = view.index.lazy_names
            idx = [i for i in idx if search(names[i])]
        if rule.gradient_op_type is not None:
            if attrs is None:
                attrs = {i: gradient_attr(n) for i, n in enumerate(graph_def.node)
                         if view.has_gradient_attrs and GRADIENT_ATTR in n.attr}
            idx = [i for i in idx if attrs.get(i) is not None
                   and fnmatch.fnmatchcase(attrs[i], rule.gradient_op_type)]
        selected[r] = list(idx)
        for i in selected[r]:
            owner.setdefault(i, r)
    return selected, owner


def check_matches(rules, selected, on_no_match):
    if on_no_match not in ("raise", "warn", "ignore"):
        raise ValueError("on_no_match must be 'raise', 'warn' or 'ignore', got %r"
                         % (on_no_match,))
    empty = [str(rules[r]) for r, idx in selected.items() if not idx]
    if empty and on_no_match != "ignore":
        msg = ("rule(s) selected no node: %s. Check the op type and regex "
               "against `graph-override inspect` (op type counts)" % "; ".join(empty))
        if on_no_match == "raise":
            raise NoMatchError(msg + ", or allow it (on_no_match='ignore', "
                               "--allow-no-match).")
        from graph_override.scope import NoMatchWarning  # pylint: disable=import-outside-toplevel
        warnings.warn(msg, NoMatchWarning, stacklevel=3)
