"""Reading Python sources for `migrate`: which files, and how.

`iter_python_files` walks folders for ``*.py`` files; `read_source` reads one
through `graph_override._files.read.read_regular_file` (regular files only, checked
on the opened descriptor, so a FIFO named ``x.py`` or a symlink to
``/dev/zero`` is refused before anything is read) with at most
`MAX_SOURCE_BYTES`, and decodes it as Python does. `as_paths` takes the
argument of `migrate_paths`: a single str is one path, never a sequence of
one-character paths (``"/abs/dir"`` would otherwise start with ``/``).
"""

import io
import os
import tokenize

from graph_override._files.read import read_regular_file
from graph_override.errors import SourceError

__all__ = ["MAX_SOURCE_BYTES", "as_paths", "iter_python_files", "read_source"]

# Hand-written Python files stay far below this (the standard library's
# largest is 230 kB); libcst needs about 250 times a file's size in memory.
MAX_SOURCE_BYTES = 2 << 20

_SKIP_DIRS = {"__pycache__", "node_modules"}


def iter_python_files(path):
    """The .py files under `path` (recursively, sorted; hidden and
    __pycache__ folders skipped, symlinked folders not followed), or `path`
    itself when it is a file.

    Raises:
      SourceError: `path` does not exist, or is a file not named *.py.
    """
    if os.path.isdir(path):
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                             and d not in _SKIP_DIRS)
            found.extend(os.path.join(root, f) for f in sorted(files)
                         if f.endswith(".py"))
        return found
    if not os.path.exists(path):
        raise SourceError("%s: no such file or directory; pass Python files or "
                          "folders to migrate." % path)
    if not path.endswith(".py"):
        raise SourceError("%s: not a Python file (expected a name ending in "
                          ".py, or a folder to walk)." % path)
    return [path]


def read_source(path):
    """(bytes, text, encoding) of the Python file `path`: a regular file of at
    most `MAX_SOURCE_BYTES`, decoded as Python does (PEP 263 cookie, BOM).

    Raises:
      SourceError: naming `path`: it cannot be opened, is not a regular file
        (a FIFO, a device, a socket: nothing is read), is over
        `MAX_SOURCE_BYTES` (reading stops there), or cannot be decoded.
    """
    raw = read_regular_file(
        path, MAX_SOURCE_BYTES, error=SourceError,
        expected="a Python source file",
        too_large="%%s: is over %d bytes, the most migrate reads from one Python "
                  "file (libcst needs about 250 times a file's size in memory); "
                  "it was not read further nor migrated. Files this large are "
                  "usually generated: migrate the hand-written code, or split "
                  "the file." % MAX_SOURCE_BYTES)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise SourceError("%s: cannot decode the file as Python source (%s); "
                          "nothing was migrated." % (path, e)) from None
    if encoding == "utf-8-sig":
        text = text.lstrip("\ufeff")
    return raw, text, encoding


def as_paths(given):
    """`given` as a list of str paths; one path (str, PathLike) is one path."""
    paths = [given] if isinstance(given, (str, bytes, os.PathLike)) else given
    try:
        paths = [os.fspath(p) for p in paths]
    except TypeError:  # not iterable, or holding something that is no path
        paths = None
    if paths is None or not all(isinstance(p, str) for p in paths):
        raise TypeError("migrate_paths(paths): expected a list of paths (str or "
                        "os.PathLike) or one such path, got %.100r; nothing was "
                        "read." % (given,))
    return paths
