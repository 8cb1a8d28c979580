"""A model's frozen graph made ready for LRP: analyzed (`structure`),
canonized (`canonize`), and each node on the path given the gradient that
carries relevance (`gradients`) with the rule its composite assigns.

`prepare` returns a `Prepared`: the graph to run, the output it explains,
the rule of every layer, and what is not covered. The CLI's
``inspect --method lrp`` prints `Prepared.report`.
"""

import dataclasses

import tensorflow as tf

from graph_override.attribution.relevance import canonize, gradients, rules
from graph_override.attribution.relevance import structure as structure_lib
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.views import GRADIENT_ATTR

__all__ = ["Prepared", "prepare"]

_PASS_KINDS = ("activation", "shift", "scale", "batch_norm")


@dataclasses.dataclass
class Prepared:
    """A graph with LRP's gradients set.

    Attributes:
      graph_def: the canonized, annotated GraphDef.
      output: the tensor whose relevance is explained (a Softmax at the
        output skipped: LRP explains its logits).
      layers: [(node name, op type, rule)] in graph order.
      uncovered: {op type: [node names]} on the path that no rule covers.
      canonized: whether a canonizer changed the graph.
      skipped_softmax: the Softmax skipped, or None.
    """

    graph_def: tf.compat.v1.GraphDef
    output: str
    layers: list
    uncovered: dict
    canonized: bool
    skipped_softmax: str = None

    def report(self):
        """The layers with their rules and the uncovered ops, as text lines."""
        lines = ["%s (%s): %s" % (name, op, rule) for name, op, rule in self.layers]
        if self.skipped_softmax:
            lines.append("Softmax %s at the output: skipped, the logits are explained"
                         % self.skipped_softmax)
        for op, names in sorted(self.uncovered.items()):
            lines.append("not covered: %s (%d node(s): %s)" % (
                op, len(names), ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")))
        return lines


def prepare(graph_def, input_name, output_name, comp, covered=()):
    """The `Prepared` graph of `comp` (a `composites.Composite`) from the
    input `input_name` (a tensor name, or a list of them for a model of
    several inputs) to `output_name`; `covered`: op types the caller's own
    rules give a gradient to."""
    names = [input_name] if isinstance(input_name, str) else list(input_name)
    first_look = structure_lib.analyze(graph_def, input_name, output_name)
    folded = canonize.fold(first_look, graph_def, comp.canonizers)
    look = structure_lib.analyze(folded, input_name, first_look.output)
    first, head, last = look.positions()
    by_name = {n.name: n for n in folded.node}
    layers, unmatched = [], []
    for name in look.layers():
        node = by_name[name]
        rule = comp.rule_for(name, node.op, name in first, name in head, name in last)
        if rule is None:
            unmatched.append("%s (%s)" % (name, node.op))
            continue
        layers.append((name, node.op, rule))
        _set_gradient(node, gradients.LAYER)
        node.attr["_lrp_rule"].s = rule.encode().encode()
        readers = look.consumers.get(name, [])
        node.attr["_lrp_bias"].b = (len(readers) == 1 and by_name[readers[0]].op == "BiasAdd"
                                    and look.live_inputs(readers[0]) == [True, False])
        data = 2 if node.op == "Conv2DBackpropInput" else 0
        node.attr["_lrp_nonneg"].b = look.nonneg(look.data_inputs(name)[data])
        if rule.name == "z_box":
            for key, value in zip(("low", "high"), rules.bounds(
                    rule, look.reached.get(name, (0,)), names, name)):
                node.attr["_lrp_" + key].tensor.CopyFrom(tf.make_tensor_proto(value))
    if unmatched:
        raise AttributionError(
            "the composite %s has no rule for the layer(s) %s: add a pair that selects "
            "them (e.g. ('any', 'epsilon')) to the composite" % (comp.name, ", ".join(unmatched)))
    for name in look.path:
        kind, node = look.kind[name], by_name[name]
        proportional = kind in ("residual", "pool") or (
            kind == "max_pool" and comp.max_pool == "proportional")
        if proportional:
            _set_gradient(node, gradients.PROPORTIONAL)
            node.attr["_lrp_stabilizer"].f = comp.stabilizer
        elif kind in _PASS_KINDS and node.op != "Identity":
            _set_gradient(node, gradients.PASS)
        else:
            continue
        node.attr["_lrp_live"].list.b.extend(look.live_inputs(name))
    uncovered = {op: names for op, names in look.uncovered().items() if op not in covered}
    return Prepared(folded, look.output, layers, uncovered,
                    folded is not graph_def and bool(comp.canonizers), look.skipped_softmax)


def _set_gradient(node, name):
    node.attr[GRADIENT_ATTR].s = str(name).encode()
