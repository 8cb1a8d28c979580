"""The attribution rules of the estimator table (guided_relu, deconv_relu,
eps_lrp, deeplift_rescale): numpy references for every covered op type and
both float widths, exact zeros and ties, the three families against each
other, the built-in names, and the refusals."""

import itertools
import json
import os
import pathlib
import sys

import numpy as np
import pytest

import warm_python
import tensorflow as tf

import graph_override as go
from graph_override import (builtin_names, frozen, overrides, registry, stopgrad,
                            testing, tf2)
from graph_override.errors import RuleError
from graph_override.estimators import attribution_ops
from frozen_graphs import control_flow_v1

SELU_SCALE, SELU_ALPHA = attribution_ops.SELU_SCALE, attribution_ops.SELU_ALPHA
ALPHA = 0.3  # LeakyRelu's slope in these tests (TensorFlow's default is 0.2)

# A batch of 2N = 8 rows: inputs, then references. Per column pair the
# differences x - r are 0 (three ties, one at 0 vs -0), +-0.25 (exactly the
# threshold used below), 0.125 (below it) and larger ones; Relu6 meets 6.
INPUTS = [[-3.0, -1.0], [-0.5, 0.0], [0.25, 0.5], [1.0, 6.0]]
REFERENCES = [[-3.0, -0.75], [-0.0, 0.0], [0.0, 0.625], [1.0, 5.0]]
X = np.array(INPUTS + REFERENCES)
DY = np.array([[0.5, -1.0], [0.0, 2.0], [-0.0, 1.5], [3.0, -2.0],
               [1.0, 0.0], [-1.0, 0.25], [2.0, -0.5], [0.0, 1.0]])
THRESHOLD = 0.25

DTYPES = [np.float32, np.float64]
CASES = [(rule, op) for rule in ("guided_relu", "deconv_relu") for op in attribution_ops.RELUS] + [
    (rule, op) for rule in ("eps_lrp", "deeplift_rescale") for op in attribution_ops.ACTIVATIONS]
PARAMS = {"guided_relu": {}, "deconv_relu": {}, "eps_lrp": {"epsilon": 0.01},
          "deeplift_rescale": {"threshold": THRESHOLD}}


# ------------------------------------------------------------ numpy references

def np_forward(op, x):
    return {
        "Relu": lambda: np.maximum(x, 0),
        "Relu6": lambda: np.minimum(np.maximum(x, 0), 6),
        "LeakyRelu": lambda: np.where(x > 0, x, x.dtype.type(np.float32(ALPHA)) * x),
        "Elu": lambda: np.where(x > 0, x, np.expm1(x)),
        "Selu": lambda: np.where(x > 0, SELU_SCALE * x, SELU_SCALE * SELU_ALPHA * np.expm1(x)),
        "Sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "Tanh": lambda: np.tanh(x),
        "Softplus": lambda: np.log1p(np.exp(x)),
    }[op]().astype(x.dtype)


def np_derivative(op, x, y):
    """TensorFlow's own gradient of each op, written out."""
    one = np.ones_like(x)
    return {
        "Relu": lambda: (y > 0) * one,
        "Relu6": lambda: ((y > 0) & (y < 6)) * one,
        # alpha is a float32 attr, also on a float64 op
        "LeakyRelu": lambda: np.where(x > 0, one, x.dtype.type(np.float32(ALPHA))),
        "Elu": lambda: np.where(y < 0, y + 1, one),
        "Selu": lambda: np.where(y < 0, y + x.dtype.type(SELU_SCALE * SELU_ALPHA),
                                 x.dtype.type(SELU_SCALE)),
        "Sigmoid": lambda: y * (1 - y),
        "Tanh": lambda: 1 - y * y,
        "Softplus": lambda: 1 / (1 + np.exp(-x)),
    }[op]()


def _guided(op, x, y, dy, params):
    del params
    return np.where(dy > 0, dy * np_derivative(op, x, y), x.dtype.type(0))


def _deconv(op, x, y, dy, params):
    del op, y, params
    return np.where(dy > 0, dy, x.dtype.type(0))


def _eps_lrp(op, x, y, dy, params):
    del op
    t = x.dtype.type
    with np.errstate(all="ignore"):
        g = y / (x + t(params["epsilon"]) * np.where(x >= 0, t(1), t(-1)))
    return dy * np.where(np.isfinite(g), g, t(0))


def _deeplift(op, x, y, dy, params):
    t = x.dtype.type
    n = x.shape[0] // 2
    dx_, dy_ = x[:n] - x[n:], y[:n] - y[n:]
    big = (np.abs(dx_) >= t(params.get("threshold", 1e-10))) & (dx_ != 0)
    with np.errstate(all="ignore"):
        m = np.where(big, dy_ / np.where(big, dx_, t(1)), np_derivative(op, x[:n], y[:n]))
    m = np.where(np.isfinite(m), m, t(0))
    return dy * np.concatenate([m, m])


# One numpy reference per attribution rule of the estimator table: a new rule
# fails test_every_rule_has_a_numpy_reference_and_cases until it has one.
NP_RULES = {"guided_relu": _guided, "deconv_relu": _deconv, "eps_lrp": _eps_lrp,
            "deeplift_rescale": _deeplift}


def np_rule(rule, op, x, y, dy, params):
    """dx of `rule` on op `op` with input x, output y (TensorFlow's own, so
    that only the rule is compared) and upstream dy."""
    return NP_RULES[rule](op, x, y, dy, params)


# The rules of ops that are not elementwise have their numpy references and
# cases beside the networks they are tested on.
ELSEWHERE = {"deeplift_maxpool": ("attribution/test_deeplift_conserves.py", "np_deeplift_maxpool"),
             "deeplift_softmax": ("attribution/test_deeplift_conserves.py", "np_deeplift_softmax")}


def test_every_rule_has_a_numpy_reference_and_cases():
    """Every attribution rule of the estimator table has a reference here
    (or where `ELSEWHERE` says), and a case for each op type it covers."""
    table = {name: spec.op_types for name, spec in go.estimators.ESTIMATORS.items()
             if spec.op_types}
    assert set(NP_RULES) | set(ELSEWHERE) == set(table)
    assert set(CASES) == {(rule, op) for rule, ops in table.items() for op in ops
                          if rule not in ELSEWHERE}
    for path, function in ELSEWHERE.values():
        assert "\ndef %s(" % function in (pathlib.Path(__file__).parent / path).read_text()


def _family_fn(family, rule, op, params):
    kwargs = dict(params, activation=op)
    if op == "LeakyRelu":
        kwargs["alpha"] = ALPHA
    return lambda t: getattr(family, rule)(t, **kwargs)


RUNS = [(tf2, "eager"), (tf2, "function"), (stopgrad, "eager"), (stopgrad, "graph"),
        (overrides, "graph")]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("rule,op", CASES, ids=["%s-%s" % c for c in CASES])
def test_every_rule_on_every_op_type_equals_numpy_in_every_family(rule, op, dtype):
    x, dy = X.astype(dtype), DY.astype(dtype)
    params = PARAMS[rule]
    oracle = testing.evaluate(_family_fn(tf2, rule, op, params), x, "eager", upstream=dy)
    y = oracle.outputs
    assert y.dtype == dtype
    np.testing.assert_allclose(y, np_forward(op, x), rtol=4e-7 if dtype == np.float32
                               else 1e-15, atol=1e-7 if dtype == np.float32 else 1e-15)
    want = np_rule(rule, op, x, y, dy, params)
    # One rounding apart at most: the same formula, numpy's order of operations.
    np.testing.assert_allclose(oracle.gradients[0], want, rtol=2e-7 if dtype == np.float32
                               else 1e-15, atol=0, err_msg="%s on %s" % (rule, op))
    for family, mode in RUNS:
        r = testing.evaluate(_family_fn(family, rule, op, params), x, mode, upstream=dy)
        np.testing.assert_array_equal(r.outputs, y, err_msg="%s %s" % (family.__name__, mode))
        # The families compute the same product dy * g: equal bit for bit.
        np.testing.assert_array_equal(r.gradients[0], oracle.gradients[0],
                                      err_msg="%s %s" % (family.__name__, mode))


def test_the_cases_hold_the_ties_and_boundaries():
    """The inputs above hold what the rules must get right: exact zeros and
    -0, dy == 0 and -0, y == 0, x == r, |x - r| exactly at the threshold and
    just below it, and Relu6 at 6."""
    n = len(INPUTS)
    delta = np.abs(X[:n] - X[n:])
    assert (delta == 0).sum() == 3 and (delta == THRESHOLD).sum() == 2
    assert ((delta > 0) & (delta < THRESHOLD)).sum() == 1
    assert 6.0 in X and 0.0 in X and np.signbit(X[n + 1, 0]) and (DY == 0).sum() == 4


def test_guided_and_deconv_at_the_ties():
    x = np.array([-1.0, 0.0, 0.0, 2.0, 2.0, 6.0, 6.0, -1.0], np.float32)
    dy = np.array([1.0, 1.0, -1.0, 0.0, -2.0, 1.0, 3.0, -1.0], np.float32)
    run = lambda rule, op: testing.evaluate(  # noqa: E731
        lambda t: getattr(tf2, rule)(t, activation=op, alpha=ALPHA), x, "eager",
        upstream=dy).gradients[0]
    np.testing.assert_array_equal(run("guided_relu", "Relu"), [0, 0, 0, 0, 0, 1, 3, 0])
    np.testing.assert_array_equal(run("guided_relu", "Relu6"), [0, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(run("guided_relu", "LeakyRelu"),
                                  np.float32([ALPHA, ALPHA, 0, 0, 0, 1, 3, 0]))
    for op in attribution_ops.RELUS:
        got = run("deconv_relu", op)
        np.testing.assert_array_equal(got, [1, 1, 0, 0, 0, 1, 3, 0])
        assert not np.signbit(got).any(), op  # +0 where dy <= 0, never -0


def test_eps_lrp_at_zero_and_at_infinity():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1.0], np.float32)
    grads = {op: testing.evaluate(lambda t, op=op: tf2.eps_lrp(t, activation=op), x,
                                  "eager").gradients[0] for op in ("Relu", "Sigmoid", "Softplus")}
    # At x = 0, s(x) = +1: y / epsilon (Relu's y is 0 there, Sigmoid's 0.5).
    np.testing.assert_allclose(grads["Sigmoid"][:2], [0.5 / 1e-4, 0.5 / 1e-4], rtol=1e-6)
    np.testing.assert_array_equal(grads["Relu"][:2], [0.0, 0.0])
    # inf / inf would be NaN: the rule gives 0 where its quotient is not finite.
    assert grads["Relu"][2] == 0.0 and grads["Softplus"][2] == 0.0
    assert np.isfinite(np.concatenate(list(grads.values()))).all()


def test_deeplift_falls_back_to_the_ops_own_gradient_where_x_equals_r():
    """Where every input equals its reference, the rescale rule is the op's
    gradient as TensorFlow computes it (an independent check of the
    derivatives the rule writes out)."""
    half = np.array([[-2.0, -0.5, 0.0, 0.3, 1.0, 5.0, 6.0, 7.0]])
    x = np.concatenate([half, half])
    for op in attribution_ops.ACTIVATIONS:
        def plain(t, op=op):  # the op alone, with TensorFlow's own gradient
            return attribution_ops.forward(t, {"activation": op, "alpha": ALPHA})
        want = testing.evaluate(plain, x, "eager").gradients[0]
        got = testing.evaluate(lambda t, op=op: tf2.deeplift_rescale(
            t, activation=op, alpha=ALPHA), x, "eager").gradients[0]
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-16, err_msg=op)


def test_deeplift_threshold_is_inclusive_and_never_divides_by_zero():
    # x = 0.125, r = -0.125 through a Relu: |x - r| = 0.25.
    x = np.array([0.125, -0.125], np.float32)
    ratio = testing.evaluate(lambda t: tf2.deeplift_rescale(t, threshold=0.25), x,
                             "eager").gradients[0]
    np.testing.assert_array_equal(ratio, [0.5, 0.5])  # (0.125 - 0) / 0.25, both halves
    below = testing.evaluate(lambda t: tf2.deeplift_rescale(t, threshold=0.3), x,
                             "eager").gradients[0]
    np.testing.assert_array_equal(below, [1.0, 1.0])  # f'(0.125): Captum's fallback
    # float16: the default threshold 1e-10 underflows to 0; x == r still gets f'.
    g16 = testing.evaluate(lambda t: tf2.deeplift_rescale(t, activation="Sigmoid"),
                           np.float16([1.0, 1.0]), "eager").gradients[0]
    assert np.isfinite(g16).all()
    np.testing.assert_allclose(g16, [0.19661, 0.19661], rtol=1e-3)


def test_deeplift_summation_to_delta_on_a_two_layer_net():
    """Attributions of a hand-built two-layer net sum to f(x) - f(r) for
    every activation (Shrikumar et al.'s summation to delta), in every
    family and through frozen.patch."""
    rng = np.random.RandomState(0)
    w1, b1 = rng.randn(5, 7), rng.randn(7) * 0.3
    w2, b2 = rng.randn(7, 4), rng.randn(4) * 0.3
    w3 = rng.randn(4, 1)
    x, r = rng.randn(3, 5), rng.randn(3, 5) * 0.1
    batch = np.concatenate([x, r]).astype(np.float32)
    upstream = np.concatenate([np.ones((3, 1)), np.zeros((3, 1))]).astype(np.float32)
    for op in attribution_ops.ACTIVATIONS:
        def net(t, family, op=op):
            act = lambda h: family.deeplift_rescale(h, activation=op)  # noqa: E731
            h = act(tf.matmul(t, tf.constant(w1, t.dtype)) + tf.constant(b1, t.dtype))
            h = act(tf.matmul(h, tf.constant(w2, t.dtype)) + tf.constant(b2, t.dtype))
            return tf.matmul(h, tf.constant(w3, t.dtype))
        for family, mode in ((tf2, "eager"), (stopgrad, "eager"), (overrides, "graph")):
            r_ = testing.evaluate(lambda t, family=family: net(t, family), batch, mode,
                                  upstream=upstream)
            f = r_.outputs[:, 0]
            attributions = (r_.gradients[0][:3] * (batch[:3] - batch[3:])).sum(axis=1)
            np.testing.assert_allclose(attributions, f[:3] - f[3:], rtol=1e-5, atol=1e-6,
                                       err_msg="%s %s" % (op, family.__name__))


# Passes over the activation each rule's gradient makes, dy * g included:
# ops other than constants and slices along the batch (views). TensorFlow's
# own gradient of a ReLU is one (ReluGrad); the fused kernels make guided_relu
# three, the select with a scalar 0 makes deconv_relu two.
PASSES = {("guided_relu", "Relu"): 3, ("guided_relu", "Relu6"): 3,
          ("guided_relu", "LeakyRelu"): 3, ("deconv_relu", "Relu"): 2,
          ("eps_lrp", "Relu"): 7, ("eps_lrp", "Relu6"): 7, ("deeplift_rescale", "Relu"): 12,
          ("deeplift_rescale", "Relu6"): 12}
FUSED = {"Relu": "ReluGrad", "Relu6": "Relu6Grad", "LeakyRelu": "LeakyReluGrad"}


@pytest.mark.parametrize("rule,op", list(PASSES), ids=["%s-%s" % c for c in PASSES])
def test_each_rule_makes_few_passes_over_the_activation(rule, op, monkeypatch):
    """The separate ops (float16, bfloat16, eager, a GPU, attribution_ops.FUSE off)."""
    monkeypatch.setattr(attribution_ops, "FUSE", False)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [8, 5])
        dy = tf.compat.v1.placeholder(tf.float32, [8, 5])
        params = dict(go.estimators.normalize(rule, PARAMS[rule]), activation=op, alpha=ALPHA)
        y = attribution_ops.forward(x, params)
        before = len(g.get_operations())
        go.estimators.gradient(rule, x, dy, params, y=y)
        types = [o.type for o in g.get_operations()[before:]
                 if o.type not in ("Const", "StridedSlice")]
    assert len(types) <= PASSES[rule, op], types
    assert not {"ZerosLike", "Fill", "LogicalAnd"} & set(types), types
    if rule == "guided_relu":
        assert FUSED[op] in types, types


# --------------------------------------------------------- fused gradients

# Every pair of x and r from SPECIAL (ties, +-0, subnormals, 6, +-inf, NaN),
# each with every upstream gradient of UPSTREAM.
SPECIAL = [-np.inf, -7.0, -2.0, -1e-45, -0.0, 0.0, 1e-45, 1e-11, 1.0, 3.0, 6.0, 7.0,
           np.inf, np.nan]
UPSTREAM = [-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan]


def _special_grid(dtype):
    xs, rs, ds = zip(*itertools.product(SPECIAL, SPECIAL, UPSTREAM))
    return np.array(xs + rs, dtype), np.array(ds + ds, dtype)


def _built_gradient(rule, op, x, dy, params):
    """(dx, the number of XLA-compiled calls) of the rule's gradient built
    into a tf.function, as a FrozenFunction or a Session builds it."""
    @tf.function(autograph=False)
    def dx(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = getattr(tf2, rule)(x, activation=op, alpha=ALPHA, **params)
        return tape.gradient(y, x, output_gradients=dy)
    graph = dx.get_concrete_function(x, dy).graph
    calls = [o for o in graph.get_operations() if o.type in ("PartitionedCall",
                                                             "StatefulPartitionedCall")]
    compiled = [o for o in calls if o.get_attr("_XlaMustCompile")]
    return dx(x, dy).numpy(), len(compiled)


def _bits(a):
    return a.view({4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("rule,op", CASES, ids=["%s-%s" % c for c in CASES])
def test_the_fused_gradient_has_the_bits_of_the_separate_ops(rule, op, dtype, monkeypatch):
    x, dy = (tf.constant(a) for a in _special_grid(dtype))
    monkeypatch.setattr(attribution_ops, "FUSE", False)
    separate, none = _built_gradient(rule, op, x, dy, PARAMS[rule])
    monkeypatch.setattr(attribution_ops, "FUSE", True)
    fused, compiled = _built_gradient(rule, op, x, dy, PARAMS[rule])
    assert none == 0
    assert compiled == (rule in ("eps_lrp", "deeplift_rescale")
                        and (rule, op) not in attribution_ops._UNFUSED)
    mismatch = np.flatnonzero(_bits(separate) != _bits(fused))
    assert mismatch.size == 0, [(x.numpy()[i], dy.numpy()[i], separate[i], fused[i])
                                for i in mismatch[:5]]


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_keeps_the_separate_ops(dtype):
    x = tf.constant([[-1.0, 0.5], [0.25, 2.0]], dtype)
    _, compiled = _built_gradient("eps_lrp", "Relu", x, tf.ones_like(x), {})
    assert compiled == 0


def test_without_xla_the_rules_keep_their_separate_ops(monkeypatch):
    """A TensorFlow whose XLA cannot compile (the probe failed): the same
    gradient from separate ops, no compiled call."""
    x = tf.constant(np.array(X, np.float32))
    fused, compiled = _built_gradient("eps_lrp", "Relu", x, tf.ones_like(x), {})
    assert compiled == 1
    monkeypatch.setattr(attribution_ops._start_xla_quietly, "works", False)
    separate, none = _built_gradient("eps_lrp", "Relu", x, tf.ones_like(x), {})
    assert none == 0
    np.testing.assert_array_equal(_bits(separate), _bits(fused))


def test_a_rule_in_a_session_fused_and_in_a_tf1_while_loop_separate():
    """The overrides family in a TF1 graph: the gradient of a Relu before a
    v1 while_loop is fused, the one of the Relu in its body is separate ops
    (v1 control flow would not carry the call's inputs between its frames),
    and both equal the separate ops'."""
    def run(fuse):
        attribution_ops.FUSE = fuse
        try:
            with tf.Graph().as_default() as g:
                x = tf.compat.v1.placeholder(tf.float32, [None, 3])
                name = overrides.gradient_name("eps_lrp", epsilon=0.01)

                def body(i, h):
                    with g.gradient_override_map({"Relu": name}):
                        return i + 1, tf.nn.relu(h * 1.5 - 0.5)
                with g.gradient_override_map({"Relu": name}):
                    h = tf.nn.relu(x - 0.25)
                with control_flow_v1():
                    _, y = tf.compat.v1.while_loop(lambda i, h: i < 3, body, [0, h])
                dx, = tf.gradients(tf.reduce_sum(y), x)
                compiled = sum(1 for o in g.get_operations()
                               if "PartitionedCall" in o.type and o.get_attr("_XlaMustCompile"))
                with tf.compat.v1.Session() as sess:
                    return sess.run(dx, {x: [[1.0, -0.25, 0.5], [2.0, 0.0, -1.0]]}), compiled
        finally:
            attribution_ops.FUSE = True
    separate, none = run(False)
    fused, compiled = run(True)
    assert none == 0 and compiled == 1
    np.testing.assert_array_equal(_bits(separate), _bits(fused))
    assert np.any(separate != 0) and np.any(separate == 0)


def test_a_fused_deeplift_checks_its_batch_outside_the_compiled_function():
    """XLA drops an Assert: the odd-batch check of a batch unknown until run
    stays a separate op, and a static odd batch still names the op."""
    with tf.Graph().as_default() as g:
        t = tf.compat.v1.placeholder(tf.float32, [None, 2])
        with g.gradient_override_map({"Relu": overrides.gradient_name("deeplift_rescale")}):
            y = tf.nn.relu(t, name="unit")
        dx, = tf.gradients(y, t)
        assert any(o.type == "Assert" for o in g.get_operations())
        with tf.compat.v1.Session() as sess:
            np.testing.assert_array_equal(sess.run(dx, {t: np.ones((4, 2))}), np.ones((4, 2)))
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="deeplift_rescale on op .*unit.*: the batch"):
                sess.run(dx, {t: np.ones((3, 2))})
    with tf.Graph().as_default() as g:
        t = tf.compat.v1.placeholder(tf.float32, [3, 2])
        with g.gradient_override_map({"Relu": overrides.gradient_name("deeplift_rescale")}):
            y = tf.nn.relu(t, name="unit")
        with pytest.raises(RuleError, match="deeplift_rescale on op 'unit': the batch"):
            tf.gradients(y, t)


# ----------------------------------------------------------------- names

@pytest.mark.parametrize("rule", ["guided_relu", "deconv_relu", "eps_lrp", "deeplift_rescale"])
def test_names_describe_the_rule_not_the_forward(rule):
    name = overrides.gradient_name(rule, **PARAMS[rule])
    assert "activation" not in name and "alpha" not in name
    parsed = builtin_names.parse_builtin_name(name)
    assert parsed[0] == rule and builtin_names.builtin_setting(name)[0] == rule
    assert builtin_names.builtin_name(*builtin_names.builtin_setting(name)) == name
    assert registry.resolve(name) == name
    # A name may not carry what the gradient reads from the op.
    assert builtin_names.builtin_setting(name[:-1] + (", " if PARAMS[rule] else "")
                                         + "alpha=0.5)") is None
    assert not registry.is_resolvable("graph_override.%s(alpha=0.5)" % rule)


def test_names_round_trip_through_map_rules():
    rule = frozen.parse_rule("Tanh=eps_lrp:epsilon=0.01")
    assert rule.target == "graph_override.eps_lrp(epsilon=0.01)"
    assert frozen.parse_rule("Relu=deeplift_rescale").target == (
        "graph_override.deeplift_rescale(threshold=1e-10, shared_reference=False)")
    # A name written before shared_reference existed still resolves, to its default.
    assert builtin_names.builtin_setting("graph_override.deeplift_rescale(threshold=1e-10)") \
        == ("deeplift_rescale", {"threshold": 1e-10, "shared_reference": False,
                                 "activation": "Relu", "alpha": 0.2})
    assert frozen.parse_rule("Relu6=guided_relu").target == "graph_override.guided_relu()"
    with pytest.raises(RuleError, match="epsilon"):
        frozen.parse_rule("Tanh=eps_lrp:epsilon=0")


def test_the_activation_keyword_is_checked():
    with pytest.raises(ValueError, match="guided_relu\\(activation=...\\) must be one of "
                                         "'Relu', 'Relu6', 'LeakyRelu', got 'Tanh'"):
        tf2.guided_relu(tf.constant([1.0]), activation="Tanh")
    with pytest.raises(ValueError, match="must be one of"):
        tf2.eps_lrp(tf.constant([1.0]), activation="relu")


def test_override_map_and_op_with_gradient_read_the_op():
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    name = overrides.gradient_name("eps_lrp", epsilon=0.01)
    with tf.Graph().as_default() as g:
        t = tf.constant(x)
        with g.gradient_override_map({"Tanh": name, "LeakyRelu": name}):
            y = tf.nn.leaky_relu(tf.tanh(t), alpha=ALPHA)
        dx, = tf.gradients(y, t)
        with tf.compat.v1.Session() as sess:
            got = sess.run(dx)
    want = testing.evaluate(lambda u: tf2.eps_lrp(tf2.eps_lrp(u, 0.01, "Tanh"), 0.01,
                                                  "LeakyRelu", ALPHA), x, "eager")
    np.testing.assert_array_equal(got, want.gradients[0])
    legacy = tf2.op_with_gradient(tf.nn.relu6, overrides.gradient_name("guided_relu"))
    r = testing.evaluate(legacy, np.array([-1.0, 3.0, 6.0, 7.0], np.float32), "eager",
                         upstream=np.array([1.0, 2.0, 1.0, 1.0], np.float32))
    np.testing.assert_array_equal(r.gradients[0], [0.0, 2.0, 0.0, 0.0])


def test_keras_estimator_keeps_the_activation():
    est = tf2.Estimator("eps_lrp", activation="Tanh", epsilon=0.5)
    assert est.get_config() == {"estimator": "eps_lrp", "epsilon": 0.5,
                                "activation": "Tanh", "alpha": 0.2}
    assert tf2.Estimator.from_config(est.get_config()) == est
    np.testing.assert_allclose(est(tf.constant([1.0])).numpy(), np.tanh([1.0]), rtol=1e-6)


# ---------------------------------------------------------------- refusals

def test_an_override_on_an_op_the_rule_does_not_cover_raises_naming_it():
    with tf.Graph().as_default() as g:
        t = tf.constant([1.0, -1.0])
        with g.gradient_override_map({"Tanh": overrides.gradient_name("guided_relu")}):
            y = tf.tanh(t, name="squash")
        with pytest.raises(RuleError, match="guided_relu on op 'squash' \\(op Tanh\\): "
                                            "guided_relu is a gradient rule for Relu, "
                                            "Relu6, LeakyRelu only"):
            tf.gradients(y, t)


def test_deeplift_refuses_an_odd_batch():
    with pytest.raises(RuleError, match="batch \\(axis 0\\) has 3 rows, an odd number.*"
                                        "\\[inputs; references\\]"):
        testing.evaluate(tf2.deeplift_rescale, np.zeros((3, 2), np.float32), "eager")
    with pytest.raises(RuleError, match="scalar"):
        testing.evaluate(tf2.deeplift_rescale, np.float32(1.0), "eager")
    # A batch unknown until run: an Assert op with the same words.
    with tf.Graph().as_default() as g:
        t = tf.compat.v1.placeholder(tf.float32, [None, 2])
        with g.gradient_override_map({"Relu": overrides.gradient_name("deeplift_rescale")}):
            y = tf.nn.relu(t, name="unit")
        dx, = tf.gradients(y, t)
        with tf.compat.v1.Session() as sess:
            assert sess.run(dx, {t: np.ones((4, 2))}).shape == (4, 2)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="deeplift_rescale on op .*unit.*: the batch .axis 0. "
                                     "has an odd number of rows"):
                sess.run(dx, {t: np.ones((3, 2))})


# One reference for all four inputs: a tie (0.25), differences exactly at the
# threshold (0.0 - 0.25, 0.5 - 0.25), Relu6's 6 in the inputs.
SHARED_REFERENCE = [0.25, 0.25]


def _shared_reference_gradients(family, mode, op, dtype, shared):
    """dx of the rule on [INPUTS; SHARED_REFERENCE] (N + 1 rows) with
    shared_reference, or on [INPUTS; SHARED_REFERENCE x 4] (2N) without."""
    refs = [SHARED_REFERENCE] * (1 if shared else len(INPUTS))
    x = np.array(INPUTS + refs, dtype)
    dy = np.concatenate([DY[:len(INPUTS)], DY[len(INPUTS):][:len(refs)]]).astype(dtype)
    fn = lambda t: family.deeplift_rescale(  # noqa: E731
        t, threshold=THRESHOLD, shared_reference=shared, activation=op, alpha=ALPHA)
    return testing.evaluate(fn, x, mode, upstream=dy).gradients[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("op", attribution_ops.ACTIVATIONS)
def test_deeplift_with_a_shared_reference_equals_the_reference_repeated(op, dtype):
    """N + 1 rows give the inputs' gradients of 2N rows bit for bit, in the
    three families (the graph ones fused where that applies), and the
    reference row 0 times dy. Tanh and Softplus to an ulp: TensorFlow's
    kernels give the same input different last bits in their vector body and
    their scalar tail (softplus(0.25) in float64 ends ...341 in a row of 8,
    ...343 alone; tanh(0.25) ...821 and ...822),
    r sits in the tail of one batch and the body of the other, and
    f(x) - f(r) over x - r = 0.25 magnifies the ulp."""
    n = len(INPUTS)
    for family, mode in ((tf2, "eager"), (tf2, "function"), (stopgrad, "eager"),
                         (overrides, "graph")):
        shared = _shared_reference_gradients(family, mode, op, dtype, True)
        repeated = _shared_reference_gradients(family, mode, op, dtype, False)
        assert shared.shape == (n + 1, 2)
        where = "%s %s" % (family.__name__, mode)
        if op in ("Tanh", "Softplus"):
            np.testing.assert_allclose(shared[:n], repeated[:n], rtol=64 * np.finfo(dtype).eps,
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(_bits(shared[:n]), _bits(repeated[:n]), err_msg=where)
        np.testing.assert_array_equal(_bits(shared[n]), _bits((DY[n] * 0).astype(dtype)))
    x, r = np.array(INPUTS, dtype), np.array(SHARED_REFERENCE, dtype)
    assert np.any(x == r) and np.any(np.abs(x - r) == THRESHOLD)


def test_deeplift_with_a_shared_reference_checks_its_batch():
    with pytest.raises(RuleError, match="has 1 rows, fewer than 2.*\\[inputs; reference\\]"):
        testing.evaluate(lambda t: tf2.deeplift_rescale(t, shared_reference=True),
                         np.zeros((1, 2), np.float32), "eager")
    with tf.Graph().as_default() as g:
        t = tf.compat.v1.placeholder(tf.float32, [None, 2])
        name = overrides.gradient_name("deeplift_rescale", shared_reference=True)
        with g.gradient_override_map({"Relu": name}):
            y = tf.nn.relu(t, name="unit")
        dx, = tf.gradients(y, t, grad_ys=tf.ones_like(y))
        with tf.compat.v1.Session() as sess:  # an odd batch is N + 1 rows here
            np.testing.assert_array_equal(sess.run(dx, {t: [[1.0, -1.0], [2.0, 0.5],
                                                            [0.0, 0.0]]}),
                                          [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="deeplift_rescale on op .*unit.*: the batch .axis 0. "
                                     "has fewer than 2 rows"):
                sess.run(dx, {t: np.ones((1, 2))})


def _graph():
    """x -> Relu -> Tanh -> Sigmoid -> Elu -> Softplus -> LeakyRelu -> Selu
    -> Relu6 -> MatMul -> y, with a batch of unknown size."""
    rng = np.random.RandomState(3)
    with tf.Graph().as_default() as g:
        h = x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        for i, act in enumerate([tf.nn.relu, tf.tanh, tf.sigmoid, tf.nn.elu, tf.nn.softplus,
                                 lambda v: tf.nn.leaky_relu(v, alpha=ALPHA), tf.nn.selu,
                                 tf.nn.relu6]):
            h = act(tf.matmul(h, tf.constant(rng.randn(3, 3).astype(np.float32))) + 0.1 * i)
        tf.matmul(h, tf.ones([3, 1]), name="y")
        del x
    return g.as_graph_def()


def _run_frozen(graph_def, x, plain=False):
    with tf.Graph().as_default():
        importer = tf.compat.v1.import_graph_def if plain else frozen.import_graph_def
        xt, yt = importer(graph_def, return_elements=["x:0", "y:0"], name="")
        dx, = tf.gradients(yt, xt)
        with tf.compat.v1.Session() as sess:
            return sess.run([yt, dx], {xt: x})


def _family_net(x, rule, params):
    """_graph's net with the rule, in the tf2 family."""
    rng = np.random.RandomState(3)
    acts = ["Relu", "Tanh", "Sigmoid", "Elu", "Softplus", "LeakyRelu", "Selu", "Relu6"]

    def net(h):
        for i, act in enumerate(acts):
            h = tf.matmul(h, tf.constant(rng.randn(3, 3).astype(np.float32))) + 0.1 * i
            h = getattr(tf2, rule)(h, activation=act, alpha=ALPHA, **params)
        return tf.matmul(h, tf.ones([3, 1]))
    return testing.evaluate(net, x, "eager")


PORTABLE = [("eps_lrp", PARAMS["eps_lrp"]), ("deeplift_rescale", PARAMS["deeplift_rescale"]),
            ("deeplift_rescale", dict(PARAMS["deeplift_rescale"], shared_reference=True))]


@pytest.mark.parametrize("rule,params", PORTABLE, ids=["eps_lrp", "deeplift", "deeplift-shared"])
def test_patch_with_map_and_the_portable_form_equal_the_family(rule, params):
    x = np.random.RandomState(4).randn(6, 3).astype(np.float32)
    maps = ["%s=%s:%s" % (op, rule, ",".join("%s=%r" % kv for kv in params.items()))
            for op in ("Relu", "Tanh", "Sigmoid", "Elu", "Softplus", "LeakyRelu", "Selu",
                       "Relu6")]
    patched, report = frozen.patch(_graph(), maps)
    assert len(report.changes) == 8
    portable, _ = frozen.make_portable(_graph(), maps)
    y0, _ = _run_frozen(_graph(), x, plain=True)
    y1, dx1 = _run_frozen(patched, x)
    y2, dx2 = _run_frozen(portable, x, plain=True)
    want = _family_net(x, rule, params)
    np.testing.assert_array_equal(y1, y0)
    np.testing.assert_array_equal(y2, y0)
    # The same products in the same order: measured bitwise equal under
    # TensorFlow 2.15 and 2.21 (float rounding would be allowed).
    np.testing.assert_array_equal(dx1, want.gradients[0])
    np.testing.assert_array_equal(dx2, dx1)
    # The frozen graph as a TF2 function (graph-override convert --map ...).
    fn = frozen.to_function(_graph(), inputs=["x:0"], outputs=["y:0"], rules=maps)
    t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(t)
        out = fn(t)
    np.testing.assert_array_equal(out.numpy(), y0)
    np.testing.assert_array_equal(tape.gradient(out, t).numpy(), dx1)


def test_patch_refuses_a_rule_on_an_op_type_it_does_not_cover():
    with pytest.raises(RuleError, match="patch: guided_relu on node '.*' \\(op Tanh\\): "
                                        "guided_relu is a gradient rule for Relu, Relu6, "
                                        "LeakyRelu only"):
        frozen.patch(_graph(), "Tanh=guided_relu")
    with pytest.raises(RuleError, match="eps_lrp on node 'MatMul' \\(op MatMul\\)"):
        frozen.patch(_graph(), "MatMul=eps_lrp")
    with pytest.raises(RuleError, match="deeplift_rescale on node 'MatMul' \\(op MatMul\\)"):
        frozen.make_portable(_graph(), "MatMul=deeplift_rescale")


def test_patch_refuses_forward_keywords_in_a_rule():
    """activation= and alpha= build the forward of the family functions; a
    rule on a node reads the node's, so setting them there is refused rather
    than ignored."""
    with pytest.raises(RuleError, match="patch: eps_lrp on node 'LeakyRelu': alpha= choose "
                                        "the forward op.*Drop alpha from the rule"):
        frozen.patch(_graph(), "LeakyRelu=eps_lrp:alpha=0.5")
    with pytest.raises(RuleError, match="activation= choose"):
        frozen.patch(_graph(), [frozen.Rule("Tanh", estimator="eps_lrp",
                                            params={"activation": "Sigmoid"})])


@pytest.mark.parametrize("rule", ["guided_relu", "deconv_relu"])
def test_make_portable_refuses_rules_not_linear_in_dy(rule):
    with pytest.raises(RuleError, match="make_portable: %s cannot be made portable: its "
                                        "gradient, dy \\* \\[dy > 0\\].* is not linear in "
                                        "dy" % rule):
        frozen.make_portable(_graph(), "Relu=%s" % rule)
    # patch() gives it: the frozen graph's gradient through graph_override.
    patched, _ = frozen.patch(_graph(), "Relu=%s" % rule)
    assert go.registry.is_resolvable(
        [n for n in patched.node if n.op == "Relu"][0].attr["_gradient_op_type"].s.decode())


def test_the_patch_command_maps_rules_and_refuses_what_cannot_work(tmp_path, capsys):
    from graph_override import cli  # pylint: disable=import-outside-toplevel
    model = str(tmp_path / "model.pb")
    frozen.save(_graph(), model)
    out = str(tmp_path / "out.pb")
    assert cli.main(["patch", model, "-o", out, "--map", "Tanh=eps_lrp:epsilon=0.01",
                     "--map", "Relu6=deeplift_rescale:threshold=0.001"]) == 0
    names = {n.op: n.attr["_gradient_op_type"].s.decode() for n in frozen.load(out).node
             if "_gradient_op_type" in n.attr}
    assert names == {"Tanh": "graph_override.eps_lrp(epsilon=0.01)",
                     "Relu6": ("graph_override.deeplift_rescale(threshold=0.001, "
                               "shared_reference=False)")}
    for argv, words in [(["--map", "MatMul=eps_lrp"], "eps_lrp on node 'MatMul' (op MatMul)"),
                        (["--portable", "--map", "Relu=deconv_relu"],
                         "deconv_relu cannot be made portable")]:
        bad = str(tmp_path / "bad.pb")
        assert cli.main(["patch", model, "-o", bad] + argv) == 1
        assert words in capsys.readouterr().err
        assert not (tmp_path / "bad.pb").exists()


def test_the_portable_deeplift_checks_the_batch_when_run():
    """In the portable form the multiplier is part of the forward, so an odd
    batch fails there, with the rule's words (documented in the guide)."""
    portable, _ = frozen.make_portable(_graph(), "Relu=deeplift_rescale")
    y, dx = _run_frozen(portable, np.ones((4, 3), np.float32), plain=True)
    assert y.shape == (4, 1) and dx.shape == (4, 3)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="deeplift_rescale on a node made portable: the batch"):
        _run_frozen(portable, np.ones((3, 3), np.float32), plain=True)


def test_the_first_compiled_gradient_keeps_stderr_quiet_when_asked():
    """XLA's first compilation writes "Compiled cluster using XLA!" from
    native code past TF_CPP_MIN_LOG_LEVEL; with the level at 3 nothing
    reaches stderr (TensorFlow imported quietly, as the command line does)."""
    code = (
        "from graph_override.cli import import_tensorflow_quietly\n"
        "import_tensorflow_quietly()\n"
        "import numpy as np, tensorflow as tf\n"
        "from graph_override import attribution\n"
        "f = lambda x: tf.nn.relu(tf.matmul(x, tf.constant([[1.0, -1.0], [2.0, 0.5]])))\n"
        "r = attribution.attribute(f, 'eps_lrp', np.ones((2, 2), 'float32'), target=0)\n"
        "print(r.maps.tolist())\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    run = warm_python.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=False)
    assert run.returncode == 0, run.stderr
    want = 3.0 / (3.0 + 1e-4) * np.array([[1.0, 2.0], [1.0, 2.0]])  # w[:, 0] y / (x + eps)
    np.testing.assert_allclose(json.loads(run.stdout), want, rtol=1e-6)
    assert run.stderr == ""
