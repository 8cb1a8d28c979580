"""The analysis pass of the source migration (`graph_override.migrate`).

The analysis reads one parsed module and decides what to do: which ``with
... gradient_override_map(...)`` scopes can go, which calls inside them
become ``op_with_gradient(fn, gradient)(...)``, which helper assignments
and imports become dead, which registrations stay (and why), and which
scopes and wrapper calls must stay (with the reasons). It changes nothing:
the result is a `Plan` that `graph_override.migrate.rewrite` applies.

As LibCST's codemods compose visitors that share an explicit context, the
analysis is one walk that records facts, then one idiom after another,
each a module of functions that receive the `Context` explicitly:

* `collect`: the walk (`Facts`: scopes, defs, assignments, imports, calls);
* `names`: how nodes are named (lines, scopes, qualified names);
* `context`: the `Context` and `Facts`, every field documented;
* `registrations`: ``RegisterGradient`` functions, and which may go;
* `scopes`: override scopes, converted all or nothing;
* `scanner` and `body`: what a scope's body does, and a true reason for
  each call it cannot convert;
* `boundary`: code across a scope's boundary (lazy generators, reads of a
  converted output's op or name);
* `wrappers`: a project's own wrappers around ``gradient_override_map``;
* `dead_code`: graph variables, counter names and imports left unused.

A scope is converted all or nothing (an outermost scope together with the
scopes nested in it), and only when every call in it is understood: a known
TensorFlow function (see `graph_override.migrate.tables`), a harmless
builtin or method. Anything else leaves the scope as it is.
"""

import libcst as cst
from libcst.metadata import PositionProvider, ScopeProvider

from graph_override.migrate.analysis import dead_code, registrations, scopes
from graph_override.migrate.analysis.collect import collect
from graph_override.migrate.analysis.common import (HELPER, HELPER_MODULE, Plan,
                                                    bound_name, code)
from graph_override.migrate.analysis.context import Context
from graph_override.migrate.analysis.names import Names
from graph_override.migrate.analysis.wrappers import (Wrapper, find_wrappers,
                                                      list_calls)

__all__ = ["HELPER", "HELPER_MODULE", "Plan", "Wrapper", "analyze", "bound_name",
           "code", "find_wrappers"]


def analyze(module, keep_names=(), wrappers=None):
    """Runs the analysis pass; returns (Plan, MetadataWrapper).

    Args:
      module: a parsed libcst Module (never mutated).
      keep_names: gradient names other files of the run use in override maps.
      wrappers: {name: Wrapper} of wrappers around gradient_override_map
        (this file's and the other files' of the run).
    """
    # The module is never mutated (libcst nodes are immutable), so the
    # wrapper may skip its defensive deep copy.
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    metadata = wrapper.resolve_many([PositionProvider, ScopeProvider])
    known = dict(wrappers or {})
    facts = collect(wrapper.module, known)
    names = Names(metadata[PositionProvider], metadata[ScopeProvider],
                  facts.assign_lines, facts.assign_blocks)
    ctx = Context(names=names, facts=facts, keep_names=frozenset(keep_names),
                  wrappers=known)
    _name_the_helper(ctx, wrapper.module)
    registrations.collect(ctx)
    for node in facts.override_withs:
        scopes.decide(ctx, node)
    scopes.list_stray_maps(ctx)
    list_calls(ctx)
    dead_code.drop_graph_names(ctx)
    registrations.finish(ctx)
    dead_code.drop_imports(ctx)
    ctx.plan.untouched = sorted(set(ctx.plan.untouched))
    ctx.plan.changed.sort()
    ctx.plan.kept.sort()
    return ctx.plan, wrapper


def _name_the_helper(ctx, module):
    """op_with_gradient as the module will know it: imported already, or
    under another name when the module binds the name itself."""
    scope = ctx.names.scope(module)
    if scope is None or HELPER not in scope:
        return
    for a in scope[HELPER]:
        imported = getattr(a, "node", None)
        if isinstance(imported, cst.ImportFrom) and imported.module is not None \
                and code(imported.module).startswith("graph_override"):
            ctx.plan.need_import = False
            return
    ctx.plan.helper = "_go_" + HELPER
