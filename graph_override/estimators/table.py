"""The estimator table: one `define` per estimator, and nothing else.

A record holds the estimator's parameters (defaults and checks), its forward
and gradient as TensorFlow ops, how the overrides family builds it (the op
type it re-routes; a `build` where the forward is more than that one op) and
its documentation. The families, built-in gradient names, ``--map``, the
portable form, Keras registration, the demo, the plots and the docs are all
derived from these records; adding an estimator is adding a record here
(docs/architecture.md, "Where to add things").
"""

import tensorflow as tf

from graph_override.estimators import attribution_ops, deeplift_ops, ops
from graph_override.estimators._record import (REQUIRED, Doc, choice, define, flag, integer,
                                               number)

__all__ = []

_CLIP = ("gradient passes where |x| <= clip_value; None passes it everywhere.")
CLIP_VALUE = number("clip_value", 1.0, _CLIP, allow_none=True, minimum=0.0)
_STE_PAPER = "Bengio et al., arXiv:1308.3432, 2013."
_SIGN_FORWARD = "q(x) = +1 if x >= 0 else -1"


define(
    "ste_sign", op_type="Sign", params=[CLIP_VALUE],
    forward=lambda x, p: ops.sign_pm1(x),
    mask=lambda x, p: ops.in_clip(x, p["clip_value"]),
    build=ops.sign_build(ops.finish_sign_pm1),
    doc=Doc(
        summary="Sign with the straight-through estimator (STE).",
        forward=_SIGN_FORWARD + " (never 0)",
        gradient="dq/dx = 1 if |x| <= clip_value else 0 (clip_value=None: 1 everywhere)",
        row=("+1 where x >= 0, else -1 (never 0)",
             "dy * [abs(x) <= clip_value]; clip_value=None: dy"),
        example={}, values="[-1.  1.  1.]", grads="[0. 1. 0.]",
        paper="Hubara et al., Binarized Neural Networks, NeurIPS 2016; " + _STE_PAPER))

define(
    "approx_sign", op_type="Sign",
    forward=lambda x, p: ops.sign_pm1(x),
    multiplier=lambda x, p: tf.maximum(
        ops.const(0.0, x), ops.const(2.0, x) - ops.const(2.0, x) * tf.abs(x)),
    larq=lambda x, dy, p: ops.approx_sign_larq(x, dy),
    build=ops.sign_build(ops.finish_sign_pm1),
    doc=Doc(
        summary="Sign with the piecewise polynomial ApproxSign gradient.",
        forward=_SIGN_FORWARD, gradient="dq/dx = max(0, 2 - 2|x|)",
        row=("as ste_sign", "dy * max(0, 2 - 2*abs(x))"),
        example={}, values="[-1.  1.  1.]", grads="[0. 2. 0.]",
        paper="Liu et al., Bi-Real Net, ECCV 2018."))

define(
    "swish_sign", op_type="Sign",
    params=[number("beta", 5.0, "sharpness of the surrogate; larger is closer to sign.",
                   positive=True)],
    forward=lambda x, p: ops.sign_pm1(x),
    multiplier=lambda x, p: ops.swish_multiplier(x, p["beta"]),
    larq=lambda x, dy, p: ops.swish_larq(x, dy, p["beta"]),
    build=ops.sign_build(ops.finish_sign_pm1),
    doc=Doc(
        summary="Sign with the SwishSign gradient.",
        forward=_SIGN_FORWARD,
        gradient="dq/dx = beta (2 - beta x tanh(beta x / 2)) / (1 + cosh(beta x))",
        row=("as ste_sign", "dy * beta*(2 - beta*x*tanh(beta*x/2)) / (1 + cosh(beta*x))"),
        example={"beta": 5.0}, values="[-1.  1.  1.]", grads=None,
        paper="Darabi et al., BNN+: Improved Binary Network Training, 2018."))

define(
    "ste_heaviside", op_type="Sign", params=[CLIP_VALUE],
    forward=lambda x, p: ops.heaviside(x),
    mask=lambda x, p: ops.in_clip(x, p["clip_value"]),
    build=ops.sign_build(ops.finish_heaviside),
    doc=Doc(
        summary="Heaviside step with the straight-through estimator.",
        forward="q(x) = 1 if x > 0 else 0",
        gradient="dq/dx = 1 if |x| <= clip_value else 0",
        row=("1 where x > 0, else 0", "as ste_sign"),
        example={}, values="[0. 0. 1.]", grads="[0. 1. 0.]", paper=_STE_PAPER))

define(
    "ste_tern", op_type="Sign",
    params=[
        number("threshold_value", 0.05,
               "the threshold t: values with |x| < t become 0, |x| = t keeps its sign.",
               minimum=0.0, unsigned_zero=True),
        flag("ternary_weight_networks", False,
             "if True, t = 0.7 * sum(|x|) / size(x) (Li et al.),\n"
             "      computed from x on every call; threshold_value is then unused."),
        CLIP_VALUE],
    forward=lambda x, p: ops.ternary(x, p),
    mask=lambda x, p: ops.in_clip(x, p["clip_value"]),
    build=ops.sign_build(ops.finish_ternary),
    doc=Doc(
        summary="Ternarization with the straight-through estimator.",
        forward=("q(x) = sign(sign(x + t) + sign(x - t)), that is sign(x) if |x| >= t else 0,\n"
                 "            computed op for op as larq's ste_tern; t = threshold_value, "
                 "or with\n"
                 "            ternary_weight_networks t = 0.7 * mean(|x|)"),
        gradient="dq/dx = 1 if |x| <= clip_value else 0",
        row=("sign(x) where abs(x) >= threshold, else 0: bitwise larq's sign(sign(x + t) + "
             "sign(x - t)); with ternary_weight_networks, t = 0.7 * mean(abs(x))",
             "as ste_sign"),
        example={}, values="[-1.  0.  1.]", grads="[0. 1. 0.]",
        paper="Li et al., Ternary Weight Networks, arXiv:1605.04711, 2016.",
        plot={"threshold_value": 0.5}))

define(
    "ste_round", op_type="Round",
    forward=lambda x, p: tf.round(x),
    multiplier=lambda x, p: None,
    doc=Doc(
        summary="Rounding (half to even) with an identity gradient.",
        forward="q(x) = round(x), halves to even as tf.round", gradient="dq/dx = 1",
        row=("round half to even (tf.round)", "dy"),
        example={}, values="[-2.  0.  2.]", grads="[1. 1. 1.]", paper=_STE_PAPER))

define(
    "ste_floor", op_type="Floor",
    forward=lambda x, p: tf.floor(x),
    multiplier=lambda x, p: None,
    doc=Doc(
        summary="Floor with an identity gradient.",
        forward="q(x) = floor(x)", gradient="dq/dx = 1",
        row=("floor", "dy"),
        example={}, values="[-2.  0.  1.]", grads="[1. 1. 1.]", paper=_STE_PAPER))


def _dorefa_build(x, params, grad_name, override):  # pylint: disable=unused-argument
    """The DoReFa-Net idiom: clip passes dy on [0, 1], Round passes it on."""
    n = tf.constant(float(2 ** params["k_bit"] - 1), dtype=x.dtype)
    clipped = tf.clip_by_value(x, tf.constant(0.0, x.dtype), tf.constant(1.0, x.dtype))
    with override({"Round": "Identity"}):
        return ops.exact_divide(tf.round(clipped * n), n)


define(
    "dorefa_quantize", op_type="Round",
    params=[integer("k_bit", 2, "number of bits, 1 to 16.", low=1, high=16)],
    forward=lambda x, p: ops.dorefa(x, p["k_bit"]),
    mask=lambda x, p: tf.logical_and(x >= ops.const(0.0, x), x <= ops.const(1.0, x)),
    build=_dorefa_build,
    doc=Doc(
        summary="DoReFa k-bit quantizer of values in [0, 1].",
        forward="q(x) = round(clip(x, 0, 1) n) / n with n = 2^k_bit - 1",
        gradient="dq/dx = 1 if 0 <= x <= 1 else 0",
        row=("round(clip(x, 0, 1) * (2^k - 1)) / (2^k - 1)", "dy * [0 <= x <= 1]"),
        example={"k_bit": 2}, values="[0. 0. 1.]", grads="[0. 1. 0.]",
        paper="Zhou et al., DoReFa-Net, arXiv:1606.06160, 2016."))

define(
    "flip_gradient", op_type="Identity",
    params=[number("scale", 1.0, "factor of the reversed gradient (lambda in the paper).")],
    forward=lambda x, p: tf.identity(x),
    multiplier=lambda x, p: ops.const(-p["scale"], x),
    doc=Doc(
        summary="Gradient reversal layer: identity forward, -scale * dy backward.",
        forward="q(x) = x", gradient="dq/dx = -scale",
        row=("x", "-scale * dy (gradient reversal layer)"),
        example={"scale": 1.0}, values="[-1.5  0.   1.5]", grads="[-1. -1. -1.]",
        paper="Ganin & Lempitsky, Unsupervised Domain Adaptation by Backpropagation, "
              "ICML 2015."))

define(
    "scale_gradient", op_type="Identity",
    params=[number("scale", REQUIRED, "factor applied to the gradient (0 stops it).")],
    forward=lambda x, p: tf.identity(x),
    multiplier=lambda x, p: ops.const(p["scale"], x),
    doc=Doc(
        summary="Identity forward, gradient multiplied by scale.",
        forward="q(x) = x", gradient="dq/dx = scale",
        row=("x", "scale * dy"),
        example={"scale": 0.5}, values="[-1.5  0.   1.5]", grads="[0.5 0.5 0.5]"))


def _check_clip_range(estimator, params):
    lo, hi = params["clip_value_min"], params["clip_value_max"]
    if lo > hi:
        raise ValueError("%s(clip_value_min=%r, clip_value_max=%r): min must not exceed "
                         "max" % (estimator, lo, hi))


define(
    "clip_gradient", op_type="Identity",
    params=[number("clip_value_min", REQUIRED, "lower bound of the gradient.",
                   allow_inf=True),
            number("clip_value_max", REQUIRED, "upper bound of the gradient.",
                   allow_inf=True)],
    check=_check_clip_range,
    forward=lambda x, p: tf.identity(x),
    gradient=lambda x, dy, p: tf.clip_by_value(
        dy, ops.const(p["clip_value_min"], dy), ops.const(p["clip_value_max"], dy)),
    doc=Doc(
        summary="Identity forward, upstream gradient clipped elementwise.",
        forward="q(x) = x", gradient="dx = clip(dy, clip_value_min, clip_value_max)",
        row=("x", "clip(dy, min, max)"),
        example={"clip_value_min": -0.5, "clip_value_max": 0.5},
        values="[-1.5  0.   1.5]", grads="[0.5 0.5 0.5]"))


# --- attribution rules: gradients of activations that read the op ----------------

_OP_FORWARD = "y = activation(x), one op of that type"
_ALPHA = number("alpha", 0.2, "LeakyRelu's slope below 0, for activation=\"LeakyRelu\" "
                "(a gradient\n      function reads the op's own).", in_name=False)


def _activation(op_types):
    return choice("activation", op_types[0],
                  "the op type of the forward, one of %s. A gradient function\n"
                  "      registered by name reads the type of the op it differentiates."
                  % ", ".join(op_types), choices=op_types, in_name=False)


define(
    "guided_relu", op_type="Relu", op_types=attribution_ops.RELUS,
    params=[_activation(attribution_ops.RELUS), _ALPHA],
    forward=lambda x, p: attribution_ops.forward(x, p), gradient=attribution_ops.guided,
    build=attribution_ops.build,
    doc=Doc(
        summary="Guided backpropagation: positive gradients only, through the op's own "
                "gradient.",
        forward=_OP_FORWARD + ": Relu, Relu6 or LeakyRelu",
        gradient=("dx = dy [dy > 0] f'(x): Relu dy [dy > 0] [y > 0] (TensorFlow's and\n"
                  "            tensorpack's GuidedRelu); Relu6 and LeakyRelu get their own "
                  "gradient\n            applied to max(dy, 0), [0 < y < 6] and "
                  "(1 if x > 0 else alpha), so a\n            unit passes a positive "
                  "signal exactly as its forward passes signal. Not\n            linear in "
                  "dy, so no fixed graph's backprop computes it (no\n            "
                  "stop_gradient form)."),
        row=("Relu, Relu6 or LeakyRelu (activation=)",
             "dy * [dy > 0] * [y > 0]; Relu6 * [y < 6] too; LeakyRelu dy * [dy > 0] * "
             "(1 if x > 0 else alpha)"),
        example={}, values="[0.  0.  1.5]", grads="[0. 0. 1.]",
        paper="Springenberg et al., Striving for Simplicity: The All Convolutional Net, "
              "ICLR 2015 workshop."))

define(
    "deconv_relu", op_type="Relu", op_types=attribution_ops.RELUS,
    params=[_activation(attribution_ops.RELUS), _ALPHA],
    forward=lambda x, p: attribution_ops.forward(x, p), gradient=attribution_ops.deconv,
    build=attribution_ops.build,
    doc=Doc(
        summary="Deconvnet: the Relu applied to the gradient, whatever the input.",
        forward=_OP_FORWARD + ": Relu, Relu6 or LeakyRelu",
        gradient=("dx = dy [dy > 0] = max(dy, 0), for Relu6 and LeakyRelu too (the\n"
                  "            deconvnet ignores the forward's mask). Not linear in dy, "
                  "so no fixed\n            graph's backprop computes it (no stop_gradient "
                  "form)."),
        row=("Relu, Relu6 or LeakyRelu (activation=)", "dy * [dy > 0]"),
        example={}, values="[0.  0.  1.5]", grads="[1. 1. 1.]",
        paper="Zeiler & Fergus, Visualizing and Understanding Convolutional Networks, "
              "ECCV 2014."))

define(
    "eps_lrp", op_type="Relu", op_types=attribution_ops.ACTIVATIONS,
    params=[number("epsilon", 1e-4, "the stabilizer; larger absorbs more relevance.",
                   positive=True),
            _activation(attribution_ops.ACTIVATIONS), _ALPHA],
    forward=lambda x, p: attribution_ops.forward(x, p),
    multiplier=attribution_ops.eps_lrp_multiplier,
    build=attribution_ops.build,
    doc=Doc(
        summary="The epsilon-LRP rule of an activation (DeepExplain's form).",
        forward=_OP_FORWARD + ": Relu, Relu6, LeakyRelu, Elu, Selu, Sigmoid, Tanh or "
                "Softplus",
        gradient=("dx = dy y / (x + epsilon s(x)), s(x) = +1 if x >= 0 else -1; 0 where\n"
                  "            the quotient is not finite (x = +-inf)"),
        row=("Relu, Relu6, LeakyRelu, Elu, Selu, Sigmoid, Tanh or Softplus (activation=)",
             "dy * y / (x + epsilon * s(x)), s(x) = +1 where x >= 0 else -1"),
        example={"activation": "LeakyRelu"}, values="[-0.3  0.   1.5]",
        grads="[0.19998667 0.         0.9999333 ]",
        paper="Bach et al., PLOS ONE 10(7), 2015; Ancona et al., Towards Better "
              "Understanding of Gradient-based Attribution Methods, ICLR 2018."))

define(
    "deeplift_rescale", op_type="Relu", op_types=attribution_ops.ACTIVATIONS,
    params=[number("threshold", 1e-10,
                   "below this |x - r| the multiplier is the gradient f'(x).\n"
                   "      Captum's eps=1e-10 (captum/attr/_core/deep_lift.py, nonlinear); "
                   "DeepExplain\n      uses 1e-5 (and f' at (x + r) / 2), SHAP's deep_tf "
                   "1e-6.", positive=True),
            flag("shared_reference", False,
                 "True: the batch is [inputs; reference], N + 1 rows, its last row\n"
                 "      the one reference of every input (a baseline shared by all, as\n"
                 "      zeros); False: [inputs; references], 2N rows."),
            _activation(attribution_ops.ACTIVATIONS), _ALPHA],
    forward=lambda x, p: attribution_ops.forward(x, p),
    multiplier=attribution_ops.rescale_multiplier,
    build=attribution_ops.build,
    doc=Doc(
        summary="The DeepLIFT rescale rule, inputs and references in one batch.",
        forward=(_OP_FORWARD + "; its batch (axis 0) holds [inputs; references],\n"
                 "            2N rows (an odd batch raises RuleError, or fails when run "
                 "if unknown\n            until then), or with shared_reference [inputs; "
                 "reference], N + 1"),
        gradient=("dx = dy concat([m, m]), m = (y[:N] - y[N:]) / (x[:N] - x[N:]) where\n"
                  "            |x[:N] - x[N:]| >= threshold, else f'(x[:N]) (Captum's "
                  "rule); 0 where m\n            is not finite. shared_reference: r = "
                  "x[N] for every input,\n            dx = dy concat([m, 0])"),
        row=("as eps_lrp; the batch holds [inputs; references] (or [inputs; reference])",
             "dy * concat([m, m]), m = (f(x) - f(r)) / (x - r) where abs(x - r) >= "
             "threshold, else f'(x)"),
        example={"activation": "LeakyRelu"}, x="[1.5, -1.0, 0.0, 0.0]",
        values="[ 1.5 -0.2  0.   0. ]",
        grads="[1.  0.2 1.  0.2]",
        paper="Shrikumar et al., Learning Important Features Through Propagating "
              "Activation Differences, ICML 2017."))

_SHARED = ("True: the batch is [inputs; reference], N + 1 rows, its last row\n"
           "      the one reference of every input; False: [inputs; references], 2N rows.")

define(
    "deeplift_maxpool", op_type="MaxPool", op_types=deeplift_ops.MAXPOOL_OPS,
    params=[number("threshold", 1e-7, "below this |x - r| the multiplier is 0 (SHAP's "
                   "deep_tf maxpool).", positive=True),
            flag("shared_reference", False, _SHARED),
            integer("ksize", 2, "the window of the family functions' forward (a "
                    "gradient function\n      reads the op's own).", low=1, high=2 ** 16,
                    in_name=False),
            integer("strides", 2, "the forward's stride (read from the op likewise).",
                    low=1, high=2 ** 16, in_name=False),
            choice("padding", "VALID", "the forward's padding (read from the op "
                   "likewise).", choices=("VALID", "SAME"), in_name=False)],
    forward=deeplift_ops.maxpool_forward, gradient=deeplift_ops.maxpool_gradient,
    doc=Doc(
        summary="The DeepLIFT rule of MaxPool (SHAP's DeepExplainer), inputs and "
                "references in one batch.",
        forward="y = MaxPool(x); its batch (axis 0) holds [inputs; references], as "
                "deeplift_rescale's",
        gradient=("per window, c = max(y, y_r): dy (c - y_r) goes to the argmax of x,\n"
                  "            dy (y - c) to the argmax of r; m = what reached a "
                  "position / (x - r),\n            0 where |x - r| < threshold; "
                  "dx = concat([m, m]) (shared_reference:\n            "
                  "concat([m, 0])). The attributions m (x - r) sum to dy (y - y_r)."),
        row=("MaxPool; the batch holds [inputs; references] (or [inputs; reference])",
             "c = max(y, y_r); dy * (c - y_r) to the argmax of x and dy * (y - c) to the "
             "argmax of r, over (x - r); 0 where abs(x - r) < threshold"),
        example={}, x="[[[[1.0], [3.0]], [[0.0], [2.0]]], [[[2.0], [0.0]], [[0.0], [1.0]]]]",
        values="[[[[3.]]]\n    <BLANKLINE>\n    <BLANKLINE>\n     [[[2.]]]]",
        grads=("[[[[-0.        ]\n       [ 0.33333334]]\n    <BLANKLINE>\n      [[ 0.        ]\n"
               "       [ 0.        ]]]\n    <BLANKLINE>\n    <BLANKLINE>\n     [[[-0.        ]\n"
               "       [ 0.33333334]]\n    <BLANKLINE>\n      [[ 0.        ]\n"
               "       [ 0.        ]]]]"),
        paper="Shrikumar et al., ICML 2017; Lundberg and Lee, A Unified Approach to "
              "Interpreting Model Predictions, NeurIPS 2017 (SHAP's DeepExplainer)."))

define(
    "deeplift_softmax", op_type="Softmax", op_types=deeplift_ops.SOFTMAX_OPS,
    params=[number("threshold", 1e-6, "below this |x - r| the centred input's "
                   "multiplier is kept (SHAP's\n      deep_tf softmax).", positive=True),
            flag("shared_reference", False, _SHARED)],
    forward=lambda x, p: tf.nn.softmax(x), gradient=deeplift_ops.softmax_gradient,
    doc=Doc(
        summary="The DeepLIFT rule of Softmax (SHAP's DeepExplainer), inputs and "
                "references in one batch.",
        forward="y = softmax(x) on the last axis; its batch (axis 0) holds [inputs; "
                "references]",
        gradient=("SHAP's decomposition: e = exp(x - max x) by the rescale rule,\n"
                  "            e / sum(e) by the Shapley values of its two inputs, carried "
                  "to x\n            by (xc - rc) / (x - r); the attributions m (x - r) "
                  "sum to\n            dy (y - y_r)"),
        row=("Softmax (last axis); the batch holds [inputs; references] (or [inputs; "
             "reference])",
             "SHAP's: exp by rescale, e / sum(e) by Shapley values, then times "
             "(xc - rc) / (x - r)"),
        example={}, x="[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]",
        values="[[0.25 0.25 0.25 0.25]\n     [0.25 0.25 0.25 0.25]]",
        grads=None,  # the gradient of sum(y), a constant 1: 0 (its signs vary)
        paper="Lundberg and Lee, NeurIPS 2017 (SHAP's DeepExplainer, deep_tf.py "
              "softmax)."))
