"""Dead code after the conversion: ``g = tf.get_default_graph()`` lines, the
counter idiom's name, and TensorFlow imports that only removed code used."""

import libcst as cst

from graph_override.migrate.analysis.common import (bound_name, code,
                                                    imports_tensorflow,
                                                    is_string_expression,
                                                    names_in)

__all__ = ["DeadCodeMixin"]


class DeadCodeMixin:
    """The dead-code idiom of `graph_override.migrate.analysis`."""

    def assign_statement(self, assignment):
        """The ``name = value`` line behind an assignment, or None."""
        return self.assign_lines.get(getattr(assignment, "node", None))

    def assigned_string(self, assignment):
        stmt = self.assign_statement(assignment)
        return stmt is not None and is_string_expression(stmt.body[0].value)

    def drop(self, stmt):
        if stmt not in self.plan.statements:
            self.plan.statements.add(stmt)
            bare = stmt.with_changes(leading_lines=())  # not its comments
            self.plan.changed.append((self.line(stmt), "removed '%s', unused "
                                      "after the conversion" % code(bare).strip()))

    def dead_graph_names(self):
        """Drops ``g = tf.get_default_graph()`` once g has no other use."""
        seen = set()
        for name in self.graph_names_done:
            for a in self.assignments(name):
                if a in seen:
                    continue
                seen.add(a)
                refs = {r.node for r in a.references}
                if not refs or not refs <= self.graph_names_done:
                    continue
                stmt = self.assign_statement(a)
                if stmt is None:
                    continue
                value = stmt.body[0].value
                if self.is_graph_getter(value):
                    self.drop(stmt)

    def dead_imports(self):
        """Drops imports used only by what the conversion removed (the
        ``from tensorflow.python.framework import ops`` of the counter idiom)."""
        removed = set()
        for node in list(self.plan.decorators) + list(self.plan.statements):
            removed.update(names_in(node))
        seen = set()
        for name in removed:
            for a in self.assignments(name):
                if a in seen or not imports_tensorflow(a.node):
                    continue
                seen.add(a)
                if {r.node for r in a.references} <= removed:
                    self.plan.imports.setdefault(a.node, set()).add(a.name)
        for node, dead in list(self.plan.imports.items()):
            if isinstance(node.names, cst.ImportStar):
                del self.plan.imports[node]
                continue
            bound = {bound_name(alias) for alias in node.names}
            line = self.import_lines.get(node)
            if bound <= dead and line is not None:
                del self.plan.imports[node]
                self.drop(line)
            elif bound <= dead:
                del self.plan.imports[node]  # shares its line: leave it
            else:
                self.plan.changed.append((self.line(node), "removed %s from '%s', "
                                          "unused after the conversion" % (
                                              ", ".join(sorted(dead)),
                                              code(node).strip())))
