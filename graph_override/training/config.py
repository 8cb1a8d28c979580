"""`TrainConfig`: the settings of one `loop.train` run, checked once.

`loop.train(build, train_feeds, eval_sets, config)` takes what to train as
arguments and how to train it as one `TrainConfig`; keyword settings
(``train(..., epochs=3, checkpoint_dir="ckpt")``) still work and are the same
as ``TrainConfig(epochs=3, checkpoint_dir="ckpt")``.
"""

import dataclasses
import difflib
import numbers
from typing import Any, Callable, Optional

__all__ = ["TrainConfig"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How `loop.train` runs: epochs, checkpoints, logs, cluster, progress.

    Example:
      >>> c = TrainConfig(epochs=3, checkpoint_dir="ckpt")
      >>> c.checkpoint_secs, c.replace(epochs=5).epochs
      (30.0, 5)
      >>> TrainConfig(epochs=-1)
      Traceback (most recent call last):
      ...
      ValueError: TrainConfig(epochs=-1): use a whole number of epochs >= 0

    Attributes:
      epochs: number of epochs (the run stops at epochs * batches per epoch
        global steps, counting steps restored from a checkpoint).
      seed: graph-level seed (the models seed their initializers themselves).
      logdir: TensorBoard directory for tf.compat.v1.summary scalars, or None.
      checkpoint_dir: directory of Saver checkpoints: restored from at the
        start if it holds one, written to during the run. None: no saving.
      checkpoint_every: also save every this many steps (None: not by steps).
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
    """

    epochs: int
    seed: int = 0
    logdir: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    checkpoint_every: Optional[int] = None
    checkpoint_secs: float = 30.0
    cluster: Any = None
    progress: bool = False
    deterministic: bool = True
    operation_timeout_ms: Optional[int] = None
    on_step: Optional[Callable[[int, float], None]] = None
    log: Optional[Callable[[str], None]] = None
    log_every: int = 1

    def __post_init__(self):
        _whole(self.epochs, "epochs", minimum=0, unit="epochs")
        _whole(self.log_every, "log_every", minimum=1, unit="epochs")
        if self.checkpoint_every is not None:
            _whole(self.checkpoint_every, "checkpoint_every", minimum=1, unit="steps")
        if (isinstance(self.checkpoint_secs, bool)
                or not isinstance(self.checkpoint_secs, numbers.Real)
                or not self.checkpoint_secs >= 0):
            raise ValueError("TrainConfig(checkpoint_secs=%r): use a number of "
                             "seconds >= 0" % (self.checkpoint_secs,))
        for key in ("on_step", "log"):
            value = getattr(self, key)
            if value is not None and not callable(value):
                raise TypeError("TrainConfig(%s=%r): use a function or None"
                                % (key, value))

    @classmethod
    def of(cls, config=None, **settings):
        """`config` with `settings` replaced, or a new one made of `settings`.

        Unknown settings raise TypeError naming them and the nearest field.
        """
        known = [f.name for f in dataclasses.fields(cls)]
        for key in settings:
            if key not in known:
                near = difflib.get_close_matches(key, known, n=1)
                raise TypeError("train: unknown setting %r%s; the settings are "
                                "TrainConfig's fields: %s" % (
                                    key, " (did you mean %r?)" % near[0] if near else "",
                                    ", ".join(known)))
        if config is None:
            if "epochs" not in settings:
                raise TypeError("train: give the number of epochs (epochs=N or "
                                "a TrainConfig)")
            return cls(**settings)
        if not isinstance(config, cls):
            raise TypeError("train(config=%r): use a TrainConfig or None" % (config,))
        return config.replace(**settings) if settings else config

    def replace(self, **settings):
        """A copy with `settings` changed (checked like a new one)."""
        return dataclasses.replace(self, **settings)


def _whole(value, key, *, minimum, unit):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError("TrainConfig(%s=%r): use a whole number of %s >= %d"
                         % (key, value, unit, minimum))
