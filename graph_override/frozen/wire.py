"""C-level views of a serialized GraphDef (see `graph_override.frozen.io`).

The bytes are parsed as throw-away message types built from descriptors at
import, and read with numpy, so that the work over a large graph happens
in C, with no Python loop over nodes:

* `parse_nodes`: the GraphDef with each NodeDef kept as raw bytes, in node
  order (a parse that only slices), written back byte for byte by
  `append_to_nodes`;
* `read_index`: names, op types and inputs of every node, and whether any
  message at any depth holds a field its type does not have. The bytes are
  parsed as a copy of the GraphDef schema in which every message field is
  singular and NodeDef's name, op and input are repeated: protobuf merges
  all nodes, attr values and tensors into one small tree, collecting the
  names, op types and inputs in order and keeping every unknown field,
  which is then looked for in Python;
* `input_counts`: how many inputs each node has, read from the bytes with
  numpy, field by field for all nodes at once.

Where the C extension `graph_override.frozen._scan` was built (by pip,
where a C compiler is at hand), `read_index` reads the names, op types and
inputs in one pass in C and resolves every input to its node there too
(with the same results; tests/test_frozen_scan.py compares both), and node
bytes are sliced and appended in C. Setting the environment variable
GRAPH_OVERRIDE_PURE_PYTHON=1 before import turns it off.
"""

import collections.abc
import os

import numpy as np
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import graph_pb2, node_def_pb2

__all__ = ["Index", "append_to_nodes", "fast_index", "has_unknown_fields", "input_counts",
           "node_count", "parse_nodes", "read_index", "speedups"]

try:  # graph_override/frozen/_scan.c, built by pip where a C compiler is at hand
    from graph_override.frozen import _scan
except ImportError:  # pragma: no cover - depends on the build
    _scan = None
if os.environ.get("GRAPH_OVERRIDE_PURE_PYTHON", "") not in ("", "0"):
    _scan = None


def speedups():
    """True if the C reader (`graph_override.frozen._scan`) is in use."""
    return _scan is not None

_FD = descriptor.FieldDescriptor
_STRING, _BYTES = _FD.TYPE_STRING, _FD.TYPE_BYTES
_OPTIONAL, _REPEATED = _FD.LABEL_OPTIONAL, _FD.LABEL_REPEATED

def _message_class(fdp, name):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("%s.%s" % (fdp.package, name)))


def _file(name):
    return descriptor_pb2.FileDescriptorProto(
        name="graph_override_%s.proto" % name, package="graph_override_" + name,
        syntax="proto3")


def _nodes_class():
    """GraphDef with its nodes as raw bytes; the other GraphDef fields are
    raw bytes too (read on demand) and written back unchanged."""
    fdp = _file("nodes")
    nodes = fdp.message_type.add(name="Nodes")
    for name, number, type_, label in (("node", 1, _BYTES, _REPEATED),
                                       ("library", 2, _BYTES, _OPTIONAL),
                                       ("version", 3, _FD.TYPE_INT32, _OPTIONAL),
                                       ("versions", 4, _BYTES, _OPTIONAL),
                                       ("debug_info", 5, _BYTES, _OPTIONAL)):
        nodes.field.add(name=name, number=number, type=type_, label=label)
    return _message_class(fdp, "Nodes")


def _is_repeated(field):
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.28
    return repeated if repeated is not None else field.label == _REPEATED


def _merged_class(root, name, repeated=None, singular=None):
    """A copy of `root` 's schema, every type it reaches included, in which
    message fields (repeated, in a oneof, or map entries) are singular, so
    that parsing merges all their occurrences into one message. Scalars keep
    their type and label (repeated ones accumulate) and enums become int32:
    the same bytes are known, or unknown, as to the real schema.
    `repeated` ({message type's full name: {field name: type}}) makes those
    scalar fields repeated, with that type, so that they collect every
    occurrence; `singular` (the same form) makes them singular, so that
    parsing keeps only the last."""
    fdp = _file(name)
    repeated = repeated or {}
    singular = singular or {}

    def local(d):
        return d.full_name.replace(".", "_")

    seen, todo = set(), [root]
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        message = fdp.message_type.add(name=local(d))
        for f in d.fields:
            if f.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
                message.field.add(name=f.name, number=f.number, type=_FD.TYPE_MESSAGE,
                                  label=_OPTIONAL,
                                  type_name=".%s.%s" % (fdp.package, local(f.message_type)))
                todo.append(f.message_type)
            elif f.name in repeated.get(d.full_name, ()):
                message.field.add(name=f.name, number=f.number,
                                  type=repeated[d.full_name][f.name], label=_REPEATED)
            elif f.name in singular.get(d.full_name, ()):
                message.field.add(name=f.name, number=f.number,
                                  type=singular[d.full_name][f.name], label=_OPTIONAL)
            else:
                message.field.add(
                    name=f.name, number=f.number,
                    type=_FD.TYPE_INT32 if f.type == _FD.TYPE_ENUM else f.type,
                    label=_REPEATED if _is_repeated(f) else _OPTIONAL)
    return _message_class(fdp, local(root))


_Nodes = _nodes_class()
# Every NodeDef merged into one, collecting names, op types and inputs.
_MergedGraphDef = _merged_class(graph_pb2.GraphDef.DESCRIPTOR, "merged_graph", {
    node_def_pb2.NodeDef.DESCRIPTOR.full_name: {"name": _BYTES, "op": _STRING,
                                                "input": _BYTES}})
# The same keeping only the last of each (the C reader collects them), to
# look for unknown fields.
_MergedFields = _merged_class(graph_pb2.GraphDef.DESCRIPTOR, "merged_fields", singular={
    node_def_pb2.NodeDef.DESCRIPTOR.full_name: {"name": _BYTES, "op": _STRING,
                                                "input": _BYTES}})


def parse_nodes(data):
    """The `Nodes` message of the serialized GraphDef `data`: ``.node`` holds
    each NodeDef's bytes; ``.library`` the function library's bytes."""
    return _Nodes.FromString(data)


class Index:
    """Names, op types and inputs of a serialized GraphDef's nodes.

    Attributes:
      raw_names: node names as bytes (UTF-8), in node order.
      ops: op types (str), in node order.
      raw_inputs: every node's inputs as bytes, in node order.
      counts: how many inputs each node has (numpy int64, or int32 from
        the C reader).
      nodes: the `Nodes` message (raw node bytes), or None.
      unknown: True if the graph holds a field its message type does not
        have, at any depth; None if not looked at.
      names_ok, ops_ok: whether every name and op type is well formed,
        as checked by the C reader; None if not checked.
      dup: the first node whose name an earlier node has, or -1 (C
        reader); None if not checked.
      resolved: (src, port) from the C reader, numpy int32 arrays over
        all inputs: the node each reads (-1 when it names none, or is not
        NAME, NAME:N or ^NAME) and the output index (-1: control); or None.
    """

    names_ok = ops_ok = dup = resolved = None

    def __init__(self, raw_names, ops, raw_inputs, counts, nodes=None, unknown=None):
        self._raw_names, self.ops, self._raw_inputs = raw_names, ops, raw_inputs
        self.counts, self.nodes, self.unknown = counts, nodes, unknown
        self._names = self._inputs = None

    @property
    def raw_names(self):
        return self._raw_names

    @property
    def raw_inputs(self):
        return self._raw_inputs

    def raw_input(self, j):
        """Input j (bytes), of all inputs in node order."""
        return self.raw_inputs[j]

    @property
    def names(self):
        """Node names (str), in node order."""
        if self._names is None:
            self._names = [n.decode("utf-8") for n in self.raw_names]
        return self._names

    @property
    def inputs(self):
        """Every node's inputs (str) in one list, in node order."""
        if self._inputs is None:
            self._inputs = [i.decode("utf-8") for i in self.raw_inputs]
        return self._inputs

    def name(self, i):
        """The name of node i, for messages."""
        return self.raw_names[i].decode("utf-8", "replace")

    @property
    def lazy_names(self):
        """Node names as a sequence that decodes each name when it is read
        (for code that reads a few of a million)."""
        return self._names if self._names is not None else _Decoded(self.raw_names)

    @property
    def has_node_bytes(self):
        """True if `node_bytes` can slice out each node."""
        return self.nodes is not None

    def node_bytes(self, i):
        """The serialized NodeDef i."""
        return self.nodes.node[i]

    @property
    def library(self):
        """The serialized function library (b"" if none), or None when the
        index was not read from bytes."""
        return None if self.nodes is None else self.nodes.library

    def append_to_nodes(self, data, suffixes):
        """`append_to_nodes` of `data` (the bytes this index was read from);
        the index no longer slices nodes afterwards."""
        nodes, self.nodes = self.nodes, None  # its node bytes are changed in place
        return append_to_nodes(data, suffixes, nodes)

    def append_entries(self, data, which, of, entries):
        """`append_to_nodes` of `data` with ``entries[of[k]]`` appended to
        node ``which[k]`` (`which` ascending)."""
        return self.append_to_nodes(data, {i: entries[e] for i, e in zip(which, of)})

    @classmethod
    def from_graph_def(cls, graph_def):
        """The index of a message, node by node (slow, for odd graphs)."""
        names, ops, inputs, counts = [], [], [], []
        for node in graph_def.node:
            names.append(node.name.encode("utf-8"))
            ops.append(node.op)
            inputs.extend(i.encode("utf-8") for i in node.input)
            counts.append(len(node.input))
        return cls(names, ops, inputs, np.array(counts, np.int64))


class _ScanIndex(Index):
    """The `Index` the C reader gives: spans into the bytes, with names and
    inputs sliced out only when read."""

    def __init__(self, data, scanned, unknown):
        (spans, names, ops, inputs, counts, library, self.names_ok, self.ops_ok, self.dup,
         src, port) = scanned
        super().__init__(None, ops, None, np.frombuffer(counts, np.int32), unknown=unknown)
        self.data = data
        self.spans = np.frombuffer(spans, np.int32).reshape(-1, 3)
        self._name_spans = _Spans(data, np.frombuffer(names, np.int32))
        self._input_spans = _Spans(data, np.frombuffer(inputs, np.int32))
        self._library = library
        if src is not None:
            self.resolved = np.frombuffer(src, np.int32), np.frombuffer(port, np.int32)

    @property
    def raw_names(self):
        if self._raw_names is None:
            self._raw_names = self._name_spans[:]
        return self._raw_names

    @property
    def raw_inputs(self):
        if self._raw_inputs is None:
            self._raw_inputs = self._input_spans[:]
        return self._raw_inputs

    def raw_input(self, j):
        return self._input_spans[j]

    def name(self, i):
        return self._name_spans[i].decode("utf-8", "replace")

    @property
    def lazy_names(self):
        return self._names if self._names is not None else _Decoded(self._name_spans)

    @property
    def has_node_bytes(self):
        return True

    def node_bytes(self, i):
        _, start, end = self.spans[i].tolist()
        return self.data[start:end]

    @property
    def library(self):
        if self._library is None:
            return b""
        at, size = self._library
        return self.data[at:at + size]

    def append_to_nodes(self, data, suffixes):
        which = sorted(suffixes)
        numbers = {}  # each distinct suffix once
        of = [numbers.setdefault(suffixes[i], len(numbers)) for i in which]
        return self.append_entries(data, which, of, list(numbers))

    def append_entries(self, data, which, of, entries):
        if data is not self.data:
            return append_to_nodes(data, {i: entries[e] for i, e in zip(which, of)})
        return _scan.append(data, self.spans, np.array(which, np.int64),
                            np.array(of, np.int64),
                            [b"" if e is None else e for e in entries])  # None: unused


class _Spans(collections.abc.Sequence):
    """The byte strings at (offset, length) pairs of `data`."""

    def __init__(self, data, pairs):
        self._data, self._pairs = data, pairs

    def __len__(self):
        return len(self._pairs) // 2

    def __getitem__(self, i):
        data = self._data
        if isinstance(i, slice):
            pairs = self._pairs.reshape(-1, 2)[i].tolist()
            return [data[at:at + size] for at, size in pairs]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        at, size = self._pairs[2 * i:2 * i + 2].tolist()
        return data[at:at + size]


class _Decoded(collections.abc.Sequence):
    """A read-only list of the str of UTF-8 bytes, decoded on reading."""

    def __init__(self, raw):
        self._raw = raw

    def __len__(self):
        return len(self._raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [b.decode("utf-8") for b in self._raw[i]]
        return self._raw[i].decode("utf-8")


def read_index(data, nodes=None):
    """The `Index` of the serialized GraphDef `data`, with `Index.unknown`
    set; None when the bytes do not parse or are not laid out as TensorFlow
    (and protobuf itself) writes them: nodes first, each starting with its
    name and op type, then its inputs (the slow path then reads the graph
    node by node, and names a culprit if there is one). With the C reader,
    any layout protobuf reads is read, and the inputs come resolved."""
    if _scan is not None and nodes is None:
        try:
            scanned = _scan.scan(data)
        except (TypeError, ValueError, BufferError):
            scanned = None
        if scanned is not None:
            try:
                unknown = _has_unknown(_MergedFields.FromString(data))
            except ImportError:  # pragma: no cover - protobuf without unknown_fields
                return None
            except Exception:  # pylint: disable=broad-except
                return None
            return _ScanIndex(data, scanned, unknown)
    try:
        nodes = nodes if nodes is not None else _Nodes.FromString(data)
        merged = _MergedGraphDef.FromString(data)
        unknown = _has_unknown(merged)
    except ImportError:  # pragma: no cover - protobuf without unknown_fields
        return None
    except Exception:  # pylint: disable=broad-except
        return None
    fields, n = merged.node, len(nodes.node)
    if len(fields.name) != n or len(fields.op) != n:
        return None
    inputs = list(fields.input)
    counts = input_counts(data, nodes.node, len(inputs))
    if counts is None:
        return None
    return Index(list(fields.name), list(fields.op), inputs, counts, nodes, unknown)


def node_count(data):
    """How many nodes the serialized GraphDef `data` holds.

    Raises:
      google.protobuf.message.DecodeError: `data` does not parse.
    """
    if _scan is not None:
        count = _scan.node_count(data)
        if count is not None:
            return count
    return len(_Nodes.FromString(data).node)


def _varints(arr, pos):
    """(values, sizes) of the varints at positions `pos` of the uint8 array
    `arr`, or None if one runs past the end or over 4 bytes (2**28)."""
    if pos.max(initial=-1) >= len(arr):
        return None
    first = arr[pos]
    if not (first & 0x80).any():  # the usual case: all under 128, one byte each
        return first.astype(np.int64), np.ones(len(pos), np.int64)
    value = np.zeros(len(pos), np.int64)
    size = np.zeros(len(pos), np.int64)
    more = np.ones(len(pos), bool)
    for k in range(4):
        at = pos + k
        if at[more].max(initial=-1) >= len(arr):
            return None
        byte = arr[np.minimum(at, len(arr) - 1)].astype(np.int64)
        value[more] |= (byte[more] & 0x7F) << (7 * k)
        size[more] += 1
        more &= byte >= 0x80
        if not more.any():
            return value, size
    return None


def input_counts(data, raw, total):
    """How many inputs each node of the serialized GraphDef `data` has,
    read from the bytes with numpy: every node at once, field by field.

    The node fields must come first (field 1, in node order), with minimal
    length prefixes, and each node must start with its name (field 1) and
    op type (field 2) followed by its inputs (field 3): the order in which
    protobuf writes them. The counts must add up to `total` (all inputs,
    from a parse): inputs anywhere else in a node make them fall short.

    Args:
      data: the bytes.
      raw: the node bytes (`Nodes.node`), for their lengths.
      total: the number of inputs in all nodes.

    Returns:
      A numpy int64 array, one count per node, or None when the bytes are
      laid out otherwise.
    """
    n = len(raw)
    if n == 0:
        return np.zeros(0, np.int64) if total == 0 else None
    arr = np.frombuffer(data, np.uint8)
    lens = np.fromiter(map(len, raw), np.int64, n)
    # A node's head: its tag (1 byte) and its length as a varint (1 to 5).
    head = 2 + np.searchsorted(np.array([1 << 7, 1 << 14, 1 << 21, 1 << 28]), lens,
                               side="right")
    ends = np.cumsum(head + lens)
    starts = ends - lens
    if ends[-1] > len(arr) or (arr[starts - head] != 0x0A).any():
        return None
    decoded = _varints(arr, starts - head + 1)  # the length prefixes, minimal
    if decoded is None or (decoded[0] != lens).any() or (decoded[1] != head - 1).any():
        return None
    pos = starts.copy()
    for tag in (0x0A, 0x12):  # name, op
        if (pos >= ends).any() or (arr[np.minimum(pos, len(arr) - 1)] != tag).any():
            return None
        decoded = _varints(arr, pos + 1)
        if decoded is None:
            return None
        pos = pos + 1 + decoded[1] + decoded[0]
    if (pos > ends).any():
        return None
    counts = np.zeros(n, np.int64)
    active = np.flatnonzero(pos < ends)
    active = active[arr[pos[active]] == 0x1A]
    while len(active):  # one more input of every node that has one more
        decoded = _varints(arr, pos[active] + 1)
        if decoded is None:
            return None
        pos[active] += 1 + decoded[1] + decoded[0]
        counts[active] += 1
        if (pos[active] > ends[active]).any():
            return None
        active = active[pos[active] < ends[active]]
        active = active[arr[pos[active]] == 0x1A]
    return counts if int(counts.sum()) == total else None


def fast_index(data, node_count):
    """(names, ops, inputs) of the serialized GraphDef `data`, or None when
    the nodes do not each hold exactly one name and one op."""
    index = read_index(data)
    if index is None or len(index.ops) != node_count:
        return None
    return index.names, index.ops, index.inputs


def append_to_nodes(data, suffixes, nodes=None):
    """The serialized GraphDef `data` with ``suffixes[i]`` (serialized
    NodeDef fields) appended to node i; protobuf merges them into the node
    when parsing (repeated and map fields add, singular fields replace).
    Everything else is written back byte for byte."""
    message = nodes if nodes is not None else _Nodes.FromString(data)
    raw = message.node
    for i, suffix in suffixes.items():
        raw[i] = raw[i] + suffix
    return message.SerializeToString()


def has_unknown_fields(data):
    """True if the serialized GraphDef `data` holds a field that its message
    type (GraphDef, NodeDef, AttrValue, TensorProto, FunctionDef, ... at any
    depth) does not have, or a known field with the wrong wire type.

    Raises:
      google.protobuf.message.DecodeError: `data` does not parse.
    """
    return _has_unknown(_MergedGraphDef.FromString(data))


def _has_unknown(merged):
    """True if a message of the merged tree `merged` holds unknown fields
    (protobuf keeps them when merging)."""
    from google.protobuf import unknown_fields  # pylint: disable=import-outside-toplevel
    todo = [merged]
    while todo:
        message = todo.pop()
        if len(unknown_fields.UnknownFieldSet(message)):
            return True
        todo.extend(v for f, v in message.ListFields()
                    if f.type == _FD.TYPE_MESSAGE)
    return False
