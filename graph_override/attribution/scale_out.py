"""Explaining more than one batch at a time: every local device, and a
cluster through Ray Data.

Both cut the examples into batches and explain each batch whole, with one
`Explainer` per device or worker, so a batch's maps are those of one
`Explainer.attribute` call on it, wherever it runs: the same bits as one
process explaining the same batches in turn (SmoothGrad's noise is drawn per
batch as `Explainer.attribute` with `batch_size` draws it: the batch
starting at row R from ``[seed, R]``, `batching.smoothgrad_seed`).

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

  A model of several inputs takes ``columns=`` instead of ``column=``: a
  list of columns in the model's order, or a dict {input name: column}
  (``columns={"image": "pixels", "meta": "meta"}``), and gives a maps
  column per input, ``maps/NAME`` (``maps/image``, ``maps/meta``).

  Ray Data was chosen over Apache Beam (RunInference) because it installs
  beside both supported TensorFlow releases without changing their
  protobuf (Beam 2.77 requires protobuf below 7, and TensorFlow 2.21 runs
  on 7; see the attribution guide's "Scale out" section for the measured
  dependency sets). Nothing here imports Ray: the class is a plain callable
  on a dict of NumPy arrays.

Models of several inputs: `attribute_on_devices` takes `x` as a list (the
model's order) or a dict (by input name) of arrays, cuts every input and
a baseline per input at the same rows (`scale_out_several`: inputs of
different numbers of examples are refused, naming each input and its
count) and returns the maps in that structure.
"""

import threading

import numpy as np
import tensorflow as tf

from graph_override.attribution import batching, engine, scale_out_several, several
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


def attribute_on_devices(explainer, method, x, target=None, *, batch_size, strategy=None,
                         **options):
    """`method`'s maps of `x`, batch by batch, on every device of `strategy`.

    Args:
      explainer: an `Explainer` (its mode, rules and caches serve every
        device).
      method, target, **options: as `Explainer.attribute`; a target array
        and a baseline with one row per example are cut with the batches
        (for several inputs, a baseline per input: each cut where it has its
        input's shape).
      x: the examples (an array), or for a model of several inputs a list of
        them in the model's order or a dict keyed by input names (arrays,
        memory-mapped ``.npy`` files or sources; every input cut at the same
        rows: `scale_out_several`).
      batch_size: examples per batch.
      strategy: a `tf.distribute.Strategy` whose ``extended.worker_devices``
        are used; None: `MirroredStrategy` over `local_devices`.

    Returns:
      One `Attribution` for all of `x`, the batches in order (the maps of
      several inputs in x's structure, a list or dict): the same bits as
      ``explainer.attribute(method, x, target, batch_size=batch_size,
      **options)`` in one process.

    Raises:
      AttributionError: not an Explainer, a bad batch size, inputs of
        different numbers of examples (naming each input and its count), or
        what ``explainer.attribute`` refuses.
    """
    if not isinstance(explainer, engine.Explainer):
        raise AttributionError("attribute_on_devices: expected an Explainer, got %s"
                               % type(explainer).__name__)
    options = batching.with_seed(method, options)  # one seed for the run
    rows = (scale_out_several.SeveralRows(explainer, x, options) if several.is_several(x)
            else _OneInput(x, options))
    spans = batches(rows.count, batch_size)
    if strategy is None:
        strategy = tf.distribute.MirroredStrategy(local_devices())
    devices = list(strategy.extended.worker_devices)
    results, errors = [None] * len(spans), []

    def work(device, mine):
        try:
            with tf.device(device):
                for i in mine:
                    start, stop = spans[i]
                    part = rows.options(start, stop)
                    if method == "smoothgrad":
                        part = dict(part, seed=batching.smoothgrad_seed(options["seed"],
                                                                        start))
                    results[i] = explainer.attribute(
                        method, rows.inputs(start, stop),
                        _target_part(target, start, stop, rows.count), **part)
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
    if not results:
        raise AttributionError("x holds no examples")
    return batching.join(results)


class _OneInput:
    """The examples of a model of one input (an array) and the options of a
    method, cut batch by batch (`SeveralRows`'s twin)."""

    def __init__(self, x, options):
        self.x, self._options = np.asarray(x), options
        self.count = self.x.shape[0] if self.x.ndim else 0

    def inputs(self, start, stop):
        return self.x[start:stop]

    def options(self, start, stop):
        return {k: _option_part(k, v, start, stop, self.x.shape)
                for k, v in self._options.items()}


class ExplainBatches:
    """A batch function for Ray Data's ``map_batches``: the maps of each
    batch (a dict of NumPy arrays) added as columns.

    Args:
      model, inputs, outputs, rules, allow_ops, mode: as `Explainer` (a
        model that pickles: a GraphDef message or a path every worker can
        read).
      method: the method's name; **options its options (as
        `Explainer.attribute`; for several inputs, a baseline per input as
        a list or dict, as it takes them).
      column: the column of the inputs of a model of one input (None: "x").
      columns: for a model of several inputs, their columns: a list in the
        model's order (``["a", "b"]``) or a dict {input name: column}
        (``{"image": "pixels", "meta": "meta"}``); not with `column`.
      target_column: a column of int classes, one per example; None: each
        example's argmax.
      threads: TensorFlow's intra-op threads in this worker (set before it
        runs anything), so that several workers on one machine share its
        cores instead of each taking all of them; None: TensorFlow's default.

    Each call returns the batch with ``outputs``, (where the method has
    them) ``targets`` and ``delta`` added, and the maps: ``maps`` for a model
    of one input, else a column per input, ``maps/NAME`` (NAME the model's
    input name without ":0", e.g. ``maps/image``; Grad-CAM's maps, a
    layer's, stay ``maps``). SmoothGrad draws each batch's noise from its
    `seed` as given: a Ray batch does not know its rows' place in the data
    set, so its maps are fixed by the seed and the batches Ray forms, not
    those of `attribute_on_devices` or one process (every other method's
    are).
    """

    def __init__(self, model, method, *, inputs=None, outputs=None, rules=(), allow_ops=(),
                 mode="exact", column=None, columns=None, target_column=None, threads=None,
                 **options):
        self.columns = scale_out_several.check_columns(column, columns)
        if threads is not None:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(int(threads))
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:  # TensorFlow already runs in this process
                pass
        self.explainer = engine.Explainer(model, inputs=inputs, outputs=outputs, rules=rules,
                                          allow_ops=allow_ops, mode=mode)
        self.method, self.target_column = method, target_column
        self.options = options

    @property
    def column(self):
        """The column of a model of one input (None where `columns` names several)."""
        return self.columns if isinstance(self.columns, str) else None

    def __call__(self, batch):
        x = scale_out_several.read_columns(batch, self.columns)
        target = None if self.target_column is None else np.asarray(batch[self.target_column])
        result = self.explainer.attribute(self.method, x, target, **self.options)
        out = dict(batch, outputs=result.outputs)
        out.update(scale_out_several.maps_columns(self.explainer, x, result.maps))
        for name in ("targets", "delta"):
            if getattr(result, name) is not None:
                out[name] = getattr(result, name)
        return out
