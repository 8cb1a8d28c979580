"""Docstrings of the estimator functions, rendered for each family from the
record's `Doc` (graph_override/estimators/table.py).

`graph_override._families.functions` sets ``fn.__doc__ = docstring(name, family)``. The
examples are executed by tests/docs/test_docs.py, in the mode the family needs.
"""

import re

from graph_override import estimators

__all__ = ["docstring"]

# Markdown (the API reference) reads "[dy > 0] [y > 0]" as a reference link
# to "y > 0"; a product of Iverson brackets is rendered with its sign.
_ADJACENT_BRACKETS = re.compile(r"\]([ \t]*\n?[ \t]*)\[")



def _product(match):
    return "] *" + (match.group(1) or " ") + "["


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

_STOPGRAD_NOT_LINEAR = (
    "\n\n  Its gradient is not linear in dy, so no stop_gradient identity "
    "can express it;\n  this function therefore delegates to "
    "graph_override.tf2.%s (tf.custom_gradient)\n  and is not "
    "registry-free.")


def _example(name, family, doc):
    call = "%s.%s(%s)" % (family, name, ", ".join(
        ["x"] + ["%s=%r" % kv for kv in doc.example.items()]))
    lines = ["  Example:"]
    if family == "overrides":
        lines += [
            "    >>> import tensorflow as tf",
            "    >>> from graph_override import overrides",
            "    >>> with tf.Graph().as_default():",
            "    ...     x = tf.constant(%s)" % doc.x,
            "    ...     y = %s" % call,
            "    ...     dx, = tf.gradients(y, x)",
            "    ...     with tf.compat.v1.Session() as sess:",
            "    ...         y_value, dx_value = sess.run([y, dx])",
        ]
    else:
        lines += [
            "    >>> import tensorflow as tf",
            "    >>> from graph_override import %s" % family,
            "    >>> x = tf.constant(%s)" % doc.x,
            "    >>> with tf.GradientTape() as tape:",
            "    ...     tape.watch(x)",
            "    ...     y = %s" % call,
            "    >>> y_value, dx_value = y.numpy(), tape.gradient(y, x).numpy()",
        ]
    lines += ["    >>> print(y_value)", "    %s" % doc.values]
    if doc.grads:
        lines += ["    >>> print(dx_value)", "    %s" % doc.grads]
    return "\n".join(lines)


def docstring(name, family):
    """The docstring of estimator `name` in `family`."""
    spec = estimators.spec(name)
    doc = spec.doc
    text = [doc.summary, "",
            "  Forward:  " + doc.forward,
            "  Gradient: " + doc.gradient, "",
            "  " + _FAMILY[family]]
    if family == "stopgrad" and not spec.linear:
        text[-1] += _STOPGRAD_NOT_LINEAR % name
    text += ["", "  Args:", "    x: a float16, bfloat16, float32 or float64 tensor."]
    text += ["    %s: %s" % (p.name, p.doc) for p in spec.params]
    text += ["    name: optional name scope for the created ops.", "",
             "  Returns:", "    A tensor of x's shape and dtype.", "",
             "  Raises:",
             "    TypeError: x is not floating point, or a parameter is not a number.",
             "    ValueError: a parameter is out of range."]
    if family == "overrides":
        text.append("    EagerModeError: called where TensorFlow ignores "
                    "override maps.")
    if spec.op_types is not None:
        text.append("    RuleError: its gradient is asked of an op type it does not "
                    "cover (see the Forward line).")
    text = [_ADJACENT_BRACKETS.sub(_product, "\n".join(text)), "",
            _example(name, family, doc)]
    if doc.paper:
        text += ["", "  Reference: " + doc.paper]
    return "\n".join(text) + "\n"
