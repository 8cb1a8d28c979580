"""The node sources of the patch engine (`graph_override.frozen.patching.engine`).

The engine runs one pipeline, select -> check fits -> rewrite -> verify ->
write, over three kinds of nodes, each behind the same steps:

* `GraphNodes` over a GraphDef message: the top-level nodes, read through a
  `View` of the serialized graph;
* `GraphNodes` over serialized node bytes only (what `patch_file` reads):
  the same, each NodeDef parsed from its bytes only where a step reads it;
* `graph_override.frozen.patching.library.FunctionNodes`: the nodes of the
  function library's bodies (While/If bodies, calls), addressed
  ``FUNCTION/NODE``.

A source selects (`select`), refuses what cannot work (`check`) and
rewrites (`set_names`, `rewrite`); the stop_gradient form of a node is
stamped by `stamp_over`, for top-level nodes and body nodes alike.
"""

import collections
import functools

from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override import estimators, registry
from graph_override._tensorflow import compat
from graph_override.errors import RuleError
from graph_override.frozen.graphdef import wire
from graph_override.frozen.graphdef.views import GRADIENT_ATTR
from graph_override.frozen.patching import portable as portable_form
from graph_override.frozen.patching import verify
from graph_override.frozen.patching.patch_rules import select

__all__ = ["GraphNodes", "check_inputs", "data_inputs", "name_entries", "stamp_over",
           "takes_inputs"]


def data_inputs(node):
    """The inputs of `node` that are not control inputs."""
    return [i for i in node.input if not i.startswith("^")]


@functools.lru_cache(maxsize=256)
def takes_inputs(op_type):
    """True if every node of `op_type` has a data input (its OpDef has a
    single-tensor input argument), so nodes need no check one by one."""
    op_def = compat.op_def(op_type)
    return op_def is not None and any(
        not (a.number_attr or a.type_list_attr) for a in op_def.input_arg)


def name_entries(rules):
    """Per rule, the serialized ``attr`` entry that sets its gradient name
    (None for a remove rule), each name resolved first."""
    entries = []
    for rule in rules:
        if rule.target is None:
            entries.append(None)
            continue
        if rule.spec is not None:  # the record: no name to parse
            registry.resolve_estimator(rule.spec, rule.params)
        else:
            registry.resolve(rule.target)
        entry = node_def_pb2.NodeDef()
        entry.attr[GRADIENT_ATTR].s = rule.target.encode("utf-8")
        entries.append(entry.SerializeToString())
    return entries


def stamp_over(node, rule, dtype_of, taken, what, *, y_ref=None, address=None, where=""):
    """Node N becomes ``N/graph_override_forward`` (its op, unchanged, its
    gradient name dropped) and the stop_gradient form of `rule`'s estimator
    takes the name N: returns ``(names, serialized GraphDef nodes)`` of that
    form, its names claimed in `taken` (the names in use where it goes).
    Top-level nodes and function body nodes are rewritten by it alike.

    Args:
      node: the NodeDef, renamed in place.
      dtype_of: (node, what) -> the DataType enum of the node's output.
      y_ref: how the form refers to the forward node's output 0, given its
        name (default: the name itself, as top-level nodes do).
      address, where: for messages: the node's address (default its name),
        and where it is (" in function F").

    Raises:
      RuleError: the node has no data input or no float dtype, or a name is
        taken.
    """
    inputs = data_inputs(node)
    original = node.name
    if not inputs:
        raise RuleError("%s: node %r (op %s) has no input to pass a gradient to"
                        % (what, address or original, node.op))
    dtype = dtype_of(node, what)
    forward = original + "/graph_override_forward"
    taken.discard(original)  # the stop_gradient form takes it over
    alpha = node.attr["alpha"].f if "alpha" in node.attr else None
    new_names, data = portable_form.stamp(
        rule.spec, estimators.node_params(rule.spec, rule.params, node.op, alpha),
        dtype, x_ref=inputs[0],
        y_ref=y_ref(forward) if y_ref else forward,
        prefix=original + "/graph_override_portable/", out_name=original,
        device=node.device)
    _claim(taken, [forward] + list(new_names), what, where)
    node.name = forward
    if GRADIENT_ATTR in node.attr:
        del node.attr[GRADIENT_ATTR]
    return new_names, data


def check_inputs(ops, owner, rules, node_at, names, pairs=None):
    """Refuses an estimator on a node with no data input, reading only the
    nodes of op types that may have none (`pairs`: `verify.op_rule_pairs`
    of `owner`, if at hand)."""
    pairs = pairs if pairs is not None else verify.op_rule_pairs(ops, owner)
    unchecked = {op for op, r in pairs
                 if rules[r].estimator is not None and not takes_inputs(op)}
    if not unchecked:
        return
    for i, r in owner.items():
        if rules[r].estimator is not None and ops[i] in unchecked:
            inputs = node_at(i).input
            if not inputs or inputs[0].startswith("^"):
                raise RuleError("patch: node %r (op %s) has no input to pass a "
                                "gradient to; narrow the rule %s" % (names[i], ops[i], rules[r]))


class _NodeBytes(collections.abc.Sequence):
    """``graph_def.node`` of a graph kept as bytes: NodeDef i is parsed from
    its bytes when it is read."""

    def __init__(self, index):
        self._index = index

    def __len__(self):
        return len(self._index.ops)

    def __getitem__(self, i):
        return node_def_pb2.NodeDef.FromString(self._index.node_bytes(i))


class GraphNodes:
    """The top-level nodes of a graph: a GraphDef message, or its serialized
    bytes alone (`graph_def` None), read through `view`.

    Attributes:
      view: the `View` (names, op types, bytes).
      node: ``graph_def.node``, or NodeDefs parsed from bytes on reading.
    """

    def __init__(self, view, graph_def=None):
        self.view = view
        self.graph_def = graph_def
        self.node = graph_def.node if graph_def is not None else _NodeBytes(view.index)

    @property
    def ops(self):
        return self.view.ops

    @property
    def names(self):
        return self.view.index.lazy_names

    def message(self):
        """The graph as a GraphDef message (parsed from the bytes if need be)."""
        if self.graph_def is None:
            self.graph_def = graph_pb2.GraphDef.FromString(self.view.data)
        return self.graph_def

    def select(self, rules):
        """{rule index: [node indices]} and {node index: rule index}."""
        return select(self, self.view, rules)

    def only_sets_names(self, pairs, rules):
        """True if every change sets a name on a node that has none (`pairs`:
        the distinct (op type, rule index) of the selection): the rewrite is
        then an append to each selected node's bytes."""
        return not self.view.has_gradient_attrs and not any(
            rules[r].remove or (rules[r].estimator and op == "IdentityN") for op, r in pairs)

    def check(self, owner, rules, what, allow_replace, pairs=None):
        """`verify.check_fits` on the selected nodes."""
        verify.check_fits(self, owner, rules, what, allow_replace=allow_replace, pairs=pairs)

    def set_names(self, data, sets, rules, entries, pairs=None, order=None):
        """`data` (this graph's bytes, or a rewrite of them with the same
        nodes first) with the gradient name of rule ``sets[i]`` appended to
        node i (``entries``: `name_entries`); protobuf keeps the last attr
        entry of a key, so a name already there is replaced. Every other
        byte is kept.

        Raises:
          RuleError: an estimator on a node with no data input.
        """
        check_inputs(self.ops, sets, rules, self.node.__getitem__, self.names, pairs)
        order = order if order is not None else sorted(sets)  # node order
        of = [sets[i] for i in order]
        if data is self.view.data:
            return self.view.index.append_entries(data, order, of, entries)
        return wire.append_to_nodes(data, {i: entries[r] for i, r in zip(order, of)})

    def rewrite(self, new, i, rule, taken, what, dtype):
        """Rewrites node i of `new` (a copy of the graph) into the
        stop_gradient form; returns the serialized nodes to add."""
        node = new.node[i]
        if node.op == "IdentityN":
            return _rewrite_identity_n(node, rule, taken, what)
        return stamp_over(node, rule, dtype, taken, what)[1]


def _rewrite_identity_n(node, rule, taken, what):
    """The outputs of a tf.custom_gradient IdentityN (inputs: k results, then
    k arguments) become stop_gradient forms of result i with the estimator's
    gradient into argument i; the dead gradient name is dropped."""
    inputs = data_inputs(node)
    types = list(node.attr["T"].list.type) if "T" in node.attr else []
    k = len(inputs) // 2
    if (len(inputs) % 2 or k == 0 or len(types) != len(inputs)
            or types[:k] != types[k:]):
        raise RuleError(
            "%s: node %r (IdentityN, inputs %s) is not the tf.custom_gradient "
            "pattern of k results followed by k arguments of the same dtypes, "
            "so an estimator cannot be placed on it; use remove or a registered "
            "gradient name" % (what, node.name, inputs))
    if not rule.spec.linear:
        raise RuleError("%s: %s on node %r: its gradient is not linear in dy, "
                        "which the stop_gradient form needs; use a registered "
                        "gradient name instead" % (what, rule.estimator, node.name))
    added = b""
    for i in range(k):
        verify.float_dtype(types[i], what, node, " input %d" % i)
        prefix = "%s/graph_override_portable_%d/" % (node.name, i)
        new_names, data = portable_form.stamp(
            rule.spec, rule.params, types[i], x_ref=inputs[k + i], y_ref=inputs[i],
            prefix=prefix, out_name=prefix + "out", device=node.device)
        _claim(taken, new_names, what)
        added += data
        node.input[i] = prefix + "out"
    if GRADIENT_ATTR in node.attr:
        del node.attr[GRADIENT_ATTR]
    return added


def _claim(taken, new_names, what, where=""):
    """Adds `new_names` to `taken`, refusing any already there."""
    for name in new_names:
        if name in taken:
            raise RuleError("%s: node name %r exists already%s; was this graph "
                            "patched or made portable before?" % (what, name, where))
        taken.add(name)
