"""The picture `graph-override explain --png` draws for a model of several
inputs: one row per example (the first `_picture.MAX_ROWS`) and, for each
input in the model's order, two panels, the input and its map, each drawn
by `_picture`'s rules (an image as an image, its map summed over the
channels; a vector as bars; one value as one bar). The columns are titled
with the inputs' names (without ":0").

One colour scale per example, shared by its inputs: the largest |value|
drawn in the row (an image map summed over its channels, a vector map as it
is; finite values only) ends every colour bar and bar axis of the row, so
the row shows how the relevance of one example is split between its
inputs. The scale is diverging, centred at 0 (red positive, blue negative,
white zero), where any map of the row has a negative value, else from 0
(white) to the largest (red); a row of maps that are all 0 is scaled to 1.
The inputs are drawn each on its own scale, as `_picture` draws them.

`layout` computes the grid without matplotlib, `draw` draws it.

Example:
  >>> import numpy as np
  >>> from graph_override.commands import _picture_several
  >>> grid = _picture_several.layout(
  ...     [np.ones((2, 4, 4, 1)), np.ones((2, 3))], [np.ones((2, 4, 4, 1)), -np.ones((2, 3))],
  ...     names=["image:0", "meta:0"], method="saliency")
  >>> grid.rows, grid.columns, grid.titles
  (2, 4, ['image', 'saliency map of image', 'meta', 'saliency map of meta'])
  >>> [panel.kind for panel in grid.panels[0]], grid.panels[0][1].scale
  (['image', 'heat', 'bars', 'bars'], ('RdBu_r', -1.0, 1.0))
"""

import collections
import io

import numpy as np

from graph_override.commands import _picture

__all__ = ["Layout", "Panel", "draw", "figure_size", "in_order", "layout", "row_scale"]

Panel = collections.namedtuple("Panel", "kind values scale")
Panel.__doc__ = """One panel: `kind` "image" or "bars" (an input), "heat" or "bars" (a
map); `values` what is drawn (a map: `_picture.map_values`); `scale` the
row's (colormap, low, high) for a map, None for an input."""

Layout = collections.namedtuple("Layout", "rows columns titles labels panels count")
Layout.__doc__ = """The grid `draw` draws: `rows` examples of `count`, `columns` panels (two
per input), the column `titles`, the row `labels` (example and target) and
`panels[row][column]`."""


def in_order(value, names):
    """The arrays of `value` (a list in the model's order, or a dict keyed by
    input names with or without their ":0") in the order of `names`; None
    for a name the dict has no array for."""
    from graph_override.attribution.several import plain_name  # pylint: disable=import-outside-toplevel
    if not isinstance(value, dict):
        return list(value)
    keys = [next((k for k in value if k == name or plain_name(k) == plain_name(name)), None)
            for name in names]
    return [None if k is None else value[k] for k in keys]


def row_scale(maps):
    """(colormap, low, high) shared by the maps of one example, each as
    `_picture.map_values` gives it (see the module docstring)."""
    finite = [m[np.isfinite(m)] for m in maps]
    largest = max((float(np.max(np.abs(m))) for m in finite if m.size), default=0.0)
    largest = largest if largest > 0 else 1.0
    if any((m < 0).any() for m in finite):
        return "RdBu_r", -largest, largest
    return "Reds", 0.0, largest


def _row(examples, maps):
    shown = [_picture.map_values(m) for m in maps]
    scale = row_scale(shown)
    panels = []
    for example, values in zip(examples, shown):
        example = np.atleast_1d(np.asarray(example))
        panels.append(Panel("bars" if example.ndim == 1 else "image", example, None))
        panels.append(Panel("bars" if values.ndim == 1 else "heat", values, scale))
    return panels


def layout(x, maps, *, names=None, method, targets=None):
    """The `Layout` of the inputs `x` beside their `maps` (each a list in the
    model's order or a dict keyed by input names; `names` the model's input
    names, default the dict's keys or input_0, input_1, ...)."""
    from graph_override.attribution.several import plain_name  # pylint: disable=import-outside-toplevel
    if names is None:
        names = list(maps) if isinstance(maps, dict) else [
            "input_%d" % i for i in range(len(maps))]
    xs, heats = in_order(x, names), in_order(maps, names)
    count = len(heats[0])
    rows = min(count, len(xs[0]), _picture.MAX_ROWS)
    titles = [t for n in names for t in (plain_name(n), "%s map of %s" % (method,
                                                                          plain_name(n)))]
    labels = ["example %d%s" % (i, "" if targets is None else ", target %d" % int(targets[i]))
              for i in range(rows)]
    return Layout(rows, len(titles), titles, labels,
                  [_row([a[i] for a in xs], [m[i] for m in heats]) for i in range(rows)], count)


def figure_size(rows, columns):
    """(width, height) in inches of the figure of `rows` examples and
    `columns` panels (`_picture.PANEL_SIZE` each, and the title)."""
    return _picture.PANEL_SIZE[0] * columns, _picture.PANEL_SIZE[1] * rows + 0.6


def draw(x, maps, *, names=None, method, targets=None, title=""):
    """The PNG bytes of the inputs `x` beside their `maps` (see `layout`;
    `title`: what else the title says, the model's file name)."""
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    grid = layout(x, maps, names=names, method=method, targets=targets)
    figure = Figure(figsize=figure_size(grid.rows, grid.columns))
    axes = figure.subplots(grid.rows, grid.columns, squeeze=False)
    for i, row in enumerate(grid.panels):
        for j, panel in enumerate(row):
            if panel.scale is None:
                _picture.draw_input(axes[i][j], panel.values)
            else:
                _picture.draw_map(figure, axes[i][j], panel.values, panel.scale)
            if i == 0:
                axes[i][j].set_title(grid.titles[j], fontsize=9)
        axes[i][0].set_ylabel(grid.labels[i], fontsize=9)
    more = (" (first %d of %d examples)" % (grid.rows, grid.count)
            if grid.count > grid.rows else "")
    figure.suptitle("%s%s%s\none colour scale per example (row), shared by its inputs" % (
        method, " - " + title if title else "", more), fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_picture.DPI)
    return buffer.getvalue()
