"""A C-level view of a serialized GraphDef (see `graph_override.frozen.io`).

The bytes are parsed once more as a message whose node field is singular, so
protobuf merges all NodeDefs into one message with *repeated* name, op and
input fields, in node order: names, op types and inputs of a large graph
come out in about the time a parse takes, with no Python loop over nodes.
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["append_to_nodes", "fast_index"]


def _lite_class():
    """A throw-away message type over the GraphDef wire format whose field 1
    (GraphDef.node) is a *singular* message with repeated name (1), op (2)
    and input (3): protobuf merges every NodeDef into it, appending their
    names, op types and inputs in node order, all in C."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="graph_override_graphdef_lite.proto",
        package="graph_override_lite", syntax="proto3")
    fields = fdp.message_type.add(name="Fields")
    for name, number in (("name", 1), ("op", 2), ("input", 3)):
        # string: protobuf checks UTF-8 in C and hands back str objects.
        fields.field.add(name=name, number=number, type=9, label=3)
    merged = fdp.message_type.add(name="Merged")
    merged.field.add(name="node", number=1, type=11, label=1,
                     type_name=".graph_override_lite.Fields")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("graph_override_lite.Merged"))


_Merged = _lite_class()


def _nodes_class():
    """GraphDef with its nodes as raw bytes; other fields are kept as
    unknown fields and written back unchanged."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="graph_override_graphdef_nodes.proto",
        package="graph_override_nodes", syntax="proto3")
    nodes = fdp.message_type.add(name="Nodes")
    nodes.field.add(name="node", number=1, type=12, label=3)  # repeated bytes
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("graph_override_nodes.Nodes"))


_Nodes = _nodes_class()


def append_to_nodes(data, suffixes):
    """The serialized GraphDef `data` with ``suffixes[i]`` (serialized
    NodeDef fields) appended to node i; protobuf merges them into the node
    when parsing (repeated and map fields add, singular fields replace)."""
    message = _Nodes.FromString(data)
    nodes = message.node
    for i, suffix in suffixes.items():
        nodes[i] = nodes[i] + suffix
    return message.SerializeToString()


def fast_index(data, node_count):
    """(names, ops, inputs) of the serialized GraphDef `data`, or None when
    the nodes do not each hold exactly one name and one op (then the slow
    path finds and names the culprit)."""
    try:
        fields = _Merged.FromString(data).node
    except Exception:  # pylint: disable=broad-except
        return None
    if len(fields.name) != node_count or len(fields.op) != node_count:
        return None
    return list(fields.name), list(fields.op), list(fields.input)
