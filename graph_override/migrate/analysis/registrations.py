"""Registrations: ``@tf.RegisterGradient(name)`` functions, how an override
map's value refers to them, and which of them may go after the conversion.

A registration under a literal name stays, always: any code this tool does
not see may still use the name (another file, a later run over the rest of
a tree, a GraphDef that carries it in ``_gradient_op_type``), and TF2 keeps
``tf.RegisterGradient``. Only the counter idiom's registration goes (a name
made fresh per call, held by a local variable that nothing else reads).
"""

import libcst as cst
from libcst.metadata import GlobalScope

from graph_override.migrate import tables
from graph_override.migrate.analysis.common import (HELPER, Registration, code,
                                                    is_pure, string_value)

__all__ = ["Entry", "RegistrationsMixin"]

GRAPH_ONLY = frozenset({"gradients", "hessians"})


class Entry:
    """One value of an override map: the gradient expression the converted
    calls get, and the registration it names in this file (or None)."""

    def __init__(self, expression, registration=None, direct=False):
        self.expression = expression
        self.registration = registration
        self.direct = direct  # the expression is the registered function itself


class _GraphOnlyCalls(cst.CSTVisitor):
    def __init__(self, analyzer):
        super().__init__()
        self.analyzer = analyzer
        self.found = None  # (line, name) of the first graph-only call

    def visit_Call(self, node):
        if self.found is None:
            hit = self.analyzer.tf_names(node.func) & GRAPH_ONLY
            if hit:
                self.found = (self.analyzer.line(node), code(node.func))


class RegistrationsMixin:
    """The registration idiom of `graph_override.migrate.analysis`."""

    def collect_registrations(self, node, conditional):
        for dec in node.decorators:
            call = dec.decorator
            if not isinstance(call, cst.Call):
                continue
            if tables.REGISTER_GRADIENT not in self.tf_names(call.func):
                continue
            if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
                continue
            arg = call.args[0].value
            literal = string_value(arg)
            if literal is not None:
                key = ("lit", literal)
            elif isinstance(arg, cst.Name):
                key = ("var", self.assignments(arg))
            else:
                continue
            reg = Registration(node, dec, key, arg, self.scope(node), self.line(dec))
            reg.conditional = conditional
            finder = _GraphOnlyCalls(self)
            node.body.visit(finder)
            reg.graph_only = finder.found
            self.registrations.append(reg)

    def gradient_entry(self, value, line, work):
        """The Entry of one map value, or None (a reason is recorded)."""
        literal = string_value(value)
        if literal is not None:
            regs = [r for r in self.registrations if r.key == ("lit", literal)]
            return self._entry(regs, value, value, work)
        if isinstance(value, cst.Name):
            assignments = self.assignments(value)
            regs = [r for r in self.registrations
                    if r.key[0] == "var" and r.key[1] and r.key[1] == assignments]
            entry = self._entry(regs, value, None, work)
            if entry is not None:
                work.name_values.append(value)
                return entry
            if assignments and all(self.assigned_string(a) for a in assignments):
                return Entry(value, regs[0] if len(regs) == 1 else None)
            work.reasons.append((line, "gradient name '%s' is not a string this "
                                 "tool can follow; write the name or the "
                                 "function out in the map, or wrap the ops by "
                                 "hand with %s" % (value.value, HELPER)))
            return None
        work.reasons.append((line, "gradient name '%s' is computed at run time"
                             "; write the name out in the map, or wrap the "
                             "ops by hand with %s" % (code(value), HELPER)))
        return None

    def _entry(self, regs, use, fallback, work):
        """An Entry passing the function registered under regs when `use`
        sees it for sure, else the name (`fallback`; None: no Entry)."""
        work.uses.extend(regs)
        reg = regs[0] if len(regs) == 1 else None
        if reg is None or reg.conditional:
            return Entry(fallback, reg) if fallback is not None else None
        name = reg.func.name.value
        scope = self.scope(use)
        visible = [] if scope is None else [a for a in scope[name] if a.node is reg.func]
        if len(visible) != 1 or len(scope[name]) != 1 or (
                reg.scope is scope and not isinstance(scope, GlobalScope)
                and self.line(reg.func) > self.line(use)):
            return Entry(fallback, reg) if fallback is not None else None
        return Entry(cst.Name(name), reg, direct=True)

    def graph_only_reason(self, entry):
        """Why a call given `entry` cannot be converted, or None."""
        reg = entry.registration
        if reg is None or reg.graph_only is None:
            return None
        line, name = reg.graph_only
        return ("the gradient function %s calls %s (line %d), which works only "
                "in graph mode, while %s also runs it eagerly; rewrite that part "
                "with tf.GradientTape (or compute the gradient by hand), then "
                "migrate again" % (reg.func.name.value, name, line, HELPER))

    def dead_registrations(self):
        """Drops the counter idiom's registrations; reports the kept ones."""
        for reg in self.registrations:
            if reg.uses == 0 or reg.converted_uses != reg.uses:
                continue
            if reg.key[0] == "lit":
                self._keep(reg)
                continue
            # The counter idiom: a fresh name per call, used by one map.
            refs = set()
            for a in reg.key[1]:
                refs |= {r.node for r in a.references}
            others = refs - {reg.arg} - self.name_values_done
            if others:
                self.plan.kept.append((reg.line, "kept the registration under "
                                       "'%s': the name is also used on line %d, "
                                       "where code may look it up; remove it by "
                                       "hand once nothing does" % (
                                           reg.arg.value,
                                           min(self.line(n) for n in others))))
                continue
            self.plan.decorators.add(reg.decorator)
            self.plan.changed.append((reg.line, "removed the registration under "
                                      "'%s': %s" % (reg.arg.value, (
                                          "the function is passed to %s directly"
                                          % HELPER) if reg.passed else (
                                          "the name is made per call and no "
                                          "converted call uses it"))))
            for a in reg.key[1]:
                if self.assigned_string(a) and is_pure(
                        self.assign_statement(a).body[0].value):
                    self.drop(self.assign_statement(a))

    def _keep(self, reg):
        name = reg.key[1]
        if not reg.passed:
            self.plan.kept.append((reg.line, "kept the registration of %r: the "
                                   "converted calls resolve the name at run time "
                                   "(the function may not be defined where they "
                                   "run), so it must stay" % name))
            return
        if name in self.keep_names:
            why = "another file of this run names it in an override map"
        else:
            why = ("code this tool does not see may still use the name (another "
                   "file, a later run, a GraphDef that carries it)")
        self.plan.kept.append((reg.line, "kept the registration of %r: the "
                               "converted calls take the function itself, but %s. "
                               "Remove it by hand once nothing uses the name"
                               % (name, why)))
