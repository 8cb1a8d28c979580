"""`graph_override.frozen.patch` and `make_portable`: the patch engine.

One pipeline for every graph, ``select -> check fits -> rewrite -> verify``
(the caller writes: `graph_override.frozen.graphdef.io`), over the node
sources of `graph_override.frozen.patching.sources`: the top-level nodes of
a GraphDef message or of its serialized bytes alone (`patch_file`), and the
nodes of its function bodies (`library.FunctionNodes`).

Gradient names are set on top-level nodes in one way, by appending the
attr to each selected node's bytes (`GraphNodes.set_names`); other changes
(remove, the stop_gradient form) are made on a copy of the message first.
A graph kept as bytes is only ever given names: anything else raises
`NeedsMessage`, and its caller parses the graph and runs the engine on the
message.
"""

import dataclasses

from tensorflow.core.framework import graph_pb2

from graph_override import builtin_names
from graph_override._tensorflow import compat
from graph_override.frozen.graphdef.views import (GRADIENT_ATTR, View, gradient_attr,
                                                  node_list, nodes_by_gradient)
from graph_override.frozen.inspection.inspector import v1_loops
from graph_override.frozen.inspection.report import V1_LOOP_HELP
from graph_override.frozen.patching import verify
from graph_override.frozen.patching.library import FunctionNodes
from graph_override.frozen.patching.report import NodeChange, NodeChanges, PatchReport
from graph_override.frozen.patching.patch_rules import as_rules, check_matches
from graph_override.errors import RuleError
from graph_override.frozen.patching.sources import GraphNodes, name_entries
from graph_override.errors import GraphDefError

__all__ = ["NeedsMessage", "loop_warnings", "make_portable", "patch", "run"]


class NeedsMessage(Exception):
    """The rules need more than names set on a graph kept as bytes."""


@dataclasses.dataclass
class _Plan:
    """What `select` chose, for the steps after it."""
    graph: GraphNodes
    bodies: FunctionNodes
    rules: list
    what: str
    portable: bool
    allow_replace: bool
    selected: dict = None      # {rule index: [node indices]}
    owner: dict = None         # {node index: rule index}
    in_functions: dict = None  # {rule index: [(function index, node index)]}

    @property
    def in_bodies(self):
        return any(self.in_functions.values())

    pairs: set = None          # the distinct (op type, rule index) of `owner`
    sets_only: bool = False    # every change sets a name on a top-level node


def run(graph, rules, *, what, portable=False, on_no_match="raise", allow_replace=False):
    """Runs the pipeline on `graph` (a `GraphNodes`): select, check fits,
    rewrite, verify.

    Returns:
      ``(new graph, PatchReport, {node index: rule index})``: the new graph
      is a GraphDef for a message, serialized bytes for a graph kept as
      bytes.

    Raises:
      NeedsMessage: `graph` is kept as bytes and the rules need more than
        names set on its nodes. RuleError, NoMatchError, UnknownOpTypeError:
        see `patch`.
    """
    bytes_only = graph.graph_def is None
    if bytes_only and (graph.view.has_gradient_attrs or any(
            r.remove or r.gradient_op_type is not None for r in rules)):
        raise NeedsMessage()
    plan = _select(graph, rules, what, portable, allow_replace, on_no_match)
    if bytes_only and (not plan.sets_only or verify.needs_import(
            graph.ops, plan.owner, rules, plan.pairs)):
        raise NeedsMessage()
    _check(plan)
    new, changes, nodes_added, rewritten = _rewrite(plan)
    report = PatchReport(changes=changes, nodes_added=nodes_added, portable=portable,
                         rule_matches=[(str(r), len(plan.selected[j]) + len(
                             plan.in_functions.get(j, ()))) for j, r in enumerate(rules)])
    _verify(plan, new, report, rewritten)
    return new, report, plan.owner


def _select(graph, rules, what, portable, allow_replace, on_no_match):
    if portable:
        _check_portable_rules(rules)
    bodies = FunctionNodes(graph.graph_def) if graph.graph_def is not None else None
    plan = _Plan(graph, bodies, rules, what, portable, allow_replace)
    plan.selected, plan.owner = graph.select(rules)
    plan.in_functions = bodies.select(rules) if bodies is not None else {}
    check_matches(rules, {r: list(plan.selected[r]) + plan.in_functions.get(r, [])
                          for r in plan.selected}, on_no_match)
    # Read by op type and rule, not node by node: a million nodes cost no loop.
    plan.pairs = verify.op_rule_pairs(graph.ops, plan.owner)
    plan.sets_only = (not portable and not plan.in_bodies
                      and graph.only_sets_names(plan.pairs, rules))
    return plan


def _check_portable_rules(rules):
    for rule in rules:
        if rule.gradient is not None and not (  # TensorFlow's own resolve anywhere
                compat.is_op_type(rule.gradient) and compat.has_gradient_entry(rule.gradient)):
            raise RuleError(
                "make_portable: rule %s sets the registered name %r, which "
                "plain TensorFlow cannot resolve in a new process; use a "
                "built-in estimator, or patch() instead" % (rule, rule.gradient))
        if rule.estimator is not None and not rule.spec.linear:
            raise RuleError(
                "make_portable: %s cannot be made portable: its gradient, %s, is "
                "not linear in dy, which no stop_gradient identity can express "
                "(no fixed graph's backprop computes it). Use patch() and import "
                "the result with graph_override.frozen.import_graph_def." % (
                    rule.estimator, rule.spec.doc.row[1]))


def _check(plan):
    """Refuses, before anything changes, a rule that cannot work on a node
    it selects, at the top level or in a function body."""
    if plan.portable and plan.owner:
        _check_single_output(plan.graph, plan.owner, plan.rules)
    plan.graph.check(plan.owner, plan.rules, plan.what, plan.allow_replace, plan.pairs)
    if plan.in_bodies:
        plan.bodies.check(plan.in_functions, plan.rules, plan.what, plan.allow_replace)


def _rewrite(plan):
    """(new graph, changes, nodes added, functions rewritten)."""
    graph, rules = plan.graph, plan.rules
    # Every name resolves before anything changes, whether a node gets it or not.
    # (make_portable sets names only where a rule names one of TensorFlow's own.)
    entries = (name_entries(rules) if not plan.portable
               or any(r.gradient is not None for r in rules) else None)
    if plan.sets_only:
        order = sorted(plan.owner)
        data = graph.set_names(graph.view.data, plan.owner, rules, entries, plan.pairs, order)
        changes = NodeChanges(graph.names, graph.ops, order, plan.owner,
                              [r.target for r in rules], [str(r) for r in rules])
        if graph.graph_def is None:
            return data, changes, 0, []
        return graph_pb2.GraphDef.FromString(data), changes, 0, []
    # A copy: parsing the bytes at hand is faster than CopyFrom.
    new = graph_pb2.GraphDef.FromString(graph.view.data)
    changes, added, sets = _rewrite_top_level(plan, new)
    nodes_added, rewritten = 0, []
    if plan.in_bodies:
        plan.bodies.bind(new)
        body_changes, nodes_added, rewritten = plan.bodies.rewrite(
            plan.in_functions, rules, plan.what, portable=plan.portable,
            dtype=verify.node_dtype, set_name=_set_name)
        changes += [NodeChange(*c) for c in body_changes]
    if sets or added:
        count = len(new.node)
        data = new.SerializeToString()
        if sets:
            data = graph.set_names(data, sets, rules, entries)
        new = graph_pb2.GraphDef.FromString(data + b"".join(added))
        nodes_added += len(new.node) - count
    return new, changes, nodes_added, rewritten


def _set_name(node, name):
    """Sets the (resolved) gradient name of a function body node, a NodeDef."""
    node.attr[GRADIENT_ATTR].s = name.encode("utf-8")


def _rewrite_top_level(plan, new):
    """Removes names and stamps stop_gradient forms on `new` (a copy);
    returns (changes, serialized nodes to add, {node index: rule index}
    of the names to set)."""
    graph, rules, view = plan.graph, plan.rules, plan.graph.view
    changes, added, sets = [], [], {}
    taken = set(graph.names) if plan.portable or any(
        rules[r].estimator and op == "IdentityN" for op, r in plan.pairs) else None
    for i in sorted(plan.owner):
        r = plan.owner[i]
        rule, node = rules[r], new.node[i]
        before = (gradient_attr(node) if view.has_gradient_attrs
                  and GRADIENT_ATTR in node.attr else None)
        change = NodeChange(graph.names[i], graph.ops[i], "set", before, rule.target, str(rule))
        if rule.remove:
            if before is None:
                continue
            del node.attr[GRADIENT_ATTR]
            change.action, change.after = "remove", None
        elif rule.estimator is not None and (plan.portable or graph.ops[i] == "IdentityN"):
            added.append(graph.rewrite(new, i, rule, taken, plan.what, verify.node_dtype))
            change.action, change.after = "rewrite", "stop_gradient form of " + rule.target
        else:
            sets[i] = r
        changes.append(change)
    return changes, added, sets


def _verify(plan, new, report, rewritten):
    """The report's warnings; a rewritten graph is imported before it is
    returned."""
    if plan.portable:
        report.unresolved_left = _non_portable_names(new)
    if report.nodes_added:
        verify.check_imports(new, plan.what, rewritten)
    report.warnings = loop_warnings(plan.graph)


def loop_warnings(graph):
    """The TF1 while loops that keep tf.gradients from working on the
    result of patching `graph` (a `GraphNodes`)."""
    loops = v1_loops(graph, graph.ops)
    if not loops:
        return []
    return ["the graph holds %d TF1 while loop(s) (%s): tf.gradients through them "
            "fails after import, patched or not; %s" % (
                len(loops), ", ".join(e["loop"] for e in loops[:5])
                + (" ..." if len(loops) > 5 else ""), V1_LOOP_HELP)]


def _check_single_output(graph, owner, rules):
    """make_portable replaces output 0 only: refuse nodes whose other outputs
    are used (IdentityN of tf.custom_gradient is handled separately)."""
    chosen = {graph.names[i] for i in owner
              if rules[owner[i]].estimator and graph.ops[i] != "IdentityN"}
    if not chosen:
        return
    for node in graph.graph_def.node:
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
            if builtin_names.parse_builtin_name(name) is not None
            or not compat.has_gradient_entry(name)]


def _message(graph_def, rules, what, **kwargs):
    """`run` on a GraphDef message; returns (new GraphDef, PatchReport)."""
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("%s(): expected a tf.compat.v1.GraphDef, got %s"
                            % (what, type(graph_def).__name__))
    rules = as_rules(rules)
    new, report, _ = run(GraphNodes(View(graph_def), graph_def), rules, what=what, **kwargs)
    return new, report


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
    return _message(graph_def, rules, "patch", on_no_match=on_no_match,
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
    return _message(graph_def, rules, "make_portable", portable=True,
                    on_no_match=on_no_match, allow_replace=allow_replace)
