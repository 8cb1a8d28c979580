"""larq's binarized and quantized Keras layers on Keras 3 (and Keras 2).

A larq script runs after changing its import line to
``import graph_override.keras as lq``: ``lq.layers``, ``lq.quantizers``,
``lq.constraints``, ``lq.models.summary``, ``lq.optimizers`` (Bop,
CaseOptimizer), ``lq.context``, ``lq.metrics``, ``lq.callbacks``,
``lq.activations``, ``lq.math`` and ``lq.utils`` mirror larq 0.13's modules,
with forward values, gradients and Bop's steps bitwise larq's. Models with these layers save
and load by name (``.keras``, ``.h5``) with no ``custom_objects``; models
that larq and larq-zoo saved load with `load_larq_model`, and ``lq.zoo``
builds larq-zoo's architectures. On Keras 3, ``model.fit`` under
MultiWorkerMirroredStrategy needs `enable_multi_worker_fit` (an upstream
bug). See docs/guide/keras.md.
"""

from graph_override.keras import constraints, distribute, layers, loading, models, quantizers
from graph_override.keras import zoo
from graph_override.keras.distribute import disable_multi_worker_fit, enable_multi_worker_fit
from graph_override.keras.loading import larq_custom_objects, load_larq_model
from graph_override.keras.models import summary

# --- larq's other modules: optimizers, context, metrics, callbacks, math, utils.
from graph_override.keras import (activations, callbacks, context, math,
                                  metrics, optimizers, utils)
from graph_override.keras._missing import module_getattr as _module_getattr

# The larq API level these modules mirror (larq 0.13.3's names and numbers);
# graph_override.__version__ is this package's own version.
__version__ = "0.13.3"
# A name larq has and this does not raises UnavailableNameError (an
# AttributeError) naming what to use instead.
__getattr__ = _module_getattr(__name__)

__all__ = ["activations", "callbacks", "constraints", "context", "disable_multi_worker_fit",
           "distribute", "enable_multi_worker_fit", "larq_custom_objects", "layers",
           "load_larq_model", "loading", "math", "metrics", "models", "optimizers",
           "quantizers", "summary", "utils", "zoo"]
