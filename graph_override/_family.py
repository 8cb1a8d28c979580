"""The public functions of a family, made from the estimator table.

`define(module_name, family, apply)` makes one function per record of
`graph_override.estimators.ESTIMATORS` around the family's
``apply(estimator, x, name, params)``: a real Python function whose
signature is ``NAME(x, <the record's parameters with their defaults>,
name=None)`` (so `inspect.signature`, `help()` and mkdocstrings show them),
with the record's docstring for that family. The three families cannot
drift apart in names, parameters or defaults, and a family module binds the
functions with ``globals().update(...)``: it holds no list of names.

Compiled from a template, a function has no source file that AutoGraph could
read, so AutoGraph, asked to convert it inside any `tf.function`, would warn
that it cannot: each is marked not to be converted (it has no Python control
flow on tensors to convert).
"""

import tensorflow as tf

from graph_override import _docs, estimators

__all__ = ["ESTIMATOR_FUNCTIONS", "define"]

ESTIMATOR_FUNCTIONS = tuple(sorted(estimators.ESTIMATORS))
"""The names of the estimator functions, sorted."""

_SOURCE = '''\
def {name}(x, {params}name=None):
    return _apply({name!r}, x, name, {{{items}}})
'''


def _function(spec, apply):
    """``spec.name(x, <params>, name=None)`` calling ``apply``, compiled from
    a template so that its signature is the record's, defaults included."""
    params = "".join("%s, " % p.name if p.required else "%s=_default_%s, " % (p.name, p.name)
                     for p in spec.params)
    items = ", ".join("%r: %s" % (p.name, p.name) for p in spec.params)
    namespace = {"_apply": apply}
    namespace.update(("_default_" + p.name, p.default) for p in spec.params
                     if not p.required)
    source = _SOURCE.format(name=spec.name, params=params, items=items)
    exec(compile(source, "<graph_override.%s>" % spec.name, "exec"),  # pylint: disable=exec-used
         namespace)
    return namespace[spec.name]


def define(module_name, family, apply):
    """The family's estimator functions, by name, in ESTIMATOR_FUNCTIONS order.

    Each family module binds them, and lists them in its ``__all__``::

        _FUNCTIONS = _family.define(__name__, "tf2", _apply)
        globals().update(_FUNCTIONS)
    """
    out = {}
    for name in ESTIMATOR_FUNCTIONS:
        fn = _function(estimators.ESTIMATORS[name], apply)
        fn.__module__ = module_name
        fn.__qualname__ = name
        fn.__doc__ = _docs.docstring(name, family)
        out[name] = tf.autograph.experimental.do_not_convert(fn)
    return out
