"""`graph_override.frozen.to_function`: a frozen GraphDef as a TF2 function.

How it works, and why:

1. The GraphDef is checked before anything runs: every op type must be
   known here (or be a function of its library), TF1 v1 control flow
   (Enter/Exit/Switch/Merge/NextIteration), which TensorFlow cannot
   differentiate once imported, is refused, and every name in `inputs` and
   `outputs` must be a tensor of the graph (close names are suggested).
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
   registered: the gradients are exactly those of the patched graph in a
   Session, clip_gradient included.

The alternative, rewriting the selected nodes into stop_gradient subgraphs
with `make_portable` and differentiating with plain TensorFlow, is what
`FrozenFunction.save` does (a SavedModel must differentiate in a process
without graph_override), but it adds about ten nodes per rewritten node and
has no form for clip_gradient, so the live function keeps the registered
names. ``scripts/bench_convert.py`` measures both against the Session.

Only Const nodes of the top-level graph can become variables; constants
inside function bodies (functional While/If, Keras exports) stay constants.
"""

import difflib
import itertools
import re

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override import _compat, registry
from graph_override.errors import ConversionError, GraphDefError, UnknownGradientError
from graph_override.frozen.io import load
from graph_override.frozen.patching import patch
from graph_override.frozen.rules import GRADIENT_ATTR, as_rules, node_list

__all__ = ["V1_CONTROL_FLOW_OPS", "FrozenFunction", "to_function"]

# Ops of TF1 control flow (tf.compat.v1 while_loop/cond without control flow
# v2): their gradients need the control-flow contexts that an imported graph
# no longer has.
V1_CONTROL_FLOW_OPS = ("Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch",
                       "Merge", "RefMerge", "NextIteration", "RefNextIteration",
                       "LoopCond")

_FLOAT_ENUMS = frozenset(t.as_datatype_enum for t in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64))


def _usage_error(message):
    """A ConversionError about what the caller asked for (a name, a regex),
    not about the graph: the CLI exits 2 for it."""
    error = ConversionError(message)
    error.usage = True
    return error


def _tensor_name(name):
    """'x' -> 'x:0'; 'x:1' stays; '^x' is not a tensor."""
    if not isinstance(name, str) or not name or name.startswith("^"):
        raise _usage_error("expected a tensor name such as 'x:0', got %r" % (name,))
    base, sep, index = name.rpartition(":")
    if sep and index.isdigit():
        return name
    return name + ":0"


def _check_names(graph_def, names, what, source):
    """The tensor names, checked against the graph's nodes."""
    if isinstance(names, str):
        names = [names]
    names = [_tensor_name(n) for n in names]
    if not names:
        raise _usage_error("%s: no %s given; name at least one tensor, e.g. 'x:0'"
                              % (source, what))
    nodes = {n.name: n for n in graph_def.node}
    for name in names:
        base = name.rpartition(":")[0]
        if base not in nodes:
            hints = difflib.get_close_matches(base, list(nodes), n=3, cutoff=0.5)
            if what == "inputs" and not hints:
                hints = [n.name for n in graph_def.node if n.op == "Placeholder"][:5]
            raise _usage_error(
                "%s: %s names %r, but the graph has no node %r.%s See the node "
                "names with `graph-override inspect MODEL --json` or "
                "[n.name for n in graph_def.node]." % (
                    source, what, name, base, (" Did you mean %s?" % ", ".join(
                        repr(h + ":0") for h in hints)) if hints else ""))
        op_def = _compat.op_def(nodes[base].op)
        index = int(name.rpartition(":")[2])
        if op_def is not None and len(op_def.output_arg) == 1 and not (
                op_def.output_arg[0].number_attr or op_def.output_arg[0].type_list_attr) \
                and index > 0:
            raise _usage_error("%s: %s names %r, but node %r (op %s) has one output; "
                                  "use %r" % (source, what, name, base, nodes[base].op,
                                              base + ":0"))
    if len(set(names)) != len(names):
        raise _usage_error("%s: %s name a tensor twice: %s" % (source, what, names))
    return names


def _all_nodes(graph_def):
    """(where, node) of the top-level graph and of every library function."""
    for node in graph_def.node:
        yield "", node
    for function in graph_def.library.function:
        for node in function.node_def:
            yield function.signature.name + "/", node


def _check_ops(graph_def, source):
    """Refuses unknown op types and v1 control flow."""
    library = {f.signature.name for f in graph_def.library.function}
    unknown, v1 = {}, []
    for where, node in _all_nodes(graph_def):
        if node.op in V1_CONTROL_FLOW_OPS:
            v1.append("%s%s (%s)" % (where, node.name, node.op))
        elif node.op not in library and not _compat.is_op_type(node.op):
            unknown.setdefault(node.op, []).append(where + node.name)
    if unknown:
        raise ConversionError(
            "%s: op type(s) not registered in this TensorFlow: %s. They are "
            "custom ops of the program that wrote the graph: load their "
            "library first (tf.load_op_library('...so')), or run the graph "
            "with the TensorFlow build that has them." % (source, "; ".join(
                "%s (node(s) %s)" % (op, node_list(names)) for op, names in unknown.items())))
    if v1:
        raise ConversionError(
            "%s: the graph uses TF1 control flow (tf.compat.v1.while_loop/cond "
            "built without control flow v2): %s. TensorFlow cannot differentiate "
            "it once imported (its gradients need the control-flow contexts of "
            "the Python program that built it). Re-export the model with control "
            "flow v2 (tf.compat.v1.enable_control_flow_v2() before building, "
            "giving While/If ops), or freeze a graph without the loop." % (
                source, node_list(v1)))


def _resolve_gradient_names(graph_def, source):
    """Registers every gradient name of the graph and its library; refuses
    names that do not resolve, suggesting the repair rule."""
    missing = {}
    for where, node in _all_nodes(graph_def):
        attr = node.attr.get(GRADIENT_ATTR)
        if attr is None:
            continue
        name = attr.s.decode("utf-8", "replace")
        if registry.is_resolvable(name):
            registry.resolve(name)
        else:
            missing.setdefault(name, []).append(where + node.name)
    if missing:
        example = next(iter(missing))
        glob = "CustomGradient-*" if example.startswith("CustomGradient-") else example
        raise UnknownGradientError(
            "%s: %d gradient name(s) cannot be resolved in this process: %s. "
            "Repair them with a rule, e.g. rules=['gradient:%s=ste_sign'] "
            "(CLI: --map 'gradient:%s=ste_sign'), or 'gradient:%s=remove' to "
            "use the op's own gradient, or register the function first." % (
                source, len(missing), "; ".join(
                    "%r (node(s) %s)" % (n, node_list(v)) for n, v in missing.items()),
                glob, glob, glob))


def _ancestors(graph_def, fetches, feeds):
    """Names of the nodes `fetches` depend on, stopping at `feeds`."""
    inputs = {n.name: n.input for n in graph_def.node}
    stop = {n.rpartition(":")[0] for n in feeds}
    todo = [n.rpartition(":")[0] for n in fetches]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name in stop:
            continue
        seen.add(name)
        todo.extend(ref.lstrip("^").split(":")[0] for ref in inputs.get(name, ()))
    return seen


def _select_weights(graph_def, trainable, feeds, fetches, source):
    """[(node name, ndarray)] of the float Const nodes `trainable` selects
    among those the outputs depend on."""
    if trainable is None or trainable is False:
        return []
    used = _ancestors(graph_def, fetches, feeds)
    consts = [n for n in graph_def.node if n.op == "Const" and n.name in used
              and n.attr["dtype"].type in _FLOAT_ENUMS]
    if isinstance(trainable, bool) or not isinstance(trainable, (str, int)):
        raise _usage_error("trainable must be a regular expression or a minimum "
                              "number of elements, got %r" % (trainable,))
    if isinstance(trainable, str):
        try:
            search = re.compile(trainable).search
        except re.error as e:
            raise _usage_error("trainable=%r is not a valid regular expression: %s"
                                  % (trainable, e)) from e
        chosen = [n for n in consts if search(n.name)]
    else:
        chosen = [n for n in consts
                  if int(np.prod([d.size for d in n.attr["value"].tensor.tensor_shape.dim],
                                 dtype=np.int64)) >= trainable]
    if not chosen:
        largest = sorted(consts, key=lambda n: -np.prod(
            [d.size for d in n.attr["value"].tensor.tensor_shape.dim]))[:5]
        raise _usage_error(
            "%s: trainable=%r selects no float Const node (of %d that the outputs "
            "depend on). The largest are: "
            "%s." % (source, trainable, len(consts), ", ".join(
                "%s %s" % (n.name, [d.size for d in n.attr["value"].tensor.tensor_shape.dim])
                for n in largest) or "none"))
    return [(n.name, tf.make_ndarray(n.attr["value"].tensor)) for n in chosen]


def _as_placeholders(graph_def, weights):
    """A copy of `graph_def` whose weight Consts are Placeholders."""
    names = {name: value for name, value in weights}
    new = graph_pb2.GraphDef()
    new.CopyFrom(graph_def)
    for node in new.node:
        if node.name in names:
            value = names[node.name]
            replacement = node_def_pb2.NodeDef(name=node.name, op="Placeholder",
                                               device=node.device)
            replacement.attr["dtype"].type = node.attr["dtype"].type
            replacement.attr["shape"].shape.CopyFrom(
                tf.TensorShape(value.shape).as_proto())
            node.CopyFrom(replacement)
    return new


_imports = itertools.count(1)


def _rename_functions(graph_def):
    """`graph_def` with a process-unique suffix on every library function.

    TensorFlow keeps functions in one process-wide table by name. Two imports
    of the same library that differ after differentiation (the While
    gradient rewrites its body into ``<name>_rewritten``; a Const that
    became a Placeholder changes it too), or a Session's tf.gradients on the
    same graph, would otherwise collide ("Attempting to add a duplicate
    function").
    """
    library = graph_def.library
    if not library.function:
        return graph_def
    suffix = "_frozen_fn_%d" % next(_imports)
    names = {f.signature.name for f in library.function}

    def fix_func(func):
        if func.name in names:
            func.name += suffix
        for value in func.attr.values():
            fix_attr(value)

    def fix_attr(value):
        if value.HasField("func"):
            fix_func(value.func)
        elif value.HasField("list"):
            for func in value.list.func:
                fix_func(func)

    def fix_node(node):
        if node.op in names:
            node.op += suffix
        for value in node.attr.values():
            fix_attr(value)

    new = graph_pb2.GraphDef()
    new.CopyFrom(graph_def)
    for node in new.node:
        fix_node(node)
    for function in new.library.function:
        function.signature.name += suffix
        for node in function.node_def:
            fix_node(node)
    for gradient in new.library.gradient:
        for field in ("function_name", "gradient_func"):
            if getattr(gradient, field) in names:
                setattr(gradient, field, getattr(gradient, field) + suffix)
    return new


def _wrap(graph_def, feeds, fetches):
    """The graph imported into a wrap_function, pruned to feeds -> fetches."""
    graph_def = _rename_functions(graph_def)

    def _import():
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    graph = wrapped.graph
    return wrapped.prune(feeds=[graph.as_graph_element(n) for n in feeds],
                         fetches=[graph.as_graph_element(n) for n in fetches])


def _specs(graph_def, names):
    """TensorSpecs of the tensors `names`, from the graph (shapes as imported)."""
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
        return [tf.TensorSpec(graph.get_tensor_by_name(n).shape,
                              graph.get_tensor_by_name(n).dtype,
                              name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", n.rpartition(":")[0]))
                for n in names]


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
    """

    def __init__(self, model, inputs, outputs, rules=(), trainable=None, name=None):
        super().__init__(name=name or "frozen_function")
        if isinstance(model, graph_pb2.GraphDef):
            graph_def, source = model, "<GraphDef>"
        elif isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            graph_def, source = load(model), str(model)
        else:
            raise GraphDefError("to_function(): expected a GraphDef or a path to one, "
                                "got %s" % type(model).__name__)
        _check_ops(graph_def, source)
        self.inputs = _check_names(graph_def, inputs, "inputs", source)
        self.outputs = _check_names(graph_def, outputs, "outputs", source)
        self.rules = as_rules(rules) if rules else []
        self.patch_report = None
        if self.rules:
            graph_def, self.patch_report = patch(graph_def, self.rules)
        _resolve_gradient_names(graph_def, source)
        self.source = source
        self.graph_def = graph_def
        weights = _select_weights(graph_def, trainable, self.inputs, self.outputs, source)
        self.weight_names = [name for name, _ in weights]
        self.weights = [tf.Variable(value, name=_variable_name(name))
                        for name, value in weights]
        self.input_specs = _specs(graph_def, self.inputs)
        self.output_specs = _specs(graph_def, self.outputs)
        self._function = _wrap(_as_placeholders(graph_def, weights),
                               self.inputs + [n + ":0" for n in self.weight_names],
                               self.outputs)

    def initial_values(self):
        """{weight node name: ndarray}: the Const values the weights started from."""
        return {n.name: tf.make_ndarray(n.attr["value"].tensor)
                for n in self.graph_def.node if n.name in set(self.weight_names)}

    def _inputs(self, args):
        if len(args) != len(self.inputs):
            raise TypeError("%s takes %d input(s) (%s), got %d" % (
                self.name, len(self.inputs), ", ".join(self.inputs), len(args)))
        out = []
        for arg, spec, name in zip(args, self.input_specs, self.inputs):
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
        result = self._function(*self._inputs(inputs), *values)
        return result[0] if len(self.outputs) == 1 else tuple(result)

    def __call__(self, *inputs):
        """The outputs for `inputs` (one per name in `inputs`, in order): a
        tensor for one output, else a tuple."""
        return self.call_with_weights(inputs, self.weights)

    def save(self, path, *, overwrite=False):
        """Writes a SavedModel (see `graph_override.frozen.function_save.save`)."""
        from graph_override.frozen import function_save  # pylint: disable=import-outside-toplevel
        return function_save.save(self, path, overwrite=overwrite)


def _variable_name(node_name):
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", node_name)


def to_function(model, inputs, outputs, rules=(), trainable=None):
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
      (array([[-1.]], dtype=float32), array([0.25, 0.5 ], dtype=float32))

    Args:
      model: a GraphDef, or the path of a .pb/.pbtxt file.
      inputs: the tensors to feed, e.g. ["x:0"] ("x" means "x:0").
      outputs: the tensors to return.
      rules: patch rules (`Rule` s or ``--map`` strings such as
        "Sign=ste_sign" or "gradient:CustomGradient-*=ste_sign").
      trainable: None, a regular expression (``re.search`` on Const node
        names) or a minimum number of elements: the float Consts (of those
        the outputs depend on) to turn into tf.Variables.

    Returns:
      A `FrozenFunction`.

    Raises:
      ConversionError: unknown op types, v1 control flow, a name not in the
        graph (with suggestions), a `trainable` that selects nothing.
      UnknownGradientError: gradient names that do not resolve (with the
        rule that repairs them).
      GraphDefError: an unreadable model; RuleError etc. from `patch`.
    """
    return FrozenFunction(model, inputs, outputs, rules=rules, trainable=trainable)
