"""How the analysis names nodes: lines, scopes, qualified and TensorFlow
names, and the assignments behind a name.

`Names` answers from metadata libcst resolved once for the whole module
(positions and scopes); qualified names are asked of the scope only for
the nodes that matter (QualifiedNameProvider would resolve every name of
the module). It changes nothing and decides nothing.
"""

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameSource

from graph_override.migrate import tables
from graph_override.migrate.analysis.common import is_string_expression

__all__ = ["Names"]


class Names:
    """Looks nodes of one module up.

    Args:
      positions: {node: CodeRange}, libcst's PositionProvider for the module.
      scopes: {node: Scope}, libcst's ScopeProvider for the module.
      assign_lines: {target Name of a one-target ``name = value``: its
        statement line}, from the walk (`Facts.assign_lines`).
      assign_blocks: {the same target Names: the block whose body holds the
        line} (`Facts.assign_blocks`).
    """

    def __init__(self, positions, scopes, assign_lines, assign_blocks=None):
        self._positions = positions
        self._scopes = scopes
        self._assign_lines = assign_lines
        self._assign_blocks = assign_blocks or {}

    def line(self, node):
        """The line a node starts on."""
        return self._positions[node].start.line

    def scope(self, node):
        """The libcst Scope of a node, or None."""
        return self._scopes.get(node)

    def qualified(self, node):
        """The set of libcst QualifiedNames of a node (empty if unknown)."""
        scope = self.scope(node)
        if scope is None:
            return set()
        try:
            return set(scope.get_qualified_names_for(node))
        except Exception:  # pylint: disable=broad-except
            return set()  # a node libcst cannot name: treated as unknown

    def imported(self, node):
        """The qualified names of a node that come from imports."""
        return {q.name for q in self.qualified(node)
                if q.source == QualifiedNameSource.IMPORT}

    def tf_names(self, node):
        """The table names (`tables.canonical`) of a TensorFlow function."""
        out = {n for n in map(tables.canonical, self.imported(node)) if n is not None}
        if not out:
            alias = self._module_alias(node)
            name = tables.canonical(alias) if alias is not None else None
            if name is not None:
                out.add(name)
        return out

    def _module_alias(self, node):
        """The qualified name of ``tf1.sign`` when the module binds
        ``tf1 = tf.compat.v1`` once (a module alias made by assignment)."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        assignments = self.assignments(node)
        if len(assignments) != 1:
            return None
        (a,) = assignments
        if not isinstance(getattr(a, "scope", None), GlobalScope):
            return None
        stmt = self.assign_statement(a)
        if stmt is None or not isinstance(stmt.body[0].value, (cst.Attribute, cst.Name)):
            return None
        for name in self.imported(stmt.body[0].value):
            if name.split(".")[0] == "tensorflow":
                return ".".join([name] + parts[::-1])
        return None

    def builtin_name(self, node):
        """'abs' for the builtin abs, else None."""
        for q in self.qualified(node):
            if q.source == QualifiedNameSource.BUILTIN:
                return q.name.replace("builtins.", "")
        return None

    def assignments(self, name_node):
        """The assignments a Name read refers to."""
        scope = self.scope(name_node)
        if scope is None:
            return frozenset()
        return frozenset(a for a in scope[name_node.value]
                         if name_node in {r.node for r in a.references})

    def references_of(self, target):
        """The Name nodes that read what a ``target = ...`` assigns."""
        scope = self.scope(target)
        if scope is None:
            return []
        return [r.node for a in scope[target.value]
                if getattr(a, "node", None) is target for r in a.references]

    def rebound_between(self, target, read):
        """True if `read` cannot see what ``target = ...`` bound: another
        ``name = value`` line of the same scope rebinds the name between
        them on every path.

        That is so when one block holds all three in its statements in
        the order target, rebinding line, read: Python enters a block only
        at its start, so no path reaches the read's statement without
        passing the line (a loop's back edge enters at the start too). A
        read in a nested function, lambda or comprehension (another scope,
        which may run at any time) is never taken as rebound.
        """
        scope = self.scope(target)
        if scope is None or self.scope(read) is not scope:
            return False
        for assignment in scope[target.value]:
            other = getattr(assignment, "node", None)
            block = self._assign_blocks.get(other)
            if other is target or block is None:
                continue
            body = list(block.body)
            line = body.index(self._assign_lines[other])
            first = self._statement_index(body, target)
            last = self._statement_index(body, read)
            if first is not None and last is not None and first < line < last:
                return True
        return False

    def _statement_index(self, body, node):
        """The index of the statement of `body` that holds `node`, or None."""
        where = self._positions[node]
        for i, stmt in enumerate(body):
            span = self._positions[stmt]
            if (span.start.line, span.start.column) <= (where.start.line, where.start.column) \
                    and (where.end.line, where.end.column) <= (span.end.line, span.end.column):
                return i
        return None

    def bound_here(self, name):
        """True if the Name's scope binds it (a def, import or assignment)."""
        scope = self.scope(name)
        return scope is not None and bool(scope[name.value])

    def assign_statement(self, assignment):
        """The ``name = value`` line behind an assignment, or None."""
        return self._assign_lines.get(getattr(assignment, "node", None))

    def assigned_string(self, assignment):
        """True if the assignment is ``name = <an expression that builds a str>``."""
        stmt = self.assign_statement(assignment)
        return stmt is not None and is_string_expression(stmt.body[0].value)

    def is_graph_getter(self, node):
        """tf.get_default_graph() or an alias of it, called without arguments,
        or Keras 2's ``K.get_session().graph`` (Keras 3 has no get_session)."""
        if isinstance(node, cst.Attribute) and node.attr.value == "graph":
            node, getters = node.value, tables.SESSION_GETTERS
        else:
            getters = tables.GRAPH_GETTERS
        if not isinstance(node, cst.Call) or node.args:
            return False
        # the imported names too: standalone Keras is not TensorFlow's
        names = self.tf_names(node.func) | self.imported(node.func)
        return bool(set(getters) & names)
