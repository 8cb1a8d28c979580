"""Code across a scope's boundary that runs or looks at its ops at another
time than the conversion assumes.

A conversion moves the gradient from the scope (where ops are re-routed
while it is open) to the calls (wherever and whenever they run), and
changes what those calls return in graph mode. So a scope is left when:

* a generator expression made inside it is not consumed there: its calls
  run later, after the map has closed, where the legacy code re-routed
  nothing;
* a generator made before it is consumed inside it: its calls run while
  the map is open, out of this tool's sight;
* code reads ``.op``, ``.name`` or ``.graph`` of a converted output (RETURNN's
  ``assert y.op.type == "Identity"``): op_with_gradient's output comes from
  an IdentityN op in graph mode, and eager tensors have none of the three.
"""

import libcst as cst

from graph_override.migrate.analysis.common import HELPER, code

__all__ = ["BoundaryMixin"]


def _short(node, limit=40):
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class BoundaryMixin:
    """The scope-boundary idiom of `graph_override.migrate.analysis`."""

    def check_generators(self, scanner, work):
        """Generators made on one side of the boundary, consumed on the other."""
        for gen in scanner.generators:
            if gen not in scanner.consumed:
                work.reasons.append((self.line(gen), (
                    "the generator expression '%s' is made inside the override "
                    "scope but runs its calls when it is consumed, perhaps after "
                    "the scope has closed, where the map re-routes nothing; "
                    "consume it inside the scope (list(...)) or make it where it "
                    "is consumed, then migrate again") % _short(gen)))
        made_here, seen = set(scanner.generators), set()
        for name in scanner.names:
            for a in self.assignments(name):
                stmt = self.assign_lines.get(getattr(a, "node", None))
                value = stmt.body[0].value if stmt is not None else None
                if not isinstance(value, cst.GeneratorExp) or value in made_here \
                        or stmt in seen:
                    continue
                seen.add(stmt)
                work.reasons.append((self.line(name), (
                    "'%s' is a generator expression made before the override "
                    "scope (line %d) and consumed inside it: its calls run while "
                    "the map is open, out of this tool's sight; make it inside "
                    "the scope, or consume it before, then migrate again")
                    % (name.value, self.line(stmt))))

    def check_output_reads(self, scanner, converted, work):
        """Reads of .op, .name or .graph of the outputs of converted calls."""
        for call in converted:
            for read in self._output_reads(call, scanner.assigned.get(call)):
                work.reasons.append((self.line(read), (
                    "'%s' looks at the output of %s(...) (line %d), which the "
                    "conversion would change: in graph mode an IdentityN op makes "
                    "the output of %s, and eager tensors have no .op, .name or "
                    ".graph; rewrite that code not to inspect the output, then "
                    "migrate again") % (_short(read), code(call.func),
                                         self.line(call), HELPER)))

    def _output_reads(self, call, target):
        reads = [self.attr_reads[call]] if call in self.attr_reads else []
        if target is None:
            return reads
        scope = self.scope(target)
        if scope is None:
            return reads
        for a in scope[target.value]:
            if getattr(a, "node", None) is target:
                reads += [self.attr_reads[r.node] for r in a.references
                          if r.node in self.attr_reads]
        return reads
