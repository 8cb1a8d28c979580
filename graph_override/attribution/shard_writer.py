"""A shard's file written batch by batch, in a thread beside the model's.

`ShardFile` writes FOLDER/``shard-NNNNN.npz`` as its batches come: the
``maps`` member first, its ``.npy`` header saying the shard's rows, then
each batch's maps as they are (no copy of the shard in memory), then
``outputs``, ``targets`` and ``delta`` (a few numbers per example, kept
until the end). The members and their bytes are those of
``numpy.savez(maps=..., outputs=..., ...)`` of the joined batches; the zip
records each member's sizes and CRC after its data (a stream), which
``numpy.load`` reads as any ``.npz``. The file is an
`graph_override._files.atomic_stream.AtomicStream`: whole or not there,
created only where no file of its name is, its sha256 computed as it is
written.

`Writer` runs the writing in one thread of its own, in order, while the
next batches run through the model: the file's bytes, their CRC and sha256
(all of which let other threads run) and the fsync overlap the model's
calls instead of adding to them. At most `Writer.DEPTH` jobs wait, so the
memory stays that of a few batches. The first job that fails stops the
others; its error is raised in the caller's thread at its next `submit`
or at `close`.
"""

import queue
import threading
import zipfile

import numpy as np

from graph_override._files.atomic_stream import AtomicStream
from graph_override.errors import AttributionError

__all__ = ["ShardFile", "Writer"]

_SMALL = ("outputs", "targets", "delta")


class ShardFile:
    """The shard `path` of `rows` examples (see the module docstring)."""

    def __init__(self, path, rows):
        self.path = path
        self._rows = rows
        self._written = 0
        self._stream = AtomicStream(path, exclusive=True)
        self._zip = zipfile.ZipFile(self._stream, "w", zipfile.ZIP_STORED, allowZip64=True)
        self._maps = None
        self._example = None
        self._small = {name: [] for name in _SMALL}

    def add(self, result):
        """Appends the `Attribution` of the shard's next batch (on failure,
        the file is removed)."""
        try:
            self._add(result)
        except BaseException:
            self.discard()
            raise

    def _add(self, result):
        maps = np.ascontiguousarray(result.maps)
        if self._maps is None:
            self._example = (maps.dtype, maps.shape[1:])
            self._maps = self._zip.open("maps.npy", "w", force_zip64=True)
            np.lib.format.write_array_header_1_0(self._maps, {
                "descr": np.lib.format.dtype_to_descr(maps.dtype), "fortran_order": False,
                "shape": (self._rows,) + maps.shape[1:]})
        elif (maps.dtype, maps.shape[1:]) != self._example:
            raise AttributionError(
                "%s: a batch's maps are %s of shape %s, the shard's %s of %s" % (
                    self.path, maps.dtype, maps.shape[1:], *self._example))
        if self._written + len(maps) > self._rows:
            raise AttributionError("%s: more than the shard's %d rows" % (self.path, self._rows))
        self._maps.write(maps.reshape(-1).view(np.uint8))
        self._written += len(maps)
        for name in _SMALL:
            self._small[name].append(getattr(result, name))

    def finish(self):
        """Closes the zip and puts the file in place; its sha256 (hex). On
        failure, the file is removed."""
        try:
            return self._finish()
        except BaseException:
            self.discard()
            raise

    def _finish(self):
        if self._written != self._rows:
            raise AttributionError("%s: %d rows written, the shard has %d" % (
                self.path, self._written, self._rows))
        self._maps.close()
        for name in _SMALL:
            parts = self._small[name]
            if all(p is not None for p in parts):
                with self._zip.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.concatenate(parts),
                                              allow_pickle=False)
        self._zip.close()
        return self._stream.commit()

    def discard(self):
        """Removes the unfinished file."""
        self._stream.discard()
        try:  # closed, so that nothing is written when they are collected
            if self._maps is not None:
                self._maps.close()
            self._zip.close()
        except (ValueError, OSError):
            pass


class Writer:
    """Jobs (callables) run in order in one thread (see the module docstring)."""

    DEPTH = 4

    def __init__(self):
        self._jobs = queue.Queue(maxsize=self.DEPTH)
        self._error = None
        self._raised = False
        self._thread = threading.Thread(target=self._work, name="graph_override shards",
                                        daemon=True)
        self._thread.start()

    def _work(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if self._error is None:
                try:
                    job()
                except BaseException as e:  # pylint: disable=broad-except
                    self._error = e  # raised in the caller's thread

    def _raise(self):
        if self._error is not None and not self._raised:
            self._raised = True
            raise self._error

    def submit(self, job):
        """Queues `job` (waits while DEPTH jobs wait); raises the error of a
        job that failed."""
        self._raise()
        self._jobs.put(job)

    def close(self, check=True):
        """Waits for the jobs queued; raises the error of one that failed
        (with `check`: not when the caller is raising an error of its own)."""
        self._jobs.put(None)
        self._thread.join()
        if check:
            self._raise()
