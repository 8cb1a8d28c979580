"""Attribution maps through gradient overrides (saliency, gradient x input,
Integrated Gradients, SmoothGrad, guided backprop, deconvnet, epsilon-LRP,
DeepLIFT, Grad-CAM) for frozen GraphDefs, tf.compat.v1 Session graphs and TF2
callables or Keras models."""

from graph_override.attribution.rules import (LINEAR_OPS, METHODS, NONLINEAR_OPS, RELU_OPS,
                                              MethodSpec, method_spec, rule_strings)
from graph_override.errors import AttributionError

__all__ = [
    "AttributionError",
    "LINEAR_OPS",
    "METHODS",
    "MethodSpec",
    "NONLINEAR_OPS",
    "RELU_OPS",
    "method_spec",
    "rule_strings",
]
