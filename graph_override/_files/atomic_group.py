"""Writing several files all or nothing (the maps and the picture of
`graph-override explain`), also when the writer is killed.

`write_all` writes in three steps:

1. every file's new content goes to a hidden temporary sibling,
   ``.NAME.PID.*.new``, flushed, fsynced and read back
   (`atomic.write_temporary`); a failure here (a full disk) leaves every
   target untouched;
2. a journal, ``.FIRST.PID.*.group`` beside the first file, written
   atomically, lists each target and its temporary: from then on the group
   is committed;
3. each temporary is renamed onto its target (`atomic.move_into_place`),
   then the journal is removed.

A failure in step 3 (a file that appeared meanwhile without ``replace``, a
target that became a symbolic link) undoes the files already renamed: a
file this run created is removed, a file it replaced gets its previous
content back. The previous content is kept, until every file is in place,
as a hidden hard link ``.NAME.PID.*.tmp`` beside the file (no copy, no extra
space: putting it back is a rename, which works on a full disk), or, on a
file system without hard links, as bytes in memory.

A process killed outright (SIGKILL, power loss) cannot clean up. Killed in
step 1 or 2, it leaves the targets as they were (both old), plus
temporaries; killed in step 3, some targets are new and the others old
until `recover`, run at the start of the next `write_all` of the same
first file, finishes the renames the journal lists (both new) and says so.
`recover` also removes what dead writers left: temporaries, kept links and
journals. Temporaries of running processes are never touched.
"""

import json
import os
import secrets

from graph_override._files import atomic

__all__ = ["recover", "write_all"]

_NEW, _JOURNAL = ".new", ".group"


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


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _discard(kept):
    if isinstance(kept, str):
        _unlink(kept)


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


def _write_journal(members):
    """Commits the group: the journal of `members` ((target, temporary,
    exclusive) triples, absolute paths) beside the first target; its path."""
    first = members[0][0]
    folder = os.path.dirname(first)
    text = json.dumps({"pid": os.getpid(), "files": [
        {"target": target, "new": tmp, "exclusive": exclusive}
        for target, tmp, exclusive in members]})
    for _ in range(100):
        journal = os.path.join(folder, "%s%s%s" % (
            atomic.temp_prefix(first, _JOURNAL), secrets.token_hex(4), _JOURNAL))
        try:
            atomic.atomic_write(journal, text.encode("utf-8"), exclusive=True)
            return journal
        except FileExistsError:
            continue
    raise FileExistsError("%s: no free name for the journal of the group" % first)


def _finish(journal):
    """Finishes the group a dead writer committed in `journal` (renames its
    temporaries still there onto their targets); a note, or None."""
    try:
        with open(journal, "rb") as f:
            record = json.loads(f.read().decode("utf-8"))
        members = [(m["target"], m["new"], bool(m["exclusive"])) for m in record["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        _unlink(journal)  # a journal cut short was never committed
        return None
    finished, kept = [], []
    for target, tmp, exclusive in members:
        if not os.path.exists(tmp):
            continue  # renamed before the kill
        try:
            atomic.move_into_place(tmp, target, exclusive=exclusive)
            finished.append(target)
        except OSError:
            _unlink(tmp)
            kept.append(target)
    _unlink(journal)
    if not finished and not kept:
        return None
    return "%s: finished writing %s, which process %s was writing together when it was " \
           "killed%s" % (members[0][0], " and ".join(t for t, _, _ in members),
                         record.get("pid", "?"), "" if not kept else
                         "; %s appeared meanwhile and was kept" % ", ".join(kept))


def recover(paths):
    """Cleans up what killed writers of `paths` left; returns what it did,
    one sentence each, for the user to read.

    A journal of a dead writer (beside the first of its files) has its
    renames finished, so its files are all new; then the temporaries and
    kept links of dead writers of each path are removed.
    """
    notes = []
    for path in paths:
        path = os.path.abspath(path)
        folder = os.path.dirname(path)
        for name, _ in atomic.stale_names(path, _JOURNAL) or ():
            note = _finish(os.path.join(folder, name))
            if note is not None:
                notes.append(note)
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        for suffix in (_NEW, ".tmp"):
            for name, _ in atomic.stale_names(path, suffix) or ():
                _unlink(os.path.join(folder, name))
    return notes


def _write_temporaries(files, keep_mode):
    temps = []
    try:
        for path, data in files:
            temps.append(atomic.write_temporary(path, data, keep_mode=keep_mode,
                                                 suffix=_NEW))
    except BaseException as e:
        for tmp in temps:
            _unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = files[len(temps)][0]
        raise
    return temps


def _undo(done, error):
    """Puts back the files of `done` ((path, kept) pairs) after `error`;
    raises an OSError naming the first that cannot be put back."""
    stuck = []
    for path, kept in reversed(done):
        try:
            _put_back(path, kept)
        except OSError as undo:
            stuck.append((path, undo))
    if stuck:
        path, undo = stuck[-1]
        raise OSError(undo.errno, "written before %s failed (%s), and could not be put "
                      "back as it was: %s" % (getattr(error, "filename", None)
                                              or "the next file", error,
                                              undo.strerror or undo), path) from error


def write_all(files, *, replace=False, keep_mode=True):
    """Writes every file of `files`, or none (see the module docstring):
    `recover` first, then each file's temporary, the journal, the renames.
    If a rename fails (also on KeyboardInterrupt), the files renamed before
    it are put back as they were before the error is raised.

    Args:
      files: (path, bytes) pairs; the journal goes beside the first.
      replace: replace files that exist (CLI: --force); otherwise an
        existing file is a FileExistsError. A file that appears while the
        others are written is never replaced (FileExistsError).
      keep_mode: as in `atomic_write`.

    Returns:
      What `recover` did, one sentence each (usually nothing).

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
      []
      >>> open(a, "rb").read(), open(b, "rb").read()
      (b'new a', b'new b')
    """
    files = [(os.path.abspath(path), data) for path, data in files]
    notes = recover([path for path, _ in files])
    temps = _write_temporaries(files, keep_mode and replace)
    done, journal = [], None
    try:
        kept = []
        for path, _ in files:
            kept.append(_keep(path) if replace else None)
        journal = _write_journal([(path, tmp, not replace)
                                  for (path, _), tmp in zip(files, temps)])
        for (path, _), tmp, was in zip(files, temps, kept):
            try:
                atomic.move_into_place(tmp, path, exclusive=not replace)
            except OSError as e:
                if e.filename in (None, tmp):
                    e.filename = path
                raise
            done.append((path, was))
    except BaseException as e:
        if journal is not None:
            _unlink(journal)  # first: a kill from here on leaves no half-undone group
        for tmp in temps:
            _unlink(tmp)
        for was in kept[len(done):]:
            _discard(was)
        _undo(done, e)
        raise
    _unlink(journal)
    for _, was in done:
        _discard(was)
    return notes
