"""`graph_override.frozen.inspect`: why would gradients through a GraphDef
fail or vanish, and what in it is risky to run."""

import collections
import itertools

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override import builtin_names, registry
from graph_override._tensorflow import compat
from graph_override.frozen.graphdef.functions import CALL_OPS, body_modes
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, View, gradient_attr
from graph_override.frozen.inspection.report import InspectReport
from graph_override.frozen.inspection.risky import RISKY_OPS
from graph_override.errors import GraphDefError

__all__ = [ "V1_LOOP_OPS", "VARIABLE_OPS", "ZERO_GRADIENT_OPS",
           "gradient_failures", "inspect", "v1_loops"]



# Op types whose TensorFlow gradient is zero (or None) everywhere: gradients
# through them vanish silently. The usual reason to patch a frozen graph.
ZERO_GRADIENT_OPS = ("Sign", "Round", "Floor", "Ceil", "Rint")


# The nodes of a TF1 while loop (control flow v1). TensorFlow differentiates
# them only with the loop's WhileContext, which lives in the Python graph that
# built them (or a MetaGraph's collections), not in a GraphDef: after
# import_graph_def, tf.gradients through the loop fails with
# "AttributeError: 'NoneType' object has no attribute 'outer_context'".
# (TF1 tf.cond's Switch/Merge alone differentiate after import.)
V1_LOOP_OPS = frozenset(("Enter", "RefEnter", "Exit", "RefExit", "NextIteration",
                         "RefNextIteration", "LoopCond"))


# convert_variables_to_constants_v2 names a lowered loop's nodes
# LOOP/enter/_0, LOOP/exit/_3, LOOP/next_iteration/_5.
_LOWERED_PARTS = frozenset(("enter", "exit", "next_iteration", "loop_cond", "switch",
                            "merge"))


def v1_loops(graph_def, ops=None):
    """The TF1 while loops of `graph_def` that a gradient could cross:
    [{"loop": name scope, "exits": [Exit nodes], "nodes": count}] for
    loops with a float Exit, in graph order."""
    ops = ops if ops is not None else [n.op for n in graph_def.node]
    if V1_LOOP_OPS.isdisjoint(ops):
        return []
    loops = collections.OrderedDict()
    nodes = graph_def.node
    for i, op in enumerate(ops):
        if op in V1_LOOP_OPS:
            scope = nodes[i].name.rpartition("/")[0] or nodes[i].name
            if scope.rpartition("/")[2] in _LOWERED_PARTS:
                scope = scope.rpartition("/")[0] or scope
            entry = loops.setdefault(scope, {"loop": scope, "exits": [], "nodes": 0,
                                             "float": False})
            entry["nodes"] += 1
            if op in ("Exit", "RefExit"):
                entry["exits"].append(nodes[i].name)
                entry["float"] |= _may_carry_gradient(nodes[i])
    return [{k: v for k, v in e.items() if k != "float"}
            for e in loops.values() if e["float"]]


def _name_failure(name):
    """Why tf.gradients fails on a node whose _gradient_op_type is `name`."""
    if registry.is_resolvable(name):
        return None
    why = "not registered in this process"
    if name.startswith("CustomGradient-"):
        why += " (tf.custom_gradient names die with the process that built the graph)"
    return name, why


def _op_failure(op, library):
    """Why tf.gradients fails on a node of type `op` with no gradient name."""
    if op in library or op in CALL_OPS or compat.has_gradient_entry(op):
        return None
    if not compat.is_op_type(op):
        return op, ("unknown op type %s: not registered in this TensorFlow "
                    "(load its op library first)" % op)
    return op, ("No gradient defined for operation type %s; patch it with "
                "an estimator or a registered name" % op)


_DIFFERENTIABLE = frozenset(
    tf.as_dtype(t).as_datatype_enum for t in (
        tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64,
        tf.complex128, tf.resource, tf.variant))

# Inputs through which a gradient can reach a node of a frozen graph: a
# resource input (an iterator, a lookup table) is never differentiated.
_DIFFERENTIABLE_INPUTS = _DIFFERENTIABLE - {tf.resource.as_datatype_enum}

# Op types of variables: a graph holding them is not frozen.
VARIABLE_OPS = frozenset(("Variable", "VariableV2", "VarHandleOp", "TemporaryVariable"))


def _may_carry_gradient(node):
    """False if every output of `node`, or every input, has a dtype
    tf.gradients never differentiates (bool, integers, strings): no gradient
    reaches it, or it lies on no path from a float tensor (TensorListReserve
    of a Keras LSTM)."""
    op_def = compat.op_def(node.op)
    if op_def is None:
        return True
    if node.op.endswith("Dataset") or "DatasetV" in node.op:
        return False  # tf.data pipelines: a dataset variant is never differentiated
    return (_any_differentiable(node, op_def.output_arg)
            and (not op_def.input_arg
                 or _any_differentiable(node, op_def.input_arg, _DIFFERENTIABLE_INPUTS)))


def _any_differentiable(node, args, dtypes=_DIFFERENTIABLE):
    for arg in args:
        if arg.type:
            types = [arg.type]
        elif arg.type_attr:
            types = [node.attr[arg.type_attr].type] if arg.type_attr in node.attr else []
        elif arg.type_list_attr:
            types = list(node.attr[arg.type_list_attr].list.type) if (
                arg.type_list_attr in node.attr) else []
        else:
            types = []
        if not types or any(t in dtypes for t in types):
            return True
    return False


def _bypassed(graph_def, view, attrs, candidates):
    """The candidate names all of whose data consumers stop or replace their
    gradient (StopGradient; the IdentityN of tf.custom_gradient), so the
    zero gradient of the op itself is never used."""
    uses = collections.Counter(view.inputs)
    total = {n: uses[n] + uses[n + ":0"] for n in candidates}
    by_bypass = collections.Counter()
    nodes = graph_def.node
    for i, op in enumerate(view.ops):
        if op == "StopGradient" or (op == "IdentityN" and i in attrs):
            for ref in nodes[i].input:
                base = ref[:-2] if ref.endswith(":0") else ref
                if base in total:
                    by_bypass[base] += 1
    return {n for n, count in total.items() if count and count == by_bypass[n]}


def _of_constants(graph_def, view, candidates):
    """The candidate names whose first input is a Const (possibly through
    Identity nodes): frozen weights, which no gradient is ever asked for."""
    index = {name: i for i, name in enumerate(view.names)}
    nodes, out = graph_def.node, set()
    for name in candidates:
        i = index[name]
        for _ in range(4):
            inputs = nodes[i].input
            if not inputs or inputs[0].startswith("^"):
                break
            i = index.get(inputs[0].partition(":")[0])
            if i is None or view.ops[i] != "Identity":
                break
        if i is not None and view.ops[i] == "Const":
            out.add(name)
    return out


def _zero_reason(op, symbolic):
    fix = "--map %s=%s" % (op, "ste_sign" if op == "Sign" else
                           "ste_round" if op in ("Round", "Rint") else "ste_floor")
    if symbolic:
        return ("%s has zero gradient, inside a PartitionedCall body, where no gradient "
                "override takes effect: inline the call (freeze with "
                "convert_variables_to_constants_v2), then patch with e.g. %s" % (op, fix))
    return "%s has zero gradient; patch with e.g. %s" % (op, fix)


class _Findings:
    """What `inspect` collects, node by node, for top-level nodes and nodes
    of library functions alike."""

    def __init__(self, library, op_failures):
        self.failures, self.risky, self.zero = [], [], []
        self.names = collections.OrderedDict()
        self._library, self._op_failures, self._name_failures = library, op_failures, {}

    def add(self, address, node, gname, bypassed, symbolic=False):
        """Adds node `node` (named `address` in the report) with gradient
        name `gname` (or None). `bypassed()` says whether its zero gradient
        does not matter (constants only, or stopped); it is called only for
        zero-gradient ops that may carry a gradient."""
        op = node.op
        if op in RISKY_OPS:
            self.risky.append({"node": address, "op": op, "reason": RISKY_OPS[op]})
        if gname is not None:
            entry = self.names.setdefault(gname, {"name": gname, "count": 0, "nodes": []})
            entry["count"] += 1
            if len(entry["nodes"]) < 10:
                entry["nodes"].append(address)
        if (not node.input or node.input[0].startswith("^")
                or not _may_carry_gradient(node)):
            return
        if gname is None and op in ZERO_GRADIENT_OPS and not bypassed():
            self.zero.append({"node": address, "op": op, "reason": _zero_reason(op, symbolic)})
        if gname is None:
            if op not in self._op_failures:
                self._op_failures[op] = _op_failure(op, self._library)
            failure = self._op_failures[op]
        else:
            if gname not in self._name_failures:
                self._name_failures[gname] = _name_failure(gname)
            failure = self._name_failures[gname]
        if failure is not None:
            self.failures.append({"node": address, "op": op,
                                  "gradient": failure[0], "reason": failure[1]})


def _inspect_functions(graph_def, findings):
    """Adds the findings inside library functions, as FUNCTION/NODE."""
    modes = body_modes(graph_def)
    for function in graph_def.library.function:
        fname = function.signature.name
        consts = {n.name for n in function.node_def if n.op == "Const"}
        uses, stopped = collections.Counter(), collections.Counter()
        for other in function.node_def:
            for ref in other.input:
                if not ref.startswith("^"):
                    uses[ref.partition(":")[0]] += 1
                    if other.op == "StopGradient":
                        stopped[ref.partition(":")[0]] += 1
        for ref in function.ret.values():
            uses[ref.partition(":")[0]] += 1
        symbolic = modes.get(fname) == "symbolic"
        for node in function.node_def:
            def bypassed(node=node, consts=consts, uses=uses, stopped=stopped):
                return (node.input[0].partition(":")[0] in consts
                        or (uses[node.name] == stopped[node.name] and uses[node.name]))

            findings.add("%s/%s" % (fname, node.name), node, gradient_attr(node), bypassed,
                         symbolic)


def gradient_failures(names, ops, node_at, named=()):
    """`inspect(graph_def).gradient_failures` for a graph with no function
    library whose only gradient names are on the nodes `named` (node
    indices), names that resolve in this process: what `patch_file` reports
    as left after setting names, with no GraphDef message at hand.

    Args:
      names, ops: node names and op types, in node order.
      node_at: node index -> NodeDef, read only for nodes whose op type has
        no gradient.
      named: indices of the nodes given a (resolving) gradient name.
    """
    op_failures = {op: _op_failure(op, ()) for op in set(ops)}
    failing = {op for op, f in op_failures.items() if f is not None}
    if not failing:
        return []
    named = set(named)
    failures = []
    for i in itertools.compress(range(len(ops)), map(failing.__contains__, ops)):
        if i in named:
            continue
        node = node_at(i)
        if (not node.input or node.input[0].startswith("^")
                or not _may_carry_gradient(node)):
            continue
        failure = op_failures[ops[i]]
        failures.append({"node": names[i], "op": ops[i],
                         "gradient": failure[0], "reason": failure[1]})
    return failures


def inspect(graph_def):
    """Op types, nodes whose gradient will fail, gradient names, risky ops.

    A node's gradient will fail in ``tf.gradients`` when its
    ``_gradient_op_type`` does not resolve in this process, or its op type
    has no registry entry at all (ops marked NotDifferentiable are fine:
    they pass no gradient). Nodes without data inputs, nodes whose only
    differentiable-looking inputs are resources (IteratorGetNext reads an
    iterator) and tf.data dataset ops are skipped: no gradient reaches them.
    Variables (VariableV2, VarHandleOp) are listed in `variables`: such a
    graph is not frozen. Sign,
    Round, Floor, Ceil and Rint nodes are listed as zero-gradient nodes unless
    they only binarize constants (frozen weights) or feed a StopGradient or a
    tf.custom_gradient IdentityN. TF1 while loops (Enter/Exit/NextIteration,
    control flow v1), which tf.gradients cannot cross after a GraphDef
    import, are listed in `v1_loops`. Nodes inside the function library
    (functional While/If bodies, PartitionedCall bodies of TF2 and Keras
    exports) are inspected too and named ``FUNCTION/NODE``.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, name="x")
      ...     with g.gradient_override_map({"Sign": "CustomGradient-424242"}):
      ...         y = tf.sign(x, name="y")
      >>> report = frozen.inspect(g.as_graph_def())
      >>> [(f["node"], f["gradient"]) for f in report.gradient_failures]
      [('y', 'CustomGradient-424242')]

    Returns:
      An `InspectReport`.
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("inspect(): expected a tf.compat.v1.GraphDef, got %s"
                            % type(graph_def).__name__)
    library = {f.signature.name for f in graph_def.library.function}
    view = View(graph_def)
    ops, node_names, nodes = view.ops, view.names, graph_def.node
    counts = collections.Counter(ops)
    op_failures = {op: _op_failure(op, library) for op in counts}
    # Only nodes of these types, or with a gradient name, need a closer look.
    look = {op for op, f in op_failures.items() if f is not None}
    look.update(op for op in counts if op in ZERO_GRADIENT_OPS or op in RISKY_OPS)
    attrs = {}
    if view.has_gradient_attrs:
        attrs = {i: gradient_attr(n) for i, n in enumerate(nodes) if GRADIENT_ATTR in n.attr}
    candidates = sorted({i for i, op in enumerate(ops) if op in look} | set(attrs))
    zero_names = [node_names[i] for i in candidates
                  if ops[i] in ZERO_GRADIENT_OPS and i not in attrs]
    bypassed = set()
    if zero_names:
        bypassed = _bypassed(graph_def, view, attrs, zero_names)
        bypassed.update(_of_constants(graph_def, view, zero_names))
    findings = _Findings(library, op_failures)
    for i in candidates:
        name = node_names[i]
        findings.add(name, nodes[i], attrs.get(i), lambda name=name: name in bypassed)
    if graph_def.library.function:
        _inspect_functions(graph_def, findings)
    names = findings.names
    for entry in names.values():
        entry["resolvable"] = registry.is_resolvable(entry["name"])
        entry["needs_graph_override"] = builtin_names.parse_builtin_name(entry["name"]) is not None
    variables = [{"node": node_names[i], "op": op} for i, op in enumerate(ops)
                 if op in VARIABLE_OPS] if not VARIABLE_OPS.isdisjoint(counts) else []
    return InspectReport(
        variables=variables,
        nodes=len(graph_def.node), op_types=dict(counts.most_common()),
        gradient_failures=findings.failures, gradient_names=list(names.values()),
        risky_ops=findings.risky, zero_gradients=findings.zero, functions=len(library),
        v1_loops=v1_loops(graph_def, ops))
