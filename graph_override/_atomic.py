"""Writing a file so that it is either wholly replaced or not touched at all.

The data goes to a temporary file in the target's own folder (so the final
rename stays on one file system), is flushed and fsynced, read back and
optionally checked, and only then renamed over the target with `os.replace`,
which is atomic on POSIX and Windows. On any failure, the temporary file is
removed and the target is left as it was.
"""

import os
import tempfile

__all__ = ["atomic_write"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path, data, *, verify=None, keep_mode=True):
    """Atomically replaces (or creates) `path` with the bytes `data`.

    Args:
      path: the target file; its folder must exist.
      data: bytes to write.
      verify: optional callable run on the bytes read back from the temporary
        file before the rename; it raises to abort (the target is untouched).
      keep_mode: give the new file the permission bits of the file it
        replaces; otherwise (and for a new file) the bits open() would give,
        0666 less the umask.

    Raises:
      OSError: the folder is missing or not writable, or the disk is full.
      Whatever `verify` raises, or IOError if the read-back bytes differ.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if keep_mode and os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    else:
        mode = 0o666 & ~_umask()  # what open() would give a new file
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with open(tmp, "rb") as f:
            back = f.read()
        if back != data:
            raise IOError("%s: the temporary file %s did not read back as written; "
                          "nothing was replaced" % (path, tmp))
        if verify is not None:
            verify(back)
        os.chmod(tmp, mode)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
