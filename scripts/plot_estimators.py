"""Draws every estimator's forward function and gradient over [-2, 2].

The curves come from the library itself: `graph_override.tf2` (the
`tf.custom_gradient` family, the test oracle) evaluated under a
`tf.GradientTape` with upstream gradient dy = 1, each estimator with the
setting its record gives (`graph_override/estimators/table.py`). An estimator
whose gradient depends on dy rather than on x (`clip_gradient`) has its
gradient panel plot dx against dy.

Usage:
  python scripts/plot_estimators.py                 # writes docs/estimators.png
  python scripts/plot_estimators.py --out /tmp/e.png --points 2001
"""

import argparse
import collections
import io
import pathlib
import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

import matplotlib  # noqa: E402  pylint: disable=wrong-import-position

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  pylint: disable=wrong-import-position
import tensorflow as tf  # noqa: E402  pylint: disable=wrong-import-position

from graph_override import estimators, tf2  # noqa: E402  pylint: disable=wrong-import-position
from graph_override._files.atomic import atomic_write  # noqa: E402  pylint: disable=wrong-import-position

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "estimators.png"

# The setting drawn for each estimator, from its record: the parameters of
# its docstring example, or a plot setting where those are too small to see
# at this scale (ste_tern's threshold 0.05).
# The attribution rules (records with op_types: guided_relu, eps_lrp, ...)
# are gradients of activations that read the op and, for deeplift_rescale, a
# batch of [inputs; references]: they are not drawn here.
SETTINGS = collections.OrderedDict(
    (name, spec.doc.example if spec.doc.plot is None else spec.doc.plot)
    for name, spec in estimators.ESTIMATORS.items() if spec.op_types is None)

# Estimators whose gradient depends on dy, not only on x (not linear in dy):
# their gradient is drawn against the upstream gradient dy.
DY_AXIS = tuple(name for name, spec in estimators.ESTIMATORS.items()
                if not spec.linear and name in SETTINGS)

Curve = collections.namedtuple("Curve", ["name", "params", "x", "forward",
                                         "gradient_axis", "gradient"])


def grid(points=801, low=-2.0, high=2.0):
    """`points` evenly spaced float32 values over [low, high], holding 0 and
    the boundaries +-0.5, +-1 exactly when (points - 1) is a multiple of 8."""
    return np.linspace(low, high, points).astype(np.float32)


def compute_curve(name, params, x):
    """Forward values and gradient of one estimator of `graph_override.tf2`.

    Returns:
      A `Curve`. The gradient is dx for dy = 1 at every x, except for the
      estimators in `DY_AXIS`, where it is dx for dy = x (plotted against dy).
    """
    fn = getattr(tf2, name)
    xt = tf.constant(x)
    dy = xt if name in DY_AXIS else tf.ones_like(xt)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = fn(xt, **params)
    dx = tape.gradient(y, xt, output_gradients=dy)
    return Curve(name, dict(estimators.normalize(name, params)), x, y.numpy(),
                 "dy" if name in DY_AXIS else "x", dx.numpy())


def compute_curves(points=801):
    """`compute_curve` for every estimator in `SETTINGS`, in table order."""
    x = grid(points)
    return [compute_curve(name, params, x) for name, params in SETTINGS.items()]


def _title(curve):
    shown = ", ".join("%s=%g" % (k, v) if v is not None else "%s=None" % k
                      for k, v in curve.params.items())
    return "%s(%s)" % (curve.name, shown)


def draw(curves):
    """A matplotlib figure with one panel per curve."""
    cols = 4
    rows = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.0 * rows),
                             sharex=True, squeeze=False)
    for ax, curve in zip(axes.flat, curves):
        ax.axhline(0.0, color="0.8", lw=0.8)
        ax.axvline(0.0, color="0.8", lw=0.8)
        ax.plot(curve.x, curve.forward, color="tab:blue", lw=2.0,
                label="forward y(x)")
        label = ("gradient dx(dy)" if curve.gradient_axis == "dy"
                 else "gradient dx/dy at x")
        ax.plot(curve.x, curve.gradient, color="tab:orange", lw=1.6, ls="--",
                label=label)
        ax.set_title(_title(curve), fontsize=10)
        ax.set_xlim(float(curve.x[0]), float(curve.x[-1]))
        low = min(-2.2, float(np.nanmin(curve.gradient)) - 0.3)
        high = max(2.2, float(np.nanmax(curve.gradient)) + 0.3)
        ax.set_ylim(low, high)  # swish_sign's gradient peaks at beta
        ax.grid(True, color="0.93")
        if curve.gradient_axis == "dy":
            ax.text(0.03, 0.04, "gradient panel: horizontal axis is dy",
                    transform=ax.transAxes, fontsize=8, color="tab:orange")
    spare = list(axes.flat)[len(curves):]
    for ax in spare:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    legend_ax = spare[0] if spare else None
    if legend_ax is not None:
        legend_ax.legend(handles, ["forward y(x)", "gradient dx for dy = 1"],
                         loc="center", fontsize=11, frameon=False)
    else:
        fig.legend(handles, labels, loc="lower center")
    fig.suptitle("graph_override estimators (graph_override.tf2, tf.GradientTape)",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig


def save_png(fig, path):
    """Saves `fig` as a PNG atomically (graph_override._files.atomic), so no
    partial PNG is ever left at `path`."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    atomic_write(str(path), png.getvalue())
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="PNG to write (default: docs/estimators.png)")
    parser.add_argument("--points", type=int, default=801,
                        help="samples over [-2, 2] (default 801)")
    args = parser.parse_args(argv)
    if args.points < 9:
        parser.error("--points must be at least 9, got %d" % args.points)
    fig = draw(compute_curves(args.points))
    path = save_png(fig, args.out)
    plt.close(fig)
    print("wrote %s (%d estimators)" % (path, len(SETTINGS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
