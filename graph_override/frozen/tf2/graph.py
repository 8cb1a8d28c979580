"""Preparing a GraphDef for `graph_override.frozen.to_function`.

Checks (op types, v1 control flow, tensor names, gradient names), the
selection of trainable Const weights, their replacement by Placeholders, and
process-unique names for library functions. See
`graph_override.frozen.tf2.function` for how they fit together.
"""

import collections.abc
import difflib
import itertools
import re

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override import registry, user_functions
from graph_override._tensorflow import compat
from graph_override.errors import (ConversionError, ConversionUsageError, GraphDefError,
                                   UnknownGradientError)
from graph_override.frozen.graphdef.consts import check_claim
from graph_override.frozen.graphdef.functions import call_cycle
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, ancestors, node_list
from graph_override.frozen.inspection.inspector import V1_LOOP_OPS, VARIABLE_OPS
from graph_override.frozen.patching.library import rename_library

__all__ = ["V1_CONTROL_FLOW_OPS", "as_placeholders", "check_calls", "check_colocation",
           "check_names", "check_ops", "check_pruned", "resolve_gradient_names", "select_weights", "with_unique_function_names", "wrap"]


# Ops of TF1 while loops (tf.compat.v1.while_loop without control flow v2):
# their gradients need the loop contexts that an imported graph no longer
# has. A TF1 tf.cond alone (Switch/Merge) differentiates after import.
V1_CONTROL_FLOW_OPS = tuple(sorted(V1_LOOP_OPS))

_PLACEHOLDER_OPS = frozenset(("Placeholder", "PlaceholderV2"))

_FLOAT_ENUMS = frozenset(t.as_datatype_enum for t in (
    tf.float16, tf.bfloat16, tf.float32, tf.float64))


def _tensor_name(name):
    """'x' -> 'x:0'; 'x:1' stays; '^x' is not a tensor."""
    if not isinstance(name, str) or not name or name.startswith("^"):
        raise ConversionUsageError("expected a tensor name such as 'x:0', got %r" % (name,))
    base, sep, index = name.rpartition(":")
    if sep and index.isdigit():
        return name
    return name + ":0"


def check_names(graph_def, names, what, source):
    """The tensor names, checked against the graph's nodes."""
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, collections.abc.Iterable):
        raise ConversionUsageError("%s: %s must be a list of tensor names such as ['x:0'], got %r"
                                   % (source, what, names))
    names = [_tensor_name(n) for n in names]
    if not names:
        raise ConversionUsageError("%s: no %s given; name at least one tensor, e.g. 'x:0'"
                                      % (source, what))
    nodes = {n.name: n for n in graph_def.node}
    for name in names:
        base = name.rpartition(":")[0]
        if base not in nodes:
            hints = difflib.get_close_matches(base, list(nodes), n=3, cutoff=0.5)
            if what == "inputs" and not hints:
                hints = [n.name for n in graph_def.node if n.op == "Placeholder"][:5]
            raise ConversionUsageError(
                "%s: %s names %r, but the graph has no node %r.%s See the node "
                "names with `graph-override inspect MODEL --json` or "
                "[n.name for n in graph_def.node]." % (
                    source, what, name, base, (" Did you mean %s?" % ", ".join(
                        repr(h + ":0") for h in hints)) if hints else ""))
        op_def = compat.op_def(nodes[base].op)
        index = int(name.rpartition(":")[2])
        if op_def is not None and len(op_def.output_arg) == 1 and not (
                op_def.output_arg[0].number_attr or op_def.output_arg[0].type_list_attr) \
                and index > 0:
            raise ConversionUsageError("%s: %s names %r, but node %r (op %s) has one output; "
                                          "use %r" % (source, what, name, base, nodes[base].op,
                                                      base + ":0"))
    if len(set(names)) != len(names):
        raise ConversionUsageError("%s: %s name a tensor twice: %s" % (source, what, names))
    return names


def _all_nodes(graph_def):
    """(where, node) of the top-level graph and of every library function."""
    for node in graph_def.node:
        yield "", node
    for function in graph_def.library.function:
        for node in function.node_def:
            yield function.signature.name + "/", node


def check_calls(graph_def, source):
    """Refuses library functions that call themselves, directly or through
    others (`call_cycle`): importing a graph that calls one kills the
    process (SIGSEGV) instead of raising."""
    cycle = call_cycle(graph_def)
    if cycle:
        raise ConversionError(
            "%s: library function %r calls itself (%s). TensorFlow has no recursive "
            "functions: importing it would recurse until the process crashes, so "
            "nothing was imported or run. The file is damaged or was made to do "
            "this." % (source, cycle[0], " -> ".join(map(repr, cycle))))


def check_colocation(graph_def, source):
    """Refuses a top-level node whose colocation attr (``_class``,
    ``loc:@NODE``) names a node the graph does not have: TensorFlow's import
    refuses it with a ValueError."""
    names = {n.name for n in graph_def.node}
    for node in graph_def.node:
        if "_class" not in node.attr:
            continue
        for value in node.attr["_class"].list.s:
            wanted = value.decode("utf-8", "replace")
            if wanted.startswith("loc:@") and wanted[len("loc:@"):] not in names:
                raise GraphDefError(
                    "%s: node %r is to be colocated with node %r (attr _class %r), which "
                    "is not in the graph; TensorFlow cannot import it. The file is damaged "
                    "or was cut: remove the attr, or use the complete file." % (
                        source, node.name, wanted[len("loc:@"):], wanted))


def check_ops(graph_def, source):
    """Refuses unknown op types anywhere (the import needs every one), TF1
    while loops in the function library, functions that call themselves
    (`check_calls`) and colocation with missing nodes (`check_colocation`);
    `check_pruned` looks for loops in the top-level nodes the outputs
    need."""
    check_calls(graph_def, source)
    check_colocation(graph_def, source)
    library = {f.signature.name for f in graph_def.library.function}
    unknown, v1 = {}, []
    for where, node in _all_nodes(graph_def):
        if node.op in V1_LOOP_OPS and where:
            v1.append("%s%s (%s)" % (where, node.name, node.op))
        elif node.op not in library and not compat.is_op_type(node.op):
            unknown.setdefault(node.op, []).append(where + node.name)
    if unknown:
        raise ConversionError(
            "%s: op type(s) not registered in this TensorFlow: %s. They are "
            "custom ops of the program that wrote the graph: load their "
            "library first (tf.load_op_library('...so')), or run the graph "
            "with the TensorFlow build that has them." % (source, "; ".join(
                "%s (node(s) %s)" % (op, node_list(names)) for op, names in unknown.items())))
    if v1:
        raise _loop_error(source, v1)


def _loop_error(source, nodes):
    return ConversionError(
        "%s: the outputs need a TF1 while loop (tf.compat.v1.while_loop built "
        "without control flow v2): %s. TensorFlow cannot differentiate it once "
        "imported (its gradient needs the loop contexts of the Python program "
        "that built it; a TF1 tf.cond alone is fine). Re-export the model with "
        "control flow v2 (tf.compat.v1.enable_control_flow_v2() before building, "
        "giving While ops), or convert the part before the loop (outputs= a "
        "tensor that feeds it)." % (source, node_list(nodes)))


def check_pruned(graph_def, inputs, outputs, source):
    """The names of the top-level nodes the `outputs` need once `inputs` are
    fed (what the pruned function holds), after refusing what that function
    could not run or differentiate: a Placeholder left unfed (a usage error:
    add it to `inputs`), variables (the graph is not frozen) and TF1 while
    loops."""
    ops = {n.name: n.op for n in graph_def.node}
    node_inputs = {n.name: n.input for n in graph_def.node}
    used, unfed = set(), []
    fed = {n.rpartition(":")[0] for n in inputs}
    for output in outputs:
        for name in ancestors(node_inputs, [output.rpartition(":")[0]], stop=fed, seen=used):
            if ops[name] in _PLACEHOLDER_OPS:
                unfed.append((output, name))
    if unfed:
        raise ConversionUsageError("%s: %s: add %s to inputs (CLI: --inputs), or choose "
                                   "outputs that do not need %s" % (source, "; ".join(
                                       "output %s depends on Placeholder %s" % pair
                                       for pair in unfed), ", ".join(
                                           repr(n + ":0") for _, n in unfed),
                                       "them" if len(unfed) > 1 else "it"))
    variables = sorted(n for n in used if ops[n] in VARIABLE_OPS)
    if variables:
        raise ConversionError(
            "%s: the graph is not frozen: the outputs read %d variable(s), %s, whose "
            "values a GraphDef does not hold. Freeze it with its checkpoint first "
            "(tf.compat.v1.graph_util.convert_variables_to_constants in the "
            "Session that restored it, or the freeze_graph tool), then convert the "
            "frozen file." % (source, len(variables), node_list(
                ["%s (%s)" % (n, ops[n]) for n in variables])))
    loops = [n.name for n in graph_def.node if n.name in used and n.op in V1_LOOP_OPS]
    if loops:
        raise _loop_error(source, ["%s (%s)" % (n, ops[n]) for n in loops])
    return used


def resolve_gradient_names(graph_def, source):
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
            "use the op's own gradient, or register the function first.%s" % (
                source, len(missing), "; ".join(
                    "%r (node(s) %s)" % (n, node_list(v)) for n, v in missing.items()),
                glob, glob, glob, user_functions.registration_hint(missing)))


def select_weights(graph_def, trainable, used, source):
    """[(node name, ndarray)] of the float Const nodes `trainable` selects
    among `used`, the nodes the outputs depend on (`check_pruned`)."""
    if trainable is None or trainable is False:
        return []
    consts = [n for n in graph_def.node if n.op == "Const" and n.name in used
              and n.attr["dtype"].type in _FLOAT_ENUMS]
    if isinstance(trainable, bool) or not isinstance(trainable, (str, int)):
        raise ConversionUsageError("trainable must be a regular expression or a minimum "
                                      "number of elements, got %r" % (trainable,))
    if not isinstance(trainable, str) and trainable < 0:
        raise ConversionUsageError("trainable=%r: a minimum number of elements cannot be "
                                   "negative; give 0 for every float Const" % (trainable,))
    if isinstance(trainable, str):
        try:
            search = re.compile(trainable).search
        except re.error as e:
            raise ConversionUsageError("trainable=%r is not a valid regular expression: %s"
                                          % (trainable, e)) from e
        chosen = [n for n in consts if search(n.name)]
    else:
        chosen = [n for n in consts
                  if int(np.prod([d.size for d in n.attr["value"].tensor.tensor_shape.dim],
                                 dtype=np.int64)) >= trainable]
    if not chosen:
        largest = sorted(consts, key=lambda n: -np.prod(
            [d.size for d in n.attr["value"].tensor.tensor_shape.dim]))[:5]
        raise ConversionUsageError(
            "%s: trainable=%r selects no float Const node (of %d that the outputs "
            "depend on). The largest are: "
            "%s." % (source, trainable, len(consts), ", ".join(
                "%s %s" % (n.name, [d.size for d in n.attr["value"].tensor.tensor_shape.dim])
                for n in largest) or "none"))
    for n in chosen:  # before anything is allocated: a fill may claim terabytes
        check_claim(n.name, n.attr["value"].tensor, source)
    return [(n.name, tf.make_ndarray(n.attr["value"].tensor)) for n in chosen]


def as_placeholders(graph_def, weights):
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


def with_unique_function_names(graph_def):
    """A copy of `graph_def` with a process-unique suffix on every library
    function (`graph_override.frozen.patching.library.rename_library`).

    TensorFlow keeps functions in one process-wide table by name. Two imports
    of the same library that differ after differentiation (the While
    gradient rewrites its body into ``<name>_rewritten``; a Const that
    became a Placeholder changes it too), or a Session's tf.gradients on the
    same graph, would otherwise collide ("Attempting to add a duplicate
    function").
    """
    if not graph_def.library.function:
        return graph_def
    suffix = "_frozen_fn_%d" % next(_imports)
    new = graph_pb2.GraphDef()
    new.CopyFrom(graph_def)
    return rename_library(new, {f.signature.name: f.signature.name + suffix
                                for f in new.library.function})


def wrap(graph_def, feeds, fetches, source="<GraphDef>"):
    """The graph imported into a wrap_function, pruned to feeds -> fetches:
    (the ConcreteFunction, `tf.TensorSpec` s of the feeds, of the fetches),
    the specs with the shapes and dtypes of the imported tensors.

    Raises:
      GraphDefError: TensorFlow refuses to import the graph (a shape no
        tensor has, an attr of the wrong type, ...), naming `source`.
    """
    graph_def = with_unique_function_names(graph_def)

    def _import():
        tf.compat.v1.import_graph_def(graph_def, name="")

    try:
        wrapped = tf.compat.v1.wrap_function(_import, [])
    except ValueError as e:  # what import_graph_def raises for a graph it refuses
        raise GraphDefError("%s: TensorFlow cannot import the graph: %s" % (
            source, " ".join(str(e).split()))) from None
    graph = wrapped.graph
    feeds = [graph.as_graph_element(n) for n in feeds]
    fetches = [graph.as_graph_element(n) for n in fetches]
    specs = _specs(feeds)
    # With the feeds' signature, a call binds its arguments at once; without
    # one, TensorFlow first fails to bind them to an empty signature, formats
    # every argument's value into the error it then discards, and retries
    # (milliseconds per call for an image batch and a model's weights).
    pruned = wrapped.prune(feeds=feeds, fetches=fetches, input_signature=(tuple(specs), {}))
    return pruned, specs, _specs(fetches)


def _specs(tensors):
    return [tf.TensorSpec(t.shape, t.dtype,
                          name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", t.name.rpartition(":")[0]))
            for t in tensors]
