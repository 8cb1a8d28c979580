"""The one walk over a module: it records what the idioms need (`Facts`)
and decides nothing.

Its inputs are the module and the names of the known wrappers; its output
is a `graph_override.migrate.analysis.context.Facts`. It needs no libcst
metadata: positions and scopes are looked up afterwards, through `Names`.
"""

import libcst as cst

from graph_override.migrate.analysis.common import is_method_call
from graph_override.migrate.analysis.context import Facts

__all__ = ["OUTPUT_ATTRIBUTES", "collect", "override_items"]

# What graph code reads of a tensor, and op_with_gradient's output differs
# in: an IdentityN makes it in graph mode, and eager tensors have none.
OUTPUT_ATTRIBUTES = frozenset({"op", "name", "graph"})


def override_items(with_node):
    """Indices of the ``<graph>.gradient_override_map(...)`` items of a With."""
    # (plain isinstance tests: importing libcst.matchers costs half a second)
    return [i for i, item in enumerate(with_node.items)
            if is_method_call(item.item, "gradient_override_map")]


def collect(module, wrapper_names=()):
    """Walks `module` once; returns its `Facts`.

    Args:
      module: a parsed libcst Module (the MetadataWrapper's, so that node
        identities match the metadata).
      wrapper_names: names of the wrappers around the map this run knows;
        the calls of those names are recorded.
    """
    collector = _Collector(frozenset(wrapper_names))
    module.visit(collector)
    return collector.facts


class _Collector(cst.CSTVisitor):

    def __init__(self, wrapper_names):
        super().__init__()
        self.facts = Facts()
        self._wrapper_names = wrapper_names
        self._in_override = 0
        self._blocks = [0]         # if/for/while/try/with depth per def body
        self._functions = []       # (def name, class name or None) being walked
        self._classes = [None]     # the class whose body is being walked
        self._bodies = []          # the Module and IndentedBlocks being walked

    def _enter_block(self, node):
        self._blocks[-1] += 1

    def _leave_block(self, original_node):
        self._blocks[-1] -= 1

    visit_If = visit_For = visit_While = visit_Try = _enter_block
    leave_If = leave_For = leave_While = leave_Try = _leave_block

    def _enter_body(self, node):
        self._bodies.append(node)

    def _leave_body(self, original_node):
        self._bodies.pop()

    visit_Module = visit_IndentedBlock = _enter_body
    leave_Module = leave_IndentedBlock = _leave_body

    def visit_ClassDef(self, node):
        self._blocks.append(0)
        self._classes.append(node.name.value)

    def leave_ClassDef(self, original_node):
        self._blocks.pop()
        self._classes.pop()

    def visit_FunctionDef(self, node):
        self.facts.functions.append((node, self._blocks[-1] > 0))
        self._blocks.append(0)
        self._functions.append((node.name.value, self._classes[-1]))
        self._classes.append(None)

    def leave_FunctionDef(self, original_node):
        self._blocks.pop()
        self._functions.pop()
        self._classes.pop()

    def visit_SimpleStatementLine(self, node):
        if len(node.body) != 1:
            return
        stmt = node.body[0]
        if isinstance(stmt, (cst.Import, cst.ImportFrom)):
            self.facts.import_lines[stmt] = node
        if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0].target, cst.Name):
            self.facts.assign_lines[stmt.targets[0].target] = node
            self.facts.assign_blocks[stmt.targets[0].target] = self._bodies[-1]

    def visit_With(self, node):
        self._blocks[-1] += 1
        idx = override_items(node)
        if not idx:
            return
        self.facts.override_calls.update(node.items[i].item for i in idx)
        if self._in_override == 0:
            self.facts.override_withs.append(node)
            if self._functions:
                self.facts.enclosing[node] = self._functions[-1]
        self._in_override += 1

    def leave_With(self, original_node):
        self._blocks[-1] -= 1
        if override_items(original_node):
            self._in_override -= 1

    def visit_Attribute(self, node):
        if node.attr.value in OUTPUT_ATTRIBUTES:
            self.facts.attr_reads[node.value] = node
        if node.attr.value == "gradient_override_map":
            self.facts.stray.append(node)
            if self._functions:
                self.facts.enclosing[node] = self._functions[-1]

    def visit_Call(self, node):
        func = node.func
        name = func.value if isinstance(func, cst.Name) else (
            func.attr.value if isinstance(func, cst.Attribute) else None)
        if name is not None and name in self._wrapper_names:
            self.facts.named_calls.append((name, node))

