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
model of several inputs (a list or dict of arrays, memory-mapped ``.npy``
files or sources: `several_sources`) are cut together: every input along its
first axis at the same rows (all must hold the same number of examples), a
baseline per input cut likewise where it has one row per example; the
batches' maps are joined per input, in the inputs' structure. The default
batch size then counts the values of all the inputs of an example. A warning
that several batches raise is given once, and that the maps vanish only
where every batch's maps vanish.
"""

import warnings

import numpy as np

from graph_override.attribution import checks, methods, models, several, several_sources, sources
from graph_override.errors import AttributionError

__all__ = ["DEFAULT_VALUES", "MAX_DEFAULT_BATCH", "as_source", "attribute", "batch_options",
           "batch_size_for", "batches", "check_batch_size", "default_batch_size", "fixed_batch",
           "join", "ndims", "progress_bar", "smoothgrad_seed", "warn_once", "with_seed"]

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


def _cut(value, ndim, start, stop, n):
    """`value` cut to the rows [start, stop) where it holds one row per
    example of inputs of `ndim` dimensions (of `n` examples), else as it is."""
    if value is not None and n is not None and np.ndim(value) == ndim and \
            _per_example(value, n):
        return np.asarray(value)[start:stop]
    return value


def _cut_baseline(baseline, x_ndim, start, stop, n):
    """A baseline per input (a list or dict, as the inputs were given; a dict
    key may leave out a tensor name's ":0") cut input by input."""
    if isinstance(x_ndim, dict):
        by_name = {several.plain_name(k): v for k, v in x_ndim.items()}
        ndims = (lambda key, i: by_name.get(several.plain_name(key), -1))
    else:
        ndims = (lambda key, i: x_ndim[i] if i < len(x_ndim) else -1)
    if isinstance(baseline, dict):
        return {k: _cut(v, ndims(k, i), start, stop, n)
                for i, (k, v) in enumerate(baseline.items())}
    return [_cut(v, ndims(None, i), start, stop, n) for i, v in enumerate(baseline)]


def ndims(x):
    """The number of dimensions of the batch `x`, or for several inputs
    theirs in the same structure (a list or dict): what `batch_options`
    compares a baseline with."""
    if isinstance(x, dict):
        return {k: np.ndim(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [np.ndim(v) for v in x]
    return x.ndim


def batch_options(method, options, target, start, stop, n, x_ndim):
    """(target, options) for the rows [start, stop) of `n` examples (None:
    not known, a stream): per-example arrays cut, SmoothGrad's seed set
    for the batch. `x_ndim` is `ndims` of a batch (for several inputs, a
    list or dict: a baseline per input is cut input by input)."""
    if n is not None and not isinstance(target, (int, np.integer)) and _per_example(target, n):
        target = np.asarray(target)[start:stop]
    options = dict(options)
    baseline = options.get("baseline")
    if baseline is not None and several.is_several(baseline):
        if several.is_several(x_ndim):  # one baseline per input, each cut as its input
            options["baseline"] = _cut_baseline(baseline, x_ndim, start, stop, n)
    elif baseline is not None and not several.is_several(x_ndim):
        options["baseline"] = _cut(baseline, x_ndim, start, stop, n)
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
    if fixed is not None and (isinstance(source, sources.ArraySource)
                              or getattr(source, "in_memory", False)):
        return max(1, source.count)
    return default_batch_size(source.example_shape, fixed)


def batches(explainer, method, data, target=None, *, batch_size=None, start=0, stop=None,
            progress=False, **options):
    """Yields (first row, `Attribution`) per batch of `data` (an array, a
    ``tf.data.Dataset`` or a `sources` source) from row `start` to `stop`
    (None: the end), each batch `explainer.run_batch` of `batch_size` rows
    (None: `batch_size_for`): the memory of one batch, whatever the number
    of examples. `progress`: a progress bar on stderr (tqdm), or its label.
    For a model of several inputs, `data` is a list or dict of them (or a
    `several_sources` source), and each batch's maps are in that structure.
    """
    source = as_source(explainer, data)
    size = batch_size_for(explainer, source, batch_size)
    n = source.count
    options = with_seed(method, options)
    bar = progress_bar(progress, (stop if stop is not None else n), start)
    try:
        for first, x in source.batches(size, start, stop):
            rows = several_sources.rows(x)
            batch_target, batch_opts = batch_options(method, options, target, first,
                                                     first + rows, n, ndims(x))
            result = explainer.run_batch(method, x, batch_target, batch_opts)
            if bar is not None:
                bar.update(rows)
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


def as_source(explainer, data):
    """`data` as a source (`several_sources.as_source`), the model's input
    names in the message of inputs whose numbers of examples differ."""
    names = None
    if several.is_several(data):
        try:
            names = explainer.input_names(data)
        except Exception:  # pylint: disable=broad-except  # names only label a message
            names = None
    elif _takes_one_input(explainer):  # a dataset of (x, y) pairs: refused, saying how
        return sources.as_source(data)
    return several_sources.as_source(data, names)


def _takes_one_input(explainer):
    """Whether the model is known to take one input: a graph of one input
    name, a Keras model of one input (a TF2 callable takes what x gives)."""
    try:
        graph = explainer.model_graph(None)
    except AttributeError:  # traced for each input's shape: not a fixed graph
        inputs = models._keras_inputs(explainer.model)  # pylint: disable=protected-access
        return inputs is not None and len(inputs) == 1
    return len(graph.names) == 1


def join(results):
    """One `Attribution` of the per-batch `results` (in row order); maps of
    several inputs (a list or dict per batch) joined input by input."""
    first = results[0]

    def cat(name):
        parts = [getattr(r, name) for r in results]
        if any(p is None for p in parts):
            return None
        if isinstance(parts[0], dict):
            return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        if isinstance(parts[0], (list, tuple)):
            return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]
        return np.concatenate(parts)

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
    source = as_source(explainer, data)
    size = batch_size_for(explainer, source, batch_size)
    if not progress and source.count is not None and source.count <= size:
        if isinstance(source, sources.ArraySource):
            return explainer.run_batch(method, source.array if data is source else data,
                                       target, options)
        if several.is_several(data) and source.in_memory:  # all in one batch, as given
            return explainer.run_batch(method, source.structure(
                [p.array for p in source.parts]), target, options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [r for _, r in batches(explainer, method, source, target, batch_size=size,
                                         progress=progress, **options)]
    warn_once(caught, len(results))
    if not results:
        raise AttributionError("the data holds no examples")
    return join(results)
