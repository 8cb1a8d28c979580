"""Every estimator of every family against numpy references and the tf2 oracle.

Inputs always hold +0 and -0, every threshold and clip boundary with its
nearest representable neighbours on both sides, and random values, in
float16, bfloat16, float32 and float64. The overrides family runs in graph
mode (Session); stopgrad and tf2 in graph, eager and tf.function mode.
"""

import ast
import functools
import inspect

import numpy as np
import pytest
import tensorflow as tf

from graph_override import estimators, overrides, stopgrad, testing, tf2
from graph_override._families import functions

DTYPES = ["float16", "bfloat16", "float32", "float64"]

# (estimator, params, boundaries where the forward or the gradient changes)
CASES = [
    ("ste_sign", {}, [1.0]),
    ("ste_sign", {"clip_value": 0.5}, [0.5]),
    ("ste_sign", {"clip_value": None}, []),
    ("approx_sign", {}, [1.0]),
    ("swish_sign", {}, []),
    ("swish_sign", {"beta": 2.0}, []),
    ("ste_heaviside", {}, [1.0]),
    ("ste_heaviside", {"clip_value": 0.25}, [0.25]),
    ("ste_tern", {}, [0.05, 1.0]),
    ("ste_tern", {"threshold_value": 0.5, "clip_value": 1.5}, [0.5, 1.5]),
    ("ste_tern", {"threshold_value": 0.0}, [1.0]),
    ("ste_tern", {"threshold_value": 1.0, "clip_value": None}, [1.0]),
    ("ste_round", {}, [0.5, 1.5, 2.5]),
    ("ste_floor", {}, [1.0, 2.0]),
    ("dorefa_quantize", {}, [1.0, 1 / 6, 0.5, 5 / 6]),
    ("dorefa_quantize", {"k_bit": 1}, [1.0, 0.5]),
    ("dorefa_quantize", {"k_bit": 4}, [1.0, 1 / 30]),
    ("flip_gradient", {}, []),
    ("flip_gradient", {"scale": 0.25}, []),
    ("scale_gradient", {"scale": 0.5}, []),
    ("scale_gradient", {"scale": 0.0}, []),
    ("scale_gradient", {"scale": -3.0}, []),
    ("clip_gradient", {"clip_value_min": -0.3, "clip_value_max": 0.3}, []),
    ("clip_gradient", {"clip_value_min": 0.0, "clip_value_max": 0.0}, []),
]


def _case_id(case):
    name, params, _ = case
    return name + "".join("-%s=%s" % kv for kv in params.items())


def _np_dtype(dtype):
    return tf.as_dtype(dtype).as_numpy_dtype


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _step(value, dtype, direction):
    """The representable neighbour of `value` in `dtype` (direction +1/-1)."""
    dt = _np_dtype(dtype)
    a = np.array([value], dtype=dt)
    uint = _UINT[a.itemsize]
    bits = a.view(uint)[0]
    sign_bit = uint(1) << uint(8 * a.itemsize - 1)
    if float(a[0]) == 0.0:
        out = uint(1) if direction > 0 else (sign_bit | uint(1))
    elif (float(a[0]) > 0) == (direction > 0):
        out = bits + uint(1)
    else:
        out = bits - uint(1)
    return np.array([out], dtype=uint).view(dt)[0]


def make_inputs(boundaries, dtype, seed=0):
    dt = _np_dtype(dtype)
    points = [-3.0, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.0]
    values = [np.array(p, dt) for p in points]
    for b in [0.0] + list(boundaries):
        for sign in (1.0, -1.0):
            v = np.array(sign * b, dt)
            values += [v, _step(v, dtype, +1), _step(v, dtype, -1)]
    rng = np.random.RandomState(seed)
    values += list((rng.randn(24) * 1.5).astype(np.float32).astype(dt))
    return np.array(values, dtype=dt)


# --- numpy references ----------------------------------------------------------

def flush_subnormals(x):
    """TensorFlow's CPU kernels flush subnormal bfloat16/float32/float64
    inputs to zero (not float16); the references model that."""
    if x.dtype == np.float16:
        return x.astype(np.float64)
    tiny = {"bfloat16": 1.1754943508222875e-38, "float32": 1.1754943508222875e-38,
            "float64": 2.2250738585072014e-308}[x.dtype.name]
    x64 = x.astype(np.float64)
    return np.where(np.abs(x64) < tiny, 0.0, x64)


def ref_threshold(x, p):
    """ste_tern's threshold in x's dtype, as a float64. With
    ternary_weight_networks: 0.7 * sum(|x|) / size(x), each operation
    rounded to the dtype (the sum must be exact, as the tests' inputs make
    it, since TensorFlow and numpy sum in different orders)."""
    dt = x.dtype.type
    if not p.get("ternary_weight_networks"):
        return np.float64(dt(p["threshold_value"]))
    total = dt(np.abs(x.astype(np.float64)).sum())
    assert np.float64(total) == np.abs(x.astype(np.float64)).sum(), "inexact sum"
    scaled = np.array(dt(0.7), x.dtype) * np.array(total, x.dtype)
    return np.float64(np.array(scaled, x.dtype) / np.array(dt(x.size), x.dtype))


def _sign(x64, p):
    del p
    return np.where(x64 >= 0, 1.0, -1.0)


def _tern(x, x64, p):
    # larq's sign(sign(x + t) + sign(x - t)), t rounded to the dtype.
    # Rounding x +- t to the dtype never changes its sign, so float64
    # arithmetic gives the dtype's signs.
    t = ref_threshold(x, p)
    return np.sign(np.sign(x64 + t) + np.sign(x64 - t))


def _dorefa(x, x64, p):
    n = float(2 ** p["k_bit"] - 1)
    # IEEE arithmetic in the input dtype: each operation exact in float64,
    # then rounded once to the dtype (float64 has 53 >= 2p + 2 bits, so the
    # double rounding is harmless for all four dtypes).
    def r(v):
        return v.astype(x.dtype).astype(np.float64)
    c = np.clip(x64, 0.0, 1.0)
    return r(r(np.round(r(c * n))) / n)


def _identity(x, x64, p):
    del x64, p
    return x.astype(np.float64)  # no arithmetic, no flushing


# forward(x, x64, params) -> y as float64, x64 the input with subnormals
# flushed as TensorFlow's kernels flush them. One entry per estimator record:
# a record without one fails test_every_estimator_has_a_numpy_reference_and_cases.
FORWARD = {
    "ste_sign": lambda x, x64, p: _sign(x64, p),
    "approx_sign": lambda x, x64, p: _sign(x64, p),
    "swish_sign": lambda x, x64, p: _sign(x64, p),
    "ste_heaviside": lambda x, x64, p: np.where(x64 > 0, 1.0, 0.0),
    "ste_tern": _tern,
    "ste_round": lambda x, x64, p: np.round(x64),
    "ste_floor": lambda x, x64, p: np.floor(x64),
    "dorefa_quantize": _dorefa,
    "flip_gradient": _identity,
    "scale_gradient": _identity,
    "clip_gradient": _identity,
}


def _clipped(x, x64, dy64, p):
    c = p.get("clip_value", 1.0)
    return dy64 if c is None else dy64 * (np.abs(x64) <= np.float64(x.dtype.type(c)))


def _swish(x, x64, dy64, p):
    del x
    b = p.get("beta", 5.0)
    with np.errstate(over="ignore", invalid="ignore"):
        s = b * (2 - b * x64 * np.tanh(b * x64 / 2)) / (1 + np.cosh(b * x64))
    return dy64 * np.where(np.isinf(x64), 0.0, s)


# gradient(x, x64, dy64, params) -> dx as float64; one entry per record.
GRADIENT = {
    "ste_sign": _clipped,
    "ste_heaviside": _clipped,
    "ste_tern": _clipped,
    "approx_sign": lambda x, x64, dy64, p: dy64 * np.maximum(0.0, 2.0 - 2.0 * np.abs(x64)),
    "swish_sign": _swish,
    "ste_round": lambda x, x64, dy64, p: dy64,
    "ste_floor": lambda x, x64, dy64, p: dy64,
    "dorefa_quantize": lambda x, x64, dy64, p: dy64 * ((x64 >= 0) & (x64 <= 1)),
    "flip_gradient": lambda x, x64, dy64, p: -p.get("scale", 1.0) * dy64,
    "scale_gradient": lambda x, x64, dy64, p: p["scale"] * dy64,
    "clip_gradient": lambda x, x64, dy64, p: np.clip(dy64, p["clip_value_min"],
                                                     p["clip_value_max"]),
}


def ref_forward(name, x, p):
    return FORWARD[name](x, flush_subnormals(x), p).astype(x.dtype)


def ref_gradient(name, x, dy, p):
    return GRADIENT[name](x, flush_subnormals(x), dy.astype(np.float64), p)


def test_every_estimator_has_a_numpy_reference_and_cases():
    """A new record in the estimator table is picked up here by itself: it
    fails until it has a forward and a gradient reference above and a case
    in CASES (the attribution rules have their own references, in
    tests/test_estimator_rules.py)."""
    names = {name for name, spec in estimators.ESTIMATORS.items() if not spec.op_types}
    assert set(FORWARD) == names
    assert set(GRADIENT) == names
    assert {case[0] for case in CASES} == names


IDENTITY_FORWARD = ("flip_gradient", "scale_gradient")

TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-12}


def _fn(family, name, params):
    f = getattr(family, name)
    return lambda t: f(t, **params)


FAMILY_MODES = [(overrides, "graph"), (stopgrad, "graph"), (stopgrad, "eager"),
                (stopgrad, "function"), (tf2, "graph"), (tf2, "eager"),
                (tf2, "function")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_estimator_matches_numpy_and_oracle(case, dtype):
    name, params, boundaries = case
    x = make_inputs(boundaries, dtype)
    dy = (np.random.RandomState(7).randn(x.size) + 0.5).astype(x.dtype)
    full = dict(estimators.normalize(name, params))
    want_y = ref_forward(name, x, full)
    want_dx = ref_gradient(name, x, dy, full)
    oracle = testing.evaluate(_fn(tf2, name, params), x, "eager", upstream=dy)
    for family, mode in FAMILY_MODES:
        where = "%s/%s %s %s" % (family.__name__.split(".")[-1], mode, name, dtype)
        got = testing.evaluate(_fn(family, name, params), x, mode, upstream=dy)
        assert got.outputs.dtype == x.dtype, where
        # Forward: the values of the reference, and the bits of the oracle.
        want, oracle_y = want_y.astype(np.float64), oracle.outputs
        if family is stopgrad and name in IDENTITY_FORWARD and dtype != "float16":
            # Documented exception: the stop_gradient form subtracts an exact
            # zero, and TensorFlow's CPU arithmetic flushes subnormals, so a
            # subnormal x comes out as a zero of its sign, or as x itself
            # where a graph optimizer folded the zero away (TF 2.15 does in
            # tf.function for scale=0).
            sub = flush_subnormals(x) != x.astype(np.float64)
            out, xs = got.outputs[sub], x[sub]
            flushed = (out.astype(np.float64) == 0) & (np.signbit(out) == np.signbit(xs))
            kept = testing._bits(out) == testing._bits(xs)  # pylint: disable=protected-access
            assert np.all(flushed | kept), where
            want = np.where(sub, got.outputs.astype(np.float64), want)
            oracle_y = np.where(sub, got.outputs, oracle_y)
        np.testing.assert_array_equal(got.outputs.astype(np.float64), want, err_msg=where)
        testing._assert_bitwise(got.outputs, oracle_y, where)  # pylint: disable=protected-access
        # Gradient: the numpy formula, and the oracle.
        np.testing.assert_allclose(got.gradients[0].astype(np.float64), want_dx,
                                   rtol=TOL[dtype], atol=TOL[dtype], err_msg=where)
        np.testing.assert_allclose(got.gradients[0].astype(np.float64),
                                   oracle.gradients[0].astype(np.float64),
                                   rtol=TOL[dtype], atol=TOL[dtype], err_msg=where)


def test_boundaries_are_in_the_inputs_and_gradient_is_inclusive():
    """The clip boundary itself passes the gradient, its outer neighbour not."""
    x = np.array([-1.0, 1.0, _step(np.float32(1.0), "float32", 1),
                  _step(np.float32(-1.0), "float32", -1), 0.0, -0.0], np.float32)
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(overrides.ste_sign if family is overrides else
                               family.ste_sign, x, mode)
        np.testing.assert_array_equal(got.gradients[0], [1, 1, 0, 0, 1, 1])
        np.testing.assert_array_equal(got.outputs, [-1, 1, 1, -1, 1, 1])


def test_zero_never_maps_to_zero_in_sign_estimators():
    x = np.array([0.0, -0.0], np.float32)
    for name in ("ste_sign", "approx_sign", "swish_sign"):
        for family, mode in FAMILY_MODES:
            got = testing.evaluate(getattr(family, name), x, mode)
            np.testing.assert_array_equal(got.outputs, [1.0, 1.0])


@pytest.mark.parametrize("name", functions.ESTIMATOR_FUNCTIONS)
def test_non_finite_inputs_forward_is_exact_in_every_family(name):
    params = {"scale_gradient": {"scale": 2.0},
              "clip_gradient": {"clip_value_min": -1.0, "clip_value_max": 1.0}}.get(name, {})
    # An even count: deeplift_rescale reads the batch as [inputs; references].
    x = _shaped(name, np.array([np.inf, -np.inf, np.nan, 1.0, -0.0, 2.0], np.float32))
    oracle = testing.evaluate(_fn(tf2, name, params), x, "eager")
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(_fn(family, name, params), x, mode)
        testing._assert_bitwise(got.outputs, oracle.outputs, name)  # pylint: disable=protected-access
    # Documented: the stop_gradient form has gradient 0 at non-finite x
    # (stopgrad delegates the estimators not linear in dy to tf2).
    if estimators.ESTIMATORS[name].linear:
        sg = testing.evaluate(_fn(stopgrad, name, params), x, "eager")
        np.testing.assert_array_equal(sg.gradients[0][:3], [0.0, 0.0, 0.0])


def test_flip_gradient_keeps_negative_zero():
    x = np.array([-0.0, 0.0], np.float32)
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(family.flip_gradient, x, mode)
        assert np.signbit(got.outputs).tolist() == [True, False]


@pytest.mark.parametrize("name", functions.ESTIMATOR_FUNCTIONS)
def test_same_signatures_in_every_family(name):
    sig = inspect.signature(getattr(tf2, name))
    assert inspect.signature(getattr(overrides, name)) == sig
    assert inspect.signature(getattr(stopgrad, name)) == sig
    assert list(sig.parameters)[0] == "x" and list(sig.parameters)[-1] == "name"
    for family in (overrides, stopgrad, tf2):
        assert name in family.__all__
        doc = getattr(family, name).__doc__
        assert "Forward:" in doc and "Gradient:" in doc and ">>>" in doc


def test_larq_defaults():
    sig = {n: inspect.signature(getattr(tf2, n)) for n in functions.ESTIMATOR_FUNCTIONS}
    assert sig["ste_sign"].parameters["clip_value"].default == 1.0
    assert sig["swish_sign"].parameters["beta"].default == 5.0
    assert sig["ste_tern"].parameters["threshold_value"].default == 0.05
    assert sig["ste_tern"].parameters["clip_value"].default == 1.0
    assert sig["ste_tern"].parameters["ternary_weight_networks"].default is False
    assert sig["dorefa_quantize"].parameters["k_bit"].default == 2
    assert sig["flip_gradient"].parameters["scale"].default == 1.0


@pytest.mark.parametrize("family", [overrides, stopgrad, tf2],
                         ids=["overrides", "stopgrad", "tf2"])
def test_bad_parameters_and_dtypes_are_refused(family):
    with tf.Graph().as_default():
        x = tf.constant([0.5, -0.5])
        with pytest.raises(ValueError, match=r"ste_sign\(clip_value=...\) must be >= 0"):
            family.ste_sign(x, clip_value=-1.0)
        with pytest.raises(TypeError, match="must be a Python number"):
            family.ste_sign(x, clip_value=tf.constant(1.0))
        with pytest.raises(ValueError, match="k_bit"):
            family.dorefa_quantize(x, k_bit=0)
        with pytest.raises(ValueError, match="beta"):
            family.swish_sign(x, beta=0.0)
        with pytest.raises(ValueError, match="min must not exceed max"):
            family.clip_gradient(x, 1.0, -1.0)
        with pytest.raises(ValueError, match="must be finite"):
            family.scale_gradient(x, float("nan"))
        with pytest.raises(TypeError, match="needs a float16, bfloat16, float32 or "
                                            "float64 tensor, got int32"):
            family.ste_sign(tf.constant([1, -1]))


def test_name_argument_scopes_the_ops():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3])
        overrides.ste_sign(x, name="binarize_w")
        stopgrad.ste_sign(x, name="binarize_a")
        tf2.ste_sign(x, name="binarize_b")
        overrides.ste_sign(x)
    names = [op.name for op in g.get_operations()]
    for scope in ("binarize_w/", "binarize_a/", "binarize_b/", "ste_sign/"):
        assert any(n.startswith(scope) for n in names), scope


# --- ste_tern: larq's forward at and next to the threshold -------------------------

def _tern_inputs(t, dtype):
    """+-t, the neighbours of +-t, 0, -0 and values far from t."""
    dt = _np_dtype(dtype)
    v = np.array(t, dt)
    values = [v, -v, _step(v, dtype, 1), _step(v, dtype, -1),
              _step(-v, dtype, 1), _step(-v, dtype, -1), dt(0.0), dt(-0.0),
              dt(2.0), dt(-2.0)]
    return np.array(values, dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", [0.05, 0.5, 0.3])
def test_ste_tern_keeps_the_sign_at_the_threshold_as_larq(t, dtype):
    x = _tern_inputs(t, dtype)
    want = [1, -1, 1, 0, 0, -1, 0, 0, 1, -1]
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(functools.partial(family.ste_tern, threshold_value=t), x, mode)
        where = "%s/%s %s" % (family.__name__, mode, dtype)
        np.testing.assert_array_equal(got.outputs.astype(np.float64), want, err_msg=where)
        assert not np.any(np.signbit(got.outputs[np.asarray(want) == 0])), where


def _larq_ste_tern(x, threshold_value=0.05, ternary_weight_networks=False):
    """larq's forward, written out op for op (larq/quantizers.py)."""
    if ternary_weight_networks:
        threshold = 0.7 * tf.reduce_sum(tf.abs(x)) / tf.cast(tf.size(x), x.dtype)
    else:
        threshold = threshold_value
    return tf.sign(tf.sign(x + threshold) + tf.sign(x - threshold))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", [{}, {"threshold_value": 0.5},
                                    {"ternary_weight_networks": True}],
                         ids=["default", "t=0.5", "twn"])
def test_ste_tern_is_bitwise_larq(params, dtype):
    x = make_inputs([0.05, 0.5, 1.0], dtype, seed=3)
    want = _larq_ste_tern(tf.constant(x), **params).numpy()
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(functools.partial(family.ste_tern, **params), x, mode)
        testing._assert_bitwise(got.outputs, want, "%s/%s" % (family.__name__, mode))  # pylint: disable=protected-access


@pytest.mark.parametrize("dtype", DTYPES)
def test_ste_tern_ternary_weight_networks_threshold(dtype):
    """t = 0.7 * mean(|x|); inputs whose sum is exact in every dtype."""
    dt = _np_dtype(dtype)
    x = np.array([-1.0, -0.75, -0.5, -0.25, -0.125, 0.0, -0.0, 0.125, 0.25,
                  0.5, 0.75, 1.0, 0.375, -0.375, 0.625, 1.5], dt)
    params = {"ternary_weight_networks": True}
    full = dict(estimators.normalize("ste_tern", params))
    t = ref_threshold(x, full)
    assert 0.0 < t < 1.0
    want = ref_forward("ste_tern", x, full).astype(np.float64)
    assert set(want.tolist()) == {-1.0, 0.0, 1.0}
    dy = np.linspace(-1, 1, x.size).astype(dt)
    for family, mode in FAMILY_MODES:
        got = testing.evaluate(functools.partial(family.ste_tern, **params), x, mode,
                                upstream=dy)
        where = "%s/%s %s" % (family.__name__, mode, dtype)
        np.testing.assert_array_equal(got.outputs.astype(np.float64), want, err_msg=where)
        np.testing.assert_allclose(got.gradients[0].astype(np.float64),
                                   ref_gradient("ste_tern", x, dy, full), err_msg=where)
    # threshold_value is unused with ternary_weight_networks.
    other = testing.evaluate(lambda v: tf2.ste_tern(v, threshold_value=0.9, **params), x)
    np.testing.assert_array_equal(other.outputs.astype(np.float64), want)


def test_ste_tern_parameters():
    assert estimators.normalize("ste_tern", {"ternary_weight_networks": 1})[
        "ternary_weight_networks"] is True
    with pytest.raises(TypeError, match="ternary_weight_networks"):
        estimators.normalize("ste_tern", {"ternary_weight_networks": "yes"})
    with pytest.raises(TypeError, match="ternary_weight_networks"):
        estimators.normalize("ste_tern", {"ternary_weight_networks": 2})
    assert np.signbit(estimators.normalize("ste_tern", {"threshold_value": -0.0})[
        "threshold_value"]) == False  # noqa: E712
    sig = inspect.signature(tf2.ste_tern)
    assert list(sig.parameters) == ["x", "threshold_value", "ternary_weight_networks",
                                    "clip_value", "name"]
    assert sig.parameters["ternary_weight_networks"].default is False


class _Records(list):
    """What TensorFlow's logger is told at WARNING and above while it is
    attached (the suite's conftest sets it to ERROR)."""

    def __init__(self):
        super().__init__()
        import logging  # pylint: disable=import-outside-toplevel
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.append
        self.logger = logging.getLogger("tensorflow")
        self.level = None

    def __enter__(self):
        self.level = self.logger.level
        self.logger.setLevel("WARNING")
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


def _required(name):
    return {p.name: 0.5 for p in estimators.ESTIMATORS[name].params if p.required}


def _shaped(name, x):
    """x's values in the shape of the record's example input where its op
    takes a shape of its own (deeplift_maxpool: MaxPool's 4-D), else x."""
    example = np.array(ast.literal_eval(estimators.ESTIMATORS[name].doc.x))
    return x if example.ndim <= 1 else np.resize(x, example.shape)


@pytest.mark.parametrize("family", [tf2, stopgrad], ids=["tf2", "stopgrad"])
def test_autograph_runs_each_estimator_as_it_is_without_a_warning(family):
    """The functions are compiled from a template: AutoGraph, asked to convert
    one inside a tf.function (autograph on, the default), found no source and
    logged "WARNING:tensorflow:AutoGraph could not transform ..." (once per
    function and process)."""
    x = tf.constant([-1.5, -0.0, 0.0, 0.5, 2.0, 0.25])  # an even batch, as DeepLIFT takes

    def every_estimator(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            inputs = []
            for name in functions.ESTIMATOR_FUNCTIONS:  # x's values, as _shaped gives them
                shape = _shaped(name, np.zeros(6)).shape
                size = int(np.prod(shape))
                inputs.append(tf.reshape(tf.tile(x, [-(-size // 6)])[:size], shape))
            ys = [getattr(family, name)(t, **_required(name))
                  for name, t in zip(functions.ESTIMATOR_FUNCTIONS, inputs)]
        return ys, tape.gradient(ys, x)

    with _Records() as records:
        ys, _ = tf.function(every_estimator)(x)
    assert [r.getMessage() for r in records] == []
    for name, y in zip(functions.ESTIMATOR_FUNCTIONS, ys):
        np.testing.assert_array_equal(y.numpy(), getattr(tf2, name)(
            _shaped(name, x.numpy()), **_required(name)))
