"""The index of a serialized GraphDef: names, op types and inputs of every
node, read once and shared by the checks, `inspect` and `patch`.

`read_index` reads it with the C reader (`graph_override.frozen.graphdef._scan`,
through `wire.scan`) where that was built: one pass that gives spans into
the bytes (`ScanIndex`: names and inputs are sliced out only when read)
and every input resolved to its node. Otherwise, and for bytes the C
reader leaves alone, protobuf parses them as `wire`'s merged schema and
numpy counts the inputs (`Index`). Either way one more protobuf parse finds
unknown fields at any depth. tests/frozen/test_c_reader.py compares the two.
"""

import collections.abc

import numpy as np

from graph_override.frozen.graphdef import wire

__all__ = ["Index", "ScanIndex", "read_index"]


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
        return None if self.nodes is None else b"".join(self.nodes.library)

    def append_to_nodes(self, data, suffixes):
        """`append_to_nodes` of `data` (the bytes this index was read from)."""
        return wire.append_to_nodes(data, suffixes, self.nodes)

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


class ScanIndex(Index):
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
            return wire.append_to_nodes(data, {i: entries[e] for i, e in zip(which, of)})
        return wire.append_entries(data, self.spans, which, of, entries)


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


def read_index(data):
    """The `Index` of the serialized GraphDef `data`, with `Index.unknown`
    set; None when the bytes do not parse or are not laid out as TensorFlow
    (and protobuf itself) writes them: nodes first, each starting with its
    name and op type, then its inputs (the slow path then reads the graph
    node by node, and names a culprit if there is one). With the C reader,
    any layout protobuf reads is read, and the inputs come resolved."""
    scanned = wire.scan(data)
    if scanned is not None:
        try:
            unknown = wire.has_unknown(wire.parse_merged(data, collect=False))
        except ImportError:  # pragma: no cover - protobuf without unknown_fields
            return None
        except Exception:  # pylint: disable=broad-except
            return None
        return ScanIndex(data, scanned, unknown)
    try:
        nodes = wire.parse_nodes(data)
        merged = wire.parse_merged(data, collect=True)
        unknown = wire.has_unknown(merged)
    except ImportError:  # pragma: no cover - protobuf without unknown_fields
        return None
    except Exception:  # pylint: disable=broad-except
        return None
    fields, n = merged.node, len(nodes.node)
    if len(fields.name) != n or len(fields.op) != n:
        return None
    inputs = list(fields.input)
    counts = wire.input_counts(data, nodes.node, len(inputs))
    if counts is None:
        return None
    return Index(list(fields.name), list(fields.op), inputs, counts, nodes, unknown)
