"""What a traced training step with graph_override.keras holds in memory.

A gradient written as larq writes it, ``tf.where(mask, dy, tf.zeros_like(dy))``,
is folded by Grappler into a constant of dy's full shape, and the
instantiated step keeps that constant allocated for as long as the function
lives: a batch of activations per input quantizer (measured on the network
of tools/bench_keras.py at batch 256, after the step with the allocator
trimmed: 8.7 MB more resident than the float network, 1.6 MB with a scalar
zero). The zero that fills the masked gradient must be a scalar.
"""

import logging

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override.keras._functions import CODES

MASKED = [("SteSign", {}), ("SteSign", {"clip_value": 0.5}), ("ApproxSign", {}),
          ("SteHeaviside", {}), ("SteTern", {}), ("MagnitudeAwareSign", {})]


def _ids(cases):
    """Test ids of (quantizer class, settings) cases."""
    return ["%s%s" % (c, p or "") for c, p in cases]


def _selects(graph):
    return [op for op in graph.get_operations() if op.type in ("Select", "SelectV2")]


def _read(ops):
    return [op for op in ops if any(o.consumers() for o in op.outputs)]


def _after_the_gradient(tensor):
    """Whether `tensor` is computed once the backward pass has begun: some
    op it depends on (through inputs or control inputs) is the tape's."""
    seen, todo = set(), [tensor.op]
    while todo:
        op = todo.pop()
        if op.name.startswith("gradient_tape/"):
            return True
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                todo.append(parent)
    return False


def _zero_fills(graph, shape):
    """Constant-filled tensors of `shape` that some op reads (the tape's own
    zeros for IdentityN's unused outputs are read by nothing, and pruned)."""
    return [op for op in graph.get_operations()
            if op.type in ("Fill", "ZerosLike", "Const") and op.outputs
            and op.outputs[0].shape.as_list() == list(shape) and op.outputs[0].consumers()]


@pytest.mark.parametrize("cls,params", MASKED, ids=_ids(MASKED))
def test_masked_gradient_fills_with_a_scalar_zero(cls, params):
    quantizer = getattr(lq.quantizers, cls)(**params)
    x = np.linspace(-1.5, 1.5, 64 * 32).reshape(64, 32).astype(np.float32)
    dy = np.where(np.arange(x.size).reshape(x.shape) % 3 == 0, -1.0, 0.5).astype(np.float32)

    @tf.function
    def gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = quantizer(x)
        return tape.gradient(y, x, output_gradients=dy)

    traced = gradient.get_concrete_function(tf.constant(x), tf.constant(dy))
    selects = _selects(traced.graph)
    assert selects, "the masked gradient is a select"
    for op in selects:
        assert [i.shape.rank for i in op.inputs] == [2, 2, 0], op.name
    assert _zero_fills(traced.graph, x.shape) == []
    # The values are unchanged: +0.0 where masked, also for dy < 0.
    got = gradient(tf.constant(x), tf.constant(dy)).numpy()
    assert np.array_equal(np.signbit(got[got == 0]), np.zeros((got == 0).sum(), bool))
    assert (got == 0).any() and (got != 0).any()


def test_training_step_holds_no_batch_sized_zeros():
    model = tf.keras.Sequential([
        tf.keras.Input((16,)),
        lq.layers.QuantDense(32, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                             kernel_constraint="weight_clip"),
        lq.layers.QuantDense(10, input_quantizer="approx_sign",
                             kernel_quantizer="ste_tern")])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.RandomState(0).uniform(-1, 1, (128, 16)).astype(np.float32)
    y = np.arange(128) % 10

    @tf.function
    def step(x, y):
        return model.train_step((x, y))

    graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
    # Both kernels and the second input; the first input's (a gradient no one
    # asks for, computed by the layer's own gradient) is read by nothing and
    # pruned when the step is instantiated.
    assert len(_read(_selects(graph))) == 3
    for op in _selects(graph):
        assert op.inputs[2].shape.rank == 0, op.name
    for shape in [(128, 16), (128, 32), (16, 32), (32, 10)]:
        assert _zero_fills(graph, shape) == [], shape


def _kept(graph, shape):
    """The tensors of `shape` that the forward pass computes and the
    backward pass reads: what a training step holds between the two."""
    after = {}

    def is_after(op):
        if op.name not in after:
            after[op.name] = _after_the_gradient(op.outputs[0]) if op.outputs else any(
                _after_the_gradient(t) for t in op.inputs)
        return after[op.name]

    return sorted({t.name: t for op in graph.get_operations() if is_after(op)
                   for t in op.inputs
                   if t.shape.as_list() == list(shape) and not is_after(t.op)}.values(),
                  key=lambda t: t.name)


# (input quantizer, the dtypes its layer keeps of its float32 input): the
# quantized input in float16 and the mask for the quantizers with a compact
# form, the input itself for the others, as the float Dense (None) keeps it.
KEPT = [("ste_sign", ["bool", "float16"]), ("ste_heaviside", ["bool", "float16"]),
        ("ste_tern", ["bool", "float16"]), ("SteSign(clip_value=None)", ["float16"]),
        ("approx_sign", ["float32"]), ("dorefa_quantizer", ["float32"]), (None, ["float32"])]


@pytest.mark.parametrize("quantizer,dtypes", KEPT, ids=[str(q) for q, _ in KEPT])
def test_training_step_keeps_3_bytes_where_the_float_layer_keeps_4(quantizer, dtypes):
    """What a quantized layer keeps of its input between the forward and the
    backward pass of a traced training step: with ste_sign, ste_heaviside or
    ste_tern, the quantized input in float16 and the gradient's mask (3 bytes
    per element; the quantized input is cast back once dy is there);
    with another quantizer of the package's, the input itself, as the float
    layer keeps it (4 bytes), not the quantized input and the mask (5), both
    computed again once dy is there."""
    if quantizer is None:
        layer = tf.keras.layers.Dense(32)
    else:
        if quantizer.startswith("SteSign"):
            quantizer = lq.quantizers.SteSign(clip_value=None)
        layer = lq.layers.QuantDense(32, input_quantizer=quantizer,
                                     kernel_quantizer="ste_sign", kernel_constraint="weight_clip")
    model = tf.keras.Sequential([tf.keras.Input((12,)), tf.keras.layers.Dense(16), layer])
    model.compile("sgd", tf.keras.losses.MeanSquaredError())
    x = np.random.RandomState(0).uniform(-1, 1, (128, 12)).astype(np.float32)
    y = np.zeros((128, 32), np.float32)

    @tf.function
    def step(x, y):
        return model.train_step((x, y))

    graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
    assert sorted(t.dtype.name for t in _kept(graph, (128, 16))) == dtypes
    kernel_gradients = [op for op in graph.get_operations()
                        if op.type == "MatMul" and op.outputs[0].shape.as_list() == [16, 32]]
    assert len(kernel_gradients) == 1, kernel_gradients
    (layer_input,) = [t for t in kernel_gradients[0].inputs if t.shape.as_list() == [128, 16]]
    assert _after_the_gradient(layer_input) == (quantizer is not None), layer_input.op.name


RECOMPUTED = [("QuantDense", dict(units=6), (5, 7)),
              ("QuantConv1D", dict(filters=3, kernel_size=3, padding="same", pad_values=1.0),
               (2, 9, 4)),
              ("QuantConv2D", dict(filters=3, kernel_size=3), (2, 7, 7, 4)),
              ("QuantConv2DTranspose", dict(filters=3, kernel_size=3, strides=2), (2, 5, 5, 4)),
              ("QuantDepthwiseConv2D", dict(kernel_size=3, padding="same"), (2, 7, 7, 4)),
              ("QuantSeparableConv2D", dict(filters=3, kernel_size=3), (2, 7, 7, 4))]


def _bits(value):
    value = np.asarray(value)
    return value.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[value.dtype.itemsize])


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
@pytest.mark.parametrize("name,kwargs,shape", RECOMPUTED, ids=[n for n, _, _ in RECOMPUTED])
def test_recomputed_input_gives_the_direct_gradients_bit_for_bit(name, kwargs, shape, dtype,
                                                                  traced):
    """A layer that quantizes its input again in the backward pass (one of
    the library's own quantizers) against the same layer given the
    quantizer's bare function, which it applies once: the same outputs and
    the same gradients for the input, the kernels and the bias, bit for bit,
    under a float32 and a mixed-precision policy (whose bias Keras casts
    inside the layer's call only), with inputs on 0 and on the clip value."""
    cls = getattr(lq.layers, name)
    weights = {}
    for argument, _ in cls.quantizer_arguments:
        weights[argument] = "ste_sign"
        weights[argument.replace("_quantizer", "_constraint")] = "weight_clip"
    layers = [cls(input_quantizer=quantizer, use_bias=True, dtype=dtype, **weights, **kwargs)
              for quantizer in ("ste_sign", lq.quantizers.ste_sign)]
    rng = np.random.RandomState(3)
    x = rng.uniform(-1.5, 1.5, shape).astype(np.float32)
    x.flat[::5], x.flat[1::7], x.flat[2::11] = 0.0, 1.0, -1.0
    for layer in layers:
        layer.build(shape)
    layers[1].set_weights([rng.uniform(-1.2, 1.2, w.shape).astype(w.dtype)
                           for w in layers[0].get_weights()])
    layers[0].set_weights(layers[1].get_weights())
    assert layers[0].bias is not None

    def gradients(layer, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cos(tf.cast(y, tf.float32)))
        return [y] + tape.gradient(loss, [x] + layer.trainable_variables)

    run = tf.function(gradients) if traced else gradients
    got, want = [run(layer, tf.constant(x)) for layer in layers]
    assert len(got) == len(want) == 2 + len(layers[0].trainable_variables)
    for a, b, variable in zip(got[2:], want[2:], layers[0].trainable_variables):
        assert a.dtype == b.dtype == variable.dtype
    for a, b in zip(got, want):
        assert np.array_equal(_bits(a), _bits(b))
    assert np.count_nonzero(got[1]) and not np.all(got[1])  # masked where |x| > 1


# Every quantizer with parts, with settings that move its gradient's edges.
PARTED = [("SteSign", {}), ("SteSign", {"clip_value": 0.5}), ("SteSign", {"clip_value": None}),
          ("ApproxSign", {}), ("SwishSign", {"beta": 2.0}), ("SteHeaviside", {}),
          ("SteTern", {}), ("SteTern", {"ternary_weight_networks": True}),
          ("MagnitudeAwareSign", {}), ("DoReFa", {}), ("DoReFa", {"k_bit": 3, "mode": "weights"})]


def _edges(shape, seed):
    """Values across [-1.5, 1.5] with the quantizers' edges among them: both
    zeros, ±1 (the clip), ±0.5, ±0.05 (ste_tern's threshold), 1.5."""
    x = np.random.RandomState(seed).uniform(-1.5, 1.5, shape).astype(np.float32)
    edges = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.05, -0.05, 1.5, -1.5]
    x.flat[:len(edges)] = edges
    x.flat[len(edges)::9] = 1.0
    return x


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("dtype", [tf.float32, tf.float16])
@pytest.mark.parametrize("cls,params", PARTED, ids=_ids(PARTED))
def test_parts_are_the_quantizer_call_bit_for_bit(cls, params, dtype, traced):
    """A quantizer's `parts` give what its call gives, bit for bit: the value
    the call returns and the gradient a tape takes through it, for an upstream
    gradient with negative values and zeros (a masked gradient is +0.0 where
    dy < 0, not -0.0), in float32 and float16."""
    quantizer = getattr(lq.quantizers, cls)(**params)
    value, gradient = quantizer.parts()
    x = tf.constant(_edges((6, 5, 4), 0), dtype)
    dy = np.random.RandomState(1).normal(size=x.shape).astype(np.float32)
    dy.flat[::4] = 0.0
    dy = tf.constant(dy, dtype)

    def both(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = quantizer(x)
        return y, tape.gradient(y, x, output_gradients=dy), value(x), gradient(x, dy)

    run = tf.function(both) if traced else both
    y, dx, y_parts, dx_parts = run(x, dy)
    assert y_parts.dtype == dx_parts.dtype == dtype
    assert np.array_equal(_bits(y), _bits(y_parts))
    assert np.array_equal(_bits(dx), _bits(dx_parts))
    assert np.count_nonzero(dx.numpy())
    if params.get("clip_value", 1.0) is not None and cls not in ("SwishSign", "DoReFa"):
        assert not np.all(dx.numpy())  # masked beyond the clip


COMPACT = [("SteSign", {}), ("SteSign", {"clip_value": 0.5}), ("SteSign", {"clip_value": None}),
           ("SteHeaviside", {}), ("SteTern", {}), ("SteTern", {"ternary_weight_networks": True})]


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("cls,params", COMPACT, ids=_ids(COMPACT))
def test_compact_form_gives_back_the_value_and_the_gradient_bit_for_bit(cls, params, dtype):
    """What a layer keeps of its input with a quantizer's compact form (the
    quantized input in float16, and the mask) gives back the quantized input
    and the input's gradient bit for bit, on the edges and on -0, +-inf and
    NaN (a NaN comes back as a NaN)."""
    quantizer = getattr(lq.quantizers, cls)(**params)
    keep, restore = quantizer.compact(dtype)
    value, gradient = quantizer.parts()
    edges = _edges((7, 6), 4)
    if not params.get("ternary_weight_networks"):  # its threshold would be NaN everywhere
        edges.flat[-4:] = [np.inf, -np.inf, np.nan, -0.0]
    x = tf.constant(edges.astype(dtype.as_numpy_dtype))
    dy = np.random.RandomState(5).normal(size=x.shape)
    dy.flat[::4] = 0.0
    dy = tf.constant(dy.astype(dtype.as_numpy_dtype))
    q = value(x)
    kept = keep(x, q)
    clipped = params.get("clip_value", 1.0) is not None
    assert [k.dtype for k in kept] == [CODES] + ([tf.bool] if clipped else [])
    again, dx = restore(kept)
    assert again.dtype == dtype
    want = q.numpy()
    nan = np.isnan(want)
    assert nan.any() != bool(params.get("ternary_weight_networks"))
    assert np.array_equal(np.isnan(again.numpy()), nan)
    assert np.array_equal(_bits(again.numpy()[~nan]), _bits(want[~nan]))
    assert len(np.unique(want[~nan])) == (2 if cls in ("SteSign", "SteHeaviside") else 3)
    assert np.array_equal(_bits(dx(dy).numpy()), _bits(gradient(x, dy).numpy()))


def test_a_16_bit_input_keeps_itself():
    """An input in float16 or bfloat16 is as small as the quantized input
    in float16: no compact form."""
    for dtype in (tf.float16, tf.bfloat16):
        assert lq.quantizers.SteSign().compact(dtype) is None


def test_only_mask_gradients_with_three_values_have_a_compact_form():
    for quantizer in [lq.quantizers.ApproxSign(), lq.quantizers.SwishSign(),
                      lq.quantizers.MagnitudeAwareSign(), lq.quantizers.DoReFa(),
                      lq.quantizers.NoOp(precision=8)]:
        assert quantizer.compact(tf.float32) is None, quantizer


def test_noop_and_the_users_quantizers_have_no_parts():
    assert lq.quantizers.NoOp(precision=8).parts() is None

    class Halving(lq.quantizers.Quantizer):
        def call(self, inputs):
            return inputs * 0.5
    assert Halving().parts() is None


@pytest.mark.parametrize("cls,params", PARTED, ids=_ids(PARTED))
def test_each_recomputed_input_quantizer_gives_the_direct_gradients(cls, params):
    """A QuantConv2D that quantizes its input again in the backward pass,
    with each quantizer that has parts, against the same layer given a
    function that calls the same quantizer once: the same outputs and
    gradients (input, kernel, bias), bit for bit, in a tf.function."""
    quantizer = getattr(lq.quantizers, cls)(**params)
    layers = [lq.layers.QuantConv2D(3, 3, padding="same", input_quantizer=q,
                                    kernel_quantizer="ste_sign", kernel_constraint="weight_clip")
              for q in (quantizer, lambda x: quantizer(x))]
    x = tf.constant(_edges((2, 6, 6, 4), 2))
    for layer in layers:
        layer.build(x.shape)
    rng = np.random.RandomState(3)
    layers[0].set_weights([rng.uniform(-1.2, 1.2, w.shape).astype(w.dtype)
                           for w in layers[0].get_weights()])
    layers[1].set_weights(layers[0].get_weights())

    @tf.function
    def gradients(layer, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(y * tf.cos(y))
        return [y] + tape.gradient(loss, [x] + layer.trainable_variables)

    got, want = gradients(layers[0], x), gradients(layers[1], x)
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        assert np.array_equal(_bits(a), _bits(b))
    assert np.count_nonzero(got[1].numpy())


def test_exported_model_gives_the_input_gradient_of_the_live_one(tmp_path, caplog):
    """A model exported as a SavedModel (``model.export``) and loaded back
    computes the same outputs and the same input gradient as the live model:
    the recomputing gradient is saved with it, and holds no custom gradient
    of its own that the SavedModel would lose (TensorFlow warns on loading
    one: "Importing a function ... with ops with unsaved custom gradients")."""
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 3)),
        lq.layers.QuantConv2D(4, 3, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                              kernel_constraint="weight_clip"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Rescaling(0.05),  # sums of +-1 products, into approx_sign's [-1, 1]
        lq.layers.QuantDense(10, input_quantizer="approx_sign", kernel_quantizer="ste_sign",
                             kernel_constraint="weight_clip")])
    x = np.random.RandomState(0).uniform(-1.5, 1.5, (4, 8, 8, 3)).astype(np.float32)
    x[0, 0, 0] = 0.0
    model.export(str(tmp_path / "exported"))
    with caplog.at_level(logging.WARNING):
        loaded = tf.saved_model.load(str(tmp_path / "exported"))  # kept: it owns the variables
    assert not [r for r in caplog.records if "custom gradient" in r.getMessage()]

    def input_gradient(function):
        inputs = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = function(inputs)
            loss = tf.reduce_sum(y * tf.cos(y))
        return y.numpy(), tape.gradient(loss, inputs).numpy()

    (y0, g0), (y1, g1) = input_gradient(model), input_gradient(loaded.serve)
    assert np.array_equal(_bits(y0), _bits(y1))
    assert np.array_equal(_bits(g0), _bits(g1))
    assert np.count_nonzero(g0) and not np.all(g0)
