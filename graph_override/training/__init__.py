"""Session training on real data with graph_override's estimator families.

Modules:
  data: scikit-learn's bundled digits, splits and a shifted target domain.
  models: BNN, DANN and DoReFa graph builders taking a family.
  config: TrainConfig, the settings of one run (epochs, checkpoints, logs).
  loop: the Session loop (Saver checkpoints and resume, summaries, tqdm).
  cluster: cluster specs, between-graph replication, loopback clusters.
  recipes: train_bnn, train_dann, train_dorefa (used by scripts/).
"""

import importlib

__all__ = ["cluster", "config", "data", "errors", "loop", "models", "recipes"]


def __getattr__(name):
    if name in __all__:
        module = importlib.import_module("graph_override.training." + name)
        globals()[name] = module
        return module
    raise AttributeError("module 'graph_override.training' has no attribute %r" % name)
