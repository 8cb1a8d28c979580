"""The report of `graph_override.frozen.inspect`: a JSON-ready dict and
plain-text tables."""

import dataclasses

from graph_override._console.terminal import printable

__all__ = ["InspectReport", "V1_LOOP_HELP", "table", "v1_loop_lines"]

# What a user can do about a TF1 while loop in a frozen graph.
V1_LOOP_HELP = (
    "re-export the model with control flow v2 (freeze with "
    "convert_variables_to_constants_v2(fn, lower_control_flow=False), or build "
    "the TF1 graph after tf.compat.v1.enable_control_flow_v2()), or differentiate "
    "it where its loop contexts exist (the process that built it, or its "
    "MetaGraph through tf.compat.v1.train.import_meta_graph); gradients whose "
    "path does not cross a loop still work")


@dataclasses.dataclass
class InspectReport:
    """What `inspect` found; `to_dict` for JSON, `format` for a table."""
    nodes: int
    op_types: dict                       # op type -> count, most common first
    gradient_failures: list              # dicts: node, op, gradient, reason
    gradient_names: list                 # dicts: name, count, nodes, resolvable,
    #                                      needs_graph_override
    risky_ops: list                      # dicts: node, op, reason
    zero_gradients: list = dataclasses.field(default_factory=list)  # dicts: node, op, reason
    functions: int = 0
    v1_loops: list = dataclasses.field(default_factory=list)  # dicts: loop, exits, nodes
    variables: list = dataclasses.field(default_factory=list)  # dicts: node, op

    @property
    def ok(self):
        """True if no gradient fails or vanishes, no TF1 loop blocks
        gradients, no risky op was found and the graph holds no variables
        (it is frozen)."""
        return not (self.gradient_failures or self.zero_gradients or self.risky_ops
                    or self.v1_loops or self.variables)

    def to_dict(self):
        return {"nodes": self.nodes, "functions": self.functions,
                "op_types": dict(self.op_types),
                "gradient_failures": list(self.gradient_failures),
                "gradient_names": list(self.gradient_names),
                "zero_gradients": list(self.zero_gradients),
                "v1_loops": list(self.v1_loops), "variables": list(self.variables),
                "risky_ops": list(self.risky_ops), "ok": self.ok}

    def format(self, limit=30):
        lines = ["%d nodes, %d op types%s" % (
            self.nodes, len(self.op_types),
            ", %d library functions" % self.functions if self.functions else "")]
        lines += table([("op type", "count")] + [
            (op, str(n)) for op, n in list(self.op_types.items())[:limit]])
        if len(self.op_types) > limit:
            lines.append("  ... %d more op types (use --json)" % (len(self.op_types) - limit))
        lines.append("")
        if self.gradient_names:
            lines.append("gradient names (_gradient_op_type):")
            lines += table([("name", "nodes", "resolves here", "needs graph_override")] + [
                (g["name"], str(g["count"]), "yes" if g["resolvable"] else "NO",
                 "yes" if g["needs_graph_override"] else "no")
                for g in self.gradient_names])
        else:
            lines.append("gradient names (_gradient_op_type): none")
        lines.append("")
        if self.gradient_failures:
            lines.append("%d node(s) whose gradient will fail:" % len(self.gradient_failures))
            lines += table([("node", "op", "gradient", "why")] + [
                (f["node"], f["op"], f["gradient"], f["reason"])
                for f in self.gradient_failures[:limit]])
            if len(self.gradient_failures) > limit:
                lines.append("  ... and %d more (use --json)"
                             % (len(self.gradient_failures) - limit))
            lines.append("  repair: graph-override patch MODEL -o OUT --map "
                         "'gradient:NAME=<estimator>' (or =remove); op types: "
                         "--map OPTYPE=<estimator>")
        elif self.v1_loops:
            lines.append("gradients: every differentiable node outside the TF1 "
                         "loops below has a gradient")
        else:
            lines.append("gradients: every differentiable node has a gradient")
        lines.append("")
        if self.v1_loops:
            lines += v1_loop_lines(self.v1_loops, limit)
            lines.append("")
        if self.variables:
            lines.append("%d variable(s): the graph is not frozen (to_function and "
                         "convert refuse it; freeze it with its checkpoint first, "
                         "convert_variables_to_constants):" % len(self.variables))
            lines += table([("node", "op")] + [
                (v["node"], v["op"]) for v in self.variables[:limit]])
            if len(self.variables) > limit:
                lines.append("  ... and %d more (use --json)" % (len(self.variables) - limit))
            lines.append("")
        if self.zero_gradients:
            lines.append("%d node(s) whose gradient is zero everywhere (tf.gradients "
                         "gives zeros or None through them):" % len(self.zero_gradients))
            lines += table([("node", "op", "why")] + [
                (z["node"], z["op"], z["reason"]) for z in self.zero_gradients[:limit]])
            if len(self.zero_gradients) > limit:
                lines.append("  ... and %d more (use --json)"
                             % (len(self.zero_gradients) - limit))
            lines.append("")
        if self.risky_ops:
            lines.append("%d risky op(s) for an untrusted graph:" % len(self.risky_ops))
            lines += table([("node", "op", "why")] + [
                (r["node"], r["op"], r["reason"]) for r in self.risky_ops[:limit]])
        else:
            lines.append("risky ops (file I/O, PyFunc, ...): none")
        return "\n".join(lines)

    __str__ = format


def v1_loop_lines(loops, limit=30):
    """The text report of TF1 while loops (see `inspect`)."""
    lines = ["%d TF1 while loop(s) (Enter/Exit/NextIteration): tf.gradients cannot "
             "cross them after a GraphDef import ('NoneType' object has no attribute "
             "'outer_context'), patched or not:" % len(loops)]
    lines += table([("loop", "nodes", "exits")] + [
        (e["loop"], str(e["nodes"]), ", ".join(e["exits"][:3])
         + (" ..." if len(e["exits"]) > 3 else "")) for e in loops[:limit]])
    if len(loops) > limit:
        lines.append("  ... and %d more (use --json)" % (len(loops) - limit))
    lines.append("  what to do: " + V1_LOOP_HELP)
    return lines


def table(rows):
    """Plain-text table lines of `rows` (the first row the header); control
    characters in a cell (a node named with a newline or an escape
    sequence) are escaped, so every row stays one line."""
    rows = [[printable(c) for c in r] for r in rows]
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(rows[0]))]
    out = []
    for j, row in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out
