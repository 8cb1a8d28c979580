"""Writing a file so that it is either wholly written or not touched at all.

The data goes to a temporary file in the target's own folder (so the final
step stays on one file system), is flushed and fsynced, read back and
optionally checked, and only then becomes the target:

* replacing (the default): `os.replace`, atomic on POSIX and Windows; a
  reader sees the old file or the new one, never a mix. Only a regular file
  is replaced: a device (/dev/null), a named pipe, a socket or a symbolic
  link at the target is refused (`SpecialFileError`), since replacing it
  would swap a system's node or a link for a plain file;
* exclusive (``exclusive=True``): the temporary file is renamed to the
  target with ``renameat2(RENAME_NOREPLACE)`` (Linux), which fails with
  EEXIST if the target exists, also when it appeared after any earlier
  check (another process writing the same path); where that is not
  supported, `os.link` of the temporary file does the same. Of two writers
  racing for one new file, exactly one wins; the other gets
  `FileExistsError` and the winner's file is untouched. Only on a file
  system with neither is the name claimed with O_EXCL just before the
  finished file replaces the (empty) claim.

On any failure, also KeyboardInterrupt, the temporary file is removed and the
target is left as it was. A process killed outright (SIGKILL, power loss)
cannot clean up; it leaves only a hidden ``.NAME.PID.*.tmp`` file, never a
partial target, and the next write to the same target removes such files of
processes that no longer run. The temporary name shortens NAME so that it
stays within the file system's limit on a name (255 bytes) whatever the
target's own length.
"""

import ctypes
import errno
import os
import re
import stat
import sys
import tempfile

from graph_override.errors import SpecialFileError

__all__ = ["NO_LINKS", "atomic_write", "file_kind", "move_into_place", "naming",
           "refuse_special", "rename_exchange", "rename_noreplace", "stale_names",
           "temp_prefix", "write_temporary"]

# What os.link answers where the file system has no hard links.
NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
            getattr(errno, "ENOTSUP", errno.EOPNOTSUPP))
# renameat2 answers these where the kernel or the file system lacks a flag.
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP,
                getattr(errno, "ENOTSUP", errno.EOPNOTSUPP))
_RENAME_NOREPLACE, _RENAME_EXCHANGE, _AT_FDCWD = 1, 2, -100
_NAME_MAX = 255
_RANDOM = 8  # the characters tempfile adds
# Room kept for the pid whatever this process's own: a pid fits in 10 digits
# (2**31 - 1), so NAME is cut the same in every process and a crashed
# writer's temporary, of a longer or shorter pid, is found again.
_PID_DIGITS = 10


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temp_prefix(path, suffix=".tmp"):
    """The prefix of a hidden temporary sibling of `path`: ``.NAME.PID.``,
    NAME cut short enough that prefix, tempfile's random part and `suffix`
    fit in one file name (255 bytes) whatever the pid's length. The pid and
    the random part keep it unique; `stale_names` finds it again."""
    tail = ".%d." % os.getpid()
    budget = _NAME_MAX - 1 - (_PID_DIGITS + 2) - _RANDOM - len(suffix)
    name = os.path.basename(path)
    while len(os.fsencode(name)) > budget:
        name = name[:-1]
    return "." + name + tail


def stale_names(path, suffix=".tmp", names=None):
    """[(name, pid)] of hidden temporaries of `path` (see `temp_prefix`)
    left in its folder by processes that no longer run, or None if the
    folder cannot be listed."""
    folder = os.path.dirname(os.path.abspath(path))
    short = temp_prefix(path, suffix)[1:].rsplit(".", 2)[0]
    pattern = re.compile(r"\.%s\.(\d+)\.[^.]+%s\Z" % (re.escape(short), re.escape(suffix)))
    try:
        names = os.listdir(folder) if names is None else names
    except OSError:
        return None
    found = []
    for name in names:
        match = pattern.match(name)
        if match and int(match.group(1)) != os.getpid() and not _pid_running(
                int(match.group(1))):
            found.append((name, int(match.group(1))))
    return found


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
    for name, _ in stale_names(path) or ():
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def file_kind(mode):
    """What a file of `mode` (st_mode) is, in words ("a named pipe (FIFO)")."""
    return ("a regular file" if stat.S_ISREG(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file")


def refuse_special(path):
    """Raises `SpecialFileError` if `path` exists and is not a regular file
    (a symbolic link included, whatever it points to).

    Example:
      >>> from graph_override._files import atomic
      >>> atomic.refuse_special("/dev/null")
      Traceback (most recent call last):
      ...
      graph_override.errors.SpecialFileError: /dev/null: is a character device, not a regular file; refusing to replace it (even with --force). Write to a regular file's path.
    """
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode):
        return
    what = file_kind(mode)
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        try:
            pointed = file_kind(os.stat(path).st_mode)
        except OSError:
            pointed = "nothing (a dangling link)"
        what = "a symbolic link to %s (%s)" % (target, pointed)
    raise SpecialFileError(
        "%s: is %s, not a regular file; refusing to replace it (even with --force). "
        "Write to a regular file's path." % (path, what))


def _libc_renameat2():
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a libc without it (glibc < 2.28, musl < 1.2.?)
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    return function


_renameat2 = _libc_renameat2()


def _rename2(src, dst, flags):
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), dst)  # EEXIST: a FileExistsError


def rename_noreplace(src, dst):
    """Renames `src` to `dst` unless `dst` exists (FileExistsError), in one
    atomic step. Returns False, doing nothing, where the system cannot."""
    return _rename2(src, dst, _RENAME_NOREPLACE)


def rename_exchange(a, b):
    """Swaps the names `a` and `b` (both must exist) in one atomic step.
    Returns False, doing nothing, where the system cannot."""
    return _rename2(a, b, _RENAME_EXCHANGE)


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


def _move_exclusive(tmp, path):
    """Makes `tmp` the new file `path` (and removes the name `tmp`), failing
    with FileExistsError if `path` exists; `path` never shows a partial
    file, except on a file system with neither renameat2's RENAME_NOREPLACE
    nor hard links (see the module docstring)."""
    if rename_noreplace(tmp, path):
        return
    if os.name == "nt":  # os.rename refuses an existing target there
        os.rename(tmp, path)
        return
    try:
        os.link(tmp, path)
        os.unlink(tmp)
        return
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in NO_LINKS:
            raise
    # The last resort: claim the name with O_EXCL, then move the finished
    # file over the (empty) claim at once.
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
      SpecialFileError: `path` is a device, a named pipe, a socket or a
        symbolic link (nothing was changed).
      OSError: the folder is missing or not writable, or the disk is full.
      Whatever `verify` raises, or IOError if the read-back bytes differ.
    """
    tmp = write_temporary(path, data, verify=verify, keep_mode=keep_mode and not exclusive)
    try:
        move_into_place(tmp, path, exclusive=exclusive)
    except BaseException as e:
        named = _discard(tmp, path, e)
        if named is not None:
            raise named from None
        raise


def _discard(tmp, path, error):
    """Removes the temporary `tmp` after `error`; returns the error to raise
    instead, naming `path`, for an OSError about no file or about `tmp`
    (None: raise `error` as it is)."""
    try:
        os.unlink(tmp)
    except OSError:
        pass
    if isinstance(error, OSError) and error.filename in (None, tmp):
        return naming(error, path)
    return None


def write_temporary(path, data, *, verify=None, keep_mode=True, suffix=".tmp"):
    """The name of a new hidden temporary sibling of `path` (see
    `temp_prefix`; ending in `suffix`) that holds the bytes `data`, flushed,
    fsynced, read back and checked (`verify` as in `atomic_write`), with the
    mode `path` is to get (its own with `keep_mode`, if it exists). Stale
    ``.tmp`` temporaries of `path` are removed first. On failure nothing is
    left. `move_into_place` makes it `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    refuse_special(path)
    if keep_mode and os.path.exists(path):
        mode = os.stat(path).st_mode & 0o7777
    else:
        mode = 0o666 & ~_umask()  # what open() would give a new file
    _remove_stale_temporaries(path, folder)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=temp_prefix(path, suffix),
                                   suffix=suffix)
    except OSError as e:
        raise naming(e, path) from None
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
    except BaseException as e:
        named = _discard(tmp, path, e)
        if named is not None:
            raise named from None
        raise
    return tmp


def move_into_place(tmp, path, *, exclusive=False):
    """Makes the finished temporary file `tmp` the file `path` in one step:
    replacing a regular file (a special one is refused), or with `exclusive`
    only if `path` does not exist (FileExistsError); then fsyncs the
    folder. On failure `tmp` is left for the caller."""
    if exclusive:
        _move_exclusive(tmp, path)
    else:
        refuse_special(path)  # again: it may have appeared meanwhile
        os.replace(tmp, path)
    _fsync_folder(os.path.dirname(os.path.abspath(path)))


def naming(error, path):
    """`error` (an OSError about a hidden temporary, or about no file) as
    the same error about `path`, the name the user gave: the temporary is
    gone by the time anyone reads the message."""
    if isinstance(error, (SpecialFileError, FileExistsError)) or not error.errno:
        return error
    return type(error)(error.errno, "%s; nothing was written" % (
        error.strerror or os.strerror(error.errno)), path)
