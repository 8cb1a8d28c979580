"""The analysis pass of the source migration (`graph_override.migrate`).

`_Analyzer` reads one parsed module, with scope and position metadata, and
decides what to do: which ``with ... gradient_override_map(...)`` scopes can
go, which calls inside them become ``op_with_gradient(fn, gradient)(...)``,
which registrations, helper assignments and imports become dead, and which
scopes must stay (with the reasons). It changes nothing: the result is a
`Plan` that `graph_override.migrate.rewrite` applies.

A scope is converted all or nothing (an outermost scope together with the
scopes nested in it), and only when every call in it is understood: a known
TensorFlow function (see `graph_override.migrate.tables`), a harmless
builtin or method. Anything else leaves the scope as it is.
"""

import libcst as cst
from libcst import matchers as m
from libcst.metadata import (
    GlobalScope,
    PositionProvider,
    QualifiedNameSource,
    ScopeProvider,
)

from graph_override.migrate import tables

__all__ = ["HELPER", "HELPER_MODULE", "Plan", "analyze", "bound_name", "code"]

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
        self.helper = HELPER       # local name of op_with_gradient
        self.need_import = True    # False when the module imports it already


class _Registration:
    def __init__(self, func, decorator, key, arg, scope, line):
        self.func, self.decorator, self.key = func, decorator, key
        self.arg, self.scope, self.line = arg, scope, line
        self.uses = 0            # map values in this file that name it
        self.converted_uses = 0  # ... that became a direct reference
        self.conditional = False  # defined under if/for/while/try/with


def _string_value(node):
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_string_expression(node):
    """A side-effect free expression that builds a string (a name format)."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString,
                         cst.FormattedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, (cst.Modulo, cst.Add)):
        return _is_string_expression(node.left)
    if m.matches(node, m.Call(func=m.Attribute(attr=m.Name("format")))):
        return _is_string_expression(node.func.value)
    return False


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
                and _is_string_expression(node.func.value)):
            self.found = True


def _is_pure(node):
    finder = _Impure()
    node.visit(finder)
    return not finder.found


def _is_plain_reference(node):
    """A name or attribute chain (``g``, ``self.graph``): no side effects."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


class _BodyScanner(cst.CSTVisitor):
    """Collects what a scope body does: calls, operators, nested scopes."""

    def __init__(self, owner):
        super().__init__()
        self.owner = owner
        self.calls = []
        self.operators = []   # (node, operator name)
        self.nested_withs = []
        self.defs = []

    def visit_With(self, node):
        if self.owner.override_items(node):
            self.nested_withs.append(node)
            return False
        return True

    def visit_FunctionDef(self, node):
        self.defs.append(node)
        return False

    def visit_ClassDef(self, node):
        self.defs.append(node)
        return False

    def visit_Lambda(self, node):
        self.defs.append(node)
        return False

    def visit_Call(self, node):
        self.calls.append(node)

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


class _Analyzer(cst.CSTVisitor):
    # Qualified names are asked of the scope, only for the nodes that matter
    # (QualifiedNameProvider would resolve every name of the module).
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider)

    def __init__(self, keep_names):
        super().__init__()
        self.keep_names = frozenset(keep_names)
        self.plan = Plan()
        self.registrations = []
        self.override_withs = []      # outermost override scopes
        self.in_override = 0
        self.override_calls = set()   # gradient_override_map Call nodes in withs
        self.stray = []               # gradient_override_map not in a with item
        self.graph_names_done = set() # graph Name nodes of converted scopes
        self.name_values_done = set() # gradient-name Name nodes now references
        self.assign_lines = {}        # target Name of `name = value` -> its line
        self.blocks = [0]             # if/for/while/try/with depth per def body
        self.import_lines = {}        # Import(From) alone on a line -> the line

    # -- helpers ------------------------------------------------------------
    def line(self, node):
        return self.get_metadata(PositionProvider, node).start.line

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
        return out

    def builtin_name(self, node):
        for q in self.qualified(node):
            if q.source == QualifiedNameSource.BUILTIN:
                return q.name.replace("builtins.", "")
        return None

    def scope(self, node):
        try:
            return self.get_metadata(ScopeProvider, node)
        except KeyError:
            return None

    def override_items(self, with_node):
        return [i for i, item in enumerate(with_node.items)
                if m.matches(item.item, m.Call(
                    func=m.Attribute(attr=m.Name("gradient_override_map"))))]

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

    def leave_ClassDef(self, original_node):
        self.blocks.pop()

    def leave_FunctionDef(self, original_node):
        self.blocks.pop()

    def visit_FunctionDef(self, node):
        # A def under if/for/while/try/with may not run (the common
        # `if not GRAD_DEFINED:` or `try: ... except KeyError:` guards against
        # registering twice), so its function is never referenced directly.
        conditional = self.blocks[-1] > 0
        self.blocks.append(0)
        for dec in node.decorators:
            call = dec.decorator
            if not isinstance(call, cst.Call):
                continue
            if tables.REGISTER_GRADIENT not in self.tf_names(call.func):
                continue
            if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
                continue
            arg = call.args[0].value
            literal = _string_value(arg)
            if literal is not None:
                key = ("lit", literal)
            elif isinstance(arg, cst.Name):
                key = ("var", self._assignments(arg))
            else:
                continue
            reg = _Registration(node, dec, key, arg, self.scope(node), self.line(dec))
            reg.conditional = conditional
            self.registrations.append(reg)

    def visit_SimpleStatementLine(self, node):
        if len(node.body) == 1 and isinstance(node.body[0], (cst.Import, cst.ImportFrom)):
            self.import_lines[node.body[0]] = node
        if len(node.body) == 1 and isinstance(node.body[0], cst.Assign):
            targets = node.body[0].targets
            if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
                self.assign_lines[targets[0].target] = node

    def visit_With(self, node):
        self.blocks[-1] += 1
        idx = self.override_items(node)
        if not idx:
            return True
        for i in idx:
            self.override_calls.add(node.items[i].item)
        if self.in_override == 0:
            self.override_withs.append(node)
        self.in_override += 1
        return True

    def leave_With(self, original_node):
        self.blocks[-1] -= 1
        if self.override_items(original_node):
            self.in_override -= 1

    def visit_Attribute(self, node):
        if node.attr.value == "gradient_override_map":
            self.stray.append(node)

    def _assignments(self, name_node):
        scope = self.scope(name_node)
        if scope is None:
            return frozenset()
        return frozenset(a for a in scope[name_node.value]
                         if name_node in {r.node for r in a.references})

    # -- decisions ----------------------------------------------------------
    def leave_Module(self, original_node):
        for node in self.override_withs:
            self._decide(node)
        in_with = {call.func for call in self.override_calls}
        for attr in self.stray:
            if attr not in in_with:
                self.plan.untouched.append((
                    self.line(attr), "gradient_override_map is used outside a "
                    "'with' statement; convert it by hand with "
                    "graph_override.tf2.op_with_gradient"))
        self._dead_graph_names()
        self._dead_registrations()
        self._dead_imports()
        self.plan.untouched.sort()
        self.plan.changed.sort()

    def _decide(self, with_node):
        work = _Work()
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
            for line, reason in work.reasons:
                self.plan.untouched.append((line, reason))
            return
        for reg in work.direct:
            reg.converted_uses += 1
        self.plan.calls.update(work.calls)
        self.plan.changed.extend(work.changed)
        self.plan.with_items.update(work.with_items)
        self.graph_names_done.update(work.graph_names)
        self.name_values_done.update(work.name_values)

    def _analyze_with(self, node, outer_map, work):
        line = self.line(node)
        idx = self.override_items(node)
        mapping = dict(outer_map)
        for i in idx:
            item = node.items[i]
            call = item.item
            if item.asname is not None:
                work.reasons.append((line, "the override scope is bound with 'as "
                                     "...', so later code may use it"))
                return
            graph = call.func.value
            if not (_is_plain_reference(graph) or self._is_graph_getter(graph)):
                work.reasons.append((line, "the graph in '%s.gradient_override_map'"
                                     " is computed by a call this tool cannot "
                                     "follow" % code(graph)))
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
                             "(%s)" % ", ".join("%s: %s" % (k, code(v)) for k, v in
                                               sorted(mapping.items()))))
        scanner = _BodyScanner(self)
        # Items after the override item are evaluated inside the scope.
        for item in node.items[max(idx) + 1:]:
            item.item.visit(scanner)
        node.body.visit(scanner)
        self._check_body(scanner, mapping, work, line)
        for inner in scanner.nested_withs:
            self._analyze_with(inner, mapping, work)

    def _map_entries(self, call, line, work):
        if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
            work.reasons.append((line, "gradient_override_map is called with "
                                 "other than one mapping argument"))
            return None
        mapping = call.args[0].value
        if not isinstance(mapping, cst.Dict):
            work.reasons.append((line, "the override map '%s' is built at run "
                                 "time (not a dict literal), so its entries are "
                                 "unknown" % code(mapping)))
            return None
        entries = {}
        for el in mapping.elements:
            if not isinstance(el, cst.DictElement):
                work.reasons.append((line, "the override map unpacks '**%s' at "
                                     "run time" % code(el.value)))
                return None
            key = _string_value(el.key)
            if key is None:
                work.reasons.append((line, "override map key '%s' is not a "
                                     "string literal" % code(el.key)))
                return None
            grad = self._gradient_expression(el.value, line, work)
            if grad is None:
                return None
            entries[key] = grad
        return entries

    def _gradient_expression(self, value, line, work):
        literal = _string_value(value)
        if literal is not None:
            regs = [r for r in self.registrations if r.key == ("lit", literal)]
            return self._reference(regs, value, work) or value
        if isinstance(value, cst.Name):
            assignments = self._assignments(value)
            regs = [r for r in self.registrations
                    if r.key[0] == "var" and r.key[1] and r.key[1] == assignments]
            ref = self._reference(regs, value, work)
            if ref is not None:
                work.name_values.append(value)
                return ref
            if assignments and all(self._assigned_string(a) for a in assignments):
                return value
            work.reasons.append((line, "gradient name '%s' is not a string this "
                                 "tool can follow" % value.value))
            return None
        work.reasons.append((line, "gradient name '%s' is computed at run time"
                             % code(value)))
        return None

    def _reference(self, regs, use, work):
        """A Name for the function registered under regs, if `use` sees it."""
        work.uses.extend(regs)
        if len(regs) != 1:
            return None
        reg = regs[0]
        if reg.conditional:
            return None
        name = reg.func.name.value
        scope = self.scope(use)
        if scope is None:
            return None
        visible = [a for a in scope[name] if a.node is reg.func]
        if len(visible) != 1 or len(scope[name]) != 1:
            return None
        if reg.scope is scope and not isinstance(scope, GlobalScope) and \
                self.line(reg.func) > self.line(use):
            return None
        work.direct.append(reg)
        return cst.Name(name)

    def _check_body(self, scanner, mapping, work, line):
        mapped = set(mapping)
        for d in scanner.defs:
            work.reasons.append((self.line(d), "a function or class is defined "
                                 "inside the override scope; the ops it creates "
                                 "cannot be followed"))
        for node, op in scanner.operators:
            hit = tables.OPERATOR_OPS.get(op, set()) & mapped
            if hit:
                work.reasons.append((self.line(node), "the operator '%s' may create "
                                     "%s ops, which the map re-routes; rewrite it "
                                     "with an explicit tf call" % (
                                         code(node).strip()[:40],
                                         "/".join(sorted(hit)))))
        for call in scanner.calls:
            if call in self.override_calls:
                continue
            self._check_call(call, mapping, mapped, work)

    def _check_call(self, call, mapping, mapped, work):
        names = self.tf_names(call.func)
        line = self.line(call)
        if names:
            types = set()
            known = True
            for name in names:
                t = tables.op_types_of(name)
                if t is None:
                    known = False
                else:
                    types |= t
            hint = "".join("; " + tables.HINTS[n] for n in sorted(names)
                           if n in tables.HINTS)
            if not known:
                work.reasons.append((line, "%s is not in this tool's table of "
                                     "TensorFlow functions; it may create ops the "
                                     "map re-routes (%s)%s" % (
                                         code(call.func), ", ".join(sorted(mapped)),
                                         hint)))
                return
            hit = types & mapped
            if not hit:
                return
            if len(types) != 1:
                work.reasons.append((line, "%s creates %s depending on its "
                                     "arguments; convert it by hand%s" % (
                                         code(call.func),
                                         " or ".join(sorted(types)), hint)))
                return
            op_type = next(iter(types))
            grad = mapping[op_type]
            work.calls[call] = grad
            work.converted_types.add(op_type)
            work.changed.append((line, "%s(...) -> %s(%s, %s)(...) [%s]" % (
                code(call.func), HELPER, code(call.func), code(grad), op_type)))
            return
        builtin = self.builtin_name(call.func)
        if builtin is not None and builtin in tables.BUILTIN_OPS:
            hit = tables.BUILTIN_OPS[builtin] & mapped
            if hit:
                work.reasons.append((line, "%s() may create %s ops on tensors" % (
                    builtin, "/".join(sorted(hit)))))
            return
        if isinstance(call.func, cst.Attribute) and \
                call.func.attr.value in tables.SAFE_METHODS:
            return
        for q in self.qualified(call.func):
            if q.source == QualifiedNameSource.IMPORT and \
                    q.name.split(".")[0] in ("numpy", "math"):
                return
        work.reasons.append((line, "%s(...) is called inside the override scope "
                             "and may create ops the map re-routes (%s) out of "
                             "this tool's sight (it never follows calls into "
                             "helpers); convert the op inside the helper by hand"
                             % (code(call.func), ", ".join(sorted(mapped)))))

    # -- dead code after conversion ------------------------------------------
    def _assign_statement(self, assignment):
        """The ``name = value`` line behind an assignment, or None."""
        return self.assign_lines.get(getattr(assignment, "node", None))

    def _assigned_string(self, assignment):
        stmt = self._assign_statement(assignment)
        return stmt is not None and _is_string_expression(stmt.body[0].value)

    def _drop(self, stmt):
        if stmt not in self.plan.statements:
            self.plan.statements.add(stmt)
            self.plan.changed.append((self.line(stmt), "removed '%s', unused "
                                      "after the conversion" % code(stmt).strip()))

    def _dead_graph_names(self):
        """Drops ``g = tf.get_default_graph()`` once g has no other use."""
        seen = set()
        for name in self.graph_names_done:
            for a in self._assignments(name):
                if a in seen:
                    continue
                seen.add(a)
                refs = {r.node for r in a.references}
                if not refs or not refs <= self.graph_names_done:
                    continue
                stmt = self._assign_statement(a)
                if stmt is None:
                    continue
                value = stmt.body[0].value
                if self._is_graph_getter(value):
                    self._drop(stmt)

    def _is_graph_getter(self, node):
        """tf.get_default_graph() or an alias of it, called without arguments."""
        return (isinstance(node, cst.Call) and not node.args
                and bool(set(tables.GRAPH_GETTERS) & self.tf_names(node.func)))

    def _dead_registrations(self):
        for reg in self.registrations:
            if reg.uses == 0 or reg.converted_uses != reg.uses:
                continue
            if reg.key[0] == "lit":
                if reg.key[1] in self.keep_names:
                    continue
                self.plan.decorators.add(reg.decorator)
                self.plan.changed.append((reg.line, "removed the registration of "
                                          "%r: the function is passed to %s "
                                          "directly" % (reg.key[1], HELPER)))
                continue
            # The counter idiom: a fresh name per call, used by one map.
            refs = set()
            for a in reg.key[1]:
                refs |= {r.node for r in a.references}
            if not (refs - {reg.arg}) <= self.name_values_done:
                continue
            self.plan.decorators.add(reg.decorator)
            self.plan.changed.append((reg.line, "removed the registration under "
                                      "'%s': the function is passed to %s "
                                      "directly" % (reg.arg.value, HELPER)))
            for a in reg.key[1]:
                if self._assigned_string(a) and _is_pure(
                        self._assign_statement(a).body[0].value):
                    self._drop(self._assign_statement(a))


    def _dead_imports(self):
        """Drops imports used only by what the conversion removed (the
        ``from tensorflow.python.framework import ops`` of the counter idiom)."""
        removed = set()
        for node in list(self.plan.decorators) + list(self.plan.statements):
            removed.update(_names_in(node))
        seen = set()
        for name in removed:
            for a in self._assignments(name):
                if a in seen or not _imports_tensorflow(a.node):
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
                self._drop(line)
            elif bound <= dead:
                del self.plan.imports[node]  # shares its line: leave it
            else:
                self.plan.changed.append((self.line(node), "removed %s from '%s', "
                                          "unused after the conversion" % (
                                              ", ".join(sorted(dead)),
                                              code(node).strip())))


def _imports_tensorflow(node):
    """Only TensorFlow imports are dropped: a module's other names may be
    re-exported to code this tool does not see."""
    if isinstance(node, cst.ImportFrom):
        return node.module is not None and not node.relative and \
            code(node.module).split(".")[0] == "tensorflow"
    if isinstance(node, cst.Import):
        return all(code(a.name).split(".")[0] == "tensorflow" for a in node.names)
    return False


def _names_in(node):
    names = []

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name):
            names.append(name)

    node.visit(_Names())
    return names


def bound_name(alias):
    if alias.asname is not None:
        return alias.asname.name.value
    return code(alias.name)


class _Work:
    """The decisions for one outermost override scope (all or nothing)."""

    def __init__(self):
        self.reasons = []
        self.calls = {}
        self.changed = []
        self.with_items = {}
        self.graph_names = []
        self.name_values = []
        self.uses = []
        self.direct = []
        self.keys = []               # (line, op type) of every map entry
        self.converted_types = set()  # op types of the calls converted


_EMPTY_MODULE = cst.Module(body=[])


def code(node):
    return _EMPTY_MODULE.code_for_node(node)


def analyze(module, keep_names=()):
    """Runs the analysis pass; returns (Plan, MetadataWrapper)."""
    # The module is never mutated (libcst nodes are immutable), so the
    # wrapper may skip its defensive deep copy.
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    analyzer = _Analyzer(keep_names)
    wrapper.visit(analyzer)
    return analyzer.plan, wrapper
