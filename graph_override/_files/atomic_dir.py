"""Replacing a directory (a SavedModel) in one step, and cleaning up after
writers that were killed.

A new directory is written into a hidden temporary sibling,
``.NAME.PID.*.tmp`` (see `graph_override._files.atomic.temp_prefix`), and then:

* for a new target, renamed into place with ``RENAME_NOREPLACE`` where the
  system has it (two writers racing for one new name: the loser gets
  FileExistsError and the winner's directory stays);
* for an existing target, swapped with it by ``renameat2(RENAME_EXCHANGE)``
  (Linux): the name always holds the old or the new directory, never
  nothing; the old one, now under the temporary name, is then deleted.
  Where the exchange is not supported, the old directory is renamed aside to
  a hidden ``.NAME.PID.*.old`` first, the new one into place, and the old one
  deleted.

A writer killed outright cannot clean up. `recover`, run before the next
write of the same target, removes the temporary directories of processes
that no longer run and, when such a process was killed between the two
renames (the target is missing, its previous content in ``.old``), puts the
previous directory back, saying so.
"""

import errno
import os
import shutil
import tempfile

from graph_override._files.atomic import rename_exchange, rename_noreplace, stale_names, temp_prefix

__all__ = ["make_temporary", "recover", "replace"]


def make_temporary(path):
    """A new, empty, hidden temporary directory beside `path`."""
    return tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(path)),
                            prefix=temp_prefix(path), suffix=".tmp")


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def recover(path):
    """Cleans up what killed writers of `path` left; returns what it did,
    one sentence each, for the user to read.

    A previous directory left aside (``.NAME.PID.*.old``) by a dead process
    comes back to `path` if `path` is missing, and is deleted if `path` holds
    the finished new one; temporary directories of dead processes are
    deleted. Temporaries of running processes are never touched.
    """
    path = os.path.abspath(path)
    folder, notes = os.path.dirname(path), []
    for name, pid in stale_names(path, ".old") or ():
        aside = os.path.join(folder, name)
        if not os.path.lexists(path):
            os.rename(aside, path)
            notes.append("%s: restored the previous content, which process %d left in "
                         "%s when it was killed while replacing it" % (path, pid, name))
        else:
            _remove(aside)
    for name, _ in stale_names(path, ".tmp") or ():
        _remove(os.path.join(folder, name))
    return notes


def replace(tmp, path, overwrite=True):
    """Makes the directory `tmp` the directory `path`: swapped with an
    existing `path` (see the module docstring), or renamed to a new one.

    Raises:
      FileExistsError: `path` exists and `overwrite` is False, also when it
        appeared after any earlier check (another writer): nothing was
        changed, `tmp` is left.
    """
    if not overwrite or not os.path.lexists(path):
        if not rename_noreplace(tmp, path):
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "exists already", path)
            os.rename(tmp, path)
        return
    if rename_exchange(tmp, path):
        _remove(tmp)  # the previous directory, now under the temporary name
        return
    aside = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=temp_prefix(path, ".old"),
                             suffix=".old")
    os.rmdir(aside)
    os.rename(path, aside)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(aside, path)
        raise
    _remove(aside)
