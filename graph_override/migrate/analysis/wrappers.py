"""A project's own wrappers around ``gradient_override_map``, and their
call sites.

A wrapper is a function that hands the open map to its caller: it returns
the context manager (``def override(mapping): return
g.gradient_override_map(mapping)``), yields inside the map (a
``@contextlib.contextmanager``), or calls one of its parameters inside it,
so that the ops the map re-routes are created by its caller's code. A
function that opens and closes the map around its own ops is no wrapper.
This tool converts no wrapper, and lists every call site it finds (by name,
in the file of the wrapper and in the other files of the run): TF2 ignores
the map there too.

`find_wrappers` reads a source with Python's ast (a cheap scan of every
file of a run); `list_calls` and `in_wrapper` take the analysis `Context`
and add to its plan.
"""

import ast
import dataclasses

import libcst as cst

from graph_override.migrate.analysis.common import HELPER, code, string_value

__all__ = ["Wrapper", "find_wrappers", "in_wrapper", "list_calls"]


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """A function that opens gradient_override_map for its callers."""

    name: str
    filename: str
    line: int
    how: str            # what makes it a wrapper, in words
    method: bool = False  # defined in a class (called as obj.name(...))
    local: bool = False   # defined in the file being migrated


def _own_nodes(func):
    """The nodes of a function's body, not those of defs nested in it."""
    stack = list(func.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                      ast.Lambda, ast.ClassDef)):
                stack.append(child)


def _is_map_call(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "gradient_override_map")


def _parameters(func):
    args = func.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return params


def _callers_code_inside(with_node, params):
    """How a ``with`` of the map inside a function runs its caller's code
    while the map is open (a yield, a call of a parameter), or None: then
    the map opens and closes around the function's own ops only."""
    body = ast.Module(body=with_node.body, type_ignores=[])
    nodes = list(_own_nodes(body))
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
        return "it yields inside the map (a context manager)"
    called = {n.func.id for n in nodes if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)} & params
    if called:
        return "it calls its parameter %r inside the map" % sorted(called)[0]
    return None


def _how(func):
    """What makes `func` a wrapper, in words, or None.

    A function that opens the map in its own ``with`` and closes it again
    (tensorflow/compression's ``lower_bound``, keras-vis's
    ``modify_model_backprop``) re-routes only the ops it makes itself: its
    scope is analysed where it stands, and its callers are no concern.
    """
    params = _parameters(func)
    in_with = {}
    for node in _own_nodes(func):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if _is_map_call(item.context_expr):
                    in_with[item.context_expr] = node
    for node in _own_nodes(func):
        if not _is_map_call(node):
            continue
        scope = in_with.get(node)
        if scope is not None:
            how = _callers_code_inside(scope, params)
            if how is not None:
                return how
            continue
        used = {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        if used & params:
            return "it opens the map with its parameter %r" % sorted(used & params)[0]
        return "it hands the gradient_override_map context to its caller"
    return None


def find_wrappers(text, filename):
    """The wrappers a source defines: {name: Wrapper} (parsed, never run)."""
    if "gradient_override_map" not in text:
        return {}
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return {}
    found = {}
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    owner = {id(f): c for c in classes for f in c.body}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            how = _how(node)
            if how is None:
                continue
            cls = owner.get(id(node))
            if cls is not None and node.name in ("__init__", "__enter__"):
                # A class-based context manager: `with Guided(...):` opens it.
                found[cls.name] = Wrapper(cls.name, filename, cls.lineno,
                                          "its %s %s" % (node.name, how[3:]))
            else:
                found[node.name] = Wrapper(node.name, filename, node.lineno, how,
                                           method=cls is not None)
    return found


def _entries(call):
    """"Sign: 'A'" for a dict literal first argument, else ''."""
    if not call.args or not isinstance(call.args[0].value, cst.Dict):
        return ""
    parts = []
    for el in call.args[0].value.elements:
        if isinstance(el, cst.DictElement) and string_value(el.key) is not None:
            parts.append("%s: %s" % (string_value(el.key), code(el.value)))
    return " (%s)" % ", ".join(parts) if parts else ""


def in_wrapper(ctx, node):
    """'; f() is a wrapper ...' when `node` is in this file's wrapper f."""
    name, cls = ctx.facts.enclosing.get(node, (None, None))
    if name in ("__init__", "__enter__") and cls in ctx.wrappers:
        name = cls  # a class-based context manager
    wrapper = ctx.wrappers.get(name)
    if wrapper is None or not wrapper.local:
        return ""
    return ("; %s() is a wrapper around gradient_override_map, and its calls "
            "are listed too" % name)


def list_calls(ctx):
    """Lists every call of a wrapper (the walk's named calls, by name)."""
    for name, call in ctx.facts.named_calls:
        wrapper = ctx.wrappers[name]
        if isinstance(call.func, cst.Attribute) and \
                call.func.attr.value == "gradient_override_map":
            continue  # <graph>.gradient_override_map: the scopes' own idiom
        if not _calls_wrapper(ctx.names, call, wrapper):
            continue
        where = "%s:%d" % ("this file" if wrapper.local else wrapper.filename,
                           wrapper.line)
        ctx.plan.untouched.append((ctx.names.line(call), (
            "%s(...) calls %s (%s), which opens gradient_override_map for "
            "its caller: %s. TF2 ignores that map, and this tool converts no "
            "wrapper: wrap each op created in its scope of a re-routed "
            "type%s with %s(<tf function>, <gradient>) by hand, then stop "
            "using the wrapper") % (code(call.func), name, where, wrapper.how,
                                    _entries(call), HELPER)))


def _calls_wrapper(names, call, wrapper):
    func = call.func
    imported = any(q.endswith("." + wrapper.name) and not q.startswith("tensorflow.")
                   for q in names.imported(func))
    if isinstance(func, cst.Attribute):
        return wrapper.method or imported
    if wrapper.local:
        scope = names.scope(func)
        return scope is not None and any(
            isinstance(getattr(a, "node", None), (cst.FunctionDef, cst.ClassDef))
            for a in scope[func.value])
    return imported
