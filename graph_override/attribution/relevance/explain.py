"""LRP as an attribution method (the record "lrp" of `method_table`:
`attribution.lrp(model, x, target, composite=...)`).

The model is frozen once (`attribution.Explainer`), prepared once per
composite (`prepare`: canonized, each layer op given its rule's gradient),
and run as a `FrozenFunction` under a GradientTape: the gradient of the
output, started from the target's relevance, is the relevance of each input
value. The canonized graph's output is compared with the model's own on the
first batch explained (`AttributionError` if a fold changed it beyond float
rounding).

A model of several inputs (`graph_override.attribution.several`) is
prepared once with all its inputs: each input's values reach the layers on
their path, the relevance that reaches each input is its map, and the maps
come back in the structure the inputs were given in. Relevance is conserved
across the inputs as for one: the maps of all inputs together sum to the
output (LRP-0, epsilon without bias). A composite's ``"first"`` layers are
the first layers on each input's path (iNNvestigate's input layers, for
every input; Zennit's first-layer composites take the first module of the
model, one layer).
"""

import hashlib

import numpy as np
import tensorflow as tf

from graph_override.attribution import models, targets
from graph_override.attribution.relevance import composites, prepare as prepare_lib, rules
from graph_override.attribution.methods import Attribution
from graph_override.errors import AttributionError
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["FOLD_TOLERANCE", "method", "prepared"]

FOLD_TOLERANCE = 1e-4
"""How far (relative to the largest output) a canonized graph's outputs may
be from the model's: float rounding of the folded weights, not a change."""

STARTS = ("output", "one")
"""Where relevance starts: the target's value, or 1 (Zennit's one-hot)."""


def _digest(digest, value):
    if isinstance(value, rules.PerInput):
        digest.update(repr(value.keys).encode())
        for item in value.values:
            _digest(digest, item)
    elif isinstance(value, str):
        digest.update(value.encode())
    else:
        digest.update(np.asarray(value).tobytes())


def _key(comp):
    """A cache key for a composite (z_box bounds may be arrays)."""
    digest = hashlib.sha256()
    digest.update(repr((comp.name, comp.canonizers, comp.max_pool, comp.stabilizer)).encode())
    for selector, layer_rule in comp.rules:
        digest.update(repr((selector, layer_rule.name)).encode())
        for key, value in layer_rule.params:
            digest.update(key.encode())
            _digest(digest, value)
    return digest.hexdigest()


def prepared(explainer, x, composite="epsilon_plus", packed=None):
    """(`prepare.Prepared`, its `FrozenFunction`, the `ModelGraph`) of the
    explainer's model for inputs like `x` (`packed`: the `several.Packed`
    of a model of several inputs, x their packed array), made once per
    composite."""
    comp = composites.resolve(composite)
    graph = explainer.model_graph(x, packed)
    covered = frozenset(r.op_type for r in explainer.rules if getattr(r, "op_type", None))

    def make():
        names = list(graph.names)
        ready = prepare_lib.prepare(graph.graph_def, names if len(names) > 1 else graph.input,
                                    graph.output, comp, covered)
        function = FrozenFunction(ready.graph_def, names, [ready.output],
                                  rules=list(explainer.rules), on_no_match="ignore")
        return ready, function

    ready, function = explainer.cached((id(graph), "lrp", _key(comp)), make, rule_set=True)
    return ready, function, graph


def method(context, x, target, *, composite="epsilon_plus", start="output",
           canonizers=None, max_pool=None):
    """The record's function (`method_table`, "lrp"): the maps of `x`
    under `composite` (see `graph_override.attribution.relevance`)."""
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
    return _run(context.explainer, x, comp, target, start, context.packed)


def _run(explainer, x, composite, target, start, packed=None):
    x = models.as_float_input(x)
    ready, function, graph = prepared(explainer, x, composite, packed)
    if ready.uncovered:
        raise AttributionError(
            "LRP has no rule for %s on the path of %s: %s. Give those ops a gradient of "
            "your own (rules=['OP=module:function']), or explain a tensor before them "
            "(outputs=)" % (", ".join(sorted(ready.uncovered)), graph.source, "; ".join(
                "%s: %s" % (op, ", ".join(n[:3])) for op, n in sorted(ready.uncovered.items()))))
    spec = function.specs()[0][0]
    x = models.as_float_input(x, spec.dtype)
    if packed is None and spec.shape.rank is not None and not spec.shape[1:] \
            .is_compatible_with(x.shape[1:]):
        raise AttributionError("x has shape %s; the model's input %s takes %s" % (
            x.shape, graph.input, spec.shape))
    tensors = ([tf.constant(x)] if packed is None else
               [tf.constant(a) for a in packed.unpack(x)])
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        y = function(*tensors)
    if ready.canonized:
        explainer.cached((id(graph), "lrp-fold", ready.output),
                         lambda: _check_fold(graph, ready, tensors, y))
    resolved = targets.resolve(target, tuple(y.shape), x.shape[0])
    with tf.GradientTape() as inner:
        inner.watch(y)
        scalars = targets.select(y, resolved)
    seed = inner.gradient(scalars, y)
    if start == "output":
        seed = seed * y
    grads = tape.gradient(y, tensors, output_gradients=seed)
    if all(g is None for g in grads):
        raise AttributionError("%s: the output %s does not depend on the input %s" % (
            graph.source, ready.output, ", ".join(graph.names)))
    grads = [np.zeros(t.shape, t.dtype.as_numpy_dtype) if g is None else
             tf.convert_to_tensor(g).numpy() for t, g in zip(tensors, grads)]
    maps = grads[0] if packed is None else packed.pack(grads)
    outputs = y.numpy()
    return Attribution(maps=maps, method="lrp",
                       targets=targets.explained(outputs, resolved), outputs=outputs)


def _check_fold(graph, ready, tensors, y):
    """AttributionError unless the canonized graph computes the model's output
    to float rounding."""
    plain = FrozenFunction(graph.graph_def, list(graph.names), [ready.output])
    expected = plain(*tensors).numpy()
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
