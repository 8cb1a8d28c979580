"""Attribution maps through gradient overrides, for every kind of TensorFlow
model: saliency, gradient x input, Integrated Gradients, SmoothGrad, guided
backprop, deconvnet, epsilon-LRP, DeepLIFT (rescale) and Grad-CAM.

A model is a frozen GraphDef (message or path, with `inputs` and `outputs`
tensor names), a `tf.compat.v1` graph in a Session (`session=` and its
tensors), or a TF2 callable or Keras model. Each is reduced to a frozen
GraphDef, patched with the method's rules (`METHODS`) and differentiated as
a `graph_override.frozen.FrozenFunction`, so the three forms of one model
give the same maps.

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override import attribution
  >>> w = tf.constant([[1.0, -1.0], [2.0, 0.5]])
  >>> model = lambda x: tf.matmul(tf.nn.relu(x), w)
  >>> x = np.array([[1.0, -2.0]], "float32")
  >>> attribution.gradient_input(model, x, target=0).maps
  array([[ 1., -0.]], dtype=float32)
  >>> explainer = attribution.Explainer(model)
  >>> explainer.attribute("saliency", x, target=[1], abs=False).maps
  array([[-1.,  0.]], dtype=float32)

Every method takes ``batch_size`` (examples per model call: memory bounded
by it whatever the number of examples; `batching`) and ``progress``;
`explain_to_folder` writes the maps of a data set (an array, a memory-mapped
``.npy``, an `ImageFolder`, `TFRecords`, a ``tf.data.Dataset``) in shards
with a manifest, and resumes a killed run (`shards`). A model may also be a
``.keras``/``.h5`` file or a SavedModel folder (`saved_models`).

Each call warns (`AttributionWarning`) where the maps are not what the
method defines (op types its rules do not cover: `CoverageWarning`, with the
completeness gap where the method has one) or vanish (`VanishingMapsWarning`):
see `graph_override.attribution.checks`.

Names are imported on first use, so `graph_override.attribution.method_table` (the
method records, `method_record`) loads without TensorFlow. Each method is one
record there: its function, options, rules, batch layout, flags and docs row.
"""

import importlib

from graph_override.attribution import method_table as _method_table

_NAMES = dict(
    [(n, "graph_override.attribution.method_table") for n in (
        "LINEAR_OPS", "METHODS", "MethodSpec", "NONLINEAR_OPS", "RELU_OPS", "method_spec",
        "rule_strings")]
    + [(n, "graph_override.attribution.engine") for n in ("Explainer", "attribute")]
    + [(n, "graph_override.attribution.coverage") for n in ("CoverageReport",
                                                              "coverage_report")]
    + [(n, "graph_override.attribution.methods") for n in ("Attribution",)]
    + [(n, "graph_override.attribution.shards") for n in (
        "explain_to_folder", "read_manifest", "read_maps")]
    + [(n, "graph_override.attribution.sources") for n in (
        "ImageFolder", "NpySource", "TFRecords")]
    + [(n, "graph_override.attribution.checks") for n in (
        "AttributionWarning", "CoverageWarning", "VanishingMapsWarning")]
    # one function per method record (`functions.one_call`)
    + [(n, "graph_override.attribution.functions") for n in _method_table.METHODS]
    + [("AttributionError", "graph_override.errors")])

__all__ = list(sorted(_NAMES))


def __getattr__(name):
    if name not in _NAMES and name in _method_table.METHODS:  # defined after this import
        return getattr(importlib.import_module("graph_override.attribution.functions"), name)
    if name not in _NAMES:
        raise AttributeError("module 'graph_override.attribution' has no attribute %r" % name)
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(__all__) | set(globals()) | set(_method_table.METHODS))
