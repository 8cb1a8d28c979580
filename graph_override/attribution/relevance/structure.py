"""What LRP sees in a frozen graph: the nodes on the path from the input to
the output, each with its part.

A node is *live* when it depends on one of the model's inputs (a model may
have several: each node records which of them reach it); the path is the
live nodes the output needs. On it:

* a **layer** is a MatMul, Conv2D, DepthwiseConv2dNative or
  Conv2DBackpropInput whose weights are not live, with the chain of
  elementwise shifts (BiasAdd, or AddV2/Add/Sub with a constant: a bias) and
  scalings (Mul or RealDiv by a constant, FusedBatchNorm: a batch
  normalization, in Keras 3's inference form Mul then AddV2) right after it,
  one channel value each, which `canonize` folds into its weights and bias;
* a **residual** add is an AddV2, Add or AddN of two or more live inputs;
  a **shift** or **scale** with a constant anywhere else, and an
  activation, pass relevance through unchanged;
* **pools**: AvgPool, Mean and Sum share relevance in proportion to their
  inputs, MaxPool gives it to each window's maximum (its gradient);
* **routing** ops (reshapes, pads, slices, concatenations, splits, packs,
  identities) move relevance as their gradient moves values: a
  concatenation of two branches gives each branch the relevance of its
  part;
* everything else is **uncovered**: no rule says what its relevance is.
"""

import collections
import dataclasses

from graph_override.attribution.relevance.layer_math import LAYER_OPS
from graph_override.estimators.attribution_ops import ACTIVATIONS
from graph_override.frozen.graphdef.views import ancestors

__all__ = ["ACTIVATION_OPS", "Structure", "analyze"]

ACTIVATION_OPS = ACTIVATIONS + ("Softsign", "Identity")
SHIFT_OPS = ("BiasAdd", "AddV2", "Add", "Sub")
SCALE_OPS = ("Mul", "RealDiv")
BATCH_NORM_OPS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
POOL_OPS = ("AvgPool", "Mean", "Sum")
MAX_POOL_OPS = ("MaxPool", "MaxPoolV2")
ROUTING_OPS = frozenset({
    "Reshape", "Squeeze", "ExpandDims", "Transpose", "Pad", "PadV2", "ConcatV2", "Concat",
    "Pack", "Unpack", "Split", "SplitV", "Slice", "StridedSlice", "IdentityN", "Snapshot",
    "EnsureShape", "Cast", "DepthToSpace", "SpaceToDepth", "SpaceToBatchND",
    "BatchToSpaceND", "ReverseV2", "Placeholder", "PlaceholderWithDefault"})
# ops whose outputs carry the input's shape, not its values: no relevance path
_NO_VALUES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_NONNEG_THROUGH = frozenset({"Identity", "Reshape", "Squeeze", "ExpandDims", "Pad",
                             "Transpose", "StridedSlice", "Slice", "MaxPool", "AvgPool",
                             "Snapshot", "EnsureShape"})


def node_name(ref):
    """The node of an input reference ("^a", "a:1", "a")."""
    return ref.lstrip("^").split(":")[0]


@dataclasses.dataclass
class Structure:
    """The parts of a graph's path (see the module docstring).

    Attributes:
      nodes: node name -> NodeDef.
      output: the output tensor explained (a Softmax at the output skipped).
      path: the path's node names, inputs before the nodes that read them.
      live: the names of all live nodes.
      inputs: the input nodes, in the model's order.
      reached: node name -> the indices (in `inputs`) of the inputs whose
        values reach it.
      shaped: the nodes that depend on an input at all, its shape included
        (a tensor made from ``tf.shape(x)`` is not live, yet no constant).
      kind: node name -> its part ("layer", "residual", "shift", "scale",
        "batch_norm", "activation", "pool", "max_pool", "routing",
        "uncovered").
      consumers: node name -> the names of the nodes reading its outputs.
      skipped_softmax: the Softmax node skipped at the output, or None.
    """

    nodes: dict
    output: str
    path: list
    live: set
    kind: dict
    consumers: dict
    skipped_softmax: str = None
    inputs: tuple = ()
    reached: dict = dataclasses.field(default_factory=dict)
    shaped: frozenset = frozenset()

    def live_inputs(self, name):
        """One flag per data input of the node: whether it is live."""
        return [node_name(i) in self.live for i in self.nodes[name].input
                if not i.startswith("^")]

    def data_inputs(self, name):
        return [i for i in self.nodes[name].input if not i.startswith("^")]

    def layers(self):
        return [n for n in self.path if self.kind[n] == "layer"]

    def uncovered(self):
        """{op type: [node names]} of the uncovered nodes."""
        out = collections.defaultdict(list)
        for n in self.path:
            if self.kind[n] == "uncovered":
                out[self.nodes[n].op].append(n)
        return dict(out)

    def nonneg(self, ref):
        """Whether the tensor `ref` is >= 0 by construction (a ReLU's output,
        pooled, padded, reshaped)."""
        seen = set()
        todo = [node_name(ref)]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            node = self.nodes.get(name)
            if node is None:
                return False
            if node.op in ("Relu", "Relu6"):
                continue
            if node.op in _NONNEG_THROUGH:
                todo.append(node_name(self.data_inputs(name)[0]))
            elif node.op == "ConcatV2":
                todo.extend(node_name(i) for i in self.data_inputs(name)[:-1])
            else:
                return False
        return True

    def positions(self):
        """(first, head, last): the layers nearest an input (no layer
        between them and it; with several inputs, the first layer on each
        input's path), the MatMul layers no convolution follows, and the
        layers no layer follows."""
        layers = set(self.layers())
        first = set()
        todo = [n for n in self.path if n in self.inputs or self.nodes[n].op in (
            "Placeholder", "PlaceholderWithDefault")]
        seen = set(todo)
        while todo:
            name = todo.pop()
            for c in self.consumers.get(name, ()):
                if c in seen or c not in self.kind:
                    continue
                seen.add(c)
                if c in layers:
                    first.add(c)
                else:
                    todo.append(c)
        conv_after, layer_after = set(), set()
        for name in reversed(self.path):
            for c in self.consumers.get(name, ()):
                if c not in self.kind:
                    continue
                if c in conv_after or (c in layers and self.nodes[c].op != "MatMul"):
                    conv_after.add(name)
                if c in layer_after or c in layers:
                    layer_after.add(name)
        head = {n for n in layers if self.nodes[n].op == "MatMul" and n not in conv_after}
        last = {n for n in layers if n not in layer_after}
        return first, head, last


def analyze(graph_def, input_name, output_name):
    """The `Structure` of the path from `input_name` (a tensor name, or a
    list of them for a model of several inputs) to `output_name`."""
    nodes = {n.name: n for n in graph_def.node}
    inputs = {n.name: list(n.input) for n in graph_def.node}
    out_node = node_name(output_name)
    skipped = None
    probe = out_node
    while nodes[probe].op == "Identity":
        probe = node_name(nodes[probe].input[0])
    if nodes[probe].op == "Softmax":
        skipped, output_name = probe, nodes[probe].input[0]
        out_node = node_name(output_name)
        if ":" not in output_name:
            output_name += ":0"
    needed = ancestors(inputs, [out_node], control=False)
    order = _topological(needed, inputs)
    in_nodes = tuple(node_name(n) for n in (
        [input_name] if isinstance(input_name, str) else input_name))
    reached = _reached(nodes, inputs, order, in_nodes)
    live = set(reached)
    path = [n for n in order if n in live]
    consumers = collections.defaultdict(list)
    for n in graph_def.node:
        for i in n.input:
            if not i.startswith("^"):
                consumers[node_name(i)].append(n.name)
    shaped = set()
    for name in order:
        if name in in_nodes or any(node_name(i) in shaped for i in inputs[name]
                                   if not i.startswith("^")):
            shaped.add(name)
    structure = Structure(nodes, output_name, path, live, {}, dict(consumers), skipped,
                          in_nodes, reached, frozenset(shaped))
    for name in path:
        structure.kind[name] = _kind(structure, name)
    return structure


def _reached(nodes, inputs, order, in_nodes):
    """{node: the indices of the inputs `in_nodes` whose values reach it}
    for the nodes of `order` (topological) that some input reaches."""
    reached = {}
    for name in order:
        if nodes[name].op in _NO_VALUES:
            continue
        sources = set(i for i, n in enumerate(in_nodes) if n == name)
        for ref in inputs[name]:
            if not ref.startswith("^"):
                sources.update(reached.get(node_name(ref), ()))
        if sources:
            reached[name] = frozenset(sources)
    return reached


def _topological(names, inputs):
    """`names` with every node after its data inputs among them."""
    members = set(names)
    order, state = [], {}
    for start in names:
        if start in state:
            continue
        stack = [(start, False)]
        while stack:
            name, done = stack.pop()
            if done:
                state[name] = 2
                order.append(name)
                continue
            if state.get(name):
                continue
            state[name] = 1
            stack.append((name, True))
            for i in inputs.get(name, ()):
                dep = node_name(i)
                if not i.startswith("^") and dep in members and not state.get(dep):
                    stack.append((dep, False))
    return order


def _kind(structure, name):
    op = structure.nodes[name].op
    live = structure.live_inputs(name)
    if op in ("Placeholder", "PlaceholderWithDefault"):
        return "routing"
    if op in LAYER_OPS:
        data = 2 if op == "Conv2DBackpropInput" else 0
        weights_live = any(live[i] for i in range(len(live)) if i != data)
        transposed = op == "MatMul" and structure.nodes[name].attr["transpose_a"].b
        return "uncovered" if weights_live or transposed else "layer"
    if op in ("AddV2", "Add", "AddN") and sum(live) >= 2:
        return "residual"
    if op in SHIFT_OPS and sum(live) == 1:
        return "shift"
    if op in SCALE_OPS and sum(live) == 1 and (op == "Mul" or live[0]):
        return "scale"
    if op in BATCH_NORM_OPS and live[0] and sum(live) == 1:
        return "batch_norm"
    if op in ACTIVATION_OPS:
        return "activation"
    if op in POOL_OPS and live[0] and sum(live) == 1:
        return "pool"
    if op in MAX_POOL_OPS and live[0] and sum(live) == 1:
        return "max_pool"
    if op in ROUTING_OPS:
        return "routing"
    return "uncovered"
