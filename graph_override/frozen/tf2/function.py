"""`graph_override.frozen.to_function`: a frozen GraphDef as a TF2 function.

How it works, and why:

1. The GraphDef is checked before anything runs: every op type must be
   known here (or be a function of its library), every name in `inputs`
   and `outputs` must be a tensor of the graph (close names are
   suggested), and the nodes the outputs need (what the pruned function
   holds) must include no Placeholder left out of `inputs`, no variable
   (the graph would not be frozen) and no TF1 while loop
   (Enter/Exit/NextIteration), which TensorFlow cannot differentiate once
   imported; a TF1 tf.cond (Switch/Merge) differentiates.
2. The `rules` are applied with `graph_override.frozen.patch` (the ``--map``
   syntax of ``graph-override patch``), so the graph carries the gradient
   names; every ``_gradient_op_type`` name, top level and in the function
   library, must resolve in this process (built-in estimator names are
   registered on demand) or the constructor fails naming the repair rule.
3. The selected Const weights (`trainable`) become tf.Variables initialized
   bitwise from the constants, and their Const nodes become Placeholders of
   the same name, dtype and shape.
4. The graph is imported once into a `tf.compat.v1.wrap_function` and pruned
   to ``inputs + weights -> outputs``: one ConcreteFunction. A call reads the
   variables and calls it, so GradientTape, tf.function and Keras see an
   ordinary differentiable function call. TensorFlow builds its backward
   function from the imported graph with the gradient registry, where the
   graph's override names (``graph_override.ste_sign(clip_value=1.0)``) are
   registered: the gradients are those of the patched graph in a Session
   (to float rounding: for deep nets TF2 gradients differ from a Session's
   by up to 9e-4 relative, as TensorFlow's own route's do), clip_gradient
   included. Without `trainable` the forward outputs are bitwise a
   Session's; with it grappler optimizes a changed graph and they are
   equal to float rounding.

The alternative, rewriting the selected nodes into stop_gradient subgraphs
with `make_portable` and differentiating with plain TensorFlow, is what
`FrozenFunction.save` does (a SavedModel must differentiate in a process
without graph_override), but it adds about ten nodes per rewritten node and
has no form for clip_gradient, so the live function keeps the registered
names. ``tools/bench_convert.py`` measures both against the Session: for a
binarized MLP [256, 1024, 1024, 10] at batch 256 on 2 CPU cores, one
tf.function fine-tuning step took 0.73x the Session's time (registered names)
and 0.62x (stop_gradient form), with run-to-run noise of about 20% on a
shared machine, the network written directly in TF2 0.74x; the eager step
1.33x. Conversion costs what TensorFlow's wrap_function + prune import costs plus
the checks (1.04x of it for a 2996-node graph, 1.15x for MobileNetV2).

Only Const nodes of the top-level graph can become variables; constants
inside function bodies (functional While/If, Keras exports) stay constants.
"""

import re

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef.io import load
from graph_override.frozen.patching.engine import patch
from graph_override.frozen.patching.patch_rules import as_rules
from graph_override.frozen.tf2 import graph
from graph_override.frozen.tf2 import save as save_lib

__all__ = [ "FrozenFunction", "to_function"]


class FrozenFunction(tf.Module):
    """A frozen GraphDef as a differentiable TF2 function (see the module
    docstring). Use `to_function` to make one.

    Attributes:
      inputs, outputs: the tensor names, as "node:index".
      input_specs, output_specs: their `tf.TensorSpec` s.
      weights: the tf.Variables made from the `trainable` Consts, in graph
        order (also `trainable_variables`); `weight_names` their node names.
      graph_def: the patched GraphDef (Consts not yet replaced).
      patch_report: what the rules changed (a `PatchReport`, or None).

    Args:
      model, inputs, outputs, rules, trainable, on_no_match: see `to_function`.
      name: the tf.Module's name.
      build: False defers importing the graph to the first call (or `save`,
        which imports the portable form only; what `graph-override convert`
        does). `input_specs` and `output_specs` are None until then.
    """

    def __init__(self, model, inputs, outputs, rules=(), trainable=None, name=None, *,
                 on_no_match="raise", build=True):
        super().__init__(name=name or "frozen_function")
        if isinstance(model, graph_pb2.GraphDef):
            graph_def, source = model, "<GraphDef>"
        elif isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            graph_def, source = load(model), str(model)
        else:
            raise GraphDefError("to_function(): expected a GraphDef or a path to one, "
                                "got %s" % type(model).__name__)
        graph.check_ops(graph_def, source)
        self.inputs = graph.check_names(graph_def, inputs, "inputs", source)
        self.outputs = graph.check_names(graph_def, outputs, "outputs", source)
        used = graph.check_pruned(graph_def, self.inputs, self.outputs, source)
        self.rules = as_rules(rules) if rules else []
        self.patch_report = None
        if self.rules:
            graph_def, self.patch_report = patch(graph_def, self.rules, on_no_match=on_no_match)
        graph.resolve_gradient_names(graph_def, source)
        self.source = source
        self.graph_def = graph_def
        weights = graph.select_weights(graph_def, trainable, used, source)
        self.weight_names = [name for name, _ in weights]
        self.weights = [tf.Variable(value, name=_variable_name(name))
                        for name, value in weights]
        self._weight_values = weights
        self._concrete = self.input_specs = self.output_specs = None
        if build:
            self._build()

    def _build(self):
        """Imports the graph (weights as Placeholders) and prunes it: the
        ConcreteFunction a call runs, and the specs of inputs and outputs."""
        self._concrete, specs, self.output_specs = graph.wrap(
            graph.as_placeholders(self.graph_def, self._weight_values),
            self.inputs + [n + ":0" for n in self.weight_names], self.outputs, self.source)
        self.input_specs = specs[:len(self.inputs)]
        self._weight_values = None  # the variables hold them now
        return self._concrete

    @property
    def concrete_function(self):
        """The imported graph as a ConcreteFunction of the inputs and then the
        weights (imported on first use)."""
        return self._concrete if self._concrete is not None else self._build()

    def initial_values(self):
        """{weight node name: ndarray}: the Const values the weights started from."""
        return {n.name: tf.make_ndarray(n.attr["value"].tensor)
                for n in self.graph_def.node if n.name in set(self.weight_names)}

    def _inputs(self, args):
        if len(args) != len(self.inputs):
            raise TypeError("%s takes %d input(s) (%s), got %d" % (
                self.name, len(self.inputs), ", ".join(self.inputs), len(args)))
        out = []
        for arg, spec, name in zip(args, self.specs()[0], self.inputs):
            if isinstance(arg, (tf.Tensor, tf.Variable)) and arg.dtype != spec.dtype:
                raise TypeError("input %s expects %s, got a %s tensor; cast it first"
                                % (name, spec.dtype.name, arg.dtype.name))
            tensor = tf.convert_to_tensor(arg, dtype=spec.dtype)
            if not spec.shape.is_compatible_with(tensor.shape):
                raise ValueError("input %s expects shape %s, got %s" % (
                    name, spec.shape, tensor.shape))
            out.append(tensor)
        return out

    def call_with_weights(self, inputs, weights):
        """Runs the graph on `inputs` with `weights` (tensors or variables in
        the order of `weight_names`) in place of the variables; what Keras
        layers use to pass their own weights."""
        if len(weights) != len(self.weight_names):
            raise TypeError("%s needs %d weight(s) (%s), got %d" % (
                self.name, len(self.weight_names), ", ".join(self.weight_names),
                len(weights)))
        values = [tf.convert_to_tensor(w) for w in weights]
        result = self.concrete_function(*self._inputs(inputs), *values)
        return result[0] if len(self.outputs) == 1 else tuple(result)

    def __call__(self, *inputs):
        """The outputs for `inputs` (one per name in `inputs`, in order): a
        tensor for one output, else a tuple."""
        return self.call_with_weights(inputs, self.weights)

    def specs(self):
        """(input_specs, output_specs), importing the graph if not done yet."""
        if self.input_specs is None:
            self._build()
        return self.input_specs, self.output_specs

    def save(self, path, *, overwrite=False):
        """Writes a SavedModel (see `graph_override.frozen.tf2.save.save`)."""
        return save_lib.save(self, path, overwrite=overwrite)


def _variable_name(node_name):
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", node_name)


def to_function(model, inputs, outputs, rules=(), trainable=None, *, on_no_match="raise"):
    """A frozen GraphDef as a differentiable TF2 `tf.Module`.

    The result runs eagerly, inside tf.function, under a GradientTape and in
    Keras (`FrozenLayer`), with the gradients of the graph's own override
    names and of `rules`. With `trainable`, the selected Const weights become
    tf.Variables (bitwise the constants) that an optimizer can fine-tune.

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
      ...     w = tf.constant([[0.5], [-2.0]], name="w")
      ...     y = tf.sign(tf.matmul(x, tf.sign(w)), name="y")
      >>> f = frozen.to_function(g.as_graph_def(), ["x:0"], ["y:0"],
      ...                        rules=["Sign=ste_sign"], trainable="^w$")
      >>> x = tf.constant([[0.25, 0.5]])
      >>> with tf.GradientTape() as tape:
      ...     y = f(x)
      >>> y.numpy(), tape.gradient(y, f.trainable_variables)[0].numpy().ravel()
      (array([[-1.]], dtype=float32), array([0.25, 0.  ], dtype=float32))

    The gradient reaches w through both Sign nodes (ste_sign: dy where
    ``|input| <= 1``), so it is x for the weight 0.5 and 0 for -2.0.

    Args:
      model: a GraphDef, or the path of a .pb/.pbtxt file.
      inputs: the tensors to feed, e.g. ["x:0"] ("x" means "x:0").
      outputs: the tensors to return.
      rules: patch rules (`Rule` s or ``--map`` strings such as
        "Sign=ste_sign" or "gradient:CustomGradient-*=ste_sign").
      trainable: None, a regular expression (``re.search`` on Const node
        names) or a minimum number of elements: the float Consts (of those
        the outputs depend on) to turn into tf.Variables.
      on_no_match: "raise" (default), "warn" or "ignore" when a rule selects
        no node (a rule set for Relu and Relu6 meets a network with one of
        the two: "ignore"; CLI: ``--allow-no-match``).

    Returns:
      A `FrozenFunction`.

    Raises:
      ConversionError: unknown op types, a TF1 while loop that the outputs
        need (a TF1 tf.cond is fine), a graph that is not frozen (naming its
        variables), a name not in the graph (with suggestions), a Placeholder
        the outputs need that `inputs` leaves out, a `trainable` that
        selects nothing.
      UnknownGradientError: gradient names that do not resolve (with the
        rule that repairs them).
      GraphDefError: an unreadable model; RuleError etc. from `patch`.
    """
    return FrozenFunction(model, inputs, outputs, rules=rules, trainable=trainable,
                          on_no_match=on_no_match)
