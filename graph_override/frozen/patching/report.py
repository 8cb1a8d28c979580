"""The reports of `graph_override.frozen.patch` and `make_portable`: a
JSON-ready dict and a plain-text table."""

import collections.abc
import dataclasses

from graph_override.frozen.inspection.report import table

__all__ = ["NodeChange", "NodeChanges", "PatchReport"]


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


class NodeChanges(collections.abc.Sequence):
    """The "set" changes of a patch that named many nodes, as a read-only
    list of `NodeChange`, each made when it is read: a million-node graph
    then costs no million objects unless the caller asks for them.

    Args:
      names, ops: node names and op types, by node index.
      order: the indices of the changed nodes, in node order.
      rule_of: {node index: rule index}.
      targets, texts: per rule, the name set and the rule's text.
    """

    def __init__(self, names, ops, order, rule_of, targets, texts):
        self._names, self._ops, self._order = names, ops, order
        self._rule_of, self._targets, self._texts = rule_of, targets, texts

    def __len__(self):
        return len(self._order)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        i = self._order[k]
        r = self._rule_of[i]
        return NodeChange(self._names[i], self._ops[i], "set", None, self._targets[r],
                          self._texts[r])

    def __eq__(self, other):
        if not isinstance(other, collections.abc.Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self):
        return "NodeChanges(%r)" % (self[:3] + (["..."] if len(self) > 3 else []))


@dataclasses.dataclass
class PatchReport:
    """What `patch` / `make_portable` did: every node changed, how many each
    rule selected, the nodes added, gradient names left that plain
    TensorFlow cannot resolve, and warnings (TF1 while loops, which
    tf.gradients cannot cross after import, patched or not)."""
    changes: list
    rule_matches: list      # [(rule text, number of nodes selected)]
    nodes_added: int = 0
    portable: bool = False
    unresolved_left: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)  # e.g. TF1 loops
    # inspect(result).gradient_failures; filled in by patch_file only.
    gradient_failures_left: list = None

    def to_dict(self):
        return {"portable": self.portable, "warnings": list(self.warnings),
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
        lines += table(rows)
        if len(self.changes) > limit:
            lines.append("  ... and %d more (use --json for all)"
                         % (len(self.changes) - limit))
        for rule, n in self.rule_matches:
            lines.append("rule %s: %d node(s) selected" % (rule, n))
        for item in list(self.unresolved_left) + list(self.warnings):
            lines.append("warning: %s" % item)
        return "\n".join(lines)

    __str__ = format
