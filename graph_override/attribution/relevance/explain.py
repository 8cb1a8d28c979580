"""LRP as an attribution method (the record "lrp" of `method_table`:
`attribution.lrp(model, x, target, composite=...)`).

The model is frozen once (`attribution.Explainer`), prepared once per
composite (`prepare`: canonized, each layer op given its rule's gradient),
and run as a `FrozenFunction` under a GradientTape: the gradient of the
output, started from the target's relevance, is the relevance of each input
value. The canonized graph's output is compared with the model's own on the
first batch explained (`AttributionError` if a fold changed it beyond float
rounding).
"""

import hashlib

import numpy as np
import tensorflow as tf

from graph_override.attribution import models, targets
from graph_override.attribution.relevance import composites, prepare as prepare_lib
from graph_override.attribution.methods import Attribution
from graph_override.errors import AttributionError
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["FOLD_TOLERANCE", "method", "prepared"]

FOLD_TOLERANCE = 1e-4
"""How far (relative to the largest output) a canonized graph's outputs may
be from the model's: float rounding of the folded weights, not a change."""

STARTS = ("output", "one")
"""Where relevance starts: the target's value, or 1 (Zennit's one-hot)."""


def _key(comp):
    """A cache key for a composite (z_box bounds may be arrays)."""
    digest = hashlib.sha256()
    digest.update(repr((comp.name, comp.canonizers, comp.max_pool, comp.stabilizer)).encode())
    for selector, layer_rule in comp.rules:
        digest.update(repr((selector, layer_rule.name)).encode())
        for key, value in layer_rule.params:
            digest.update(key.encode())
            digest.update(np.asarray(value).tobytes() if not isinstance(value, str)
                          else value.encode())
    return digest.hexdigest()


def prepared(explainer, x, composite="epsilon_plus"):
    """(`prepare.Prepared`, its `FrozenFunction`, the `ModelGraph`) of the
    explainer's model for inputs like `x`, made once per composite."""
    comp = composites.resolve(composite)
    graph = explainer.model_graph(x)
    covered = frozenset(r.op_type for r in explainer.rules if getattr(r, "op_type", None))

    def make():
        ready = prepare_lib.prepare(graph.graph_def, graph.input, graph.output, comp, covered)
        function = FrozenFunction(ready.graph_def, [graph.input], [ready.output],
                                  rules=list(explainer.rules), on_no_match="ignore")
        return ready, function

    ready, function = explainer.cached((id(graph), "lrp", _key(comp)), make)
    return ready, function, graph


def method(context, x, target, *, composite="epsilon_plus", start="output",
           canonizers=None, max_pool=None):
    """The record's function (`method_table`, "lrp"): the maps of `x`
    under `composite` (see `graph_override.attribution.relevance`)."""
    if len(context.graph.names) > 1:
        raise AttributionError(
            "lrp explains models of one input; %s has %d (%s): explain a model of one "
            "input (the others fixed inside it), or use a method of the table that takes "
            "several" % (context.graph.source, len(context.graph.names),
                         ", ".join(context.graph.names)))
    comp = composites.resolve(composite)
    changes = {}
    if canonizers is not None:
        changes["canonizers"] = composites.check_canonizers(canonizers)
    if max_pool is not None:
        changes["max_pool"] = max_pool
    if changes:
        comp = composites.composite(comp.rules, name=comp.name, stabilizer=comp.stabilizer,
                                    **dict({"canonizers": comp.canonizers,
                                            "max_pool": comp.max_pool}, **changes))
    return _run(context.explainer, x, comp, target, start)


def _run(explainer, x, composite, target, start):
    x = models.as_float_input(x)
    ready, function, graph = prepared(explainer, x, composite)
    if ready.uncovered:
        raise AttributionError(
            "LRP has no rule for %s on the path of %s: %s. Give those ops a gradient of "
            "your own (rules=['OP=module:function']), or explain a tensor before them "
            "(outputs=)" % (", ".join(sorted(ready.uncovered)), graph.source, "; ".join(
                "%s: %s" % (op, ", ".join(n[:3])) for op, n in sorted(ready.uncovered.items()))))
    spec = function.specs()[0][0]
    x = models.as_float_input(x, spec.dtype)
    if spec.shape.rank is not None and not spec.shape[1:].is_compatible_with(x.shape[1:]):
        raise AttributionError("x has shape %s; the model's input %s takes %s" % (
            x.shape, graph.input, spec.shape))
    tensor = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(tensor)
        y = function(tensor)
    if ready.canonized:
        explainer.cached((id(graph), "lrp-fold", ready.output),
                         lambda: _check_fold(graph, ready, tensor, y))
    resolved = targets.resolve(target, tuple(y.shape), x.shape[0])
    with tf.GradientTape() as inner:
        inner.watch(y)
        scalars = targets.select(y, resolved)
    seed = inner.gradient(scalars, y)
    if start == "output":
        seed = seed * y
    maps = tape.gradient(y, tensor, output_gradients=seed)
    if maps is None:
        raise AttributionError("%s: the output %s does not depend on the input %s" % (
            graph.source, ready.output, graph.input))
    outputs = y.numpy()
    return Attribution(maps=tf.convert_to_tensor(maps).numpy(), method="lrp",
                       targets=targets.explained(outputs, resolved), outputs=outputs)


def _check_fold(graph, ready, tensor, y):
    """AttributionError unless the canonized graph computes the model's output
    to float rounding."""
    plain = FrozenFunction(graph.graph_def, [graph.input], [ready.output])
    expected = plain(tensor).numpy()
    got = y.numpy()
    scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-30)
    gap = float(np.max(np.abs(got - expected))) if expected.size else 0.0
    if not gap <= FOLD_TOLERANCE * scale:
        raise AttributionError(
            "%s: folding the batch normalizations into their layers changed the output %s "
            "by %.3g (%.3g of its largest value, more than float rounding, %g): a fold "
            "does not apply here; give canonizers=() to keep them (relevance then passes "
            "through them unchanged)" % (graph.source, ready.output, gap, gap / scale,
                                         FOLD_TOLERANCE))
    return True
