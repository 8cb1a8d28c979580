"""`graph_override.frozen.patch` and `make_portable`: apply rules to a GraphDef."""

import functools

import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override import _compat, estimators, registry
from graph_override.frozen.graphdef.views import (GRADIENT_ATTR, View, gradient_attr,
                                                  node_list, nodes_by_gradient)
from graph_override.frozen.inspection.inspector import v1_loops
from graph_override.frozen.inspection.report import V1_LOOP_HELP
from graph_override.frozen.patching import library
from graph_override.frozen.patching import portable as portable_form
from graph_override.frozen.patching import verify
from graph_override.frozen.patching.report import NodeChange, NodeChanges, PatchReport
from graph_override.frozen.patching.rules import RuleError, as_rules, check_matches, select
from graph_override.errors import GraphDefError

__all__ = ["loop_warnings", "make_portable", "patch", "set_names"]



def _data_inputs(node):
    return [i for i in node.input if not i.startswith("^")]


def _float_dtype(enum, what, node, detail=""):
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


def _dtype(node, what):
    attr = node.attr.get("T")
    if attr is not None and attr.type:
        return _float_dtype(attr.type, what, node)
    enum = verify.output_dtypes(node)[0]  # input 0's type, as the OpDef fixes it
    if enum is None:
        raise RuleError("%s: node %r (op %s) has no 'T' dtype attr, so no "
                        "stop_gradient form can be built for it" % (what, node.name, node.op))
    return _float_dtype(enum, what, node)


def _rewrite_identity_n(node, rule, names, what):
    """The outputs of a tf.custom_gradient IdentityN (inputs: k results, then
    k arguments) become stop_gradient forms of result i with the estimator's
    gradient into argument i; the dead gradient name is dropped."""
    inputs = _data_inputs(node)
    types = list(node.attr["T"].list.type) if "T" in node.attr else []
    k = len(inputs) // 2
    if (len(inputs) % 2 or k == 0 or len(types) != len(inputs)
            or types[:k] != types[k:]):
        raise RuleError(
            "%s: node %r (IdentityN, inputs %s) is not the tf.custom_gradient "
            "pattern of k results followed by k arguments of the same dtypes, "
            "so an estimator cannot be placed on it; use remove or a registered "
            "gradient name" % (what, node.name, inputs))
    if not estimators.ESTIMATORS[rule.estimator].linear:
        raise RuleError("%s: %s on node %r: its gradient is not linear in dy, "
                        "which the stop_gradient form needs; use a registered "
                        "gradient name instead" % (what, rule.estimator, node.name))
    added = b""
    for i in range(k):
        _float_dtype(types[i], what, node, " input %d" % i)
        prefix = "%s/graph_override_portable_%d/" % (node.name, i)
        out_name = prefix + "out"
        added += _claim(names, portable_form.stamp(
            rule.estimator, rule.params, types[i], x_ref=inputs[k + i],
            y_ref=inputs[i], prefix=prefix, out_name=out_name, device=node.device), what)
        node.input[i] = out_name
    if GRADIENT_ATTR in node.attr:
        del node.attr[GRADIENT_ATTR]
    return added


def _claim(names, stamped, what):
    """Adds the names of the `stamped` nodes to `names`, refusing any already
    taken; returns their bytes."""
    new_names, data = stamped
    for name in new_names:
        if name in names:
            raise RuleError("%s: node name %r exists already; was this graph "
                            "patched or made portable before?" % (what, name))
        names.add(name)
    return data


def _rewrite_node(node, rule, names, what):
    """Node N (one used output) becomes N/graph_override_forward; a
    stop_gradient form of it takes the name N."""
    inputs = _data_inputs(node)
    if not inputs:
        raise RuleError("%s: node %r (op %s) has no input to pass a gradient to"
                        % (what, node.name, node.op))
    dtype = _dtype(node, what)
    original = node.name
    forward = original + "/graph_override_forward"
    if forward in names:
        raise RuleError("%s: node name %r exists already; was this graph made "
                        "portable before?" % (what, forward))
    names.add(forward)
    names.discard(original)  # the stop_gradient form takes it over
    node.name = forward
    if GRADIENT_ATTR in node.attr:
        del node.attr[GRADIENT_ATTR]
    return _claim(names, portable_form.stamp(
        rule.estimator, rule.params, dtype, x_ref=inputs[0], y_ref=forward,
        prefix=original + "/graph_override_portable/", out_name=original,
        device=node.device), what)


def _apply(graph_def, rules, on_no_match, portable, allow_replace=False):
    what = "make_portable" if portable else "patch"
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("%s(): expected a tf.compat.v1.GraphDef, got %s"
                            % (what, type(graph_def).__name__))
    rules = as_rules(rules)
    if portable:
        for rule in rules:
            if rule.gradient is not None and not (  # TensorFlow's own resolve anywhere
                    _compat.is_op_type(rule.gradient) and _compat.has_gradient_entry(rule.gradient)):
                raise RuleError(
                    "make_portable: rule %s sets the registered name %r, which "
                    "plain TensorFlow cannot resolve in a new process; use a "
                    "built-in estimator, or patch() instead" % (rule, rule.gradient))
            if rule.estimator is not None and not estimators.ESTIMATORS[rule.estimator].linear:
                raise RuleError(
                    "make_portable: %s cannot be made portable: a clipped "
                    "gradient is not linear in dy, which no stop_gradient "
                    "identity can express. Use patch() and import the result "
                    "with graph_override.frozen.import_graph_def." % rule.estimator)
    view = View(graph_def)
    selected, owner = select(graph_def, view, rules)
    in_functions = (library.select_function_nodes(graph_def, rules)
                    if graph_def.library.function else {})
    check_matches(rules, {r: list(selected[r]) + in_functions.get(r, [])
                          for r in selected}, on_no_match)
    if portable and owner:
        _check_single_output(graph_def, owner, rules)
    verify.check_fits(graph_def, view.ops, owner, rules, what, allow_replace=allow_replace)
    if not portable and not view.has_gradient_attrs and not any(
            in_functions.values()) and not any(
            rules[r].remove or (rules[r].estimator and view.ops[i] == "IdentityN")
            for i, r in owner.items()):
        new, report = _set_names_fast(graph_def, view, rules, selected, owner)
        report.warnings = loop_warnings(graph_def, view)
        return new, report
    # A copy: parsing the bytes at hand is faster than CopyFrom.
    new = graph_pb2.GraphDef.FromString(view.data)
    changes, added = [], []  # added: serialized GraphDef node fields
    names = None
    if portable or any(view.ops[i] == "IdentityN" for i in owner
                       if rules[owner[i]].estimator):
        names = set(view.names)
    # Per rule, once: its text, target name (resolved) and encoded bytes.
    texts = [str(r) for r in rules]
    targets = [r.target for r in rules]
    encoded = [None if t is None else t.encode("utf-8") for t in targets]
    for target in targets:
        if target is not None and not portable:
            registry.resolve(target)
    nodes = new.node
    for i in sorted(owner):
        r = owner[i]
        rule = rules[r]
        node = nodes[i]
        attrs = node.attr
        before = (gradient_attr(node) if view.has_gradient_attrs
                  and GRADIENT_ATTR in attrs else None)
        name, op = view.names[i], view.ops[i]
        if rule.remove:
            if before is None:
                continue
            del attrs[GRADIENT_ATTR]
            changes.append(NodeChange(name, op, "remove", before, None, texts[r]))
        elif rule.estimator is not None and op == "IdentityN":
            added.append(_rewrite_identity_n(node, rule, names, what))
            changes.append(NodeChange(name, op, "rewrite", before,
                                      "stop_gradient form of " + targets[r], texts[r]))
        elif portable and rule.estimator is not None:
            added.append(_rewrite_node(node, rule, names, what))
            changes.append(NodeChange(name, op, "rewrite", before,
                                      "stop_gradient form of " + targets[r], texts[r]))
        else:
            if rule.estimator is not None and not _takes_inputs(op):
                inputs = node.input
                if not inputs or inputs[0].startswith("^"):
                    raise RuleError("patch: node %r (op %s) has no input to pass a "
                                    "gradient to; narrow the rule %s" % (name, op, rule))
            attrs[GRADIENT_ATTR].s = encoded[r]
            changes.append(NodeChange(name, op, "set", before, targets[r], texts[r]))
    function_changes, function_nodes, rewritten = [], 0, []
    if any(in_functions.values()):
        function_changes, function_nodes, rewritten = library.apply_to_functions(
            new, in_functions, rules, what, portable=portable,
            allow_replace=allow_replace, dtype_of=_dtype)
        changes += [NodeChange(*c) for c in function_changes]
    nodes_added = function_nodes
    if added:
        count = len(new.node)
        new = graph_pb2.GraphDef.FromString(new.SerializeToString() + b"".join(added))
        nodes_added += len(new.node) - count
    report = PatchReport(changes=changes, nodes_added=nodes_added, portable=portable,
                         rule_matches=[(str(r), len(selected[j]) + len(in_functions.get(j, ())))
                                       for j, r in enumerate(rules)])
    if portable:
        report.unresolved_left = _non_portable_names(new)
    if nodes_added:
        verify.check_imports(new, what, rewritten)
    report.warnings = loop_warnings(graph_def, view)
    return new, report


def loop_warnings(graph_def, view):
    """The TF1 while loops that keep tf.gradients from working on the result."""
    loops = v1_loops(graph_def, view.ops)
    if not loops:
        return []
    return ["the graph holds %d TF1 while loop(s) (%s): tf.gradients through them "
            "fails after import, patched or not; %s" % (
                len(loops), ", ".join(e["loop"] for e in loops[:5])
                + (" ..." if len(loops) > 5 else ""), V1_LOOP_HELP)]


def _set_names_fast(graph_def, view, rules, selected, owner):
    """`patch` when every change sets a name on a node that has none (see
    `set_names`); the new GraphDef is parsed once from the bytes."""
    data, report = set_names(view, rules, selected, owner, lambda i: graph_def.node[i])
    return graph_pb2.GraphDef.FromString(data), report


def set_names(view, rules, selected, owner, node_at, pairs=None):
    """The bytes and `PatchReport` of `patch` when every change sets a name
    on a node that has none: the attr is appended to each selected node's
    bytes (protobuf merges it into the node's attr map), everything else is
    kept byte for byte.

    Args:
      view: a `View` (names, op types, bytes) of the graph.
      rules, selected, owner: the rules and what `select` gave.
      node_at: node index -> NodeDef, read only for nodes whose op type may
        have no data input.
      pairs: `verify.op_rule_pairs(view.ops, owner)`, if at hand.
    """
    texts = [str(r) for r in rules]
    targets = [r.target for r in rules]
    entries = []
    for target in targets:
        if target is None:  # a remove rule, here selecting no node
            entries.append(None)
            continue
        registry.resolve(target)
        entry = node_def_pb2.NodeDef()
        entry.attr[GRADIENT_ATTR].s = target.encode("utf-8")
        entries.append(entry.SerializeToString())
    pairs = pairs if pairs is not None else verify.op_rule_pairs(view.ops, owner)
    unchecked = {op for op, r in pairs
                 if rules[r].estimator is not None and not _takes_inputs(op)}
    if unchecked:
        for i, r in owner.items():
            if rules[r].estimator is not None and view.ops[i] in unchecked:
                inputs = node_at(i).input
                if not inputs or inputs[0].startswith("^"):
                    raise RuleError("patch: node %r (op %s) has no input to pass a "
                                    "gradient to; narrow the rule %s"
                                    % (view.index.name(i), view.ops[i], rules[r]))
    order = sorted(owner)
    data = view.index.append_entries(view.data, order, [owner[i] for i in order], entries)
    changes = NodeChanges(view.index.lazy_names, view.ops, order, owner, targets, texts)
    report = PatchReport(changes=changes, rule_matches=[
        (texts[j], len(selected[j])) for j in range(len(rules))])
    return data, report


@functools.lru_cache(maxsize=256)
def _takes_inputs(op_type):
    """True if every node of `op_type` has a data input (its OpDef has a
    single-tensor input argument), so nodes need no check one by one."""
    op_def = _compat.op_def(op_type)
    return op_def is not None and any(
        not (a.number_attr or a.type_list_attr) for a in op_def.input_arg)


def _check_single_output(graph_def, owner, rules):
    """make_portable replaces output 0 only: refuse nodes whose other outputs
    are used (IdentityN of tf.custom_gradient is handled separately)."""
    chosen = {graph_def.node[i].name for i in owner
              if rules[owner[i]].estimator and graph_def.node[i].op != "IdentityN"}
    if not chosen:
        return
    for node in graph_def.node:
        for inp in node.input:
            base, sep, index = inp.lstrip("^").partition(":")
            if sep and index != "0" and base in chosen:
                raise RuleError(
                    "make_portable: node %r is used through output %s (by %r); "
                    "only single-output nodes can be rewritten" % (base, index, node.name))


def _non_portable_names(graph_def):
    return ["node(s) %s keep gradient %r, which plain TensorFlow cannot resolve"
            % (node_list(nodes), name)
            for name, nodes in nodes_by_gradient(graph_def).items()
            if registry.parse_builtin_name(name) is not None
            or not _compat.has_gradient_entry(name)]


def patch(graph_def, rules, *, on_no_match="raise", allow_replace=False):
    """Sets, replaces or removes the gradient of the nodes `rules` select.

    An estimator rule sets ``_gradient_op_type`` to the estimator's
    self-describing name (``graph_override.ste_sign(clip_value=1.0)``), which
    any process that imports graph_override resolves; its gradient applies to
    the node's first input. On the IdentityN node that tf.custom_gradient
    leaves (k results, then k arguments) it instead rewrites the node into
    the stop_gradient form, the estimator's gradient going to the arguments.
    The input is not modified.

    Args:
      graph_def: a `GraphDef`.
      rules: `Rule` s or ``--map`` strings (see `parse_rule`), or a dict
        ``{"Sign": "ste_sign"}``. A node selected by several rules gets the
        first.
      on_no_match: "raise" (`NoMatchError`), "warn" or "ignore" for a rule
        that selects no node.
      allow_replace: let flip_gradient, scale_gradient and clip_gradient
        replace the gradient of ops that are not identities (see below).

    Nodes inside the function library (While/If bodies) are selected like
    top-level nodes, named ``FUNCTION/NODE`` in the report; the functions
    changed get new names (see `graph_override.frozen.patching.library`). Rules on
    nodes inside a PartitionedCall body are refused: TensorFlow
    differentiates those bodies in C++ and would ignore the change.

    An estimator's gradient goes to the node's first input, so a node whose
    output 0 differs from that input in dtype or shape (MatMul, OneHot) is
    refused. flip_gradient and scale_gradient mean -scale * dy and
    scale * dy through an identity; on any other op (c = a * b) they would
    replace its gradient (dc/da = scale instead of scale * b) and leave its
    other inputs without one, so they are refused there unless
    `allow_replace` is given.

    Returns:
      ``(new_graph_def, PatchReport)``.

    Raises:
      RuleError: a rule that cannot work on a node it selects (see above);
        UnknownOpTypeError, NoMatchError: see above.
    """
    return _apply(graph_def, rules, on_no_match, portable=False,
                  allow_replace=allow_replace)


def make_portable(graph_def, rules, *, on_no_match="raise", allow_replace=False):
    """Rewrites the selected nodes into stop_gradient subgraphs.

    Node N becomes ``N/graph_override_forward`` (its op, unchanged) and a
    small subgraph named N computes
    ``stop_gradient(y) - (stop_gradient(h) - h)`` with
    ``h = x * stop_gradient(g(x))``: bitwise the same forward values, and the
    estimator's gradient ``dy * g(x)`` into the first input x, in plain
    TensorFlow with no graph_override imported. As in `graph_override.stopgrad`,
    an infinite x gets gradient 0 (x * g(x) would be infinite there, and
    inf - inf would turn the forward value into NaN). `remove` rules delete the
    gradient attr. clip_gradient and registered names are refused (neither
    has a stop_gradient form).

    Example:
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     y = tf.sign(tf.compat.v1.placeholder(tf.float32, name="x"), name="y")
      >>> portable, report = frozen.make_portable(g.as_graph_def(), ["Sign=ste_sign"])
      >>> report.nodes_added > 0, [n.op for n in portable.node if n.name == "y"]
      (True, ['Sub'])

    Returns:
      ``(new_graph_def, PatchReport)``.

    The result is imported into a fresh tf.Graph before it is returned;
    a rewrite TensorFlow would not import is refused.

    Raises:
      RuleError: clip_gradient, a registered name, a multi-output node, a
        non-float node, and what `patch` refuses (a node whose output is
        not its first input's dtype and shape; flip_gradient and
        scale_gradient on a non-identity without `allow_replace`);
        UnknownOpTypeError, NoMatchError as in `patch`.
    """
    return _apply(graph_def, rules, on_no_match, portable=True,
                  allow_replace=allow_replace)
