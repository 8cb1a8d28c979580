"""Explaining more than one batch at a time: every local device, and a
cluster through Ray Data.

Both cut the examples into batches and explain each batch whole, with one
`Explainer` per device or worker, so a batch's maps are those of one
`Explainer.attribute` call on it, wherever it runs: the same bits as one
process explaining the same batches in turn (SmoothGrad's noise is drawn per
batch from its `seed`, as in that process).

- `attribute_on_devices`: the devices of a `tf.distribute` strategy
  (`MirroredStrategy` over every local GPU, or every CPU device when there is
  none), one thread per device, each explaining its share of the batches
  under ``tf.device``. Eager ``strategy.run`` runs its replicas one after
  another, so the threads are what makes them run at once; the strategy
  says which devices there are.
- `ExplainBatches`: the batch function of ``ray.data.Dataset.map_batches``
  (Ray Data, the `ray` extra: ``pip install graph-override[ray]``). A pool of
  actors, each loading the model once, explains the dataset's batches on
  one machine or a cluster::

      import ray
      ds = ray.data.from_numpy(x).map_batches(
          ExplainBatches, fn_constructor_kwargs=dict(
              model="model.pb", inputs="x:0", outputs="logits:0",
              method="guided_backprop", column="data"),
          batch_size=32, concurrency=4, batch_format="numpy")

  Ray Data was chosen over Apache Beam (RunInference) because it installs
  beside both supported TensorFlow releases without changing their
  protobuf (Beam 2.77 requires protobuf below 7, and TensorFlow 2.21 runs
  on 7; see the attribution guide's "Scale out" section for the measured
  dependency sets). Nothing here imports Ray: the class is a plain callable
  on a dict of NumPy arrays.
"""

import threading

import numpy as np
import tensorflow as tf

from graph_override.attribution import engine, methods
from graph_override.errors import AttributionError

__all__ = ["ExplainBatches", "attribute_on_devices", "batches", "local_devices"]


def local_devices():
    """The devices of `tf.distribute.MirroredStrategy()`'s default choice:
    every local GPU, else every local CPU device (logical devices included)."""
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]


def batches(n, batch_size):
    """[(start, stop)] of the batches of `n` examples, `batch_size` each
    (the last may be smaller)."""
    if (not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool)
            or batch_size < 1):
        raise AttributionError("batch_size=%r: expected an int >= 1 (examples per "
                               "batch)" % (batch_size,))
    return [(start, min(start + int(batch_size), n)) for start in range(0, n, int(batch_size))]


def _target_part(target, start, stop, n):
    """The targets of the rows start:stop: an array of one class per example
    is cut, an int, None or a callable serves every batch."""
    if callable(target) or target is None or np.ndim(target) == 0:
        return target
    array = np.asarray(target)
    return array[start:stop] if array.ndim == 1 and array.shape[0] == n else target


def _option_part(name, value, start, stop, shape):
    """A baseline of x's shape (one per example) cut to the rows start:stop;
    every other option (a baseline of one example's shape too) as it is."""
    if name == "baseline" and value is not None and np.shape(value) == shape:
        return np.asarray(value)[start:stop]
    return value


def _concatenated(results, method):
    """One `Attribution` of the batches' results, in order."""
    def joined(name):
        parts = [getattr(r, name) for r in results]
        return None if any(p is None for p in parts) else np.concatenate(parts)
    return methods.Attribution(maps=joined("maps"), method=method, targets=joined("targets"),
                               outputs=joined("outputs"), delta=joined("delta"))


def attribute_on_devices(explainer, method, x, target=None, *, batch_size, strategy=None,
                         **options):
    """`method`'s maps of `x`, batch by batch, on every device of `strategy`.

    Args:
      explainer: an `Explainer` (its mode, rules and caches serve every
        device).
      method, target, **options: as `Explainer.attribute`; a target array
        and a baseline with one row per example are cut with the batches.
      batch_size: examples per batch.
      strategy: a `tf.distribute.Strategy` whose ``extended.worker_devices``
        are used; None: `MirroredStrategy` over `local_devices`.

    Returns:
      One `Attribution` for all of `x`, the batches in order: the same bits
      as ``explainer.attribute`` on each batch in turn.
    """
    if not isinstance(explainer, engine.Explainer):
        raise AttributionError("attribute_on_devices: expected an Explainer, got %s"
                               % type(explainer).__name__)
    x = np.asarray(x)
    spans = batches(x.shape[0], batch_size)
    if strategy is None:
        strategy = tf.distribute.MirroredStrategy(local_devices())
    devices = list(strategy.extended.worker_devices)
    results, errors = [None] * len(spans), []

    def work(device, mine):
        try:
            with tf.device(device):
                for i in mine:
                    start, stop = spans[i]
                    results[i] = explainer.attribute(
                        method, x[start:stop], _target_part(target, start, stop, x.shape[0]),
                        **{k: _option_part(k, v, start, stop, x.shape)
                           for k, v in options.items()})
        except BaseException as e:  # pylint: disable=broad-except  # raised in the caller
            errors.append(e)

    # The first batch alone builds what every device shares (the frozen and
    # patched model, the compiled gradient), then each device takes every
    # len(devices)-th of the others.
    work(devices[0], spans[:1] and [0])
    if not errors:
        threads = [threading.Thread(target=work, args=(d, range(1 + k, len(spans),
                                                                 len(devices))))
                   for k, d in enumerate(devices)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return _concatenated(results, method)


class ExplainBatches:
    """A batch function for Ray Data's ``map_batches``: the maps of each
    batch (a dict of NumPy arrays) added as a column.

    Args:
      model, inputs, outputs, rules, allow_ops, mode: as `Explainer` (a
        model that pickles: a GraphDef message or a path every worker can
        read).
      method: the method's name; **options its options (as
        `Explainer.attribute`).
      column: the column of the inputs.
      target_column: a column of int classes, one per example; None: each
        example's argmax.
      threads: TensorFlow's intra-op threads in this worker (set before it
        runs anything), so that several workers on one machine share its
        cores instead of each taking all of them; None: TensorFlow's default.

    Each call returns the batch with ``maps``, ``outputs`` and (where the
    method has them) ``targets`` and ``delta`` added.
    """

    def __init__(self, model, method, *, inputs=None, outputs=None, rules=(), allow_ops=(),
                 mode="exact", column="x", target_column=None, threads=None, **options):
        if threads is not None:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(int(threads))
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:  # TensorFlow already runs in this process
                pass
        self.explainer = engine.Explainer(model, inputs=inputs, outputs=outputs, rules=rules,
                                          allow_ops=allow_ops, mode=mode)
        self.method, self.column, self.target_column = method, column, target_column
        self.options = options

    def __call__(self, batch):
        if self.column not in batch:
            raise AttributionError("ExplainBatches: the batch has no column %r (its "
                                   "columns: %s); pass column=" % (
                                       self.column, ", ".join(sorted(batch))))
        target = None if self.target_column is None else np.asarray(batch[self.target_column])
        result = self.explainer.attribute(self.method, np.asarray(batch[self.column]), target,
                                          **self.options)
        out = dict(batch, maps=result.maps, outputs=result.outputs)
        for name in ("targets", "delta"):
            if getattr(result, name) is not None:
                out[name] = getattr(result, name)
        return out
