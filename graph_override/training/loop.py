"""The Session training loop shared by the training scripts.

`train` builds a model in a fresh graph, opens a `tf.compat.v1.Session`
(locally, or on a worker of TensorFlow's distributed runtime), restores the
latest `tf.compat.v1.train.Saver` checkpoint if there is one, and runs epochs
of minibatches with an optional tqdm progress bar and TensorBoard summaries
(`tf.compat.v1.summary.FileWriter`). Checkpoints are written at the end of
an epoch once `checkpoint_secs` have passed since the last one, every
`checkpoint_every` steps, at the end, and when the loop is interrupted
(KeyboardInterrupt). Minibatch order is a function of (seed, epoch) only, so
a resumed run continues exactly where the interrupted one stopped.
"""

import collections
import sys
import time

import tensorflow as tf

from graph_override.training import cluster as cluster_lib
from graph_override.training import storage
from graph_override.training.config import TrainConfig
from graph_override.training.errors import TrainingOutputError
from graph_override.training.storage import check_checkpoint

__all__ = [ "TrainResult", "session_config", "train"]

_LOST_CLUSTER = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                 tf.errors.AbortedError)

TrainResult = collections.namedtuple("TrainResult", [
    "losses", "evaluations", "start_step", "global_step", "probes",
    "checkpoint", "seconds"])
TrainResult.__doc__ = """What a training run did.

Attributes:
  losses: [(global step after the update, training loss of that batch)] for
    the steps this process ran.
  evaluations: [(epoch, global step, {set name: accuracy})], one per epoch
    ended in this process, the last after training.
  start_step: the global step the run started from (> 0 after a resume).
  global_step: the global step at the end.
  probes: the model's probes (e.g. ste_grad_norm) computed with the last
    step run (in a cluster whose other workers ended the run: on this
    worker's last batch, after its last step).
  checkpoint: path of the last checkpoint written, or None.
  seconds: wall time of the training steps and evaluations.
"""


def session_config(deterministic=True, operation_timeout_ms=None, device_filters=()):
    """A ConfigProto; deterministic=True runs single-threaded for repeatability."""
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=1 if deterministic else 0,
        inter_op_parallelism_threads=1 if deterministic else 0)
    if operation_timeout_ms:
        config.operation_timeout_in_ms = int(operation_timeout_ms)
    config.device_filters.extend(device_filters)
    return config


def _progress(total, initial, enabled):
    if not enabled:
        return None
    try:
        from tqdm import tqdm  # pylint: disable=import-outside-toplevel
    except ImportError:
        print("(progress bar off: `python -m pip install tqdm` to see one)",
              file=sys.stderr)
        return None
    return tqdm(total=total, initial=initial, unit="step", file=sys.stderr,
                dynamic_ncols=True, leave=False)


def _scalar_summary(values):
    return tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag=k, simple_value=float(v))
        for k, v in sorted(values.items())])


def _restore_or_init(sess_manager, master, saver, path, is_chief, config, wait_secs):
    if not is_chief:
        try:
            return sess_manager.wait_for_session(master, config=config,
                                                 max_wait_secs=wait_secs)
        except tf.errors.DeadlineExceededError as e:
            raise cluster_lib.ClusterUnreachableError(
                "worker waited %g s for the chief (worker task 0) to "
                "initialize the variables on the parameter servers; start the "
                "chief, or check the cluster spec" % wait_secs) from e
    return sess_manager.prepare_session(
        master, init_op=tf.compat.v1.global_variables_initializer(), saver=saver,
        checkpoint_filename_with_path=path, config=config)


def train(build, train_feeds, eval_sets, config=None, **settings):
    """Trains a model in a Session; resumes from `checkpoint_dir` if it can.

    Example:
      >>> from graph_override.training import data, models
      >>> split = data.digits_splits()
      >>> r = train(lambda: models.build_bnn("overrides", hidden=(32,)),
      ...           lambda m, epoch: [{m.inputs["x"]: split.x_train[i],
      ...                              m.inputs["y"]: split.y_train[i]}
      ...                             for i in data.batches(1347, 64, 0, epoch)],
      ...           lambda m: {"test": {m.inputs["x"]: split.x_test,
      ...                               m.inputs["y"]: split.y_test}},
      ...           TrainConfig(epochs=1))
      >>> r.global_step, len(r.losses), sorted(r.evaluations[-1][2])
      (21, 21, ['test'])

    Args:
      build: ``build() -> models.Model``, called in a fresh default graph
        (under the cluster's device setter when the config has a cluster).
      train_feeds: ``train_feeds(model, epoch) -> [feed_dict, ...]``, the
        minibatches of one epoch, the same for the same epoch.
      eval_sets: ``eval_sets(model) -> {name: feed_dict}`` evaluated (accuracy)
        after every epoch and at the end.
      config: a `TrainConfig` (epochs, checkpoints, logs, cluster, ...).
      **settings: `TrainConfig` fields, given instead of `config` or
        replacing its values (``train(..., epochs=3)``).

    Returns:
      A `TrainResult`.

    Raises:
      TypeError, ValueError: a setting that is not a `TrainConfig` field, or
        a value out of its range.
      CheckpointMismatchError: checkpoint_dir holds another model.
      CheckpointDamagedError: its latest checkpoint cannot be read (a
        truncated, empty or missing .index or .data file).
      TrainingOutputError: checkpoint_dir or logdir cannot be written
        (checked before training), or a write failed during training; the
        last good checkpoint stays restorable.
      ClusterUnreachableError: the cluster's tasks did not answer in time,
        or a task stopped answering during training. In the latter case the
        error's `session` attribute holds the open Session: closing it would
        block while the task is down, so keep a reference or end the process
        (the scripts exit with os._exit).
    """
    config = TrainConfig.of(config, **settings)
    cluster = config.cluster
    if cluster is None or cluster.is_chief:  # the chief writes; fail before training
        for folder, what in ((config.checkpoint_dir, "checkpoint directory"),
                             (config.logdir, "log directory")):
            if folder:
                storage.check_writable(folder, what)
    master, device_fn, is_chief, filters = "", None, True, ()
    timeout_ms = config.operation_timeout_ms
    if cluster is not None:
        server = cluster_lib.start_worker(cluster)
        master, device_fn = server.target, cluster_lib.device_setter(cluster)
        is_chief, filters = cluster.is_chief, cluster.device_filters()
        timeout_ms = timeout_ms or cluster.timeout_ms
    session = session_config(config.deterministic and cluster is None, timeout_ms, filters)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(config.seed)
        with tf.compat.v1.device(device_fn):
            model = build()
        # Relative names in the state file: a moved or copied checkpoint
        # directory resumes from its own files, not from the original's.
        saver = tf.compat.v1.train.Saver(max_to_keep=3, save_relative_paths=True)
        path = (storage.latest_checkpoint(config.checkpoint_dir)
                if config.checkpoint_dir and is_chief else None)
        if path:  # before TensorFlow's own, obscure, restore errors
            check_checkpoint(path, tf.compat.v1.global_variables(), config.checkpoint_dir)
        sess_manager = tf.compat.v1.train.SessionManager(
            ready_op=tf.compat.v1.report_uninitialized_variables(), graph=graph,
            recovery_wait_secs=0.5)
        epochs = _Epochs(model, saver, train_feeds, eval_sets, config,
                         checkpoint_dir=config.checkpoint_dir if is_chief else None,
                         run_timeout_ms=timeout_ms)
        sess = _restore_or_init(sess_manager, master, saver, path, is_chief, session,
                                cluster.timeout if cluster is not None else 0)
        try:
            return _run(epochs, sess, graph, path, is_chief)
        except _LOST_CLUSTER as e:
            if cluster is None:
                raise
            # Closing a distributed Session whose parameter servers are gone
            # blocks forever (also from __del__), so the session travels with
            # the error: keep it referenced, or end the process.
            lost = _lost_cluster(cluster, e)
            lost.session, sess = sess, None
            raise lost from None
        finally:  # also on Ctrl-C: release the session
            if sess is not None:
                sess.close()


def _run(epochs, sess, graph, path, is_chief):
    config = epochs.config
    writer = None
    try:
        writer = (storage.SummaryWriter(config.logdir, graph)
                  if config.logdir and is_chief else None)
        start = int(sess.run(epochs.model.global_step))
        if path:
            (config.log or _quiet)("resumed from %s at step %d" % (path, start))
        result = epochs.run(sess, writer, start, restored=start if path else None)
        if writer is not None:
            writer.close()
        return result
    finally:
        if writer is not None:
            try:
                writer.close()  # a no-op after a successful run
            except TrainingOutputError:
                pass  # another error is on its way already


def _lost_cluster(cluster, e):
    return cluster_lib.ClusterUnreachableError(
        "worker %d lost the cluster during training (%s: %s). Check that "
        "every ps task in the cluster spec is running, then rerun; with "
        "--checkpoint-dir the chief resumes from its last checkpoint."
        % (cluster.task_index, type(e).__name__,
           " ".join(str(e.message).split())[:300]))


def _quiet(message):
    del message


class _Epochs:
    """The epochs of one run: steps, evaluations, checkpoints, logs."""

    def __init__(self, model, saver, train_feeds, eval_sets, config, *,
                 checkpoint_dir, run_timeout_ms):
        self.model, self.saver, self.config = model, saver, config
        self.train_feeds, self.eval_sets = train_feeds, eval_sets
        self.checkpoint_dir = checkpoint_dir  # None on workers other than the chief
        self.log = config.log or _quiet
        self.steps_per_epoch = len(train_feeds(model, 0))
        self.total = config.epochs * self.steps_per_epoch
        self.summary_op = tf.compat.v1.summary.merge([
            tf.compat.v1.summary.scalar("train/loss", model.loss),
            tf.compat.v1.summary.scalar("train/batch_accuracy", model.accuracy)])
        with tf.control_dependencies([model.train_op]):
            step_after = tf.identity(model.global_step)  # read after the update
        self.fetch = {"loss": model.loss, "step": step_after}
        # A per-step deadline: the Session-wide operation timeout does not
        # cover a remote task that died mid-run.
        self.run_options = tf.compat.v1.RunOptions(timeout_in_ms=run_timeout_ms or 0)
        self.sess = self.writer = self.bar = None
        self.losses, self.evaluations, self.probes = [], [], {}
        self.checkpoint = self.saved_step = None
        self.step = 0  # the global step after the last update run
        self.saved_time = 0.0

    def run(self, sess, writer, start, restored):
        """Trains from global step `start` to the end; returns a TrainResult."""
        self.sess, self.writer = sess, writer
        # The restored checkpoint is the save of its step: never written again.
        self.saved_step, self.saved_time = restored, time.time()
        self.bar = _progress(self.total, min(start, self.total), self.config.progress)
        began, step, last_feed = time.time(), start, None
        self.step = start
        try:
            while step < self.total:
                step, last_feed = self._epoch(step, last_feed)
        except KeyboardInterrupt:
            self._save(self.step)  # the last step run, also from inside on_step
            raise
        finally:
            if self.bar is not None:
                self.bar.close()
        if self.losses and not self.probes:  # other workers took the step past the end
            self.probes = sess.run(self.model.probes, last_feed, options=self.run_options)
        if not self.evaluations:  # nothing left to train: report the restored model
            self._evaluate(step // max(self.steps_per_epoch, 1), step)
        return TrainResult(self.losses, self.evaluations, start, step,
                           {k: float(v) for k, v in self.probes.items()},
                           self.checkpoint, time.time() - began)

    def _epoch(self, step, last_feed):
        epoch = step // self.steps_per_epoch
        for feed in self.train_feeds(self.model, epoch)[step % self.steps_per_epoch:]:
            step, last_feed = self._step(feed, step, epoch), feed
            if step >= self.total:
                break
        if step % self.steps_per_epoch == 0 or step >= self.total:
            accs = self._evaluate(step // self.steps_per_epoch, step)  # global epochs
            if self.bar is not None:
                self.bar.set_postfix(epoch=epoch + 1,
                                     **{k: "%.3f" % v for k, v in accs.items()})
            if (step >= self.total
                    or time.time() - self.saved_time >= self.config.checkpoint_secs):
                self._save(step)
        return step, last_feed

    def _step(self, feed, step, epoch):
        feed = dict(feed)
        feed[self.model.training] = True
        run = dict(self.fetch)
        if self.writer is not None and step % 10 == 0:
            run["summary"] = self.summary_op
        if step + 1 >= self.total:
            # Only the last step's probes are kept, and they may cost a
            # backward pass of their own (DANN): fetched only here.
            run["probes"] = self.model.probes
        out = self.sess.run(run, feed, options=self.run_options)
        step, loss = int(out["step"]), float(out["loss"])
        self.step = step
        self.probes = out.get("probes", self.probes)
        self.losses.append((step, loss))
        if "summary" in out:
            self.writer.add_summary(out["summary"], step)
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix(epoch=epoch + 1, loss="%.4f" % out["loss"], refresh=False)
        if self.config.on_step is not None:
            self.config.on_step(step, loss)
        if self.config.checkpoint_every and step % self.config.checkpoint_every == 0:
            self._save(step)
        return step

    def _save(self, step):
        if self.checkpoint_dir and self.saved_step != step:
            self.saved_step, self.saved_time = step, time.time()
            self.checkpoint = storage.save_checkpoint(
                self.saver, self.sess, self.checkpoint_dir, self.model.name, step)
            self._say("checkpoint saved at step %d: %s" % (step, self.checkpoint))

    def _say(self, message):
        if self.bar is not None:
            self.bar.clear()
        self.log(message)
        if self.bar is not None:
            self.bar.refresh()

    def _evaluate(self, epoch, step):
        accs = {name: float(self.sess.run(self.model.accuracy, feed,
                                          options=self.run_options))
                for name, feed in self.eval_sets(self.model).items()}
        self.evaluations.append((epoch, step, accs))
        if epoch % self.config.log_every == 0 or step >= self.total:
            self._say("epoch %d, step %d: loss %s, %s" % (
                epoch, step, "%.4f" % self.losses[-1][1] if self.losses else "-",
                ", ".join("%s accuracy %.4f" % kv for kv in sorted(accs.items()))))
        if self.writer is not None:
            self.writer.add_summary(_scalar_summary(
                {"eval/%s_accuracy" % k: v for k, v in accs.items()}), step)
            self.writer.flush()
        return accs
