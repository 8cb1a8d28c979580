"""Run a function in graph, eager or tf.function mode and compare gradients.

`evaluate` runs ``fn`` on numpy inputs and returns its outputs and the
gradients of the outputs (weighted by `upstream`) with respect to each input.
`assert_same_gradients` compares two implementations across modes, which is
how this project checks its three families against each other and how a user
checks that a migrated function still has the legacy gradients.
"""

import collections

import numpy as np
import tensorflow as tf

__all__ = ["Evaluation", "MODES", "assert_same_gradients", "evaluate"]

MODES = ("graph", "eager", "function")

Evaluation = collections.namedtuple("Evaluation", ["outputs", "gradients"])
Evaluation.__doc__ = """outputs: numpy array (or list of them for several
outputs); gradients: a list with one numpy array per input (zeros where an
input is not connected)."""


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _upstreams(outputs, upstream):
    if upstream is None:
        return [tf.ones_like(o) for o in outputs]
    ups = _as_list(upstream)
    if len(ups) != len(outputs):
        raise ValueError("evaluate: %d upstream gradient(s) for %d output(s)"
                         % (len(ups), len(outputs)))
    return [tf.constant(u, dtype=o.dtype) for u, o in zip(ups, outputs)]


def _zeros_for_none(grads, xs):
    return [tf.zeros_like(x) if g is None else tf.convert_to_tensor(g)
            for g, x in zip(grads, xs)]


def _graph_mode(fn, inputs, upstream):
    with tf.Graph().as_default() as graph:
        xs = [tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape,
                                       name="input_%d" % i)
              for i, a in enumerate(inputs)]
        outs = _as_list(fn(*xs))
        grads = tf.gradients(outs, xs, grad_ys=_upstreams(outs, upstream))
        grads = _zeros_for_none(grads, xs)
        with tf.compat.v1.Session(graph=graph) as sess:
            return sess.run([outs, grads], feed_dict=dict(zip(xs, inputs)))


def _tape(fn, xs, upstream):
    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        outs = _as_list(fn(*xs))
    grads = tape.gradient(outs, xs, output_gradients=_upstreams(outs, upstream),
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    # IndexedSlices (from gather and the like) become dense, as in graph mode.
    return outs, [tf.convert_to_tensor(g) for g in grads]


def _eager_mode(fn, inputs, upstream):
    xs = [tf.constant(a) for a in inputs]
    outs, grads = _tape(fn, xs, upstream)
    return [o.numpy() for o in outs], [g.numpy() for g in grads]


def _function_mode(fn, inputs, upstream):
    run = tf.function(lambda *xs: _tape(fn, list(xs), upstream), autograph=False)
    outs, grads = run(*[tf.constant(a) for a in inputs])
    return [o.numpy() for o in outs], [g.numpy() for g in grads]


_RUNNERS = {"graph": _graph_mode, "eager": _eager_mode, "function": _function_mode}


def _is_python_number(value):
    return isinstance(value, (bool, int, float, complex)) and not isinstance(
        value, np.generic)


def _check_input_list(inputs):
    """A list of plain Python numbers is ambiguous: one input holding those
    values, or one scalar input per number? It is refused, with both ways
    to write what was meant."""
    if inputs and all(_is_python_number(v) for v in inputs):
        kind = type(inputs).__name__
        raise TypeError(
            "evaluate(fn, %r, ...): a %s is read as one input per argument "
            "of fn, so these would be %d scalar inputs. For one input holding "
            "these values write np.array(%r, np.float32); for %d scalar "
            "inputs write [np.float32(v) for v in %r]." % (
                inputs, kind, len(inputs), list(inputs), len(inputs),
                list(inputs)))


def evaluate(fn, inputs, mode="eager", *, upstream=None):
    """Runs `fn` in `mode` and returns its outputs and input gradients.

    Example:
      >>> import numpy as np
      >>> from graph_override import testing, tf2
      >>> x = np.array([-2.0, 0.0, 0.5], np.float32)
      >>> result = testing.evaluate(tf2.ste_sign, x, "graph")
      >>> print(result.outputs, result.gradients[0])
      [-1.  1.  1.] [0. 1. 1.]

    Args:
      fn: a function of one tensor per input, returning a tensor or a list of
        tensors.
      inputs: a numpy array (or anything np.asarray accepts), or a list/tuple
        of them, one per argument of `fn`. A list of plain Python numbers
        such as ``[0.5, -0.5]`` is refused as ambiguous: write
        ``np.array([0.5, -0.5], np.float32)`` for one input.
      mode: "graph" (a fresh tf.Graph, placeholders, tf.gradients and a
        Session), "eager" (GradientTape) or "function" (GradientTape inside
        tf.function).
      upstream: the gradient flowing into each output (default: ones).

    Returns:
      Evaluation(outputs, gradients): numpy arrays; `outputs` is a single
      array when `fn` returns one tensor; `gradients` has one array per input.

    Raises:
      ValueError: an unknown mode, or upstream gradients that do not match
        the outputs.
      TypeError: `inputs` is a list of plain Python numbers (ambiguous), or
        not numeric.
    """
    if mode not in _RUNNERS:
        raise ValueError("evaluate(mode=%r): use one of %s" % (mode, ", ".join(MODES)))
    single_input = not isinstance(inputs, (list, tuple))
    if not single_input:
        _check_input_list(inputs)
    arrays = [np.asarray(a) for a in _as_list(inputs)]
    if single_input and arrays[0].dtype == object:
        raise TypeError("evaluate: inputs must be numeric arrays")
    outs, grads = _RUNNERS[mode](fn, arrays, upstream)
    outs = [np.asarray(o) for o in outs]
    return Evaluation(outs[0] if len(outs) == 1 else outs,
                      [np.asarray(g) for g in grads])


_TOLERANCES = {  # (rtol, atol) for gradients, by dtype
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}


def _bits(a):
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        return a
    return a.view("u%d" % a.dtype.itemsize)


def _assert_bitwise(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise AssertionError("%s: shape/dtype %s %s != %s %s" % (
            what, a.shape, a.dtype, b.shape, b.dtype))
    same = _bits(a) == _bits(b)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        af, bf = a.astype(np.float64), b.astype(np.float64)
        same |= np.isnan(af) & np.isnan(bf)
    if not np.all(same):
        i = tuple(np.argwhere(~same)[0])
        raise AssertionError("%s differ bitwise at %d of %d positions, first at "
                             "index %s: %r vs %r" % (what, int((~same).sum()),
                                                     same.size, i, a[i], b[i]))


def _assert_close(a, b, what, rtol, atol):
    a, b = np.asarray(a), np.asarray(b)
    default = _TOLERANCES.get(a.dtype.name, (1e-6, 1e-6))
    rtol = default[0] if rtol is None else rtol
    atol = default[1] if atol is None else atol
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def assert_same_gradients(fn_a, fn_b, inputs, *, modes=MODES, upstream=None,
                          forward="bitwise", rtol=None, atol=None):
    """Asserts that two implementations agree in outputs and gradients.

    Example:
      >>> import numpy as np
      >>> from graph_override import overrides, testing, tf2
      >>> x = np.linspace(-2, 2, 9).astype(np.float32)
      >>> testing.assert_same_gradients(overrides.ste_sign, tf2.ste_sign, x,
      ...                               modes=["graph", ("graph", "eager")])

    Args:
      fn_a, fn_b: the two implementations (see `evaluate`).
      inputs: as in `evaluate`.
      modes: modes to compare in; an entry is a mode name (both run in it) or
        a pair (mode_a, mode_b), e.g. ("graph", "eager") to compare legacy
        Session code with its TF2 migration.
      upstream: the upstream gradient (default ones); use random values to
        tell a gradient apart from a plain pass-through.
      forward: "bitwise" (default: identical bits, NaN equal to NaN),
        "close" (same tolerance as gradients) or "skip".
      rtol, atol: gradient tolerances; default by dtype.

    Raises:
      AssertionError: naming the mode pair, output or input, and the values.
    """
    if forward not in ("bitwise", "close", "skip"):
        raise ValueError("assert_same_gradients(forward=%r): use bitwise, close "
                         "or skip" % (forward,))
    for entry in modes:
        mode_a, mode_b = (entry, entry) if isinstance(entry, str) else entry
        ra = evaluate(fn_a, inputs, mode_a, upstream=upstream)
        rb = evaluate(fn_b, inputs, mode_b, upstream=upstream)
        tag = "[%s vs %s]" % (mode_a, mode_b)
        outs_a, outs_b = _as_list(ra.outputs), _as_list(rb.outputs)
        if len(outs_a) != len(outs_b):
            raise AssertionError("%s: %d outputs vs %d" % (tag, len(outs_a), len(outs_b)))
        for i, (oa, ob) in enumerate(zip(outs_a, outs_b)):
            what = "%s output %d" % (tag, i)
            if forward == "bitwise":
                _assert_bitwise(oa, ob, what)
            elif forward == "close":
                _assert_close(oa, ob, what, rtol, atol)
        for i, (ga, gb) in enumerate(zip(ra.gradients, rb.gradients)):
            _assert_close(ga, gb, "%s gradient of input %d" % (tag, i), rtol, atol)
