"""Structural checks of a GraphDef: what TensorFlow's importer would refuse.

`graph_override.frozen.io.validate` runs these after its name checks. They
refuse what `tf.compat.v1.import_graph_def` refuses, so that nothing that
cannot be imported is ever written:

* an input naming an output the producer does not have (``x:99``, or any
  data input from an op without outputs, such as NoOp), counted from
  TensorFlow's op registry (OpDef) or the graph's function library; where
  the count cannot be computed (an op unknown here, a missing attr) the
  input is left alone;
* a node reading itself, through a data or a control input;
* a cycle. The NextIteration -> Merge back edges of TF1 while loops are the
  one legal kind of cycle (TensorFlow's importer allows exactly those), so
  they are left out before looking.

The work is done on numpy arrays over all inputs at once; only inputs that
are not a plain node name (``^ctrl``, ``node:1``) are parsed one by one.
"""

import functools
import itertools
import operator
import re

import numpy as np
from tensorflow.core.framework import graph_pb2

from graph_override import _compat
from graph_override.errors import GraphDefError
from graph_override.frozen.wire import fast_index

__all__ = ["check_structure", "validate"]

# TensorFlow's own rules (tensorflow/core/graph/graph_constructor.cc).
_NODE_NAME = r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*"
_OP_NAME = r"[A-Za-z0-9_.>\-]+"
_NAMES_RE = re.compile(r"(?:%s\n)*" % _NODE_NAME)
_OPS_RE = re.compile(r"(?:%s\n)*" % _OP_NAME)
_INPUT_NODE_RE = re.compile(r"^\^|:\d+$", re.M)

_BACK_EDGE_SOURCES = frozenset(("NextIteration", "RefNextIteration"))
_BACK_EDGE_TARGETS = frozenset(("Merge", "RefMerge"))
_UNKNOWN = -1  # an output count that cannot be computed: never refused


def _arg_count(arg, attrs, defaults):
    """How many tensors the OpDef/signature argument `arg` stands for, or
    None when it depends on an attr that is neither set nor defaulted."""
    if arg.number_attr:
        value = attrs.get(arg.number_attr, defaults.get(arg.number_attr))
        return None if value is None or value.WhichOneof("value") != "i" else value.i
    if arg.type_list_attr:
        value = attrs.get(arg.type_list_attr, defaults.get(arg.type_list_attr))
        return None if value is None or value.WhichOneof("value") != "list" else len(
            value.list.type)
    return 1


@functools.lru_cache(maxsize=1024)
def _registry_outputs(op_type):
    """(fixed output count or None, OpDef or None) for a registered op."""
    op_def = _compat.op_def(op_type)
    if op_def is None:
        return _UNKNOWN, None
    if all(not (a.number_attr or a.type_list_attr) for a in op_def.output_arg):
        return len(op_def.output_arg), op_def
    return None, op_def


def _output_count(node, signatures):
    """How many outputs `node` has, or _UNKNOWN."""
    signature = signatures.get(node.op)
    if signature is not None:
        args, defaults = signature.output_arg, {}
    else:
        fixed, op_def = _registry_outputs(node.op)
        if fixed is not None:
            return fixed
        args = op_def.output_arg
        defaults = {a.name: a.default_value for a in op_def.attr if a.HasField("default_value")}
    total = 0
    for arg in args:
        count = _arg_count(arg, node.attr, defaults)
        if count is None:
            return _UNKNOWN
        total += count
    return total


def _input_counts(graph_def):
    return np.fromiter(map(len, map(operator.attrgetter("input"), graph_def.node)),
                       np.int64, len(graph_def.node))


def _parse_special(ref, index):
    """(source index, port) of an input that is not a plain name; port -1
    for a control input. Raises ValueError for a malformed port."""
    if ref.startswith("^"):
        return index.get(ref[1:], -1), -1
    name, _, port = ref.rpartition(":")
    if not port.isdigit():
        raise ValueError(ref)
    return index.get(name, -1), int(port)


def _fail(source, graph_def, consumer, ref, why):
    node = graph_def.node[int(consumer)]
    raise GraphDefError("%s: node %r (op %s) has input %r: %s" % (
        source, node.name, node.op, ref, why))


def check_structure(graph_def, source, names, ops, inputs):
    """Refuses duplicate names, dangling inputs, bad output indexes,
    self-reads and cycles (see the module).

    Args:
      graph_def: the GraphDef (for attrs and the function library).
      source: what to call it in messages.
      names, ops, inputs: its node names and op types in node order, and all
        inputs in node order.

    Raises:
      GraphDefError: naming `source`, the node and the input.
    """
    n = len(names)
    index = dict(zip(names, range(n)))
    if len(index) != n:
        _slow_check(graph_def, source)  # raises, naming the duplicate
    if not inputs:
        return
    # Plain node names resolve in C; the rest ("^ctrl", "node:1") are -1 here.
    src = np.fromiter(map(index.get, inputs, itertools.repeat(-1)), np.int64, len(inputs))
    port = np.zeros(len(inputs), np.int64)
    for j in np.flatnonzero(src < 0).tolist():
        try:
            src[j], port[j] = _parse_special(inputs[j], index)
        except ValueError:
            src[j] = -1
        if src[j] < 0:
            _slow_check(graph_def, source)  # raises, naming node and input
            raise GraphDefError("%s: the input %r is malformed; expected NODE, "
                                "NODE:INDEX or ^NODE" % (source, inputs[j]))
    dst = np.repeat(np.arange(n, dtype=np.int64), _input_counts(graph_def))
    if len(dst) != len(src):
        raise GraphDefError("%s: the node inputs changed while being checked" % source)
    control = port < 0
    # A node reading itself.
    self_read = np.flatnonzero(src == dst)
    if len(self_read):
        j = int(self_read[0])
        _fail(source, graph_def, dst[j], inputs[j],
              "the node reads its own %s. Only a while loop's NextIteration -> "
              "Merge edge may close a loop; the graph is damaged or was edited by "
              "hand." % ("control output" if control[j] else "output"))
    _check_output_indexes(graph_def, source, ops, inputs, src, dst, port, control)
    _check_cycles(graph_def, source, names, ops, src, dst, control)


def _check_output_indexes(graph_def, source, ops, inputs, src, dst, port, control):
    signatures = {f.signature.name: f.signature for f in graph_def.library.function}
    # Per op type: its fixed output count, _UNKNOWN, or None when it depends
    # on the node's attrs (N, num_split, a list of types) or signature.
    fixed = {k: None if k in signatures else _registry_outputs(k)[0] for k in set(ops)}
    # Only an input with an explicit index can be out of range, unless its
    # producer may have no outputs at all.
    risky = {k for k, count in fixed.items() if count is None or count == 0}
    wanted = port >= 1
    if risky:
        wanted |= ~control & np.fromiter(map(risky.__contains__, ops), bool, len(ops))[src]
    counts = {}
    for j in np.flatnonzero(wanted).tolist():
        s = int(src[j])
        count = fixed[ops[s]]
        if count is None:
            if s not in counts:
                counts[s] = _output_count(graph_def.node[s], signatures)
            count = counts[s]
        if count != _UNKNOWN and port[j] >= count:
            _fail(source, graph_def, dst[j], inputs[j],
                  "node %r (op %s) has %s, so output %d does not exist. The file "
                  "may be damaged or edited; re-export the graph." % (
                      graph_def.node[s].name, ops[s],
                      "no outputs" if count == 0 else "only output 0" if count == 1
                      else "outputs 0..%d only" % (count - 1), port[j]))


def _check_cycles(graph_def, source, names, ops, src, dst, control):
    forward = src < dst
    if forward.all():
        return  # every input comes from an earlier node: no cycle
    # Leave out TF1 while loops' NextIteration -> Merge back edges, whichever
    # way they point in node order (a lowered loop may list Merge last).
    back_src = np.array([op in _BACK_EDGE_SOURCES for op in ops])
    back_dst = np.array([op in _BACK_EDGE_TARGETS for op in ops])
    edges = ~(back_src[src] & back_dst[dst] & ~control)
    # A cycle needs an edge that does not point forward in node order.
    if not (edges & ~forward).any():
        return
    cycle = _find_cycle(len(names), src, dst, edges)
    if cycle:
        path = " -> ".join(repr(names[i]) for i in cycle + cycle[:1])
        raise GraphDefError(
            "%s: nodes %s form a cycle (each reads the next), so no node of it "
            "can ever run; TensorFlow refuses such a graph. Only a while loop's "
            "NextIteration -> Merge edge may close a loop. The graph is damaged "
            "or was edited by hand; re-export it." % (source, path))


def _find_cycle(n, src, dst, mask):
    """A list of node indices forming a cycle over the edges src[mask] ->
    dst[mask] (an input edge points from producer to consumer), or []."""
    src, dst = src[mask], dst[mask]
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1))
    succ = dst[order]
    indegree = np.bincount(dst, minlength=n)
    ready = np.flatnonzero(indegree == 0).tolist()
    indegree = indegree.tolist()
    starts, succ = starts.tolist(), succ.tolist()
    done = 0
    while ready:  # Kahn's algorithm: peel nodes nothing waits on
        u = ready.pop()
        done += 1
        for v in succ[starts[u]:starts[u + 1]]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    if done == n:
        return []
    # Every node left has a producer left: walk producers until one repeats.
    left = [i for i in range(n) if indegree[i] > 0]
    preds = {}
    for s, d in zip(src.tolist(), dst.tolist()):
        if indegree[d] > 0 and indegree[s] > 0 and d not in preds:
            preds[d] = s
    seen, u = {}, left[0]
    while u not in seen:
        seen[u] = len(seen)
        u = preds[u]
    walk = sorted(seen, key=seen.get)[seen[u]:][::-1]  # producer first
    first = walk.index(min(walk))  # start at the node that comes first
    return walk[first:] + walk[:first]


def _slow_check(graph_def, source):
    """Finds the first bad node, one by one, and raises naming it."""
    seen = set()
    for i, node in enumerate(graph_def.node):
        if not re.fullmatch(_NODE_NAME, node.name):
            raise GraphDefError(
                "%s: node #%d has the invalid name %r; expected letters, digits "
                "and . _ - / >. The file is probably damaged or not a GraphDef."
                % (source, i, node.name))
        if not re.fullmatch(_OP_NAME, node.op):
            raise GraphDefError(
                "%s: node %r has the invalid op type %r. The file is probably "
                "damaged or not a GraphDef." % (source, node.name, node.op))
        if node.name in seen:
            raise GraphDefError(
                "%s: two nodes are named %r; node names in a GraphDef must be "
                "unique. Rename one of them (or re-export the graph)."
                % (source, node.name))
        seen.add(node.name)
    for node in graph_def.node:
        for inp in node.input:
            target = _INPUT_NODE_RE.sub("", inp)
            if target not in seen:
                raise GraphDefError(
                    "%s: node %r (op %s) has input %r, but no node is named %r "
                    "(a dangling input). The file may be truncated or edited; "
                    "re-export the graph." % (source, node.name, node.op, inp,
                                              target))


def validate(graph_def, source="<GraphDef>", *, data=None):
    """Checks that TensorFlow could import `graph_def`.

    Node names and op types must be well formed and names unique; every
    input must name an existing node (``^ctrl`` control inputs too) and an
    output that node has (``x:1``, counted from TensorFlow's op registry);
    no node may read itself and no nodes may form a cycle, except the
    NextIteration -> Merge edges of TF1 while loops.

    Example:
      >>> from tensorflow.core.framework import graph_pb2
      >>> from graph_override import frozen
      >>> g = graph_pb2.GraphDef()
      >>> _ = g.node.add(name="y", op="Sign", input=["x"])
      >>> frozen.validate(g, "model.pb")
      Traceback (most recent call last):
      ...
      graph_override.errors.GraphDefError: model.pb: node 'y' (op Sign) has input 'x', but no node is named 'x' (a dangling input). ...

    Args:
      graph_def: a GraphDef message.
      source: what to call it in messages (a file path).
      data: its serialized bytes, if already at hand (saves a serialization).

    Raises:
      GraphDefError: naming `source` and the offending node.
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("%s: expected a tf.compat.v1.GraphDef, got %s" % (
            source, type(graph_def).__name__))
    if data is None:
        data = graph_def.SerializeToString()
    index = fast_index(data, len(graph_def.node))
    if index is None:
        _slow_check(graph_def, source)  # names the culprit, if there is one
        nodes = graph_def.node
        index = ([n.name for n in nodes], [n.op for n in nodes],
                 [i for n in nodes for i in n.input])
    names, ops, _ = index
    if ((names and _NAMES_RE.fullmatch("\n".join(names) + "\n") is None)
            or (ops and _OPS_RE.fullmatch("\n".join(ops) + "\n") is None)):
        _slow_check(graph_def, source)  # raises, naming the node
    check_structure(graph_def, source, *index)
