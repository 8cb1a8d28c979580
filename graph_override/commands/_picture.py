"""The picture `graph-override explain --png` draws: each input beside its
attribution map, one row per example (matplotlib, imported only here).

An image example (height x width, with 1, 3 or 4 channels last) is shown as
it is (colour scaled to [0, 1]); its map is summed over the channels. A map
with negative values is drawn with a diverging colormap centred at 0 (red
positive, blue negative, white zero), scaled per example to its largest
absolute value; a map with none (saliency, Grad-CAM) from 0 to its maximum.
A vector example (one dimension; one value: one bar) is drawn as bars. An
example of more dimensions (a volume, a video) is not drawn: `rank_refusal`
says so before the model runs. A model of several inputs is drawn by
`_picture_several`, with these rules for each input.
"""

import io

import numpy as np

__all__ = ["DPI", "MAX_ROWS", "PANEL_SIZE", "draw", "draw_input", "draw_map", "map_values",
           "matplotlib_missing", "rank_refusal"]

MAX_ROWS = 16  # a taller figure is unreadable; the first MAX_ROWS examples are drawn
PANEL_SIZE = (3.2, 2.6)  # inches per panel, width and height
DPI = 80


def matplotlib_missing():
    """None, or what to do when matplotlib does not import."""
    try:
        import matplotlib  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        return ("--png needs matplotlib, which does not import (%s): install it with "
                "python -m pip install 'graph_override[scripts]' (or matplotlib), or "
                "leave out --png" % e)
    return None


def rank_refusal(label, shape):
    """None, or why the examples of per-example `shape` (of the input
    `label`) cannot be drawn: more than 3 dimensions."""
    if len(shape) <= 3:
        return None
    return ("--png cannot draw %s: its examples have shape %s (%d dimensions); it draws "
            "vectors (1 dimension, bars) and images (2, or 3 with the channels); leave out "
            "--png (the maps are in OUT) or save fewer dimensions per example" % (
                label, tuple(int(d) for d in shape), len(shape)))


def _image(example):
    """The example `example` (2 or 3 dimensions) as drawn: RGB scaled to
    [0, 1], or a 2-D array (other channels summed)."""
    if example.ndim == 3 and example.shape[-1] not in (1, 3, 4) and example.shape[0] in (1, 3):
        example = np.moveaxis(example, 0, -1)  # channels first
    if example.ndim == 3 and example.shape[-1] in (3, 4):
        rgb = example[..., :3].astype(np.float64)
        low, high = rgb.min(), rgb.max()
        return (rgb - low) / (high - low) if high > low else np.zeros_like(rgb)
    if example.ndim == 3:
        return example.sum(axis=-1)
    return example


def map_values(values):
    """The map `values` of one example as drawn (float64): an image map
    summed over its channels (first or last), one value as a vector of one."""
    values = np.atleast_1d(np.asarray(values, np.float64))
    if values.ndim == 3:
        if values.shape[-1] not in (1, 3, 4) and values.shape[0] in (1, 3):
            values = np.moveaxis(values, 0, -1)
        values = values.sum(axis=-1)
    return values


def _heat(values):
    """(array to draw, colormap, vmin, vmax)."""
    values = map_values(values)
    largest = float(np.max(np.abs(values))) if values.size else 0.0
    largest = largest if np.isfinite(largest) and largest > 0 else 1.0
    if (values < 0).any():
        return values, "RdBu_r", -largest, largest
    return values, "Reds", 0.0, largest


def _bars(axis, values, signed):
    colours = np.where(values >= 0, "#b2182b", "#2166ac") if signed else "#b2182b"
    axis.bar(np.arange(values.size), values.ravel(), color=colours)
    axis.axhline(0.0, color="black", linewidth=0.5)


def _aspect(shown):
    """A wide 2-D array (4 times wider than high) fills its panel; else square pixels."""
    return "auto" if shown.ndim == 2 and shown.shape[0] * 4 < shown.shape[1] else "equal"


def draw_input(axis, example):
    """Draws one example on `axis`: a vector (or one value) as bars, else as
    an image (`_image`)."""
    example = np.atleast_1d(np.asarray(example))
    if example.ndim == 1:
        _bars(axis, example, signed=True)
        return
    shown = _image(example)
    axis.imshow(shown, cmap=None if shown.ndim == 3 else "gray", interpolation="nearest",
                aspect=_aspect(shown))
    axis.set_xticks([])
    axis.set_yticks([])


def draw_map(figure, axis, heat, scale=None):
    """Draws one example's map `heat` on `axis` (`map_values`): a vector as
    bars, else as an image with a colour bar; `scale` (colormap, low, high)
    is a colour scale shared with other maps (bars: their axis), else the
    map's own (`_heat`)."""
    values, cmap, low, high = _heat(heat)
    if scale is not None:
        cmap, low, high = scale
    if values.ndim == 1:
        _bars(axis, values, signed=(values < 0).any())
        if scale is not None:
            axis.set_ylim(low * 1.05, high * 1.05)
        return
    picture = axis.imshow(values, cmap=cmap, vmin=low, vmax=high, interpolation="nearest",
                          aspect=_aspect(values))
    figure.colorbar(picture, ax=axis, fraction=0.046, pad=0.04)
    axis.set_xticks([])
    axis.set_yticks([])


def draw(x, maps, *, method, targets=None, title=""):
    """The PNG bytes of the inputs `x` beside their `maps`.

    Args:
      x: the examples (first dimension).
      maps: their attribution maps (the same first dimension).
      method: the method's name, for the title.
      targets: the class explained per example, or None.
      title: what else the title says (the model's file name).
    """
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    rows = min(len(x), MAX_ROWS)
    figure = Figure(figsize=(2 * PANEL_SIZE[0], PANEL_SIZE[1] * rows + 0.6))
    axes = figure.subplots(rows, 2, squeeze=False)
    for i in range(rows):
        left, right = axes[i]
        target = "" if targets is None else ", target %d" % int(targets[i])
        draw_input(left, x[i])
        left.set_title("example %d%s" % (i, target), fontsize=9)
        draw_map(figure, right, maps[i])
        right.set_title("%s map" % method, fontsize=9)
    more = " (first %d of %d examples)" % (rows, len(x)) if len(x) > rows else ""
    figure.suptitle("%s%s%s" % (method, " - " + title if title else "", more), fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
