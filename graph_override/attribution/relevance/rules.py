"""The LRP rules of a layer, as data: a name and its parameters.

A layer is z = f(x, W) + b, f a MatMul, Conv2D, DepthwiseConv2dNative or
Conv2DBackpropInput (a transposed convolution) and b its bias (zero where
it has none). A rule maps the relevance R of z to the relevance of x. With
f^T the transpose of f (its gradient with respect to x), x+ = max(x, 0),
x- = min(x, 0), W+, W-, b+, b- likewise, and stab(z) = z + stabilizer *
sign(z) (sign(0) = +1; a stabilizer of 0 divides by z, and by 1e-7 where z
is exactly 0, iNNvestigate's ``safe_divide``):

| rule | relevance of x |
|---|---|
| ``z`` (LRP-0) | x * f^T(R / z, W) |
| ``epsilon`` | x * f^T(R / stab(z), W), stabilizer = epsilon, the bias in z |
| ``zplus`` (z+) | x+ f^T(s, W+) + x- f^T(s, W-), s = R / stab(f(x+, W+) + f(x-, W-) + b+) |
| ``alpha_beta`` | alpha (the z+ term) - beta (x+ f^T(t, W-) + x- f^T(t, W+)), t = R / stab(f(x+, W-) + f(x-, W+) + b-); alpha - beta = 1 |
| ``gamma`` | z+ with W + gamma W+ where z > 0 and W + gamma W- where z < 0 (Zennit's generalized form) |
| ``w_square`` | f^T(R / stab(f(1, W^2) + b^2), W^2) |
| ``flat`` | f^T(R / stab(f(1, 1)), 1) |
| ``z_box`` | x f^T(s, W) - l f^T(s, W+) - h f^T(s, W-), s = R / stab(f(x, W) - f(l, W+) - f(h, W-)), l <= x <= h |

These are Zennit 0.5.1's `Epsilon`, `ZPlus`, `AlphaBeta`, `Gamma`, `WSquare`,
`Flat` and `ZBox` (`zennit/rules.py`), term for term. ``alpha_beta``'s
``bias="whole"`` puts the whole bias in both terms, as iNNvestigate's
`AlphaBetaRule` does; ``w_square(bias=False)`` is iNNvestigate's
`WSquareRule`.

``z_box``'s bounds l and h are numbers or arrays broadcasting to the
layer's input; for a model of several inputs, one number for all, or one
bound per input: a dict keyed by input names, or a list or tuple of as many
bounds as the model has inputs, in its order (`PerInput`). A layer reached
by several inputs (after their concatenation) takes their bound only where
it is the same number for each.

Example:
  >>> from graph_override.attribution import relevance
  >>> relevance.rule("alpha_beta", alpha=2)
  LayerRule('alpha_beta', alpha=2.0, beta=1.0, bias='split', stabilizer=1e-06)
  >>> str(relevance.rule("epsilon:epsilon=0.25"))
  'epsilon(epsilon=0.25)'
"""

import dataclasses
import difflib
import math

import numpy as np

from graph_override.errors import AttributionError

__all__ = ["RULES", "LayerRule", "PerInput", "bounds", "rule"]

_STAB = ("stabilizer", 1e-6)

RULES = {
    "z": (),
    "epsilon": (("epsilon", 1e-6),),
    "zplus": (_STAB,),
    "alpha_beta": (("alpha", 2.0), ("beta", None), ("bias", "split"), _STAB),
    "gamma": (("gamma", 0.25), _STAB),
    "w_square": (("bias", True), _STAB),
    "flat": (_STAB,),
    "z_box": (("low", None), ("high", None), _STAB),
}
"""Each rule's parameters and their defaults, in order (None: required,
or for alpha_beta's beta, alpha - 1)."""


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """One rule with its parameters (checked); make it with `rule`.

    Attributes:
      name: a name of `RULES`.
      params: (name, value) pairs in `RULES` order.
    """

    name: str
    params: tuple = ()

    def __getitem__(self, key):
        return dict(self.params)[key]

    def __repr__(self):
        return "LayerRule(%s)" % ", ".join(
            [repr(self.name)] + ["%s=%s" % (k, _short(v)) for k, v in self.params])

    def __str__(self):
        return "%s(%s)" % (self.name, ", ".join("%s=%s" % (k, _short(v))
                                               for k, v in self.params))

    def encode(self):
        """The scalar parameters as the node attribute the gradients read:
        ``name;key=value;...`` (z_box's bounds travel as tensors)."""
        return ";".join([self.name] + ["%s=%r" % (k, v) for k, v in self.params
                                        if k not in ("low", "high")])


@dataclasses.dataclass(frozen=True)
class PerInput:
    """A z_box bound per input of a model of several inputs (see the module
    docstring): `values` in the model's order (`keys` None: a list or
    tuple) or keyed by input names (`keys`: a dict's keys)."""

    values: tuple
    keys: tuple = None

    def __repr__(self):
        if self.keys is None:
            return "[%s]" % ", ".join(_short(v) for v in self.values)
        return "{%s}" % ", ".join("%r: %s" % (k, _short(v))
                                  for k, v in zip(self.keys, self.values))

    def in_order(self, names):
        """The bounds of the inputs `names` (tensor names, the model's
        order), or None where the values are one array for all (a list of
        another length, a model of one input)."""
        if self.keys is None:
            if len(names) < 2 or len(self.values) != len(names):
                return None
            return list(self.values)
        plain = [n[:-2] if n.endswith(":0") else n for n in names]
        out = []
        for name, short in zip(names, plain):
            found = [v for k, v in zip(self.keys, self.values) if k in (name, short)]
            if not found:
                raise AttributionError(
                    "LRP rule z_box: the bounds %r have no value for the input %s; give "
                    "one per input of the model (%s), or one number for all" % (
                        self, name, ", ".join(names)))
            out.append(found[0])
        extra = [k for k in self.keys if k not in names and k not in plain]
        if extra:
            raise AttributionError(
                "LRP rule z_box: the bounds name %s, which the model does not take as an "
                "input; its inputs: %s" % (", ".join(map(repr, extra)), ", ".join(names)))
        return out


def bounds(layer_rule, reached, names, layer):
    """(low, high) of a z_box `layer_rule` on the layer op `layer`, which
    the inputs of indices `reached` (of the model's `names`) reach.

    Raises:
      AttributionError: bounds per input on a layer that several inputs
        with different bounds reach, or low > high.
    """
    out = []
    for key in ("low", "high"):
        value = layer_rule[key]
        if isinstance(value, PerInput):
            per = value.in_order(list(names))
            if per is None:
                value = np.asarray(value.values, np.float64)
            else:
                chosen = [per[i] for i in sorted(reached)]
                first = np.asarray(chosen[0], np.float64)
                if any(np.shape(c) != first.shape or np.any(np.asarray(c) != first)
                       for c in chosen[1:]):
                    raise AttributionError(
                        "LRP rule z_box on the layer %r: it reads the inputs %s together "
                        "(a concatenation, an add), whose %s bounds differ; give one number "
                        "for all inputs, or another rule there" % (
                            layer, ", ".join(names[i] for i in sorted(reached)), key))
                value = chosen[0]
        out.append(float(value) if np.ndim(value) == 0 else np.asarray(value, np.float64))
    if np.any(np.asarray(out[0]) > np.asarray(out[1])):
        raise AttributionError("LRP rule z_box on the layer %r: low > high somewhere" % layer)
    return tuple(out)


def _several(value):
    """Whether a bound is given per input (checked where the inputs are
    known: `bounds`)."""
    return isinstance(value, (PerInput, dict)) or (isinstance(value, (list, tuple))
                                                   and len(value) > 1)


def _short(value):
    if isinstance(value, PerInput):
        return repr(value)
    if isinstance(value, np.ndarray):
        return "array%s" % (value.shape,)
    return repr(value)


def decode(text):
    """(name, scalar params) of `LayerRule.encode`'s text."""
    name, *pairs = text.split(";")
    params = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        params[key] = value.strip("'") if value.startswith("'") else (
            value == "True" if value in ("True", "False") else float(value))
    return name, params


def rule(spec, **params):
    """A `LayerRule` from a name (``"zplus"``), a name with parameters
    (``"epsilon:epsilon=0.25"``), or a `LayerRule` (returned as it is, or
    with `params` replaced).

    Raises:
      AttributionError: an unknown rule or parameter, or a value out of
        range (a negative epsilon or stabilizer, alpha - beta != 1, low > high).
    """
    if isinstance(spec, LayerRule):
        if not params:
            return spec
        params = dict(dict(spec.params), **params)
        spec = spec.name
    if not isinstance(spec, str):
        raise AttributionError("an LRP rule is a name such as 'zplus' or a LayerRule, not "
                               "%r" % (spec,))
    name, _, text = spec.partition(":")
    name = name.strip()
    for pair in filter(None, text.split(",")):
        key, eq, value = pair.partition("=")
        if not eq:
            raise AttributionError("LRP rule %r: %r is not key=value" % (spec, pair))
        params.setdefault(key.strip(), _parse_value(value.strip()))
    if name not in RULES:
        close = difflib.get_close_matches(name, list(RULES), n=2, cutoff=0.5)
        raise AttributionError("%r is not an LRP rule.%s Rules: %s." % (
            name, (" Did you mean %s?" % " or ".join(map(repr, close))) if close else "",
            ", ".join(RULES)))
    known = dict(RULES[name])
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise AttributionError("LRP rule %s takes no parameter %s; it takes %s" % (
            name, ", ".join(unknown), ", ".join(known) or "none"))
    values = dict(known, **params)
    return LayerRule(name, tuple((k, _checked(name, k, values[k], values)) for k in known))


def _parse_value(text):
    try:
        return float(text)
    except ValueError:
        return {"True": True, "False": False}.get(text, text)


def _number(name, key, value, minimum=None):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise AttributionError("LRP rule %s: %s=%r is not a number" % (name, key, value))
    value = float(value)
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise AttributionError("LRP rule %s: %s=%r must be a finite number%s" % (
            name, key, value, " >= %g" % minimum if minimum is not None else ""))
    return value


def _checked(name, key, value, values):
    if key in ("epsilon", "stabilizer", "gamma"):
        return _number(name, key, value, 0.0)
    if key == "alpha":
        return _number(name, key, value, 1.0)
    if key == "beta":
        alpha = values["alpha"]
        beta = alpha - 1.0 if value is None else _number(name, key, value, 0.0)
        if abs(float(alpha) - beta - 1.0) > 1e-12:
            raise AttributionError(
                "LRP rule alpha_beta: alpha - beta must be 1 (relevance is conserved "
                "then); got alpha=%r, beta=%r" % (alpha, beta))
        return beta
    if key == "bias":
        return _bias(name, value)
    if key in ("low", "high"):
        return _bound(key, value, values)
    raise AssertionError(key)  # pragma: no cover


def _bias(name, value):
    if name == "alpha_beta":
        if value not in ("split", "whole", "none"):
            raise AttributionError(
                "LRP rule alpha_beta: bias=%r; 'split' (b+ with the positive part, b- "
                "with the negative: Zennit), 'whole' (all of b in both: iNNvestigate) "
                "or 'none'" % (value,))
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise AttributionError("LRP rule %s: bias=%r is True or False" % (name, value))
    return bool(value)


def _bound(key, value, values):
    if value is None:
        raise AttributionError(
            "LRP rule z_box needs low= and high=, the smallest and largest values the "
            "input can take (a number, or an array broadcasting to one example)")
    if isinstance(value, PerInput):
        return value
    if values is not None and _several(value):
        keys = tuple(value) if isinstance(value, dict) else None
        items = list(value.values()) if isinstance(value, dict) else list(value)
        return PerInput(tuple(_bound(key, v, None) for v in items), keys)
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise AttributionError("LRP rule z_box: %s holds values that are not finite" % key)
    low = (values or {}).get("low")
    if key == "high" and values is not None and not _several(low) and np.any(
            np.asarray(low, np.float64) > array):
        raise AttributionError("LRP rule z_box: low > high somewhere")
    return float(array) if array.ndim == 0 else array
