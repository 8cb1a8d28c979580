"""override_gradients: validation, the record of re-routed ops, no-match
handling, exact nesting, eager misuse, threads; op types of built graphs."""

import threading
import warnings

import numpy as np
import pytest
import tensorflow as tf

import graph_override as go
from graph_override import overrides, stopgrad, testing, tf2

STE = "graph_override.ste_sign(clip_value=1.0)"
X = [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5]
STE_GRAD = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def _attr(op):
    try:
        return op.get_attr("_gradient_op_type").decode()
    except ValueError:
        return None


def _run(tensor, feed=None):
    with tf.compat.v1.Session(graph=tensor.graph) as sess:
        return sess.run(tensor, feed)


def test_records_rerouted_ops_and_changes_the_gradient():
    with tf.Graph().as_default():
        x = tf.constant(X)
        before = tf.sign(x, name="before")
        with go.override_gradients({"Sign": STE, "Round": "Identity"}) as scope:
            y = tf.sign(x, name="inside")
            r = tf.round(x, name="rounded")
            tf.nn.relu(x)
        after = tf.sign(x, name="after")
        assert [op.name for op in scope.matched] == ["inside", "rounded"]
        assert _attr(y.op) == STE and _attr(r.op) == "Identity"
        assert _attr(before.op) is None and _attr(after.op) is None
        np.testing.assert_array_equal(_run(tf.gradients(y, x)[0]), STE_GRAD)
        np.testing.assert_array_equal(_run(tf.gradients(r, x)[0]), np.ones(7))
        np.testing.assert_array_equal(_run(tf.gradients(after, x)[0]), np.zeros(7))


def test_misspelled_op_type_suggests_the_right_one_and_changes_nothing():
    with tf.Graph().as_default() as g:
        with pytest.raises(go.UnknownOpTypeError, match="Did you mean 'Sign'") as info:
            go.override_gradients({"sign": STE})
        assert isinstance(info.value, ValueError)
        with pytest.raises(go.UnknownOpTypeError, match="'Round'"):
            go.override_gradients({"Rond": STE})
        with pytest.raises(go.UnknownOpTypeError, match="not an op type"):
            go.override_gradients({"tf.sign": STE})
        y = tf.sign(tf.constant(1.0))
        assert _attr(y.op) is None and not g._gradient_override_map  # pylint: disable=protected-access


@pytest.mark.parametrize("mapping, error, pattern", [
    ({"Sign": "NoSuchGradient"}, go.UnknownGradientError, "no gradient is registered"),
    ({"Sign": 3}, TypeError, "must be a gradient name or a gradient function"),
    ({1: STE}, TypeError, "keys must be op type strings"),
    ({}, ValueError, "mapping is empty"),
    ([("Sign", STE)], TypeError, "needs a mapping"),
])
def test_bad_mappings(mapping, error, pattern):
    with tf.Graph().as_default():
        with pytest.raises(error, match=pattern):
            go.override_gradients(mapping)


def test_bad_options():
    with pytest.raises(ValueError, match="on_no_match"):
        go.override_gradients({"Sign": STE}, on_no_match="loud")
    with pytest.raises(TypeError, match="tf.Graph"):
        go.override_gradients({"Sign": STE}, graph="g")


def test_a_scope_that_reroutes_nothing_warns_or_raises():
    with tf.Graph().as_default():
        x = tf.constant(X)
        early = tf.sign(x)
        with pytest.warns(go.NoMatchWarning, match=r"re-routed no op.*Relu x1"):
            with go.override_gradients({"Sign": STE}):
                tf.nn.relu(early)
        with pytest.raises(go.NoMatchError, match="before the `with`"):
            with go.override_gradients({"Sign": STE}, on_no_match="raise"):
                tf.nn.relu(early)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with go.override_gradients({"Sign": STE}, on_no_match="ignore") as scope:
                pass
        assert scope.matched == []


def test_ops_built_in_another_graph_inside_the_scope_are_not_matched():
    with tf.Graph().as_default():
        with pytest.warns(go.NoMatchWarning):
            with go.override_gradients({"Sign": STE}):
                with tf.Graph().as_default():
                    other = tf.sign(tf.constant(1.0))
        assert _attr(other.op) is None


def test_nested_scopes_restore_exactly_also_on_exceptions():
    with tf.Graph().as_default() as g:
        x = tf.constant(X)
        with go.override_gradients({"Sign": STE}) as outer:
            a = tf.sign(x)
            with pytest.raises(RuntimeError, match="boom"):
                with go.override_gradients({"Sign": "Identity", "Floor": "Identity"}):
                    b = tf.sign(x)
                    raise RuntimeError("boom")
            assert g._gradient_override_map == {"Sign": STE}  # pylint: disable=protected-access
            c = tf.sign(x)
            with go.override_gradients({"Sign": "Identity"}) as inner:
                d = tf.sign(x)
            e = tf.sign(x)
        f = tf.sign(x)
        assert g._gradient_override_map == {}  # pylint: disable=protected-access
        assert [_attr(t.op) for t in (a, b, c, d, e, f)] == [
            STE, "Identity", STE, "Identity", STE, None]
        assert [op.name for op in inner.matched] == [d.op.name]
        # The outer scope records the ops it re-routed itself.
        assert {op.name for op in outer.matched} == {a.op.name, c.op.name, e.op.name}


def test_exception_inside_scope_propagates_without_no_match_warning():
    with tf.Graph().as_default():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(KeyError):
                with go.override_gradients({"Sign": STE}):
                    raise KeyError("inner")


def test_a_scope_object_can_be_reused():
    scope = go.override_gradients({"Sign": STE})
    with tf.Graph().as_default():
        with scope:
            tf.sign(tf.constant(1.0), name="first")
        assert [op.name for op in scope.matched] == ["first"]
        with scope:
            tf.sign(tf.constant(1.0), name="second")
        assert [op.name for op in scope.matched] == ["second"]


def test_plain_functions_are_registered_once():
    def halve(op, grad):
        return grad * 0.5

    with tf.Graph().as_default():
        x = tf.constant(X)
        with go.override_gradients({"Sign": halve}) as scope:
            y = tf.sign(x)
        size = go.registry_size()
        for _ in range(50):
            with go.override_gradients({"Sign": halve}):
                tf.sign(x)
        assert go.registry_size() == size
        assert scope.mapping["Sign"].endswith("halve")
        np.testing.assert_array_equal(_run(tf.gradients(y, x)[0]), np.full(7, 0.5))


# --- where TensorFlow would ignore the map -------------------------------------

def test_eager_mode_raises():
    with pytest.raises(go.EagerModeError, match="graph_override.tf2") as info:
        with go.override_gradients({"Sign": STE}):
            pass
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(go.EagerModeError, match="eager mode"):
        overrides.ste_sign(tf.constant(X))


def test_explicit_graph_works_from_eager_context():
    g = tf.Graph()
    with go.override_gradients({"Sign": STE}, graph=g) as scope:
        with g.as_default():
            y = tf.sign(tf.constant(X))
    assert scope.matched == [y.op]


def test_tape_inside_tf_function_raises_for_the_scope_and_the_family():
    @tf.function(autograph=False)
    def with_scope(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            with go.override_gradients({"Sign": STE}):
                y = tf.sign(x)
        return tape.gradient(y, x)

    with pytest.raises(go.EagerModeError, match="GradientTape inside tf.function"):
        with_scope(tf.constant(X))
    with pytest.raises(go.EagerModeError, match="GradientTape"):
        testing.evaluate(overrides.ste_sign, np.array(X, np.float32), "function")


def test_tf_function_with_tf_gradients_or_an_outer_tape_keeps_the_override():
    @tf.function(autograph=False)
    def grads_inside(x):
        y = overrides.ste_sign(x)
        return tf.gradients(y, x)[0]

    np.testing.assert_array_equal(grads_inside(tf.constant(X)), STE_GRAD)

    @tf.function(autograph=False)
    def forward(x):
        with go.override_gradients({"Sign": STE}):
            return tf.sign(x)

    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = forward(x)
    np.testing.assert_array_equal(tape.gradient(y, x), STE_GRAD)


# --- threads -------------------------------------------------------------------

def test_two_threads_building_two_graphs_do_not_see_each_others_scopes():
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def build(key, mapping, op_fn):
        try:
            with tf.Graph().as_default() as g:
                x = tf.constant(X)
                with go.override_gradients(mapping) as scope:
                    barrier.wait(timeout=30)
                    ys = [op_fn(x) for _ in range(20)]
                    barrier.wait(timeout=30)
                other = tf.sign(x) if key == "a" else tf.round(x)
                results[key] = (g, scope.matched, ys, other)
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)

    ta = threading.Thread(target=build, args=("a", {"Sign": STE}, tf.sign))
    tb = threading.Thread(target=build, args=("b", {"Round": "Identity"}, tf.round))
    ta.start(), tb.start()
    ta.join(), tb.join()
    assert not errors, errors
    for key, op_type, name in (("a", "Sign", STE), ("b", "Round", "Identity")):
        g, matched, ys, other = results[key]
        assert len(matched) == 20 and all(op.graph is g for op in matched)
        assert {_attr(y.op) for y in ys} == {name}
        assert {op.type for op in matched} == {op_type}
        assert _attr(other.op) is None
        assert g._gradient_override_map == {}  # pylint: disable=protected-access


# --- the graphs each family builds ---------------------------------------------

def _ops(build):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4], name="x")
        build(x)
    return [(op.type, _attr(op)) for op in g.get_operations() if op.name != "x"]


def test_op_types_of_the_overrides_family():
    ops = _ops(overrides.ste_sign)
    assert ("Sign", STE) in ops and ("Sign", "Identity") in ops
    assert all(t not in ("IdentityN", "StopGradient") for t, _ in ops)
    assert ("Round", "graph_override.ste_round()") in _ops(overrides.ste_round)
    assert ("Floor", "graph_override.ste_floor()") in _ops(overrides.ste_floor)
    assert ("Identity", "graph_override.flip_gradient(scale=0.5)") in _ops(
        lambda x: overrides.flip_gradient(x, 0.5))
    dorefa = _ops(overrides.dorefa_quantize)
    assert ("Round", "Identity") in dorefa
    assert [t for t, a in dorefa if a is not None] == ["Round"]
    assert ("Relu", "Identity") in _ops(overrides.ste_heaviside)


def test_op_types_of_the_stopgrad_and_tf2_families():
    ops = _ops(stopgrad.ste_sign)
    assert any(t == "StopGradient" for t, _ in ops)
    assert all(a is None for _, a in ops), "stopgrad must not use the registry"
    ops = _ops(tf2.ste_sign)
    assert any(t == "IdentityN" and a and a.startswith("CustomGradient-") for t, a in ops)


def test_two_instances_with_different_settings_stay_distinct():
    """A global registration would make both sites use one clip value."""
    x = np.array([-1.2, -0.7, 0.0, 0.7, 1.2], np.float32)

    def two_sites(t):
        return [overrides.ste_sign(t, clip_value=0.5), overrides.ste_sign(t, clip_value=1.0)]

    with tf.Graph().as_default() as g:
        p = tf.compat.v1.placeholder(tf.float32, [5])
        a, b = two_sites(p)
        da, = tf.gradients(a, p)
        db, = tf.gradients(b, p)
        with tf.compat.v1.Session(graph=g) as sess:
            ga, gb = sess.run([da, db], {p: x})
    np.testing.assert_array_equal(ga, [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(gb, [0, 1, 1, 1, 0])
    testing.assert_same_gradients(
        two_sites, lambda t: [tf2.ste_sign(t, 0.5), tf2.ste_sign(t, 1.0)], x,
        modes=[("graph", "eager")], upstream=[np.arange(5, dtype=np.float32)] * 2)


# --- restoration does not depend on TensorFlow's generator ------------------------

class _KeptAlive:
    """Wraps Graph.gradient_override_map: keeps every context manager it
    returns alive, and (with `stale`) never lets its generator run the
    `finally` that restores the map, as when TensorFlow's own clean-up is
    left to a garbage collector that does not run."""

    def __init__(self, real, stale):
        self.real, self.stale, self.kept = real, stale, []

    def __call__(self, graph, mapping):
        if not self.stale:
            cm = self.real(graph, mapping)
            self.kept.append(cm)
            return cm
        outer = self

        class Stale:
            """Installs the map as TensorFlow does; restores nothing."""

            def __enter__(self):
                graph._gradient_override_map.update(mapping)  # pylint: disable=protected-access

            def __exit__(self, *exc):
                outer.kept.append(exc)
                return False

        return Stale()


@pytest.mark.parametrize("stale", [False, True], ids=["kept-alive", "never-resumed"])
def test_the_previous_map_is_restored_on_exceptions_without_gc(monkeypatch, stale):
    import gc  # pylint: disable=import-outside-toplevel
    kept = _KeptAlive(tf.Graph.gradient_override_map, stale)
    monkeypatch.setattr(tf.Graph, "gradient_override_map",
                        lambda graph, mapping: kept(graph, mapping))
    gc.disable()
    try:
        with tf.Graph().as_default() as g:
            x = tf.constant(X)
            g._gradient_override_map["Round"] = "Identity"  # pylint: disable=protected-access
            with go.override_gradients({"Sign": STE}):
                with pytest.raises(ValueError, match="inner"):
                    with go.override_gradients({"Sign": "Identity", "Round": STE,
                                                "Floor": "Identity"}):
                        tf.sign(x)
                        raise ValueError("inner")
                assert g._gradient_override_map == {  # pylint: disable=protected-access
                    "Sign": STE, "Round": "Identity"}
                y = tf.sign(x)
            assert g._gradient_override_map == {"Round": "Identity"}  # pylint: disable=protected-access
            assert _attr(y.op) == STE
            after = tf.sign(x)
            assert _attr(after.op) is None
    finally:
        gc.enable()
    assert kept.kept  # the context managers were held the whole time
