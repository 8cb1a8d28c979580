"""The figure of tools/bench.py (docs/benchmarks.png): training ratios,
construction cost, frozen-graph patching, migration throughput. A panel
whose section is not in the report says so."""

import io

import numpy as np


def _ok(results):
    return bool(results) and all("error" not in r for r in results)


def _not_measured(ax):
    ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)


def draw(report):
    """The PNG bytes of a 2x2 figure: training ratios, construction cost,
    frozen-graph patching, migration throughput (each where measured).

    Raises:
      ImportError: matplotlib is not installed (the `scripts` extra).
    """
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    _training(axes[0][0], report["training"])
    _construction(axes[0][1], report["construction"])
    _frozen(axes[1][0], report["frozen"], report["config"]["frozen_repeats"])
    _migrate(axes[1][1], report["migrate"])
    fig.suptitle("graph_override benchmarks: %d cores, TensorFlow %s (%s)" % (
        report["machine"]["nproc"], report["machine"]["tensorflow"],
        report["machine"]["date"]))
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()


def _training(ax, training):
    ax.set_title("1. training step (lower is better)")
    if not training:
        _not_measured(ax)
        return
    labels = [r["variant"] for r in training[0]["rows"]]
    width = 0.8 / len(training)
    for i, t in enumerate(training):
        ys = np.arange(len(labels)) + i * width
        ax.barh(ys, [r["ratio"] for r in t["rows"]], height=width, label=t["title"])
        for y, r in zip(ys, t["rows"]):
            ax.text(r["ratio"], y, " %.2f" % r["ratio"], va="center", fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(np.arange(len(labels)) + width * (len(training) - 1) / 2)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("wall time per training step / tanh in a Session (median ratio)")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.12)


def _construction(ax, cons):
    ax.set_title("2. graph construction (lower is better)")
    if not cons:
        _not_measured(ax)
        return
    blabels = [r["variant"].split(" (")[0].split(":")[0] for r in cons[0]["rows"]]
    width = 0.8 / len(cons)
    for i, c in enumerate(cons):
        ys = np.arange(len(blabels)) + i * width
        ax.barh(ys, [r["cpu_us_per_site"] / 1e3 for r in c["rows"]], height=width,
                label="%d sites" % c["sites"])
        for y, r in zip(ys, c["rows"]):
            ax.text(r["cpu_us_per_site"] / 1e3, y,
                    "  +%d registry entries" % r["entries_first"],
                    va="center", fontsize=7)
    ax.set_yticks(np.arange(len(blabels)) + width * (len(cons) - 1) / 2)
    ax.set_yticklabels(blabels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("CPU ms per site to build")
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.35)


def _frozen(ax, frozen, repeats):
    ax.set_title("3. frozen-graph patching")
    if _ok(frozen):
        nodes = [r["nodes"] for r in frozen]
        ax.loglog(nodes, [r["protobuf_parse_serialize_s"] for r in frozen], "o-",
                  label="protobuf parse + serialize")
        ax.loglog(nodes, [r["load_patch_save_s"] for r in frozen], "s-",
                  label="graph_override load + patch + save")
        ax.loglog(nodes, [r["patch_s"] for r in frozen], "^--", label="patch() alone")
        for r in frozen:
            ax.annotate("%.0f MB peak RSS" % r["peak_rss_mb"],
                        (r["nodes"], r["load_patch_save_s"]),
                        textcoords="offset points", xytext=(-30, 8), fontsize=7)
        ax.set_xlabel("GraphDef nodes")
        ax.set_ylabel("seconds (median of %d)" % repeats)
        ax.legend(fontsize=8)
    else:
        _not_measured(ax)


def _migrate(ax, migrate):
    ax.set_title("4. source migration throughput (higher is better)")
    if _ok(migrate):
        names = ["%d files x %d lines" % (r["files"], r["lines"] // max(r["files"], 1))
                 for r in migrate]
        ys = np.arange(len(migrate))
        ax.barh(ys - 0.2, [r["lines_per_second"] for r in migrate], height=0.4,
                label="dense with override code")
        ax.barh(ys + 0.2, [r["plain_lines_per_second"] for r in migrate], height=0.4,
                label="plain code (parsed only)")
        ax.set_yticks(ys)
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("lines per second")
        ax.legend(fontsize=8, loc="lower right")
    else:
        _not_measured(ax)
