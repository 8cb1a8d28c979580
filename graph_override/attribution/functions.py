"""One call per method: ``attribution.saliency(model, x)`` and the like,
made from the method records (`graph_override.attribution.method_table`).

Each is `attribution.attribute(model, METHOD, x, ...)`: `model` is a frozen
GraphDef or path (with `inputs` and `outputs` names), None with `session` and
its tensors, a TF2 callable or Keras model, or an `Explainer` (which keeps the
frozen and patched model between calls). `rules` are patch rules of the
caller's own, applied before the method's, and `allow_ops` the op types a
GraphDef may run although they read or write files or reach elsewhere
(see `Explainer`). `target` is None (the argmax per
example), an int class for all, an int array per example, or a callable of
the output tensor. `batch_size` examples go through the model per call
(None: chosen from the model's input size; see
`graph_override.attribution.batching`); ``progress=True`` draws a progress
bar on stderr. The keywords after those are the method's options, with the
record's defaults. Each returns an `Attribution` (``.maps``,
``.targets``, ``.outputs``, ``.delta``). See
`graph_override.attribution.methods` for the formulas and conventions.

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override import attribution
  >>> f = lambda x: tf.matmul(x, tf.constant([[2.0], [-3.0]]))
  >>> attribution.saliency(f, np.ones((1, 2), "float32")).maps
  array([[2., 3.]], dtype=float32)
  >>> import inspect
  >>> str(inspect.signature(attribution.eps_lrp)).split("progress=False, ")[1]
  'epsilon=0.0001)'
"""

import inspect

from graph_override.attribution import method_table
from graph_override.attribution.engine import attribute

_MODEL_KEYWORDS = ("inputs", "outputs", "session", "rules", "allow_ops", "mode")


def one_call(method):
    """The one-call function of `method` (a name or its record): its
    signature ``(model, x, target=None, *, inputs=None, outputs=None,
    session=None, rules=(), allow_ops=(), batch_size=None, progress=False,
    <options with defaults>)`` and its
    docstring are the record's."""
    spec = method_table.method_spec(method)

    def call(model, x, target=None, **keywords):
        bound = call.__signature__.bind(model, x, target, **keywords)
        bound.apply_defaults()
        given = dict(bound.arguments)
        return attribute(given.pop("model"), spec.name, given.pop("x"), given.pop("target"),
                         **given)

    keyword = inspect.Parameter.KEYWORD_ONLY
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    call.__signature__ = inspect.Signature(
        [inspect.Parameter("model", positional), inspect.Parameter("x", positional),
         inspect.Parameter("target", positional, default=None)]
        + [inspect.Parameter(k, keyword, default=() if k in ("rules", "allow_ops") else None)
           for k in _MODEL_KEYWORDS]
        + [inspect.Parameter("batch_size", keyword, default=None),
           inspect.Parameter("progress", keyword, default=False)]
        + [inspect.Parameter(o.name, keyword, default=o.default) for o in spec.options])
    call.__name__ = call.__qualname__ = spec.name
    call.__module__ = __name__
    call.__doc__ = spec.docstring()
    return call


__all__ = list(method_table.METHODS)
globals().update((name, one_call(name)) for name in method_table.METHODS)


def __getattr__(name):
    # a method defined after this module was imported
    if name in method_table.METHODS:
        return one_call(name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
