"""What training writes and reads back: checkpoints and summaries.

Every write of a training run goes through here, so that its faults end the
same way: with an error that names the file or folder and says what to do,
never a traceback from deep inside TensorFlow, and never a lost checkpoint.

* `check_writable` creates a folder and writes and removes a probe file in
  it, so that a read-only or missing folder fails before the first epoch
  rather than after it.
* `check_checkpoint` reads a checkpoint before it is restored: the index
  (which variables, which shapes) and the data of every variable, so that a
  checkpoint of another model, or one whose ``.index`` or ``.data`` file is
  truncated, empty, corrupt or missing, is a clear error.
* `save_checkpoint` wraps `tf.compat.v1.train.Saver.save`: when the disk is
  full or the folder becomes unwritable it removes what the failed save left
  (temporary files, an unreferenced or unreadable new checkpoint), keeps the
  ``checkpoint`` state file pointing at the last good one, and raises.
* `SummaryWriter` writes TensorBoard event files synchronously, so a write
  error surfaces in the training loop (TensorFlow's FileWriter writes in a
  thread that prints its own traceback).
"""

import glob
import os
import shutil
import socket
import tempfile
import time

import tensorflow as tf

from graph_override._files import atomic
from graph_override.errors import (CheckpointDamagedError, CheckpointMismatchError,
                                   TrainingOutputError)

__all__ = ["SummaryWriter", "check_checkpoint", "check_writable",
           "latest_checkpoint", "save_checkpoint"]

# What TensorFlow raises when a file cannot be read or written: an OpError
# (NotFound, DataLoss, OutOfRange...), or a builtin from its C++ bindings
# (IndexError "Read less bytes than requested", "File too large").
_IO_ERRORS = (tf.errors.OpError, OSError, IndexError, ValueError, RuntimeError)


_NOT_THE_CAUSE = ("Graph execution error", "Detected at node", "Node:", "[[", "File ")


def _first_line(error):
    """The line of an error message that says what went wrong (a Session's
    errors start with where the op was defined)."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    lines = [" ".join(l.split()) for l in text.splitlines()]
    lines = [l for l in lines if l and not l.startswith(_NOT_THE_CAUSE)] or lines
    return lines[0][:300] if lines else type(error).__name__


def check_writable(folder, what):
    """Creates `folder` if needed and checks that a file can be written there.

    Example:
      >>> import tempfile
      >>> check_writable(os.path.join(tempfile.mkdtemp(), "new", "ckpt"), "checkpoint directory")
      >>> check_writable("/dev/null/ckpt", "checkpoint directory")
      Traceback (most recent call last):
      ...
      graph_override.errors.TrainingOutputError: checkpoint directory
      /dev/null/ckpt cannot be written: Not a directory. Nothing was trained;
      make it writable, free some space, or choose another folder.

    Args:
      folder: the folder (e.g. --checkpoint-dir or --logdir).
      what: how to name it in the message.

    Raises:
      TrainingOutputError: the folder cannot be created, or a probe file
        cannot be written (read-only, full, not a folder).
    """
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(b"graph_override write probe\n")
                f.flush()
                os.fsync(f.fileno())
        finally:
            os.unlink(probe)
    except OSError as e:
        error = TrainingOutputError(
            "%s %s cannot be written: %s. Nothing was trained; make it writable, "
            "free some space, or choose another folder."
            % (what, folder, e.strerror or e))
        error.filename = folder
        raise error from e


def _data_files(path):
    return sorted(glob.glob(glob.escape(path) + ".data-*"))


def _damaged(directory, path, detail):
    others = sorted((os.path.basename(p)[:-len(".index")] for p in glob.glob(
        os.path.join(glob.escape(directory), "*.index"))
                     if not _same(p, path + ".index")),
                    key=lambda name: (len(name), name))
    hint = ("Delete the files %s.* and the `checkpoint` file to start "
            "afresh, or pass an empty --checkpoint-dir" % path)
    if others:
        hint = ("To resume from an older checkpoint (%s), delete the files "
                "%s.* and edit or delete the `checkpoint` file in %s; or pass "
                "an empty --checkpoint-dir" % (", ".join(others), path, directory))
    error = CheckpointDamagedError(
        "checkpoint directory %s: checkpoint %s is damaged: %s. Nothing was "
        "trained. %s." % (directory, path, detail, hint))
    error.filename = path
    return error


def latest_checkpoint(directory):
    """The prefix of the latest checkpoint in `directory`, or None if none.

    Unlike `tf.train.latest_checkpoint`, which returns None (so training
    would silently start afresh) when the ``checkpoint`` state file cannot
    be parsed or names a checkpoint whose ``.index`` file is gone, this
    raises.

    Raises:
      CheckpointDamagedError: the state file is unreadable, or names a
        checkpoint whose .index file is missing.
    """
    state_file = os.path.join(directory, "checkpoint")
    if not os.path.exists(state_file):
        return None
    try:
        path = tf.train.latest_checkpoint(directory)
        if path is not None:
            return path
        state = tf.train.get_checkpoint_state(directory)
    except _IO_ERRORS:  # not text, or not a CheckpointState
        state = None
    if state is None or not state.model_checkpoint_path:
        raise _damaged(directory, os.path.join(directory, "checkpoint"),
                       "the state file %s cannot be read" % state_file)
    named = state.model_checkpoint_path
    if not os.path.isabs(named):
        named = os.path.join(directory, named)
    raise _damaged(directory, named, "its index file %s.index is missing" % named)


def check_checkpoint(path, var_list, directory=None):
    """Raises unless the checkpoint `path` can restore `var_list`.

    Every variable the saver would restore must be in the checkpoint's index
    with the same shape, and its data must read back (TensorFlow checks the
    checksums). TensorFlow would otherwise fail deep inside Saver.restore
    with a NotFoundError, a DataLossError or an IndexError.

    Args:
      path: a checkpoint prefix, e.g. from tf.train.latest_checkpoint.
      var_list: the variables of the model about to be restored.
      directory: the directory to name in the message (default: path's).

    Raises:
      CheckpointMismatchError: the checkpoint holds another model.
      CheckpointDamagedError (a CheckpointMismatchError): its ``.index`` or
        ``.data`` file is missing, truncated, empty or corrupt; the message
        names the file.
    """
    directory = directory or os.path.dirname(path)
    try:
        reader = tf.train.load_checkpoint(path)
        stored = reader.get_variable_to_shape_map()
    except _IO_ERRORS as e:
        raise _damaged(directory, path, "cannot read checkpoint %s.index (%s)"
                       % (path, _first_line(e))) from e
    problems = []
    for v in var_list:
        name, shape = v.op.name, v.shape.as_list()
        if name not in stored:
            problems.append("%s %s is missing" % (name, shape))
        elif list(stored[name]) != shape:
            problems.append("%s has shape %s in the checkpoint, the model needs %s"
                            % (name, list(stored[name]), shape))
    if problems:
        found = sorted(n for n in stored if n != "global_step")[:3]
        raise CheckpointMismatchError(
            "checkpoint directory %s holds a different model: %d of the %d "
            "variables do not fit (%s%s). It holds e.g. %s. Resume only with "
            "the same script and model flags, or pass a new --checkpoint-dir."
            % (directory, len(problems), len(var_list), "; ".join(problems[:3]),
               "; ..." if len(problems) > 3 else "", ", ".join(found) or "nothing"))
    for v in var_list:
        try:
            reader.get_tensor(v.op.name)
        except _IO_ERRORS as e:
            files = _data_files(path)
            if not files:
                detail = "its data file %s.data-00000-of-00001 is missing" % path
            else:
                detail = "the data of %s in %s cannot be read (%s; %s)" % (
                    v.op.name, " ".join(files), ", ".join(
                        "%d bytes" % os.path.getsize(f) for f in files),
                    _first_line(e))
            raise _damaged(directory, path, detail) from e


def _remove(path):
    try:
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def _leftovers(prefix):
    """Temporary files of a failed save of `prefix` and of the state file."""
    folder, base = os.path.split(prefix)
    found = glob.glob(os.path.join(glob.escape(folder), "checkpoint.tmp*"))
    for name in os.listdir(folder):
        if name.startswith(base + "_temp") or (
                name.startswith(base + ".") and ("tmp" in name[len(base):]
                                                  or "tempstate" in name)):
            found.append(os.path.join(folder, name))
    return found


def _same(a, b):
    return os.path.abspath(a) == os.path.abspath(b)


def save_checkpoint(saver, sess, directory, name, step, var_list=None):
    """Saves a checkpoint ``directory/name-step``; on failure loses nothing.

    Args:
      saver: the `tf.compat.v1.train.Saver`.
      sess: the Session holding the variables.
      directory: the checkpoint directory (it exists).
      name: the checkpoint's base name (the model's name).
      step: the global step, appended to the name.
      var_list: the saved variables, to check a half-written checkpoint
        (default: the graph's global variables).

    Returns:
      The new checkpoint's prefix.

    Raises:
      TrainingOutputError: the checkpoint could not be written (disk full,
        folder read-only or gone). What the failed save left is removed; the
        ``checkpoint`` state file still names the last good checkpoint, or
        the new one if it was written whole before the failure.
    """
    prefix = os.path.join(directory, "%s-%d" % (name, step))
    state_file = os.path.join(directory, "checkpoint")
    try:
        with open(state_file, "rb") as f:
            state_before = f.read()
    except OSError:
        state_before = None
    try:
        return saver.save(sess, os.path.join(directory, name), global_step=step)
    except _IO_ERRORS as e:
        cause = e
    for leftover in _leftovers(prefix) if os.path.isdir(directory) else ():
        _remove(leftover)
    kept = _keep_or_undo(prefix, directory, state_file, state_before, var_list)
    last = tf.train.latest_checkpoint(directory) if os.path.isdir(directory) else None
    error = TrainingOutputError(
        "cannot write checkpoint %s: %s. %s Free some space or make %s writable, "
        "then rerun with the same --checkpoint-dir to resume." % (
            prefix, _first_line(cause),
            "It was written whole before the failure and is kept." if kept else
            "The last good checkpoint is %s." % last if last else
            "No checkpoint was written before.", directory))
    error.filename = prefix
    raise error from cause


def _keep_or_undo(prefix, directory, state_file, state_before, var_list):
    """After a failed save: True if the new checkpoint is whole and named by
    the state file; otherwise its files are removed and the state restored."""
    state = tf.train.get_checkpoint_state(directory) if os.path.isdir(directory) else None
    if state is not None and _same(state.model_checkpoint_path, prefix):
        try:
            check_checkpoint(prefix, var_list or tf.compat.v1.global_variables(),
                             directory)
            return True
        except CheckpointMismatchError:
            pass
        try:
            if state_before is None:
                os.unlink(state_file)
            else:
                atomic.atomic_write(state_file, state_before)
        except OSError:
            return False  # the state names the new prefix: keep its files
    for path in glob.glob(glob.escape(prefix) + ".*"):
        _remove(path)
    return False


class SummaryWriter:
    """TensorBoard event file writer that writes in the calling thread.

    The file is a TFRecord file of `tf.compat.v1.Event` records named like
    TensorFlow's own (``events.out.tfevents.<time>.<host>``), so TensorBoard
    and `tf.compat.v1.train.summary_iterator` read it.

    Raises:
      TrainingOutputError: from any method, when the file cannot be written.
    """

    def __init__(self, logdir, graph=None):
        self.path = os.path.join(logdir, "events.out.tfevents.%010d.%s" % (
            int(time.time()), socket.gethostname()))
        self._writer = None
        self._run(self._open)
        self._event(tf.compat.v1.Event(file_version="brain.Event:2"))
        if graph is not None:
            self._event(tf.compat.v1.Event(
                graph_def=graph.as_graph_def(add_shapes=True).SerializeToString()))
        self.flush()

    def _open(self):
        self._writer = tf.io.TFRecordWriter(self.path)

    def _run(self, fn, *args):
        try:
            fn(*args)
        except _IO_ERRORS as e:
            error = TrainingOutputError(
                "cannot write TensorBoard summaries to %s: %s. Free some space "
                "or choose another --logdir." % (self.path, _first_line(e)))
            error.filename = self.path
            raise error from e

    def _event(self, event):
        event.wall_time = time.time()
        self._run(self._writer.write, event.SerializeToString())

    def add_summary(self, summary, step):
        """Adds a `Summary` proto (or its serialized bytes) at `step`."""
        if isinstance(summary, bytes):
            summary = tf.compat.v1.Summary.FromString(summary)
        self._event(tf.compat.v1.Event(step=int(step), summary=summary))

    def flush(self):
        """Writes the buffered events to the file."""
        self._run(self._writer.flush)

    def close(self):
        """Flushes and closes the file; later calls do nothing."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            self._run(writer.close)
