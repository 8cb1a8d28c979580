"""Override maps and threads: TensorFlow keeps one gradient override map per
graph, shared by every thread, so scopes on one graph from two threads would
swap gradients. graph_override refuses that with ConcurrentScopeError, and
lets builds of the overrides family take turns."""

import threading

import numpy as np
import pytest
import tensorflow as tf

import graph_override as go
from graph_override import overrides
from graph_override.errors import ConcurrentScopeError

STE = "graph_override.ste_sign(clip_value=1.0)"


def _attr(op):
    try:
        return op.get_attr("_gradient_op_type").decode()
    except ValueError:
        return None


def _run_threads(*targets):
    errors = []

    def guard(fn):
        def run():
            try:
                fn()
            except Exception as e:  # pylint: disable=broad-except
                errors.append(e)
        return run

    threads = [threading.Thread(target=guard(t), name="worker-%d" % i)
               for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_a_second_thread_entering_a_scope_on_the_same_graph_is_refused():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant([-1.5, 0.0, 0.5])
    opened, tried = threading.Barrier(2), threading.Barrier(2)
    seen = {}

    def first():
        with graph.as_default():
            with go.override_gradients({"Sign": STE}) as scope:
                opened.wait(timeout=60)
                tried.wait(timeout=60)  # the other thread tries meanwhile
                seen["first"] = tf.sign(x)
            seen["first_matched"] = scope.matched

    def second():
        opened.wait(timeout=60)
        try:
            with graph.as_default():
                with pytest.raises(ConcurrentScopeError) as info:
                    with go.override_gradients({"Sign": "Identity"}):
                        seen["second"] = tf.sign(x)
                seen["error"] = info.value
        finally:
            tried.wait(timeout=60)

    assert _run_threads(first, second) == []
    error = seen["error"]
    assert isinstance(error, RuntimeError) and isinstance(error, go.GraphOverrideError)
    assert "worker-0" in str(error) and "one override map per graph" in str(error)
    assert "second" not in seen  # its body never ran
    assert _attr(seen["first"].op) == STE
    assert [op.name for op in seen["first_matched"]] == [seen["first"].op.name]
    assert graph._gradient_override_map == {}  # pylint: disable=protected-access
    # Once the first scope is closed, any thread may open one.
    with graph.as_default():
        with go.override_gradients({"Sign": "Identity"}):
            y = tf.sign(x)
    assert _attr(y.op) == "Identity"


def test_the_overrides_family_refuses_to_build_under_another_threads_scope():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
    opened, tried = threading.Barrier(2), threading.Barrier(2)
    seen = {}

    def holder():
        with graph.as_default():
            with go.override_gradients({"Round": "Identity"}, on_no_match="ignore"):
                opened.wait(timeout=60)
                tried.wait(timeout=60)

    def builder():
        opened.wait(timeout=60)
        try:
            with graph.as_default():
                with pytest.raises(ConcurrentScopeError, match="overrides.ste_sign"):
                    overrides.ste_sign(x)
                seen["refused"] = True
        finally:
            tried.wait(timeout=60)

    assert _run_threads(holder, builder) == []
    assert seen == {"refused": True}


def test_family_builds_from_many_threads_keep_their_own_settings():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [5])
    clips = [0.25, 0.5, 1.0, 2.0]
    start = threading.Barrier(len(clips))
    built = {c: [] for c in clips}

    def worker(clip):
        def run():
            with graph.as_default():
                start.wait(timeout=60)
                for _ in range(15):
                    built[clip].append(overrides.ste_sign(x, clip_value=clip))
        return run

    assert _run_threads(*[worker(c) for c in clips]) == []
    values = np.array([-2.5, -0.75, 0.0, 0.3, 1.5], np.float32)
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as sess:
        for clip, ys in built.items():
            want = "graph_override.ste_sign(clip_value=%r)" % clip
            signs = [op for y in ys for op in _sign_ops_reading(y, x)]
            assert len(signs) == 15 and {_attr(op) for op in signs} == {want}
            grads = sess.run(tf.gradients(ys[-1], x)[0], {x: values})
            np.testing.assert_array_equal(grads, (np.abs(values) <= clip).astype(np.float32))
    assert graph._gradient_override_map == {}  # pylint: disable=protected-access


def _sign_ops_reading(y, x):
    """The Sign op that reads x directly, found from output y."""
    stack, seen, found = [y.op], set(), []
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "Sign" and op.inputs[0] is x:
            found.append(op)
        stack.extend(t.op for t in op.inputs)
    return found


def test_scopes_in_one_thread_nest_and_claims_are_released():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant([1.0])
        with go.override_gradients({"Sign": STE}):
            with go.override_gradients({"Floor": "Identity"}):
                tf.floor(tf.sign(x))
        with pytest.raises(KeyError):
            with go.override_gradients({"Sign": STE}):
                raise KeyError("inner")
    assert graph._graph_override_claims == {}  # pylint: disable=protected-access
    # Another thread may use the graph now.
    assert _run_threads(lambda: _scope_in(graph)) == []


def _scope_in(graph):
    with graph.as_default():
        with go.override_gradients({"Sign": "Identity"}):
            tf.sign(tf.constant([2.0]))


def test_separate_graphs_in_threads_are_independent():
    start = threading.Barrier(3)

    def own_graph():
        with tf.Graph().as_default() as g:
            start.wait(timeout=60)
            with go.override_gradients({"Sign": STE}):
                start.wait(timeout=60)
                y = tf.sign(tf.constant([1.0]))
            assert _attr(y.op) == STE and g._gradient_override_map == {}  # pylint: disable=protected-access

    assert _run_threads(own_graph, own_graph, own_graph) == []
