"""What every idiom of the analysis shares: the plan, the per-scope work
record, and small pure functions on libcst nodes."""

import libcst as cst

__all__ = [
    "HELPER",
    "HELPER_MODULE",
    "Plan",
    "Registration",
    "Work",
    "bound_name",
    "code",
    "imports_tensorflow",
    "is_method_call",
    "is_plain_reference",
    "is_pure",
    "is_string_expression",
    "names_in",
    "short",
    "string_value",
]

HELPER = "op_with_gradient"
HELPER_MODULE = "graph_override.tf2"


class Plan:
    """What the rewriter does, and what the report says."""

    def __init__(self):
        self.calls = {}            # Call node -> gradient expression
        self.with_items = {}       # With node -> set of item indices to drop
        self.decorators = set()    # Decorator nodes to drop
        self.statements = set()    # SimpleStatementLine nodes to drop
        self.imports = {}          # Import(From) node -> bound names to drop
        self.changed = []          # (line, message)
        self.untouched = []        # (line, reason)
        self.kept = []             # (line, message): left on purpose, not a site
        self.helper = HELPER       # local name of op_with_gradient
        self.need_import = True    # False when the module imports it already


class Registration:
    """One ``@RegisterGradient(...)`` decorated function of the module."""

    def __init__(self, func, decorator, key, arg, scope, line):
        self.func, self.decorator, self.key = func, decorator, key
        self.arg, self.scope, self.line = arg, scope, line
        self.uses = 0            # map values in this file that name it
        self.converted_uses = 0  # ... in scopes that were converted
        self.passed = 0          # converted calls given the function itself
        self.conditional = False  # defined under if/for/while/try/with
        self.graph_only = None   # (line, name) of a graph-only call in its body


class Work:
    """The decisions for one outermost override scope (all or nothing)."""

    def __init__(self):
        self.reasons = []
        self.calls = {}
        self.changed = []
        self.with_items = {}
        self.graph_names = []
        self.name_values = []
        self.uses = []
        self.direct = {}             # op type -> Registration passed directly
        self.keys = []               # (line, op type) of every map entry
        self.converted_types = set()  # op types of the calls converted


def string_value(node):
    """The value of a plain string literal, else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_string_expression(node):
    """A side-effect free expression that builds a string (a name format)."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString,
                         cst.FormattedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, (cst.Modulo, cst.Add)):
        return is_string_expression(node.left)
    if is_method_call(node, "format"):
        return is_string_expression(node.func.value)
    return False


def is_method_call(node, name):
    """``<anything>.name(...)``."""
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == name)


_PURE_CALLS = frozenset({"str", "int", "repr", "id", "len", "uuid.uuid4",
                         "uuid.uuid1"})


class _Impure(cst.CSTVisitor):
    """Finds calls that may have effects a program can observe (a counter's
    next(), np.random draws): an assignment holding one is never removed."""

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_Call(self, node):
        name = code(node.func)
        if name not in _PURE_CALLS and not (
                isinstance(node.func, cst.Attribute) and node.func.attr.value == "format"
                and is_string_expression(node.func.value)):
            self.found = True


def is_pure(node):
    """True if evaluating `node` calls nothing with observable effects."""
    finder = _Impure()
    node.visit(finder)
    return not finder.found


def is_plain_reference(node):
    """A name or attribute chain (``g``, ``self.graph``): no side effects."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def imports_tensorflow(node):
    """Only TensorFlow imports are dropped: a module's other names may be
    re-exported to code this tool does not see."""
    if isinstance(node, cst.ImportFrom):
        return node.module is not None and not node.relative and \
            code(node.module).split(".")[0] == "tensorflow"
    if isinstance(node, cst.Import):
        return all(code(a.name).split(".")[0] == "tensorflow" for a in node.names)
    return False


def names_in(node):
    """Every Name node under `node`."""
    names = []

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name):
            names.append(name)

    node.visit(_Names())
    return names


def bound_name(alias):
    """The name an import alias binds (``import a.b`` binds ``a.b``)."""
    if alias.asname is not None:
        return alias.asname.name.value
    return code(alias.name)


def short(node, limit=40):
    """The node's source on one line, cut to `limit` characters."""
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


_EMPTY_MODULE = cst.Module(body=[])


def code(node):
    """The source text of a node."""
    return _EMPTY_MODULE.code_for_node(node)
