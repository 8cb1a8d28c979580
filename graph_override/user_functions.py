"""Gradient functions of the user's own, named ``MODULE:FUNCTION``.

``graph-override patch --map Relu=mygrads:guided`` imports ``mygrads`` as
``python -m mygrads`` would find it (the current directory first on
``sys.path``, for the import only), takes its attribute ``guided`` (a dotted
path such as ``Rules.guided`` is followed), checks that it is a gradient
function, ``f(op, grad)`` or ``f(op, *grads)``, and registers it with
TensorFlow under the name ``"mygrads:guided"``: the text the user typed.

That name is what the patched nodes carry as ``_gradient_op_type``, because
it says where the function lives: a process that runs the patched GraphDef
registers it the same way before importing the graph,
``graph_override.user_functions.register_function("mygrads:guided")``.
Nothing registers it on its own: a name found inside a model file is never
imported (a GraphDef from elsewhere must not choose what code runs); only a
name given on the command line or in a call is.

Example:
  >>> from graph_override import user_functions
  >>> user_functions.is_function_spec("mygrads:guided")
  True
  >>> user_functions.is_function_spec("flip_gradient:scale=0.5")
  False
"""

import difflib
import functools
import importlib
import inspect
import os
import re
import sys
import traceback

from graph_override import estimators, registry
from graph_override.errors import DuplicateGradientError, GradientFunctionError, RuleError

__all__ = ["import_function", "is_function_spec", "register_function", "registration_hint"]

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_SPEC = re.compile(r"(%s):(%s)\Z" % (_DOTTED, _DOTTED))


def is_function_spec(text):
    """True if `text` reads as ``MODULE:FUNCTION`` (dotted names on both
    sides) and MODULE is not a built-in estimator (``ste_sign:clip_value=1``
    gives parameters, and has an ``=``)."""
    match = _SPEC.match(text) if isinstance(text, str) else None
    return bool(match) and match.group(1) not in estimators.ESTIMATORS


def _split(spec):
    match = _SPEC.match(spec) if isinstance(spec, str) else None
    if match is None:
        raise RuleError("%r: expected MODULE:FUNCTION, e.g. mygrads:guided_relu "
                        "(dotted names: pkg.mod:Rules.guided)" % (spec,))
    module, attr = match.groups()
    if module in estimators.ESTIMATORS:
        raise RuleError(
            "%r: %r is a built-in estimator, so after ':' come its parameters "
            "(KEY=VALUE). A module of that name collides with it: name the "
            "module through its package (pkg.%s:%s) or rename it."
            % (spec, module, module, attr))
    return module, attr


def _where(error):
    """'file:line' of the innermost frame of `error`, for messages."""
    if isinstance(error, SyntaxError) and error.filename:
        return "%s:%s" % (error.filename, error.lineno)
    frames = traceback.extract_tb(error.__traceback__)
    return "%s:%d" % (frames[-1].filename, frames[-1].lineno) if frames else "?"


def _import(module, spec):
    """Imports `module` with the current directory first on sys.path (as
    ``python -m`` has it) during the import only."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise RuleError(
                "%r: cannot import module %r: no module %r on sys.path (the "
                "current directory %s, then %s). Run from the folder that holds "
                "%s.py (or the package), or add that folder to PYTHONPATH."
                % (spec, module, e.name, cwd, ", ".join(
                    p for p in sys.path[:4] if p not in ("", cwd)) or "nothing else",
                   e.name.replace(".", "/"))) from e
        raise RuleError("%r: importing module %r failed: it imports %r, which is "
                        "not installed (%s)" % (spec, module, e.name, _where(e))) from e
    except (Exception, SystemExit) as e:  # pylint: disable=broad-except
        raise RuleError("%r: importing module %r failed at %s: %s: %s. Fix the "
                        "module, then run again." % (
                            spec, module, _where(e), type(e).__name__, e)) from e
    finally:
        if added:
            sys.path.remove(cwd)


def _attribute(module_obj, module, attr, spec):
    obj = module_obj
    for i, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            where = ".".join([module] + attr.split(".")[:i])
            names = [n for n in dir(obj) if not n.startswith("__")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.6)
            hint = (" Did you mean %s?" % " or ".join(repr(c) for c in close) if close
                    else " It has: %s." % ", ".join(
                        n for n in names if not n.startswith("_"))[:300])
            raise RuleError("%r: %s (%s) has no attribute %r.%s" % (
                spec, where, getattr(obj, "__file__", type(obj).__name__), part, hint))
        obj = getattr(obj, part)
    return obj


def _check_gradient_function(fn, spec):
    """Refuses what cannot be a gradient function ``f(op, grad)``."""
    expected = ("a gradient function takes (op, grad), or (op, *grads) for an op "
                "with several outputs, and returns one gradient per input of the op")
    if not callable(fn):
        raise RuleError("%r is %s, not a function: %s" % (
            spec, type(fn).__name__, expected))
    if inspect.isclass(fn):
        raise RuleError("%r is a class, not a function: %s" % (spec, expected))
    name = getattr(fn, "__name__", None)
    if (getattr(fn, "__module__", "") or "").startswith("graph_override.") and (
            name in estimators.ESTIMATORS):
        raise RuleError("%r is the forward estimator %s(x, ...), not a gradient "
                        "function: to set its gradient, write the estimator's name "
                        "as the action (--map OP=%s)" % (spec, name, name))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one: nothing to check
        return
    try:
        signature.bind(None, None)
    except TypeError as e:
        raise RuleError("%r takes %s, so it cannot be called as f(op, grad) (%s): %s"
                        % (spec, signature, e, expected)) from None


def import_function(spec):
    """The gradient function that ``MODULE:FUNCTION`` names, checked.

    The module is imported as ``python -m`` would find it: the current
    directory first on sys.path (for the import only), then sys.path.

    Args:
      spec: ``"mygrads:guided"``, ``"pkg.mod:Rules.guided"``.

    Returns:
      The function.

    Raises:
      RuleError: the text is not MODULE:FUNCTION, the module is not
        importable (which, and where it was looked for) or fails while
        importing (where), the attribute is missing (close names), or it is
        not a gradient function (not callable, a class, an estimator's
        forward function, or a signature that does not take (op, grad)).
    """
    module, attr = _split(spec)
    fn = _attribute(_import(module, spec), module, attr, spec)
    _check_gradient_function(fn, spec)
    return fn


def _reporting(fn, spec):
    """`fn`, raising `GradientFunctionError` (naming `spec` and the node)
    for whatever it raises when TensorFlow calls it."""

    @functools.wraps(fn)
    def gradient(op, *grads):
        try:
            return fn(op, *grads)
        except GradientFunctionError:
            raise
        except Exception as e:  # pylint: disable=broad-except  # the user's code
            text = " ".join(str(e).split())
            raise GradientFunctionError(
                "gradient function %s raised %s%s at %s, for node %r (%s). Fix the "
                "function, then run again." % (
                    spec, type(e).__name__, ": " + text[:300] if text else "", _where(e),
                    getattr(op, "name", "?"), getattr(op, "type", "?"))) from e

    return gradient


def register_function(spec):
    """Imports ``MODULE:FUNCTION`` and registers it under that very name.

    Run it before importing a GraphDef that `graph-override patch` wrote
    with ``--map OP=MODULE:FUNCTION``: its nodes carry the name ``spec``.
    Registering again is a no-op.

    Example:
      >>> import os, tempfile
      >>> from graph_override import user_functions
      >>> before, _ = os.getcwd(), os.chdir(tempfile.mkdtemp())
      >>> with open("doc_grads.py", "w") as f:
      ...     _ = f.write("def passthrough(op, grad):\\n    return grad\\n")
      >>> user_functions.register_function("doc_grads:passthrough")
      'doc_grads:passthrough'
      >>> os.chdir(before)

    Returns:
      The registered name, `spec` (a `graph_override.RegisteredGradient`).

    What the function raises when TensorFlow calls it comes out as a
    `GradientFunctionError` naming `spec` and the node (the exception is its
    ``__cause__``).

    Raises:
      RuleError: see `import_function`; also when another function is
        registered under `spec` already.
    """
    fn = import_function(spec)
    try:
        return registry.register_gradient(_reporting(fn, spec), name=spec)
    except DuplicateGradientError as e:
        raise RuleError("%r: %s" % (spec, e.args[0])) from e


def registration_hint(names):
    """What to run before importing a graph whose unresolved gradient
    `names` include ``MODULE:FUNCTION`` names (as `graph-override patch
    --map OP=MODULE:FUNCTION` writes them); "" if none does.

    Example:
      >>> from graph_override import user_functions
      >>> user_functions.registration_hint(["CustomGradient-7", "mygrads:guided"])
      " Names of the form MODULE:FUNCTION are gradient functions of the user's own: register them first with graph_override.user_functions.register_function('mygrads:guided') (graph_override never imports a module because a graph names it)."
    """
    own = sorted(n for n in names if is_function_spec(n))
    if not own:
        return ""
    return (" Names of the form MODULE:FUNCTION are gradient functions of the user's "
            "own: register them first with %s (graph_override never imports a module "
            "because a graph names it)." % "; ".join(
                "graph_override.user_functions.register_function(%r)" % n for n in own))
