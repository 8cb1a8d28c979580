"""`graph_override.frozen.inspect`: why would gradients through a GraphDef
fail or vanish, and what in it is risky to run."""

import collections

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override import _compat, registry
from graph_override._graphdef_reports import InspectReport
from graph_override._graphdef_rules import GRADIENT_ATTR, gradient_attr
from graph_override.errors import GraphDefError

__all__ = ["RISKY_OPS", "ZERO_GRADIENT_OPS", "inspect"]

# Op types worth a look before running an untrusted graph, with why.
RISKY_OPS = {
    **dict.fromkeys(("ReadFile", "MatchingFiles", "ImmutableConst"),
                    "reads files"),
    **dict.fromkeys(("WriteFile", "Save", "SaveV2", "SaveSlices",
                     "MergeV2Checkpoints", "DeleteFile"), "writes files"),
    **dict.fromkeys(("Restore", "RestoreV2", "RestoreSlice"),
                    "reads checkpoint files"),
    **dict.fromkeys(("PyFunc", "PyFuncStateless", "EagerPyFunc"),
                    "runs Python code of the process that made the graph"),
    **dict.fromkeys(("TFRecordReader", "TFRecordReaderV2", "TextLineReader",
                     "TextLineReaderV2", "WholeFileReader", "WholeFileReaderV2",
                     "FixedLengthRecordReader", "FixedLengthRecordReaderV2",
                     "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset",
                     "FixedLengthRecordDataset", "CSVDataset", "CSVDatasetV2",
                     "LoadDataset", "MatchingFilesDataset",
                     "ExperimentalMatchingFilesDataset"), "reads files"),
    **dict.fromkeys(("SaveDataset", "SaveDatasetV2", "SnapshotDataset",
                     "SnapshotDatasetV2", "CreateSummaryFileWriter",
                     "WriteSummary", "WriteScalarSummary", "WriteImageSummary",
                     "WriteHistogramSummary", "WriteAudioSummary",
                     "WriteGraphSummary", "WriteRawProtoSummary"), "writes files"),
    **dict.fromkeys(("PrintV2",), "can write to a file (output_stream)"),
    **dict.fromkeys(("DebugIdentity", "DebugIdentityV2", "DebugIdentityV3",
                     "DebugNumericSummary", "DebugNumericSummaryV2"),
                    "can dump tensors to files or network addresses"),
    **dict.fromkeys(("RpcCall", "Rpc", "TryRpc", "RemoteCall"),
                    "calls remote processes"),
}


# Op types whose TensorFlow gradient is zero (or None) everywhere: gradients
# through them vanish silently. The usual reason to patch a frozen graph.
ZERO_GRADIENT_OPS = ("Sign", "Round", "Floor", "Ceil", "Rint")


def _gradient_failure(node, library):
    """Why tf.gradients would fail on `node`, or None."""
    name = gradient_attr(node)
    if name is not None:
        if registry.is_resolvable(name):
            return None
        why = ("gradient name %r is not registered in this process" % name)
        if name.startswith("CustomGradient-"):
            why += (" (tf.custom_gradient names die with the process that "
                    "built the graph)")
        return name, why + "; patch it (--map 'gradient:%s=<estimator>|remove')" % name
    if node.op in library:
        return None
    if _compat.has_gradient_entry(node.op):
        return None
    if not _compat.is_op_type(node.op):
        return node.op, ("unknown op type %s: not registered in this TensorFlow "
                         "(load its op library first)" % node.op)
    return node.op, ("No gradient defined for operation type %s; patch it with "
                     "an estimator or a registered name" % node.op)


_DIFFERENTIABLE = frozenset(
    tf.as_dtype(t).as_datatype_enum for t in (
        tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64,
        tf.complex128, tf.resource, tf.variant))


def _may_carry_gradient(node):
    """False if every output of `node` has a dtype tf.gradients never
    differentiates (bool, integers, strings): no gradient reaches it."""
    op_def = _compat.op_def(node.op)
    if op_def is None:
        return True
    for arg in op_def.output_arg:
        if arg.type:
            types = [arg.type]
        elif arg.type_attr:
            types = [node.attr[arg.type_attr].type] if arg.type_attr in node.attr else []
        elif arg.type_list_attr:
            types = list(node.attr[arg.type_list_attr].list.type) if (
                arg.type_list_attr in node.attr) else []
        else:
            types = []
        if not types or any(t in _DIFFERENTIABLE for t in types):
            return True
    return False


def _consumers(graph_def):
    """node name -> [(consumer op, consumer has a gradient name)]"""
    out = collections.defaultdict(list)
    for node in graph_def.node:
        named = GRADIENT_ATTR in node.attr
        for inp in node.input:
            if not inp.startswith("^"):
                out[inp.partition(":")[0]].append((node.op, named))
    return out


def _gradient_bypassed(name, consumers):
    """True if every consumer of `name` stops its gradient or replaces it
    (StopGradient; the IdentityN of tf.custom_gradient): the zero gradient of
    the op itself is never used."""
    uses = consumers.get(name)
    return bool(uses) and all(op == "StopGradient" or (op == "IdentityN" and named)
                              for op, named in uses)


def inspect(graph_def):
    """Op types, nodes whose gradient will fail, gradient names, risky ops.

    A node's gradient will fail in ``tf.gradients`` when its
    ``_gradient_op_type`` does not resolve in this process, or its op type
    has no registry entry at all (ops marked NotDifferentiable are fine:
    they pass no gradient). Nodes without data inputs are skipped.

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
    counts = collections.Counter()
    failures, risky, zero = [], [], []
    consumers = _consumers(graph_def) if any(
        op in ZERO_GRADIENT_OPS for op in (n.op for n in graph_def.node)) else {}
    names = collections.OrderedDict()
    for node in graph_def.node:
        counts[node.op] += 1
        if node.op in RISKY_OPS:
            risky.append({"node": node.name, "op": node.op, "reason": RISKY_OPS[node.op]})
        gname = gradient_attr(node)
        if gname is not None:
            entry = names.setdefault(gname, {"name": gname, "count": 0, "nodes": []})
            entry["count"] += 1
            if len(entry["nodes"]) < 10:
                entry["nodes"].append(node.name)
        if (not node.input or node.input[0].startswith("^")
                or not _may_carry_gradient(node)):
            continue
        if (gname is None and node.op in ZERO_GRADIENT_OPS
                and not _gradient_bypassed(node.name, consumers)):
            zero.append({"node": node.name, "op": node.op, "reason": (
                "%s has zero gradient; patch with e.g. --map %s=%s" % (
                    node.op, node.op, "ste_sign" if node.op == "Sign" else
                    "ste_round" if node.op in ("Round", "Rint") else "ste_floor"))})
        failure = _gradient_failure(node, library)
        if failure is not None:
            failures.append({"node": node.name, "op": node.op,
                             "gradient": failure[0], "reason": failure[1]})
    for function in graph_def.library.function:
        for node in function.node_def:
            if node.op in RISKY_OPS:
                risky.append({"node": "%s/%s" % (function.signature.name, node.name),
                              "op": node.op, "reason": RISKY_OPS[node.op]})
    for entry in names.values():
        entry["resolvable"] = registry.is_resolvable(entry["name"])
        entry["needs_graph_override"] = registry.parse_builtin_name(entry["name"]) is not None
    return InspectReport(
        nodes=len(graph_def.node), op_types=dict(counts.most_common()),
        gradient_failures=failures, gradient_names=list(names.values()),
        risky_ops=risky, zero_gradients=zero, functions=len(library))
