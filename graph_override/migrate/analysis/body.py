"""The body of an override scope: what it does, which calls become
``op_with_gradient(...)``, and, for everything else that may create an op
the map re-routes, a reason that is true of its line and says what to do.

An override map re-routes every op of a mapped type that is created while
the scope is open, wherever the code creating it lives. So a scope whose
ops this tool cannot see created inside it (a ``yield`` that hands control
to the caller, a call into a helper, a graph imported into it) is never
converted: it is listed with its reason.
"""

import libcst as cst
from libcst.metadata import QualifiedNameSource

from graph_override.migrate import tables
from graph_override.migrate.analysis.base import override_items
from graph_override.migrate.analysis.common import HELPER, code

__all__ = ["BodyScanner", "BodyMixin"]

PATCH_HINT = ("patch the graph instead with graph_override.frozen (e.g. "
              "`graph-override patch MODEL -o OUT --map Sign=ste_sign`, or "
              "frozen.to_function for TF2)")


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

    def visit_FunctionDef(self, node):
        self.defs.append(node)
        return False

    def visit_ClassDef(self, node):
        self.defs.append(node)
        return False

    def visit_Lambda(self, node):
        self.defs.append(node)
        return False

    def visit_Yield(self, node):
        self.suspends.append(node)

    def visit_Await(self, node):
        self.suspends.append(node)

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


def _short(node, limit=40):
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _keras_reason(maker, mapped):
    return ("%s builds a Keras layer or model, whose call creates its ops out "
            "of this tool's sight, and those of the types the map re-routes "
            "(%s) take the map's gradients; build and call it outside the "
            "scope, or wrap such an op inside the layer with %s by hand"
            % (_short(maker), ", ".join(sorted(mapped)), HELPER))


def _grouped(opaque):
    """One reason for every call of a scope this tool cannot see into."""
    line, _, reason = opaque[0]
    others = ["%s (line %d)" % (_short(call, 30), at) for at, call, _ in opaque[1:]]
    if others:
        reason += "; so do %d more call(s) in this scope: %s" % (
            len(others), ", ".join(others))
    return line, reason


def _renamed(call):
    """What a converted call given name= no longer does, in words."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "name":
            return ("; in graph mode its output is no longer named by name=%s "
                    "(an IdentityN op makes it)" % code(arg.value))
    return ""


class BodyMixin:
    """The body-scanning idiom of `graph_override.migrate.analysis`."""

    def check_body(self, scanner, mapping, work):
        mapped = set(mapping)
        types = ", ".join(sorted(mapped))
        for node in scanner.suspends:
            what = "yields" if isinstance(node, cst.Yield) else "awaits"
            work.reasons.append((self.line(node), (
                "the override scope %s ('%s'): the code that runs meanwhile "
                "(the caller of a @contextlib.contextmanager, a generator's "
                "consumer) creates ops the map re-routes (%s) out of this "
                "tool's sight, and no call here creates them; wrap those ops "
                "where they are created with %s(<tf function>, <gradient>), "
                "then remove this scope by hand") % (what, _short(node), types,
                                                      HELPER)))
        for d in scanner.defs:
            work.reasons.append((self.line(d), "a function or class is defined "
                                 "inside the override scope; the ops it creates "
                                 "when called cannot be followed; define it "
                                 "outside the scope and migrate again"))
        for node, op in scanner.operators:
            hit = tables.OPERATOR_OPS.get(op, set()) & mapped
            if hit:
                work.reasons.append((self.line(node), "the operator '%s' may create "
                                     "%s ops, which the map re-routes; rewrite it "
                                     "with an explicit tf call" % (
                                         _short(node), "/".join(sorted(hit)))))
        self.check_generators(scanner, work)
        constructors = {c.func for c in scanner.calls if isinstance(c.func, cst.Call)}
        opaque = []
        for call in scanner.calls:
            if call in self.override_calls or call in constructors:
                continue
            self._check_call(call, mapping, work, opaque)
        if opaque:
            work.reasons.append(_grouped(opaque))
        self.check_output_reads(
            scanner, [c for c in scanner.calls if c in work.calls], work)

    def _check_call(self, call, mapping, work, opaque):
        """Converts `call`, lets it pass, or records why not (calls this
        tool cannot see into go to `opaque`, reported as one line)."""
        mapped = set(mapping)
        if isinstance(call.func, cst.Call):  # Dense(10)(x): a built object called
            opaque.append((self.line(call), call.func, self._object_reason(call, mapped)))
            return
        names = self.tf_names(call.func)
        if names:
            self._check_tf_call(call, names, mapping, work, opaque)
            return
        line = self.line(call)
        builtin = self.builtin_name(call.func)
        if builtin is not None and builtin in tables.BUILTIN_OPS:
            hit = tables.BUILTIN_OPS[builtin] & mapped
            if hit:
                work.reasons.append((line, "%s() may create %s ops on tensors; "
                                     "rewrite it with an explicit tf call" % (
                                         builtin, "/".join(sorted(hit)))))
            return
        if isinstance(call.func, cst.Attribute) and \
                call.func.attr.value in tables.SAFE_METHODS:
            return
        for q in self.qualified(call.func):
            if q.source == QualifiedNameSource.IMPORT and \
                    q.name.split(".")[0] in ("numpy", "math"):
                return
        opaque.append((line, call, self._unseen_reason(call, mapped)))

    def _object_reason(self, call, mapped):
        """Why a call of what another call built (a Keras layer) is left."""
        maker = call.func
        if any(n.startswith(tables.KERAS_LAYER_PREFIXES)
               for n in self.tf_names(maker.func)):
            return _keras_reason(maker, mapped)
        return ("%s(...) calls the object that %s returns, which runs code this "
                "tool cannot see into, and the ops of the types the map "
                "re-routes (%s) that it creates take the map's gradients; wrap "
                "each such op where it is created with %s by hand, or move the "
                "call out of the scope if it creates none" % (
                    _short(maker), _short(maker), ", ".join(sorted(mapped)), HELPER))

    def _check_tf_call(self, call, names, mapping, work, opaque):
        mapped = set(mapping)
        line = self.line(call)
        fn = code(call.func)
        listed = ", ".join(sorted(mapped))
        if names & tables.GRAPH_IMPORTERS:
            work.reasons.append((line, "%s(...) imports a graph inside the override "
                                 "scope, and its ops of the types the map "
                                 "re-routes (%s) take the map's gradients; this "
                                 "tool cannot see them: %s" % (fn, listed, PATCH_HINT)))
            return
        if names & tables.GRADIENT_BUILDERS:
            work.reasons.append((line, "%s(...) builds gradient ops inside the "
                                 "override scope, and the map also re-routes "
                                 "those of its types (%s), a second-order effect "
                                 "that %s cannot express; move the call out of "
                                 "the scope (nothing changes unless its result is "
                                 "differentiated again) and migrate again"
                                 % (fn, listed, HELPER)))
            return
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
            if any(n.startswith(tables.KERAS_LAYER_PREFIXES) for n in names):
                opaque.append((line, call, _keras_reason(call, mapped)))
                return
            opaque.append((line, call, (
                "%s is not in this tool's table of TensorFlow functions, so it "
                "may create ops the map re-routes (%s)%s; if it creates exactly "
                "one such op, write the call as %s(%s, <gradient>)(...) by hand, "
                "else move it out of the scope" % (fn, listed, hint, HELPER, fn))))
            return
        hit = types & mapped
        if not hit:
            return
        if len(types) != 1:
            work.reasons.append((line, "%s creates %s depending on its "
                                 "arguments; convert it by hand%s" % (
                                     fn, " or ".join(sorted(types)), hint)))
            return
        op_type = next(iter(types))
        entry = mapping[op_type]
        reason = self.graph_only_reason(entry)
        if reason is not None:
            work.reasons.append((line, reason))
            return
        work.calls[call] = entry.expression
        work.converted_types.add(op_type)
        if entry.direct:
            work.direct[op_type] = entry.registration
        work.changed.append((line, "%s(...) -> %s(%s, %s)(...) [%s]%s" % (
            fn, HELPER, fn, code(entry.expression), op_type, _renamed(call))))

    def _unseen_reason(self, call, mapped):
        """A true reason for a call this tool cannot see into."""
        fn = code(call.func)
        listed = ", ".join(sorted(mapped))
        effect = ("and the ops of the types the map re-routes (%s) that it "
                  "creates take the map's gradients out of this tool's sight "
                  "(it never follows calls)" % listed)
        if isinstance(call.func, cst.Attribute):
            if call.func.attr.value in tables.RUNNING_METHODS:
                return ("%s(...) is a method call this tool cannot see into; if "
                        "it only runs the graph (Session.run, Saver.restore, "
                        "Tensor.eval) it creates no op, so move it out of the "
                        "override scope and migrate again; otherwise wrap each "
                        "op of a re-routed type (%s) that it creates with %s by "
                        "hand" % (fn, listed, HELPER))
            return ("%s(...) is a method call this tool cannot see into, %s; "
                    "wrap each such op in the method's code with %s by hand, or "
                    "move the call out of the scope if it creates none"
                    % (fn, effect, HELPER))
        if self.builtin_name(call.func) is not None:
            return ("the builtin %s() runs code this tool cannot see into, %s; "
                    "move the call out of the scope, or convert the ops it "
                    "creates by hand with %s" % (fn, effect, HELPER))
        origin = self._origin(call.func)
        if origin is not None:
            return ("%s(...) is %s, %s; wrap each such op inside it with %s by "
                    "hand, or move the call out of the scope if it creates none"
                    % (fn, origin, effect, HELPER))
        if isinstance(call.func, cst.Name) and not self._bound_here(call.func):
            return ("%s(...) calls a function that this file neither defines nor "
                    "imports by name (a star import, or a global set elsewhere), "
                    "%s; wrap each such op where it is defined with %s by hand"
                    % (fn, effect, HELPER))
        return ("%s(...) calls a function passed in or computed at run time, %s; "
                "wrap each such op where that function is defined with %s by "
                "hand" % (fn, effect, HELPER))

    def _bound_here(self, name):
        scope = self.scope(name)
        return scope is not None and bool(scope[name.value])

    def _origin(self, func):
        """Where a called name comes from, in words, or None if unknown."""
        if not isinstance(func, cst.Name):
            return None
        scope = self.scope(func)
        if scope is None:
            return None
        for a in scope[func.value]:
            node = getattr(a, "node", None)
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                kind = "a function" if isinstance(node, cst.FunctionDef) else "a class"
                return "%s defined in this file (line %d)" % (kind, self.line(node))
        for q in self.qualified(func):
            if q.source == QualifiedNameSource.IMPORT:
                return "imported from %s" % q.name.rsplit(".", 1)[0]
        return None
