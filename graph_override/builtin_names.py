"""Self-describing gradient names of the built-in estimators, such as
``graph_override.ste_sign(clip_value=1.0)``: how `graph_override.registry`
writes and parses them. Pure string work over `graph_override.estimators`;
registering them is the registry's job."""

import re

from graph_override import estimators

__all__ = ["BUILTIN_PREFIX", "builtin_name", "builtin_setting", "example_name",
           "parse_builtin_name", "parse_value"]

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
    """The self-describing gradient name of a built-in estimator.

    `params` must be the estimator's full, normalized parameter dict (see
    `graph_override.estimators.normalize`).
    """
    body = ", ".join("%s=%s" % (k, _format_value(v)) for k, v in params.items())
    return "%s%s(%s)" % (BUILTIN_PREFIX, estimator, body)


def example_name(estimator):
    """A built-in name to suggest: the defaults, or ``...`` for the
    parameters that have none (``graph_override.scale_gradient(scale=...)``)."""
    defaults = estimators.ESTIMATORS[estimator].defaults
    if all(v is not None for _, v in defaults):
        return builtin_name(estimator, estimators.normalize(estimator, {}))
    return "%s%s(%s)" % (BUILTIN_PREFIX, estimator, ", ".join(
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


def builtin_setting(name):
    """(estimator, normalized params) if `name` describes a built-in
    estimator setting, else None."""
    parsed = parse_builtin_name(name)
    if parsed is None or parsed[0] not in estimators.ESTIMATORS:
        return None
    try:
        return parsed[0], estimators.normalize(parsed[0], parsed[1])
    except (TypeError, ValueError):
        return None
