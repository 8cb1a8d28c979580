"""Frozen graphs: inspect, patch and make portable the gradients of a GraphDef.

A frozen TF1 model is a GraphDef with its weights folded into Const nodes.
Differentiating it (saliency maps, adversarial inputs, fine-tuning a
binarized model) fails or gives zeros when

* an op type has no gradient at all (``LookupError: No gradient defined for
  operation ...``),
* a node carries a ``_gradient_op_type`` attr (what
  ``Graph.gradient_override_map`` and ``tf.custom_gradient`` set) that this
  process cannot resolve, e.g. ``CustomGradient-5997``, which died with the
  process that built the graph, or
* the gradient exists but is useless (Sign, Round and Floor have zero
  gradient).

`inspect` finds these nodes; `patch` sets, replaces or removes the gradient
of nodes selected by `Rule` s (op type, node-name regex, current gradient
name), using self-describing names such as
``graph_override.ste_sign(clip_value=1.0)`` that any process importing
graph_override resolves; `make_portable` rewrites the selected nodes into
stop_gradient subgraphs that plain TensorFlow differentiates correctly with
no graph_override installed; `import_graph_def` resolves the graph's
gradient names before importing and fails early, listing those it cannot.
Nodes inside the function library (functional While/If bodies) are
inspected and patched as ``FUNCTION/NODE``; TF1 while loops, which
TensorFlow cannot differentiate after import, are reported.

Example:
  >>> import tensorflow as tf
  >>> from graph_override import frozen
  >>> with tf.Graph().as_default() as g:
  ...     x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
  ...     y = tf.sign(x, name="y")
  >>> fixed, report = frozen.patch(g.as_graph_def(), ["Sign=ste_sign"])
  >>> [c.node for c in report.changes]
  ['y']
  >>> with tf.Graph().as_default():
  ...     x, y = frozen.import_graph_def(fixed, return_elements=["x:0", "y:0"],
  ...                                    name="")
  ...     dx, = tf.gradients(y, x)
  ...     with tf.compat.v1.Session() as sess:
  ...         print(sess.run(dx, {x: [-2.0, 0.5, 1.0]}))
  [0. 1. 1.]
"""

import collections

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override import registry, user_functions
from graph_override.frozen.graphdef.io import (MAX_BYTES, check_output_path, load,
                                               parse_graph_def, save, validate)
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, node_list, nodes_by_gradient
from graph_override.frozen.inspection.inspector import ZERO_GRADIENT_OPS, inspect
from graph_override.frozen.inspection.risky import RISKY_OPS
from graph_override.frozen.inspection.report import InspectReport
from graph_override.frozen.patching.engine import make_portable, patch
from graph_override.frozen.patching.patch_file import patch_file
from graph_override.frozen.patching.report import NodeChange, PatchReport
from graph_override.frozen.patching.patch_rules import Rule, parse_rule
from graph_override.errors import RuleError
from graph_override.frozen.tf2.function import FrozenFunction, to_function
from graph_override.errors import ConversionError, EagerModeError, UnknownGradientError

__all__ = [
    "ConversionError",
    "FrozenFunction",
    "FrozenLayer",
    "GRADIENT_ATTR",
    "InspectReport",
    "MAX_BYTES",
    "NodeChange",
    "PatchReport",
    "RISKY_OPS",
    "Rule",
    "RuleError",
    "ZERO_GRADIENT_OPS",
    "check_output_path",
    "import_graph_def",
    "inspect",
    "load",
    "make_portable",
    "parse_graph_def",
    "parse_rule",
    "patch",
    "patch_file",
    "save",
    "to_function",
    "validate",
]


def __getattr__(name):
    # FrozenLayer imports Keras, which `import graph_override.frozen` should not.
    if name == "FrozenLayer":
        from graph_override.frozen.tf2.layer import FrozenLayer  # pylint: disable=import-outside-toplevel
        return FrozenLayer
    raise AttributeError("module 'graph_override.frozen' has no attribute %r" % name)


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None):
    """`tf.compat.v1.import_graph_def` that resolves gradient names first.

    Every ``_gradient_op_type`` name must resolve in this process (built-in
    estimator names are registered on demand); otherwise nothing is imported
    and the error lists each unresolvable name with its nodes.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, name="x")
      ...     with g.gradient_override_map({"Sign": "CustomGradient-31337"}):
      ...         y = tf.sign(x, name="y")
      >>> with tf.Graph().as_default():
      ...     frozen.import_graph_def(g.as_graph_def())
      Traceback (most recent call last):
      ...
      graph_override.errors.UnknownGradientError: import_graph_def: 1 gradient name(s) cannot be resolved here: 'CustomGradient-31337' (node(s) y). ...

    Args:
      graph_def: a `GraphDef`, or a path to one (read with `load`).
      input_map, return_elements, name: as in tf.compat.v1.import_graph_def.

    Returns:
      What tf.compat.v1.import_graph_def returns.

    Raises:
      UnknownGradientError: listing the names that do not resolve.
      EagerModeError: called eagerly (no graph to import into).
    """
    if tf.executing_eagerly():
        raise EagerModeError(
            "frozen.import_graph_def() needs a graph: call it inside "
            "`with tf.Graph().as_default():`, or wrap it with "
            "tf.compat.v1.wrap_function for eager use")
    if not isinstance(graph_def, graph_pb2.GraphDef):
        graph_def = load(graph_def)
    missing = collections.OrderedDict()
    for gname, nodes in nodes_by_gradient(graph_def).items():
        if registry.is_resolvable(gname):
            registry.resolve(gname)
        else:
            missing[gname] = nodes
    if missing:
        raise UnknownGradientError(
            "import_graph_def: %d gradient name(s) cannot be resolved here: %s. "
            "Repair them first, e.g. `graph-override patch MODEL -o OUT --map "
            "'gradient:NAME=ste_sign'` or `--map 'gradient:NAME=remove'`, or "
            "register the functions before importing.%s" % (len(missing), "; ".join(
                "%r (node(s) %s)" % (n, node_list(v))
                for n, v in missing.items()), user_functions.registration_hint(missing)))
    return tf.compat.v1.import_graph_def(graph_def, input_map=input_map,
                                         return_elements=return_elements, name=name)
