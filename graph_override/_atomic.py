"""Writing a file so that it is either wholly written or not touched at all.

The data goes to a temporary file in the target's own folder (so the final
step stays on one file system), is flushed and fsynced, read back and
optionally checked, and only then becomes the target:

* replacing (the default): `os.replace`, atomic on POSIX and Windows; a
  reader sees the old file or the new one, never a mix;
* exclusive (``exclusive=True``): `os.link` of the temporary file to the
  target, which fails with EEXIST if the target exists, also when it
  appeared after any earlier check (another process writing the same
  path). Of two writers racing for one new file, exactly one wins; the
  other gets `FileExistsError` and the winner's file is untouched.

On any failure, also KeyboardInterrupt, the temporary file is removed and the
target is left as it was. A process killed outright (SIGKILL, power loss)
cannot clean up; it leaves only a hidden ``.NAME.PID.*.tmp`` file, never a
partial target, and the next write to the same target removes such files of
processes that no longer run.
"""

import errno
import os
import re
import tempfile

__all__ = ["atomic_write"]

_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
             getattr(errno, "ENOTSUP", errno.EOPNOTSUPP))


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_prefix(path):
    return ".%s.%d." % (os.path.basename(path), os.getpid())


def _pid_running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process, or no way to tell
    return True


def _remove_stale_temporaries(path, folder):
    """Removes temporary files that killed writers of `path` left behind."""
    pattern = re.compile(r"\.%s\.(\d+)\.[^.]+\.tmp\Z" % re.escape(os.path.basename(path)))
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = pattern.match(name)
        if match and int(match.group(1)) != os.getpid() and not _pid_running(
                int(match.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def _fsync_folder(folder):
    """Makes the new directory entry durable (POSIX; a no-op elsewhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _link_exclusive(tmp, path):
    """Makes `tmp` the new file `path` (and removes the name `tmp`), failing
    if `path` exists."""
    try:
        os.link(tmp, path)
        os.unlink(tmp)
        return
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in _NO_LINKS:
            raise
    # A file system without hard links: claim the name with O_EXCL, then
    # move the finished file over the (empty) claim.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    os.replace(tmp, path)


def atomic_write(path, data, *, verify=None, keep_mode=True, exclusive=False):
    """Atomically creates `path` with the bytes `data`, or replaces it.

    Args:
      path: the target file; its folder must exist.
      data: bytes to write.
      verify: optional callable run on the bytes read back from the temporary
        file before the final step; it raises to abort (the target is
        untouched).
      keep_mode: give the new file the permission bits of the file it
        replaces; otherwise (and for a new file) the bits open() would give,
        0666 less the umask.
      exclusive: create `path` only if it does not exist at the final step
        (see the module docstring); never replace it.

    Raises:
      FileExistsError: `exclusive` and `path` exists (nothing was changed).
      OSError: the folder is missing or not writable, or the disk is full.
      Whatever `verify` raises, or IOError if the read-back bytes differ.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if keep_mode and not exclusive and os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    else:
        mode = 0o666 & ~_umask()  # what open() would give a new file
    _remove_stale_temporaries(path, folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with open(tmp, "rb") as f:
            back = f.read()
        if back != data:
            raise IOError("%s: the data did not read back as written (disk or "
                          "file system error); nothing was written" % path)
        if verify is not None:
            verify(back)
        del back
        os.chmod(tmp, mode)  # mkstemp creates 0600
        if exclusive:
            _link_exclusive(tmp, path)
        else:
            os.replace(tmp, path)
        _fsync_folder(folder)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
