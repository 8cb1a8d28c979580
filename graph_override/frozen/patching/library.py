"""Nodes inside a GraphDef's function library (see `graph_override.frozen`).

Graphs exported from TF2 and Keras, and TF1 graphs built with control flow
v2, keep ops inside functions: the bodies of functional While/If/Case
nodes and of PartitionedCall/StatefulPartitionedCall. Those nodes are
addressed ``FUNCTION/NODE`` in reports and by name regexes.

How TensorFlow differentiates a function body after import decides what a
gradient override there does:

* While/If/Case bodies (reached from the graph through control flow ops
  only) are rebuilt as Python graphs and differentiated by tf.gradients
  (while_v2 and cond_v2), which honours ``_gradient_op_type``: `patch` sets
  the name there, as on top-level nodes.
* PartitionedCall bodies, and everything reached through one, are
  differentiated by a ``SymbolicGradient`` node, in C++, which never reads
  ``_gradient_op_type`` (tensorflow/python/ops/gradients_util.py: an
  imported function has no python_grad_func). A name set there would be
  silently ignored, and the stop_gradient form uses ops that have no C++
  gradient (IsFinite), so `patch` and `make_portable` refuse estimators and
  gradient names there, saying how to inline the call.
"""

import collections
import fnmatch
import hashlib
import re

from graph_override._tensorflow import compat
from graph_override.errors import RuleError
from graph_override.frozen.graphdef.functions import body_modes, called_functions
from graph_override.frozen.graphdef.views import GRADIENT_ATTR, gradient_attr
from graph_override.frozen.patching import verify
from graph_override.frozen.patching.sources import stamp_over
from tensorflow.core.framework import graph_pb2

__all__ = ["FunctionNodes", "rename_changed_functions", "rename_library"]

_SYMBOLIC = (
    "%s: node %r is inside %s, which TensorFlow differentiates as a whole "
    "through a PartitionedCall (a SymbolicGradient node, in C++): a "
    "gradient name set there would be silently ignored, and the "
    "stop_gradient form has ops without C++ gradients. Inline the call "
    "first (freezing with convert_variables_to_constants_v2 inlines "
    "PartitionedCall bodies), or select nodes outside it; remove rules "
    "work.")


def _output_arg(op_type, index):
    """The FunctionDef name of output `index` of a single-tensor-output op:
    ``ARG:0``."""
    op_def = compat.op_def(op_type)
    if op_def is None or index >= len(op_def.output_arg):
        raise RuleError("no OpDef output %d for op %s" % (index, op_type))
    return "%s:0" % op_def.output_arg[index].name


class FunctionNodes:
    """The nodes of the function bodies of `graph_def`, the engine's third
    node source: selected by the same rules (name regexes see
    ``FUNCTION/NODE``), checked, and rewritten in place in `graph_def`
    (a copy, once `bind` gave it)."""

    def __init__(self, graph_def):
        self.graph_def = graph_def
        self._modes = None

    def select(self, rules):
        """{rule index: [(function index, node index)]}, the first rule
        selecting a node winning."""
        selected = collections.OrderedDict((r, []) for r in range(len(rules)))
        if not self.graph_def.library.function:
            return selected
        searches = [re.compile(r.name_regex).search if r.name_regex is not None else None
                    for r in rules]
        for f, function in enumerate(self.graph_def.library.function):
            fname = function.signature.name
            for i, node in enumerate(function.node_def):
                r = _first_rule(rules, searches, fname, node)
                if r is not None:
                    selected[r].append((f, i))
        return selected

    def check(self, selected, rules, what, allow_replace):
        """Refuses, before anything changes, a rule that could not take
        effect (an estimator or a gradient name in a PartitionedCall body)
        and what `patch` refuses on top-level nodes."""
        if self._modes is None:
            self._modes = body_modes(self.graph_def)
        shapes = collections.defaultdict(list)
        for f, i, r in _back_to_front(selected):
            rule, function = rules[r], self.graph_def.library.function[f]
            node, fname = function.node_def[i], function.signature.name
            if rule.remove:
                continue
            address = "%s/%s" % (fname, node.name)
            if self._modes.get(fname) == "symbolic":
                raise RuleError(_SYMBOLIC % (what, address, fname))
            if rule.gradient is not None:
                continue
            if node.op == "IdentityN":
                raise RuleError("%s: node %r: an estimator on an IdentityN inside a "
                                "function body is not supported; use remove, or select "
                                "the op the IdentityN wraps" % (what, address))
            verify.check_fits_node(node, address, rule, what, allow_replace=allow_replace)
            shapes[fname].append((node.name, rule))
        if what == "patch":
            for fname, named in shapes.items():
                verify.check_function_shapes(self.graph_def, fname, named, what)

    def bind(self, graph_def):
        """Rewrites go to `graph_def` (the new graph) from here on."""
        self.graph_def = graph_def

    def rewrite(self, selected, rules, what, *, portable, dtype, set_name):
        """Applies `rules` to the `selected` nodes; renames the functions
        changed (`rename_changed_functions`).

        Returns:
          (changes as NodeChange arguments, nodes added, names of the
          functions rewritten into the stop_gradient form).
        """
        functions = self.graph_def.library.function
        changes, added, rewritten = [], 0, []
        # Rewrites append nodes: go through each function's nodes from the back.
        for f, i, r in _back_to_front(selected):
            rule, function = rules[r], functions[f]
            node = function.node_def[i]
            change = [function.signature.name + "/" + node.name, node.op, "set",
                      gradient_attr(node), rule.target, str(rule)]
            if rule.remove:
                if change[3] is None:
                    continue
                del node.attr[GRADIENT_ATTR]
                change[2] = "remove"
            elif portable and rule.gradient is None:
                added += _rewrite_body_node(function, i, rule, dtype, what)
                rewritten.append(function.signature.name)
                change[2:5] = ["rewrite", change[3], "stop_gradient form of " + rule.target]
            else:
                set_name(node, rule.target)
            changes.append(tuple(change))
        changed = {c[0].split("/", 1)[0] for c in changes}
        renamed = rename_changed_functions(self.graph_def, changed) if changed else {}
        changes.sort(key=lambda c: c[0])
        return changes, added, [renamed.get(n, n) for n in dict.fromkeys(rewritten)]


def _first_rule(rules, searches, fname, node):
    """The index of the first rule selecting body node `node`, or None."""
    for r, rule in enumerate(rules):
        if rule.op_type is not None and node.op != rule.op_type:
            continue
        if searches[r] is not None and not searches[r]("%s/%s" % (fname, node.name)):
            continue
        if rule.gradient_op_type is not None:
            gname = gradient_attr(node)
            if gname is None or not fnmatch.fnmatchcase(gname, rule.gradient_op_type):
                continue
        return r
    return None


def _back_to_front(selected):
    """(function index, node index, rule index) of `selected`, each
    function's nodes from the back."""
    by_node = [(f, i, r) for r, picked in selected.items() for f, i in picked]
    return sorted(by_node, key=lambda t: (t[0], -t[1]))


def _users_of_other_outputs(function, node, old_ref):
    """Who reads an output of `node` other than its first, in `function`."""
    users = [n.name for n in function.node_def for ref in n.input
             if ref.startswith(node.name + ":") and ref != old_ref]
    return users + ["the function's result %r" % key for key, ref in function.ret.items()
                    if ref.startswith(node.name + ":") and ref != old_ref]


def _rewrite_body_node(function, index, rule, dtype_of, what):
    """Rewrites node `index` of `function` (a FunctionDef, changed in place)
    into the stop_gradient form of `rule`'s estimator (`stamp_over`, as for
    top-level nodes), its references written as FunctionDefs write them
    (``NODE:ARG:0``); returns the number of nodes added.

    Raises:
      RuleError: the node has no data input, or its outputs other than
        output 0 are used.
    """
    node = function.node_def[index]
    fname = function.signature.name
    address = "%s/%s" % (fname, node.name)
    old_ref = "%s:%s" % (node.name, _output_arg(node.op, 0))
    users = _users_of_other_outputs(function, node, old_ref)
    if users:
        raise RuleError("%s: node %r is used through an output other than its first "
                        "(by %s); only single-output nodes can be rewritten"
                        % (what, address, users[0]))
    original, arg = node.name, _output_arg(node.op, 0)
    _, data = stamp_over(node, rule, dtype_of, {n.name for n in function.node_def}, what,
                         y_ref=lambda forward: "%s:%s" % (forward, arg),
                         address=address, where=" in function %s" % fname)
    stamped = graph_pb2.GraphDef.FromString(data).node
    ops = {n.name: n.op for n in stamped}
    for new in stamped:
        refs = [_body_ref(ref, ops) for ref in new.input]
        del new.input[:]
        new.input.extend(refs)
    function.node_def.extend(stamped)
    new_ref = "%s:%s" % (original, _output_arg(ops[original], 0))
    for other in function.node_def:
        for j, ref in enumerate(other.input):
            if ref == old_ref:
                other.input[j] = new_ref
    for key, ref in list(function.ret.items()):
        if ref == old_ref:
            function.ret[key] = new_ref
    return len(stamped)


def _body_ref(ref, ops):
    """A stamped node's input `ref` (``NODE`` or ``NODE:k``) as a function
    body writes it (``NODE:ARG:0``) when it names a stamped node."""
    control = ref.startswith("^")
    body = ref[1:] if control else ref
    base, _, k = body.partition(":")
    if not control and base in ops and body.count(":") < 2:
        body = "%s:%s" % (base, _output_arg(ops[base], int(k or 0)))
    return ("^" if control else "") + body


def rename_changed_functions(graph_def, changed):
    """Gives the `changed` functions, the functions called next to them
    (the cond of a While whose body changed, the other branch of an If) and
    the functions holding calls to any of these, new names ending in a hash
    of the changes (`rename_library`); returns {old name: new name}.

    TensorFlow names the functions it derives while differentiating a
    While or If after the originals (``while_cond_7_rewritten``) and keeps
    them process-wide: differentiating the original and the patched graph
    in one process would otherwise fail with "Attempting to add a duplicate
    function with name ... where the previous and current definitions
    differ". The same change gives the same names, in any process.
    """
    library = {f.signature.name: f for f in graph_def.library.function}
    digest = hashlib.sha256()
    for name in sorted(changed):
        digest.update(library[name].SerializeToString(deterministic=True))
    owners = [(None, graph_def.node)] + [(n, f.node_def) for n, f in library.items()]
    rename, frontier = set(), set(changed)
    while frontier:
        rename |= frontier
        found = set()
        for owner, nodes in owners:
            for node in nodes:
                refs = set(called_functions(node)) | ({node.op} if node.op in library else set())
                if refs & rename:
                    found |= (refs & set(library)) - rename
                    if owner is not None and owner not in rename:
                        found.add(owner)
        frontier = found
    mapping = {n: "%s_go%s" % (n, digest.hexdigest()[:8]) for n in rename}
    rename_library(graph_def, mapping)
    return mapping


def _function_refs(values):
    """The function references (NameAttrList) among attr `values`, also
    those in the attrs of a referenced function."""
    for value in values:
        if value.HasField("func"):
            funcs = [value.func]
        elif value.HasField("list"):
            funcs = value.list.func
        else:
            continue
        for func in funcs:
            yield func
            yield from _function_refs(func.attr.values())


def rename_library(graph_def, mapping):
    """Renames library functions of `graph_def` in place, ``{old: new}``:
    their signatures, the nodes that call one as their op type, the function
    attrs that name one (at any depth), at the top level and in every body,
    and the library's gradient entries; returns `graph_def`.

    TensorFlow keeps functions in one process-wide table by name and refuses
    a different definition under a taken name ("Attempting to add a duplicate
    function"). `rename_changed_functions` renames what `patch` changed, by a hash of
    the change; `graph_override.frozen.tf2.graph.with_unique_function_names`
    renames every function once per import.
    """
    if not mapping:
        return graph_def
    bodies = []
    for function in graph_def.library.function:
        name = function.signature.name
        if name in mapping:
            function.signature.name = mapping[name]
        bodies.append(function.node_def)
    for nodes in [graph_def.node] + bodies:
        for node in nodes:
            if node.op in mapping:
                node.op = mapping[node.op]
            for func in _function_refs(node.attr.values()):
                if func.name in mapping:
                    func.name = mapping[func.name]
    for gradient in graph_def.library.gradient:
        for field in ("function_name", "gradient_func"):
            if getattr(gradient, field) in mapping:
                setattr(gradient, field, mapping[getattr(gradient, field)])
    return graph_def
