"""Self-describing gradient names of the built-in estimators, such as
``graph_override.ste_sign(clip_value=1.0)``: how `graph_override.registry`
writes and parses them. Pure string work over `graph_override.estimators`;
registering them is the registry's job."""

import re

from graph_override import estimators

__all__ = ["BUILTIN_PREFIX", "builtin_name", "builtin_setting", "example_name",
           "parse_builtin_name", "parse_setting", "parse_value"]

BUILTIN_PREFIX = "graph_override."

_NAME_RE = re.compile(r"^graph_override\.([a-z_]+)\((.*)\)$")


def _format_value(value):
    if value is None:
        return "None"
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def builtin_name(estimator, params):
    """The self-describing gradient name of a built-in estimator (its name
    or its record).

    `params` must be the estimator's full, normalized parameter dict (see
    `graph_override.estimators.normalize`). An attribution rule's
    ``activation`` and ``alpha`` are not in the name: the gradient reads
    them from the op it differentiates.
    """
    spec = estimators.spec(estimator)
    body = ", ".join("%s=%s" % (k, _format_value(v))
                     for k, v in estimators.name_params(spec, params).items())
    return "%s%s(%s)" % (BUILTIN_PREFIX, spec.name, body)


def example_name(estimator):
    """A built-in name to suggest: the defaults, or ``...`` for the
    parameters that have none (``graph_override.scale_gradient(scale=...)``)."""
    spec = estimators.spec(estimator)
    defaults = [(k, v) for k, v in spec.defaults if k in spec.name_params]
    if all(v is not None for _, v in defaults):
        return builtin_name(spec, estimators.normalize(spec, {}))
    return "%s%s(%s)" % (BUILTIN_PREFIX, spec.name, ", ".join(
        "%s=%s" % (k, "..." if v is None else _format_value(v)) for k, v in defaults))


_WORDS = {"None": None, "none": None, "True": True, "true": True,
          "False": False, "false": False}


def parse_value(text):
    """A parameter value in a built-in name or a ``--map`` rule: None, True,
    False (also lower case), an int or a float (``1e-05``, ``inf``); a
    ValueError otherwise. `estimators.normalize` says if the estimator takes it."""
    text = text.strip()
    if text in _WORDS:
        return _WORDS[text]
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise ValueError("%r is not a number, True, False or None" % text) from None


def parse_builtin_name(name):
    """Parses ``graph_override.NAME(k=v, ...)`` into (NAME, {k: v}), or None."""
    m = _NAME_RE.match(name)
    if not m:
        return None
    estimator, body = m.group(1), m.group(2).strip()
    params = {}
    if body:
        for part in body.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip().isidentifier():
                return None
            try:
                params[key.strip()] = parse_value(value)
            except ValueError:
                return None
    return estimator, params


def parse_setting(name):
    """(the estimator's record, normalized params) if `name` describes a
    built-in estimator setting, else None: one look-up in the table, and
    the record to pass on instead of the name."""
    parsed = parse_builtin_name(name)
    spec = None if parsed is None else estimators.ESTIMATORS.get(parsed[0])
    if spec is None:
        return None
    if set(parsed[1]) - set(spec.name_params):
        return None  # e.g. a rule's alpha: read from the op, never from the name
    try:
        return spec, estimators.normalize(spec, parsed[1])
    except (TypeError, ValueError):
        return None


def builtin_setting(name):
    """(estimator, normalized params) if `name` describes a built-in
    estimator setting, else None."""
    setting = parse_setting(name)
    return None if setting is None else (setting[0].name, setting[1])
