"""Registrations: ``@tf.RegisterGradient(name)`` functions, how an override
map's value refers to them, and which of them may go after the conversion.

A registration under a literal name stays, always: any code this tool does
not see may still use the name (another file, a later run over the rest of
a tree, a GraphDef that carries it in ``_gradient_op_type``), and TF2 keeps
``tf.RegisterGradient``. Only the counter idiom's registration goes (a name
made fresh per call, held by a local variable that nothing else reads).

Inputs: the `Context` (its names, the defs the walk found, the names other
files keep). Outputs: `Context.registrations` (`collect`), an `Entry` per
map value (`gradient_entry`), and the plan's kept and removed
registrations (`finish`).
"""

import libcst as cst
from libcst.metadata import GlobalScope

from graph_override.migrate import tables
from graph_override.migrate.analysis import dead_code
from graph_override.migrate.analysis.common import (HELPER, Registration, code,
                                                    is_pure, string_value)

__all__ = ["Entry", "collect", "finish", "gradient_entry", "graph_only_reason"]

GRAPH_ONLY = frozenset({"gradients", "hessians"})


class Entry:
    """One value of an override map: the gradient expression the converted
    calls get, and the registration it names in this file (or None)."""

    def __init__(self, expression, registration=None, direct=False):
        self.expression = expression
        self.registration = registration
        self.direct = direct  # the expression is the registered function itself


class _GraphOnlyCalls(cst.CSTVisitor):
    def __init__(self, names):
        super().__init__()
        self.names = names
        self.found = None  # (line, name) of the first graph-only call

    def visit_Call(self, node):
        if self.found is None and self.names.tf_names(node.func) & GRAPH_ONLY:
            self.found = (self.names.line(node), code(node.func))


def collect(ctx):
    """Fills ctx.registrations from the defs the walk found."""
    for func, conditional in ctx.facts.functions:
        for dec in func.decorators:
            reg = _registration(ctx.names, func, dec)
            if reg is not None:
                reg.conditional = conditional
                ctx.registrations.append(reg)


def _registration(names, func, dec):
    call = dec.decorator
    if not isinstance(call, cst.Call) or \
            tables.REGISTER_GRADIENT not in names.tf_names(call.func):
        return None
    if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
        return None
    arg = call.args[0].value
    literal = string_value(arg)
    if literal is not None:
        key = ("lit", literal)
    elif isinstance(arg, cst.Name):
        key = ("var", names.assignments(arg))
    else:
        return None
    reg = Registration(func, dec, key, arg, names.scope(func), names.line(dec))
    finder = _GraphOnlyCalls(names)
    func.body.visit(finder)
    reg.graph_only = finder.found
    return reg


def gradient_entry(ctx, value, line, work):
    """The Entry of one map value, or None (a reason is recorded in work)."""
    literal = string_value(value)
    if literal is not None:
        regs = [r for r in ctx.registrations if r.key == ("lit", literal)]
        return _entry(ctx.names, regs, value, value, work)
    if not isinstance(value, cst.Name):
        work.reasons.append((line, "gradient name '%s' is computed at run time"
                             "; write the name out in the map, or wrap the "
                             "ops by hand with %s" % (code(value), HELPER)))
        return None
    assignments = ctx.names.assignments(value)
    regs = [r for r in ctx.registrations
            if r.key[0] == "var" and r.key[1] and r.key[1] == assignments]
    entry = _entry(ctx.names, regs, value, None, work)
    if entry is not None:
        work.name_values.append(value)
        return entry
    if assignments and all(ctx.names.assigned_string(a) for a in assignments):
        return Entry(value, regs[0] if len(regs) == 1 else None)
    work.reasons.append((line, "gradient name '%s' is not a string this "
                         "tool can follow; write the name or the "
                         "function out in the map, or wrap the ops by "
                         "hand with %s" % (value.value, HELPER)))
    return None


def _entry(names, regs, use, fallback, work):
    """An Entry passing the function registered under regs when `use`
    sees it for sure, else the name (`fallback`; None: no Entry)."""
    work.uses.extend(regs)
    reg = regs[0] if len(regs) == 1 else None
    if reg is None or reg.conditional or not _visible(names, reg, use):
        return Entry(fallback, reg) if fallback is not None else None
    return Entry(cst.Name(reg.func.name.value), reg, direct=True)


def _visible(names, reg, use):
    """True if the registered function is, for sure, what its name means
    where `use` stands (one binding, defined before a local use)."""
    name = reg.func.name.value
    scope = names.scope(use)
    if scope is None:
        return False
    visible = [a for a in scope[name] if a.node is reg.func]
    if len(visible) != 1 or len(scope[name]) != 1:
        return False
    return not (reg.scope is scope and not isinstance(scope, GlobalScope)
                and names.line(reg.func) > names.line(use))


def graph_only_reason(entry):
    """Why a call given `entry` cannot be converted, or None."""
    reg = entry.registration
    if reg is None or reg.graph_only is None:
        return None
    line, name = reg.graph_only
    return ("the gradient function %s calls %s (line %d), which works only "
            "in graph mode, while %s also runs it eagerly; rewrite that part "
            "with tf.GradientTape (or compute the gradient by hand), then "
            "migrate again" % (reg.func.name.value, name, line, HELPER))


def finish(ctx):
    """Drops the counter idiom's registrations; reports the kept ones."""
    for reg in ctx.registrations:
        if reg.uses == 0 or reg.converted_uses != reg.uses:
            continue
        if reg.key[0] == "lit":
            _keep(ctx, reg)
        else:
            _drop_counter(ctx, reg)


def _drop_counter(ctx, reg):
    """The counter idiom: a fresh name per call, used by one map."""
    refs = set()
    for a in reg.key[1]:
        refs |= {r.node for r in a.references}
    others = refs - {reg.arg} - ctx.name_values_done
    if others:
        ctx.plan.kept.append((reg.line, "kept the registration under "
                              "'%s': the name is also used on line %d, "
                              "where code may look it up; remove it by "
                              "hand once nothing does" % (
                                  reg.arg.value,
                                  min(ctx.names.line(n) for n in others))))
        return
    ctx.plan.decorators.add(reg.decorator)
    ctx.plan.changed.append((reg.line, "removed the registration under "
                             "'%s': %s" % (reg.arg.value, (
                                 "the function is passed to %s directly"
                                 % HELPER) if reg.passed else (
                                 "the name is made per call and no "
                                 "converted call uses it"))))
    for a in reg.key[1]:
        if ctx.names.assigned_string(a) and is_pure(
                ctx.names.assign_statement(a).body[0].value):
            dead_code.drop(ctx, ctx.names.assign_statement(a))


def _keep(ctx, reg):
    name = reg.key[1]
    if not reg.passed:
        ctx.plan.kept.append((reg.line, "kept the registration of %r: the "
                              "converted calls resolve the name at run time "
                              "(the function may not be defined where they "
                              "run), so it must stay" % name))
        return
    if name in ctx.keep_names:
        why = "another file of this run names it in an override map"
    else:
        why = ("code this tool does not see may still use the name (another "
               "file, a later run, a GraphDef that carries it)")
    ctx.plan.kept.append((reg.line, "kept the registration of %r: the "
                          "converted calls take the function itself, but %s. "
                          "Remove it by hand once nothing uses the name"
                          % (name, why)))
