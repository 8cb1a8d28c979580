"""Models of several inputs: the inputs, given as a list or a dict, packed
side by side into one array of one row per example, so that every method
runs on one array as it does for a model of one input; the maps unpacked
into the inputs' structure.

Each input is flattened per example and the flat inputs are concatenated
in the model's order: an example of inputs a [N, 2, 2] and b [N, 3] is a row
of 7 values, a's four first. A method's map of that row, split and reshaped,
is the maps of a and b, and these are the maps of the same model written
with one input, the concatenation (the gradient of a model of several
inputs is the gradient with respect to each). A baseline is packed the same
way: one per input (None, a number, one example's shape or the input's
shape), or one number or None for all.

Example:
  >>> import numpy as np
  >>> from graph_override.attribution import several
  >>> packed, arrays = several.arrange({"b": np.ones((2, 3)), "a": np.zeros((2, 2, 2))},
  ...                                  ["a", "b"])
  >>> packed.pack(arrays).shape, packed.segments
  ((2, 7), [(0, 4), (4, 7)])
  >>> sorted(packed.structure(packed.unpack(packed.pack(arrays))))
  ['a', 'b']
"""

import numpy as np

from graph_override.errors import AttributionError

__all__ = ["Packed", "arrange", "is_several", "plain_name"]


def is_several(x):
    """True for inputs given as a list, tuple or dict (several inputs)."""
    return isinstance(x, (list, tuple, dict))


def plain_name(name):
    """A tensor name without its ":0" (``"a:0"`` -> ``"a"``)."""
    return name[:-2] if isinstance(name, str) and name.endswith(":0") else name


class Packed:
    """How several inputs are packed into one array (see the module
    docstring).

    Attributes:
      names: the model's input names, in its order.
      keys: the keys of the caller's dict for each input, or None for a
        list (the maps come back in the same structure).
      shapes: each input's shape per example.
      dtype: the inputs' dtype.
      segments: (start, stop) of each input's columns in a packed row.
    """

    def __init__(self, names, keys, shapes, dtype):
        self.names, self.keys = tuple(names), None if keys is None else tuple(keys)
        self.shapes, self.dtype = tuple(tuple(s) for s in shapes), np.dtype(dtype)
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        ends = np.cumsum([0] + sizes)
        self.segments = [(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])]

    def key(self):
        """What the traced model depends on: names, shapes, dtype, structure."""
        return (self.names, self.keys, self.shapes, self.dtype.str)

    def pack(self, arrays):
        """One [N, total] array of the inputs `arrays` (the model's order)."""
        n = arrays[0].shape[0]
        return np.concatenate([np.asarray(a).reshape(n, -1) for a in arrays],
                              axis=1).astype(self.dtype, copy=False)

    def unpack(self, packed):
        """The inputs (the model's order) of the packed array `packed`."""
        n = packed.shape[0]
        return [np.ascontiguousarray(packed[:, a:b]).reshape((n,) + shape)
                for (a, b), shape in zip(self.segments, self.shapes)]

    def structure(self, arrays):
        """`arrays` (the model's order) as the caller gave the inputs: a list,
        or a dict with the caller's keys."""
        return list(arrays) if self.keys is None else dict(zip(self.keys, arrays))

    def baseline(self, baseline, arrays, per_input):
        """The packed baseline: `baseline` None or a number for every input,
        or one per input in the inputs' structure, each as `per_input(value,
        array, what)` makes it (an array of the input's shape)."""
        if baseline is None or (not is_several(baseline) and np.ndim(baseline) == 0):
            values = [baseline] * len(arrays)
        else:
            values = self._in_order(baseline, "baseline")
        return self.pack([per_input(v, a, "baseline for input %s" % name)
                          for v, a, name in zip(values, arrays, self.names)])

    def ordered(self, given, what):
        """The values of `given` (a list in the model's order, or a dict keyed
        by input names) in the model's order; AttributionError naming the
        inputs for anything else."""
        return self._in_order(given, what)

    def _in_order(self, given, what):
        """The values of `given` (a list or dict like the inputs) in the
        model's order."""
        if isinstance(given, dict):
            found = _by_name(given, self.names, what)
            return [given[k] for k in found]
        if not isinstance(given, (list, tuple)):
            raise AttributionError(
                "%s: the model has %d inputs (%s); give one %s per input (a list, or a "
                "dict keyed by their names), or None or a number for all" % (
                    what, len(self.names), ", ".join(self.names), what))
        if len(given) != len(self.names):
            raise AttributionError("%s has %d values; the model has %d inputs (%s)" % (
                what, len(given), len(self.names), ", ".join(self.names)))
        return list(given)


def _by_name(given, names, what):
    """The keys of the dict `given` for each name of `names` (a key may
    leave out the ":0" of a tensor name)."""
    keys = []
    for name in names:
        matches = [k for k in given if k == name or plain_name(k) == plain_name(name)]
        if not matches:
            raise AttributionError(
                "%s has no array for the input %s (its keys: %s); give one per input of "
                "the model: %s" % (what, name, ", ".join(repr(k) for k in given),
                                   ", ".join(names)))
        keys.append(matches[0])
    extra = [k for k in given if k not in keys]
    if extra:
        raise AttributionError(
            "%s has %s, which the model does not take as an input; its inputs: %s" % (
                what, ", ".join("an array for %r" % k for k in extra), ", ".join(names)))
    return keys


def arrange(x, names, as_array=None):
    """(`Packed`, the inputs in the model's order) of the inputs `x` (a
    list or tuple in the model's order, or a dict keyed by input names) of
    a model whose inputs are `names`; `as_array(value, what)` makes each an
    ndarray (default `np.asarray`).

    Raises:
      AttributionError: not one array per input (a count or a name that
        does not match), inputs of different numbers of examples or of
        different dtypes; the message names the input.
    """
    names = [str(n) for n in names]
    as_array = as_array or (lambda value, what: np.asarray(value))
    if isinstance(x, dict):
        keys = _by_name(x, names, "x")
        arrays = [as_array(x[k], "x[%r]" % (k,)) for k in keys]
        labels = ["x[%r]" % (k,) for k in keys]
    elif isinstance(x, (list, tuple)):
        if len(x) != len(names):
            raise AttributionError(
                "x has %d arrays; the model has %d input(s) (%s): give one array per "
                "input, in that order, or a dict keyed by their names" % (
                    len(x), len(names), ", ".join(names)))
        keys = None
        arrays = [as_array(v, "x[%d] (input %s)" % (i, n)) for i, (v, n) in
                  enumerate(zip(x, names))]
        labels = ["x[%d] (input %s)" % (i, n) for i, n in enumerate(names)]
    else:
        raise AttributionError(
            "the model has %d inputs (%s): give x as a list of %d arrays in that order, "
            "or a dict keyed by their names" % (len(names), ", ".join(names), len(names)))
    for array, label in zip(arrays, labels):
        if array.ndim == 0:
            raise AttributionError("%s: expected a batch of inputs (first dimension the "
                                   "examples), got a scalar" % label)
    counts = [a.shape[0] for a in arrays]
    if len(set(counts)) > 1:
        raise AttributionError(
            "the inputs have different numbers of examples: %s; every input needs one "
            "row per example (the first dimension)" % ", ".join(
                "%s %d" % (label, n) for label, n in zip(labels, counts)))
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise AttributionError(
            "the inputs have different dtypes: %s; give them one float dtype" % ", ".join(
                "%s %s" % (label, a.dtype) for label, a in zip(labels, arrays)))
    return Packed(names, keys, [a.shape[1:] for a in arrays], arrays[0].dtype), arrays
