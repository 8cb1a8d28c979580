"""graph_override.frozen: inspect, rules, patch, make_portable, import_graph_def.

Gradients through patched graphs are compared with numpy references and with
the tf2 family on inputs holding exact zeros, clip boundaries and infinities.
The fresh-process checks on real frozen models are in test_frozen_models.py.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import frozen_tf2_models as models
import graph_override
from graph_override import estimators, frozen, scope, testing, tf2
from graph_override.errors import (EagerModeError, GraphDefError, NoMatchError,
                                   UnknownGradientError, UnknownOpTypeError)

X = np.array([-np.inf, -2.0, -1.0001, -1.0, -0.5, -0.05, -0.0, 0.0, 0.05, 0.0501,
              0.5, 0.9999, 1.0, 1.0001, 2.5, np.inf], np.float32)
UP = np.random.RandomState(7).randn(X.size).astype(np.float32)

# estimator -> (op to patch, parameters)
CASES = {
    "ste_sign": ("Sign", {}),
    "approx_sign": ("Sign", {}),
    "swish_sign": ("Sign", {"beta": 3.0}),
    "ste_heaviside": ("Sign", {"clip_value": 0.5}),
    "ste_tern": ("Sign", {"threshold_value": 0.05, "clip_value": 1.0}),
    "ste_round": ("Round", {}),
    "ste_floor": ("Floor", {}),
    "dorefa_quantize": ("Round", {"k_bit": 3}),
    "flip_gradient": ("Identity", {"scale": 0.5}),
    "scale_gradient": ("Identity", {"scale": -3.0}),
    "clip_gradient": ("Identity", {"clip_value_min": -0.3, "clip_value_max": 0.3}),
    # Attribution rules (tests/test_estimator_rules.py has every op type);
    # X has an even count: deeplift_rescale reads it as [inputs; references].
    "guided_relu": ("Relu", {}),
    "deconv_relu": ("Relu", {}),
    "eps_lrp": ("Relu", {"epsilon": 0.01}),
    "deeplift_rescale": ("Relu", {"threshold": 1e-3}),
}
_OPS = {"Sign": tf.sign, "Round": tf.round, "Floor": tf.floor, "Identity": tf.identity,
        "Relu": tf.nn.relu}


def _graph(op_type, dtype=tf.float32):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(dtype, [None], name="x")
        _OPS[op_type](x, name="y")
    return g.as_graph_def()


def _run(graph_def, x, up, *, plain=False):
    """Outputs and d(sum(y * up))/dx of a GraphDef, in a fresh tf.Graph."""
    with tf.Graph().as_default() as g:
        importer = tf.compat.v1.import_graph_def if plain else frozen.import_graph_def
        xt, yt = importer(graph_def, return_elements=["x:0", "y:0"], name="")
        dx, = tf.gradients(yt, xt, grad_ys=tf.constant(up, dtype=yt.dtype))
        with tf.compat.v1.Session(graph=g) as sess:
            if dx is None:
                return sess.run(yt, {xt: x}), np.zeros_like(x)
            return sess.run([yt, dx], {xt: x})


def _tf2_gradient(estimator, params, x=X, up=UP):
    fn = getattr(tf2, estimator)
    return testing.evaluate(lambda t: fn(t, **params), x, "eager", upstream=up).gradients[0]


def _numpy_gradient(estimator, x, up, params):
    a = np.abs(x)
    if estimator in ("ste_sign", "ste_heaviside", "ste_tern"):
        return up * (a <= params.get("clip_value", 1.0))
    if estimator == "approx_sign":
        return up * np.maximum(0.0, 2 - 2 * a)
    if estimator in ("ste_round", "ste_floor"):
        return up
    if estimator == "dorefa_quantize":
        return up * ((x >= 0) & (x <= 1))
    if estimator == "flip_gradient":
        return -params["scale"] * up
    if estimator == "scale_gradient":
        return params["scale"] * up
    if estimator == "clip_gradient":
        return np.clip(up, params["clip_value_min"], params["clip_value_max"])
    return None  # swish_sign: compared with tf2 only


@pytest.mark.parametrize("estimator", sorted(CASES))
def test_patch_gives_the_estimators_gradient(estimator):
    op_type, params = CASES[estimator]
    original = _graph(op_type)
    fixed, report = frozen.patch(original, [frozen.Rule(op_type, estimator=estimator,
                                                        params=params)])
    assert [(c.node, c.action) for c in report.changes] == [("y", "set")]
    y, dx = _run(fixed, X, UP)
    y0, _ = _run(original, X, UP)
    np.testing.assert_array_equal(y.view(np.uint32), y0.view(np.uint32))
    expected = _numpy_gradient(estimator, X, UP, params)
    if expected is not None:
        np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=0)
    np.testing.assert_allclose(dx, _tf2_gradient(estimator, params), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("estimator", sorted(e for e in CASES
                                             if estimators.ESTIMATORS[e].linear))
def test_make_portable_keeps_forward_bits_and_needs_no_registry(estimator):
    op_type, params = CASES[estimator]
    original = _graph(op_type)
    portable, report = frozen.make_portable(
        original, [frozen.Rule(op_type, estimator=estimator, params=params)])
    assert report.portable and report.nodes_added > 0
    assert not any(frozen.GRADIENT_ATTR in n.attr for n in portable.node)
    y, dx = _run(portable, X, UP, plain=True)
    y0, _ = _run(original, X, UP, plain=True)
    np.testing.assert_array_equal(y.view(np.uint32), y0.view(np.uint32))  # -0.0 too
    # As in the stopgrad family, x = +-inf gets gradient 0: h = x * g(x)
    # would be inf there, and inf - inf would turn the forward value into NaN.
    finite = np.isfinite(X)
    np.testing.assert_array_equal(dx[~finite], 0.0)
    expected = _numpy_gradient(estimator, X, UP, params)
    if expected is not None:
        np.testing.assert_allclose(dx[finite], expected[finite], rtol=1e-6, atol=0)
    np.testing.assert_allclose(dx[finite], _tf2_gradient(estimator, params)[finite],
                               rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [tf.float64, tf.float16])
def test_make_portable_other_float_dtypes(dtype):
    x = X.astype(dtype.as_numpy_dtype)
    up = UP.astype(dtype.as_numpy_dtype)
    portable, _ = frozen.make_portable(_graph("Sign", dtype), "Sign=ste_sign")
    y, dx = _run(portable, x, up, plain=True)
    np.testing.assert_array_equal(y, np.sign(x))
    np.testing.assert_array_equal(dx, up * (np.abs(x) <= 1))


def test_make_portable_refuses_clip_gradient_and_registered_names():
    with pytest.raises(frozen.RuleError, match="clip_gradient cannot be made portable"):
        frozen.make_portable(_graph("Identity"),
                             "Identity=clip_gradient:clip_value_min=-1,clip_value_max=1")
    name = graph_override.register_gradient(_passthrough)
    with pytest.raises(frozen.RuleError, match="plain TensorFlow cannot resolve"):
        frozen.make_portable(_graph("Sign"), "Sign=" + name)


def _passthrough(op, dy):
    del op
    return dy


def test_make_portable_keeps_tensorflows_own_gradient_names():
    """Identity is TensorFlow's own gradient: plain TensorFlow resolves it
    anywhere, so the portable graph keeps the name on the node."""
    portable, report = frozen.make_portable(_graph("Sign"), "Sign=Identity")
    assert [(c.action, c.after) for c in report.changes] == [("set", "Identity")]
    y, dx = _run(portable, X, UP, plain=True)
    np.testing.assert_array_equal(y, np.sign(X))
    np.testing.assert_array_equal(dx, UP)


def test_make_portable_refuses_a_node_used_through_a_second_output():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        a, b = tf.unstack(x, name="parts")
        tf.add(a, b, name="y")
    with pytest.raises(frozen.RuleError, match="'parts' is used through output 1"):
        frozen.make_portable(g.as_graph_def(), "Unpack=flip_gradient")


def test_patch_leaves_its_input_alone():
    original = _graph("Sign")
    before = original.SerializeToString(deterministic=True)
    frozen.patch(original, "Sign=ste_sign")
    frozen.make_portable(original, "Sign=ste_sign")
    assert original.SerializeToString(deterministic=True) == before


def test_patch_registered_name_and_first_rule_wins():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        tf.sign(tf.sign(x, name="first"), name="y")
    fixed, report = frozen.patch(g.as_graph_def(), [
        frozen.parse_rule("Sign=Identity", name_regex="^first$"),
        "Sign=ste_sign"])
    after = {c.node: c.after for c in report.changes}
    assert after == {"first": "Identity", "y": "graph_override.ste_sign(clip_value=1.0)"}
    assert report.rule_matches[1][1] == 2  # selected both, applied to one
    _, dx = _run(fixed, X, UP)
    # d/dx: ste mask at y's input sign(x) (|sign x| <= 1 always) times
    # Identity's pass-through at "first".
    np.testing.assert_array_equal(dx, UP)


def test_rule_that_selects_nothing():
    with pytest.raises(NoMatchError, match="op type Round"):
        frozen.patch(_graph("Sign"), ["Sign=ste_sign", "Round=ste_round"])
    with pytest.warns(scope.NoMatchWarning):
        frozen.patch(_graph("Sign"), "Round=ste_round", on_no_match="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, report = frozen.patch(_graph("Sign"), "Round=ste_round", on_no_match="ignore")
    assert report.changes == []


def test_patch_refuses_nodes_without_inputs():
    with pytest.raises(frozen.RuleError, match="'x' .*no input"):
        frozen.patch(_graph("Sign"), "Placeholder=ste_sign")


@pytest.mark.parametrize("text, rule", [
    ("Sign=ste_sign", frozen.Rule("Sign", estimator="ste_sign")),
    ("Identity=flip_gradient:scale=0.5",
     frozen.Rule("Identity", estimator="flip_gradient", params={"scale": 0.5})),
    ("Sign=ste_tern:threshold_value=0.1,clip_value=None",
     frozen.Rule("Sign", estimator="ste_tern",
                 params={"threshold_value": 0.1, "clip_value": None})),
    ("Round=dorefa_quantize:k_bit=4",
     frozen.Rule("Round", estimator="dorefa_quantize", params={"k_bit": 4})),
    ("Sign=ste_tern:ternary_weight_networks=True",
     frozen.Rule("Sign", estimator="ste_tern", params={"ternary_weight_networks": True})),
    ("Sign=ste_tern:ternary_weight_networks=true,clip_value=none",
     frozen.Rule("Sign", estimator="ste_tern",
                 params={"ternary_weight_networks": True, "clip_value": None})),
    ("Sign=ste_tern:ternary_weight_networks=False",
     frozen.Rule("Sign", estimator="ste_tern", params={"ternary_weight_networks": False})),
    ("Sign=ste_tern:ternary_weight_networks=1",
     frozen.Rule("Sign", estimator="ste_tern", params={"ternary_weight_networks": True})),
    ("gradient:CustomGradient-*=remove",
     frozen.Rule(gradient_op_type="CustomGradient-*", remove=True)),
    ("Relu=Identity", frozen.Rule("Relu", gradient="Identity")),
])
def test_parse_rule(text, rule):
    assert frozen.parse_rule(text) == rule


@pytest.mark.parametrize("text, error, match", [
    ("Sign", frozen.RuleError, "expected SELECTOR=ACTION"),
    ("=ste_sign", frozen.RuleError, "nothing before"),
    ("Sign=", frozen.RuleError, "nothing after"),
    ("sign=ste_sign", UnknownOpTypeError, "Did you mean 'Sign'"),
    ("Sign=ste_sign:clip=1", frozen.RuleError, "unknown parameter.*clip_value"),
    ("Sign=ste_sign:clip_value", frozen.RuleError, "KEY=VALUE"),
    ("Sign=ste_sign:clip_value=abc", frozen.RuleError,
     r"--map 'Sign=ste_sign:clip_value=abc': parameter clip_value: 'abc' is not a "
     r"number, True, False or None"),
    ("Sign=ste_tern:ternary_weight_networks=yes", frozen.RuleError,
     r"--map 'Sign=ste_tern:ternary_weight_networks=yes': parameter "
     r"ternary_weight_networks: 'yes' is not a number, True, False or None"),
    ("Sign=ste_sign:clip_value=True", frozen.RuleError,
     r"--map 'Sign=ste_sign:clip_value=True': .*ste_sign\(clip_value=\.\.\.\) must be "
     r"a Python number or None, got bool"),
    ("Sign=ste_tern:ternary_weight_networks=None", frozen.RuleError,
     r"--map 'Sign=ste_tern:ternary_weight_networks=None': .*"
     r"ste_tern\(ternary_weight_networks=\.\.\.\) must be True or False, got None"),
    ("Sign=ste_tern:ternary_weight_networks=2", frozen.RuleError,
     r"must be True or False, got 2"),
    ("Sign=ste_sign:clip_value=-1", frozen.RuleError, ">= 0"),
    ("Identity=scale_gradient", frozen.RuleError, "missing required parameter 'scale'"),
    ("*=flip_gradient", frozen.RuleError, "combine it with a name regex"),
    ("Sign=NoSuchGradient123", frozen.RuleError, "no gradient is registered"),
    ("gradient:=remove", frozen.RuleError, "needs a name or glob"),
    ("Identity=clip_gradient:clip_value_min=-1,clip_value_max=1,clip_value_min=-2",
     frozen.RuleError, "parameter 'clip_value_min' is given twice"),
    ("Sign=ste_sign:clip_value=1, clip_value=2", frozen.RuleError,
     "'clip_value' is given twice"),
])
def test_parse_rule_errors(text, error, match):
    with pytest.raises(error, match=match):
        frozen.parse_rule(text)


def test_rule_needs_one_selector_and_one_action():
    with pytest.raises(frozen.RuleError, match="needs a selector"):
        frozen.Rule(estimator="ste_sign")
    with pytest.raises(frozen.RuleError, match="exactly one action"):
        frozen.Rule("Sign")
    with pytest.raises(frozen.RuleError, match="exactly one action"):
        frozen.Rule("Sign", estimator="ste_sign", remove=True)
    with pytest.raises(frozen.RuleError, match="not a valid regular expression"):
        frozen.Rule("Sign", name_regex="(", estimator="ste_sign")


# --- tf.custom_gradient graphs ----------------------------------------------

DEAD_NAME = "CustomGradient-987654321"


def _custom_gradient_graph(dead=True):
    """x -> custom_gradient(sign, straight-through clipped) -> y, with the
    IdentityN's name replaced by one no process has registered."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")

        @tf.custom_gradient
        def ste(t):
            return tf.sign(t), lambda dy: dy * tf.cast(tf.abs(t) <= 1.0, dy.dtype)

        tf.identity(ste(x), name="y")
    # As a frozen graph holds it: only what "y" needs.
    graph_def = tf.compat.v1.graph_util.extract_sub_graph(g.as_graph_def(), ["y"])
    if dead:
        for node in graph_def.node:
            if frozen.GRADIENT_ATTR in node.attr:
                node.attr[frozen.GRADIENT_ATTR].s = DEAD_NAME.encode()
    return graph_def


def test_inspect_reports_an_unresolvable_custom_gradient_name():
    report = frozen.inspect(_custom_gradient_graph())
    assert not report.ok
    assert [(f["op"], f["gradient"]) for f in report.gradient_failures] == [
        ("IdentityN", DEAD_NAME)]
    assert "die with the process" in report.gradient_failures[0]["reason"]
    assert report.gradient_names == [{
        "name": DEAD_NAME, "count": 1, "nodes": ["IdentityN"], "resolvable": False,
        "needs_graph_override": False}]
    # The Sign under the custom gradient is bypassed, not a vanishing gradient.
    assert report.zero_gradients == []
    assert DEAD_NAME in report.format()


def test_import_graph_def_fails_early_listing_the_names():
    with tf.Graph().as_default() as g:
        with pytest.raises(UnknownGradientError, match=DEAD_NAME + ".*IdentityN"):
            frozen.import_graph_def(_custom_gradient_graph())
        assert g.get_operations() == []  # nothing imported


def test_plain_tensorflow_fails_on_the_dead_name():
    """What the user sees without graph_override: the reason for all this."""
    with tf.Graph().as_default():
        x, y = tf.compat.v1.import_graph_def(
            _custom_gradient_graph(), return_elements=["x:0", "y:0"], name="")
        with pytest.raises(LookupError, match="No gradient defined for operation"):
            tf.gradients(y, x)


def test_patch_repairs_the_custom_gradient_with_an_estimator():
    fixed, report = frozen.patch(_custom_gradient_graph(),
                                 "gradient:CustomGradient-*=ste_sign")
    assert [(c.node, c.before, c.action) for c in report.changes] == [
        ("IdentityN", DEAD_NAME, "rewrite")]
    assert frozen.inspect(fixed).ok
    y, dx = _run(fixed, X, UP, plain=True)  # no registry needed
    np.testing.assert_array_equal(y, np.sign(X))
    np.testing.assert_array_equal(dx, UP * (np.abs(X) <= 1))
    np.testing.assert_allclose(dx, _tf2_gradient("ste_sign", {}), rtol=1e-6)


def test_patch_removes_the_custom_gradient_name():
    fixed, report = frozen.patch(_custom_gradient_graph(), "gradient:CustomGradient-*=remove")
    assert [(c.node, c.action, c.after) for c in report.changes] == [
        ("IdentityN", "remove", None)]
    _, dx = _run(fixed, X, UP, plain=True)
    np.testing.assert_array_equal(dx, np.zeros_like(X))  # Sign's own gradient
    assert [z["op"] for z in frozen.inspect(fixed).zero_gradients] == ["Sign"]


def test_patch_refuses_clip_gradient_on_a_custom_gradient_identity_n():
    with pytest.raises(frozen.RuleError, match="not linear in dy"):
        frozen.patch(_custom_gradient_graph(), "gradient:CustomGradient-*="
                     "clip_gradient:clip_value_min=-1,clip_value_max=1")


def test_patch_refuses_identity_n_that_is_not_the_custom_gradient_pattern():
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, name="a")
        b = tf.compat.v1.placeholder(tf.int32, name="b")
        with g.gradient_override_map({"IdentityN": DEAD_NAME}):
            tf.identity_n([a, b], name="pair")
    with pytest.raises(frozen.RuleError, match="not the tf.custom_gradient pattern"):
        frozen.patch(g.as_graph_def(), "IdentityN=ste_sign")


# --- inspect ----------------------------------------------------------------

def test_inspect_histogram_missing_gradients_and_risky_ops():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        s = tf.raw_ops.Snapshot(input=tf.sign(x, name="s"), name="snap")  # no gradient
        tf.io.write_file("out.txt", tf.strings.reduce_join(tf.strings.as_string(s)),
                         name="dump")
        tf.math.is_finite(x, name="finite")  # bool output: never differentiated
        y = tf.identity(s, name="y")
    graph_def = g.as_graph_def()
    custom = graph_def.node.add(name="custom", op="MyCustomOp", input=["y"])
    del custom  # an op type this TensorFlow does not know
    report = frozen.inspect(graph_def)
    assert report.op_types["Sign"] == 1 and report.nodes == len(graph_def.node)
    failures = {f["node"]: f["reason"] for f in report.gradient_failures}
    assert set(failures) == {"snap", "custom"}
    assert "No gradient defined for operation type Snapshot" in failures["snap"]
    assert "unknown op type MyCustomOp" in failures["custom"]
    assert [(r["node"], r["reason"]) for r in report.risky_ops] == [("dump", "writes files")]
    assert [z["node"] for z in report.zero_gradients] == ["s"]
    data = report.to_dict()
    assert data["ok"] is False and data["op_types"]["WriteFile"] == 1
    del y


def test_inspect_builtin_names_resolve_but_need_graph_override():
    fixed, _ = frozen.patch(_graph("Sign"), "Sign=ste_sign")
    report = frozen.inspect(fixed)
    assert report.ok
    assert report.gradient_names[0]["resolvable"] is True
    assert report.gradient_names[0]["needs_graph_override"] is True
    portable, preport = frozen.make_portable(fixed, "Identity=flip_gradient",
                                             on_no_match="ignore")
    assert "plain TensorFlow cannot resolve" in preport.unresolved_left[0]
    del portable


def test_import_graph_def_in_eager_mode_raises():
    with pytest.raises(EagerModeError, match="tf.Graph"):
        frozen.import_graph_def(_graph("Sign"))


def test_non_graphdef_arguments():
    with pytest.raises(GraphDefError, match="expected a tf.compat.v1.GraphDef"):
        frozen.inspect(b"bytes")
    with pytest.raises(GraphDefError, match="expected a tf.compat.v1.GraphDef"):
        frozen.patch("model.pb", "Sign=ste_sign")


# DeepLIFT's MaxPool and Softmax rules take batches of [inputs; references]
# of windows or rows, not the vector X: tests/attribution/test_deeplift_conserves.py
# and tests/test_estimator_rules.py patch and check them.
SHAPED = {"deeplift_maxpool", "deeplift_softmax"}


def test_estimator_table_covers_every_estimator():
    assert set(CASES) | SHAPED == set(estimators.ESTIMATORS) and not set(CASES) & SHAPED


def test_fast_and_message_paths_agree_and_keep_other_fields():
    """Names set on nodes without one are appended to the nodes' bytes; with
    a gradient attr somewhere in the graph every node is edited as a message.
    Both keep the library and versions and give the same nodes."""
    original = _graph("Sign")
    original.versions.producer = 1234
    original.library.function.add().signature.name = "unused_function"
    fast, fast_report = frozen.patch(original, "Sign=ste_sign")
    marked = tf.compat.v1.GraphDef()
    marked.CopyFrom(original)
    marked.node[0].attr[frozen.GRADIENT_ATTR].s = b"Identity"  # forces the message path
    slow, slow_report = frozen.patch(marked, "Sign=ste_sign")
    del slow.node[0].attr[frozen.GRADIENT_ATTR]
    assert fast == slow
    assert fast.versions.producer == 1234
    assert fast.library.function[0].signature.name == "unused_function"
    assert fast_report.to_dict() == slow_report.to_dict()


def test_inspect_skips_binarized_constants():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.identity(tf.constant([[1.0], [-2.0]]), name="w_read")
        tf.sign(tf.matmul(x, tf.sign(w, name="w_sign")), name="act_sign")
    assert [z["node"] for z in frozen.inspect(g.as_graph_def()).zero_gradients] == [
        "act_sign"]


def test_make_portable_refuses_names_that_are_taken():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        y = tf.sign(x, name="y")
        tf.identity(y, name="y/graph_override_portable/StopGradient")
    with pytest.raises(frozen.RuleError, match="exists already"):
        frozen.make_portable(g.as_graph_def(), "Sign=ste_sign")


def test_inspect_flags_python_callbacks_and_file_reads():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        tf.compat.v1.py_func(np.square, [x], tf.float32, name="callback")
        tf.io.read_file("weights.bin", name="reader")
    risky = {r["node"]: (r["op"], r["reason"])
             for r in frozen.inspect(g.as_graph_def()).risky_ops}
    assert risky["callback"][0] == "PyFunc" and "Python code" in risky["callback"][1]
    assert risky["reader"] == ("ReadFile", "reads files")


def test_make_portable_refuses_non_float_nodes():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.int32, [None], name="x")
        tf.sign(x, name="y")
    with pytest.raises(frozen.RuleError, match="'y' \\(op Sign\\) has dtype int32"):
        frozen.make_portable(g.as_graph_def(), "Sign=ste_sign")
    graph_def = g.as_graph_def()
    graph_def.node[1].attr["T"].type = 999  # no such DataType
    with pytest.raises(frozen.RuleError, match="enum 999"):
        frozen.make_portable(graph_def, "Sign=ste_sign")


def test_a_gradient_selector_may_name_a_builtin_gradient():
    rule = frozen.parse_rule("gradient:graph_override.ste_sign(clip_value=1.0)=remove")
    assert str(rule) == "gradient graph_override.ste_sign(clip_value=1.0) -> remove"
    rule = frozen.parse_rule(
        "gradient:graph_override.ste_sign(clip_value=1.0)=flip_gradient:scale=0.5")
    assert rule.estimator == "flip_gradient" and rule.params["scale"] == 0.5


def test_inspect_skips_iterator_and_dataset_ops():
    """IteratorGetNext reads a resource (the iterator) and dataset ops make
    dataset variants: no gradient reaches them, so they are no finding."""
    graph_def, _, _ = models.iterator_cnn()
    report = frozen.inspect(graph_def)
    assert report.gradient_failures == [] and report.ok
    assert report.op_types["IteratorGetNext"] == 1


@pytest.mark.parametrize("resource", [False, True], ids=["VariableV2", "VarHandleOp"])
def test_inspect_reports_variables(resource):
    graph_def, _, _ = models.not_frozen(resource)
    report = frozen.inspect(graph_def)
    op = "VarHandleOp" if resource else "VariableV2"
    assert report.variables == [{"node": "dense/kernel", "op": op},
                                {"node": "dense/bias", "op": op}]
    assert not report.ok and report.to_dict()["variables"] == report.variables
    assert "2 variable(s): the graph is not frozen" in report.format()
    assert frozen.inspect(models.relu_mlp()[0]).variables == []
