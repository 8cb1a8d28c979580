"""Writing a file as a stream, atomically: whole or not there.

`AtomicStream` is a write-only file object for a file too large to hold in
memory (a shard of attribution maps): the bytes go, as they come, to a
hidden temporary sibling of the target (``.NAME.PID.*.tmp``, as
`atomic.write_temporary` names it, so that the next write of the same
target removes what a killed writer left), and are hashed (sha256) on the
way. `commit` flushes and fsyncs the temporary and moves it into place
(`atomic.move_into_place`: replacing a regular file, or with
``exclusive=True`` only where no file is); `discard`, or leaving a ``with``
block by an exception, removes it, the target untouched.

Unlike `atomic.atomic_write`, the bytes are not read back before the move:
they are not held in memory to compare with. `commit` returns their sha256
instead, which the caller records (a shard's manifest entry) and a later
reader checks the file against (a resumed run checks every shard it keeps).

It has ``write``, ``flush`` and ``tell`` but no ``seek``: `zipfile` then
writes its members as a stream too (sizes and CRC in a data descriptor
after each member's data), so the hash covers every byte in file order.

Example:
  >>> import os, tempfile, hashlib
  >>> from graph_override._files.atomic_stream import AtomicStream
  >>> path = os.path.join(tempfile.mkdtemp(), "big.bin")
  >>> with AtomicStream(path, exclusive=True) as f:
  ...     _ = f.write(b"part one, ")
  ...     _ = f.write(b"part two")
  ...     digest = f.commit()
  >>> open(path, "rb").read(), digest == hashlib.sha256(b"part one, part two").hexdigest()
  (b'part one, part two', True)
"""

import hashlib
import os
import tempfile

from graph_override._files import atomic

__all__ = ["AtomicStream"]


class AtomicStream:
    """A new file `path` written as a stream (see the module docstring).

    Args:
      path: the target; its folder must exist.
      exclusive: create `path` only if it does not exist when `commit`
        moves the file into place (FileExistsError, nothing changed);
        otherwise replace a regular file (a special one is refused).
    """

    def __init__(self, path, *, exclusive=False):
        self.path = path
        self._exclusive = exclusive
        folder = os.path.dirname(os.path.abspath(path))
        atomic.refuse_special(path)
        self._mode = 0o666 & ~atomic._umask()  # pylint: disable=protected-access
        atomic._remove_stale_temporaries(path, folder)  # pylint: disable=protected-access
        try:
            fd, self._tmp = tempfile.mkstemp(dir=folder, prefix=atomic.temp_prefix(path),
                                             suffix=".tmp")
        except OSError as e:
            raise atomic.naming(e, path) from None
        self._file = os.fdopen(fd, "wb")
        self._discarded = False
        self._digest = hashlib.sha256()
        self._size = 0

    def write(self, data):
        """Appends `data` (bytes or any buffer); returns its length in bytes.
        After `discard`, what is written goes nowhere (a writer on top, such
        as a zipfile, may still close)."""
        view = memoryview(data).cast("B")
        if self._discarded:
            return len(view)
        self._digest.update(view)
        self._file.write(view)
        self._size += len(view)
        return len(view)

    def tell(self):
        """The bytes written so far."""
        return self._size

    def flush(self):
        self._file.flush()

    def commit(self):
        """Makes the bytes written the file `path` (see the module
        docstring); returns their sha256 (hex)."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.chmod(self._tmp, self._mode)  # mkstemp creates 0600
            atomic.move_into_place(self._tmp, self.path, exclusive=self._exclusive)
        except BaseException as e:
            self.discard()
            if isinstance(e, OSError) and e.filename in (None, self._tmp):
                raise atomic.naming(e, self.path) from None
            raise
        return self._digest.hexdigest()

    def discard(self):
        """Removes the temporary file; the target is left as it was."""
        self._discarded = True
        self._file.close()
        try:
            os.unlink(self._tmp)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None:
            self.discard()
        return False
