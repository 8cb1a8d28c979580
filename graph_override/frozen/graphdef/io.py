"""Reading and writing GraphDef files (see `graph_override.frozen`).

Protobuf parses almost any bytes as *some* message: random bytes, a
SavedModel's saved_model.pb, a MetaGraphDef or a truncated file often come
back as a GraphDef with a few strange nodes, or none. `load` therefore reads
only regular files of at most `MAX_BYTES`, tells binary from text by the
content, refuses fields that a GraphDef does not have, and checks what it
parsed with `graph_override.frozen.graphdef.checks.validate` (what TensorFlow's
importer would refuse); every failure is a `GraphDefError` naming the file
the caller gave.

`save` writes deterministically serialized bytes (the same graph gives the
same file in every process) through `graph_override._files.atomic.atomic_write`:
exclusive creation unless told to overwrite, a re-check of the bytes read
back, and never a partial file.
"""

import os

from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

from graph_override._files import read
from graph_override._files.atomic import atomic_write, refuse_special
from graph_override.errors import GraphDefError, SpecialFileError
from graph_override.frozen.graphdef import formats
from graph_override.frozen.graphdef.checks import check_bytes, validate
from graph_override.frozen.graphdef.graph_index import read_index

__all__ = ["MAX_BYTES", "check_output_path", "load", "parse_graph_def",
           "read_regular_file", "save", "write_bytes"]

# Protobuf cannot serialize or parse a message of 2 GiB or more.
MAX_BYTES = 2 ** 31 - 1


def _parse_first(data, order):
    """(GraphDef, errors, the binary bytes or None) of the first format in
    `order` (True: text) that parses `data`; the GraphDef is None if none."""
    errors = []
    for as_text in order:
        try:
            if as_text:
                return text_format.Parse(data.decode("utf-8"), graph_pb2.GraphDef()), errors, None
            graph_def = graph_pb2.GraphDef.FromString(data)
        except Exception as e:  # pylint: disable=broad-except
            # Any parser failure (DecodeError, ParseError, UnicodeDecodeError,
            # RuntimeWarning-turned-error...) means "not this format".
            errors.append("%s: %s" % ("text" if as_text else "binary",
                                      str(e).splitlines()[0][:200] if str(e) else
                                      type(e).__name__))
            continue
        if not formats.top_level_unknown(graph_def):
            return graph_def, errors, data
        errors.append("binary: fields that a GraphDef does not have")
    return None, errors, None


def _check_parsed(graph_def, binary, source):
    """`validate` for a text GraphDef; for binary bytes the checks on the
    index of the serialized nodes."""
    if binary is None:
        validate(graph_def, source)
        return
    # One C-level pass lists names, op types and inputs and looks
    # for unknown fields in the nodes (see frozen.graphdef.wire).
    index = read_index(binary)
    if index is None or index.unknown is not False:
        formats.check_unknown_fields(binary, source)  # raises naming the node
    check_bytes(binary, source, graph_def=graph_def, index=index)


def parse_graph_def(data, source="<bytes>", *, text=None):
    """Parses and checks a binary or text GraphDef.

    The format is told from the content (a text-format file starts with a
    field name, a binary one with a field tag), not from the file name, so a
    binary GraphDef named ``.pbtxt`` loads; the other format is tried when
    the first fails.

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
      text: True for text format, False for binary, None to tell from the
        content.

    Returns:
      A checked `GraphDef`.

    Raises:
      GraphDefError: naming `source`: empty, not a GraphDef (random bytes, a
        text file, a SavedModel, a MetaGraphDef), truncated, holding unknown
        fields, or failing `validate`.
    """
    if not data:
        raise GraphDefError("%s: the file is empty; expected a GraphDef "
                            "(binary .pb or text .pbtxt)" % source)
    order, note = formats.format_order(data, source, text)
    graph_def, errors, binary = _parse_first(data, order)
    if graph_def is None:
        raise formats.wrong_kind(data, source, order[0]) or GraphDefError(
            "%s: not a GraphDef, or a truncated/damaged one (%s)%s. Expected a "
            "frozen graph written by graph_def.SerializeToString() (.pb) or "
            "text_format (.pbtxt)." % (source, "; ".join(errors), note))
    if not graph_def.node or os.path.basename(str(source)) == "saved_model.pb":
        wrong = formats.wrong_kind(data, source, binary is None)
        if wrong is not None:
            raise wrong
    if not graph_def.node:
        raise GraphDefError(
            "%s: parsed, but holds no nodes; expected a frozen GraphDef. Is it "
            "truncated, or a different kind of protobuf file?" % source)
    try:
        _check_parsed(graph_def, binary, source)
    except GraphDefError:
        wrong = formats.wrong_kind(data, source, binary is None)
        if wrong is None:
            raise
        raise wrong from None
    return graph_def


def read_regular_file(path):
    """The bytes of the regular file `path`, reading at most MAX_BYTES + 1.

    Opened without blocking and checked on the open descriptor, so a FIFO,
    a device (/dev/zero) or a socket is refused before anything is read
    (see `graph_override._files.read`).
    """
    return read.read_regular_file(
        path, MAX_BYTES, error=GraphDefError,
        expected="a GraphDef file (.pb or .pbtxt)",
        too_large="%%s: is over %d bytes, protobuf's 2 GB limit for one message, "
                  "so it cannot be a GraphDef; stopped reading there." % MAX_BYTES)


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
      path: the file: a regular file of at most `MAX_BYTES`, binary or text
        whatever its name (told from the content).

    Returns:
      A `GraphDef` that passes `validate`.

    Raises:
      GraphDefError: naming `path`: missing, a directory, a device or pipe,
        empty, too large, truncated, random bytes, a text file, a SavedModel
        or MetaGraphDef, unknown fields, or failing `validate`.
    """
    path = os.fspath(path)
    problem = read.graphdef_path_problem(path)
    if problem is not None:
        raise GraphDefError(problem)
    return parse_graph_def(read_regular_file(path), path)


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
      GraphDefError: `path` is a directory, a device, a named pipe, a socket
        or a symbolic link (refused even with `overwrite`: replacing
        /dev/null or a link to a terminal with a plain file is never what
        was meant), its folder is missing, it is `source` or exists, and
        `overwrite` is not given.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise GraphDefError("%s: is a directory; give a file name for the "
                            "GraphDef" % path)
    if not os.path.isdir(folder):
        raise GraphDefError("%s: the folder %s does not exist; create it first"
                            % (path, folder))
    try:
        refuse_special(path)
    except SpecialFileError as e:
        raise GraphDefError(str(e)) from None
    if source is not None and not overwrite and _same_file(source, path):
        raise GraphDefError("%s: is the input file; write to another path, or "
                            "pass overwrite=True (CLI: --force) to replace "
                            "the input" % path)
    if os.path.exists(path) and not overwrite:
        raise GraphDefError("%s: exists already; pass overwrite=True (CLI: "
                            "--force) to replace it" % path)
    return path, folder


def save(graph_def, path, *, overwrite=False, as_text=None, source=None):
    """Writes `graph_def` to `path` atomically, with reproducible bytes.

    The graph is serialized deterministically (attr maps in key order), so
    the same graph gives the same file in every process. The bytes go to a
    temporary file in the target folder (flushed with fsync), are read back,
    compared byte for byte, re-parsed and checked with `validate` (nothing
    TensorFlow would refuse is written), and only then become `path`: by a
    hard link that fails if `path` exists, even if it appeared meanwhile, or
    with `overwrite` by an atomic rename. On any failure the temporary file
    is removed, so `path` is either untouched or complete.

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
      GraphDefError: `path` exists or appears while writing (without
        `overwrite`), is a directory or the input, its folder is missing, the
        graph fails `validate`, or it reaches protobuf's 2 GB limit (checked
        before anything is written).
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("save(%s): expected a tf.compat.v1.GraphDef, got %s"
                            % (path, type(graph_def).__name__))
    path, _ = check_output_path(path, source=source, overwrite=overwrite)
    if as_text is None:
        as_text = path.lower().endswith(formats.TEXT_SUFFIXES)
    # Serialized in memory first (ByteSize() would cost a serialization of
    # its own): nothing touches the disk before the size is known.
    # Deterministic: map fields (NodeDef.attr) in key order, not in the
    # order of a hash table seeded per process, so the same graph gives the
    # same bytes in every run.
    try:
        data = graph_def.SerializeToString(deterministic=True)
    except Exception as e:  # pylint: disable=broad-except
        raise GraphDefError("%s: the graph cannot be serialized (%s); nothing was "
                            "written. Graphs over protobuf's 2 GB limit cannot be "
                            "stored as one GraphDef." % (path, e)) from e
    if as_text and len(data) <= MAX_BYTES:
        data = text_format.MessageToString(graph_def).encode("utf-8")  # keys sorted
    where = "%s (nothing was written)" % path

    def check(back):
        # The bytes read back are re-parsed and must pass every check that
        # load() makes: nothing that TensorFlow would refuse is written.
        if as_text:
            try:
                written = text_format.Parse(back.decode("utf-8"), graph_pb2.GraphDef())
            except Exception as e:  # pylint: disable=broad-except
                raise GraphDefError("%s: the text does not re-parse: %s" % (where, e)) from e
            validate(written, where)
        else:
            validate(graph_def, where, data=back)

    write_bytes(data, path, overwrite=overwrite, verify=check)


def write_bytes(data, path, *, overwrite=False, verify=None):
    """Writes the GraphDef bytes `data` to `path` as `save` does: through a
    temporary file, read back and passed to `verify` (which raises to
    abort), then linked into place (or renamed, with `overwrite`).

    Raises:
      GraphDefError: `data` is over protobuf's 2 GB limit (`MAX_BYTES`,
        checked before anything is written), `path` appeared while writing
        (without `overwrite`), or whatever `verify` raises; OSError: the
        folder is not writable or the disk is full. In every case nothing
        was written.
    """
    if len(data) > MAX_BYTES:  # the one 2 GB refusal of every write
        raise GraphDefError(
            "%s: the graph is %d bytes, over protobuf's limit of %d (2 GB); "
            "nothing was written. Keep large weights outside the GraphDef "
            "(a SavedModel stores them as variables)." % (path, len(data), MAX_BYTES))
    try:
        atomic_write(path, data, verify=verify, keep_mode=False, exclusive=not overwrite)
    except FileExistsError:
        raise GraphDefError(
            "%s: appeared while the graph was being written (another process "
            "writing the same file?); it was left as it is and nothing was "
            "written. Pass overwrite=True (CLI: --force) to replace it."
            % path) from None
