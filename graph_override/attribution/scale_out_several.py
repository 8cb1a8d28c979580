"""Scale-out for models of several inputs (`scale_out`): the inputs and
their per-example options cut at the same rows for each batch, and the
columns of a Ray Data batch read as the inputs and written back as maps.

- `SeveralRows`: the inputs of `scale_out.attribute_on_devices`, a list in
  the model's order or a dict keyed by input names (arrays, memory-mapped
  ``.npy`` files or any `sources` source: `several_sources.SeveralSource`,
  which refuses inputs of different numbers of examples, naming each input
  and its count). A baseline per input (a list in the model's order or a
  dict keyed by input names, as `Explainer.attribute` takes it) is cut
  input by input where it has one row per example of its input (the
  input's shape); None, a number or one example's shape serves every batch.
- `check_columns`, `read_columns` and `maps_columns`: `ExplainBatches`'s
  columns. ``column="x"`` is the input of a model of one input;
  ``columns=["a", "b"]`` the inputs in the model's order, and
  ``columns={"a": "col_a", "b": "col_b"}`` the column of each input by its
  name. The maps come back as one column per input, ``maps/NAME`` (NAME
  the model's input name without its ":0", as in `shards`), or ``maps``
  for one input (and for Grad-CAM, whose maps are a layer's).

Example:
  >>> from graph_override.attribution import scale_out_several
  >>> spec = scale_out_several.check_columns(None, {"a:0": "pixels", "b": "meta"})
  >>> sorted(scale_out_several.read_columns({"pixels": [[1.0]], "meta": [[2.0]]}, spec))
  ['a:0', 'b']
  >>> sorted(scale_out_several.maps_columns(None, None, {"a:0": 1, "b": 2}))
  ['maps/a', 'maps/b']
"""

import numpy as np

from graph_override.attribution import batching, several
from graph_override.errors import AttributionError

__all__ = ["SeveralRows", "check_columns", "maps_columns", "read_columns"]


class SeveralRows:
    """The inputs `x` of `explainer`'s model (a list or dict) and the
    `options` of a method, cut batch by batch (see the module docstring).

    Attributes:
      count: the number of examples (the same for every input).

    Raises:
      AttributionError: inputs of different numbers of examples (naming
        each input and its count), of unknown number (a stream), none, or a
        baseline that does not name the model's inputs.
    """

    def __init__(self, explainer, x, options):
        self.source = batching.as_source(explainer, x)
        self.count = self.source.count
        if self.count is None:
            raise AttributionError("x is a stream of unknown length; give arrays, "
                                   "memory-mapped .npy files or sources that know their "
                                   "number of examples")
        if self.count == 0:
            raise AttributionError("x holds no examples")
        first = self.inputs(0, 1)
        packed, _ = several.arrange(first, explainer.input_names(first))
        self.shapes = [(self.count,) + tuple(shape) for shape in packed.shapes]
        self._options = dict(options)
        baseline = self._options.get("baseline")
        if baseline is not None and several.is_several(baseline):
            # in the model's order: each input's baseline beside that input's shape
            self._options["baseline"] = packed.ordered(baseline, "baseline")

    def inputs(self, start, stop):
        """The inputs' rows [start, stop), as they were given (list or dict)."""
        return self.source.structure([next(part.batches(stop - start, start, stop))[1]
                                      for part in self.source.parts])

    def options(self, start, stop):
        """The options for the rows [start, stop): a baseline of an input's
        shape cut to them, every other value as it is."""
        baseline = self._options.get("baseline")
        if not isinstance(baseline, list):
            return self._options
        return dict(self._options, baseline=[
            np.asarray(value)[start:stop] if np.shape(value) == shape else value
            for value, shape in zip(baseline, self.shapes)])


def check_columns(column, columns):
    """The columns `ExplainBatches` reads: a column name (one input), a list
    of names (the model's inputs in order) or a dict {input name: column}."""
    if column is not None and columns is not None:
        raise AttributionError("ExplainBatches: give column= (the column of a model of one "
                               "input) or columns= (one per input), not both")
    if columns is None:
        column = "x" if column is None else column
        if not isinstance(column, str):
            raise AttributionError("ExplainBatches: column=%r: expected a column name"
                                   % (column,))
        return column
    strings = (list(columns) + list(columns.values()) if isinstance(columns, dict) else
               list(columns) if isinstance(columns, (list, tuple)) else [])
    if not strings or not all(isinstance(s, str) for s in strings):
        raise AttributionError(
            "ExplainBatches: columns=%r: expected a list of column names (one per input, "
            "in the model's order) or a dict {input name: column name}" % (columns,))
    return dict(columns) if isinstance(columns, dict) else list(columns)


def read_columns(batch, spec):
    """The model's inputs in the batch (a dict of arrays) as `spec`
    (`check_columns`) names them: an array, a list or a dict of arrays."""
    wanted = ([spec] if isinstance(spec, str) else
              list(spec.values()) if isinstance(spec, dict) else spec)
    missing = [c for c in dict.fromkeys(wanted) if c not in batch]
    if missing:
        raise AttributionError("ExplainBatches: the batch has no column %s (its columns: %s); "
                               "pass %s" % (", ".join(repr(c) for c in missing),
                                            ", ".join(sorted(map(str, batch))),
                                            "column=" if isinstance(spec, str) else
                                            "columns= naming a column for each input"))
    if isinstance(spec, str):
        return np.asarray(batch[spec])
    if isinstance(spec, dict):
        return {name: np.asarray(batch[c]) for name, c in spec.items()}
    return [np.asarray(batch[c]) for c in spec]


def maps_columns(explainer, x, maps):
    """{column: maps}: ``maps`` for one array of maps, else ``maps/NAME``
    per input, NAME the input's name without ":0" (for a list, the model's
    input names of `explainer` for `x`)."""
    if isinstance(maps, dict):
        names = list(maps)
        maps = list(maps.values())
    elif isinstance(maps, (list, tuple)):
        names = explainer.input_names(x)
    else:
        return {"maps": maps}
    return {"maps/" + str(several.plain_name(name)): m for name, m in zip(names, maps)}
