"""The picture `graph-override explain --png` draws: each input beside its
attribution map, one row per example (matplotlib, imported only here).

An image example (height x width, with 1, 3 or 4 channels last) is shown as
it is (colour scaled to [0, 1]); its map is summed over the channels. A map
with negative values is drawn with a diverging colormap centred at 0 (red
positive, blue negative, white zero), scaled per example to its largest
absolute value; a map with none (saliency, Grad-CAM) from 0 to its maximum.
A vector example (one dimension) is drawn as bars.
"""

import io

import numpy as np

__all__ = ["MAX_ROWS", "draw", "matplotlib_missing"]

MAX_ROWS = 16  # a taller figure is unreadable; the first MAX_ROWS examples are drawn


def matplotlib_missing():
    """None, or what to do when matplotlib does not import."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        return ("--png needs matplotlib, which does not import (%s): install it with "
                "python -m pip install 'graph_override[scripts]' (or matplotlib), or "
                "leave out --png" % e)
    return None


def _image(example):
    """`example` as (2-D array or RGB array, is_image), or None for a vector."""
    if example.ndim == 3 and example.shape[-1] not in (1, 3, 4) and example.shape[0] in (1, 3):
        example = np.moveaxis(example, 0, -1)  # channels first
    if example.ndim == 3 and example.shape[-1] in (3, 4):
        rgb = example[..., :3].astype(np.float64)
        low, high = rgb.min(), rgb.max()
        return (rgb - low) / (high - low) if high > low else np.zeros_like(rgb)
    if example.ndim == 3:
        return example.sum(axis=-1)
    return example


def _heat(values):
    """(array to draw, colormap, vmin, vmax)."""
    if values.ndim == 3:
        if values.shape[-1] not in (1, 3, 4) and values.shape[0] in (1, 3):
            values = np.moveaxis(values, 0, -1)
        values = values.sum(axis=-1)
    values = np.asarray(values, np.float64)
    largest = float(np.max(np.abs(values))) if values.size else 0.0
    largest = largest if np.isfinite(largest) and largest > 0 else 1.0
    if (values < 0).any():
        return values, "RdBu_r", -largest, largest
    return values, "Reds", 0.0, largest


def _bars(axis, values, signed):
    colours = np.where(values >= 0, "#b2182b", "#2166ac") if signed else "#b2182b"
    axis.bar(np.arange(values.size), values.ravel(), color=colours)
    axis.axhline(0.0, color="black", linewidth=0.5)


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
    figure = Figure(figsize=(6.4, 2.6 * rows + 0.6))
    axes = figure.subplots(rows, 2, squeeze=False)
    for i in range(rows):
        left, right = axes[i]
        example, heat = np.asarray(x[i]), np.asarray(maps[i])
        target = "" if targets is None else ", target %d" % int(targets[i])
        if example.ndim == 1:
            _bars(left, example, signed=True)
        else:
            shown = _image(example)
            left.imshow(shown, cmap=None if shown.ndim == 3 else "gray",
                        interpolation="nearest", aspect="auto" if shown.ndim == 2 and (
                            shown.shape[0] * 4 < shown.shape[1]) else "equal")
            left.set_xticks([])
            left.set_yticks([])
        left.set_title("example %d%s" % (i, target), fontsize=9)
        if heat.ndim == 1:
            _bars(right, heat, signed=(heat < 0).any())
        else:
            values, cmap, low, high = _heat(heat)
            picture = right.imshow(values, cmap=cmap, vmin=low, vmax=high,
                                   interpolation="nearest")
            figure.colorbar(picture, ax=right, fraction=0.046, pad=0.04)
            right.set_xticks([])
            right.set_yticks([])
        right.set_title("%s map" % method, fontsize=9)
    more = " (first %d of %d examples)" % (rows, len(x)) if len(x) > rows else ""
    figure.suptitle("%s%s%s" % (method, " - " + title if title else "", more), fontsize=11)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()
