"""Checks that keep `patch` and `make_portable` from giving a wrong or
unusable graph (see `graph_override.frozen`).

* `check_fits`: an attribution rule (guided_relu, eps_lrp, ...) fits only
  the op types it covers; an estimator's gradient goes to a node's first input, so
  the node's output 0 must have that input's dtype and shape (MatMul and
  OneHot do not), and the gradient estimators of the Identity family
  (flip_gradient, scale_gradient, clip_gradient) *replace* a node's
  gradient: on anything but an identity they are refused unless the caller
  says so (`allow_replace`).
* `check_imports`: a rewritten GraphDef is imported into a fresh tf.Graph
  (and each rewritten library function built as a graph) before it is
  returned; if TensorFlow refuses it, so does graph_override.
"""

import functools

import tensorflow as tf

from graph_override import estimators
from graph_override._tensorflow import compat
from graph_override.errors import RuleError

__all__ = ["IDENTITY_OPS", "check_fits", "check_fits_node", "check_function_shapes",
           "check_imports", "float_dtype", "needs_import", "node_dtype", "op_rule_pairs",
           "output_dtypes"]

# Op types whose output 0 is their input 0: scaling or reversing their
# gradient is what flip_gradient and scale_gradient mean.
IDENTITY_OPS = frozenset(("Identity", "IdentityN", "Snapshot", "StopGradient",
                          "PreventGradient", "CheckNumerics", "EnsureShape"))

# Op types whose output 0 has the shape of input 0 (the dtype is checked
# from the OpDef): no graph import is needed to check them.
_SAME_SHAPE_OPS = IDENTITY_OPS | frozenset((
    "Sign", "Round", "Floor", "Ceil", "Rint", "Relu", "Relu6", "Elu", "Selu",
    "LeakyRelu", "Tanh", "Sigmoid", "Softplus", "Softsign", "Neg", "Abs", "Square",
    "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Reciprocal", "Erf", "Cast",
    "ClipByValue", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxArgs",
    "FakeQuantWithMinMaxVarsPerChannel", "QuantizeAndDequantizeV2",
    "QuantizeAndDequantizeV3", "QuantizeAndDequantizeV4"))

# What TensorFlow raises for a graph it cannot import or build; RuntimeError:
# "Op type not registered", an op inside a library function that this
# TensorFlow does not know.
_NOT_IMPORTABLE = (ValueError, TypeError, KeyError, RuntimeError, tf.errors.OpError)

_SHAPE_HINT = (
    "An estimator's gradient goes to the node's first input, so it needs an op "
    "whose output has that input's shape and dtype (Identity, Sign, Round, "
    "Floor, Relu, FakeQuant...): select such a node instead (narrow the rule "
    "with --select / name_regex), e.g. the Identity after it, or set a "
    "registered gradient name written for this op type")


def _arg_types(node, args):
    """The DataType enum of each argument in `args` of `node`, None where
    the node's attrs do not say."""
    out = []
    for arg in args:
        if arg.type:
            out.append(arg.type)
        elif arg.type_attr and arg.type_attr in node.attr:
            out.append(node.attr[arg.type_attr].type)
        else:
            out.append(None)
    return out


def output_dtypes(node):
    """(dtype enum of input 0, dtype enum of output 0) from the OpDef, None
    for either that the OpDef and attrs do not fix."""
    op_def = compat.op_def(node.op)
    if op_def is None or not op_def.input_arg or not op_def.output_arg:
        return None, None
    return (_arg_types(node, op_def.input_arg[:1])[0],
            _arg_types(node, op_def.output_arg[:1])[0])


def float_dtype(enum, what, node, detail=""):
    """`enum` if it is a float DataType; else a RuleError naming the node."""
    try:
        dtype = tf.as_dtype(enum)
    except TypeError:
        dtype = None
    if dtype not in estimators.FLOAT_DTYPES:
        raise RuleError("%s: node %r (op %s)%s has dtype %s; estimators need "
                        "float16, bfloat16, float32 or float64" % (
                            what, node.name, node.op, detail,
                            dtype.name if dtype is not None else "enum %d" % enum))
    return enum


def node_dtype(node, what):
    """The float DataType enum of `node`'s output, for its stop_gradient
    form: its 'T' attr, else input 0's type as the OpDef fixes it."""
    attr = node.attr.get("T")
    if attr is not None and attr.type:
        return float_dtype(attr.type, what, node)
    enum = output_dtypes(node)[0]
    if enum is None:
        raise RuleError("%s: node %r (op %s) has no 'T' dtype attr, so no "
                        "stop_gradient form can be built for it" % (what, node.name, node.op))
    return float_dtype(enum, what, node)


def _dtype_name(enum):
    try:
        return tf.as_dtype(enum).name
    except TypeError:
        return "enum %d" % enum


def _replace_error(what, rule, name, op):
    estimator = rule.estimator
    meaning = {"flip_gradient": "-scale * dy", "scale_gradient": "scale * dy",
               "clip_gradient": "clip(dy, min, max)"}[estimator]
    return RuleError(
        "%s: %s on node %r (op %s) would replace its gradient, not %s it: its "
        "first input would get %s, whatever %s's own gradient is, and its other "
        "inputs none (on c = a * b, dc/da would be the scale, not the scale "
        "times b). %s means its textbook meaning only on an identity (%s). Select "
        "the Identity after the op, or pass allow_replace=True (CLI: "
        "--allow-replace) if replacing the gradient is what you want." % (
            what, estimator, name, op,
            {"clip_gradient": "clip"}.get(estimator, estimator.split("_")[0]),
            meaning, op, estimator, ", ".join(sorted(IDENTITY_OPS))))


def _same_dtype_by_def(op_type):
    """True if the OpDef fixes output 0 to input 0's dtype (same type attr
    or same fixed type), so no node of `op_type` needs a dtype check."""
    op_def = compat.op_def(op_type)
    if op_def is None or not op_def.input_arg or not op_def.output_arg:
        return True  # unknown here: nothing to compare
    a, b = op_def.input_arg[0], op_def.output_arg[0]
    return (a.type_attr and a.type_attr == b.type_attr) or (a.type and a.type == b.type)


def check_fits_node(node, address, rule, what, *, allow_replace=False):
    """`check_fits` for one node of a function body, by op type and dtype
    (shapes: `check_function_shapes`)."""
    estimators.covers(rule.spec, node.op, "node %r" % address, what, rule.params)
    if (rule.spec.op_type == "Identity"
            and node.op not in IDENTITY_OPS and not allow_replace):
        raise _replace_error(what, rule, address, node.op)
    x_type, y_type = output_dtypes(node)
    if x_type is not None and y_type is not None and x_type != y_type:
        raise RuleError(
            "%s: %s on node %r (op %s): its output is %s but its first input is "
            "%s. %s." % (what, rule.estimator, address, node.op, _dtype_name(y_type),
                         _dtype_name(x_type), _SHAPE_HINT))


def check_function_shapes(graph_def, fname, named, what):
    """Builds function `fname` as a graph and compares output 0 with input
    0 of each node in `named` ([(node name, rule)]) not known to keep its
    input's shape."""
    named = [(n, r) for n, r in named if r.estimator is not None and r.spec.op_types is None]
    if not named:
        return
    library = {f.signature.name: f for f in graph_def.library.function}
    with tf.Graph().as_default():
        try:
            graph = compat.function_def_to_graph(library[fname])
        except _NOT_IMPORTABLE:
            return
        for name, rule in named:
            op = graph.get_operation_by_name(name)
            if op.type in _SAME_SHAPE_OPS or not op.inputs or not op.outputs:
                continue
            x, y = op.inputs[0], op.outputs[0]
            if x.dtype != y.dtype or not x.shape.is_compatible_with(y.shape):
                raise RuleError(
                    "%s: %s on node '%s/%s' (op %s): its output is %s %s but its "
                    "first input is %s %s. %s." % (
                        what, rule.estimator, fname, name, op.type, y.dtype.name,
                        y.shape, x.dtype.name, x.shape, _SHAPE_HINT))


def check_fits(nodes, selected, rules, what, *, allow_replace=False, pairs=None):
    """Refuses estimator rules that cannot work on the nodes they select.

    Args:
      nodes: the top-level nodes (`graph_override.frozen.patching.sources.GraphNodes`:
        ``ops``, ``names``, ``node[i]`` and ``message()``, the GraphDef that
        is imported where shapes must be compared).
      selected: {node index: rule index} of the top-level nodes to change.
      rules: the rules.
      what: "patch" or "make_portable", for messages.
      allow_replace: accept flip/scale/clip_gradient on non-identity ops.
      pairs: `op_rule_pairs(nodes.ops, selected)`, if at hand.

    Raises:
      RuleError: naming the node, its op, the shapes or dtypes, and what
        would work.
    """
    # The checks depend on the op type and the rule; nodes are read one by
    # one only where the OpDef leaves the dtypes to the node's attrs.
    ops = nodes.ops
    to_import = []
    pairs = pairs if pairs is not None else op_rule_pairs(ops, selected)
    for op, r in sorted(pairs, key=lambda p: (p[1], p[0])):
        rule = rules[r]
        if rule.estimator is None:
            continue
        members = functools.lru_cache(maxsize=None)(
            functools.partial(_members, ops, selected, op, r))  # read once, if at all
        if rule.spec.op_types is not None:
            estimators.covers(rule.spec, op, "node %r" % nodes.names[members()[0]],
                              what, rule.params)
        if op == "IdentityN":
            continue
        if (rule.spec.op_type == "Identity"
                and op not in IDENTITY_OPS and not allow_replace):
            raise _replace_error(what, rule, nodes.names[members()[0]], op)
        if not _same_dtype_by_def(op):
            for i in members():
                _check_dtypes(nodes.node[i], rule, what)
        if op not in _SAME_SHAPE_OPS and rule.spec.op_types is None:
            # (a rule is written for the op types it covers, checked above:
            # MaxPool's output is smaller than its input)
            to_import.extend((nodes.names[i], rule) for i in members())
    if to_import:
        _check_shapes(nodes.message(), to_import, what)


def _check_dtypes(node, rule, what):
    x_type, y_type = output_dtypes(node)
    if x_type is not None and y_type is not None and x_type != y_type:
        raise RuleError(
            "%s: %s on node %r (op %s): its output is %s but its first "
            "input is %s. %s." % (what, rule.estimator, node.name, node.op,
                                  _dtype_name(y_type), _dtype_name(x_type), _SHAPE_HINT))


def op_rule_pairs(ops, selected):
    """The distinct (op type, rule index) pairs of `selected` ({node index:
    rule index}), found in C."""
    return set(zip(map(ops.__getitem__, selected), selected.values()))


def _members(ops, selected, op, r):
    """The node indices of `selected` of type `op` owned by rule `r`, in order."""
    return sorted(i for i, s in selected.items() if s == r and ops[i] == op)


def needs_import(ops, selected, rules, pairs=None):
    """True if `check_fits` would import the graph to compare shapes."""
    pairs = pairs if pairs is not None else op_rule_pairs(ops, selected)
    return any(rules[r].estimator is not None and op not in _SAME_SHAPE_OPS
               and rules[r].spec.op_types is None and op != "IdentityN" for op, r in pairs)


def _check_shapes(graph_def, named, what):
    """Imports `graph_def` and compares output 0 with input 0 of each node
    in `named` ([(node name, rule)]); a graph that does not import here (an
    op library not loaded) is checked by dtype only."""
    with tf.Graph().as_default() as graph:
        try:
            tf.compat.v1.import_graph_def(graph_def, name="")
        except _NOT_IMPORTABLE:
            return
    for name, rule in named:
        op = graph.get_operation_by_name(name)
        data = [t for t in op.inputs]
        if not data or not op.outputs:
            continue
        x, y = data[0], op.outputs[0]
        if x.dtype != y.dtype or not x.shape.is_compatible_with(y.shape):
            raise RuleError(
                "%s: %s on node %r (op %s): its output is %s %s but its first "
                "input %r is %s %s. %s." % (
                    what, rule.estimator, name, op.type, y.dtype.name, y.shape,
                    x.name, x.dtype.name, x.shape, _SHAPE_HINT))


def check_imports(graph_def, what, functions=()):
    """Imports `graph_def` into a fresh tf.Graph and builds each library
    function named in `functions` as a graph; RuleError if TensorFlow
    refuses either, so that no graph that does not import is returned."""
    try:
        with tf.Graph().as_default():
            tf.compat.v1.import_graph_def(graph_def, name="")
        library = {f.signature.name: f for f in graph_def.library.function}
        for name in functions:
            with tf.Graph().as_default():
                compat.function_def_to_graph(library[name])
    except _NOT_IMPORTABLE as e:
        raise RuleError(
            "%s: the rewritten graph does not import into TensorFlow (%s); "
            "nothing was returned or written. Narrow the rules to other nodes."
            % (what, str(e).splitlines()[0][:300] if str(e) else type(e).__name__)) from e
