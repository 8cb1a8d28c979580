"""A safe front to TensorFlow's gradient registry.

`tf.RegisterGradient` raises ``KeyError`` when a name is registered twice, so
re-importing a module or re-running a notebook cell breaks, and code that
dodges this with a fresh name per call (``"FlipGradient%d" % n``) fills the
registry with one entry per call. `register_gradient` is idempotent for the
same function, refuses a taken name for a different one with an error that
says where both were defined, and wraps every function so that a wrong
result is reported by `GradientContractError` naming the op.

Names of graph_override's built-in estimators describe themselves, for
example ``graph_override.ste_sign(clip_value=1.0)``: `resolve` parses such a
name found in a GraphDef and registers it on demand, in any process.
"""

import difflib
import functools
import inspect
import threading

from graph_override import estimators
from graph_override._tensorflow import compat
from graph_override.builtin_names import BUILTIN_PREFIX, builtin_name, example_name, parse_setting
from graph_override._tensorflow.contract import check_gradients
from graph_override.errors import DuplicateGradientError, UnknownGradientError

__all__ = [
    "RegisteredGradient",
    "estimator_suggestions",
    "is_resolvable",
    "register_gradient",
    "registered_name",
    "registry_size",
    "resolve",
    "resolve_estimator",
    "resolve_function",
]


_lock = threading.RLock()
# name -> (original function, where it was defined); only names registered
# through this module. TensorFlow's registry holds the checked wrappers.
_owned = {}


class RegisteredGradient(str):
    """The name a gradient function was registered under.

    It is a `str`, so it can be used wherever TensorFlow expects a gradient
    name (``gradient_override_map`` values, ``_gradient_op_type`` attrs), and
    it stays callable, so a decorated function can still be called directly.
    """

    function = None

    def __new__(cls, name, function):
        self = super().__new__(cls, name)
        self.function = function
        return self

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def __reduce__(self):
        return (str, (str(self),))


def _where(fn):
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    return "%s:%d" % (code.co_filename, code.co_firstlineno)


_SIMPLE = (int, float, complex, str, bytes, bool, type(None))


def _same_value(a, b):
    if a is b:
        return True
    if isinstance(a, _SIMPLE) and isinstance(b, _SIMPLE):
        return type(a) is type(b) and a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_same_value, a, b))
    return False


def _same_function(a, b):
    """True for the same function object, or a re-created one (a re-imported
    module, a re-run notebook cell): same name, code, defaults and closure."""
    if a is b:
        return True
    if getattr(a, "__module__", None) != getattr(b, "__module__", None):
        return False
    if getattr(a, "__qualname__", None) != getattr(b, "__qualname__", None):
        return False
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if ca is None or cb is None or ca != cb:
        return False
    if not _same_value(a.__defaults__ or (), b.__defaults__ or ()):
        return False
    cells_a = tuple(c.cell_contents for c in (a.__closure__ or ()))
    cells_b = tuple(c.cell_contents for c in (b.__closure__ or ()))
    return len(cells_a) == len(cells_b) and all(
        x is y or _same_value(x, y) or (callable(x) and callable(y)
                                        and _same_function(x, y))
        for x, y in zip(cells_a, cells_b))


def _checked(fn, name):
    """Wraps `fn` so that what it returns is checked against the op."""

    @functools.wraps(fn)
    def checked_gradient(op, *grads):
        result = fn(op, *grads)
        return check_gradients(
            result, op_name=op.name, op_type=op.type, inputs=list(op.inputs),
            gradient_name=name, function=fn)

    return checked_gradient


def _default_name(fn):
    module = getattr(fn, "__module__", None) or "__main__"
    qualname = getattr(fn, "__qualname__", None) or getattr(
        fn, "__name__", None) or type(fn).__name__
    return "%s.%s" % (module, qualname)


def _register_locked(fn, name, explicit):
    """Registers fn under name (or a free variant of it). Caller holds _lock."""
    candidate, n = name, 1
    while True:
        owned = _owned.get(candidate)
        if owned is not None:
            if _same_function(owned[0], fn):
                return RegisteredGradient(candidate, owned[0])
            if explicit:
                raise DuplicateGradientError(
                    "gradient name %r is already registered for %s (defined at "
                    "%s); refusing to register %s (defined at %s) under it. Pick "
                    "another name, or pass the same function." % (
                        candidate, _default_name(owned[0]), owned[1],
                        _default_name(fn), _where(fn)))
        elif compat.has_gradient_entry(candidate):
            if explicit:
                raise DuplicateGradientError(
                    "gradient name %r is already taken in TensorFlow's gradient "
                    "registry (registered at %s, not through graph_override); "
                    "refusing to register %s (defined at %s) under it. Pick "
                    "another name." % (
                        candidate, compat.gradient_registry_location(candidate),
                        _default_name(fn), _where(fn)))
        else:
            compat.register_gradient_function(candidate, _checked(fn, candidate))
            _owned[candidate] = (fn, _where(fn))
            return RegisteredGradient(candidate, fn)
        # An implicit name taken by another function: use a numbered variant.
        n += 1
        candidate = "%s#%d" % (name, n)


def register_gradient(fn=None, *, name=None):
    """Registers a gradient function with TensorFlow, safely.

    Works as a call, ``register_gradient(fn)``, or a decorator,
    ``@register_gradient`` / ``@register_gradient(name="MySign")``. The
    function has TensorFlow's signature ``fn(op, *output_grads)`` and returns
    one gradient per op input.

    Registering the same function again (also a re-created one: a re-imported
    module, a re-run notebook cell) is a no-op that returns the same name, so
    the registry grows with distinct functions, not with calls.

    Example:
      >>> import graph_override as go
      >>> def sign_ste(op, grad):
      ...     return grad
      >>> name = go.register_gradient(sign_ste, name="doc.SignSTE")
      >>> name == go.register_gradient(sign_ste, name="doc.SignSTE")
      True

    Args:
      fn: the gradient function.
      name: the registry name. Default: ``module.qualname`` of `fn` (with a
        ``#N`` suffix if another function already holds that name).

    Returns:
      The registered name: a `RegisteredGradient`, which is a `str` that can
      still be called like the function.

    Raises:
      DuplicateGradientError: `name` was given and is held by a different
        function (here or registered directly with TensorFlow).
      TypeError: `fn` is not callable or `name` is not a non-empty string.
    """
    if fn is None:
        return functools.partial(register_gradient, name=name)
    if isinstance(fn, RegisteredGradient):
        fn = fn.function  # registering a registered function again: a no-op
    elif isinstance(fn, str):
        raise TypeError(
            "register_gradient(%r) got a string where the gradient function "
            "goes. To register under that name, decorate with "
            "@register_gradient(name=%r), or call register_gradient(fn, "
            "name=%r)." % (fn, fn, fn))
    if not callable(fn):
        raise TypeError("register_gradient() needs a callable gradient "
                        "function, got %s" % type(fn).__name__)
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError("register_gradient(name=...) must be a non-empty "
                        "string, got %r" % (name,))
    with _lock:
        return _register_locked(fn, name or _default_name(fn),
                                explicit=name is not None)


def registered_name(fn):
    """The name `fn` is registered under (by `register_gradient` or
    ``tf.RegisterGradient``; the first in sorted order), or None."""
    with _lock:
        names = sorted(n for n, (f, _) in _owned.items() if f is fn)
    names = names or sorted(n for n in compat.gradient_registry_names()
                            if compat.lookup_gradient(n) is fn)
    return names[0] if names else None


def registry_size():
    """The number of names in TensorFlow's gradient registry (all of them)."""
    return compat.gradient_registry_entries()


# ---------------------------------------------------------------------------
# Built-in estimator names (written and parsed by graph_override.builtin_names).


def _register_builtin(spec, params, names):
    """Registers the gradient of estimator `spec` (its record) with `params`
    (normalized) under each of `names` not taken yet."""
    gradient = None
    with _lock:
        for n in names:
            if n not in _owned and not compat.has_gradient_entry(n):
                gradient = gradient or estimators.registry_gradient(spec, params)
                compat.register_gradient_function(n, _checked(gradient, n))
                _owned[n] = (gradient, "graph_override.estimators")


def resolve_estimator(estimator, params):
    """Registers the built-in gradient name of `estimator` (a name or its
    record) with `params` (normalized, as `estimators.normalize` returns
    them) unless TensorFlow has it already; returns the name. Code that
    holds the record (a patch rule) resolves it without parsing the name."""
    spec = estimators.spec(estimator)
    name = builtin_name(spec, params)
    if not compat.has_gradient_entry(name):
        _register_builtin(spec, params, (name,))
    return name


def is_resolvable(name):
    """True if `name` is registered or is a built-in estimator name."""
    return compat.has_gradient_entry(name) or parse_setting(name) is not None


def _short_name(name):
    short = name.split("(")[0].strip()
    return short[len(BUILTIN_PREFIX):] if short.startswith(BUILTIN_PREFIX) else short


def estimator_suggestions(name, limit=3):
    """Built-in estimator names that look like `name`, best first.

    `name` may be a bare estimator name (``"ste_sing"``) or a built-in
    gradient name (``"graph_override.ste_sing(clip_value=1.0)"``); only the
    estimator table is searched, so a misspelled estimator is never
    answered with an op type.

    Example:
      >>> from graph_override import registry
      >>> registry.estimator_suggestions("ste_sing")[0]
      'ste_sign'
    """
    short = _short_name(str(name))
    if not short:
        return []
    return estimators.suggestions(short, limit)


def resolve(name):
    """Makes sure TensorFlow can find gradient `name`; returns the name.

    Registered names (TensorFlow's own such as ``"Identity"`` included) are
    returned as they are; a built-in estimator name is registered on demand.

    Raises:
      UnknownGradientError: `name` is neither, with similar names if any.
    """
    if not isinstance(name, str):
        raise TypeError("a gradient name must be a string, got %s"
                        % type(name).__name__)
    if compat.has_gradient_entry(name):
        return name
    setting = parse_setting(name)  # the one look-up in the estimator table
    if setting is not None:
        _register_builtin(*setting, (builtin_name(*setting), name))
        return name
    short = _short_name(name)
    if short in estimators.ESTIMATORS:  # a known estimator, bad parameters
        hints = [example_name(short)]
    else:
        # A misspelled estimator gets estimator names, not look-alike op
        # types from TensorFlow's registry ("ste_sing" is not "AsString").
        hints = [example_name(e) for e in estimator_suggestions(name)]
        if not hints:
            hints = difflib.get_close_matches(
                name, compat.gradient_registry_names(), n=3, cutoff=0.6)
    hint = (" Did you mean %s?" % " or ".join(repr(h) for h in hints)) if hints else ""
    raise UnknownGradientError(
        "no gradient is registered under %r, and it is not a built-in "
        "graph_override estimator name.%s Register the function with "
        "graph_override.register_gradient, or pass the function itself."
        % (name, hint))


def resolve_function(name):
    """The Python gradient function behind `name` (the user's own function,
    not the checking wrapper), registering a built-in name on demand."""
    resolve(name)
    with _lock:
        owned = _owned.get(name)
    if owned is not None:
        return owned[0]
    return compat.lookup_gradient(name)
