"""Which op types of a model an attribution method does not cover, said
before the run (`graph-override inspect --method NAME MODEL`).

A rule method (guided backprop, deconvnet, eps-LRP, DeepLIFT) replaces the
gradient of the op types in its rules (`rules.METHODS`) and keeps the
gradient of the linear ones (`rules.LINEAR_OPS`). Any other op type on the
path from the input to the output keeps its own gradient, so the maps are
not what the method defines there: a Relu6 under a method that covers only
Relu, a Softmax, a custom op. This is the failure SHAP's users meet as a
``LookupError`` halfway through a run. A gradient method (saliency,
gradient x input, Integrated Gradients, SmoothGrad, Grad-CAM) is the model's
own gradient, which every op with a gradient covers.

Whatever the method, these are reported too: ops with no gradient or a
gradient name that does not resolve (tf.gradients fails there), the nodes of
a TF1 while loop (no gradient crosses one after import, whatever the rules:
`graph_override.frozen.inspect` says more), unknown (custom) op types, and
batch normalization in training mode, which
normalizes by the batch's own statistics, so one example's map depends on
the others in the batch (and DeepLIFT's batch of inputs and references mixes
the two).

The path is the nodes that depend on an input through float tensors and that
an output depends on; a node that calls a function (PartitionedCall, While,
If, a library function) stands for every node of its bodies, named
``FUNCTION/NODE``.

Example:
  >>> import tensorflow as tf
  >>> from graph_override.attribution import coverage
  >>> with tf.Graph().as_default() as g:
  ...     x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
  ...     h = tf.nn.relu6(tf.nn.relu(x, name="r"), name="r6")
  ...     y = tf.nn.softmax(h, name="y")
  >>> report = coverage.coverage_report(g.as_graph_def(), "guided_backprop",
  ...                                   outputs="y:0")
  >>> [(u["op"], u["nodes"]) for u in report.uncovered]
  [('Softmax', ['y'])]
  >>> report.covered
  {'Relu': 1, 'Relu6': 1}
"""

import collections
import dataclasses
import os

from tensorflow.core.framework import graph_pb2

from graph_override._tensorflow import compat
from graph_override.attribution import method_table
from graph_override.errors import AttributionError
from graph_override.frozen.graphdef.functions import (CALL_OPS, CONTROL_FLOW_OPS,
                                                      called_functions)
from graph_override.frozen.graphdef.io import load
from graph_override.frozen.graphdef.views import ancestors
from graph_override.frozen.inspection.inspector import (V1_LOOP_OPS, _may_carry_gradient,
                                                        inspect)
from graph_override.frozen.inspection.report import table
from graph_override.frozen.tf2.graph import check_names

__all__ = ["CoverageReport", "coverage_report"]

_NODES_SHOWN = 5
_PLACEHOLDERS = frozenset(("Placeholder", "PlaceholderWithDefault"))
_BATCH_NORMS = frozenset(("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"))
_NO_OUTPUT_OPS = frozenset(("NoOp", "Assert", "_Retval", "_Arg", "Const"))


@dataclasses.dataclass
class CoverageReport:
    """What `coverage_report` found.

    Attributes:
      method: the method's name.
      source: how messages name the model.
      inputs, outputs: the tensor names the path runs between.
      path_nodes: how many nodes lie on the path (bodies included).
      covered: op type -> count of the path's nodes the method's rules cover.
      linear: how many path nodes are of `rules.LINEAR_OPS` (their own
        gradient is the method's).
      uncovered: one dict per op type, most nodes first: ``op``, ``count``,
        ``nodes`` (the first few names), ``reason``.
    """

    method: str
    source: str
    inputs: list
    outputs: list
    path_nodes: int
    covered: dict
    linear: int
    uncovered: list

    @property
    def ok(self):
        """True if every op on the path is covered."""
        return not self.uncovered

    def to_dict(self):
        return {"method": self.method, "file": self.source, "inputs": list(self.inputs),
                "outputs": list(self.outputs), "path_nodes": self.path_nodes,
                "covered": dict(self.covered), "linear": self.linear,
                "uncovered": list(self.uncovered), "ok": self.ok}

    def format(self):
        spec = method_table.METHODS[self.method]
        rules = _rules_text(spec)
        lines = ["method %s (%s): %d node(s) on the path from %s to %s; %s%d linear" % (
            self.method, rules, self.path_nodes, ", ".join(self.inputs),
            ", ".join(self.outputs), "%d covered by its rules (%s), " % (
                sum(self.covered.values()), ", ".join(
                    "%s %d" % kv for kv in self.covered.items())) if spec.rules else "",
            self.linear)]
        if self.ok:
            lines.append("every op type on the path is covered")
            return "\n".join(lines)
        lines.append("%d op type(s), %d node(s) NOT covered by %s:" % (
            len(self.uncovered), sum(u["count"] for u in self.uncovered), self.method))
        lines += table([("op type", "count", "nodes", "why")] + [
            (u["op"], str(u["count"]), ", ".join(u["nodes"][:3])
             + (" ..." if u["count"] > 3 else ""), u["reason"]) for u in self.uncovered])
        return "\n".join(lines)

    __str__ = format


def _rules_text(spec):
    by_estimator = collections.defaultdict(list)
    for op, (estimator, _) in spec.rules.items():
        by_estimator[estimator].append(op)
    if not by_estimator:
        return "the model's own gradient"
    return "; ".join("%s on %s" % (e, ", ".join(ops)) for e, ops in by_estimator.items())


def _base(name):
    return name.lstrip("^").split(":")[0]


def _default_inputs(graph_def):
    names = [n.name + ":0" for n in graph_def.node if n.op in _PLACEHOLDERS]
    if not names:
        raise AttributionError("the graph has no Placeholder: name its input tensors "
                               "(inputs=, CLI: --inputs)")
    return names


def _default_outputs(graph_def):
    consumed = {_base(i) for n in graph_def.node for i in n.input}
    names = [n.name + ":0" for n in graph_def.node
             if n.name not in consumed and n.op not in _NO_OUTPUT_OPS
             and n.op not in _PLACEHOLDERS]
    if not names:
        raise AttributionError("the graph has no output node: name its output tensors "
                               "(outputs=, CLI: --outputs)")
    return names


def _path(graph_def, inputs, outputs):
    """The top-level nodes that depend on `inputs` through nodes that may
    carry a gradient, and that `outputs` depend on."""
    nodes = {n.name: n for n in graph_def.node}
    consumers = collections.defaultdict(list)
    for n in graph_def.node:
        for i in n.input:
            if not i.startswith("^"):
                consumers[_base(i)].append(n.name)
    starts = {_base(i) for i in inputs}
    below, todo = set(), list(starts)
    while todo:
        name = todo.pop()
        if name in below:
            continue
        below.add(name)
        if name in starts or _may_carry_gradient(nodes[name]):
            todo.extend(consumers[name])
    above = set(ancestors({n.name: n.input for n in graph_def.node},
                          [_base(o) for o in outputs], control=False))
    return [n for n in graph_def.node if n.name in below and n.name in above]


def _with_bodies(graph_def, path):
    """(name, NodeDef) of the path's nodes, every node of the functions they
    call (recursively) standing in for the call."""
    library = {f.signature.name: f for f in graph_def.library.function}
    out, seen = [], set()
    todo = [("", node) for node in reversed(path)]
    while todo:
        prefix, node = todo.pop()
        callees = [f for f in list(called_functions(node)) + [node.op] if f in library]
        if callees or node.op in CALL_OPS or node.op in CONTROL_FLOW_OPS:
            for name in callees:
                if name not in seen:
                    seen.add(name)
                    todo.extend((name + "/", n) for n in reversed(library[name].node_def))
            continue
        out.append((prefix + node.name, node))
    return out


def _training_batch_norm(node):
    attr = node.attr.get("is_training")
    return node.op in _BATCH_NORMS and attr is not None and attr.b


def _lrp_uncovered(graph_def, input_names, output_name, also_covered, bad, advice):
    """Adds to `bad` the path's ops that no LRP rule covers
    (`relevance.structure`: not a layer, pool, residual add, activation,
    constant shift or scaling, nor an op that only moves values)."""
    from graph_override.attribution.relevance import structure  # pylint: disable=import-outside-toplevel
    own = "--map %s=MODULE:FUNCTION" if advice == "cli" else "rules=['%s=MODULE:FUNCTION']"
    look = structure.analyze(graph_def, input_names, output_name)
    for op, names in look.uncovered().items():
        if op in also_covered:
            continue
        reason = ("no LRP rule says how relevance crosses it (a layer is a MatMul or "
                  "convolution of constant weights; products of two activations, other "
                  "nonlinear maps are not): lrp refuses the model; a gradient of your own: "
                  + own % op)
        bad[(op, reason)] = {"op": op, "count": len(names), "nodes": names[:_NODES_SHOWN],
                             "reason": reason}


def _reason(node, spec, failure, advice="python"):
    """Why `node` is not covered by `spec`, or None if it is; a rule of the
    caller's own is advised in the terms of `advice` ("python": ``rules=``,
    "cli": ``--map``)."""
    if failure is not None:
        return failure
    if node.op in V1_LOOP_OPS:
        return ("part of a TF1 while loop (control flow v1): no gradient crosses it after "
                "the graph is imported, under any method or rule; re-export the model "
                "with control flow v2 (graph-override inspect MODEL says how)")
    if _training_batch_norm(node):
        return ("batch normalization in training mode (is_training=True) normalizes by "
                "the batch's own statistics: one example's map depends on the others. "
                "Freeze the model in inference mode (training=False)")
    if node.op in method_table.LINEAR_OPS or not spec.rules:
        return None
    if not compat.is_op_type(node.op):
        return ("unknown op type (a custom op): not registered in this TensorFlow; "
                "load its library (tf.load_op_library) to run the model")
    own = ("--map %s=MODULE:FUNCTION" if advice == "cli"
           else "rules=['%s=MODULE:FUNCTION']") % node.op
    return ("not linear and no rule of %s covers it: its own gradient is used there "
            "(a rule of your own: %s)" % (spec.name, own))


def _traced(model, inputs, outputs, session, x):
    """(GraphDef, source, [input], [output]) of a model that is not a frozen
    graph: a Session's tensors, a Keras model or TF2 callable (traced for
    `x`, or for a Keras model's own input spec), an `Explainer`."""
    # pylint: disable=import-outside-toplevel
    from graph_override.attribution import engine, models, several
    explainer = model if isinstance(model, engine.Explainer) else None
    if explainer is not None:
        if inputs is not None or outputs is not None or session is not None:
            raise AttributionError("an Explainer already has its model; give no inputs=, "
                                   "outputs= or session=")
        model = explainer.model
    if session is not None or (explainer is not None and model is None) or (
            explainer is not None and models.is_graph_model(model)):
        graph = (explainer or engine.Explainer(model, inputs=inputs, outputs=outputs,
                                               session=session)).model_graph(None)
    else:
        if inputs is not None or outputs is not None:
            raise AttributionError(
                "inputs= and outputs= name the tensors of a frozen graph or a Session "
                "graph; a TF2 callable or Keras model takes none (it is traced)")
        if x is not None and several.is_several(x):  # a model of several inputs
            holder = explainer or engine.Explainer(model)
            packed, _ = several.arrange(x, holder.input_names(x),
                                        lambda value, what: models.as_float_input(value))
            graph = holder.model_graph(None, packed)
            return graph.graph_def, graph.source, list(graph.names), [graph.output]
        spec = models.as_float_input(x) if x is not None else (
            models.keras_spec(model) if models.is_keras(model) else None)
        if spec is None:
            if not callable(model):
                models.from_callable(model, None)  # the error for what is no model
            raise AttributionError(
                "model %s: give x= (a batch of inputs, or one example with its batch "
                "axis) to trace it for; a Keras model with a known input shape needs "
                "none" % (getattr(model, "name", None) or getattr(
                    model, "__name__", type(model).__name__)))
        graph = (explainer.model_graph(spec) if explainer is not None and x is not None
                 else models.from_callable(model, spec))
    return graph.graph_def, graph.source, list(graph.names), [graph.output]


def coverage_report(model, method, *, inputs=None, outputs=None, also_covered=(),
                    source=None, session=None, x=None, advice="python"):
    """The op types on the path from `inputs` to `outputs` that `method`
    does not cover (see the module docstring).

    Args:
      model: every form the methods take: a frozen GraphDef or the path of a
        ``.pb``/``.pbtxt``; a Keras model or TF2 callable of one tensor
        (traced for `x`; a Keras model whose input shape is known needs
        none); None with `session` and its tensors; an `Explainer`.
      method: a method of `rules.METHODS`.
      inputs, outputs: tensor names ("x:0"; a bare node name means output
        0), a name or a list; for `session`, its tensors. Default (frozen
        graphs): every Placeholder; every node whose output nothing reads.
      also_covered: op types whose gradient rules of the caller's own set
        (``rules=['Elu=mygrads:f']``, ``explain --map Elu=mygrads:f``):
        counted as covered.
      source: how messages name the model (default: its path, "<GraphDef>"
        for a message, "model NAME" for a callable).
      session: a `tf.compat.v1.Session` whose graph holds `inputs` and
        `outputs` (with `model` None), as the methods take it.
      x: a batch of inputs (or their like) to trace a callable for.
      advice: how the report advises a rule of one's own: "python"
        (``rules=[...]``) or "cli" (``--map``).

    Returns:
      A `CoverageReport`; ``.ok`` is True when everything is covered.

    Raises:
      AttributionError: an unknown method (the nearest suggested), no
        Placeholder or output to default to, a callable without `x` to
        trace it for, a model that is none of these.
      ConversionError: a name that is not a node of the graph (with close
        names); GraphDefError: a file that is not a GraphDef.
    """
    spec = method_table.method_spec(method)
    if isinstance(model, graph_pb2.GraphDef) and session is None:
        graph_def, source = model, source or "<GraphDef>"
    elif isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        graph_def, source = load(model), source or os.fsdecode(model)
    else:
        graph_def, traced, inputs, outputs = _traced(model, inputs, outputs, session, x)
        source = source or traced
    inputs = check_names(graph_def, inputs if inputs is not None
                         else _default_inputs(graph_def), "inputs", source)
    outputs = check_names(graph_def, outputs if outputs is not None
                          else _default_outputs(graph_def), "outputs", source)
    failures = {f["node"]: "%s (%s)" % (f["reason"], f["gradient"]) if f["gradient"] != f[
        "op"] else f["reason"] for f in inspect(graph_def).gradient_failures}
    covered, linear, bad = collections.Counter(), 0, collections.OrderedDict()
    path = _with_bodies(graph_def, _path(graph_def, inputs, outputs))
    for name, node in path:
        if name not in failures and not _may_carry_gradient(node):
            continue  # integers, shapes: no gradient reaches the input through it
        if (node.op in spec.rules or node.op in also_covered) and not _training_batch_norm(
                node):
            covered[node.op] += 1
            continue
        reason = _reason(node, spec, failures.get(name), advice)
        if reason is None:
            linear += node.op in method_table.LINEAR_OPS
            continue
        entry = bad.setdefault((node.op, reason), {"op": node.op, "count": 0, "nodes": [],
                                                   "reason": reason})
        entry["count"] += 1
        if len(entry["nodes"]) < _NODES_SHOWN:
            entry["nodes"].append(name)
    if spec.name == "lrp" and len(outputs) == 1:
        _lrp_uncovered(graph_def, list(inputs), outputs[0], also_covered, bad, advice)
    return CoverageReport(
        method=spec.name, source=source, inputs=inputs, outputs=outputs,
        path_nodes=len(path), covered=dict(sorted(covered.items())), linear=linear,
        uncovered=sorted(bad.values(), key=lambda u: (-u["count"], u["op"])))
