"""Writing several files all or nothing (the maps and the picture of
`graph-override explain`).

Each file is written with `graph_override._files.atomic.atomic_write`, so each is
whole or untouched; this module adds that a failure on one undoes those
written before it: a file this run created is removed, a file it replaced
gets its previous content back. The previous content is kept, until every
file is written, as a hidden hard link ``.NAME.PID.*.tmp`` beside the file
(no copy, no extra space: putting it back is a rename, which works on a
full disk), or, on a file system without hard links, as bytes in memory. A
process killed outright leaves the files it had written and such a link,
which the next write of the same target removes (`atomic.stale_names`).
"""

import os
import secrets

from graph_override._files import atomic

__all__ = ["write_all"]


def _keep(path):
    """What puts `path`'s present file back: a hidden hard link to it, or
    (bytes, mode) where hard links are not supported; None for no file."""
    atomic.refuse_special(path)
    if not os.path.lexists(path):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(100):
        aside = os.path.join(folder, "%s%s.tmp" % (atomic.temp_prefix(path),
                                                   secrets.token_hex(4)))
        try:
            os.link(path, aside)
            return aside
        except FileExistsError:
            continue  # the name is taken: another random one
        except FileNotFoundError:
            return None  # gone meanwhile
        except OSError as e:
            if e.errno not in atomic.NO_LINKS:
                raise atomic.naming(e, path) from None
            break
    with open(path, "rb") as f:
        return f.read(), os.stat(path).st_mode & 0o7777


def _discard(kept):
    if isinstance(kept, str):
        try:
            os.unlink(kept)
        except OSError:
            pass


def _put_back(path, kept):
    """Undoes this run's write of `path`; an OSError if it cannot."""
    if kept is None:
        os.unlink(path)
    elif isinstance(kept, str):
        os.replace(kept, path)
    else:
        data, mode = kept
        atomic.atomic_write(path, data)
        os.chmod(path, mode)


def write_all(files, *, replace=False, keep_mode=True):
    """Writes every file of `files`, or none: each with `atomic.atomic_write`
    in turn; if one fails (also on KeyboardInterrupt), the ones written
    before it are put back as they were before the error is raised.

    Args:
      files: (path, bytes) pairs, in the order to write them.
      replace: replace files that exist (CLI: --force); otherwise an
        existing file is a FileExistsError. A file that appears while the
        others are written is never replaced (FileExistsError).
      keep_mode: as in `atomic_write`.

    Raises:
      The error of the file that failed (an OSError's filename is that
      file's path); every file is then as it was before the call. If one
      written before cannot be put back, an OSError naming it (the first
      such), whose ``__cause__`` is that error.

    Example:
      >>> import os, tempfile
      >>> from graph_override._files import atomic, atomic_group
      >>> folder = tempfile.mkdtemp()
      >>> a, b = os.path.join(folder, "a.npy"), os.path.join(folder, "b.png")
      >>> atomic.atomic_write(b, b"before")
      >>> atomic_group.write_all([(a, b"new a"), (b, b"new b")])
      Traceback (most recent call last):
      ...
      FileExistsError: [Errno 17] File exists: '...b.png'
      >>> os.path.exists(a), open(b, "rb").read()
      (False, b'before')
      >>> atomic_group.write_all([(a, b"new a"), (b, b"new b")], replace=True)
      >>> open(a, "rb").read(), open(b, "rb").read()
      (b'new a', b'new b')
    """
    done = []
    try:
        for path, data in files:
            kept = _keep(path) if replace else None
            try:
                atomic.atomic_write(path, data, keep_mode=keep_mode,
                                     exclusive=kept is None)
            except BaseException as e:
                _discard(kept)
                if isinstance(e, OSError) and e.filename is None:
                    e.filename = path
                raise
            done.append((path, kept))
    except BaseException as e:
        stuck = []
        for path, kept in reversed(done):
            try:
                _put_back(path, kept)
            except OSError as undo:
                stuck.append((path, undo))
        if stuck:
            path, undo = stuck[-1]
            raise OSError(undo.errno, "written before %s failed (%s), and could not be put "
                          "back as it was: %s" % (getattr(e, "filename", None) or "the next file",
                                                  e, undo.strerror or undo), path) from e
        raise
    for _, kept in done:
        _discard(kept)
