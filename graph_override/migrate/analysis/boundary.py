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

Inputs: the `Context` (names, the walk's assignments and attribute reads)
and what `body.BodyScanner` found in one scope. Output: reasons in the
scope's `Work`.
"""

import libcst as cst

from graph_override.migrate.analysis.common import HELPER, code, short

__all__ = ["check_generators", "check_output_reads"]


def check_generators(ctx, scanner, work):
    """Generators made on one side of the boundary, consumed on the other."""
    for gen in scanner.generators:
        if gen not in scanner.consumed:
            work.reasons.append((ctx.names.line(gen), (
                "the generator expression '%s' is made inside the override "
                "scope but runs its calls when it is consumed, perhaps after "
                "the scope has closed, where the map re-routes nothing; "
                "consume it inside the scope (list(...)) or make it where it "
                "is consumed, then migrate again") % short(gen)))
    made_here, seen = set(scanner.generators), set()
    for name in scanner.names:
        for stmt in _generators_behind(ctx.names, name):
            if stmt in seen or stmt.body[0].value in made_here:
                continue
            seen.add(stmt)
            work.reasons.append((ctx.names.line(name), (
                "'%s' is a generator expression made before the override "
                "scope (line %d) and consumed inside it: its calls run while "
                "the map is open, out of this tool's sight; make it inside "
                "the scope, or consume it before, then migrate again")
                % (name.value, ctx.names.line(stmt))))


def _generators_behind(names, name):
    """The ``name = (... for ...)`` lines a Name read may refer to."""
    for a in names.assignments(name):
        stmt = names.assign_statement(a)
        if stmt is not None and isinstance(stmt.body[0].value, cst.GeneratorExp) \
                and not names.rebound_between(a.node, name):
            yield stmt


def check_output_reads(ctx, scanner, converted, work):
    """Reads of .op, .name or .graph of the outputs of converted calls."""
    reads_of = ctx.facts.attr_reads
    for call in converted:
        reads = [reads_of[call]] if call in reads_of else []
        target = scanner.assigned.get(call)
        if target is not None:
            reads += [reads_of[n] for n in ctx.names.references_of(target)
                      if n in reads_of and not ctx.names.rebound_between(target, n)]
        for read in reads:
            work.reasons.append((ctx.names.line(read), (
                "'%s' looks at the output of %s(...) (line %d), which the "
                "conversion would change: in graph mode an IdentityN op makes "
                "the output of %s, and eager tensors have no .op, .name or "
                ".graph; rewrite that code not to inspect the output, then "
                "migrate again") % (short(read), code(call.func),
                                     ctx.names.line(call), HELPER)))
