"""The examples of a model of several inputs, read a batch at a time.

`SeveralSource` holds one source per input (an array, a memory-mapped
``.npy`` (`sources.NpySource`), any `graph_override.attribution.sources`
source) and yields their batches together: every input cut along its first
axis at the same rows, as a list in the model's order or a dict keyed as
the caller keyed it. Every input must hold the same number of examples;
an `AttributionError` names each input and its count otherwise.

A ``tf.data.Dataset`` whose elements are tuples or dicts of tensors (one
per input, not batched) is `DatasetInputs`. A ``.npz`` file cannot be a
memory-mapped source: ``np.load(mmap_mode="r")`` maps ``.npy`` files only
and reads a ``.npz``'s members whole; give one ``.npy`` per input
(``NpySource`` each) to read a batch's rows only.

Example:
  >>> import numpy as np
  >>> from graph_override.attribution import several_sources
  >>> source = several_sources.as_source({"a": np.zeros((5, 2)), "b": np.ones((5, 3))})
  >>> source.count, [(first, sorted(x)) for first, x in source.batches(2, 0, 4)]
  (5, [(0, ['a', 'b']), (2, ['a', 'b'])])
"""

import numpy as np

from graph_override.attribution import several, sources
from graph_override.errors import AttributionError

__all__ = ["DatasetInputs", "SeveralSource", "as_source", "rows"]


def rows(x):
    """The number of examples of the batch `x` (an array, or a list or dict
    of the inputs' arrays)."""
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return len(x[0]) if len(x) else 0
    return len(x)


def _labels(keys, count, names):
    if keys is not None:
        return ["x[%r]" % (k,) for k in keys]
    names = list(names or [])
    return ["x[%d]%s" % (i, " (input %s)" % names[i] if i < len(names) else "")
            for i in range(count)]


class SeveralSource:
    """One source per input, batched together (see the module docstring).

    Args:
      parts: the inputs' sources or arrays, a list (the model's order) or a
        dict keyed by input names.
      names: the model's input names, for messages (optional).
    """

    def __init__(self, parts, names=None):
        self.keys = list(parts) if isinstance(parts, dict) else None
        values = list(parts.values()) if isinstance(parts, dict) else list(parts)
        if not values:
            raise AttributionError("no inputs given: give one array per input of the model")
        self.parts = [sources.as_source(v) for v in values]
        self.labels = _labels(self.keys, len(values), names)
        self.names = [str(k) for k in self.keys] if self.keys is not None else (
            [str(n) for n in names] if names and len(names) == len(values)
            else ["input_%d" % i for i in range(len(values))])
        counts = [p.count for p in self.parts]
        if len(set(counts)) > 1:
            raise AttributionError(
                "the inputs have different numbers of examples: %s; every input needs one "
                "row per example (the first dimension), the same number for all" % ", ".join(
                    "%s %s" % (label, "unknown" if n is None else n)
                    for label, n in zip(self.labels, counts)))
        self.count = counts[0]
        self.example_shapes = [tuple(p.example_shape) for p in self.parts]
        total = sum(int(np.prod([d if d else 1 for d in s], dtype=np.int64))
                    for s in self.example_shapes)
        self.example_shape = (total,)  # values per example, for the default batch size

    @property
    def in_memory(self):
        """Whether every input is an array (in memory or memory-mapped)."""
        return all(isinstance(p, sources.ArraySource) for p in self.parts)

    def structure(self, arrays):
        """`arrays` (one per input, in order) as the inputs were given."""
        return list(arrays) if self.keys is None else dict(zip(self.keys, arrays))

    def batches(self, batch_size, start=0, stop=None):
        """Yields (first row, the batch's inputs as given), every input cut at
        the same rows."""
        streams = [p.batches(batch_size, start, stop) for p in self.parts]
        for parts in zip(*streams):
            firsts = {first for first, _ in parts}
            lengths = {len(x) for _, x in parts}
            if len(firsts) > 1 or len(lengths) > 1:  # a stream that lied about its count
                raise AttributionError(
                    "the inputs' batches do not line up (%s): give inputs of one row per "
                    "example each" % ", ".join("%s rows %d-%d" % (label, f, f + len(x))
                                               for label, (f, x) in zip(self.labels, parts)))
            yield parts[0][0], self.structure([x for _, x in parts])

    def describe(self):
        """The inputs' descriptions in order, each with its ``input``: the
        caller's key, or the model's input name for a list."""
        return {"kind": "several", "inputs": [dict(p.describe(), input=name)
                                              for p, name in zip(self.parts, self.names)]}


class DatasetInputs:
    """A ``tf.data.Dataset`` whose elements are a tuple or a dict of tensors,
    one per input (not batched)."""

    def __init__(self, dataset):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        spec = dataset.element_spec
        specs = list(spec.values()) if isinstance(spec, dict) else list(spec)
        if not specs or not all(isinstance(s, tf.TensorSpec) for s in specs):
            raise AttributionError("the dataset's elements are %s; expected one tensor per "
                                   "input (a tuple or a dict of tensors)" % (spec,))
        self.dataset = dataset
        self.keys = list(spec) if isinstance(spec, dict) else None
        cardinality = int(dataset.cardinality())
        self.count = cardinality if cardinality >= 0 else None
        self.example_shapes = [tuple(s.shape.as_list()) for s in specs]
        total = sum(int(np.prod([d if d else 1 for d in s], dtype=np.int64))
                    for s in self.example_shapes)
        self.example_shape = (total,)
        self.in_memory = False

    def batches(self, batch_size, start=0, stop=None):
        """Yields (first row, the batch as a list or dict of arrays)."""
        stop = sources._check_start(start, stop, self.count)  # pylint: disable=protected-access
        data = self.dataset.skip(start)
        if stop is not None:
            data = data.take(stop - start)
        first = start
        for batch in data.batch(batch_size):
            if self.keys is None:
                arrays = [t.numpy() for t in batch]
            else:
                arrays = {k: batch[k].numpy() for k in self.keys}
            yield first, arrays
            first += rows(arrays)

    def describe(self):
        return {"kind": "tf.data.Dataset", "count": self.count,
                "inputs": self.keys or len(self.example_shapes),
                "element_shapes": [list(s) for s in self.example_shapes]}


def _is_dataset(data):
    return type(data).__name__.endswith("Dataset") and hasattr(data, "element_spec")


def as_source(data, names=None):
    """`data` as a source: a list or dict of inputs as a `SeveralSource`, a
    ``tf.data.Dataset`` of tuples or dicts as `DatasetInputs`, anything else
    as `sources.as_source` makes it."""
    if several.is_several(data):
        return SeveralSource(data, names)
    if _is_dataset(data):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        if not isinstance(data.element_spec, tf.TensorSpec):
            return DatasetInputs(data)
    return sources.as_source(data)
