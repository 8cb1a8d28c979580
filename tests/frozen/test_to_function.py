"""frozen.to_function: forward bitwise equal to the Session, gradients equal
to the patched graph in a Session and to the graph_override.tf2 twin, in
eager and tf.function modes; trainable weights; clear refusals."""

import numpy as np
import pytest
import tensorflow as tf

import frozen_tf2_models as models
from graph_override import frozen
from graph_override.errors import ConversionError, UnknownGradientError

MODES = ["eager", "function"]


@pytest.fixture(scope="module")
def mlp():
    return models.binarized_mlp("sign")


@pytest.fixture(scope="module")
def custom():
    return models.binarized_mlp("custom")


def _x(rng_seed=0, shape=(6, 16), dtype=np.float32):
    """Inputs with exact zeros and the values +-1."""
    x = np.random.RandomState(rng_seed).randn(*shape).astype(dtype)
    x[0] = 0.0
    x[1, :4] = [1.0, -1.0, 0.0, -0.0]
    return x


def _same_gradients(got, expected, atol):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol)


def _check(fn, graph_def, inputs, outputs, feeds, mode, rules=(), tf2_twin=None,
           atol=1e-6):
    """Compares fn with the patched Session (and the tf2 twin); returns the
    function's (outputs, input grads, weight grads)."""
    ref_out, ref_dx, ref_dw, cot = models.session_reference(
        graph_def, inputs, outputs, feeds, rules=rules, weights=list(fn.weight_names))
    out, dx, dw = models.tape_gradients(fn, fn.trainable_variables, feeds, cot,
                                        use_function=mode == "function")
    for a, b in zip(out, ref_out):
        assert a.dtype == b.dtype
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))  # bitwise, -0.0 too
    _same_gradients(dx + dw, ref_dx + ref_dw, atol)
    if tf2_twin is not None:
        variables = {n: tf.Variable(v) for n, v in fn.initial_values().items()}
        t_out, t_dx, t_dw = models.tape_gradients(
            lambda *xs: tf2_twin(*xs, variables),
            [variables[n] for n in fn.weight_names], feeds, cot)
        np.testing.assert_allclose(t_out[0], out[0], rtol=1e-6, atol=1e-6)
        _same_gradients(t_dx + t_dw, dx + dw, atol)
    return out, dx, dw


@pytest.mark.parametrize("mode", MODES)
def test_binarized_mlp_matches_session_and_tf2(mlp, mode):
    fn = frozen.to_function(*mlp, rules=["Sign=ste_sign"], trainable="kernel|bias")
    _, dx, dw = _check(fn, *mlp, [_x()], mode, rules=["Sign=ste_sign"],
                       tf2_twin=models.mlp_tf2)
    kernel = dw[fn.weight_names.index("dense_0/kernel")]
    # |w| = 1 passes the straight-through gradient, |w| = 1.5 stops it.
    assert kernel[0, 0] != 0 and kernel[1, 0] != 0 and kernel[2, 0] == 0
    assert np.count_nonzero(dx[0]) > dx[0].size // 2


def test_without_rules_the_sign_gradient_vanishes(mlp):
    fn = frozen.to_function(*mlp)
    _, dx, _ = models.tape_gradients(fn, [], [_x()], [np.ones((6, 4), np.float32)])
    assert not np.any(dx[0])  # TensorFlow's own Sign gradient: zero
    fixed = frozen.to_function(*mlp, rules=["Sign=ste_sign"])
    _, dx, _ = models.tape_gradients(fixed, [], [_x()], [np.ones((6, 4), np.float32)])
    assert np.any(dx[0])


def test_dead_custom_gradient_names_refused_with_the_repair_rule(custom):
    with pytest.raises(UnknownGradientError,
                       match=r"CustomGradient-\d+.*IdentityN.*"
                             r"rules=\['gradient:CustomGradient-\*=ste_sign'\]"):
        frozen.to_function(*custom)


@pytest.mark.parametrize("mode", MODES)
def test_custom_gradient_variant_repaired_through_rules(custom, mlp, mode):
    rules = ["gradient:CustomGradient-*=ste_sign"]
    fn = frozen.to_function(*custom, rules=rules, trainable="kernel|bias")
    out, dx, dw = _check(fn, *custom, [_x()], mode, rules=rules, tf2_twin=models.mlp_tf2)
    sign_fn = frozen.to_function(*mlp, rules=["Sign=ste_sign"], trainable="kernel|bias")
    cot = [np.random.RandomState(0).randn(6, 4).astype(np.float32)]
    s_out, s_dx, s_dw = models.tape_gradients(sign_fn, sign_fn.trainable_variables,
                                              [_x()], cot)
    assert np.array_equal(out[0], s_out[0])


def test_trainable_weights_are_bitwise_the_constants(mlp):
    fn = frozen.to_function(*mlp, trainable="kernel")
    assert fn.weight_names == ["dense_0/kernel", "dense_1/kernel", "dense_2/kernel"]
    consts = models.weights_of(mlp[0], fn.weight_names)
    for name, variable in zip(fn.weight_names, fn.trainable_variables):
        assert variable.dtype == tf.float32
        assert np.array_equal(variable.numpy().view(np.uint32), consts[name].view(np.uint32))
    by_size = frozen.to_function(*mlp, trainable=1000)
    assert by_size.weight_names == ["dense_1/kernel"]  # 1024 elements; the others fewer
    assert frozen.to_function(*mlp).trainable_variables == ()


def test_a_call_binds_its_arguments_without_formatting_them(mlp, monkeypatch):
    """Without the feeds' signature TensorFlow first failed to bind the
    arguments, formatted every input and weight into an error it discarded,
    and retried: milliseconds per call spent in numpy's array printing."""
    fn = frozen.to_function(*mlp, trainable="kernel")
    x = tf.constant(_x())
    fn(x)
    formatted = []
    base = next(c for c in type(x).__mro__ if "__repr__" in vars(c))

    def counting_repr(self):
        formatted.append(self.shape)
        return "<tensor>"

    monkeypatch.setattr(base, "__repr__", counting_repr)
    with tf.GradientTape() as tape:
        y = fn(x)
    grads = tape.gradient(y, fn.trainable_variables)
    assert formatted == []
    assert [g.shape for g in grads] == [v.shape for v in fn.trainable_variables]
    with pytest.raises(ValueError, match="expects shape"):
        fn(tf.zeros([2, 3]))  # a wrong call is still told what it got


def test_trainable_that_selects_nothing_is_refused(mlp):
    with pytest.raises(ConversionError, match=r"trainable='nope' selects no float Const"
                                              r".*dense_1/kernel \[32, 32\]"):
        frozen.to_function(*mlp, trainable="nope")
    with pytest.raises(ConversionError, match="not a valid regular expression"):
        frozen.to_function(*mlp, trainable="(")


def test_fine_tuning_lowers_the_loss(mlp):
    fn = frozen.to_function(*mlp, rules=["Sign=ste_sign"], trainable="kernel|bias")
    rng = np.random.RandomState(1)
    x = rng.randn(128, 16).astype(np.float32)
    y = np.argmax(x[:, :4], axis=1)
    optimizer = tf.keras.optimizers.Adam(0.02)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=fn(x)))
        optimizer.apply_gradients(zip(tape.gradient(loss, fn.trainable_variables),
                                      fn.trainable_variables))
        return loss
    losses = [float(step()) for _ in range(60)]
    assert losses[-1] < 0.8 * losses[0]
    initial = fn.initial_values()
    assert not np.array_equal(fn.weights[0].numpy(), initial["dense_0/kernel"])


def test_names_not_in_the_graph_are_refused_with_suggestions(mlp):
    graph_def = mlp[0]
    with pytest.raises(ConversionError, match=r"inputs names 'xx:0'.*Did you mean 'x:0'"):
        frozen.to_function(graph_def, ["xx"], ["logits"])
    with pytest.raises(ConversionError, match=r"outputs names 'logit:0'.*'logits:0'"):
        frozen.to_function(graph_def, ["x"], ["logit"])
    with pytest.raises(ConversionError, match=r"has one output; use 'logits:0'"):
        frozen.to_function(graph_def, ["x"], ["logits:1"])
    with pytest.raises(ConversionError, match="no outputs given"):
        frozen.to_function(graph_def, ["x"], [])


def test_unknown_custom_op_is_refused(mlp):
    graph_def = tf.compat.v1.GraphDef()
    graph_def.CopyFrom(mlp[0])
    next(n for n in graph_def.node if n.name == "Sign_1").op = "MyBinarize"
    with pytest.raises(ConversionError, match=r"MyBinarize \(node\(s\) Sign_1\).*"
                                              r"tf.load_op_library"):
        frozen.to_function(graph_def, ["x"], ["logits"])


def test_v1_control_flow_is_refused():
    graph_def, inputs, outputs = models.v1_while()
    with pytest.raises(ConversionError, match=r"TF1 while loop.*\((Enter|LoopCond)\).*"
                                              r"cannot differentiate"):
        frozen.to_function(graph_def, inputs, outputs)


def test_only_a_loop_the_outputs_need_is_refused():
    graph_def, inputs, outputs = models.cnn_before_loop()
    x = np.random.RandomState(2).randn(2, 4, 4, 1).astype(np.float32)
    fn = frozen.to_function(graph_def, inputs, outputs, trainable="conv")
    _check(fn, graph_def, inputs, outputs, [x], "eager")
    with pytest.raises(ConversionError, match=r"outputs need a TF1 while loop.*"
                                              r"convert the part before the loop"):
        frozen.to_function(graph_def, inputs, ["state:0"])


@pytest.mark.parametrize("mode", MODES)
def test_tf1_cond_cnn_matches_tensorflows_own_route(mode):
    """Switch/Merge without a loop: TensorFlow's wrap_function + prune
    differentiates it, and so does to_function, bitwise."""
    graph_def, inputs, outputs = models.cond_cnn()
    x = np.random.RandomState(3).randn(2, 8, 8, 1).astype(np.float32)
    ref_out, ref_dx, cot = models.wrap_prune_reference(graph_def, inputs, outputs, [x])
    fn = frozen.to_function(graph_def, inputs, outputs)
    out, dx, _ = models.tape_gradients(fn, [], [x], cot, use_function=mode == "function")
    if mode == "function":
        # In a tf.function, Grappler may fuse the convolution with its bias
        # and activation: on some processors oneDNN's fused kernel rounds the
        # last bit differently (seen: 4e-8 on values of 0.1).
        for got, want in ((out[0], ref_out[0]), (dx[0], ref_dx[0])):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    else:
        np.testing.assert_array_equal(out[0], ref_out[0])
        np.testing.assert_array_equal(dx[0], ref_dx[0])
    assert np.any(dx[0])


def test_an_unfed_placeholder_is_named():
    graph_def, _, outputs = models.two_placeholders()
    with pytest.raises(ConversionError, match=r"output distance:0 depends on Placeholder "
                                              r"y: add 'y:0' to inputs") as info:
        frozen.to_function(graph_def, ["x:0"], outputs)
    assert info.value.usage
    fn = frozen.to_function(graph_def, ["x:0", "y:0"], outputs)
    a, b = np.ones((1, 3), np.float32), np.zeros((1, 3), np.float32)
    assert fn(a, b).numpy().tolist() == [[-0.5]]


def test_a_placeholder_reached_through_a_control_input_is_named_too():
    """Running the outputs runs their control inputs, which need feeding."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [None, 3], name="y")
        with tf.control_dependencies([tf.identity(y, name="check")]):
            tf.identity(x * 2.0, name="out")
    with pytest.raises(ConversionError, match=r"output out:0 depends on Placeholder y"):
        frozen.to_function(g.as_graph_def(), ["x:0"], ["out:0"])


@pytest.mark.parametrize("resource", [False, True], ids=["VariableV2", "VarHandleOp"])
def test_a_graph_that_is_not_frozen_is_refused_naming_its_variables(resource):
    graph_def, inputs, outputs = models.not_frozen(resource)
    op = "VarHandleOp" if resource else "VariableV2"
    with pytest.raises(ConversionError, match=r"not frozen: the outputs read 2 variable\(s\), "
                                              r"dense/bias \(%s\), dense/kernel \(%s\).*"
                                              r"convert_variables_to_constants" % (op, op)):
        frozen.to_function(graph_def, inputs, outputs)


@pytest.mark.parametrize("mode", MODES)
def test_functional_while_and_if(mode):
    graph_def, inputs, outputs = models.while_if()
    x = np.array([[0.0, 1.0, -1.0], [0.3, -0.2, 0.9]], np.float32)
    # The Session reference differentiates the same library functions in
    # this process first: the function's imports must not collide with it.
    fn = frozen.to_function(graph_def, inputs, outputs, trainable="^w$")
    _, dx, dw = _check(fn, graph_def, inputs, outputs, [x], mode, atol=1e-5)
    assert np.any(dx[0]) and np.any(dw[0])
    again = frozen.to_function(graph_def, inputs, outputs)  # a second import
    _check(again, graph_def, inputs, outputs, [x], mode, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_fake_quant_nodes(mode):
    graph_def, inputs, outputs = models.fake_quant()
    x = np.array([[0.0, 1.0, -1.0, 2.5], [-3.0, 0.5, 0.25, -0.75]], np.float32)
    fn = frozen.to_function(graph_def, inputs, outputs, trainable="act_min|act_max|kernel")
    _, dx, dw = _check(fn, graph_def, inputs, outputs, [x], mode)
    assert dx[0][1, 0] == 0 and dx[0][0, 3] == 0  # outside [min, max]: no gradient
    assert dw[fn.weight_names.index("act_min")] != 0  # -3 is clipped to min


@pytest.mark.parametrize("mode", MODES)
def test_float64_model(mode):
    graph_def, inputs, outputs = models.float64_round()
    x = _x(shape=(4, 5), dtype=np.float64)
    fn = frozen.to_function(graph_def, inputs, outputs, rules=["Round=ste_round"],
                            trainable="^w")
    assert fn.input_specs[0].dtype == tf.float64
    assert [v.dtype for v in fn.weights] == [tf.float64, tf.float64]
    out, _, _ = _check(fn, graph_def, inputs, outputs, [x], mode, rules=["Round=ste_round"],
                       tf2_twin=models.float64_tf2, atol=1e-12)
    assert out[0].dtype == np.float64
    with pytest.raises(TypeError, match="expects float64, got a float32 tensor"):
        fn(tf.constant(x.astype(np.float32)))


@pytest.fixture(scope="module")
def mobilenet():
    return models.mobilenet_v2()


@pytest.mark.slow
def test_mobilenet_v2(mobilenet):
    graph_def, inputs, outputs = mobilenet
    x = np.random.RandomState(0).rand(2, 32, 32, 3).astype(np.float32)
    fn = frozen.to_function(graph_def, inputs, outputs, trainable=1000)
    assert len(fn.weights) > 30
    _check(fn, graph_def, inputs, outputs, [x], "function", atol=1e-9)


def test_only_weights_the_outputs_depend_on_are_trainable():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.matmul(x, tf.constant([[1.0], [2.0]], name="w_used"), name="y")
        tf.matmul(x, tf.constant([[3.0], [4.0]], name="w_unused"), name="other")
    graph_def = g.as_graph_def()
    fn = frozen.to_function(graph_def, ["x"], ["y"], trainable="^w_")
    assert fn.weight_names == ["w_used"]
    with pytest.raises(ConversionError, match="selects no float Const node.*depend on"):
        frozen.to_function(graph_def, ["x"], ["y"], trainable="unused")
