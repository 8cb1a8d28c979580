"""Docstrings of the estimator functions, written once for the three families.

Each family module sets ``fn.__doc__ = docstring(name, family)``. The
examples are executed by tests/docs/test_docs.py, in the mode the family needs.
"""

__all__ = ["docstring"]

_FAMILY = {
    "overrides": (
        "Family: graph_override.overrides. The gradient is changed through "
        "tf.RegisterGradient and Graph.gradient_override_map: the op that reads "
        "x carries a `_gradient_op_type` naming the estimator. Graph mode only "
        "(tf.compat.v1 Graph/Session, or tf.gradients inside tf.function); "
        "raises EagerModeError in eager mode and under a GradientTape inside "
        "tf.function, where TensorFlow would ignore the override."),
    "stopgrad": (
        "Family: graph_override.stopgrad. Registry-free: "
        "y = stop_gradient(f(x)) - (stop_gradient(h) - h) with dh/dx = g(x), "
        "so plain TensorFlow differentiates it anywhere (graph, eager, "
        "tf.function, a GraphDef imported in a fresh process). The forward "
        "value is exactly f(x); at non-finite x the gradient is 0."),
    "tf2": (
        "Family: graph_override.tf2. A tf.custom_gradient function; works in "
        "eager mode, tf.function, Keras and graph mode. It is the migration "
        "target and the oracle the other two families are tested against."),
}

_EST = {
    "ste_sign": dict(
        summary="Sign with the straight-through estimator (STE).",
        forward="q(x) = +1 if x >= 0 else -1 (never 0)",
        grad="dq/dx = 1 if |x| <= clip_value else 0 (clip_value=None: 1 everywhere)",
        args=("clip_value: gradient passes where |x| <= clip_value; None passes "
              "it everywhere."),
        paper="Hubara et al., Binarized Neural Networks, NeurIPS 2016; "
              "Bengio et al., arXiv:1308.3432, 2013.",
        example="ste_sign(x)",
        values="[-1.  1.  1.]", grads="[0. 1. 0.]"),
    "approx_sign": dict(
        summary="Sign with the piecewise polynomial ApproxSign gradient.",
        forward="q(x) = +1 if x >= 0 else -1",
        grad="dq/dx = max(0, 2 - 2|x|)",
        args="",
        paper="Liu et al., Bi-Real Net, ECCV 2018.",
        example="approx_sign(x)",
        values="[-1.  1.  1.]", grads="[0. 2. 0.]"),
    "swish_sign": dict(
        summary="Sign with the SwishSign gradient.",
        forward="q(x) = +1 if x >= 0 else -1",
        grad="dq/dx = beta (2 - beta x tanh(beta x / 2)) / (1 + cosh(beta x))",
        args="beta: sharpness of the surrogate; larger is closer to sign.",
        paper="Darabi et al., BNN+: Improved Binary Network Training, 2018.",
        example="swish_sign(x, beta=5.0)",
        values="[-1.  1.  1.]", grads=None),
    "ste_heaviside": dict(
        summary="Heaviside step with the straight-through estimator.",
        forward="q(x) = 1 if x > 0 else 0",
        grad="dq/dx = 1 if |x| <= clip_value else 0",
        args=("clip_value: gradient passes where |x| <= clip_value; None passes "
              "it everywhere."),
        paper="Bengio et al., arXiv:1308.3432, 2013.",
        example="ste_heaviside(x)",
        values="[0. 0. 1.]", grads="[0. 1. 0.]"),
    "ste_tern": dict(
        summary="Ternarization with the straight-through estimator.",
        forward=("q(x) = sign(sign(x + t) + sign(x - t)), that is sign(x) "
                 "if |x| >= t else 0,\n"
                 "            computed op for op as larq's ste_tern; t = "
                 "threshold_value, or with\n"
                 "            ternary_weight_networks t = 0.7 * mean(|x|)"),
        grad="dq/dx = 1 if |x| <= clip_value else 0",
        args=("threshold_value: the threshold t: values with |x| < t become 0, "
              "|x| = t keeps its sign.\n"
              "    ternary_weight_networks: if True, t = 0.7 * sum(|x|) / size(x) "
              "(Li et al.),\n      computed from x on every call; "
              "threshold_value is then unused.\n"
              "    clip_value: gradient passes where |x| <= clip_value; None "
              "passes it everywhere."),
        paper="Li et al., Ternary Weight Networks, arXiv:1605.04711, 2016.",
        example="ste_tern(x)",
        values="[-1.  0.  1.]", grads="[0. 1. 0.]"),
    "ste_round": dict(
        summary="Rounding (half to even) with an identity gradient.",
        forward="q(x) = round(x), halves to even as tf.round",
        grad="dq/dx = 1",
        args="",
        paper="Bengio et al., arXiv:1308.3432, 2013.",
        example="ste_round(x)",
        values="[-2.  0.  2.]", grads="[1. 1. 1.]"),
    "ste_floor": dict(
        summary="Floor with an identity gradient.",
        forward="q(x) = floor(x)",
        grad="dq/dx = 1",
        args="",
        paper="Bengio et al., arXiv:1308.3432, 2013.",
        example="ste_floor(x)",
        values="[-2.  0.  1.]", grads="[1. 1. 1.]"),
    "dorefa_quantize": dict(
        summary="DoReFa k-bit quantizer of values in [0, 1].",
        forward="q(x) = round(clip(x, 0, 1) n) / n with n = 2^k_bit - 1",
        grad="dq/dx = 1 if 0 <= x <= 1 else 0",
        args="k_bit: number of bits, 1 to 16.",
        paper="Zhou et al., DoReFa-Net, arXiv:1606.06160, 2016.",
        example="dorefa_quantize(x, k_bit=2)",
        values="[0. 0. 1.]", grads="[0. 1. 0.]"),
    "flip_gradient": dict(
        summary="Gradient reversal layer: identity forward, -scale * dy backward.",
        forward="q(x) = x",
        grad="dq/dx = -scale",
        args="scale: factor of the reversed gradient (lambda in the paper).",
        paper="Ganin & Lempitsky, Unsupervised Domain Adaptation by "
              "Backpropagation, ICML 2015.",
        example="flip_gradient(x, scale=1.0)",
        values="[-1.5  0.   1.5]", grads="[-1. -1. -1.]"),
    "scale_gradient": dict(
        summary="Identity forward, gradient multiplied by scale.",
        forward="q(x) = x",
        grad="dq/dx = scale",
        args="scale: factor applied to the gradient (0 stops it).",
        paper="",
        example="scale_gradient(x, scale=0.5)",
        values="[-1.5  0.   1.5]", grads="[0.5 0.5 0.5]"),
    "clip_gradient": dict(
        summary="Identity forward, upstream gradient clipped elementwise.",
        forward="q(x) = x",
        grad="dx = clip(dy, clip_value_min, clip_value_max)",
        args=("clip_value_min: lower bound of the gradient.\n"
              "    clip_value_max: upper bound of the gradient."),
        paper="",
        example="clip_gradient(x, clip_value_min=-0.5, clip_value_max=0.5)",
        values="[-1.5  0.   1.5]", grads="[0.5 0.5 0.5]"),
}

_STOPGRAD_CLIP = (
    "\n\n  A clipped gradient is not linear in dy, so no stop_gradient identity "
    "can express it;\n  this function therefore delegates to "
    "graph_override.tf2.clip_gradient (tf.custom_gradient)\n  and is not "
    "registry-free.")


def _example(name, family, e):
    call = "%s.%s" % (family, e["example"])
    lines = ["  Example:"]
    if family == "overrides":
        lines += [
            "    >>> import tensorflow as tf",
            "    >>> from graph_override import overrides",
            "    >>> with tf.Graph().as_default():",
            "    ...     x = tf.constant([-1.5, 0.0, 1.5])",
            "    ...     y = %s" % call,
            "    ...     dx, = tf.gradients(y, x)",
            "    ...     with tf.compat.v1.Session() as sess:",
            "    ...         y_value, dx_value = sess.run([y, dx])",
        ]
    else:
        lines += [
            "    >>> import tensorflow as tf",
            "    >>> from graph_override import %s" % family,
            "    >>> x = tf.constant([-1.5, 0.0, 1.5])",
            "    >>> with tf.GradientTape() as tape:",
            "    ...     tape.watch(x)",
            "    ...     y = %s" % call,
            "    >>> y_value, dx_value = y.numpy(), tape.gradient(y, x).numpy()",
        ]
    lines += ["    >>> print(y_value)", "    %s" % e["values"]]
    if e["grads"]:
        lines += ["    >>> print(dx_value)", "    %s" % e["grads"]]
    return "\n".join(lines)


def docstring(name, family):
    """The docstring of estimator `name` in `family`."""
    e = _EST[name]
    text = [e["summary"], "",
            "  Forward:  " + e["forward"],
            "  Gradient: " + e["grad"], "",
            "  " + _FAMILY[family]]
    if family == "stopgrad" and name == "clip_gradient":
        text[-1] += _STOPGRAD_CLIP
    text += ["", "  Args:", "    x: a float16, bfloat16, float32 or float64 tensor."]
    if e["args"]:
        text.append("    " + e["args"])
    text += ["    name: optional name scope for the created ops.", "",
             "  Returns:", "    A tensor of x's shape and dtype.", "",
             "  Raises:",
             "    TypeError: x is not floating point, or a parameter is not a number.",
             "    ValueError: a parameter is out of range."]
    if family == "overrides":
        text.append("    EagerModeError: called where TensorFlow ignores "
                    "override maps.")
    text += ["", _example(name, family, e)]
    if e["paper"]:
        text += ["", "  Reference: " + e["paper"]]
    return "\n".join(text) + "\n"
