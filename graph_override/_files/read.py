"""Reading an input file that may be hostile: regular files only, bounded size.

A path can name a named pipe (which blocks a plain ``open`` until a writer
comes), a device (``/dev/zero`` never ends), a socket, or a symlink to any of
them, and a regular file can grow while it is read. `read_regular_file`
opens without blocking, checks what was opened on the descriptor itself (so
a path swapped after a check cannot slip through), and never reads more than
one byte past its limit. It imports nothing heavy: `graph_override.frozen`
(GraphDef files) and `graph_override.migrate` (Python sources, which never
import TensorFlow) both read through it.
"""

import os
import stat

from graph_override._files.atomic import file_kind

__all__ = ["GRAPHDEF_FILE", "graphdef_path_problem", "read_regular_file"]

GRAPHDEF_FILE = "a GraphDef file (.pb or .pbtxt)"


def read_regular_file(path, max_bytes, *, error, expected, too_large):
    """The bytes of the regular file `path`, reading at most `max_bytes` + 1.

    Example:
      >>> import os, tempfile
      >>> from graph_override._files.read import read_regular_file
      >>> path = os.path.join(tempfile.mkdtemp(), "fifo.py")
      >>> os.mkfifo(path)
      >>> read_regular_file(path, 10, error=ValueError, expected="a .py file",
      ...                   too_large="%s: too large")
      Traceback (most recent call last):
      ...
      ValueError: ...fifo.py: is a named pipe (FIFO), not a regular file; expected a .py file. Nothing was read.

    Args:
      path: the file (a symlink is followed; what it leads to must be a
        regular file).
      max_bytes: the most bytes accepted.
      error: the exception class raised, called with the message.
      expected: what the file should be, for messages ("a GraphDef file").
      too_large: the message when the file holds more than `max_bytes`,
        with ``%s`` for the path.

    Raises:
      error: naming `path`: it cannot be opened or read, is not a regular
        file (a FIFO, a device, a socket, a directory; nothing is read from
        it), or holds more than `max_bytes` (reading stops there).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise error("%s: cannot be read: %s" % (path, e.strerror or e)) from e
    with os.fdopen(fd, "rb", buffering=0) as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error("%s: is %s, not a regular file; expected %s. Nothing was "
                        "read." % (path, file_kind(mode), expected))
        limit = max_bytes + 1
        try:
            chunks = [f.read(min(os.fstat(fd).st_size, max_bytes) + 1)]
            total = len(chunks[0])
            while chunks[-1] and total < limit:  # the file grew meanwhile
                chunks.append(f.read(min(limit - total, 1 << 24)))
                total += len(chunks[-1])
        except OSError as e:
            raise error("%s: cannot be read: %s" % (path, e.strerror or e)) from e
    if total > max_bytes:
        raise error(too_large % path)
    chunks = [c for c in chunks if c]  # the last read is usually the empty one at the end
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def graphdef_path_problem(path):
    """None, or why `path` cannot be a GraphDef file, told from the file
    system alone (nothing is read, nothing heavy imported): missing, a
    directory (a SavedModel's, with what to do), not a regular file, or
    not readable. `graph_override.frozen.load` says the same; the command
    line says it before importing TensorFlow.

    Example:
      >>> from graph_override._files.read import graphdef_path_problem
      >>> graphdef_path_problem("/no/such/model.pb")
      '/no/such/model.pb: no such file; expected a GraphDef file (.pb or .pbtxt).'
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        hint = (" It holds saved_model.pb: it is a SavedModel directory; freeze "
                "it first (graph-override freeze DIR -o model.pb)."
                if os.path.exists(os.path.join(path, "saved_model.pb")) else "")
        return "%s: is a directory; expected %s.%s" % (path, GRAPHDEF_FILE, hint)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "%s: no such file; expected %s." % (path, GRAPHDEF_FILE)
    except OSError as e:
        return "%s: cannot be read: %s" % (path, e.strerror or e)
    if not stat.S_ISREG(mode):
        return "%s: is %s, not a regular file; expected %s. Nothing was read." % (
            path, file_kind(mode), GRAPHDEF_FILE)
    if not os.access(path, os.R_OK):
        return "%s: cannot be read: %s" % (path, os.strerror(13))
    return None
