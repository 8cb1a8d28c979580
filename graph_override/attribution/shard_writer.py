"""A shard's file written batch by batch, in a thread beside the model's.

`ShardFile` writes FOLDER/``shard-NNNNN.npz`` as its batches come: the
``maps`` member first, its ``.npy`` header saying the shard's rows, then
each batch's maps as they are (no copy of the shard in memory), then
``outputs``, ``targets`` and ``delta`` (a few numbers per example, kept
until the end). A model of several inputs has a maps member per input
(``maps/NAME``, in the inputs' order): the first is written as it comes,
the others' batches go to a temporary file of their own beside the shard
(a zip takes one member at a time) and are copied in at the end, so the
memory stays that of a batch. The members and their bytes are those of
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

import os
import queue
import shutil
import tempfile
import threading
import zipfile

import numpy as np

from graph_override._files.atomic_stream import AtomicStream
from graph_override.errors import AttributionError

__all__ = ["ShardFile", "Writer"]

_SMALL = ("outputs", "targets", "delta")


class ShardFile:
    """The shard `path` of `rows` examples, its maps members `members` (see
    the module docstring)."""

    def __init__(self, path, rows, members=("maps",)):
        self.path = path
        self._rows = rows
        self._members = list(members)
        self._written = 0
        self._stream = AtomicStream(path, exclusive=True)
        self._zip = zipfile.ZipFile(self._stream, "w", zipfile.ZIP_STORED, allowZip64=True)
        self._maps = None
        self._spools = []  # the later members' bytes, until the first is closed
        self._examples = None
        self._small = {name: [] for name in _SMALL}

    def add(self, result):
        """Appends the `Attribution` of the shard's next batch (on failure,
        the file is removed)."""
        try:
            self._add(result)
        except BaseException:
            self.discard()
            raise

    def _arrays(self, maps):
        if len(self._members) == 1:
            return [np.ascontiguousarray(maps)]
        parts = list(maps.values()) if isinstance(maps, dict) else list(maps)
        if len(parts) != len(self._members):  # a dict's values in the inputs' order
            raise AttributionError("%s: a batch has maps of %d inputs, the shard %d (%s)" % (
                self.path, len(parts), len(self._members), ", ".join(self._members)))
        return [np.ascontiguousarray(m) for m in parts]

    def _add(self, result):
        arrays = self._arrays(result.maps)
        examples = [(m.dtype, m.shape[1:]) for m in arrays]
        if self._maps is None:
            self._examples = examples
            self._maps = self._zip.open(self._members[0] + ".npy", "w", force_zip64=True)
            np.lib.format.write_array_header_1_0(self._maps, self._header(0))
            folder = os.path.dirname(os.path.abspath(self.path))
            self._spools = [tempfile.TemporaryFile(dir=folder) for _ in arrays[1:]]
        elif examples != self._examples:
            raise AttributionError(
                "%s: a batch's maps are %s, the shard's %s" % (
                    self.path, _describe(examples), _describe(self._examples)))
        if self._written + len(arrays[0]) > self._rows:
            raise AttributionError("%s: more than the shard's %d rows" % (self.path, self._rows))
        self._maps.write(arrays[0].reshape(-1).view(np.uint8))
        for spool, maps in zip(self._spools, arrays[1:]):
            spool.write(maps.reshape(-1).view(np.uint8))
        self._written += len(arrays[0])
        for name in _SMALL:
            self._small[name].append(getattr(result, name))

    def _header(self, i):
        dtype, shape = self._examples[i]
        return {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                "shape": (self._rows,) + shape}

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
        for i, spool in enumerate(self._spools, 1):
            with self._zip.open(self._members[i] + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, self._header(i))
                spool.seek(0)
                shutil.copyfileobj(spool, member, 1 << 22)
            spool.close()
        for name in _SMALL:
            parts = self._small[name]
            if all(p is not None for p in parts):
                with self._zip.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.concatenate(parts),
                                              allow_pickle=False)
        self._zip.close()
        return self._stream.commit()

    def discard(self):
        """Removes the unfinished file (and the temporary ones)."""
        self._stream.discard()
        for spool in self._spools:
            spool.close()
        try:  # closed, so that nothing is written when they are collected
            if self._maps is not None:
                self._maps.close()
            self._zip.close()
        except (ValueError, OSError):
            pass


def _describe(examples):
    return ", ".join("%s of shape %s" % (dtype, shape) for dtype, shape in examples)


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
