"""register_gradient, built-in names, the gradient contract, and the lock."""

import sys
import textwrap
import threading
import types

import numpy as np
import pytest

import warm_python
import tensorflow as tf

import graph_override as go
from graph_override import _compat, builtin_names, overrides, registry


def _grad_x2(op, grad):
    return grad * 2.0


def _grad_x3(op, grad):
    return grad * 3.0


def _gradient_through(name, x_value):
    """d tf.sign(x)/dx with Sign re-routed to `name`, in a Session."""
    with tf.Graph().as_default():
        x = tf.constant(x_value)
        with tf.compat.v1.get_default_graph().gradient_override_map({"Sign": name}):
            y = tf.sign(x)
        dx, = tf.gradients(y, x)
        with tf.compat.v1.Session() as sess:
            return sess.run(dx)


def test_register_is_idempotent_and_returns_a_callable_name():
    before = go.registry_size()
    name = go.register_gradient(_grad_x2)
    assert isinstance(name, str) and name == "%s._grad_x2" % __name__
    assert go.register_gradient(_grad_x2) == name
    assert go.registry_size() - before <= 1
    size = go.registry_size()
    for _ in range(100):
        go.register_gradient(_grad_x2)
    assert go.registry_size() == size
    np.testing.assert_array_equal(_gradient_through(name, [1.0, -2.0]), [2.0, 2.0])
    # RegisteredGradient stays callable like the function.
    assert name.function is _grad_x2


def test_registering_a_decorated_function_again_is_a_no_op():
    """A decorated function is a RegisteredGradient, a str: registering it
    again (a re-run cell, a helper that registers what it is given) gives
    the same name, not the hint meant for a plain name string."""
    name = go.register_gradient(_grad_x2)
    size = go.registry_size()
    assert go.register_gradient(name) == name
    assert go.register_gradient(name).function is _grad_x2
    assert go.registry_size() == size


def test_decorator_forms():
    @go.register_gradient(name="test_registry.Decorated")
    def decorated(op, grad):
        return grad * 5.0

    assert decorated == "test_registry.Decorated"
    assert callable(decorated) and decorated(None, 2.0) == 10.0

    @go.register_gradient
    def bare(op, grad):
        return -grad

    assert bare.endswith("test_decorator_forms.<locals>.bare")
    np.testing.assert_array_equal(_gradient_through(bare, [3.0]), [-1.0])


SOURCE = textwrap.dedent("""
    def notebook_grad(op, grad):
        return grad * 7.0
""")


def test_a_re_run_cell_or_reimported_module_is_the_same_function():
    first, second = {"__name__": "__main__"}, {"__name__": "__main__"}
    exec(compile(SOURCE, "<cell-1>", "exec"), first)  # pylint: disable=exec-used
    exec(compile(SOURCE, "<cell-2>", "exec"), second)  # pylint: disable=exec-used
    assert first["notebook_grad"] is not second["notebook_grad"]
    a = go.register_gradient(first["notebook_grad"], name="nb.grad")
    before = go.registry_size()
    b = go.register_gradient(second["notebook_grad"], name="nb.grad")
    assert a == b and go.registry_size() == before


def test_a_different_function_under_a_taken_name_names_both_places():
    go.register_gradient(_grad_x2, name="test_registry.Taken")
    with pytest.raises(go.DuplicateGradientError) as info:
        go.register_gradient(_grad_x3, name="test_registry.Taken")
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert "test_registry.Taken" in message and not message.startswith("'")
    assert "test_registry.py:%d" % _grad_x2.__code__.co_firstlineno in message
    assert "test_registry.py:%d" % _grad_x3.__code__.co_firstlineno in message
    # Nothing changed: the name still routes to the first function.
    np.testing.assert_array_equal(_gradient_through("test_registry.Taken", [1.0]), [2.0])


def test_a_name_registered_directly_with_tensorflow_is_refused():
    tf.RegisterGradient("test_registry.DirectTF")(_grad_x3)
    with pytest.raises(go.DuplicateGradientError, match="not through graph_override"):
        go.register_gradient(_grad_x2, name="test_registry.DirectTF")
    with pytest.raises(go.DuplicateGradientError, match="registered at .*test_registry.py"):
        go.register_gradient(_grad_x2, name="Identity")


def test_closures_with_different_values_are_different_functions():
    def make(scale):
        def scaled(op, grad):
            return grad * scale
        return scaled

    a, b, a_again = make(2.0), make(4.0), make(2.0)
    na, nb, na2 = (go.register_gradient(f) for f in (a, b, a_again))
    assert na == na2 and na != nb and nb.endswith("#2")
    np.testing.assert_array_equal(_gradient_through(na, [1.0]), [2.0])
    np.testing.assert_array_equal(_gradient_through(nb, [1.0]), [4.0])


def test_bad_arguments():
    with pytest.raises(TypeError, match="needs a callable"):
        go.register_gradient(42)
    with pytest.raises(TypeError, match="non-empty string"):
        go.register_gradient(_grad_x2, name="")


# --- built-in estimator names ----------------------------------------------------

def test_builtin_names_describe_themselves_and_round_trip():
    name = overrides.gradient_name("ste_tern", threshold_value=0.1, clip_value=None)
    assert name == ("graph_override.ste_tern(threshold_value=0.1, "
                    "ternary_weight_networks=False, clip_value=None)")
    assert builtin_names.parse_builtin_name(name) == (
        "ste_tern", {"threshold_value": 0.1, "ternary_weight_networks": False,
                     "clip_value": None})
    # Names written before ternary_weight_networks existed still resolve.
    old = "graph_override.ste_tern(threshold_value=0.1, clip_value=None)"
    assert go.is_resolvable(old) and go.resolve(old) == old
    assert overrides.gradient_name("dorefa_quantize") == "graph_override.dorefa_quantize(k_bit=2)"
    assert (overrides.gradient_name("clip_gradient", clip_value_min=-1, clip_value_max=float("inf"))
            == "graph_override.clip_gradient(clip_value_min=-1.0, clip_value_max=inf)")


def test_builtin_names_resolve_on_demand_also_when_not_canonical():
    name = "graph_override.ste_sign(clip_value=2)"  # int, as a person might write it
    assert _compat.lookup_gradient(name) is None
    assert go.is_resolvable(name)
    assert go.resolve(name) == name
    np.testing.assert_array_equal(_gradient_through(name, [-3.0, -2.0, 0.0, 1.5, 2.5]),
                                  [0.0, 1.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("bad", [
    "graph_override.ste_sign(clip_value=-1.0)",
    "graph_override.ste_sign(clip=1.0)",
    "graph_override.no_such_estimator()",
    "graph_override.ste_sign(clip_value=1.0",
    "graph_override.dorefa_quantize(k_bit=99)",
    "NoSuchGradientAnywhere",
])
def test_unresolvable_names(bad):
    assert not go.is_resolvable(bad)
    with pytest.raises(go.UnknownGradientError) as info:
        go.resolve(bad)
    assert isinstance(info.value, LookupError) and repr(bad) in str(info.value)


def test_unknown_name_error_suggests_the_builtin():
    with pytest.raises(go.UnknownGradientError,
                       match=r"graph_override.ste_sign\(clip_value=1.0\)"):
        go.resolve("ste_sign")


def test_thousand_sites_add_at_most_a_handful_of_registry_entries():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [8])
        overrides.ste_sign(x)  # make sure the default setting is registered
        before = go.registry_size()
        for i in range(1000):
            overrides.ste_sign(x, clip_value=(0.5, 1.0, 1.5)[i % 3])
        added = go.registry_size() - before
    assert added <= 2, added


FRESH = textwrap.dedent(r"""
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np, tensorflow as tf
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(open(sys.argv[1], "rb").read())
    names = sorted({n.attr["_gradient_op_type"].s.decode() for n in graph_def.node
                    if "_gradient_op_type" in n.attr})
    with tf.Graph().as_default():
        tf.import_graph_def(graph_def, name="")
        g = tf.compat.v1.get_default_graph()
        x, y = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("y:0")
        try:
            tf.gradients(y, x)
            print("UNEXPECTED: resolved without graph_override")
        except LookupError as e:
            print("before:", type(e).__name__)
        import graph_override
        for n in names:
            graph_override.resolve(n)
        dx, = tf.gradients(y, x)
        with tf.compat.v1.Session() as s:
            print("after:", s.run(dx, {x: [-1.5, -0.25, 0.0, 0.25, 1.5]}).tolist())
""")


def test_a_fresh_process_resolves_builtin_names_found_in_a_graphdef(tmp_path):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [5], name="x")
        tf.identity(overrides.ste_sign(x, clip_value=0.5), name="y")
    path = tmp_path / "g.pb"
    path.write_bytes(g.as_graph_def().SerializeToString())
    script = tmp_path / "fresh.py"
    script.write_text(FRESH)
    out = warm_python.run([sys.executable, str(script), str(path)], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "before: LookupError" in out
    assert "after: [0.0, 1.0, 1.0, 1.0, 0.0]" in out


@pytest.mark.parametrize("rewrite, expected", [
    # The name graph_override writes for this setting, as it writes it.
    (None, [0.0, 1.0, 1.0, 1.0, 0.0]),
    # Hand-written names: the short form, and lower-case true and none.
    ("graph_override.ste_tern(ternary_weight_networks=True)", [0.0, 1.0, 1.0, 1.0, 0.0]),
    ("graph_override.ste_tern(ternary_weight_networks=true, clip_value=none)",
     [1.0, 1.0, 1.0, 1.0, 1.0]),
])
def test_a_fresh_process_resolves_boolean_and_none_parameters(tmp_path, rewrite, expected):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [5], name="x")
        tf.identity(overrides.ste_tern(x, ternary_weight_networks=True), name="y")
    graph_def = g.as_graph_def()
    [node] = [n for n in graph_def.node if "_gradient_op_type" in n.attr
              and n.attr["_gradient_op_type"].s.startswith(b"graph_override.")]
    assert node.attr["_gradient_op_type"].s.decode() == (
        "graph_override.ste_tern(threshold_value=0.05, ternary_weight_networks=True, "
        "clip_value=1.0)")
    if rewrite is not None:
        node.attr["_gradient_op_type"].s = rewrite.encode()
    path = tmp_path / "g.pb"
    path.write_bytes(graph_def.SerializeToString())
    script = tmp_path / "fresh.py"
    script.write_text(FRESH)
    out = warm_python.run([sys.executable, str(script), str(path)], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "before: LookupError" in out
    assert "after: %s" % expected in out


@pytest.mark.parametrize("text, value", [
    ("None", None), ("none", None), ("True", True), ("true", True), ("False", False),
    ("false", False), ("0", 0), ("-3", -3), ("0.5", 0.5), ("1e-05", 1e-05),
    ("-inf", float("-inf")),
])
def test_parameter_values(text, value):
    parsed = builtin_names.parse_value(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("text", ["yes", "TRUE", "", "1,5", "nul"])
def test_bad_parameter_values(text):
    with pytest.raises(ValueError, match=r"%r is not a number, True, False or None" % text):
        builtin_names.parse_value(text)


# --- the gradient contract -----------------------------------------------------

def _sign_gradient_with(fn):
    with tf.Graph().as_default():
        x = tf.constant([1.0, -1.0], name="x")
        with go.override_gradients({"Sign": fn}):
            y = tf.sign(x, name="binarize")
        return tf.gradients(y, x)


@pytest.mark.parametrize("fn, expected", [
    (lambda op, grad: [grad, grad], r"returned 2 gradient\(s\), but the op has 1 input"),
    (lambda op, grad: tf.ones([3]), r"shape \(3,\) for input 0 of shape \(2,\)"),
    (lambda op, grad: 1.0, r"returned float 1.0 as the gradient of input 0"),
    (lambda op, grad: np.ones(2, np.float32), r"returned ndarray"),
    (lambda op, grad: tf.cast(grad, tf.float64), r"float64 gradient for input 0 of dtype float32"),
])
def test_wrong_gradient_results_name_the_op(fn, expected):
    with pytest.raises(go.GradientContractError, match=expected) as info:
        _sign_gradient_with(fn)
    assert "op 'binarize' (type Sign)" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_none_and_a_list_of_one_are_valid_results():
    def none_grad(op, grad):
        return None

    def listed(op, grad):
        return [grad * 4.0]

    assert _sign_gradient_with(none_grad) == [None]
    with tf.Graph().as_default():
        x = tf.constant([1.0, -1.0])
        with go.override_gradients({"Sign": listed}):
            y = tf.sign(x)
        dx, = tf.gradients(y, x)
        with tf.compat.v1.Session() as sess:
            np.testing.assert_array_equal(sess.run(dx), [4.0, 4.0])


# --- threads -------------------------------------------------------------------

def test_concurrent_registration_of_one_function_makes_one_entry():
    def shared(op, grad):
        return grad * 11.0

    names, errors = [], []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        try:
            names.append(go.register_gradient(shared, name="test_registry.Concurrent"))
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(names)) == 1 and len(names) == 8


def test_concurrent_claims_of_one_name_by_different_functions_one_wins():
    functions = []
    for i in range(8):
        exec(compile("def claim(op, grad):\n    return grad * %d.0\n" % (i + 1),  # pylint: disable=exec-used
                     "<claim-%d>" % i, "exec"), ns := {})
        functions.append(ns["claim"])
    wins, refused = [], []
    barrier = threading.Barrier(8)

    def worker(fn):
        barrier.wait()
        try:
            wins.append(go.register_gradient(fn, name="test_registry.Contested"))
        except go.DuplicateGradientError:
            refused.append(fn)

    threads = [threading.Thread(target=worker, args=(f,)) for f in functions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(refused) == 7
    winner = wins[0].function
    factor = winner(None, 1.0)
    np.testing.assert_array_equal(_gradient_through("test_registry.Contested", [1.0]), [factor])


def test_suggestion_for_an_estimator_with_a_required_parameter():
    with pytest.raises(go.UnknownGradientError,
                       match=r"graph_override.scale_gradient\(scale=...\)"):
        go.resolve("scale_gradient")
    with pytest.raises(go.UnknownGradientError, match=r"clip_value_min=..."):
        go.resolve("clip_gradient")


def test_not_differentiable_entries_count_as_registered():
    tf.no_gradient("test_registry.NoGrad")
    assert go.is_resolvable("test_registry.NoGrad")
    assert go.resolve("test_registry.NoGrad") == "test_registry.NoGrad"
    with pytest.raises(go.DuplicateGradientError, match="not through graph_override"):
        go.register_gradient(_grad_x2, name="test_registry.NoGrad")


# --- misspelled estimators get estimator names ----------------------------------

@pytest.mark.parametrize("typo, want", [
    ("ste_sing", "graph_override.ste_sign(clip_value=1.0)"),
    ("graph_override.ste_sing(clip_value=1.0)", "graph_override.ste_sign(clip_value=1.0)"),
    ("flip_gradiant", "graph_override.flip_gradient(scale=1.0)"),
    ("dorefa_quantise", "graph_override.dorefa_quantize(k_bit=2)"),
])
def test_a_misspelled_estimator_suggests_estimators_not_op_types(typo, want):
    with pytest.raises(go.UnknownGradientError) as info:
        go.resolve(typo)
    message = str(info.value)
    hints = message.split("Did you mean ")[1].split("?")[0]
    assert hints.startswith(repr(want)), message
    assert "AsString" not in message
    # Every suggestion is an estimator name.
    for hint in hints.split(" or "):
        assert hint.strip("'").startswith("graph_override."), hint


def test_estimator_suggestions_search_only_the_estimator_table():
    assert registry.estimator_suggestions("ste_sing")[0] == "ste_sign"
    assert registry.estimator_suggestions("graph_override.approx_sgn()") == ["approx_sign"]
    assert registry.estimator_suggestions("AsString") == []
    # Names close to TensorFlow's own gradients still get those.
    with pytest.raises(go.UnknownGradientError, match="Did you mean 'Identity'"):
        go.resolve("Identiy")


@pytest.mark.parametrize("name, hint", [
    ("graph_override.scale_gradient(scale=abc)", "graph_override.scale_gradient(scale=...)"),
    ("graph_override.clip_gradient(clip_value_min=0.0)",
     "graph_override.clip_gradient(clip_value_min=..., clip_value_max=...)"),
    ("graph_override.ste_sign(clip=1.0)", "graph_override.ste_sign(clip_value=1.0)"),
])
def test_a_known_estimator_with_bad_parameters_gets_an_example_name(name, hint):
    """The hint for an estimator with a required parameter shows ``...`` for it."""
    with pytest.raises(go.UnknownGradientError) as info:
        go.resolve(name)
    assert "Did you mean %r?" % hint in str(info.value)


def test_the_example_name_of_required_and_optional_parameters(monkeypatch):
    """An estimator with a required parameter and a defaulted one: the hint
    writes the default (this line once raised NameError: the formatter had
    moved to another module)."""
    from graph_override import estimators  # pylint: disable=import-outside-toplevel
    mixed = types.SimpleNamespace(defaults=(("scale", None), ("clip_value", 0.5)),
                                  name_params=("scale", "clip_value"))
    monkeypatch.setattr(estimators, "ESTIMATORS", dict(estimators.ESTIMATORS, mixed=mixed))
    with pytest.raises(go.UnknownGradientError) as info:
        go.resolve("graph_override.mixed(clip_value=2)")
    assert "Did you mean 'graph_override.mixed(scale=..., clip_value=0.5)'?" in str(info.value)


def test_a_misspelled_estimator_in_a_map_rule_suggests_the_estimator():
    from graph_override.frozen import parse_rule  # pylint: disable=import-outside-toplevel
    with pytest.raises(go.errors.RuleError) as info:
        parse_rule("Sign=ste_sing")
    message = str(info.value)
    assert "Did you mean 'ste_sign'" in message and "AsString" not in message
    assert "'Sign=ste_sing'" in message
    with pytest.raises(go.errors.RuleError, match="Did you mean 'flip_gradient'"):
        parse_rule("Identity=flip_gradint:scale=0.5")
    # A registered gradient name that looks like an estimator is still one.
    name = go.register_gradient(_grad_x2, name="ste_signs")
    assert parse_rule("Sign=%s" % name).gradient == "ste_signs"


def test_the_cli_suggests_the_estimator_for_a_misspelled_map(tmp_path):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.sign(x, name="y")
    model = tmp_path / "m.pb"
    model.write_bytes(g.as_graph_def().SerializeToString())
    proc = warm_python.run(
        [sys.executable, "-m", "graph_override", "patch", str(model), "-o",
         str(tmp_path / "out.pb"), "--map", "Sign=ste_sing"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Did you mean 'ste_sign'" in proc.stderr and "AsString" not in proc.stderr
    assert not (tmp_path / "out.pb").exists()


def test_a_string_given_as_the_function_says_to_use_name():
    with pytest.raises(TypeError) as info:
        go.register_gradient("MySignSTE")
    message = str(info.value)
    assert "'MySignSTE'" in message
    assert "register_gradient(name='MySignSTE')" in message
    assert "register_gradient(fn, name='MySignSTE')" in message


# --- too few or too many gradients for a two-input op ----------------------------

def _mul_gradient_with(fn):
    with tf.Graph().as_default():
        a = tf.constant([1.0, 2.0], name="a")
        b = tf.constant([3.0, -4.0], name="b")
        with go.override_gradients({"Mul": fn}):
            y = tf.multiply(a, b, name="product")
        return tf.gradients(y, [a, b])


@pytest.mark.parametrize("fn, count", [
    (lambda op, grad: grad, 1),
    (lambda op, grad: [grad * op.inputs[1]], 1),
    (lambda op, grad: (grad, grad, grad), 3),
])
def test_a_wrong_number_of_gradients_for_mul_is_an_error(fn, count):
    with pytest.raises(go.GradientContractError) as info:
        _mul_gradient_with(fn)
    message = str(info.value)
    assert "returned %d gradient(s), but the op has 2 input(s)" % count in message
    assert "op 'product' (type Mul)" in message


def test_two_gradients_for_mul_pass_the_contract():
    def swapped(op, grad):
        return grad * op.inputs[1], None

    da, db = _mul_gradient_with(swapped)
    assert db is None
    with tf.compat.v1.Session(graph=da.graph) as sess:
        np.testing.assert_array_equal(sess.run(da), [3.0, -4.0])
