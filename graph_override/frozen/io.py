"""Reading, checking and writing GraphDef files (see `graph_override.frozen`).

Protobuf parses almost any bytes as *some* message: random bytes, a
SavedModel's saved_model.pb or a truncated file often come back as a GraphDef
with a few strange nodes, or none. `parse_graph_def` therefore checks what it
parsed (node names and op types well formed, no duplicate names, every input
naming a node) and turns every failure into a `GraphDefError` that names the
file.

The checks run on a C-level view of the serialized bytes instead of a Python
loop over the nodes: the bytes are parsed once more as a message whose node
field is singular, so protobuf merges all NodeDefs into one message with
*repeated* name, op and input fields, in node order. A 200,000-node graph is
checked in about the time it takes to parse it.
"""

import os
import re

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import saved_model_pb2

from graph_override._atomic import atomic_write
from graph_override.errors import GraphDefError

__all__ = ["MAX_BYTES", "append_to_nodes", "check_output_path", "fast_index", "load",
           "parse_graph_def", "save", "validate"]

# Protobuf cannot serialize or parse a message of 2 GiB or more.
MAX_BYTES = 2 ** 31 - 1

# TensorFlow's own rules (tensorflow/core/graph/graph_constructor.cc).
_NODE_NAME = r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*"
_OP_NAME = r"[A-Za-z0-9_.>\-]+"
_NAMES_RE = re.compile(r"(?:%s\n)*" % _NODE_NAME)
_OPS_RE = re.compile(r"(?:%s\n)*" % _OP_NAME)
_INPUT_NODE_RE = re.compile(r"^\^|:\d+$", re.M)
_TEXT_SUFFIXES = (".pbtxt", ".txt", ".prototxt")


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
    """Checks node names, op types, duplicates and dangling inputs.

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
        _slow_check(graph_def, source)
        return
    names, ops, inputs = index
    ok = (_NAMES_RE.fullmatch("\n".join(names) + "\n") is not None if names else True)
    ok = ok and (_OPS_RE.fullmatch("\n".join(ops) + "\n") is not None if ops else True)
    name_set = set(names)
    ok = ok and len(name_set) == len(names)
    if ok and inputs:
        # Most inputs are plain node names; only the rest ("^ctrl", "node:1")
        # need their node name taken out.
        other = set(inputs)
        other.difference_update(name_set)
        ok = all(_INPUT_NODE_RE.sub("", ref) in name_set for ref in other)
    if not ok:
        _slow_check(graph_def, source)


def _saved_model_hint(data):
    """True if `data` parses as a SavedModel holding at least one MetaGraph."""
    if not data.startswith(b"\x08"):  # field 1 (schema version), a varint
        return False
    try:
        sm = saved_model_pb2.SavedModel.FromString(data)
    except Exception:  # pylint: disable=broad-except
        return False
    return len(sm.meta_graphs) > 0


_SAVED_MODEL_MSG = (
    "%s: this is a SavedModel (saved_model.pb), not a frozen GraphDef. Freeze "
    "it first, e.g. load it with tf.saved_model.load and convert the "
    "signature with tensorflow.python.framework.convert_to_constants."
    "convert_variables_to_constants_v2, then write graph_def.SerializeToString().")


def _top_level_unknown(graph_def):
    try:
        from google.protobuf import unknown_fields  # pylint: disable=import-outside-toplevel
        return len(unknown_fields.UnknownFieldSet(graph_def)) > 0
    except (ImportError, TypeError, AttributeError):  # pragma: no cover
        return False


def parse_graph_def(data, source="<bytes>", *, text=None):
    """Parses and checks a binary or text GraphDef.

    Example:
      >>> from graph_override import frozen
      >>> g = frozen.parse_graph_def(b'node { name: "x" op: "Placeholder" }', text=True)
      >>> g.node[0].op
      'Placeholder'
      >>> frozen.parse_graph_def(b"", "model.pb")
      Traceback (most recent call last):
      ...
      graph_override.errors.GraphDefError: model.pb: the file is empty; expected a GraphDef (binary .pb or text .pbtxt)

    Args:
      data: the file's bytes.
      source: what to call it in messages.
      text: True for text format, False for binary, None to decide: text for
        a .pbtxt/.txt name, else binary, falling back to text.

    Returns:
      A checked `GraphDef`.

    Raises:
      GraphDefError: naming `source`: empty, not a GraphDef (random bytes, a
        text file, a SavedModel), truncated, or failing `validate`.
    """
    if not data:
        raise GraphDefError("%s: the file is empty; expected a GraphDef "
                            "(binary .pb or text .pbtxt)" % source)
    if text is None:
        text = str(source).lower().endswith(_TEXT_SUFFIXES)
    graph_def, errors, binary = None, [], None
    for as_text in ((True,) if text else (False, True)):
        try:
            if as_text:
                graph_def = text_format.Parse(data.decode("utf-8"),
                                              graph_pb2.GraphDef())
            else:
                graph_def = graph_pb2.GraphDef.FromString(data)
                if _top_level_unknown(graph_def):
                    graph_def = None
                    errors.append("binary: fields that a GraphDef does not have")
                    continue
                binary = data
            break
        except Exception as e:  # pylint: disable=broad-except
            # Any parser failure (DecodeError, ParseError, UnicodeDecodeError,
            # RuntimeWarning-turned-error...) means "not this format".
            errors.append("%s: %s" % ("text" if as_text else "binary",
                                      str(e).splitlines()[0][:200] if str(e) else
                                      type(e).__name__))
            graph_def = None
    if graph_def is None:
        if _saved_model_hint(data):
            raise GraphDefError(_SAVED_MODEL_MSG % source)
        raise GraphDefError(
            "%s: not a GraphDef, or a truncated/damaged one (%s). Expected a "
            "frozen graph written by graph_def.SerializeToString() (.pb) or "
            "text_format (.pbtxt)." % (source, "; ".join(errors)))
    if _saved_model_hint(data) and (
            not graph_def.node or os.path.basename(str(source)) == "saved_model.pb"):
        raise GraphDefError(_SAVED_MODEL_MSG % source)
    if not graph_def.node:
        raise GraphDefError(
            "%s: parsed, but holds no nodes; expected a frozen GraphDef. Is it "
            "truncated, or a different kind of protobuf file?" % source)
    validate(graph_def, source, data=binary)
    return graph_def


def load(path):
    """Reads a GraphDef from a binary ``.pb`` or text ``.pbtxt`` file.

    Example:
      >>> import os, tempfile
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, name="x")
      ...     y = tf.sign(x, name="y")
      >>> path = os.path.join(tempfile.mkdtemp(), "model.pb")
      >>> frozen.save(g.as_graph_def(), path)
      >>> [n.op for n in frozen.load(path).node]
      ['Placeholder', 'Sign']

    Args:
      path: the file.

    Returns:
      A `GraphDef` whose node names are unique and whose inputs all exist.

    Raises:
      GraphDefError: naming `path`: missing, a directory, empty, truncated,
        random bytes, a text file, a SavedModel, duplicate node names, a
        dangling input.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        hint = (" It holds saved_model.pb: it is a SavedModel directory; freeze "
                "it first (see convert_variables_to_constants_v2)."
                if os.path.exists(os.path.join(path, "saved_model.pb")) else "")
        raise GraphDefError("%s: is a directory; expected a GraphDef file "
                            "(.pb or .pbtxt).%s" % (path, hint))
    if not os.path.exists(path):
        raise GraphDefError("%s: no such file; expected a GraphDef file (.pb "
                            "or .pbtxt)." % path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise GraphDefError("%s: cannot be read: %s" % (path, e.strerror or e)) from e
    return parse_graph_def(data, path)


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def check_output_path(path, *, source=None, overwrite=False):
    """Checks that `save` may write `path`; returns (path, its folder).

    Example:
      >>> import os, tempfile
      >>> from graph_override import frozen
      >>> frozen.check_output_path(os.path.join(tempfile.mkdtemp(), "no", "fixed.pb"))
      Traceback (most recent call last):
      ...
      graph_override.errors.GraphDefError: ...fixed.pb: the folder ... does not exist; create it first

    Raises:
      GraphDefError: `path` is a directory, its folder is missing, it is
        `source` or exists, and `overwrite` is not given.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise GraphDefError("%s: is a directory; give a file name for the "
                            "GraphDef" % path)
    if not os.path.isdir(folder):
        raise GraphDefError("%s: the folder %s does not exist; create it first"
                            % (path, folder))
    if source is not None and not overwrite and _same_file(source, path):
        raise GraphDefError("%s: is the input file; write to another path, or "
                            "pass overwrite=True (CLI: --force) to replace "
                            "the input" % path)
    if os.path.exists(path) and not overwrite:
        raise GraphDefError("%s: exists already; pass overwrite=True (CLI: "
                            "--force) to replace it" % path)
    return path, folder


def save(graph_def, path, *, overwrite=False, as_text=None, source=None):
    """Writes `graph_def` to `path` atomically.

    The bytes go to a temporary file in the target folder (flushed with
    fsync), are read back, compared byte for byte and re-parsed (wire format,
    node names, op types), and only then renamed onto `path`; on any failure the temporary
    file is removed, so `path` is either untouched or complete.

    Example:
      >>> import os, tempfile
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     y = tf.sign(tf.compat.v1.placeholder(tf.float32, name="x"), name="y")
      >>> path = os.path.join(tempfile.mkdtemp(), "model.pbtxt")
      >>> frozen.save(g.as_graph_def(), path)   # text, from the suffix
      >>> frozen.save(g.as_graph_def(), path)
      Traceback (most recent call last):
      ...
      graph_override.errors.GraphDefError: ...model.pbtxt: exists already; pass overwrite=True (CLI: --force) to replace it

    Args:
      graph_def: a `GraphDef`.
      path: the output file. Its folder must exist.
      overwrite: replace an existing `path`. Without it an existing file,
        the input among them, is never replaced.
      as_text: text format; default: True for .pbtxt/.txt, else binary.
      source: the file `graph_def` was read from, if any: writing onto it is
        refused unless `overwrite` is given.

    Raises:
      GraphDefError: `path` exists (without `overwrite`), is a directory or
        the input, its folder is missing, or the graph reaches protobuf's
        2 GB limit (checked before anything is written).
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("save(%s): expected a tf.compat.v1.GraphDef, got %s"
                            % (path, type(graph_def).__name__))
    path, _ = check_output_path(path, source=source, overwrite=overwrite)
    if as_text is None:
        as_text = path.lower().endswith(_TEXT_SUFFIXES)
    # Serialized in memory first (ByteSize() would cost a serialization of
    # its own): nothing touches the disk before the size is known.
    try:
        data = graph_def.SerializeToString()
    except Exception as e:  # pylint: disable=broad-except
        raise GraphDefError("%s: the graph cannot be serialized (%s); nothing was "
                            "written. Graphs over protobuf's 2 GB limit cannot be "
                            "stored as one GraphDef." % (path, e)) from e
    if len(data) > MAX_BYTES:
        raise GraphDefError(
            "%s: the graph is %d bytes, over protobuf's limit of %d (2 GB); "
            "nothing was written. Keep large weights outside the GraphDef "
            "(a SavedModel stores them as variables)." % (path, len(data), MAX_BYTES))
    if as_text:
        data = text_format.MessageToString(graph_def).encode("utf-8")
    def check(back):
        if as_text:
            text_format.Parse(back.decode("utf-8"), graph_pb2.GraphDef())
        elif fast_index(back, len(graph_def.node)) is None:
            # The bytes equal the serialization, so a full GraphDef parse can
            # only repeat what this one checks: the wire format, one name and
            # op per node (and it takes a third of the time).
            raise GraphDefError("%s: the written file does not re-parse as the "
                                "GraphDef; nothing was replaced" % path)

    atomic_write(path, data, verify=check, keep_mode=False)
