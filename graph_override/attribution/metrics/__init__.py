"""Evaluating attribution maps: faithfulness, robustness, randomization and
complexity metrics, batched and seeded, on every model form of
`graph_override.attribution`.

| group | metrics |
|---|---|
| faithfulness | `deletion`, `insertion` (pixel flipping), `region_perturbation`, `road`, `faithfulness_correlation` |
| robustness | `max_sensitivity`, `local_lipschitz_estimate` |
| randomization | `random_logit` (the cascading model-parameter randomization: `graph_override.attribution.sanity`) |
| complexity | `sparseness`, `complexity` |

Each returns a `Score` (one number per example, the curve for the curve
metrics); `evaluate` runs several by name (`METRICS`), and `plot_curves`
draws the curves. The numbers follow Quantus's definitions where they agree
(tests compare both on the same weights, inputs and maps); the docs list
where the conventions differ.

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override.attribution import metrics
  >>> w = tf.constant([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
  >>> model = lambda x: tf.matmul(x, w)
  >>> x = np.ones((1, 3), "float32")
  >>> metrics.deletion(model, x, np.array([[2.0, 1.0, 0.0]]), target=0,
  ...                  features_in_step=1).curve
  array([[2., 0., 0., 0.]])
  >>> float(metrics.sparseness(np.array([[0.0, 0.0, 5.0]])).scores[0]) > 0.6
  True
"""

import importlib

_NAMES = dict(
    [(n, "graph_override.attribution.metrics.faithfulness") for n in (
        "deletion", "faithfulness_correlation", "insertion", "region_perturbation", "road")]
    + [(n, "graph_override.attribution.metrics.robustness") for n in (
        "local_lipschitz_estimate", "max_sensitivity")]
    + [(n, "graph_override.attribution.metrics.randomization") for n in ("random_logit",)]
    + [(n, "graph_override.attribution.metrics.concentration") for n in ("complexity",
                                                                       "sparseness")]
    + [(n, "graph_override.attribution.metrics.table") for n in ("METRICS", "MetricSpec",
                                                                 "evaluate", "metric_spec")]
    + [("Score", "graph_override.attribution.metrics._common"),
       ("plot_curves", "graph_override.attribution.metrics.plots")])

__all__ = ["METRICS", "MetricSpec", "Score", "complexity", "deletion", "evaluate",
           "faithfulness_correlation", "insertion", "local_lipschitz_estimate",
           "max_sensitivity", "metric_spec", "plot_curves", "random_logit",
           "region_perturbation", "road", "sparseness"]


def __getattr__(name):
    if name not in _NAMES:
        raise AttributeError("module 'graph_override.attribution.metrics' has no attribute %r"
                             % name)
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(__all__) | set(globals()))
