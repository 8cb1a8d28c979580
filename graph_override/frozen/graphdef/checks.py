"""Structural checks of a GraphDef: what TensorFlow's importer would refuse.

`validate` runs these after its name checks (`io.load` calls it). They
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
import re

import numpy as np
from tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2

from graph_override._tensorflow import compat
from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef import cycles
from graph_override.frozen.graphdef.graph_index import Index, read_index

__all__ = ["check_bytes", "check_structure", "validate"]

# TensorFlow's own rules (tensorflow/core/graph/graph_constructor.cc).
_NODE_NAME = r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*"
_OP_NAME = r"[A-Za-z0-9_.>\-]+"
_INPUT_NODE_RE = re.compile(r"^\^|:\d+$", re.M)

_BACK_EDGE_SOURCES = frozenset(("NextIteration", "RefNextIteration"))
_BACK_EDGE_TARGETS = frozenset(("Merge", "RefMerge"))
_UNKNOWN = -1  # an output count that cannot be computed: never refused
_MAX_PORT = 2 ** 31 - 1  # TensorFlow's output indexes are int32


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
    op_def = compat.op_def(op_type)
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


def _parse_special(ref, index):
    """(source index, port) of an input that is not a plain name; port -1
    for a control input. Raises ValueError for a malformed port (not
    digits, or over int32)."""
    if ref.startswith(b"^"):
        return index.get(ref[1:], -1), -1
    name, _, port = ref.rpartition(b":")
    if not port.isdigit() or int(port) > _MAX_PORT:
        raise ValueError(ref)
    return index.get(name, -1), int(port)


class _Graph:
    """What the checks read of a graph: the `Index` (names, op types,
    inputs), a node's NodeDef on demand, the function signatures, and a
    function that raises naming the first bad node (the slow path)."""

    def __init__(self, index, source, graph_def=None, data=None):
        self.index, self.source = index, source
        self._graph_def, self._data = graph_def, data
        self._signatures = None

    @property
    def graph_def(self):
        if self._graph_def is None:
            self._graph_def = graph_pb2.GraphDef.FromString(self._data)
        return self._graph_def

    def node(self, i):
        """NodeDef i: from the message if at hand, else parsed from its bytes."""
        if self._graph_def is None and self.index.has_node_bytes:
            return node_def_pb2.NodeDef.FromString(self.index.node_bytes(i))
        return self.graph_def.node[i]

    @property
    def signatures(self):
        if self._signatures is None:
            if self._graph_def is None and self.index.library is not None:
                library = function_pb2.FunctionDefLibrary.FromString(self.index.library)
            else:
                library = self.graph_def.library
            self._signatures = {f.signature.name: f.signature for f in library.function}
        return self._signatures

    def slow_check(self):
        _slow_check(self.graph_def, self.source)

    def fail(self, consumer, ref, why):
        raise GraphDefError("%s: node %r (op %s) has input %r: %s" % (
            self.source, self.index.name(consumer), self.index.ops[consumer],
            ref.decode("utf-8", "replace"), why))


def check_structure(graph):
    """Refuses duplicate names, dangling inputs, bad output indexes,
    self-reads and cycles (see the module) of the `_Graph` `graph`.

    Raises:
      GraphDefError: naming the source, the node and the input.
    """
    index = graph.index
    n = len(index.ops)
    if index.dup is not None and index.dup >= 0:
        graph.slow_check()  # raises, naming the duplicate
    lookup = None
    if index.resolved is not None:  # resolved by the C reader
        src, port = index.resolved
    else:
        lookup = _lookup(graph)
        # Plain node names resolve in C; the rest ("^ctrl", "node:1") to -1 here.
        inputs = index.raw_inputs
        src = np.fromiter(map(lookup.get, inputs, itertools.repeat(-1)), np.int64,
                          len(inputs))
        port = np.zeros(len(src), np.int64)
    if not len(src):
        return
    special = np.flatnonzero(src < 0).tolist()
    if special:
        lookup = lookup if lookup is not None else _lookup(graph)
        src, port = src.copy(), port.copy()
    for j in special:
        try:
            src[j], port[j] = _parse_special(index.raw_input(j), lookup)
        except ValueError:
            src[j] = -1
        if src[j] < 0:
            graph.slow_check()  # raises, naming node and input
            raise GraphDefError("%s: the input %r is malformed; expected NODE, "
                                "NODE:INDEX or ^NODE" % (
                                    graph.source, index.raw_input(j).decode("utf-8", "replace")))
    dst = np.repeat(np.arange(n, dtype=np.int64), index.counts)
    control = port < 0
    ref = index.raw_input

    # A node reading itself.
    self_read = np.flatnonzero(src == dst)
    if len(self_read):
        j = int(self_read[0])
        graph.fail(int(dst[j]), ref(j),
                   "the node reads its own %s. Only a while loop's NextIteration -> "
                   "Merge edge may close a loop; the graph is damaged or was edited by "
                   "hand." % ("control output" if control[j] else "output"))
    _check_output_indexes(graph, ref, src, dst, port, control)
    _check_cycles(graph, src, dst, control)


def _lookup(graph):
    """{name (bytes): node index}; refuses duplicate names."""
    names = graph.index.raw_names
    lookup = dict(zip(names, range(len(names))))
    if len(lookup) != len(names):
        graph.slow_check()  # raises, naming the duplicate
    return lookup


def _check_output_indexes(graph, ref, src, dst, port, control):
    ops = graph.index.ops
    signatures = graph.signatures
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
                counts[s] = _output_count(graph.node(s), signatures)
            count = counts[s]
        if count != _UNKNOWN and port[j] >= count:
            graph.fail(int(dst[j]), ref(j),
                       "node %r (op %s) has %s, so output %d does not exist. The file "
                       "may be damaged or edited; re-export the graph." % (
                           graph.index.name(s), ops[s],
                           "no outputs" if count == 0 else "only output 0" if count == 1
                           else "outputs 0..%d only" % (count - 1), port[j]))


def _check_cycles(graph, src, dst, control):
    forward = src < dst
    if forward.all():
        return  # every input comes from an earlier node: no cycle
    ops = graph.index.ops
    # Leave out TF1 while loops' NextIteration -> Merge back edges, whichever
    # way they point in node order (a lowered loop may list Merge last).
    back_src = np.fromiter(map(_BACK_EDGE_SOURCES.__contains__, ops), bool, len(ops))
    back_dst = np.fromiter(map(_BACK_EDGE_TARGETS.__contains__, ops), bool, len(ops))
    edges = ~(back_src[src] & back_dst[dst] & ~control)
    # A cycle needs an edge that does not point forward in node order.
    if not (edges & ~forward).any():
        return
    cycle = cycles.find_cycle(len(ops), src, dst, edges)
    if cycle:
        path = " -> ".join(repr(graph.index.name(i)) for i in cycle + cycle[:1])
        raise GraphDefError(
            "%s: nodes %s form a cycle (each reads the next), so no node of it "
            "can ever run; TensorFlow refuses such a graph. Only a while loop's "
            "NextIteration -> Merge edge may close a loop. The graph is damaged "
            "or was edited by hand; re-export it." % (graph.source, path))


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
      >>> from tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2
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
    check_bytes(data, source, graph_def=graph_def)


# Characters of node names and op types (TensorFlow's rules, see _NODE_NAME).
_NAME_CHARS = (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
               b"_.-/>\n")
_OP_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.>-\n"
_BAD_START = re.compile(rb"\n[_\-/>\n]")
_NO_BAD_START = re.compile(rb"\n\n")


def _well_formed(strings, chars, bad_start):
    """True if every string (bytes, or ASCII str) is non-empty and made of
    `chars` only, and none starts as `bad_start` says: a few passes in C.
    The strings are joined by newlines, so a newline inside one (which
    `chars` lets through as the separator) makes it False too."""
    if not strings:
        return True
    if isinstance(strings[0], str):
        try:
            joined = ("\n".join(strings) + "\n").encode("ascii")
        except UnicodeEncodeError:
            return False
    else:
        joined = b"\n".join(strings) + b"\n"
    if (joined.translate(None, chars) or joined.startswith(b"\n")
            or joined.count(b"\n") != len(strings)):
        return False
    return bad_start.search(b"\n" + joined) is None


def check_bytes(data, source, *, graph_def=None, index=None):
    """`validate` for the serialized GraphDef `data`, with no GraphDef
    message needed (one is parsed only to name a culprit).

    Args:
      data: the bytes.
      source: what to call them in messages.
      graph_def: the message parsed from `data`, if at hand.
      index: `read_index(data)`, if at hand.

    Returns:
      The `Index` of `data`.

    Raises:
      GraphDefError: naming `source` and the offending node.
    """
    if index is None:
        index = read_index(data)
    graph = _Graph(index, source, graph_def=graph_def, data=data)
    if index is None or (graph_def is not None and len(index.ops) != len(graph_def.node)):
        graph.slow_check()  # names the culprit, if there is one
        index = graph.index = Index.from_graph_def(graph.graph_def)
    names_ok = (index.names_ok if index.names_ok is not None
                else _well_formed(index.raw_names, _NAME_CHARS, _BAD_START))
    ops_ok = (index.ops_ok if index.ops_ok is not None
              else _well_formed(index.ops, _OP_CHARS, _NO_BAD_START))
    if not names_ok or not ops_ok:
        graph.slow_check()  # raises, naming the node
    check_structure(graph)
    return index
