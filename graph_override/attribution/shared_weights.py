"""The fast mode's weights: one copy per model, shared by every rule set's
function.

A `FrozenFunction` of a frozen graph holds the model's weights as Const
nodes, and each rule set has a function of its own, so each holds them
again, several times over: in its patched GraphDef, its imported and pruned
graph, the function registered with the runtime, the forward function
TensorFlow derives for the gradient, and the compiled function's optimized
graph and kernels. Measured on a model of 37 MB of weights, each rule set's
first fast call added 500 to 1,000 MB; on ResNet50 the bench's seven methods
grew a process past 15 GB, and each first call grew slower as the runtime
copied a larger function library.

In the fast mode the `Explainer` instead keeps one `SharedWeights` per
model graph: the graph with each float Const of at least `MIN_ELEMENTS`
elements (of the top-level graph) replaced by a Placeholder of the same
name, dtype and shape, made once (the weightless graph), and the values as
one set of non-trainable tf.Variables, bitwise the constants, made on first
use. A rule set's function is the weightless graph patched with its rules,
taking the weights its outputs need as inputs after the model's, called
with the shared variables (`WeightedFunction`): the functions, imports and
compiled graphs of every rule set hold graph structure only. Smaller
constants (scalars, shapes, short vectors) stay constants, which Grappler
folds as before. The weights reach the compiled function as variables, as
a Keras model's do, so Grappler no longer folds them into their layers (a
batch normalization after a layer stays a multiply and an add): the maps
are the exact mode's to float rounding, bit for bit for the plain gradient
on MobileNetV2 (the attribution guide's "Fast mode" gives the differences);
the exact mode keeps its constants and its maps bit for bit. Its calls under
a tape would keep their bits on these variables, its calls without one
would not (a batch normalization's scale is no longer folded into the
convolution before it), so it bounds its functions instead
(`graph_override.attribution.function_cache`).
"""

import re
import threading

import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override.frozen.graphdef.consts import check_claim
from graph_override.frozen.graphdef.views import ancestors
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["MIN_ELEMENTS", "SharedWeights", "WeightedFunction", "shared_weights"]

MIN_ELEMENTS = 256
"""The float Consts of at least this many elements (1 KB of float32) become
shared weights; smaller ones stay constants."""

_FLOAT_ENUMS = frozenset(t.as_datatype_enum for t in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64))


def _elements(node):
    count = 1
    for dim in node.attr["value"].tensor.tensor_shape.dim:
        count *= dim.size
    return count


def _is_weight(node):
    return (node.op == "Const" and node.attr["dtype"].type in _FLOAT_ENUMS
            and not node.attr["value"].tensor.tensor_shape.unknown_rank
            and _elements(node) >= MIN_ELEMENTS)


def weightless(graph_def, source):
    """(a copy of `graph_def` whose weight Consts are Placeholders, {name:
    the Const node}); each weight's claim checked before anything is made of
    it (`check_claim`)."""
    new = graph_pb2.GraphDef()
    new.versions.CopyFrom(graph_def.versions)
    new.library.CopyFrom(graph_def.library)
    weights = {}
    for node in graph_def.node:
        if not _is_weight(node):
            new.node.add().CopyFrom(node)
            continue
        check_claim(node.name, node.attr["value"].tensor, source)
        weights[node.name] = node
        placeholder = node_def_pb2.NodeDef(name=node.name, op="Placeholder", device=node.device)
        placeholder.attr["dtype"].type = node.attr["dtype"].type
        placeholder.attr["shape"].shape.CopyFrom(node.attr["value"].tensor.tensor_shape)
        new.node.add().CopyFrom(placeholder)
    return new, weights


class WeightedFunction:
    """A `FrozenFunction` of the model's inputs and then its weights, called
    with the inputs alone: the shared variables are passed after them.

    Attributes:
      function: the `FrozenFunction` (inputs, then the weights).
      weights: the tf.Variables it is called with, in its order.
    """

    def __init__(self, function, count, weights):
        self.function = function
        self.weights = list(weights)
        self._count = count

    @property
    def patch_report(self):
        """What the rules changed (`FrozenFunction.patch_report`)."""
        return self.function.patch_report

    def specs(self):
        """(the model inputs' specs, the outputs' specs)."""
        inputs, outputs = self.function.specs()
        return inputs[:self._count], outputs

    def __call__(self, *inputs):
        return self.function(*inputs, *self.weights)


class SharedWeights:
    """The weightless graph of one `models.ModelGraph` and its weights as
    variables, made once; `function` builds each rule set's function on
    them.

    Attributes:
      graph_def: the weightless graph.
      weight_names: the Const nodes that became Placeholders, in graph order.
    """

    def __init__(self, graph):
        self._original = graph.graph_def
        self.graph_def, self._consts = weightless(graph.graph_def, graph.source)
        self.weight_names = list(self._consts)
        self._node_inputs = {n.name: n.input for n in self.graph_def.node}
        self._variables = {}
        self._lock = threading.Lock()

    def variables(self, names):
        """The tf.Variables of the weights `names`, each made once."""
        with self._lock:
            for name in names:
                if name not in self._variables:
                    self._variables[name] = tf.Variable(
                        tf.make_ndarray(self._consts[name].attr["value"].tensor),
                        trainable=False, name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", name))
            return [self._variables[n] for n in names]

    def needed(self, inputs, outputs):
        """The weights `outputs` depend on once `inputs` are fed, in graph order."""
        fed = {n.rpartition(":")[0] for n in inputs}
        used = set(ancestors(self._node_inputs, [n.rpartition(":")[0] for n in outputs],
                             stop=fed))
        return [n for n in self.weight_names if n in used and n not in fed]

    def function(self, inputs, outputs, rules=()):
        """A `WeightedFunction` of `inputs` -> `outputs` (tensor names) under
        `rules` (as `FrozenFunction` takes them, selecting nothing allowed).
        Where an output is itself a weight, the model's own GraphDef's
        `FrozenFunction`, as the exact mode's."""
        if any(n.rpartition(":")[0] in self._consts for n in outputs):
            return FrozenFunction(self._original, list(inputs), list(outputs), rules=list(rules),
                                  on_no_match="ignore")
        names = self.needed(inputs, outputs)
        function = FrozenFunction(self.graph_def, list(inputs) + [n + ":0" for n in names],
                                  list(outputs), rules=list(rules), on_no_match="ignore")
        return WeightedFunction(function, len(inputs), self.variables(names))


def shared_weights(explainer, graph):
    """The `SharedWeights` of the `ModelGraph` `graph`, made once per Explainer."""
    return explainer.cached((id(graph), "shared weights"), lambda: SharedWeights(graph))
