"""What the body of an override scope contains, found in one walk of it:
calls, operators, nested scopes, defs, suspensions, generators, names and
assignments. It records and decides nothing; `body`, `boundary` and
`scopes` read what it found.
"""

import libcst as cst

from graph_override.migrate.analysis.collect import override_items

__all__ = ["BodyScanner"]


class BodyScanner(cst.CSTVisitor):
    """Collects what a scope body does: calls, operators, nested scopes."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.operators = []   # (node, operator name)
        self.nested_withs = []
        self.defs = []
        self.suspends = []    # yield and await: the caller runs inside the scope
        self.generators = []  # generator expressions made in the body
        self.consumed = set()  # ... of those, the ones consumed where made
        self.names = []       # every Name read or written in the body
        self.assigned = {}    # Call -> the Name it is assigned to (y = call)

    def visit_With(self, node):
        if override_items(node):
            self.nested_withs.append(node)
            return False
        return True

    def _definition(self, node):
        self.defs.append(node)
        return False  # its body runs when it is called, not here

    visit_FunctionDef = visit_ClassDef = visit_Lambda = _definition

    def _suspension(self, node):
        self.suspends.append(node)

    visit_Yield = visit_Await = _suspension

    def visit_Call(self, node):
        self.calls.append(node)
        if len(node.args) == 1 and isinstance(node.args[0].value, cst.GeneratorExp) \
                and _consumes(node.func):
            self.consumed.add(node.args[0].value)

    def visit_For(self, node):
        if isinstance(node.iter, cst.GeneratorExp):
            self.consumed.add(node.iter)

    def visit_GeneratorExp(self, node):
        self.generators.append(node)

    def visit_Name(self, node):
        self.names.append(node)

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and isinstance(node.value, cst.Call):
            self.assigned[node.value] = node.targets[0].target

    def visit_BinaryOperation(self, node):
        self.operators.append((node, type(node.operator).__name__))

    def visit_AugAssign(self, node):
        name = type(node.operator).__name__.replace("Assign", "")
        self.operators.append((node, name))

    def visit_UnaryOperation(self, node):
        self.operators.append((node, type(node.operator).__name__))

    def visit_ComparisonTarget(self, node):
        self.operators.append((node, type(node.operator).__name__))

    def visit_Subscript(self, node):
        self.operators.append((node, "Subscript"))


# Builtins that run a generator through at once, where they are called.
_CONSUMERS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "sum",
                        "min", "max", "any", "all", "dict"})


def _consumes(func):
    if isinstance(func, cst.Name):
        return func.value in _CONSUMERS
    return isinstance(func, cst.Attribute) and func.attr.value == "join"
