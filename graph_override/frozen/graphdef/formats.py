"""What kind of file a GraphDef reader was given (see `graph_override.frozen.graphdef.io`).

Protobuf parses almost any bytes as *some* message, so the reader tells
binary from text by the content, refuses fields that a GraphDef does not
have, and, when bytes are not a GraphDef, says what they are instead (a
SavedModel's saved_model.pb, a MetaGraphDef written next to a checkpoint)
and how to freeze them.
"""

import re

from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from graph_override.errors import GraphDefError
from graph_override.frozen.graphdef.wire import has_unknown_fields

__all__ = ["TEXT_SUFFIXES", "check_unknown_fields", "format_order", "looks_like_text",
           "top_level_unknown", "wrong_kind"]

TEXT_SUFFIXES = (".pbtxt", ".txt", ".prototxt")


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


_META_GRAPH_MSG = (
    "%s: this is a MetaGraphDef (a .meta file written next to a checkpoint), "
    "not a frozen GraphDef: its variables are not in it. Freeze it first: "
    "saver = tf.compat.v1.train.import_meta_graph(PATH) and saver.restore(sess, "
    "CHECKPOINT) in a Session, then graph_def = "
    "tf.compat.v1.graph_util.convert_variables_to_constants(sess, "
    "sess.graph_def, OUTPUT_NODE_NAMES) and write graph_def.SerializeToString().")


def _meta_graph_hint(data, as_text):
    """True if `data` is a MetaGraphDef holding a graph with nodes."""
    try:
        if as_text:
            meta = text_format.Parse(data.decode("utf-8"), meta_graph_pb2.MetaGraphDef())
        else:
            meta = meta_graph_pb2.MetaGraphDef.FromString(data)
    except Exception:  # pylint: disable=broad-except
        return False
    return len(meta.graph_def.node) > 0 and not top_level_unknown(meta)


def wrong_kind(data, source, as_text):
    """The GraphDefError for a SavedModel or MetaGraphDef, else None."""
    if _saved_model_hint(data):
        return GraphDefError(_SAVED_MODEL_MSG % source)
    if _meta_graph_hint(data, as_text):
        return GraphDefError(_META_GRAPH_MSG % source)
    return None


def top_level_unknown(message):
    try:
        from google.protobuf import unknown_fields  # pylint: disable=import-outside-toplevel
        return len(unknown_fields.UnknownFieldSet(message)) > 0
    except (ImportError, TypeError, AttributeError):  # pragma: no cover
        return False


def check_unknown_fields(data, source):
    """Raises if the binary GraphDef `data` holds fields that a GraphDef,
    NodeDef, AttrValue... does not have, at any depth, naming the node.

    The check is `graph_override.frozen.graphdef.wire.has_unknown_fields` (one parse
    in C). Where protobuf cannot list unknown fields, lengths are compared
    instead: dropping unknown fields shortens the serialization only if
    there were some. Only when something is found is the file parsed again,
    node by node, to name the culprit.
    """
    try:
        found = has_unknown_fields(data)
    except ImportError:  # pragma: no cover - protobuf without unknown_fields
        found = None
    if found is False:
        return
    original = graph_pb2.GraphDef.FromString(data)
    if found is None:
        size = len(original.SerializeToString())
        original.DiscardUnknownFields()
        if len(original.SerializeToString()) == size:
            return
        original = graph_pb2.GraphDef.FromString(data)
    for node in original.node:
        size = len(node.SerializeToString())
        node.DiscardUnknownFields()
        if len(node.SerializeToString()) != size:
            raise GraphDefError(
                "%s: node %r (op %s) holds fields that a NodeDef (or its attr "
                "values) does not have. The file is damaged, or not a GraphDef "
                "written by TensorFlow; re-export the graph." % (
                    source, node.name, node.op))
    raise GraphDefError(
        "%s: the GraphDef's versions or function library hold fields that a "
        "GraphDef does not have. The file is damaged, or not a GraphDef "
        "written by TensorFlow; re-export the graph." % source)


_TEXT_START = re.compile(rb"\s*(?:#[^\n]*\n\s*)*[A-Za-z_\[{]")
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def looks_like_text(data):
    """True if `data` starts like a text-format message: a field name (or a
    comment) and no control bytes in its first 4 KB. Binary GraphDefs start
    with a field tag and a length, and hold control bytes almost at once."""
    head = data[:4096]
    return (_TEXT_START.match(head) is not None
            and _CONTROL_BYTES.search(head) is None)


def format_order(data, source, text):
    """Formats to try, the content's guess first; and a note for messages
    when the content and the file name disagree."""
    named_text = str(source).lower().endswith(TEXT_SUFFIXES)
    if text is not None:
        return (text,), ""
    as_text = looks_like_text(data)
    note = ""
    if as_text != named_text:
        note = (" (the content looks %s although the name says %s; both "
                "formats were tried)" % ("like text" if as_text else "binary",
                                         "text" if named_text else "binary"))
    return (as_text, not as_text), note
