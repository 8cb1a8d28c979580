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

Example:
  >>> import os, tempfile
  >>> import numpy as np
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
import dataclasses
import fnmatch
import functools
import re
import warnings

import tensorflow as tf
from tensorflow.core.framework import graph_pb2, node_def_pb2

from graph_override import (_compat, _graphdef_io, _graphdef_portable, estimators,
                            registry)
from graph_override._graphdef_io import (MAX_BYTES, check_output_path, load,
                                        parse_graph_def, save, validate)
from graph_override.errors import (EagerModeError, GraphDefError, GraphOverrideError,
                                   NoMatchError, UnknownGradientError,
                                   UnknownOpTypeError)

__all__ = [
    "MAX_BYTES",
    "GRADIENT_ATTR",
    "InspectReport",
    "NodeChange",
    "PatchReport",
    "RISKY_OPS",
    "ZERO_GRADIENT_OPS",
    "Rule",
    "RuleError",
    "check_output_path",
    "import_graph_def",
    "inspect",
    "load",
    "make_portable",
    "parse_graph_def",
    "parse_rule",
    "patch",
    "save",
    "validate",
]

GRADIENT_ATTR = "_gradient_op_type"
_ATTR_BYTES = GRADIENT_ATTR.encode()

# Op types worth a look before running an untrusted graph, with why.
RISKY_OPS = {
    **dict.fromkeys(("ReadFile", "MatchingFiles", "ImmutableConst"),
                    "reads files"),
    **dict.fromkeys(("WriteFile", "Save", "SaveV2", "SaveSlices",
                     "MergeV2Checkpoints", "DeleteFile"), "writes files"),
    **dict.fromkeys(("Restore", "RestoreV2", "RestoreSlice"),
                    "reads checkpoint files"),
    **dict.fromkeys(("PyFunc", "PyFuncStateless", "EagerPyFunc"),
                    "runs Python code of the process that made the graph"),
    **dict.fromkeys(("TFRecordReader", "TFRecordReaderV2", "TextLineReader",
                     "TextLineReaderV2", "WholeFileReader", "WholeFileReaderV2",
                     "FixedLengthRecordReader", "FixedLengthRecordReaderV2",
                     "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset",
                     "FixedLengthRecordDataset", "CSVDataset", "CSVDatasetV2",
                     "LoadDataset", "MatchingFilesDataset",
                     "ExperimentalMatchingFilesDataset"), "reads files"),
    **dict.fromkeys(("SaveDataset", "SaveDatasetV2", "SnapshotDataset",
                     "SnapshotDatasetV2", "CreateSummaryFileWriter",
                     "WriteSummary", "WriteScalarSummary", "WriteImageSummary",
                     "WriteHistogramSummary", "WriteAudioSummary",
                     "WriteGraphSummary", "WriteRawProtoSummary"), "writes files"),
    **dict.fromkeys(("PrintV2",), "can write to a file (output_stream)"),
    **dict.fromkeys(("DebugIdentity", "DebugIdentityV2", "DebugIdentityV3",
                     "DebugNumericSummary", "DebugNumericSummaryV2"),
                    "can dump tensors to files or network addresses"),
    **dict.fromkeys(("RpcCall", "Rpc", "TryRpc", "RemoteCall"),
                    "calls remote processes"),
}


# Op types whose TensorFlow gradient is zero (or None) everywhere: gradients
# through them vanish silently. The usual reason to patch a frozen graph.
ZERO_GRADIENT_OPS = ("Sign", "Round", "Floor", "Ceil", "Rint")


class RuleError(GraphOverrideError, ValueError):
    """A patch rule is malformed, or cannot be applied to a node it selects."""


# ---------------------------------------------------------------------------
# Rules.

@dataclasses.dataclass(frozen=True)
class Rule:
    """Which nodes to change (selectors, all given must match) and how (one
    action).

    Selectors: `op_type` (exact, e.g. "Sign"), `name_regex` (``re.search`` on
    the node name), `gradient_op_type` (a glob on the node's current
    ``_gradient_op_type``, e.g. "CustomGradient-*").

    Actions: `estimator` (+ `params`) sets a built-in estimator's gradient;
    `gradient` sets a registered gradient name; `remove` deletes the
    ``_gradient_op_type`` attr, so the op's own gradient applies again.

    Example:
      >>> from graph_override.frozen import Rule, parse_rule
      >>> parse_rule("Identity=flip_gradient:scale=0.5") == Rule(
      ...     "Identity", estimator="flip_gradient", params={"scale": 0.5})
      True
      >>> Rule("Sign", estimator="ste_sign").target
      'graph_override.ste_sign(clip_value=1.0)'
    """

    op_type: str = None
    name_regex: str = None
    gradient_op_type: str = None
    estimator: str = None
    params: dict = None
    gradient: str = None
    remove: bool = False

    def __post_init__(self):
        if self.op_type is None and self.name_regex is None and self.gradient_op_type is None:
            raise RuleError("a rule needs a selector: op_type, name_regex or "
                            "gradient_op_type")
        actions = (self.estimator is not None) + (self.gradient is not None) + bool(self.remove)
        if actions != 1:
            raise RuleError("a rule needs exactly one action: estimator=..., "
                            "gradient=... or remove=True; got %d" % actions)
        if self.op_type is not None and not _compat.is_op_type(self.op_type):
            hints = _compat.op_type_suggestions(self.op_type)
            raise UnknownOpTypeError(
                "rule selects op type %r, which TensorFlow does not know.%s" % (
                    self.op_type, (" Did you mean %s?" % " or ".join(
                        repr(h) for h in hints)) if hints else ""))
        if self.name_regex is not None:
            try:
                re.compile(self.name_regex)
            except re.error as e:
                raise RuleError("rule name_regex %r is not a valid regular "
                                "expression: %s" % (self.name_regex, e)) from e
        if self.estimator is not None:
            try:
                params = estimators.normalize(self.estimator, dict(self.params or {}))
            except (TypeError, ValueError) as e:
                raise RuleError("rule %s: %s" % (self.describe_selector(), e)) from e
            object.__setattr__(self, "params", dict(params))
        elif self.params:
            raise RuleError("rule parameters %r need an estimator" % (self.params,))
        if self.gradient is not None and not registry.is_resolvable(self.gradient):
            try:
                registry.resolve(self.gradient)
            except UnknownGradientError as e:
                raise RuleError("rule %s: %s" % (self.describe_selector(), e)) from e

    @property
    def target(self):
        """The gradient name this rule sets, or None for `remove`."""
        if self.estimator is not None:
            return registry.builtin_name(
                self.estimator, estimators.normalize(self.estimator, self.params))
        return self.gradient

    def describe_selector(self):
        parts = []
        if self.op_type is not None:
            parts.append("op type %s" % self.op_type)
        if self.name_regex is not None:
            parts.append("name ~ /%s/" % self.name_regex)
        if self.gradient_op_type is not None:
            parts.append("gradient %s" % self.gradient_op_type)
        return " and ".join(parts)

    def __str__(self):
        action = ("remove" if self.remove else self.target)
        return "%s -> %s" % (self.describe_selector(), action)


def _parse_value(text):
    text = text.strip()
    if text == "None":
        return None
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise RuleError("parameter value %r is not a number" % text) from None


def parse_rule(text, *, name_regex=None):
    """Parses a CLI ``--map`` string into a `Rule`.

    Syntax: ``SELECTOR=ACTION``. SELECTOR is an op type (``Sign``), ``*``
    (any op type; use with `name_regex`) or ``gradient:GLOB`` (nodes whose
    ``_gradient_op_type`` matches, e.g. ``gradient:CustomGradient-*``).
    ACTION is a built-in estimator with optional parameters
    (``ste_sign``, ``flip_gradient:scale=0.5``,
    ``ste_tern:threshold_value=0.1,clip_value=1``), ``remove``, or a
    registered gradient name (``Identity``).

    Example:
      >>> from graph_override.frozen import parse_rule
      >>> str(parse_rule("gradient:CustomGradient-*=remove"))
      'gradient CustomGradient-* -> remove'

    Raises:
      RuleError: malformed text (the message quotes it).
      UnknownOpTypeError: the op type is unknown (with suggestions).
    """
    if not isinstance(text, str) or "=" not in text:
        raise RuleError("--map %r: expected SELECTOR=ACTION, e.g. Sign=ste_sign "
                        "or Identity=flip_gradient:scale=0.5" % (text,))
    selector, _, action = (s.strip() for s in text.partition("="))
    kwargs = {"name_regex": name_regex}
    if selector.startswith("gradient:"):
        kwargs["gradient_op_type"] = selector[len("gradient:"):]
        if not kwargs["gradient_op_type"]:
            raise RuleError("--map %r: 'gradient:' needs a name or glob" % text)
    elif selector == "*":
        if name_regex is None:
            raise RuleError("--map %r: '*' selects every node; combine it with "
                            "a name regex (--select)" % text)
    elif selector:
        kwargs["op_type"] = selector
    else:
        raise RuleError("--map %r: nothing before '='" % text)
    name, _, param_text = action.partition(":")
    if name in estimators.ESTIMATORS:
        params = {}
        for item in filter(None, (p.strip() for p in param_text.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip().isidentifier():
                raise RuleError("--map %r: parameter %r should be KEY=VALUE"
                                % (text, item))
            params[key.strip()] = _parse_value(value)
        kwargs.update(estimator=name, params=params)
    elif action == "remove":
        kwargs["remove"] = True
    elif action:
        kwargs["gradient"] = action
    else:
        raise RuleError("--map %r: nothing after '='" % text)
    try:
        return Rule(**kwargs)
    except RuleError as e:
        raise RuleError("--map %r: %s" % (text, e)) from e


def _as_rules(rules):
    if isinstance(rules, (Rule, str)):
        rules = [rules]
    elif isinstance(rules, dict):
        rules = ["%s=%s" % kv for kv in rules.items()]
    out = [r if isinstance(r, Rule) else parse_rule(r) for r in rules]
    if not out:
        raise RuleError("no rules given")
    return out


def _gradient_attr(node):
    attr = node.attr.get(GRADIENT_ATTR)
    return None if attr is None else attr.s.decode("utf-8", "replace")


class _View:
    """Names and op types of a GraphDef's nodes, read once from its bytes
    (a C-level pass; see graph_override._graphdef_io), and whether any node
    may carry a gradient name."""

    def __init__(self, graph_def):
        self.data = graph_def.SerializeToString()
        index = _graphdef_io.fast_index(self.data, len(graph_def.node))
        if index is None:  # unchecked, odd graph: read node by node
            index = ([n.name for n in graph_def.node], [n.op for n in graph_def.node])
        self.names, self.ops = index[0], index[1]
        self.has_gradient_attrs = _ATTR_BYTES in self.data


def _select(graph_def, view, rules):
    """{rule index: [node indices]} and {node index: rule index}, the first
    rule selecting a node winning."""
    nodes = graph_def.node
    attrs = None
    selected, owner = {}, {}
    for r, rule in enumerate(rules):
        if rule.op_type is not None:
            idx = [i for i, op in enumerate(view.ops) if op == rule.op_type]
        else:
            idx = range(len(view.ops))
        if rule.name_regex is not None:
            search = re.compile(rule.name_regex).search
            names = view.names
            idx = [i for i in idx if search(names[i])]
        if rule.gradient_op_type is not None:
            if attrs is None:
                attrs = {i: _gradient_attr(n) for i, n in enumerate(nodes)
                         if view.has_gradient_attrs and GRADIENT_ATTR in n.attr}
            idx = [i for i in idx if attrs.get(i) is not None
                   and fnmatch.fnmatchcase(attrs[i], rule.gradient_op_type)]
        selected[r] = list(idx)
        for i in selected[r]:
            owner.setdefault(i, r)
    return selected, owner


def _check_matches(rules, selected, on_no_match):
    if on_no_match not in ("raise", "warn", "ignore"):
        raise ValueError("on_no_match must be 'raise', 'warn' or 'ignore', got %r"
                         % (on_no_match,))
    empty = [str(rules[r]) for r, idx in selected.items() if not idx]
    if empty and on_no_match != "ignore":
        msg = ("rule(s) selected no node: %s. Check the op type and regex "
               "against `graph-override inspect` (op type counts)" % "; ".join(empty))
        if on_no_match == "raise":
            raise NoMatchError(msg + ", or allow it (on_no_match='ignore', "
                               "--allow-no-match).")
        from graph_override.scope import NoMatchWarning  # pylint: disable=import-outside-toplevel
        warnings.warn(msg, NoMatchWarning, stacklevel=3)


# ---------------------------------------------------------------------------
# Reports.

@dataclasses.dataclass
class NodeChange:
    """One node changed by `patch` or `make_portable`."""
    node: str
    op: str
    action: str            # "set", "remove", "rewrite"
    before: str            # the previous _gradient_op_type, or None
    after: str             # the new one, or None
    rule: str

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class PatchReport:
    """What `patch` / `make_portable` did: every node changed, how many each
    rule selected, the nodes added, and gradient names left that plain
    TensorFlow cannot resolve."""
    changes: list
    rule_matches: list      # [(rule text, number of nodes selected)]
    nodes_added: int = 0
    portable: bool = False
    unresolved_left: list = dataclasses.field(default_factory=list)

    def to_dict(self):
        return {"portable": self.portable,
                "changes": [c.to_dict() for c in self.changes],
                "rules": [{"rule": r, "selected": n} for r, n in self.rule_matches],
                "nodes_added": self.nodes_added,
                "unresolved_left": list(self.unresolved_left)}

    def format(self, limit=50):
        lines = ["%d node(s) changed%s:" % (
            len(self.changes), " (made portable, %d node(s) added)" % self.nodes_added
            if self.portable else "")]
        rows = [("node", "op", "action", "gradient before", "gradient after")]
        rows += [(c.node, c.op, c.action, c.before or "-", c.after or "-")
                 for c in self.changes[:limit]]
        lines += _table(rows)
        if len(self.changes) > limit:
            lines.append("  ... and %d more (use --json for all)"
                         % (len(self.changes) - limit))
        for rule, n in self.rule_matches:
            lines.append("rule %s: %d node(s) selected" % (rule, n))
        for item in self.unresolved_left:
            lines.append("warning: %s" % item)
        return "\n".join(lines)

    __str__ = format


@dataclasses.dataclass
class InspectReport:
    """What `inspect` found; `to_dict` for JSON, `format` for a table."""
    nodes: int
    op_types: dict                       # op type -> count, most common first
    gradient_failures: list              # dicts: node, op, gradient, reason
    gradient_names: list                 # dicts: name, count, resolvable, needs_graph_override, nodes
    risky_ops: list                      # dicts: node, op, reason
    zero_gradients: list = dataclasses.field(default_factory=list)  # dicts: node, op, reason
    functions: int = 0

    @property
    def ok(self):
        """True if no gradient fails or vanishes and no risky op was found."""
        return not (self.gradient_failures or self.zero_gradients or self.risky_ops)

    def to_dict(self):
        return {"nodes": self.nodes, "functions": self.functions,
                "op_types": dict(self.op_types),
                "gradient_failures": list(self.gradient_failures),
                "gradient_names": list(self.gradient_names),
                "zero_gradients": list(self.zero_gradients),
                "risky_ops": list(self.risky_ops), "ok": self.ok}

    def format(self, limit=30):
        lines = ["%d nodes, %d op types%s" % (
            self.nodes, len(self.op_types),
            ", %d library functions" % self.functions if self.functions else "")]
        lines += _table([("op type", "count")] + [
            (op, str(n)) for op, n in list(self.op_types.items())[:limit]])
        if len(self.op_types) > limit:
            lines.append("  ... %d more op types (use --json)" % (len(self.op_types) - limit))
        lines.append("")
        if self.gradient_names:
            lines.append("gradient names (_gradient_op_type):")
            lines += _table([("name", "nodes", "resolves here", "needs graph_override")] + [
                (g["name"], str(g["count"]), "yes" if g["resolvable"] else "NO",
                 "yes" if g["needs_graph_override"] else "no")
                for g in self.gradient_names])
        else:
            lines.append("gradient names (_gradient_op_type): none")
        lines.append("")
        if self.gradient_failures:
            lines.append("%d node(s) whose gradient will fail:" % len(self.gradient_failures))
            lines += _table([("node", "op", "gradient", "why")] + [
                (f["node"], f["op"], f["gradient"], f["reason"])
                for f in self.gradient_failures[:limit]])
            if len(self.gradient_failures) > limit:
                lines.append("  ... and %d more (use --json)"
                             % (len(self.gradient_failures) - limit))
        else:
            lines.append("gradients: every differentiable node has a gradient")
        lines.append("")
        if self.zero_gradients:
            lines.append("%d node(s) whose gradient is zero everywhere (tf.gradients "
                         "gives zeros or None through them):" % len(self.zero_gradients))
            lines += _table([("node", "op", "why")] + [
                (z["node"], z["op"], z["reason"]) for z in self.zero_gradients[:limit]])
            if len(self.zero_gradients) > limit:
                lines.append("  ... and %d more (use --json)"
                             % (len(self.zero_gradients) - limit))
            lines.append("")
        if self.risky_ops:
            lines.append("%d risky op(s) for an untrusted graph:" % len(self.risky_ops))
            lines += _table([("node", "op", "why")] + [
                (r["node"], r["op"], r["reason"]) for r in self.risky_ops[:limit]])
        else:
            lines.append("risky ops (file I/O, PyFunc, ...): none")
        return "\n".join(lines)

    __str__ = format


def _table(rows):
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(rows[0]))]
    out = []
    for j, row in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


# ---------------------------------------------------------------------------
# inspect.

def _gradient_failure(node, library):
    """Why tf.gradients would fail on `node`, or None."""
    name = _gradient_attr(node)
    if name is not None:
        if registry.is_resolvable(name):
            return None
        why = ("gradient name %r is not registered in this process" % name)
        if name.startswith("CustomGradient-"):
            why += (" (tf.custom_gradient names die with the process that "
                    "built the graph)")
        return name, why + "; patch it (--map 'gradient:%s=<estimator>|remove')" % name
    if node.op in library:
        return None
    if _compat.has_gradient_entry(node.op):
        return None
    if not _compat.is_op_type(node.op):
        return node.op, ("unknown op type %s: not registered in this TensorFlow "
                         "(load its op library first)" % node.op)
    return node.op, ("No gradient defined for operation type %s; patch it with "
                     "an estimator or a registered name" % node.op)


_DIFFERENTIABLE = frozenset(
    tf.as_dtype(t).as_datatype_enum for t in (
        tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.complex64,
        tf.complex128, tf.resource, tf.variant))


def _may_carry_gradient(node):
    """False if every output of `node` has a dtype tf.gradients never
    differentiates (bool, integers, strings): no gradient reaches it."""
    op_def = _compat.op_def(node.op)
    if op_def is None:
        return True
    for arg in op_def.output_arg:
        if arg.type:
            types = [arg.type]
        elif arg.type_attr:
            types = [node.attr[arg.type_attr].type] if arg.type_attr in node.attr else []
        elif arg.type_list_attr:
            types = list(node.attr[arg.type_list_attr].list.type) if (
                arg.type_list_attr in node.attr) else []
        else:
            types = []
        if not types or any(t in _DIFFERENTIABLE for t in types):
            return True
    return False


def _consumers(graph_def):
    """node name -> [(consumer op, consumer has a gradient name)]"""
    out = collections.defaultdict(list)
    for node in graph_def.node:
        named = GRADIENT_ATTR in node.attr
        for inp in node.input:
            if not inp.startswith("^"):
                out[inp.partition(":")[0]].append((node.op, named))
    return out


def _gradient_bypassed(name, consumers):
    """True if every consumer of `name` stops its gradient or replaces it
    (StopGradient; the IdentityN of tf.custom_gradient): the zero gradient of
    the op itself is never used."""
    uses = consumers.get(name)
    return bool(uses) and all(op == "StopGradient" or (op == "IdentityN" and named)
                              for op, named in uses)


def inspect(graph_def):
    """Op types, nodes whose gradient will fail, gradient names, risky ops.

    A node's gradient will fail in ``tf.gradients`` when its
    ``_gradient_op_type`` does not resolve in this process, or its op type
    has no registry entry at all (ops marked NotDifferentiable are fine:
    they pass no gradient). Nodes without data inputs are skipped.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override import frozen
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, name="x")
      ...     with g.gradient_override_map({"Sign": "CustomGradient-424242"}):
      ...         y = tf.sign(x, name="y")
      >>> report = frozen.inspect(g.as_graph_def())
      >>> [(f["node"], f["gradient"]) for f in report.gradient_failures]
      [('y', 'CustomGradient-424242')]

    Returns:
      An `InspectReport`.
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("inspect(): expected a tf.compat.v1.GraphDef, got %s"
                            % type(graph_def).__name__)
    library = {f.signature.name for f in graph_def.library.function}
    counts = collections.Counter()
    failures, risky, zero = [], [], []
    consumers = _consumers(graph_def) if any(
        op in ZERO_GRADIENT_OPS for op in (n.op for n in graph_def.node)) else {}
    names = collections.OrderedDict()
    for node in graph_def.node:
        counts[node.op] += 1
        if node.op in RISKY_OPS:
            risky.append({"node": node.name, "op": node.op, "reason": RISKY_OPS[node.op]})
        gname = _gradient_attr(node)
        if gname is not None:
            entry = names.setdefault(gname, {"name": gname, "count": 0, "nodes": []})
            entry["count"] += 1
            if len(entry["nodes"]) < 10:
                entry["nodes"].append(node.name)
        if (not node.input or node.input[0].startswith("^")
                or not _may_carry_gradient(node)):
            continue
        if (gname is None and node.op in ZERO_GRADIENT_OPS
                and not _gradient_bypassed(node.name, consumers)):
            zero.append({"node": node.name, "op": node.op, "reason": (
                "%s has zero gradient; patch with e.g. --map %s=%s" % (
                    node.op, node.op, "ste_sign" if node.op == "Sign" else
                    "ste_round" if node.op in ("Round", "Rint") else "ste_floor"))})
        failure = _gradient_failure(node, library)
        if failure is not None:
            failures.append({"node": node.name, "op": node.op,
                             "gradient": failure[0], "reason": failure[1]})
    for function in graph_def.library.function:
        for node in function.node_def:
            if node.op in RISKY_OPS:
                risky.append({"node": "%s/%s" % (function.signature.name, node.name),
                              "op": node.op, "reason": RISKY_OPS[node.op]})
    for entry in names.values():
        entry["resolvable"] = registry.is_resolvable(entry["name"])
        entry["needs_graph_override"] = registry.parse_builtin_name(entry["name"]) is not None
    return InspectReport(
        nodes=len(graph_def.node), op_types=dict(counts.most_common()),
        gradient_failures=failures, gradient_names=list(names.values()),
        risky_ops=risky, zero_gradients=zero, functions=len(library))


# ---------------------------------------------------------------------------
# patch and make_portable.

def _data_inputs(node):
    return [i for i in node.input if not i.startswith("^")]


def _dtype(node, what):
    attr = node.attr.get("T")
    if attr is None or not attr.type:
        raise RuleError("%s: node %r (op %s) has no 'T' dtype attr, so no "
                        "stop_gradient form can be built for it" % (what, node.name, node.op))
    if tf.as_dtype(attr.type) not in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
        raise RuleError("%s: node %r (op %s) has dtype %s; estimators need a "
                        "float dtype" % (what, node.name, node.op,
                                         tf.as_dtype(attr.type).name))
    return attr.type


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
    added = []
    for i in range(k):
        _dtype_check = types[i]
        if tf.as_dtype(_dtype_check) not in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
            raise RuleError("%s: IdentityN %r input %d is %s; estimators need "
                            "floats" % (what, node.name, i, tf.as_dtype(_dtype_check).name))
        prefix = "%s/graph_override_portable_%d/" % (node.name, i)
        out_name = prefix + "out"
        clash = [n for n in (out_name,) if n in names]
        if clash:
            raise RuleError("%s: node name %r exists already; was this graph "
                            "patched before?" % (what, clash[0]))
        added += _graphdef_portable.stamp(
            rule.estimator, rule.params, types[i], x_ref=inputs[k + i],
            y_ref=inputs[i], prefix=prefix, out_name=out_name, device=node.device)
        node.input[i] = out_name
    del node.attr[GRADIENT_ATTR]
    return added


def _rewrite_node(node, rule, names, what):
    """Node N (one used output) becomes N/graph_override_forward; a
    stop_gradient form of it takes the name N."""
    inputs = _data_inputs(node)
    if not inputs:
        raise RuleError("%s: node %r (op %s) has no input to pass a gradient to"
                        % (what, node.name, node.op))
    if not estimators.ESTIMATORS[rule.estimator].linear:
        raise RuleError(
            "%s: %s cannot be made portable: a clipped gradient is not linear in "
            "dy, and only such gradients have a stop_gradient form. Use patch() "
            "(registry name) for node %r instead." % (what, rule.estimator, node.name))
    dtype = _dtype(node, what)
    original = node.name
    forward = original + "/graph_override_forward"
    if forward in names:
        raise RuleError("%s: node name %r exists already; was this graph made "
                        "portable before?" % (what, forward))
    node.name = forward
    if GRADIENT_ATTR in node.attr:
        del node.attr[GRADIENT_ATTR]
    return _graphdef_portable.stamp(
        rule.estimator, rule.params, dtype, x_ref=inputs[0], y_ref=forward,
        prefix=original + "/graph_override_portable/", out_name=original,
        device=node.device)


def _apply(graph_def, rules, on_no_match, portable):
    what = "make_portable" if portable else "patch"
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise GraphDefError("%s(): expected a tf.compat.v1.GraphDef, got %s"
                            % (what, type(graph_def).__name__))
    rules = _as_rules(rules)
    if portable:
        for rule in rules:
            if rule.gradient is not None:
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
    view = _View(graph_def)
    selected, owner = _select(graph_def, view, rules)
    _check_matches(rules, selected, on_no_match)
    if not portable and not view.has_gradient_attrs and not any(
            rules[r].remove or (rules[r].estimator and view.ops[i] == "IdentityN")
            for i, r in owner.items()):
        return _set_names_fast(graph_def, view, rules, selected, owner)
    # A copy: parsing the bytes at hand is faster than CopyFrom.
    new = graph_pb2.GraphDef.FromString(view.data)
    changes, added = [], []
    names = None
    if portable or any(view.ops[i] == "IdentityN" for i in owner
                       if rules[owner[i]].estimator):
        names = set(view.names)
    if portable and owner:
        _check_single_output(graph_def, owner, rules)
    # Per rule, once: its text, target name (resolved) and encoded bytes.
    texts = [str(r) for r in rules]
    targets = [r.target for r in rules]
    encoded = [None if t is None else t.encode("utf-8") for t in targets]
    for r, rule in enumerate(rules):
        if targets[r] is not None and not portable:
            registry.resolve(targets[r])
    nodes = new.node
    for i in sorted(owner):
        r = owner[i]
        rule = rules[r]
        node = nodes[i]
        attrs = node.attr
        before = (_gradient_attr(node) if view.has_gradient_attrs
                  and GRADIENT_ATTR in attrs else None)
        name, op = view.names[i], view.ops[i]
        if rule.remove:
            if before is None:
                continue
            del attrs[GRADIENT_ATTR]
            changes.append(NodeChange(name, op, "remove", before, None, texts[r]))
        elif rule.estimator is not None and op == "IdentityN":
            added += _rewrite_identity_n(node, rule, names, what)
            changes.append(NodeChange(name, op, "rewrite", before,
                                      "stop_gradient form of " + targets[r], texts[r]))
        elif portable:
            added += _rewrite_node(node, rule, names, what)
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
    new.node.extend(added)
    report = PatchReport(changes=changes, nodes_added=len(added), portable=portable,
                         rule_matches=[(str(r), len(selected[j])) for j, r in enumerate(rules)])
    if portable:
        report.unresolved_left = _non_portable_names(new)
    return new, report


def _set_names_fast(graph_def, view, rules, selected, owner):
    """`patch` when every change sets a name on a node that has none: the
    attr is appended to each selected node's bytes (protobuf merges it into
    the node's attr map), and the new GraphDef is parsed once from them."""
    texts = [str(r) for r in rules]
    targets = [r.target for r in rules]
    entries = []
    for target in targets:
        registry.resolve(target)
        entry = node_def_pb2.NodeDef()
        entry.attr[GRADIENT_ATTR].s = target.encode("utf-8")
        entries.append(entry.SerializeToString())
    for i, r in owner.items():
        if rules[r].estimator is not None and not _takes_inputs(view.ops[i]):
            inputs = graph_def.node[i].input
            if not inputs or inputs[0].startswith("^"):
                raise RuleError("patch: node %r (op %s) has no input to pass a "
                                "gradient to; narrow the rule %s"
                                % (view.names[i], view.ops[i], rules[r]))
    order = sorted(owner)
    data = _graphdef_io.append_to_nodes(view.data, {i: entries[owner[i]] for i in order})
    names, ops = view.names, view.ops
    changes = [NodeChange(names[i], ops[i], "set", None, targets[owner[i]],
                          texts[owner[i]]) for i in order]
    report = PatchReport(changes=changes, rule_matches=[
        (texts[j], len(selected[j])) for j in range(len(rules))])
    return graph_pb2.GraphDef.FromString(data), report


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
    if _ATTR_BYTES not in graph_def.SerializeToString():
        return []
    out = collections.OrderedDict()
    for node in graph_def.node:
        name = _gradient_attr(node)
        if name is not None and (registry.parse_builtin_name(name) is not None
                                 or not _compat.has_gradient_entry(name)):
            out.setdefault(name, []).append(node.name)
    return ["node(s) %s keep gradient %r, which plain TensorFlow cannot resolve"
            % (", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else ""), name)
            for name, nodes in out.items()]


def patch(graph_def, rules, *, on_no_match="raise"):
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

    Returns:
      ``(new_graph_def, PatchReport)``.

    Raises:
      RuleError, UnknownOpTypeError, NoMatchError: see above.
    """
    return _apply(graph_def, rules, on_no_match, portable=False)


def make_portable(graph_def, rules, *, on_no_match="raise"):
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

    Raises:
      RuleError: clip_gradient, a registered name, a multi-output node, a
        non-float node; UnknownOpTypeError, NoMatchError as in `patch`.
    """
    return _apply(graph_def, rules, on_no_match, portable=True)


# ---------------------------------------------------------------------------
# import.

def import_graph_def(graph_def, input_map=None, return_elements=None, name=None):
    """`tf.compat.v1.import_graph_def` that resolves gradient names first.

    Every ``_gradient_op_type`` name must resolve in this process (built-in
    estimator names are registered on demand); otherwise nothing is imported
    and the error lists each unresolvable name with its nodes.

    Args:
      graph_def: a `GraphDef`, or a path to one (read with `load`).
      input_map, return_elements, name: as in tf.compat.v1.import_graph_def.

    Returns:
      What tf.compat.v1.import_graph_def returns.

    Raises:
      UnknownGradientError: listing the names that do not resolve.
      EagerModeError: called eagerly (no graph to import into).
    """
    if not isinstance(graph_def, graph_pb2.GraphDef):
        graph_def = load(graph_def)
    if tf.executing_eagerly():
        raise EagerModeError(
            "frozen.import_graph_def() needs a graph: call it inside "
            "`with tf.Graph().as_default():`, or wrap it with "
            "tf.compat.v1.wrap_function for eager use")
    missing = collections.OrderedDict()
    if _ATTR_BYTES in graph_def.SerializeToString():
        for node in graph_def.node:
            gname = _gradient_attr(node)
            if gname is None:
                continue
            if registry.is_resolvable(gname):
                registry.resolve(gname)
            else:
                missing.setdefault(gname, []).append(node.name)
    if missing:
        raise UnknownGradientError(
            "import_graph_def: %d gradient name(s) cannot be resolved here: %s. "
            "Repair them first, e.g. `graph-override patch MODEL -o OUT --map "
            "'gradient:NAME=ste_sign'` or `--map 'gradient:NAME=remove'`, or "
            "register the functions before importing." % (len(missing), "; ".join(
                "%r (node(s) %s)" % (n, ", ".join(v[:5]) + (" ..." if len(v) > 5 else ""))
                for n, v in missing.items())))
    return tf.compat.v1.import_graph_def(graph_def, input_map=input_map,
                                         return_elements=return_elements, name=name)
