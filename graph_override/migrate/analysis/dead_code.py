"""Dead code after the conversion: ``g = tf.get_default_graph()`` lines (and
Keras 2's ``g = K.get_session().graph``), the counter idiom's name, and
TensorFlow imports that only removed code used.

Inputs: the `Context` (names, the walk's statement lines, the graph names
of converted scopes, the plan's removals so far). Output: more removals in
the plan, each reported.
"""

import libcst as cst

from graph_override.migrate.analysis.common import (bound_name, code,
                                                    imports_tensorflow, names_in)

__all__ = ["drop", "drop_graph_names", "drop_imports"]


def drop(ctx, stmt):
    """Removes a statement line (once) and reports it."""
    if stmt in ctx.plan.statements:
        return
    ctx.plan.statements.add(stmt)
    bare = stmt.with_changes(leading_lines=())  # not its comments
    ctx.plan.changed.append((ctx.names.line(stmt), "removed '%s', unused "
                             "after the conversion" % code(bare).strip()))


def drop_graph_names(ctx):
    """Drops ``g = tf.get_default_graph()`` once g has no other use."""
    seen = set()
    for name in ctx.graph_names_done:
        for a in ctx.names.assignments(name):
            if a in seen:
                continue
            seen.add(a)
            stmt = ctx.names.assign_statement(a)
            if stmt is None or not ctx.names.is_graph_getter(stmt.body[0].value):
                continue
            refs = {r.node for r in a.references}
            if refs and refs <= ctx.graph_names_done:
                drop(ctx, stmt)
            elif isinstance(stmt.body[0].value, cst.Attribute):
                _keep_session_graph(ctx, stmt, refs - ctx.graph_names_done)


def _keep_session_graph(ctx, stmt, others):
    """Keras 2's ``g = K.get_session().graph`` that other code still uses."""
    bare = stmt.with_changes(leading_lines=())
    ctx.plan.kept.append((ctx.names.line(stmt), (
        "kept '%s': the name is also used on line %d; Keras 3 has no "
        "get_session, so write tf.compat.v1.get_default_graph() there once "
        "the code runs on Keras 3") % (code(bare).strip(),
                                       min(ctx.names.line(n) for n in others))))


def drop_imports(ctx):
    """Drops imports used only by what the conversion removed (the
    ``from tensorflow.python.framework import ops`` of the counter idiom)."""
    plan = ctx.plan
    removed = set()
    for node in list(plan.decorators) + list(plan.statements):
        removed.update(names_in(node))
    seen = set()
    for name in removed:
        for a in ctx.names.assignments(name):
            if a in seen or not imports_tensorflow(a.node):
                continue
            seen.add(a)
            if {r.node for r in a.references} <= removed:
                plan.imports.setdefault(a.node, set()).add(a.name)
    for node, dead in list(plan.imports.items()):
        _settle_import(ctx, node, dead)


def _settle_import(ctx, node, dead):
    """Drops the import's line, or names from it, or nothing (a star
    import, or a line shared with other statements)."""
    plan = ctx.plan
    if isinstance(node.names, cst.ImportStar):
        del plan.imports[node]
        return
    bound = {bound_name(alias) for alias in node.names}
    line = ctx.facts.import_lines.get(node)
    if bound <= dead:
        del plan.imports[node]
        if line is not None:
            drop(ctx, line)
        return
    plan.changed.append((ctx.names.line(node), "removed %s from '%s', unused "
                         "after the conversion" % (", ".join(sorted(dead)),
                                                   code(node).strip())))
