"""Composites: which rule each layer gets, by its type, its position and its
name, with the canonizers to apply first; Zennit's and iNNvestigate's by
name.

A composite's rules are (selector, rule) pairs; the first pair whose
selector holds for a layer gives its rule. A selector is one of

* a type: ``"dense"`` (MatMul), ``"conv"`` (any convolution), ``"conv2d"``,
  ``"depthwise"``, ``"conv_transpose"``, ``"any"``;
* a position: ``"first"`` (no layer between it and the input), ``"head"``
  (a dense layer no convolution follows), ``"last"`` (no layer follows);
* ``"name:REGEX"``: `re.search` on the layer's node name
  (``"name:dense_1/"`` for the Keras layer ``dense_1``);
* a tuple of these, all of which must hold (``("first", "conv")``).

Example: a composite of one's own, z+ in the convolutions, epsilon 0.25 in
the dense head, flat in the first layer:

  >>> from graph_override.attribution import relevance
  >>> mine = relevance.composite([("first", "flat"), ("conv", "zplus"),
  ...                             ("dense", relevance.rule("epsilon", epsilon=0.25))])
  >>> mine.rules[2]
  ('dense', LayerRule('epsilon', epsilon=0.25))
"""

import dataclasses
import difflib
import re

from graph_override.attribution.relevance.rules import RULES, _parse_value, rule
from graph_override.errors import AttributionError

__all__ = ["CANONIZERS", "COMPOSITES", "Composite", "check_canonizers", "composite", "named",
           "resolve"]

CANONIZERS = ("batch_norm",)
"""The canonizers by name (`canonize`): ``batch_norm`` folds batch
normalizations (and other per-channel scalings) into the layer before them."""


def check_canonizers(canonizers):
    """`canonizers` as a tuple of known names."""
    names = (canonizers,) if isinstance(canonizers, str) else tuple(canonizers or ())
    for name in names:
        if name not in CANONIZERS:
            raise AttributionError("canonizer %r is not one of %s" % (
                name, ", ".join(CANONIZERS)))
    return names

_TYPES = {
    "dense": ("MatMul",), "conv2d": ("Conv2D",), "depthwise": ("DepthwiseConv2dNative",),
    "conv_transpose": ("Conv2DBackpropInput",),
    "conv": ("Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput"),
    "any": ("MatMul", "Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput"),
}
_POSITIONS = ("first", "head", "last")


@dataclasses.dataclass(frozen=True)
class Composite:
    """Rules for layers, and what the other parts of the graph do.

    Attributes:
      name: for messages.
      rules: ((selector, `LayerRule`), ...), the first match wins.
      canonizers: names of `canonize.CANONIZERS` applied first.
      max_pool: ``"winner"`` (the window's maximum takes all: MaxPool's
        gradient, as Zennit and iNNvestigate do) or ``"proportional"``
        (shared in proportion to the window's inputs).
      stabilizer: the stabilizer of the proportional parts (average pools,
        means, residual adds): 1e-6 as Zennit's `Norm`; 0 divides safely as
        iNNvestigate does.
    """

    name: str
    rules: tuple
    canonizers: tuple = ("batch_norm",)
    max_pool: str = "winner"
    stabilizer: float = 1e-6

    def rule_for(self, node, op_type, first, head, last):
        """The `LayerRule` of a layer (its node name and op type, whether it
        is first, in the head, last), or None."""
        facts = {"first": first, "head": head, "last": last}
        for selector, layer_rule in self.rules:
            parts = selector if isinstance(selector, tuple) else (selector,)
            if all(_holds(p, node, op_type, facts) for p in parts):
                return layer_rule
        return None


def _holds(part, node, op_type, facts):
    if part in facts:
        return facts[part]
    if part.startswith("name:"):
        return re.search(part[5:], node) is not None
    return op_type in _TYPES[part]


def _check_selector(selector):
    parts = selector if isinstance(selector, tuple) else (selector,)
    for part in parts:
        if not isinstance(part, str) or not (
                part in _TYPES or part in _POSITIONS or part.startswith("name:")):
            raise AttributionError(
                "composite selector %r: a layer type (%s), a position (%s), "
                "'name:REGEX', or a tuple of these" % (
                    part, ", ".join(_TYPES), ", ".join(_POSITIONS)))
        if part.startswith("name:"):
            try:
                re.compile(part[5:])
            except re.error as e:
                raise AttributionError("composite selector %r: %s" % (part, e)) from None
    return selector


def composite(rules, *, canonizers=("batch_norm",), max_pool="winner", stabilizer=1e-6,
              name="custom"):
    """A `Composite` of (selector, rule) pairs (rules by name or
    `rules.rule`), checked.

    Raises:
      AttributionError: an unknown selector, rule, canonizer or max_pool.
    """
    if max_pool not in ("winner", "proportional"):
        raise AttributionError("max_pool=%r: 'winner' or 'proportional'" % (max_pool,))
    pairs = tuple((_check_selector(tuple(s) if isinstance(s, list) else s), rule(r))
                  for s, r in rules)
    stabilizer = rule("zplus", stabilizer=stabilizer)["stabilizer"]
    return Composite(name, pairs, check_canonizers(canonizers), max_pool, stabilizer)


def _zennit(conv, first=None, epsilon=1e-6, stabilizer=1e-6):
    pairs = [] if first is None else [first]
    return pairs + [("conv", conv), ("dense", rule("epsilon", epsilon=epsilon))]


def epsilon_plus(epsilon=1e-6, stabilizer=1e-6):
    return _zennit(rule("zplus", stabilizer=stabilizer), None, epsilon)


def epsilon_plus_flat(epsilon=1e-6, stabilizer=1e-6):
    return _zennit(rule("zplus", stabilizer=stabilizer),
                   ("first", rule("flat", stabilizer=stabilizer)), epsilon)


def epsilon_alpha2_beta1(epsilon=1e-6, stabilizer=1e-6):
    return _zennit(rule("alpha_beta", alpha=2.0, beta=1.0, stabilizer=stabilizer), None,
                   epsilon)


def epsilon_alpha2_beta1_flat(epsilon=1e-6, stabilizer=1e-6):
    return _zennit(rule("alpha_beta", alpha=2.0, beta=1.0, stabilizer=stabilizer),
                   ("first", rule("flat", stabilizer=stabilizer)), epsilon)


def epsilon_gamma_box(low=None, high=None, epsilon=1e-6, gamma=0.25, stabilizer=1e-6):
    return _zennit(rule("gamma", gamma=gamma, stabilizer=stabilizer),
                   (("first", "conv"), rule("z_box", low=low, high=high,
                                            stabilizer=stabilizer)), epsilon)


def _preset(alpha, flat, epsilon=0.1):
    pairs = [("dense", rule("epsilon", epsilon=epsilon)),
             ("conv", rule("alpha_beta", alpha=alpha, beta=alpha - 1.0, bias="whole",
                           stabilizer=0.0))]
    return ([("first", rule("flat", stabilizer=0.0))] if flat else []) + pairs


COMPOSITES = {
    # Zennit 0.5.1 (zennit/composites.py), with its defaults
    "epsilon_plus": epsilon_plus,
    "epsilon_plus_flat": epsilon_plus_flat,
    "epsilon_alpha2_beta1": epsilon_alpha2_beta1,
    "epsilon_alpha2_beta1_flat": epsilon_alpha2_beta1_flat,
    "epsilon_gamma_box": epsilon_gamma_box,
    # iNNvestigate 2.1.2's LRPSequentialPreset* (relevance_analyzer.py)
    "preset_a": lambda epsilon=0.1: _preset(1.0, False, epsilon),
    "preset_b": lambda epsilon=0.1: _preset(2.0, False, epsilon),
    "preset_a_flat": lambda epsilon=0.1: _preset(1.0, True, epsilon),
    "preset_b_flat": lambda epsilon=0.1: _preset(2.0, True, epsilon),
}
"""Composites by name: name -> function of the composite's parameters
returning its (selector, rule) pairs. iNNvestigate's divide safely
(stabilizer 0) in their pools and adds too. Any rule's name is also a
composite: that rule in every layer."""


def named(name, **params):
    """The composite `name` (a `COMPOSITES` name, or a rule name for that rule
    in every layer), with `params` for its function or rule."""
    if name in COMPOSITES:
        try:
            pairs = COMPOSITES[name](**params)
        except TypeError as e:
            raise AttributionError("composite %s: %s" % (name, e)) from None
        innvestigate = name.startswith("preset_")
        return composite(pairs, name=name, stabilizer=0.0 if innvestigate else 1e-6)
    if name in RULES:
        return composite([("any", rule(name, **params))], name=name)
    close = difflib.get_close_matches(name, list(COMPOSITES) + list(RULES), n=2, cutoff=0.5)
    raise AttributionError("%r is not an LRP composite or rule.%s Composites: %s; or a rule "
                           "in every layer: %s." % (
                               name, (" Did you mean %s?" % " or ".join(map(repr, close)))
                               if close else "", ", ".join(COMPOSITES), ", ".join(RULES)))


def resolve(spec):
    """A `Composite` from a `Composite`, a name, or ``"NAME:key=value,..."``
    (``"epsilon_gamma_box:low=-1,high=1"``)."""
    if isinstance(spec, Composite):
        return spec
    if not isinstance(spec, str):
        raise AttributionError("composite=%r: a name (%s) or a Composite (attribution.relevance.composite)" % (
            spec, ", ".join(COMPOSITES)))
    name, _, text = spec.partition(":")
    params = {}
    for pair in filter(None, text.split(",")):
        key, eq, value = pair.partition("=")
        if not eq:
            raise AttributionError("composite %r: %r is not key=value" % (spec, pair))
        params[key.strip()] = _parse_value(value.strip())
    return named(name.strip(), **params)
