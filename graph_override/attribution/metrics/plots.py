"""Pictures of the curve metrics (matplotlib, imported only here): each
curve's mean over examples with the band of one standard deviation, one
panel per metric."""

import io

import numpy as np

__all__ = ["plot_curves"]

_X_LABELS = {"deletion": "fraction of features removed",
             "insertion": "fraction of features inserted",
             "region_perturbation": "regions removed",
             "road": "percentage of pixels imputed"}


def plot_curves(scores, path=None, *, title=""):
    """The PNG bytes of the curves among `scores` ({name: Score} or a list
    of Scores; those without a curve are left out); written to `path` too
    when given. Raises ValueError when no score has a curve."""
    from matplotlib.figure import Figure

    scores = list(scores.values()) if isinstance(scores, dict) else list(scores)
    curves = [s for s in scores if s.curve is not None]
    if not curves:
        raise ValueError("no curve metric among %s: curves come from %s" % (
            ", ".join(s.metric for s in scores) or "nothing", ", ".join(_X_LABELS)))
    figure = Figure(figsize=(4.2 * len(curves), 3.4))
    axes = figure.subplots(1, len(curves), squeeze=False)[0]
    for axis, score in zip(axes, curves):
        mean = np.nanmean(score.curve, axis=0)
        spread = np.nanstd(score.curve, axis=0)
        axis.plot(score.steps, mean, color="#b2182b")
        axis.fill_between(score.steps, mean - spread, mean + spread, color="#b2182b",
                          alpha=0.2, linewidth=0)
        axis.set_xlabel(_X_LABELS.get(score.metric, "step"), fontsize=9)
        axis.set_title("%s: %.4g (%d examples)" % (score.metric, score.mean(),
                                                    len(score.scores)), fontsize=9)
    axes[0].set_ylabel("target output" if curves[0].metric != "road" else "still correct",
                       fontsize=9)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    data = buffer.getvalue()
    if path is not None:
        from graph_override._files.atomic import atomic_write

        atomic_write(path, data, keep_mode=False)
    return data
