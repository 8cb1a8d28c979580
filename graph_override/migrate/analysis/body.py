"""The body of an override scope: what it does, which calls become
``op_with_gradient(...)``, and, for everything else that may create an op
the map re-routes, a reason that is true of its line and says what to do.

An override map re-routes every op of a mapped type that is created while
the scope is open, wherever the code creating it lives. So a scope whose
ops this tool cannot see created inside it (a ``yield`` that hands control
to the caller, a call into a helper, a graph imported into it) is never
converted: it is listed with its reason.

Inputs: the `Context`, the scope's `BodyScanner`, its map ({op type:
`registrations.Entry`}) and its `Work` record. Output: the calls to convert
and the reasons, in the `Work`.
"""

import libcst as cst

from graph_override.migrate import tables
from graph_override.migrate.analysis import boundary
from graph_override.migrate.analysis.common import HELPER, code, short
from graph_override.migrate.analysis.registrations import graph_only_reason

__all__ = ["check_body"]

PATCH_HINT = ("patch the graph instead with graph_override.frozen (e.g. "
              "`graph-override patch MODEL -o OUT --map Sign=ste_sign`, or "
              "frozen.to_function for TF2)")


def check_body(ctx, scanner, mapping, work):
    """Records, in `work`, the calls of the scope to convert and the
    reasons it cannot be converted."""
    mapped = set(mapping)
    _check_constructs(ctx, scanner, mapped, work)
    boundary.check_generators(ctx, scanner, work)
    constructors = {c.func for c in scanner.calls if isinstance(c.func, cst.Call)}
    opaque = []
    for call in scanner.calls:
        if call in ctx.facts.override_calls or call in constructors:
            continue
        _check_call(ctx, call, mapping, work, opaque)
    if opaque:
        work.reasons.append(_grouped(opaque))
    boundary.check_output_reads(
        ctx, scanner, [c for c in scanner.calls if c in work.calls], work)


def _check_constructs(ctx, scanner, mapped, work):
    """Suspensions, nested defs and operators that may make mapped ops."""
    line = ctx.names.line
    for node in scanner.suspends:
        what = "yields" if isinstance(node, cst.Yield) else "awaits"
        work.reasons.append((line(node), (
            "the override scope %s ('%s'): the code that runs meanwhile "
            "(the caller of a @contextlib.contextmanager, a generator's "
            "consumer) creates ops the map re-routes (%s) out of this "
            "tool's sight, and no call here creates them; wrap those ops "
            "where they are created with %s(<tf function>, <gradient>), "
            "then remove this scope by hand") % (
                what, short(node), ", ".join(sorted(mapped)), HELPER)))
    for d in scanner.defs:
        work.reasons.append((line(d), "a function or class is defined "
                             "inside the override scope; the ops it creates "
                             "when called cannot be followed; define it "
                             "outside the scope and migrate again"))
    for node, op in scanner.operators:
        hit = tables.OPERATOR_OPS.get(op, set()) & mapped
        if hit:
            work.reasons.append((line(node), "the operator '%s' may create "
                                 "%s ops, which the map re-routes; rewrite it "
                                 "with an explicit tf call" % (
                                     short(node), "/".join(sorted(hit)))))


def _check_call(ctx, call, mapping, work, opaque):
    """Converts `call`, lets it pass, or records why not (calls this tool
    cannot see into go to `opaque`, reported as one line)."""
    names = ctx.names
    mapped = set(mapping)
    if isinstance(call.func, cst.Call):  # Dense(10)(x): a built object called
        opaque.append((names.line(call), call.func, _object_reason(names, call, mapped)))
        return
    tf_names = names.tf_names(call.func)
    if tf_names:
        _check_tf_call(ctx, call, tf_names, mapping, work, opaque)
        return
    builtin = names.builtin_name(call.func)
    if builtin is not None and builtin in tables.BUILTIN_OPS:
        hit = tables.BUILTIN_OPS[builtin] & mapped
        if hit:
            work.reasons.append((names.line(call), "%s() may create %s ops on "
                                 "tensors; rewrite it with an explicit tf call"
                                 % (builtin, "/".join(sorted(hit)))))
        return
    if isinstance(call.func, cst.Attribute) and \
            call.func.attr.value in tables.SAFE_METHODS:
        return
    if any(n.split(".")[0] in ("numpy", "math") for n in names.imported(call.func)):
        return
    opaque.append((names.line(call), call, _unseen_reason(names, call, mapped)))


def _check_tf_call(ctx, call, tf_names, mapping, work, opaque):
    """A TensorFlow call: converted when it makes one op of a mapped type."""
    mapped = set(mapping)
    line = ctx.names.line(call)
    reason = _blocking_reason(call, tf_names, mapped)
    if reason is not None:
        work.reasons.append((line, reason))
        return
    types = _op_types(tf_names)
    if types is None:
        opaque.append((line, call, _unknown_reason(call, tf_names, mapped)))
        return
    if not types & mapped:
        return
    if len(types) != 1:
        work.reasons.append((line, "%s creates %s depending on its "
                             "arguments; convert it by hand%s" % (
                                 code(call.func), " or ".join(sorted(types)),
                                 _hints(tf_names))))
        return
    (op_type,) = types
    entry = mapping[op_type]
    reason = graph_only_reason(entry)
    if reason is not None:
        work.reasons.append((line, reason))
        return
    work.calls[call] = entry.expression
    work.converted_types.add(op_type)
    if entry.direct:
        work.direct[op_type] = entry.registration
    fn = code(call.func)
    work.changed.append((line, "%s(...) -> %s(%s, %s)(...) [%s]%s" % (
        fn, HELPER, fn, code(entry.expression), op_type, _renamed(call))))


def _op_types(tf_names):
    """The op types the TensorFlow names create, or None if one is unknown."""
    types = set()
    for name in tf_names:
        found = tables.op_types_of(name)
        if found is None:
            return None
        types |= found
    return types


def _hints(tf_names):
    return "".join("; " + tables.HINTS[n] for n in sorted(tf_names)
                   if n in tables.HINTS)


def _blocking_reason(call, tf_names, mapped):
    """Why a graph importer or gradient builder blocks the scope, or None."""
    fn = code(call.func)
    listed = ", ".join(sorted(mapped))
    if tf_names & tables.GRAPH_IMPORTERS:
        return ("%s(...) imports a graph inside the override scope, and its "
                "ops of the types the map re-routes (%s) take the map's "
                "gradients; this tool cannot see them: %s" % (fn, listed, PATCH_HINT))
    if tf_names & tables.GRADIENT_BUILDERS:
        return ("%s(...) builds gradient ops inside the override scope, and "
                "the map also re-routes those of its types (%s), a "
                "second-order effect that %s cannot express; move the call out "
                "of the scope (nothing changes unless its result is "
                "differentiated again) and migrate again" % (fn, listed, HELPER))
    return None


def _unknown_reason(call, tf_names, mapped):
    """A TensorFlow function the table does not know."""
    if any(n.startswith(tables.KERAS_LAYER_PREFIXES) for n in tf_names):
        return _keras_reason(call, mapped)
    fn = code(call.func)
    return ("%s is not in this tool's table of TensorFlow functions, so it "
            "may create ops the map re-routes (%s)%s; if it creates one such "
            "op and no other op, write the call as %s(%s, <gradient>)(...) by "
            "hand (%s takes a function of exactly one op); else wrap only that "
            "op by hand, or move the call out of the scope" % (
                fn, ", ".join(sorted(mapped)), _hints(tf_names), HELPER, fn, HELPER))


def _keras_reason(maker, mapped):
    return ("%s builds a Keras layer or model, whose call creates its ops out "
            "of this tool's sight, and those of the types the map re-routes "
            "(%s) take the map's gradients; build and call it outside the "
            "scope, or wrap such an op inside the layer with %s by hand"
            % (short(maker), ", ".join(sorted(mapped)), HELPER))


def _object_reason(names, call, mapped):
    """Why a call of what another call built (a Keras layer) is left."""
    maker = call.func
    if any(n.startswith(tables.KERAS_LAYER_PREFIXES)
           for n in names.tf_names(maker.func)):
        return _keras_reason(maker, mapped)
    return ("%s(...) calls the object that %s returns, which runs code this "
            "tool cannot see into, and the ops of the types the map "
            "re-routes (%s) that it creates take the map's gradients; wrap "
            "each such op where it is created with %s by hand, or move the "
            "call out of the scope if it creates none" % (
                short(maker), short(maker), ", ".join(sorted(mapped)), HELPER))


def _grouped(opaque):
    """One reason for every call of a scope this tool cannot see into."""
    line, _, reason = opaque[0]
    others = ["%s (line %d)" % (short(call, 30), at) for at, call, _ in opaque[1:]]
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


def _unseen_reason(names, call, mapped):
    """A true reason for a call this tool cannot see into."""
    fn = code(call.func)
    listed = ", ".join(sorted(mapped))
    effect = ("and the ops of the types the map re-routes (%s) that it "
              "creates take the map's gradients out of this tool's sight "
              "(it never follows calls)" % listed)
    if isinstance(call.func, cst.Attribute):
        return _method_reason(call, listed, effect)
    if names.builtin_name(call.func) is not None:
        return ("the builtin %s() runs code this tool cannot see into, %s; "
                "move the call out of the scope, or convert the ops it "
                "creates by hand with %s" % (fn, effect, HELPER))
    origin = _origin(names, call.func)
    if origin is not None:
        return ("%s(...) is %s, %s; wrap each such op inside it with %s by "
                "hand, or move the call out of the scope if it creates none"
                % (fn, origin, effect, HELPER))
    if isinstance(call.func, cst.Name) and not names.bound_here(call.func):
        return ("%s(...) calls a function that this file neither defines nor "
                "imports by name (a star import, or a global set elsewhere), "
                "%s; wrap each such op where it is defined with %s by hand"
                % (fn, effect, HELPER))
    return ("%s(...) calls a function passed in or computed at run time, %s; "
            "wrap each such op where that function is defined with %s by "
            "hand" % (fn, effect, HELPER))


def _method_reason(call, listed, effect):
    fn = code(call.func)
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


def _origin(names, func):
    """Where a called name comes from, in words, or None if unknown."""
    if not isinstance(func, cst.Name):
        return None
    scope = names.scope(func)
    if scope is None:
        return None
    for a in scope[func.value]:
        node = getattr(a, "node", None)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            kind = "a function" if isinstance(node, cst.FunctionDef) else "a class"
            return "%s defined in this file (line %d)" % (kind, names.line(node))
    for name in names.imported(func):
        return "imported from %s" % name.rsplit(".", 1)[0]
    return None
