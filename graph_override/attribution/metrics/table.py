"""The metrics by name: what each needs and how to read it, and `evaluate`,
which runs several on one model, batch and maps (the `evaluate` command's
engine). Nothing here imports TensorFlow until a metric runs."""

import dataclasses
import importlib

from graph_override.errors import AttributionError

__all__ = ["METRICS", "MetricSpec", "evaluate"]


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """One metric.

    Attributes:
      name: its name (the function's, in `module`).
      module: the module of `graph_override.attribution.metrics` holding it.
      group: faithfulness, robustness, randomization or complexity.
      needs: "maps" (the maps alone), "model+maps", or "model+explain" (it
        explains perturbed inputs again with a method).
      options: the keyword options it takes besides the model's.
      summary: one line for listings.
    """

    name: str
    module: str
    group: str
    needs: str
    options: tuple
    summary: str

    def function(self):
        return getattr(importlib.import_module(
            "graph_override.attribution.metrics." + self.module), self.name)


_F, _R, _Z, _C = "faithfulness", "robustness", "randomization", "complexity"
METRICS = {s.name: s for s in (
    MetricSpec("deletion", _F, _F, "model+maps",
               ("baseline", "features_in_step", "abs"),
               "area under the output as features are removed (lower: better)"),
    MetricSpec("insertion", _F, _F, "model+maps",
               ("baseline", "features_in_step", "abs"),
               "area under the output as features are inserted (higher: better)"),
    MetricSpec("region_perturbation", _F, _F, "model+maps",
               ("patch_size", "regions", "order", "baseline", "seed"),
               "AOPC of square regions removed by relevance (higher: better)"),
    MetricSpec("road", _F, _F, "model+maps", ("percentages", "order", "noise", "seed"),
               "accuracy as top pixels are imputed from neighbours (lower: better)"),
    MetricSpec("faithfulness_correlation", _F, _F, "model+maps",
               ("runs", "subset_size", "baseline", "seed"),
               "correlation of subsets' relevance and output drop (higher: better)"),
    MetricSpec("max_sensitivity", "robustness", _R, "model+explain",
               ("samples", "radius", "seed"),
               "largest relative change of the maps under noise (lower: better)"),
    MetricSpec("local_lipschitz_estimate", "robustness", _R, "model+explain",
               ("samples", "std", "seed"),
               "largest map change per input change (lower: better)"),
    MetricSpec("random_logit", "randomization", _Z, "model+explain",
               ("similarity", "seed"),
               "similarity of maps for the target and a random class (lower: better)"),
    MetricSpec("sparseness", "concentration", _C, "maps", (),
               "Gini index of |maps| (higher: simpler)"),
    MetricSpec("complexity", "concentration", _C, "maps", (),
               "entropy of |maps| (lower: simpler)"),
)}


def metric_spec(name):
    """The `MetricSpec` of `name`; AttributionError naming the metrics."""
    try:
        return METRICS[name]
    except (KeyError, TypeError):
        raise AttributionError("unknown metric %r; the metrics: %s"
                               % (name, ", ".join(METRICS))) from None


def evaluate(model, x, maps, metrics, target=None, *, explain="saliency",
             explain_options=None, options=None, batch_size=64, **model_args):
    """{name: Score} for each metric of `metrics` (names), on one model,
    batch `x` and its `maps`.

    Args:
      explain: for the metrics that explain again (robustness,
        random_logit): the method that made `maps` (a name of
        `graph_override.attribution.METHODS`) with `explain_options`, or a
        function (x, targets) -> maps.
      options: {metric name: {option: value}}; an option given for a
        metric not in `metrics`, or one it does not take, is an error.
      model_args: the model's (inputs, outputs, session, allow_ops).
    """
    specs = [metric_spec(m) for m in metrics]
    if not specs:
        raise AttributionError("no metric given; the metrics: %s" % ", ".join(METRICS))
    options = dict(options or {})
    for name, given in options.items():
        spec = metric_spec(name)
        if spec not in specs:
            raise AttributionError("options for %s, which is not among the metrics run" % name)
        unknown = sorted(set(given) - set(spec.options))
        if unknown:
            raise AttributionError("%s takes no option %s; its options: %s" % (
                name, ", ".join(unknown), ", ".join(spec.options) or "none"))
    explainer = None
    if any(s.needs != "maps" for s in specs):
        from graph_override.attribution.metrics import _common

        explainer = _common.Predictor(model, batch_size=batch_size, **model_args).explainer
    results = {}
    for spec in specs:
        run = spec.function()
        given = options.get(spec.name, {})
        if spec.needs == "maps":
            results[spec.name] = run(maps, **given)
        elif spec.needs == "model+maps":
            results[spec.name] = run(explainer, x, maps, target, batch_size=batch_size,
                                     **given)
        else:
            results[spec.name] = run(explainer, x, explain, target, maps=maps,
                                     explain_options=explain_options,
                                     batch_size=batch_size, **given)
    return results
