"""graph_override.legacy.op_with_gradient: legacy gradient functions in TF2."""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import graph_override as go
from graph_override import overrides, testing, tf2
from graph_override._families import tracing
from graph_override.errors import GradientContractError, UnknownGradientError
from graph_override.tf2 import op_with_gradient

ALL_MODES = ["graph", "eager", "function"]

# Exact zeros and the clip boundaries of every estimator.
X = np.array([-2.0, -1.0001, -1.0, -0.5, -0.05, 0.0, 0.05, 0.5, 0.9999, 1.0,
              1.0001, 1.5, 2.5], np.float32)
UP = np.random.RandomState(3).uniform(-1.5, 1.5, X.shape).astype(np.float32)


def sign_ste_grad(op, grad):
    """Written for tf.RegisterGradient: the BNN straight-through sign."""
    x = op.inputs[0]
    return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)


def test_handwritten_ste_matches_numpy_and_tf2(rng):
    ref_grad = UP * (np.abs(X) <= 1.0)
    for mode in ALL_MODES:
        r = testing.evaluate(op_with_gradient(tf.sign, sign_ste_grad), X, mode,
                             upstream=UP)
        np.testing.assert_array_equal(r.outputs, np.sign(X))
        np.testing.assert_allclose(r.gradients[0], ref_grad, rtol=0, atol=0)
    # The tf2 estimator has the same gradient (its forward maps 0 to +1).
    testing.assert_same_gradients(op_with_gradient(tf.sign, sign_ste_grad),
                                  tf2.ste_sign, X, upstream=UP, forward="skip")


ESTIMATOR_CASES = [
    # (estimator, params, op function, forward equal to the tf2 family?)
    ("ste_sign", {}, tf.sign, False),
    ("ste_sign", {"clip_value": 0.5}, tf.sign, False),
    ("approx_sign", {}, tf.sign, False),
    ("swish_sign", {"beta": 5.0}, tf.sign, False),
    ("ste_round", {}, tf.round, True),
    ("ste_floor", {}, tf.floor, True),
    ("flip_gradient", {"scale": 0.5}, tf.identity, True),
    ("scale_gradient", {"scale": -3.0}, tf.identity, True),
    ("clip_gradient", {"clip_value_min": -0.3, "clip_value_max": 0.4},
     tf.identity, True),
]


@pytest.mark.parametrize("estimator,params,op_fn,same_forward", ESTIMATOR_CASES,
                         ids=lambda v: v if isinstance(v, str) else None)
def test_builtin_names_match_the_tf2_estimators(estimator, params, op_fn,
                                                same_forward):
    name = overrides.gradient_name(estimator, **params)
    migrated = op_with_gradient(op_fn, name)
    oracle = lambda x: getattr(tf2, estimator)(x, **params)  # noqa: E731
    testing.assert_same_gradients(
        migrated, oracle, X, upstream=UP,
        forward="bitwise" if same_forward else "skip")


def test_tensorflow_own_gradient_names():
    # {"Round": "Identity"}: the tensorpack DoReFa idiom.
    r = testing.evaluate(op_with_gradient(tf.round, "Identity"), X, "eager",
                         upstream=UP)
    np.testing.assert_array_equal(r.outputs, np.round(X))
    np.testing.assert_array_equal(r.gradients[0], UP)
    # "Sign" is TensorFlow's own (zero) gradient, run through the view.
    r = testing.evaluate(op_with_gradient(tf.sign, "Sign"), X, "function",
                         upstream=UP)
    np.testing.assert_array_equal(r.gradients[0], np.zeros_like(X))


SMOOTH = [
    ("Tanh reads op.outputs", tf.tanh, "Tanh", [X]),
    ("Softplus", tf.nn.softplus, "Softplus", [X]),
    ("Sigmoid reads op.outputs", tf.sigmoid, "Sigmoid", [X]),
    ("MatMul transpose_a", lambda a, b: tf.matmul(a, b, transpose_a=True),
     "MatMul", [np.random.RandomState(0).randn(3, 2), np.random.RandomState(1).randn(3, 4)]),
    ("MatMul transpose_b", lambda a, b: tf.matmul(a, b, transpose_b=True),
     "MatMul", [np.random.RandomState(2).randn(2, 3), np.random.RandomState(3).randn(4, 3)]),
    ("Mul two inputs", tf.multiply, "Mul",
     [np.random.RandomState(4).randn(3), np.random.RandomState(5).randn(3)]),
]


@pytest.mark.parametrize("what,op_fn,name,inputs", SMOOTH, ids=[s[0] for s in SMOOTH])
def test_numeric_jacobian(what, op_fn, name, inputs):
    del what
    xs = [tf.constant(np.asarray(a, np.float64)) for a in inputs]
    theoretical, numerical = tf.test.compute_gradient(
        op_with_gradient(op_fn, name), xs)
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-6)


A2 = np.ones((2, 3), np.float64)


@pytest.mark.parametrize("op_fn,args,attrs", [
    (tf.sign, [X], {"T": tf.float32}),
    (tf.round, [X.astype(np.float64)], {"T": tf.float64}),
    (tf.floor, [X.astype(np.float16)], {"T": tf.float16}),
    (tf.identity, [X], {"T": tf.float32}),
    (tf.nn.relu, [X], {"T": tf.float32}),
    (lambda a, b: tf.matmul(a, b, transpose_b=True), [A2, A2],
     {"T": tf.float64, "transpose_a": False, "transpose_b": True}),
], ids=["Sign", "Round", "Floor", "Identity", "Relu", "MatMul"])
def test_attrs_are_those_of_graph_mode(op_fn, args, attrs):
    seen = {}

    def grad(op, *dys):
        seen.update({k: op.get_attr(k) for k in attrs})
        return [tf.zeros_like(t) for t in op.inputs]

    testing.evaluate(op_with_gradient(op_fn, grad), args, "eager")
    assert seen == attrs
    # Graph mode gives the same attrs on the real op.
    with tf.Graph().as_default():
        y = op_fn(*[tf.constant(a) for a in args])
        assert {k: y.op.get_attr(k) for k in attrs} == attrs


def test_multi_output_op_and_attrs():
    seen = {}

    def split_grad(op, *grads):
        seen["num_split"] = op.get_attr("num_split")
        seen["T"] = op.get_attr("T")
        seen["type"] = op.type
        return None, tf.concat([g * (i + 1.0) for i, g in enumerate(grads)],
                               op.inputs[0])

    def fn(x):
        a, b, c = op_with_gradient(tf.split, split_grad)(x, 3)
        return a + c  # b unused: its gradient reaches split_grad as zeros

    x = np.arange(6, dtype=np.float32)
    for mode in ALL_MODES:
        r = testing.evaluate(fn, x, mode)
        np.testing.assert_array_equal(r.outputs, [4.0, 6.0])
        np.testing.assert_array_equal(r.gradients[0], [1, 1, 0, 0, 3, 3])
    assert seen == {"num_split": 3, "T": tf.float32, "type": "Split"}


def test_multi_output_structure_is_kept():
    values, indices = op_with_gradient(tf.math.top_k, "TopKV2")(
        tf.constant([1.0, 3.0, 2.0]), k=2)
    np.testing.assert_array_equal(values, [3.0, 2.0])
    np.testing.assert_array_equal(indices, [1, 2])
    x = tf.constant([1.0, 3.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = op_with_gradient(tf.math.top_k, "TopKV2")(x, k=2)
    np.testing.assert_array_equal(tape.gradient(out.values, x), [0, 1, 1])


def test_none_gradients_and_argument_reuse():
    def grad_a_only(op, grad):
        return grad * 2.0, None

    fn = lambda a, b: op_with_gradient(tf.multiply, grad_a_only)(a, b)  # noqa: E731
    a = np.array([1.0, -2.0, 0.0], np.float32)
    b = np.array([3.0, 0.0, -1.0], np.float32)
    for mode in ALL_MODES:
        r = testing.evaluate(fn, [a, b], mode)
        np.testing.assert_array_equal(r.gradients[0], [2.0, 2.0, 2.0])
        np.testing.assert_array_equal(r.gradients[1], [0.0, 0.0, 0.0])
    # The same tensor feeding both inputs gets both gradients, summed.
    square = lambda a: op_with_gradient(tf.multiply, "Mul")(a, a)  # noqa: E731
    for mode in ALL_MODES:
        np.testing.assert_allclose(testing.evaluate(square, a, mode).gradients[0],
                                   2 * a)


def test_second_order_through_a_differentiable_legacy_function():
    def square_grad(op, grad):  # TF1 style, differentiable in x
        x = op.inputs[0]
        return grad * 3.0 * x * x  # pretend d/dx = 3x^2, so d2/dx2 = 6x

    fn = op_with_gradient(tf.square, square_grad)
    x = tf.constant(X)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        dy = inner.gradient(y, x)
    np.testing.assert_allclose(dy, 3 * X * X, rtol=1e-6)
    np.testing.assert_allclose(outer.gradient(dy, x), 6 * X, rtol=1e-6)

    @tf.function
    def second(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = fn(x)
            dy = inner.gradient(y, x)
        return outer.gradient(dy, x)

    np.testing.assert_allclose(second(x), 6 * X, rtol=1e-6)
    with tf.Graph().as_default():
        xp = tf.compat.v1.placeholder(tf.float32, X.shape)
        (dy,) = tf.gradients(fn(xp), xp)
        (d2,) = tf.gradients(dy, xp)
        with tf.compat.v1.Session() as sess:
            np.testing.assert_allclose(sess.run(d2, {xp: X}), 6 * X, rtol=1e-6)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_second_order_through_op_outputs(mode):
    """TF's own Tanh gradient reads op.outputs: the second derivative of
    tanh, -2 tanh (1 - tanh^2), must come out in every mode."""
    x = np.linspace(-2.0, 2.0, 9)  # float64, includes 0
    fn = op_with_gradient(tf.tanh, "Tanh")

    def first(x):
        if mode == "graph":
            return tf.gradients(fn(x), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x)

    r = testing.evaluate(first, x, mode)
    t = np.tanh(x)
    np.testing.assert_allclose(r.outputs, 1 - t * t, rtol=1e-12)
    np.testing.assert_allclose(r.gradients[0], -2 * t * (1 - t * t), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_second_order_through_op_outputs_is_the_legacy_one(mode):
    """In a TF1 graph, the overridden op's output depends on its input through
    the override itself; a gradient function reading op.outputs gets the same
    second order from op_with_gradient in every mode."""
    def legacy_grad(op, dy):
        return dy * op.outputs[0] * op.inputs[0]

    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])

    def tf1(x):
        with go.override_gradients({"Sign": legacy_grad}):
            y = tf.sign(x)
        return tf.gradients(y, x)[0]

    fn = op_with_gradient(tf.sign, legacy_grad)

    def first(x):
        if mode == "graph":
            return tf.gradients(fn(x), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x)

    ref = testing.evaluate(tf1, x, "graph")
    # d/dx (sign(x) x) with d sign/dx = sign(x) x: sign(x) x^2 + sign(x)
    np.testing.assert_allclose(ref.gradients[0], np.sign(x) * (x * x + 1))
    got = testing.evaluate(first, x, mode)
    np.testing.assert_allclose(got.outputs, ref.outputs)
    np.testing.assert_allclose(got.gradients[0], ref.gradients[0])


def test_graph_mode_view_has_the_real_op_name():
    names = []

    def grad(op, dy):
        names.append(op.name)
        return dy

    with tf.Graph().as_default() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = op_with_gradient(tf.sign, grad)(x, name="binarize")
        tf.gradients(y, x)
    # custom_gradient returns the op's output through an IdentityN; the view
    # names the Sign op itself.
    assert names == ["binarize"]
    assert graph.get_operation_by_name("binarize").type == "Sign"


def test_two_instances_in_one_graph_do_not_interfere():
    def half(op, dy):
        return 0.5 * dy

    def triple(op, dy):
        return 3.0 * dy

    fn = lambda x: [op_with_gradient(tf.identity, half)(x),  # noqa: E731
                    op_with_gradient(tf.identity, triple)(x)]
    for mode in ALL_MODES:
        r = testing.evaluate(fn, X, mode, upstream=[UP, UP])
        np.testing.assert_allclose(r.gradients[0], 3.5 * UP, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, tf.bfloat16.as_numpy_dtype])
def test_dtypes_are_kept(dtype):
    x = X.astype(dtype)
    r = testing.evaluate(op_with_gradient(tf.sign, sign_ste_grad), x, "eager")
    assert r.outputs.dtype == x.dtype and r.gradients[0].dtype == x.dtype
    # 1.0001 rounds to 1.0 in the narrow types: the reference uses x as cast.
    np.testing.assert_array_equal(
        r.gradients[0].astype(np.float32),
        (np.abs(x.astype(np.float32)) <= 1.0).astype(np.float32))


@pytest.mark.parametrize("use_resource", [True, False])
def test_session_training_on_variables(use_resource):
    """Migrated code still trains in a TF1 Session, on resource and ref
    variables: the STE passes the gradient where |w| <= 1."""
    init = np.array([0.5, -2.0, 0.25, 1.0], np.float32)
    scale = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", initializer=init, use_resource=use_resource)
        loss = tf.reduce_sum(op_with_gradient(tf.sign, sign_ste_grad)(w) * scale)
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train)
            after = sess.run(w)
    np.testing.assert_allclose(after, init - 0.1 * scale * (np.abs(init) <= 1.0))


def test_eager_variables_get_the_gradient():
    v = tf.Variable([0.5, -2.0, 0.25])
    with tf.GradientTape() as tape:
        y = op_with_gradient(tf.sign, sign_ste_grad)(v)
    np.testing.assert_array_equal(tape.gradient(y, v), [1.0, 0.0, 1.0])


def test_keras3_layer_trains_with_a_legacy_gradient():
    class BinaryDense(keras.layers.Layer):
        def build(self, input_shape):
            self.kernel = self.add_weight(
                shape=(input_shape[-1], 1),
                initializer=keras.initializers.Constant(
                    np.array([[0.5], [-0.25], [2.0]], np.float32)))

        def call(self, x):
            binary = op_with_gradient(tf.sign, sign_ste_grad)(self.kernel)
            return tf.matmul(x, binary)

    layer = BinaryDense()
    x = tf.constant([[1.0, 2.0, 3.0]])
    with tf.GradientTape() as tape:
        y = layer(x)
    grad = tape.gradient(y, layer.kernel)
    np.testing.assert_array_equal(y, [[1.0 - 2.0 + 3.0]])
    # d y / d kernel = x (straight through where |w| <= 1), 0 where |w| > 1.
    np.testing.assert_array_equal(grad, [[1.0], [2.0], [0.0]])
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = layer.kernel.numpy().copy()
    model.fit(np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32),
              epochs=1, batch_size=4, verbose=0)
    after = layer.kernel.numpy()
    assert after[2, 0] == before[2, 0]  # clipped: no gradient
    assert after[0, 0] < before[0, 0]   # trained through the STE


def _contract_message(run):
    with pytest.raises(GradientContractError) as info:
        run()
    return str(info.value)


@pytest.mark.parametrize("bad,expected", [
    (lambda op, dy: [dy, dy], "returned 2 gradient(s), but the op has 1 input(s)"),
    (lambda op, dy: tf.reduce_sum(dy), "returned a gradient of shape () for input 0"),
    (lambda op, dy: 1.0, "returned float 1.0 as the gradient of input 0"),
])
def test_wrong_gradients_raise_as_in_graph_mode(bad, expected):
    def legacy_run():
        testing.evaluate(op_with_gradient(tf.sign, bad), X, "eager")

    def graph_run():
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, X.shape)
            with go.override_gradients({"Sign": bad}):
                y = tf.sign(x)
            tf.gradients(y, x)

    eager_msg, graph_msg = _contract_message(legacy_run), _contract_message(graph_run)
    assert expected in eager_msg and expected in graph_msg
    assert "(type Sign)" in eager_msg and "(type Sign)" in graph_msg
    with pytest.raises(GradientContractError):
        testing.evaluate(op_with_gradient(tf.sign, bad), X, "function")


def test_unknown_attr_is_a_clear_error():
    def reads_missing(op, dy):
        op.get_attr("transpose_a")
        return dy

    msg = _contract_message(lambda: testing.evaluate(
        op_with_gradient(tf.sign, reads_missing), X, "eager"))
    assert "'transpose_a'" in msg and "type Sign" in msg and "T" in msg


def test_unknown_view_attribute_is_an_attribute_error():
    def reads_graph(op, dy):
        return op.graph and dy

    with pytest.raises(AttributeError, match="no attribute 'graph'"):
        testing.evaluate(op_with_gradient(tf.sign, reads_graph), X, "eager")


@pytest.mark.parametrize("op_fn,match", [
    (lambda x: tf.sign(x * 2.0), "computed by a Mul op"),
    (lambda x: x, "returned its input unchanged"),
    (lambda x: [tf.sign(x), tf.round(x)], "all outputs of exactly one op"),
])
def test_op_function_must_create_one_op(op_fn, match):
    with pytest.raises(GradientContractError, match=match):
        op_with_gradient(op_fn, sign_ste_grad)(tf.constant(X))


def test_the_scratch_graph_is_traced_once_per_signature(monkeypatch):
    calls = []
    real = tracing.trace

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(tracing, "trace", counting)
    fn = op_with_gradient(tf.sign, sign_ste_grad)
    for _ in range(3):
        fn(tf.constant(X))
    fn(tf.constant(X.astype(np.float64)))  # a new dtype: traced again
    fn(tf.constant(X), name="other")       # a new Python argument: again
    fn(tf.constant(X), name="other")
    assert len(calls) == 3


def test_indexed_slices_gradient_and_integer_inputs():
    """TF's GatherV2 gradient returns IndexedSlices for params and None for
    the int32 indices and the axis constant."""
    params = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    indices = tf.constant([0, 2, 2])
    grads = []
    for fn in (op_with_gradient(tf.gather, "GatherV2"), tf.gather):
        with tf.GradientTape() as tape:
            tape.watch(params)
            y = fn(params, indices)
        grads.append(tape.gradient(y, params))
    assert isinstance(grads[0], tf.IndexedSlices)
    np.testing.assert_array_equal(tf.convert_to_tensor(grads[0]),
                                  tf.convert_to_tensor(grads[1]))


def test_unknown_static_shape_in_tf_function():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = op_with_gradient(tf.sign, sign_ste_grad)(x)
        return tape.gradient(y, x)

    np.testing.assert_array_equal(grad(tf.constant(X)), (np.abs(X) <= 1.0))


def test_python_values_only_run_the_op():
    out = op_with_gradient(tf.sign, sign_ste_grad)(-3.0)
    assert float(out) == -1.0


def test_bad_gradient_arguments():
    with pytest.raises(UnknownGradientError, match="NoSuchGradient"):
        op_with_gradient(tf.sign, "NoSuchGradient")
    with pytest.raises(TypeError, match="gradient must be"):
        op_with_gradient(tf.sign, 3)
    with pytest.raises(TypeError, match="op_fn must be callable"):
        op_with_gradient("Sign", sign_ste_grad)


def test_signature_and_registered_functions():
    wrapped = op_with_gradient(tf.sign, sign_ste_grad)
    assert inspect.signature(wrapped) == inspect.signature(tf.sign)
    name = go.register_gradient(sign_ste_grad, name="test_legacy.SignSTE")
    by_name = testing.evaluate(op_with_gradient(tf.sign, name), X, "eager")
    by_fn = testing.evaluate(wrapped, X, "eager")
    np.testing.assert_array_equal(by_name.gradients[0], by_fn.gradients[0])


# --- legacy gradient functions that call tf.gradients -----------------------------

def smooth_max_pool_grad(op, grad):
    """Feature-visualization code: the max-pool gradient of a smooth
    surrogate, computed with tf.gradients (graph code)."""
    inp = op.inputs[0]
    args = [op.get_attr("ksize"), op.get_attr("strides"), op.get_attr("padding")]
    smooth = tf.nn.avg_pool(inp ** 2, *args) / (
        1e-2 + tf.nn.avg_pool(tf.abs(inp), *args))
    return tf.gradients(smooth, [inp], grad)[0]


def _surrogate_gradient(x, dy):
    """The same gradient, written for a GradientTape."""
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        smooth = tf.nn.avg_pool2d(x ** 2, 2, 2, "VALID") / (
            1e-2 + tf.nn.avg_pool2d(tf.abs(x), 2, 2, "VALID"))
    return tape.gradient(smooth, x, output_gradients=tf.constant(dy)).numpy()


def test_a_legacy_gradient_calling_tf_gradients_works_in_every_mode():
    rs = np.random.RandomState(11)
    x = rs.randn(2, 4, 4, 3).astype(np.float32)
    x[0, 0, 0, 0] = 0.0  # an exact zero in a pooling window
    dy = rs.randn(2, 2, 2, 3).astype(np.float32)
    pool = lambda t: tf.nn.max_pool2d(t, 2, 2, "VALID")  # noqa: E731

    def tf1(t):
        with go.override_gradients({"MaxPool": smooth_max_pool_grad}):
            return pool(t)

    reference = testing.evaluate(tf1, x, "graph", upstream=dy)
    np.testing.assert_allclose(reference.gradients[0], _surrogate_gradient(x, dy),
                               rtol=1e-5, atol=1e-6)
    migrated = op_with_gradient(pool, smooth_max_pool_grad)
    for mode in ALL_MODES:
        got = testing.evaluate(migrated, x, mode, upstream=dy)
        np.testing.assert_array_equal(got.outputs, reference.outputs)
        np.testing.assert_allclose(got.gradients[0], reference.gradients[0],
                                   rtol=1e-6, atol=1e-7, err_msg=mode)


def test_tf_gradients_in_a_legacy_gradient_under_nested_tapes():
    def cube_grad(op, dy):  # d(x^3)/dx through tf.gradients, pretending Square
        x = op.inputs[0]
        return tf.gradients(x * x * x, x, dy)[0]

    fn = op_with_gradient(tf.square, cube_grad)
    x = tf.constant([-2.0, 0.0, 0.5, 3.0])
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        first = inner.gradient(y, x)
    np.testing.assert_allclose(first, 3 * x.numpy() ** 2)
    np.testing.assert_allclose(outer.gradient(first, x), 6 * x.numpy())


def test_the_eager_gradient_is_traced_once_per_signature():
    traces = []

    def counting(op, dy):
        traces.append(op.type)
        return dy * 2.0

    fn = op_with_gradient(tf.identity, counting)
    for value in ([1.0, 2.0], [3.0, -4.0], [0.0, 5.0]):
        x = tf.constant(value)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        np.testing.assert_array_equal(tape.gradient(y, x), [2.0, 2.0])
    assert traces == ["Identity"]


# --- one argument feeding several op inputs ---------------------------------------

@pytest.mark.parametrize("mode", ALL_MODES)
def test_one_argument_feeding_both_inputs_of_mul_gets_both_gradients(mode):
    a = np.array([1.5, -2.0, 0.0, 0.25], np.float32)
    up = np.array([1.0, -0.5, 2.0, 3.0], np.float32)
    square = op_with_gradient(lambda t: tf.multiply(t, t), "Mul")
    got = testing.evaluate(square, a, mode, upstream=up)
    np.testing.assert_array_equal(got.outputs, a * a)
    np.testing.assert_allclose(got.gradients[0], 2 * a * up)

    def weighted(op, dy):  # tells the two op inputs apart
        return dy * 1.0, dy * 10.0

    both = op_with_gradient(lambda t: tf.multiply(t, t), weighted)
    got = testing.evaluate(both, a, mode, upstream=up)
    np.testing.assert_allclose(got.gradients[0], 11.0 * up)
    # Arguments in another order than the op's inputs.
    swapped = op_with_gradient(lambda s, t: tf.multiply(t, s), weighted)
    got = testing.evaluate(swapped, [a, a + 1.0], mode, upstream=up)
    np.testing.assert_allclose(got.gradients[0], 10.0 * up)
    np.testing.assert_allclose(got.gradients[1], 1.0 * up)
    # Two arguments, the same tensor passed as both: the sum reaches it.
    pair = op_with_gradient(lambda s, t: tf.multiply(s, t), weighted)
    got = testing.evaluate(lambda s, t: pair(t, t), [a, a], mode, upstream=up)
    np.testing.assert_allclose(got.gradients[1], 11.0 * up)
    np.testing.assert_array_equal(got.gradients[0], np.zeros_like(a))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_too_few_gradients_for_mul_is_a_contract_error(mode):
    def one(op, dy):
        return dy

    fns = [op_with_gradient(tf.multiply, one),
           op_with_gradient(lambda t, s: tf.multiply(t, s), one)]
    a = np.array([1.0, 2.0], np.float32)
    for fn in fns:
        with pytest.raises(GradientContractError,
                           match=r"returned 1 gradient\(s\), but the op has 2 input"):
            testing.evaluate(fn, [a, a + 1.0], mode)
    square = op_with_gradient(lambda t: tf.multiply(t, t), one)
    with pytest.raises(GradientContractError, match=r"\(type Mul\)"):
        testing.evaluate(square, a, mode)
