"""Override scopes: ``with <graph>.gradient_override_map({...}):`` and the
decision, all or nothing per outermost scope, to convert it; and the map
used any other way than as a with item.

Inputs: the `Context` (names, the walk's scopes and stray uses, the
registrations). Outputs: the plan's conversions or the scope's reasons,
the use counts of the registrations, and the graph and gradient names that
`dead_code` and `registrations` then look at.
"""

import libcst as cst

from graph_override.migrate.analysis import body, registrations, wrappers
from graph_override.migrate.analysis.collect import override_items
from graph_override.migrate.analysis.common import (HELPER, Work, code,
                                                    is_plain_reference,
                                                    string_value)
from graph_override.migrate.analysis.scanner import BodyScanner

__all__ = ["decide", "list_stray_maps"]


def decide(ctx, with_node):
    """Converts one outermost scope (and those nested in it) or lists it."""
    work = Work()
    _analyze_with(ctx, with_node, {}, work)
    if not work.reasons:
        # Every call in the scope is known, so an entry no call matched
        # re-routed nothing in the legacy code either (a typo such as
        # "sign", or a leftover): dropping it keeps the behaviour.
        for line, key in work.keys:
            if key not in work.converted_types:
                work.changed.append((line, "map key %r matches no op created "
                                     "in this scope, so it re-routed nothing "
                                     "(check it: op types are CamelCase, e.g. "
                                     "'Sign'); dropped" % key))
    for reg in work.uses:
        reg.uses += 1
    if work.reasons:
        suffix = wrappers.in_wrapper(ctx, with_node)
        ctx.plan.untouched.extend((line, reason + suffix)
                                  for line, reason in work.reasons)
        return
    for reg in work.uses:
        reg.converted_uses += 1
    for reg in work.direct.values():
        reg.passed += 1
    ctx.plan.calls.update(work.calls)
    ctx.plan.changed.extend(work.changed)
    ctx.plan.with_items.update(work.with_items)
    ctx.graph_names_done.update(work.graph_names)
    ctx.name_values_done.update(work.name_values)


def list_stray_maps(ctx):
    """Lists each gradient_override_map used other than as a with item."""
    in_with = {call.func for call in ctx.facts.override_calls}
    for attr in ctx.facts.stray:
        if attr not in in_with:
            ctx.plan.untouched.append((
                ctx.names.line(attr), "gradient_override_map is used outside a "
                "'with' statement; convert it by hand with "
                "graph_override.tf2.op_with_gradient" + wrappers.in_wrapper(ctx, attr)))


def _analyze_with(ctx, node, outer_map, work):
    line = ctx.names.line(node)
    idx = override_items(node)
    mapping = dict(outer_map)
    for i in idx:
        entries = _item_entries(ctx, node.items[i], line, work)
        if entries is None:
            return
        mapping.update(entries)
        work.keys.extend((line, key) for key in entries)
    if any(i not in idx for i in range(min(idx) + 1, max(idx))):
        work.reasons.append((line, "a with-item between two gradient_override_map "
                             "items runs under only part of the map; rewrite "
                             "it as nested with statements"))
        return
    work.with_items[node] = set(idx)
    work.changed.append((line, "removed the gradient_override_map scope "
                         "(%s)" % ", ".join("%s: %s" % (k, code(v.expression))
                                           for k, v in sorted(mapping.items()))))
    scanner = BodyScanner()
    # Items after the override item are evaluated inside the scope.
    for item in node.items[max(idx) + 1:]:
        item.item.visit(scanner)
    node.body.visit(scanner)
    body.check_body(ctx, scanner, mapping, work)
    for inner in scanner.nested_withs:
        _analyze_with(ctx, inner, mapping, work)


def _item_entries(ctx, item, line, work):
    """The entries of one gradient_override_map item, or None (a reason
    is recorded)."""
    if item.asname is not None:
        work.reasons.append((line, "the override scope is bound with 'as "
                             "...', so later code may use it; convert "
                             "it by hand with %s" % HELPER))
        return None
    graph = item.item.func.value
    if not (is_plain_reference(graph) or ctx.names.is_graph_getter(graph)):
        work.reasons.append((line, "the graph in '%s.gradient_override_map'"
                             " is computed by a call this tool cannot "
                             "follow; bind it to a name first "
                             "(g = ...) and migrate again" % code(graph)))
        return None
    if isinstance(graph, cst.Name):
        work.graph_names.append(graph)
    return _map_entries(ctx, item.item, line, work)


def _map_entries(ctx, call, line, work):
    if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
        work.reasons.append((line, "gradient_override_map is called with "
                             "other than one mapping argument; pass one "
                             "dict literal and migrate again"))
        return None
    mapping = call.args[0].value
    if not isinstance(mapping, cst.Dict):
        work.reasons.append((line, "the override map '%s' is built at run "
                             "time (not a dict literal), so its entries are "
                             "unknown; write it as a dict literal, or wrap "
                             "its ops by hand with %s" % (code(mapping), HELPER)))
        return None
    entries = {}
    for el in mapping.elements:
        reason = _element_reason(el)
        if reason is not None:
            work.reasons.append((line, reason))
            return None
        entry = registrations.gradient_entry(ctx, el.value, line, work)
        if entry is None:
            return None
        entries[string_value(el.key)] = entry
    return entries


def _element_reason(el):
    """Why a map element cannot be read, or None."""
    if not isinstance(el, cst.DictElement):
        return ("the override map unpacks '**%s' at run time; write its "
                "entries out and migrate again" % code(el.value))
    if string_value(el.key) is None:
        return ("override map key '%s' is not a string literal; write the op "
                "type out (e.g. \"Sign\") and migrate again" % code(el.key))
    return None
