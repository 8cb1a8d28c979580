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
from graph_override.training.errors import TrainingOutputError
from graph_override.training.storage import check_checkpoint

__all__ = ["TrainResult", "check_checkpoint", "session_config", "train"]

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


def train(build, train_feeds, eval_sets, *, epochs, seed=0, logdir=None,
          checkpoint_dir=None, checkpoint_every=None, checkpoint_secs=30.0,
          cluster=None,
          progress=False, deterministic=True, operation_timeout_ms=None,
          on_step=None, log=None, log_every=1):
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
      ...           epochs=1)
      >>> r.global_step, len(r.losses), sorted(r.evaluations[-1][2])
      (21, 21, ['test'])

    Args:
      build: ``build() -> models.Model``, called in a fresh default graph
        (under the cluster's device setter when `cluster` is given).
      train_feeds: ``train_feeds(model, epoch) -> [feed_dict, ...]``, the
        minibatches of one epoch, the same for the same epoch.
      eval_sets: ``eval_sets(model) -> {name: feed_dict}`` evaluated (accuracy)
        after every epoch and at the end.
      epochs: number of epochs (the run stops at epochs * batches per epoch
        global steps, counting steps restored from a checkpoint).
      seed: graph-level seed (the models seed their initializers themselves).
      logdir: TensorBoard directory for tf.compat.v1.summary scalars, or None.
      checkpoint_dir: directory of Saver checkpoints: restored from at the
        start if it holds one, written to during the run. None: no saving.
      checkpoint_every: also save every this many steps.
      checkpoint_secs: save at the end of an epoch when this many seconds
        have passed since the last save (0: every epoch).
      cluster: a `cluster.ClusterTask` of a worker, or None for a local run.
      progress: show a tqdm progress bar on stderr.
      deterministic: single-threaded Session (same losses on every run).
      operation_timeout_ms: Session operation timeout (cluster runs use the
        task's timeout when this is None).
      on_step: ``on_step(global_step, loss)`` after every step; raising
        KeyboardInterrupt there interrupts the run (a checkpoint is saved).
      log: ``log(message)`` for epoch, resume and checkpoint messages, or
        None.
      log_every: log the evaluation of every this many epochs (and of the
        last one); the evaluations are all in the result.

    Returns:
      A `TrainResult`.

    Raises:
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
    if epochs < 0:
        raise ValueError("train(epochs=%r): use 0 or more epochs" % (epochs,))
    if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
        raise ValueError("train(log_every=%r): use a whole number of epochs >= 1"
                         % (log_every,))
    log = log or (lambda message: None)
    graph = tf.Graph()
    master, device_fn, is_chief, filters = "", None, True, ()
    if cluster is None or cluster.is_chief:  # the chief writes; fail before training
        for folder, what in ((checkpoint_dir, "checkpoint directory"),
                             (logdir, "log directory")):
            if folder:
                storage.check_writable(folder, what)
    if cluster is not None:
        server = cluster_lib.start_worker(cluster)
        master, device_fn = server.target, cluster_lib.device_setter(cluster)
        is_chief, filters = cluster.is_chief, cluster.device_filters()
        operation_timeout_ms = operation_timeout_ms or cluster.timeout_ms
    config = session_config(deterministic and cluster is None,
                            operation_timeout_ms, filters)
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        with tf.compat.v1.device(device_fn):
            model = build()
        # Relative names in the state file: a moved or copied checkpoint
        # directory resumes from its own files, not from the original's.
        saver = tf.compat.v1.train.Saver(max_to_keep=3, save_relative_paths=True)
        path = (storage.latest_checkpoint(checkpoint_dir)
                if checkpoint_dir and is_chief else None)
        if path:  # before TensorFlow's own, obscure, restore errors
            check_checkpoint(path, tf.compat.v1.global_variables(), checkpoint_dir)
        sess_manager = tf.compat.v1.train.SessionManager(
            ready_op=tf.compat.v1.report_uninitialized_variables(), graph=graph,
            recovery_wait_secs=0.5)
        summary_op = tf.compat.v1.summary.merge([
            tf.compat.v1.summary.scalar("train/loss", model.loss),
            tf.compat.v1.summary.scalar("train/batch_accuracy", model.accuracy)])
        steps_per_epoch = len(train_feeds(model, 0))
        total = epochs * steps_per_epoch
        wait = cluster.timeout if cluster is not None else 0
        sess = _restore_or_init(sess_manager, master, saver, path, is_chief,
                                config, wait)
        writer = None
        try:
            writer = (storage.SummaryWriter(logdir, graph)
                      if logdir and is_chief else None)
            start = int(sess.run(model.global_step))
            if path:
                log("resumed from %s at step %d" % (path, start))
            result = _run_epochs(sess, model, saver, writer, summary_op, train_feeds,
                                 eval_sets, steps_per_epoch, total, start,
                                 dict(checkpoint_dir=checkpoint_dir if is_chief else None,
                                      checkpoint_every=checkpoint_every,
                                      checkpoint_secs=checkpoint_secs,
                                      restored=start if path else None,
                                      progress=progress, on_step=on_step, log=log,
                                      log_every=log_every,
                                      run_timeout_ms=operation_timeout_ms))
            if writer is not None:
                writer.close()
        except _LOST_CLUSTER as e:
            if cluster is None:
                raise
            lost = cluster_lib.ClusterUnreachableError(
                "worker %d lost the cluster during training (%s: %s). Check that "
                "every ps task in the cluster spec is running, then rerun; with "
                "--checkpoint-dir the chief resumes from its last checkpoint."
                % (cluster.task_index, type(e).__name__,
                   " ".join(str(e.message).split())[:300]))
            # Closing a distributed Session whose parameter servers are gone
            # blocks forever (also from __del__), so the session travels with
            # the error: keep it referenced, or end the process.
            lost.session, sess = sess, None
            raise lost from None
        finally:  # also on Ctrl-C: release the session
            if sess is not None:
                sess.close()
            if writer is not None:
                try:
                    writer.close()  # a no-op after a successful run
                except TrainingOutputError:
                    pass  # another error is on its way already
    return result


def _run_epochs(sess, model, saver, writer, summary_op, train_feeds, eval_sets,
                steps_per_epoch, total, start, opts):
    losses, evaluations, probes, last_ckpt = [], [], {}, [None]
    bar = _progress(total, min(start, total), opts["progress"])
    with tf.control_dependencies([model.train_op]):
        step_after = tf.identity(model.global_step)  # read after the update
    fetch = {"loss": model.loss, "step": step_after}
    checkpoint_dir, log, on_step = opts["checkpoint_dir"], opts["log"], opts["on_step"]
    checkpoint_every = opts["checkpoint_every"]
    # A per-step deadline: the Session-wide operation timeout does not cover
    # a remote task that died mid-run.
    run_options = tf.compat.v1.RunOptions(timeout_in_ms=opts["run_timeout_ms"] or 0)
    # The restored checkpoint is the save of its step: never written again.
    saved = {"step": opts["restored"], "time": time.time()}

    def save(step):
        if checkpoint_dir and saved["step"] != step:
            saved.update(step=step, time=time.time())
            last_ckpt[0] = storage.save_checkpoint(saver, sess, checkpoint_dir,
                                                   model.name, step)
            say("checkpoint saved at step %d: %s" % (step, last_ckpt[0]))

    def say(message):
        if bar is not None:
            bar.clear()
        log(message)
        if bar is not None:
            bar.refresh()

    def evaluate(epoch, step):
        accs = {name: float(sess.run(model.accuracy, feed, options=run_options))
                for name, feed in eval_sets(model).items()}
        evaluations.append((epoch, step, accs))
        if epoch % opts["log_every"] == 0 or step >= total:
            say("epoch %d, step %d: loss %s, %s" % (
                epoch, step, "%.4f" % losses[-1][1] if losses else "-",
                ", ".join("%s accuracy %.4f" % kv for kv in sorted(accs.items()))))
        if writer is not None:
            writer.add_summary(_scalar_summary(
                {"eval/%s_accuracy" % k: v for k, v in accs.items()}), step)
            writer.flush()
        return accs

    began, step = time.time(), start
    try:
        while step < total:
            epoch = step // steps_per_epoch
            feeds = train_feeds(model, epoch)
            for feed in feeds[step % steps_per_epoch:]:
                feed = dict(feed)
                feed[model.training] = True
                run = dict(fetch)
                if writer is not None and step % 10 == 0:
                    run["summary"] = summary_op
                if step + 1 >= total:
                    # Only the last step's probes are kept, and they may cost
                    # a backward pass of their own (DANN): fetched only here.
                    run["probes"] = model.probes
                out = sess.run(run, feed, options=run_options)
                step, last_feed = int(out["step"]), feed
                probes = out.get("probes", probes)
                losses.append((step, float(out["loss"])))
                if "summary" in out:
                    writer.add_summary(out["summary"], step)
                if bar is not None:
                    bar.update(step - bar.n)
                    bar.set_postfix(epoch=epoch + 1, loss="%.4f" % out["loss"], refresh=False)
                if on_step is not None:
                    on_step(step, float(out["loss"]))
                if checkpoint_every and step % checkpoint_every == 0:
                    save(step)
                if step >= total:
                    break
            if step % steps_per_epoch == 0 or step >= total:
                accs = evaluate(step // steps_per_epoch, step)  # global epochs
                if bar is not None:
                    bar.set_postfix(epoch=epoch + 1, **{k: "%.3f" % v for k, v in accs.items()})
                if (step >= total
                        or time.time() - saved["time"] >= opts["checkpoint_secs"]):
                    save(step)
    except KeyboardInterrupt:
        save(step)
        raise
    finally:
        if bar is not None:
            bar.close()
    if losses and not probes:  # other workers took the global step past the end
        probes = sess.run(model.probes, last_feed, options=run_options)
    if not evaluations:  # nothing left to train: report the restored model
        evaluate(step // max(steps_per_epoch, 1), step)
    return TrainResult(losses, evaluations, start, step,
                       {k: float(v) for k, v in probes.items()}, last_ckpt[0],
                       time.time() - began)
