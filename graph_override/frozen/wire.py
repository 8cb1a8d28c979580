"""C-level views of a serialized GraphDef (see `graph_override.frozen.io`).

Protobuf is asked to parse the bytes as throw-away message types built from
descriptors at import, so that the work over a large graph happens in C,
with no Python loop over nodes:

* `Nodes`: the GraphDef with each NodeDef kept as raw bytes, in node order
  (a parse that only slices), and written back byte for byte with
  `append_to_nodes`;
* `read_index`: names, op types and inputs of every node, and how many
  inputs each has. The raw node bytes are joined with an empty ``input``
  field after each node and parsed as *one* NodeDef-like message whose name,
  op and input fields are repeated: protobuf appends every node's fields in
  order, and the empty inputs mark where each node's inputs end;
* `has_unknown_fields`: whether any message at any depth holds a field its
  type does not have. The bytes are parsed as a copy of the GraphDef schema
  in which every message field is singular: protobuf merges all nodes, attr
  values and tensors into one small tree, whose unknown fields (which
  protobuf keeps on merge) are then looked at in Python.
"""

import collections.abc

import numpy as np
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import graph_pb2, node_def_pb2

__all__ = ["Index", "append_to_nodes", "fast_index", "has_unknown_fields", "node_counts",
           "parse_nodes", "read_index"]

_FD = descriptor.FieldDescriptor
_STRING, _BYTES = _FD.TYPE_STRING, _FD.TYPE_BYTES
_OPTIONAL, _REPEATED = _FD.LABEL_OPTIONAL, _FD.LABEL_REPEATED

# An empty NodeDef.input field (field 3, length 0): the end-of-node mark.
_MARK = b"\x1a\x00"


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


def _merged_class(root, name, repeated=None):
    """A copy of `root` 's schema, every type it reaches included, in which
    message fields (repeated, in a oneof, or map entries) are singular, so
    that parsing merges all their occurrences into one message. Scalars keep
    their type and label (repeated ones accumulate) and enums become int32:
    the same bytes are known, or unknown, as to the real schema.
    `repeated` ({field name: type}) makes scalar fields of `root` itself
    repeated, with that type, so that they collect every occurrence."""
    fdp = _file(name)
    repeated = repeated or {}

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
            elif d is root and f.name in repeated:
                message.field.add(name=f.name, number=f.number, type=repeated[f.name],
                                  label=_REPEATED)
            else:
                message.field.add(
                    name=f.name, number=f.number,
                    type=_FD.TYPE_INT32 if f.type == _FD.TYPE_ENUM else f.type,
                    label=_REPEATED if _is_repeated(f) else _OPTIONAL)
    return _message_class(fdp, local(root))


_Nodes = _nodes_class()
_MergedGraphDef = _merged_class(graph_pb2.GraphDef.DESCRIPTOR, "merged_graph")
# All NodeDefs merged into one, their names, op types and inputs collected.
_MergedNodes = _merged_class(node_def_pb2.NodeDef.DESCRIPTOR, "merged_nodes", {
    "name": _BYTES, "op": _STRING, "input": _BYTES})


def parse_nodes(data):
    """The `Nodes` message of the serialized GraphDef `data`: ``.node`` holds
    each NodeDef's bytes; ``.library`` the function library's bytes."""
    return _Nodes.FromString(data)


class Index:
    """Names, op types and inputs of a serialized GraphDef's nodes.

    Attributes:
      raw_names: node names as bytes (UTF-8), in node order.
      ops: op types (str), in node order.
      raw_marked: every node's inputs as bytes, in node order, each node's
        followed by b"" (no input can be empty), so that input counts come
        out of a vectorized lookup (see `graph_override.frozen.checks`).
      nodes: the `Nodes` message (raw node bytes), or None.
      unknown: True if a node holds a field NodeDef (or what it holds, at
        any depth) does not have; None if not looked at.
    """

    def __init__(self, raw_names, ops, raw_marked, nodes=None, unknown=None):
        self.raw_names, self.ops, self.raw_marked = raw_names, ops, raw_marked
        self.nodes, self.unknown = nodes, unknown
        self._names = self._inputs = None

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
            self._inputs = [i.decode("utf-8") for i in self.raw_marked if i]
        return self._inputs

    def name(self, i):
        """The name of node i, for messages."""
        return self.raw_names[i].decode("utf-8", "replace")

    @property
    def lazy_names(self):
        """Node names as a sequence that decodes each name when it is read
        (for code that reads a few of a million)."""
        return self._names if self._names is not None else _Decoded(self.raw_names)

    @classmethod
    def from_graph_def(cls, graph_def):
        """The index of a message, node by node (slow, for odd graphs)."""
        names, ops, marked = [], [], []
        for node in graph_def.node:
            names.append(node.name.encode("utf-8"))
            ops.append(node.op)
            marked.extend(i.encode("utf-8") for i in node.input)
            marked.append(b"")
        return cls(names, ops, marked)


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
    set, or None when a node does not hold exactly one name and one op, or
    the bytes do not parse (then the slow path finds and names the culprit)."""
    try:
        nodes = nodes if nodes is not None else _Nodes.FromString(data)
        raw = nodes.node
        merged = _MergedNodes.FromString(_MARK.join(raw) + _MARK if len(raw) else b"")
    except Exception:  # pylint: disable=broad-except
        return None
    n = len(raw)
    if len(merged.name) != n or len(merged.op) != n:
        return None
    try:
        unknown = _has_unknown(merged) or _graph_fields_unknown(nodes)
    except ImportError:  # pragma: no cover - protobuf without unknown_fields
        unknown = None
    except Exception:  # pylint: disable=broad-except
        return None
    return Index(list(merged.name), list(merged.op), list(merged.input), nodes, unknown)


def _graph_fields_unknown(nodes):
    """Unknown fields in the GraphDef's fields other than its nodes."""
    if not (nodes.library or nodes.versions or nodes.debug_info):
        return False
    rest = _Nodes(library=nodes.library, version=nodes.version,
                  versions=nodes.versions, debug_info=nodes.debug_info)
    return has_unknown_fields(rest.SerializeToString())


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


def node_counts(src_marked, node_count):
    """(inputs per node, the positions of real inputs) from the lookup of an
    `Index`'s marked inputs, where marks were looked up as -2; None if the
    marks do not match the node count (an empty input in a damaged node)."""
    marks = np.flatnonzero(src_marked == -2)
    if len(marks) != node_count:
        return None
    counts = np.diff(marks, prepend=-1) - 1
    return counts, np.flatnonzero(src_marked != -2)
