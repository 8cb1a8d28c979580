"""The wire level of a serialized GraphDef: C-level views of its bytes, on
which `graph_override.frozen.graphdef.graph_index` builds the index.

* `scan`, `append_entries`, `node_count`: the C reader
  (`graph_override.frozen.graphdef._scan`, built by pip where a C compiler is at
  hand): one pass over the bytes for the spans of every name, op type and
  input, each input resolved to its node; the patched bytes; the node
  count of the read-back check. GRAPH_OVERRIDE_PURE_PYTHON=1 in the
  environment before import turns it off; everything then goes through
  the protobuf and numpy functions below, with the same results.
* `parse_nodes`: the GraphDef with each NodeDef kept as raw bytes, in node
  order (a parse that only slices), written back byte for byte by
  `append_to_nodes`.
* `parse_merged`: the bytes parsed as throw-away message types built from
  descriptors at import, a copy of the GraphDef schema in which every
  message field is singular: protobuf merges all nodes, attr values and
  tensors into one small tree, keeping every unknown field, which
  `has_unknown` looks for; NodeDef's name, op and input can collect every
  node's, in order.
* `input_counts`: how many inputs each node has, read from the bytes with
  numpy, field by field for all nodes at once.
"""

import os

import numpy as np
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import graph_pb2, node_def_pb2

__all__ = ["append_entries", "append_to_nodes", "has_unknown", "has_unknown_fields",
           "input_counts", "node_count", "parse_merged", "parse_nodes", "scan", "speedups"]

try:  # graph_override/frozen/graphdef/_scan.c, built by pip where a C compiler is at hand
    from graph_override.frozen.graphdef import _scan
except ImportError:  # pragma: no cover - depends on the build
    _scan = None
if os.environ.get("GRAPH_OVERRIDE_PURE_PYTHON", "") not in ("", "0"):
    _scan = None


def speedups():
    """True if the C reader (`graph_override.frozen.graphdef._scan`) is in use."""
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
    raw bytes too (read on demand) and written back unchanged. Every field
    is repeated (proto2: unpacked, an empty message kept): protobuf merges
    a singular message field given twice (two `library` fields, both of
    whose functions TensorFlow sees), so each occurrence is kept and
    written back, in field order as protobuf writes them."""
    fdp = _file("nodes")
    fdp.syntax = "proto2"
    nodes = fdp.message_type.add(name="Nodes")
    for name, number, type_ in (("node", 1, _BYTES), ("library", 2, _BYTES),
                                ("version", 3, _FD.TYPE_INT32), ("versions", 4, _BYTES),
                                ("debug_info", 5, _BYTES)):
        nodes.field.add(name=name, number=number, type=type_, label=_REPEATED)
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
    each NodeDef's bytes; ``.library`` the bytes of each `library` field
    (their concatenation is the merged library)."""
    return _Nodes.FromString(data)


def scan(data):
    """The C reader's tuple for `data` (see _scan.c), or None when it is
    not built or does not read these bytes."""
    if _scan is None:
        return None
    try:
        return _scan.scan(data)
    except (TypeError, ValueError, BufferError):
        return None


def append_entries(data, spans, which, of, entries):
    """`data` with ``entries[of[k]]`` appended to node ``which[k]`` (`which`
    ascending), given the C reader's node spans of `data`."""
    return _scan.append(data, spans, np.array(which, np.int64), np.array(of, np.int64),
                        [b"" if e is None else e for e in entries])  # None: unused


def parse_merged(data, collect):
    """`data` parsed as the merged schema (see the module): with `collect`,
    NodeDef's name, op and input collect every node's; else only the last
    is kept (to look for unknown fields). Raises DecodeError."""
    return (_MergedGraphDef if collect else _MergedFields).FromString(data)


def has_unknown(merged):
    """True if a message of the merged tree `merged` (`parse_merged`) holds
    unknown fields (protobuf keeps them when merging)."""
    return _has_unknown(merged)


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


def append_to_nodes(data, suffixes, nodes=None):
    """The serialized GraphDef `data` with ``suffixes[i]`` (serialized
    NodeDef fields) appended to node i; protobuf merges them into the node
    when parsing (repeated and map fields add, singular fields replace).
    Everything else is written back byte for byte, in place when the nodes
    come first as protobuf writes them (the bytes the C reader's `append`
    gives), else re-serialized in field order. `nodes` (`parse_nodes(data)`,
    if at hand) is not changed."""
    message = nodes if nodes is not None else _Nodes.FromString(data)
    spliced = _splice(data, message.node, suffixes)
    if spliced is not None:
        return spliced
    message = _Nodes.FromString(data)  # `nodes` stays as it is
    raw = message.node
    for i, suffix in suffixes.items():
        raw[i] = raw[i] + suffix
    return message.SerializeToString()


_VARINT_LIMITS = np.array([1 << 7, 1 << 14, 1 << 21, 1 << 28])


def _varint_bytes(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _splice(data, raw, suffixes):
    """`data` with ``suffixes[i]`` appended to node i in place, or None when
    the nodes (`raw`, their bytes) are not the first fields of `data`, one
    after another with minimal length prefixes."""
    if not len(raw):
        return None
    lens = np.fromiter(map(len, raw), np.int64, len(raw))
    head = 2 + np.searchsorted(_VARINT_LIMITS, lens, side="right")
    ends = np.cumsum(head + lens).tolist()
    if ends[-1] > len(data):
        return None
    lens, pieces, done = lens.tolist(), [], 0
    for i in sorted(suffixes):
        start, size = ends[i] - lens[i], lens[i]
        prefix = b"\x0a" + _varint_bytes(size)
        if data[start - len(prefix):start] != prefix or data[start:ends[i]] != raw[i]:
            return None
        pieces += [data[done:start - len(prefix)], b"\x0a",
                   _varint_bytes(size + len(suffixes[i])), raw[i], suffixes[i]]
        done = ends[i]
    pieces.append(data[done:])
    return b"".join(pieces)


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
