"""Bounded memory: a method run over its inputs batch by batch.

Every method runs its inputs through the model in one call (Integrated
Gradients and SmoothGrad in one call per step or sample), so the memory of
a call grows with the number of examples. `attribute` splits the examples
into batches of `batch_size` rows, runs the method on each and joins the
results; `batches` yields them one at a time (the memory of one batch,
whatever the number of examples), from an array, a memory-mapped ``.npy``
or any `graph_override.attribution.sources` source.

The default batch size comes from the model's input: as many rows as hold
``DEFAULT_VALUES`` (2**21) input values, at least 1 and at most
``MAX_DEFAULT_BATCH`` (256); a model whose input has a fixed batch dimension
runs batches of that size. Examples in different batches never meet: each
batch's maps are those of the method called on that batch alone, bit for
bit, and so the same batch size gives the same bits, in one process, in
shards or resumed. Against one call on all the inputs they agree to float
rounding: TensorFlow's kernels may pick another algorithm for another number
of rows (a MatMul rounds its last bit differently for 1, 8 or 20 rows on
CPU), so they are the same bits only where the kernels do not. SmoothGrad
draws its noise per batch: its first batch from `seed`, as one call would,
the batch starting at row R from the seed ``[seed, R]``; its maps are fixed
by the seed and the batch size. Without a seed, one is drawn for the run.

Per-example options are cut with the batch: a target array (one class per
example) and a baseline of x's shape; a number, an int class, a callable,
one example's baseline are given to every batch as they are. The inputs of a
model of several inputs (a list or dict of arrays) run as one batch. A warning
that several batches raise is given once, and that the maps vanish only
where every batch's maps vanish.
"""

import warnings

import numpy as np

from graph_override.attribution import checks, methods, models, several, sources
from graph_override.errors import AttributionError

__all__ = ["DEFAULT_VALUES", "MAX_DEFAULT_BATCH", "attribute", "batch_options",
           "batch_size_for", "batches", "check_batch_size", "default_batch_size", "fixed_batch",
           "join", "progress_bar", "smoothgrad_seed", "warn_once", "with_seed"]

DEFAULT_VALUES = 2 ** 21
MAX_DEFAULT_BATCH = 256


def default_batch_size(example_shape, fixed=None):
    """The batch size for examples of `example_shape` (the input without its
    batch dimension): `fixed` (a fixed batch dimension of the model's
    input), else DEFAULT_VALUES // values per example, within
    [1, MAX_DEFAULT_BATCH]."""
    if fixed is not None:
        return int(fixed)
    values = int(np.prod([d if d else 1 for d in example_shape], dtype=np.int64))
    return max(1, min(MAX_DEFAULT_BATCH, DEFAULT_VALUES // max(1, values)))


def fixed_batch(graph):
    """The fixed batch dimension of the `ModelGraph`'s input placeholder, or
    None (free, or not a placeholder with a shape)."""
    name = graph.input.split(":")[0]
    node = next((n for n in graph.graph_def.node if n.name == name), None)
    if node is None or "shape" not in node.attr or node.attr["shape"].shape.unknown_rank:
        return None
    dims = node.attr["shape"].shape.dim
    return int(dims[0].size) if dims and dims[0].size >= 0 else None


def check_batch_size(batch_size):
    """`batch_size` (an int >= 1, or None for the default); AttributionError
    for anything else."""
    if batch_size is None:
        return None
    if (not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool)
            or batch_size < 1):
        raise AttributionError("batch_size=%r: expected an int >= 1 (examples per batch) or "
                               "None (chosen from the model's input size)" % (batch_size,))
    return int(batch_size)


def smoothgrad_seed(seed, start):
    """The seed SmoothGrad's batch starting at row `start` draws from."""
    return seed if start == 0 else [int(seed), int(start)]


def _per_example(value, n):
    """Whether `value` holds one entry per example (of n)."""
    if value is None or callable(value) or isinstance(value, (str, bytes)):
        return False
    shape = getattr(value, "shape", None)
    if shape is None and isinstance(value, (list, tuple)):
        shape = np.shape(value)
    return shape is not None and len(shape) >= 1 and shape[0] == n


def batch_options(method, options, target, start, stop, n, x_ndim):
    """(target, options) for the rows [start, stop) of `n` examples (None:
    not known, a stream): per-example arrays cut, SmoothGrad's seed set
    for the batch."""
    if n is not None and not isinstance(target, (int, np.integer)) and _per_example(target, n):
        target = np.asarray(target)[start:stop]
    options = dict(options)
    baseline = options.get("baseline")
    if (baseline is not None and n is not None and np.ndim(baseline) == x_ndim
            and _per_example(baseline, n)):
        options["baseline"] = np.asarray(baseline)[start:stop]
    if method == "smoothgrad":
        options["seed"] = smoothgrad_seed(options["seed"], start)
    return target, options


def with_seed(method, options):
    """`options`, with SmoothGrad's seed drawn for the run where none is given."""
    if method == "smoothgrad" and options.get("seed") is None:
        return dict(options, seed=int(np.random.SeedSequence().entropy % 2 ** 63))
    return options


def batch_size_for(explainer, source, batch_size=None):
    """`batch_size` checked, or the default for `source`: a fixed batch
    dimension of the model's input (an array then runs as one batch, as the
    model requires), else `default_batch_size` of an example's shape."""
    batch_size = check_batch_size(batch_size)
    if batch_size is not None:
        return batch_size
    model = explainer.model
    fixed = (fixed_batch(explainer.model_graph(None))
             if model is None or models.is_graph_model(model) else None)
    if fixed is not None and isinstance(source, sources.ArraySource):
        return max(1, source.count)
    return default_batch_size(source.example_shape, fixed)


def batches(explainer, method, data, target=None, *, batch_size=None, start=0, stop=None,
            progress=False, **options):
    """Yields (first row, `Attribution`) per batch of `data` (an array, a
    ``tf.data.Dataset`` or a `sources` source) from row `start` to `stop`
    (None: the end), each batch `explainer.run_batch` of `batch_size` rows
    (None: `batch_size_for`): the memory of one batch, whatever the number
    of examples. `progress`: a progress bar on stderr (tqdm), or its label.
    """
    source = sources.as_source(data)
    size = batch_size_for(explainer, source, batch_size)
    n = source.count
    options = with_seed(method, options)
    bar = progress_bar(progress, (stop if stop is not None else n), start)
    try:
        for first, x in source.batches(size, start, stop):
            batch_target, batch_opts = batch_options(method, options, target, first,
                                                     first + len(x), n, x.ndim)
            result = explainer.run_batch(method, x, batch_target, batch_opts)
            if bar is not None:
                bar.update(len(x))
            yield first, result
    finally:
        if bar is not None:
            bar.close()


def progress_bar(progress, total, start=0):
    """A tqdm bar on stderr of `total` examples from `start` (`progress` a
    label or True), or None (`progress` false)."""
    if not progress:
        return None
    import sys  # pylint: disable=import-outside-toplevel
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel
    return tqdm(total=total, initial=start, unit="example", file=sys.stderr,
                desc=progress if isinstance(progress, str) else None, dynamic_ncols=True,
                leave=False)


def join(results):
    """One `Attribution` of the per-batch `results` (in row order)."""
    first = results[0]

    def cat(name):
        parts = [getattr(r, name) for r in results]
        return None if any(p is None for p in parts) else np.concatenate(parts)

    return methods.Attribution(maps=cat("maps"), method=first.method, targets=cat("targets"),
                               outputs=cat("outputs"), delta=cat("delta"))


def warn_once(caught, count):
    """Gives again the warnings `caught` over `count` batches: each message
    once, and that the maps vanish only where every batch's did."""
    vanishing = [w for w in caught if issubclass(w.category, checks.VanishingMapsWarning)]
    seen = set()
    for w in caught:
        key = (w.category, str(w.message))
        if key in seen or (w in vanishing and (len(vanishing) < count or w is not vanishing[0])):
            continue
        seen.add(key)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def attribute(explainer, method, data, target, batch_size, progress, options):
    """The `Attribution` of all of `data` (`Explainer.attribute`): one call
    where one batch holds it, else `batches` joined, each warning of the
    batches given once."""
    if several.is_several(data):  # a model of several inputs: one batch
        check_batch_size(batch_size)
        return explainer.run_batch(method, data, target, options)
    source = sources.as_source(data)
    size = batch_size_for(explainer, source, batch_size)
    if isinstance(source, sources.ArraySource) and not progress and source.count <= size:
        return explainer.run_batch(method, source.array if data is source else data, target,
                                   options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [r for _, r in batches(explainer, method, source, target, batch_size=size,
                                         progress=progress, **options)]
    warn_once(caught, len(results))
    if not results:
        raise AttributionError("the data holds no examples")
    return join(results)
