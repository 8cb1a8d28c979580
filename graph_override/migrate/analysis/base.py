"""The analyzer's walk over a module: what it collects, and how it names
nodes (positions, scopes, qualified names). The decisions live in the idiom
modules beside this one; `graph_override.migrate.analysis` joins them."""

import libcst as cst
from libcst.metadata import (GlobalScope, PositionProvider, QualifiedNameSource,
                             ScopeProvider)

from graph_override.migrate import tables
from graph_override.migrate.analysis.common import (HELPER, Plan, code,
                                                    is_method_call)

__all__ = ["AnalyzerBase", "OUTPUT_ATTRIBUTES", "override_items"]

# What graph code reads of a tensor, and op_with_gradient's output differs
# in: an IdentityN makes it in graph mode, and eager tensors have none.
OUTPUT_ATTRIBUTES = frozenset({"op", "name", "graph"})


def override_items(with_node):
    """Indices of the ``<graph>.gradient_override_map(...)`` items of a With."""
    # (plain isinstance tests: importing libcst.matchers costs half a second)
    return [i for i, item in enumerate(with_node.items)
            if is_method_call(item.item, "gradient_override_map")]


class AnalyzerBase(cst.CSTVisitor):
    """Collects override scopes, registrations, assignments and imports."""

    # Qualified names are asked of the scope, only for the nodes that matter
    # (QualifiedNameProvider would resolve every name of the module).
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider)

    def __init__(self, keep_names, wrappers):
        super().__init__()
        self.keep_names = frozenset(keep_names)
        self.wrappers = dict(wrappers)  # name -> "file:line" of its definition
        self.plan = Plan()
        self.registrations = []
        self.override_withs = []      # outermost override scopes
        self.in_override = 0
        self.override_calls = set()   # gradient_override_map Call nodes in withs
        self.stray = []               # gradient_override_map not in a with item
        self.graph_names_done = set()  # graph Name nodes of converted scopes
        self.name_values_done = set()  # gradient-name Name nodes now references
        self.assign_lines = {}        # target Name of `name = value` -> its line
        self.blocks = [0]             # if/for/while/try/with depth per def body
        self.import_lines = {}        # Import(From) alone on a line -> the line
        self.named_calls = []         # calls of a plain name or attribute
        self.functions = []           # (def name, class name or None) being walked
        self.classes = [None]         # the class whose body is being walked
        self.enclosing = {}           # override With or stray Attribute -> def name
        self.attr_reads = {}          # x of every x.op / x.name / x.graph -> that Attribute

    # -- naming nodes -------------------------------------------------------
    def line(self, node):
        return self.get_metadata(PositionProvider, node).start.line

    def scope(self, node):
        try:
            return self.get_metadata(ScopeProvider, node)
        except KeyError:
            return None

    def qualified(self, node):
        scope = self.scope(node)
        if scope is None:
            return set()
        try:
            return set(scope.get_qualified_names_for(node))
        except Exception:  # pylint: disable=broad-except
            return set()  # a node libcst cannot name: treated as unknown

    def tf_names(self, node):
        out = set()
        for q in self.qualified(node):
            if q.source == QualifiedNameSource.IMPORT:
                name = tables.canonical(q.name)
                if name is not None:
                    out.add(name)
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
        stmt = self.assign_lines.get(getattr(a, "node", None))
        if stmt is None or not isinstance(stmt.body[0].value, (cst.Attribute, cst.Name)):
            return None
        for q in self.qualified(stmt.body[0].value):
            if q.source == QualifiedNameSource.IMPORT and \
                    q.name.split(".")[0] == "tensorflow":
                return ".".join([q.name] + parts[::-1])
        return None

    def builtin_name(self, node):
        for q in self.qualified(node):
            if q.source == QualifiedNameSource.BUILTIN:
                return q.name.replace("builtins.", "")
        return None

    def assignments(self, name_node):
        scope = self.scope(name_node)
        if scope is None:
            return frozenset()
        return frozenset(a for a in scope[name_node.value]
                         if name_node in {r.node for r in a.references})

    def is_graph_getter(self, node):
        """tf.get_default_graph() or an alias of it, called without arguments,
        or Keras 2's ``K.get_session().graph``."""
        if isinstance(node, cst.Attribute) and node.attr.value == "graph":
            node, getters = node.value, tables.SESSION_GETTERS
        else:
            getters = tables.GRAPH_GETTERS
        if not isinstance(node, cst.Call) or node.args:
            return False
        names = self.tf_names(node.func) | {
            q.name for q in self.qualified(node.func)
            if q.source == QualifiedNameSource.IMPORT}  # standalone keras
        return bool(set(getters) & names)

    # -- collection ---------------------------------------------------------
    def visit_Module(self, node):
        scope = self.scope(node)
        if scope is None or HELPER not in scope:
            return True
        for a in scope[HELPER]:
            imported = getattr(a, "node", None)
            if isinstance(imported, cst.ImportFrom) and imported.module is not None \
                    and code(imported.module).startswith("graph_override"):
                self.plan.need_import = False
                return True
        self.plan.helper = "_go_" + HELPER
        return True

    def _enter_block(self, node):
        self.blocks[-1] += 1

    def _leave_block(self, original_node):
        self.blocks[-1] -= 1

    visit_If = visit_For = visit_While = visit_Try = _enter_block
    leave_If = leave_For = leave_While = leave_Try = _leave_block

    def visit_ClassDef(self, node):
        self.blocks.append(0)
        self.classes.append(node.name.value)

    def leave_ClassDef(self, original_node):
        self.blocks.pop()
        self.classes.pop()

    def visit_FunctionDef(self, node):
        # A def under if/for/while/try/with may not run (the common
        # `if not GRAD_DEFINED:` or `try: ... except KeyError:` guards against
        # registering twice), so its function is never referenced directly.
        conditional = self.blocks[-1] > 0
        self.blocks.append(0)
        self.functions.append((node.name.value, self.classes[-1]))
        self.classes.append(None)
        self.collect_registrations(node, conditional)

    def leave_FunctionDef(self, original_node):
        self.blocks.pop()
        self.functions.pop()
        self.classes.pop()

    def visit_SimpleStatementLine(self, node):
        if len(node.body) == 1 and isinstance(node.body[0], (cst.Import, cst.ImportFrom)):
            self.import_lines[node.body[0]] = node
        if len(node.body) == 1 and isinstance(node.body[0], cst.Assign):
            targets = node.body[0].targets
            if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
                self.assign_lines[targets[0].target] = node

    def visit_With(self, node):
        self.blocks[-1] += 1
        idx = override_items(node)
        if not idx:
            return True
        for i in idx:
            self.override_calls.add(node.items[i].item)
        if self.in_override == 0:
            self.override_withs.append(node)
            if self.functions:
                self.enclosing[node] = self.functions[-1]
        self.in_override += 1
        return True

    def leave_With(self, original_node):
        self.blocks[-1] -= 1
        if override_items(original_node):
            self.in_override -= 1

    def visit_Attribute(self, node):
        if node.attr.value in OUTPUT_ATTRIBUTES:
            self.attr_reads[node.value] = node
        if node.attr.value == "gradient_override_map":
            self.stray.append(node)
            if self.functions:
                self.enclosing[node] = self.functions[-1]

    def in_wrapper(self, node):
        """'; f() is a wrapper ...' when `node` is in this file's wrapper f."""
        name, cls = self.enclosing.get(node, (None, None))
        if name in ("__init__", "__enter__") and cls in self.wrappers:
            name = cls  # a class-based context manager
        wrapper = self.wrappers.get(name)
        if wrapper is None or not wrapper.local:
            return ""
        return ("; %s() is a wrapper around gradient_override_map, and its calls "
                "are listed too" % name)

    def visit_Call(self, node):
        func = node.func
        name = func.value if isinstance(func, cst.Name) else (
            func.attr.value if isinstance(func, cst.Attribute) else None)
        if name is not None and name in self.wrappers:
            self.named_calls.append((name, node))

    def collect_registrations(self, node, conditional):
        """Overridden by the registrations idiom."""
        raise NotImplementedError
