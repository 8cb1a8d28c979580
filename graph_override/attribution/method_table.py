"""Which gradient rules each attribution method applies, and which op types
every method passes through with their own gradient.

An attribution method is a gradient of the model's target output with some
op types' gradients replaced by a rule (an estimator of
`graph_override.estimators`, set on the frozen graph with
`graph_override.frozen.patch`), times the input or not:

| method | rules (op type -> estimator) | baseline |
|---|---|---|
| saliency, gradient_input, integrated_gradients, smoothgrad, grad_cam | none: the model's own gradient | IG only (zeros by default) |
| guided_backprop | Relu, Relu6, LeakyRelu -> guided_relu | no |
| deconvnet | Relu, Relu6, LeakyRelu -> deconv_relu | no |
| eps_lrp | the nonlinear ops -> eps_lrp(epsilon) | no |
| deeplift | the nonlinear ops -> deeplift_rescale | yes (zeros by default) |

The nonlinear ops (`NONLINEAR_OPS`) are Relu, Relu6, LeakyRelu, Elu, Selu,
Sigmoid, Tanh and Softplus. Any other op on the path from the input to the
output is either in `LINEAR_OPS`, whose own gradient is what every method
uses, or not covered: the coverage report (`graph_override.attribution.coverage`)
lists those before a run.

MaxPool keeps its gradient here (the gradient goes to the window's maximum),
as it does in DeepExplain. The references differ on it, and so do their
DeepLIFT numbers on a network with max pooling:

| library | MaxPool under DeepLIFT |
|---|---|
| graph_override | its gradient: dy to the argmax of the window of x |
| DeepExplain (Ancona et al.) | its gradient: only Relu, Elu, Sigmoid, Tanh and Softplus are overridden; Relu6, CRelu and Softsign raise a warning |
| Captum (`captum/attr/_core/deep_lift.py`, `maxpool`) | a rescale-like rule: the output difference max(y, y_ref) - y_ref and y - max(y, y_ref) is unpooled to the argmax positions of x and of the reference and divided by x - r (the gradient where abs(x - r) < 1e-10); measured with Captum 0.8.0 (tests/attribution/reference): it takes effect only where the pool's input does not come straight from a ReLU module, so a Conv, ReLU, MaxPool stack gets MaxPool's gradient there as here |
| SHAP DeepExplainer (`deep_tf.py`, `op_handlers["MaxPool"] = maxpool`) | the same cross-max rescale as Captum |

With the gradient, DeepLIFT's summation to delta holds exactly on networks
without MaxPool; with it, it holds only where each window's argmax is the same
for the input and the reference. Captum's and SHAP's rule keeps the summation
in more cases; DeepExplain's numbers and ours agree.

FusedBatchNorm(V3) is linear (an affine map of its input) only in inference
mode, ``is_training=False``, as in every frozen model; in training mode it
normalizes by the batch's own statistics, and DeepLIFT's batch of inputs and
references would mix them. Mul and RealDiv are listed because in a frozen graph
one operand is a constant (a folded batch norm, a scale); a product of two
activations is not linear, and every method then uses its plain gradient
(the convention of DeepExplain and Captum for ops they do not know).

The records: one `define` per method (the record and its fields:
`graph_override.attribution.method_record`). The op types a rule covers are
those of its estimator's record (`graph_override.estimators`, whose
`attribution_ops.RELUS` and `ACTIVATIONS` are `RELU_OPS` and
`NONLINEAR_OPS` here).

Example:
  >>> from graph_override.attribution import method_table
  >>> method_table.rule_strings("eps_lrp", epsilon=0.01)[:2]
  ['Relu=eps_lrp:epsilon=0.01', 'Relu6=eps_lrp:epsilon=0.01']
  >>> method_table.METHODS["deeplift"].baseline
  True
"""


import argparse
import numbers

from graph_override.attribution.method_record import (METHODS, Flag, MethodSpec, Option,
                                                      define, method_spec, rule_strings,
                                                      table_markdown)
from graph_override.errors import AttributionError

__all__ = [
    "LINEAR_OPS",
    "METHODS",
    "MethodSpec",
    "NONLINEAR_OPS",  # noqa: F822  (from the estimators, on first use: __getattr__)
    "RELU_OPS",  # noqa: F822
    "RIEMANN_RULES",
    "method_spec",
    "rule_strings",
    "table_markdown",
]

# Integrated Gradients' Riemann rules (`methods.riemann`), Captum's names
RIEMANN_RULES = ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid")

LINEAR_OPS = frozenset({
    # products with weights
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv1D", "Conv2D",
    "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3DBackpropInputV2",
    "Einsum",
    # sums, differences, scaling by constants (see the module docstring)
    "BiasAdd", "Add", "AddV2", "AddN", "Sub", "Neg", "Mul", "RealDiv",
    # inference-mode batch normalization
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
    # pooling and reductions (MaxPool keeps its gradient: see above)
    "AvgPool", "AvgPool3D", "MaxPool", "MaxPoolV2", "MaxPool3D", "Mean", "Sum",
    # shape and data movement
    "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Transpose",
    "Pad", "PadV2", "MirrorPad", "ConcatV2", "Concat", "Pack", "Unpack", "Split",
    "SplitV", "Slice", "StridedSlice", "Tile", "GatherV2", "GatherNd", "ResizeBilinear",
    "ResizeNearestNeighbor", "DepthToSpace", "SpaceToDepth", "SpaceToBatchND",
    "BatchToSpaceND", "ReverseV2", "Roll", "BroadcastTo", "EnsureShape", "Snapshot", "Cast",
    # running sums (the axis is an int input: no gradient path)
    "Cumsum",
    # TF1 tf.cond's routing: the gradient goes back along the branch taken
    # (a TF1 while loop's Enter/Exit/NextIteration are another matter:
    # `coverage` reports them)
    "Switch", "Merge",
    # no gradient path to the input, or the input itself
    "Placeholder", "PlaceholderWithDefault", "Const", "NoOp", "Shape",
    "StopGradient",
})


def __getattr__(name):
    # The op types of the rules have one home, the estimators' attribution
    # ops; read on first use, so that the table loads without TensorFlow.
    if name in ("RELU_OPS", "NONLINEAR_OPS"):
        from graph_override.estimators import attribution_ops  # pylint: disable=import-outside-toplevel
        return attribution_ops.RELUS if name == "RELU_OPS" else attribution_ops.ACTIVATIONS
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


# --- the flags' argparse types and the options' checks -------------------------------

def _count_flag(what):
    def parse(text):
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError("expected a positive number of %s, got %r"
                                             % (what, text))
        return int(text)
    return parse


def _seed_flag(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected an integer seed >= 0, got %r" % text)
    return int(text)


def _number_flag(positive):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not (value > 0 if positive else value >= 0) or value == float("inf"):
            raise argparse.ArgumentTypeError("expected a finite number %s 0, got %r" % (
                ">" if positive else ">=", text))
        return value
    return parse


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _samples(method, value):  # pylint: disable=unused-argument
    if not _is_int(value) or value < 1:
        raise AttributionError("samples=%r: expected an int >= 1" % (value,))
    return value


def _spread(method, value):  # pylint: disable=unused-argument
    if not value >= 0:
        raise AttributionError("stdev_spread=%r: expected a number >= 0" % (value,))
    return value


def _rows(method, value):  # pylint: disable=unused-argument
    if value is not None and (not _is_int(value) or value < 1):
        raise AttributionError("internal_batch_size=%r: expected an int >= 1 (rows per "
                               "model call) or None" % (value,))
    return value


_BASELINE = Option("baseline", None, "the reference input: None (zeros), a number, one "
                   "example's shape or x's shape (explain: --baseline)")
_ROWS = Option("internal_batch_size", None, "rows per model call (None: one point of the "
               "batch per call; Captum's name)", _rows)
_METHODS = "graph_override.attribution.methods:"

# --- the records -----------------------------------------------------------------------

define(
    "saliency", function=_METHODS + "saliency",
    summary="gradient of the target (absolute value by default; Simonyan et al., 2014)",
    options=[Option("abs", True, "the absolute value of the gradient (Captum's default); "
                    "False: the signed gradient",
                    flag=Flag("--no-abs", const=False))])

define(
    "gradient_input", function=_METHODS + "gradient_input", times_input=True,
    summary="gradient times input (Shrikumar et al., 2016)")

define(
    "integrated_gradients", function=_METHODS + "integrated_gradients", times_input=True,
    summary="path integral of the gradient from the baseline (Sundararajan et al., 2017)",
    options=[_BASELINE,
             Option("steps", 50, "points of the path",
                    flag=Flag("--steps", _count_flag("steps"), metavar="N")),
             Option("rule", "riemann_trapezoid", "the Riemann rule, one of "
                    + ", ".join(RIEMANN_RULES),
                    flag=Flag("--rule", metavar="RULE", choices=RIEMANN_RULES)),
             _ROWS])

define(
    "smoothgrad", function=_METHODS + "smoothgrad",
    summary="gradient averaged over noisy copies of the input (Smilkov et al., 2017)",
    options=[Option("stdev_spread", 0.15, "the noise's standard deviation as a fraction of "
                    "each example's value range", _spread,
                    Flag("--stdev-spread", _number_flag(positive=False), metavar="S")),
             Option("samples", 50, "noisy copies per example", _samples,
                    Flag("--samples", _count_flag("samples"), metavar="N")),
             Option("seed", None, "the noise's random seed (None: new noise at every run)",
                    flag=Flag("--seed", _seed_flag, metavar="N")),
             Option("magnitude", False, "average the squared gradient",
                    flag=Flag("--magnitude", const=True)),
             _ROWS])

define(
    "grad_cam", function="graph_override.attribution.gradcam:grad_cam",
    summary="ReLU of a layer's activations weighted by their mean gradient "
            "(Selvaraju et al., 2017)",
    options=[Option("layer", None, "the layer's tensor (None: the last 4-D tensor before "
                    "the output)", flag=Flag("--layer", metavar="NAME:0")),
             Option("resize", False, "resize the maps to the input's height and width",
                    flag=Flag("--resize", const=True))])

define(
    "guided_backprop", function=_METHODS + "modified_gradient",
    summary="gradient passing only positive signals through ReLUs "
            "(Springenberg et al., 2015)",
    rules=[("guided_relu", {})])

define(
    "deconvnet", function=_METHODS + "modified_gradient",
    summary="ReLU backward passes positive gradients (Zeiler and Fergus, 2014)",
    rules=[("deconv_relu", {})])

define(
    "eps_lrp", function=_METHODS + "gradient_input", times_input=True,
    summary="epsilon-LRP as a modified gradient times input (Bach et al., 2015; "
            "Ancona et al., 2018)",
    options=[Option("epsilon", 1e-4, "the stabilizer epsilon > 0 of the rule",
                    flag=Flag("--epsilon", _number_flag(positive=True), metavar="EPS"),
                    rule=True)],
    rules=[("eps_lrp", {"epsilon": 1e-4})])

define(
    "deeplift", function=_METHODS + "deeplift", times_input=True,
    batch="inputs+references",
    summary="DeepLIFT, rescale rule, times (input - baseline) (Shrikumar et al., 2017)",
    options=[_BASELINE],
    rules=[("deeplift_rescale", {"shared_reference": False})])
