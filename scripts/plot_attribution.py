"""Draws every attribution method's maps on a CNN trained on the digits, and
runs the model-randomization sanity check of Adebayo et al. (2018).

The CNN (Conv2D 16 - Conv2D 32 - MaxPool - Dense 64 - Dense 10, ReLU, on
scikit-learn's bundled 8x8 digits) is trained by `digits_cnn.train`, a pure
function of its seed (numpy initial weights, seeded minibatch order), so the
same weights come out under every TensorFlow release. The maps come from
`graph_override.attribution` on the Keras model.

Sanity check: each method's maps of the trained model are compared with its
maps of the same network whose weights are re-drawn from the initial
distribution, cascading from the top layer down (logits, then dense, conv2,
conv1), as in the paper's cascading randomization. The figure is the
Spearman rank correlation of the absolute values of the two maps, averaged
over the first N test digits (target: the true class); the last column is
the signed maps' correlation after every layer is randomized. A method whose
maps do not change when the weights do cannot be explaining the model.

Usage:
  python scripts/plot_attribution.py          # docs/attribution.png and the
                                              # table in docs/guide/attribution.md
  python scripts/plot_attribution.py --out /tmp/a.png --table /tmp/page.md
"""

import argparse
import io
import json
import pathlib
import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

import matplotlib  # noqa: E402  pylint: disable=wrong-import-position

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # digits_cnn beside us
import digits_cnn  # noqa: E402  pylint: disable=wrong-import-position,import-error

from graph_override._files.atomic import atomic_write  # noqa: E402  pylint: disable=wrong-import-position

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "attribution.png"
DEFAULT_TABLE = ROOT / "docs" / "guide" / "attribution.md"
TABLE_BEGIN = "<!-- sanity-table: written by scripts/plot_attribution.py -->"
TABLE_END = "<!-- sanity-table: end -->"
SHOWN = 4  # test digits drawn, one per row: the first ones of different classes


def draw(images, labels, maps, random_maps):
    """The figure: a row per digit (input, then each method's map), and a
    last row with the first digit's maps after every layer is randomized.

    Each map is drawn on its own symmetric scale (red positive, blue
    negative), as the methods' magnitudes differ by orders of magnitude.
    """
    methods = list(maps)
    rows, cols = len(images) + 1, len(methods) + 1
    fig, axes = plt.subplots(rows, cols, figsize=(1.45 * cols, 1.55 * rows), squeeze=False)
    for r in range(rows):
        randomized = r == len(images)
        i = 0 if randomized else r
        axes[r][0].imshow(images[i], cmap="gray_r", vmin=0.0, vmax=1.0)
        axes[r][0].set_ylabel("randomized\nweights" if randomized else "digit %d" % labels[i],
                              fontsize=8)
        for c, name in enumerate(methods, start=1):
            m = (random_maps if randomized else maps)[name][i]
            scale = float(np.max(np.abs(m))) or 1.0
            axes[r][c].imshow(m, cmap="bwr", vmin=-scale, vmax=scale)
            if r == 0:
                axes[r][c].set_title(digits_cnn.LABELS[name], fontsize=8)
    axes[0][0].set_title("input", fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Attribution maps of a CNN trained on the digits "
                 "(last row: the same network with every layer's weights re-drawn)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def summary(maps, random_maps):
    """What the picture shows, as numbers: each map divided by its largest
    absolute value (as drawn), to 2 decimals, and the matplotlib that drew
    it. Written into the PNG, so a test can check the picture against the
    maps of today under another matplotlib, whose pixels differ."""
    def drawn(m):
        scale = float(np.max(np.abs(m))) or 1.0
        return np.round(np.asarray(m, np.float64) / scale, 2).tolist()
    return {"matplotlib": matplotlib.__version__,
            "maps": {name: [drawn(m) for m in ms] for name, ms in maps.items()},
            "randomized": {name: [drawn(m) for m in ms] for name, ms in random_maps.items()}}


def png_bytes(fig, described=None):
    """The figure as PNG bytes, with `described` (JSON-able) as its
    Description; no date or software stamp, so a re-run with the same
    numbers writes the same file."""
    png = io.BytesIO()
    metadata = {"Software": None}
    if described is not None:
        metadata["Description"] = json.dumps(described, separators=(",", ":"))
    fig.savefig(png, format="png", dpi=80, metadata=metadata)
    return png.getvalue()


def table_markdown(check):
    """The sanity check's Markdown table (`digits_cnn.SanityCheck`)."""
    stages = ["%s" % s for s in check.stages]
    head = (["method"] + ["down to %s" % s for s in stages]
            + ["all, signed", "all, ink pixels"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in check.methods:
        cells = (["%.2f" % v for v in check.abs_rho[name]]
                 + ["%.2f" % check.signed_rho[name], "%.2f" % check.ink_rho[name]])
        lines.append("| %s | %s |" % (digits_cnn.LABELS[name], " | ".join(cells)))
    lines.append("")
    lines.append("Spearman rank correlation between the maps of the trained CNN (test "
                 "accuracy %.3f) and of the same network with its weights re-drawn from "
                 "the top layer down to the one named (cascading), mean over %d test "
                 "digits, of absolute values; \"all, signed\": every layer re-drawn, "
                 "signed values; \"all, ink pixels\": every layer re-drawn, absolute "
                 "values of the pixels where the digit has ink (x > 0). 1: the map did "
                 "not change." % (check.accuracy, check.examples))
    return "\n".join(lines)


def put_table(page_text, table):
    """`page_text` with the region between TABLE_BEGIN and TABLE_END replaced
    by `table`.

    Raises:
      ValueError: the page lacks the markers (nothing is written then).
    """
    begin, end = page_text.find(TABLE_BEGIN), page_text.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError("the page has no region %r ... %r for the table"
                         % (TABLE_BEGIN, TABLE_END))
    return page_text[:begin + len(TABLE_BEGIN)] + "\n" + table + "\n" + page_text[end:]


def compute(examples=32, seed=0):
    """Trains the CNN and computes the maps and the sanity check: (images
    shown, their labels, their maps, the first one's maps with every layer
    randomized, `digits_cnn.SanityCheck`)."""
    model, split, accuracy = digits_cnn.train(seed=seed)
    x = split.x_test[:examples].reshape(-1, 8, 8, 1)
    y = split.y_test[:examples]
    check = digits_cnn.sanity_check(model, x, y, accuracy)
    rows = shown_rows(y)
    shown = {name: m[rows] for name, m in check.trained_maps.items()}
    random_shown = {name: m[rows[:1]] for name, m in check.random_maps.items()}
    return x[rows], y[rows], shown, random_shown, check


def shown_rows(labels):
    """Indices of the first SHOWN examples of distinct classes."""
    rows, seen = [], set()
    for i, label in enumerate(labels):
        if label not in seen:
            rows.append(i)
            seen.add(label)
    return rows[:SHOWN]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="PNG to write (default: docs/attribution.png)")
    parser.add_argument("--table", default=str(DEFAULT_TABLE),
                        help="Markdown page whose marked region receives the sanity "
                             "table (default: docs/guide/attribution.md)")
    parser.add_argument("--examples", type=int, default=32,
                        help="test digits the sanity check averages over (default 32)")
    args = parser.parse_args(argv)
    if args.examples < SHOWN:
        parser.error("--examples must be at least %d, got %d" % (SHOWN, args.examples))
    table_path = pathlib.Path(args.table)
    try:
        page = table_path.read_text(encoding="utf-8")
        put_table(page, "")
    except (OSError, ValueError) as e:
        parser.error("--table %s: %s" % (table_path, e))
    images, labels, shown, random_shown, check = compute(args.examples)
    shown = {k: v.reshape(-1, 8, 8) for k, v in shown.items()}
    random_shown = {k: v.reshape(-1, 8, 8) for k, v in random_shown.items()}
    fig = draw(images.reshape(-1, 8, 8), labels, shown, random_shown)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(str(out), png_bytes(fig, summary(shown, random_shown)))
    plt.close(fig)
    table = table_markdown(check)
    atomic_write(str(table_path), put_table(page, table).encode("utf-8"))
    print("wrote %s (%d methods) and the sanity table in %s" % (out, len(shown), table_path))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
