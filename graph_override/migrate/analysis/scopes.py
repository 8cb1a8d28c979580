"""Override scopes: ``with <graph>.gradient_override_map({...}):`` and the
decision, all or nothing per outermost scope, to convert it."""

import libcst as cst

from graph_override.migrate.analysis.base import override_items
from graph_override.migrate.analysis.body import BodyScanner
from graph_override.migrate.analysis.common import (HELPER, Work, code,
                                                    is_plain_reference,
                                                    string_value)

__all__ = ["ScopesMixin"]


class ScopesMixin:
    """The with-statement idiom of `graph_override.migrate.analysis`."""

    def decide(self, with_node):
        """Converts one outermost scope (and those nested in it) or lists it."""
        work = Work()
        self._analyze_with(with_node, {}, work)
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
            suffix = self.in_wrapper(with_node)
            for line, reason in work.reasons:
                self.plan.untouched.append((line, reason + suffix))
            return
        for reg in work.uses:
            reg.converted_uses += 1
        for reg in work.direct.values():
            reg.passed += 1
        self.plan.calls.update(work.calls)
        self.plan.changed.extend(work.changed)
        self.plan.with_items.update(work.with_items)
        self.graph_names_done.update(work.graph_names)
        self.name_values_done.update(work.name_values)

    def _analyze_with(self, node, outer_map, work):
        line = self.line(node)
        idx = override_items(node)
        mapping = dict(outer_map)
        for i in idx:
            item = node.items[i]
            call = item.item
            if item.asname is not None:
                work.reasons.append((line, "the override scope is bound with 'as "
                                     "...', so later code may use it; convert "
                                     "it by hand with %s" % HELPER))
                return
            graph = call.func.value
            if not (is_plain_reference(graph) or self.is_graph_getter(graph)):
                work.reasons.append((line, "the graph in '%s.gradient_override_map'"
                                     " is computed by a call this tool cannot "
                                     "follow; bind it to a name first "
                                     "(g = ...) and migrate again" % code(graph)))
                return
            if isinstance(graph, cst.Name):
                work.graph_names.append(graph)
            entries = self._map_entries(call, line, work)
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
        self.check_body(scanner, mapping, work)
        for inner in scanner.nested_withs:
            self._analyze_with(inner, mapping, work)

    def _map_entries(self, call, line, work):
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
            if not isinstance(el, cst.DictElement):
                work.reasons.append((line, "the override map unpacks '**%s' at "
                                     "run time; write its entries out and "
                                     "migrate again" % code(el.value)))
                return None
            key = string_value(el.key)
            if key is None:
                work.reasons.append((line, "override map key '%s' is not a "
                                     "string literal; write the op type out "
                                     "(e.g. \"Sign\") and migrate again"
                                     % code(el.key)))
                return None
            entry = self.gradient_entry(el.value, line, work)
            if entry is None:
                return None
            entries[key] = entry
        return entries
