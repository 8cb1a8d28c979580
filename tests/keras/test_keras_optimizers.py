"""graph_override.keras.optimizers (Bop, CaseOptimizer) against a numpy
implementation of Bop's update, bit for bit, on both releases: edge cases in
a custom loop (|m| == threshold, zero gradients, zero weights), model.fit on
a tiny binarized model, save and load, schedules; CaseOptimizer's routing and
errors. (larq itself is compared on TensorFlow 2.15 in
test_keras_larq_optimizers.py.)"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override.errors import OptimizerError, OptimizerTypeError

F = np.float32
# Threshold and gamma are powers of two, so that m == threshold exactly.
THRESHOLD, GAMMA = F(2.0 ** -10), F(0.5)
W0 = np.array([1, -1, 1, -1, 1, -1, 0.0, -0.0, 0.3, -0.3, 1, -1], F)
# Step 1: m = g/2. Columns: w*m == threshold (+1 stays, -1 becomes +1: the
# sign of 0 is +1), zero gradients, then zeros, latent values, flips.
G = np.array([
    [2 * THRESHOLD, -2 * THRESHOLD, 0, 0, 4 * THRESHOLD, -4 * THRESHOLD, 0, 0,
     1e-3, -1e-3, -4 * THRESHOLD, 4 * THRESHOLD],
    [0] * 12,
    [2 * THRESHOLD, 2 * THRESHOLD, -2 * THRESHOLD, 2 * THRESHOLD, 0, 0, 1, -1,
     0, 0, 4 * THRESHOLD, -4 * THRESHOLD],
    [-1e-2, 1e-2, 0, 0, 3 * THRESHOLD, -3 * THRESHOLD, 0, 0, 0, 0, 0, 0],
    [0] * 12], F)


def numpy_bop(w, m, g, gamma, threshold):
    """larq's update, op for op, in float32."""
    m = (m + F(gamma) * (g - m)).astype(F)
    w = np.sign(np.sign(-np.sign(w * m - F(threshold)) * w) + F(0.1)).astype(F)
    return w, m


def _bits(a):
    return np.asarray(a, F).view(np.uint32)


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "function"])
def test_bop_steps_are_numpys_bit_for_bit(traced):
    w = tf.Variable(W0)
    bop = lq.optimizers.Bop(threshold=float(THRESHOLD), gamma=float(GAMMA))
    step = lambda g: bop.apply_gradients([(g, w)])  # noqa: E731
    step = tf.function(step) if traced else step
    w_np, m_np = W0.copy(), np.zeros_like(W0)
    for g in G:
        step(tf.constant(g))
        w_np, m_np = numpy_bop(w_np, m_np, g, GAMMA, THRESHOLD)
        np.testing.assert_array_equal(_bits(w.numpy()), _bits(w_np))
    np.testing.assert_array_equal(_bits(bop._slot(w).numpy()), _bits(m_np))


def test_bop_boundary_zero_gradient_and_zero_weight():
    w = tf.Variable(W0)
    bop = lq.optimizers.Bop(threshold=float(THRESHOLD), gamma=float(GAMMA))
    bop.apply_gradients([(tf.constant(G[0]), w)])
    # w*m == threshold: +1 stays, -1 becomes +1; a zero gradient keeps the sign;
    # 0.0 and -0.0 become +1; w*m > threshold flips.
    assert w.numpy()[:8].tolist() == [1, 1, 1, -1, -1, 1, 1, 1]
    assert w.numpy()[10:].tolist() == [1, -1]


def test_bop_schedules_are_read_at_each_step_and_saved():
    schedule = tf.keras.optimizers.schedules.InverseTimeDecay(0.5, decay_steps=1.0,
                                                              decay_rate=1.0)
    w = tf.Variable(W0)
    bop = lq.optimizers.Bop(threshold=float(THRESHOLD), gamma=schedule)
    w_np, m_np = W0.copy(), np.zeros_like(W0)
    for t, g in enumerate(G):
        bop.apply_gradients([(tf.constant(g), w)])
        gamma = schedule(tf.constant(float(t))).numpy()
        w_np, m_np = numpy_bop(w_np, m_np, g, gamma, THRESHOLD)
    np.testing.assert_array_equal(_bits(w.numpy()), _bits(w_np))
    again = lq.optimizers.Bop.from_config(bop.get_config())
    assert type(again.gamma) is type(schedule) and again.get_config() == bop.get_config()
    assert float(again.threshold.numpy()) == THRESHOLD


def _model(seed=0):
    tf.keras.utils.set_random_seed(seed)
    binary = dict(input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                  kernel_constraint="weight_clip")
    return tf.keras.Sequential([
        # No bias before the normalization: its gradient is rounding noise.
        tf.keras.Input((6,)), lq.layers.QuantDense(5, use_bias=False, name="q1", **binary),
        tf.keras.layers.BatchNormalization(name="bn"),
        lq.layers.QuantDense(3, activation="softmax", name="q2", **binary)])


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    return rs.randn(40, 6).astype(F), np.eye(3, dtype=F)[rs.randint(0, 3, 40)]


def _case(**bop):
    return lq.optimizers.CaseOptimizer(
        (lq.optimizers.Bop.is_binary_variable, lq.optimizers.Bop(**bop)),
        default_optimizer=tf.keras.optimizers.SGD(0.1))


def test_case_optimizer_fit_is_numpy_bop_and_sgd(data):
    """model.fit for 5 steps equals a loop applying numpy's Bop to the binary
    kernels and SGD to the rest, with the same gradients."""
    x, y = data
    model, twin = _model(), _model()
    twin.set_weights(model.get_weights())
    model.compile(_case(threshold=1e-4, gamma=0.1), "categorical_crossentropy")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    loss = tf.keras.losses.CategoricalCrossentropy()
    variables = twin.trainable_variables
    binary = [lq.optimizers.Bop.is_binary_variable(v) for v in variables]
    assert binary == [True, False, False, True, False]  # the two kernels
    sgd, slots = tf.keras.optimizers.SGD(0.1), [np.zeros(v.shape, F) for v in variables]
    for i in range(0, 40, 8):
        with tf.GradientTape() as tape:
            value = loss(y[i:i + 8], twin(x[i:i + 8], training=True))
        grads = tape.gradient(value, variables)
        float_pairs = [(g, v) for g, v, b in zip(grads, variables, binary) if not b]
        sgd.apply_gradients(float_pairs)
        for k, (g, v) in enumerate(zip(grads, variables)):
            if binary[k]:
                new, slots[k] = numpy_bop(v.numpy(), slots[k], g.numpy(), 0.1, 1e-4)
                v.assign(np.clip(new, -1, 1))  # weight_clip, as the optimizer applies it
    for ours, expected in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_array_equal(_bits(ours), _bits(expected))
    kernels = [v.numpy() for v, b in zip(model.trainable_variables, binary) if b]
    assert all(set(np.unique(k)) <= {-1.0, 1.0} for k in kernels)
    assert model.optimizer.var_opt_mapping == {
        "q1/kernel": 0, "bn/gamma": 1, "bn/beta": 1, "q2/kernel": 0, "q2/bias": 1}
    assert int(model.optimizer.iterations.numpy()) == 5


def test_case_optimizer_saves_loads_and_continues_bit_for_bit(data, tmp_path):
    x, y = data
    model = _model()
    model.compile(_case(threshold=1e-4, gamma=0.1), "categorical_crossentropy")
    model.fit(x[:16], y[:16], batch_size=8, shuffle=False, verbose=0)
    path = str(tmp_path / "bop.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    assert [type(o).__name__ for o in loaded.optimizer.optimizers] == ["Bop", "SGD"]
    assert float(loaded.optimizer.optimizers[0].gamma.numpy()) == F(0.1)
    for m in (model, loaded):
        m.fit(x[16:], y[16:], batch_size=8, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(_bits(a), _bits(b))


def test_case_optimizer_checks_its_arguments():
    bop = lq.optimizers.Bop()
    with pytest.raises(OptimizerTypeError, match="callable predicate"):
        lq.optimizers.CaseOptimizer((False, bop))
    with pytest.raises(TypeError, match=r"Keras optimizer at predicate_optimizer_pairs\[0\]\[1\]"):
        lq.optimizers.CaseOptimizer((lq.optimizers.Bop.is_binary_variable, False))
    with pytest.raises(TypeError, match="default_optimizer"):
        lq.optimizers.CaseOptimizer((lambda v: True, bop), default_optimizer=False)
    with pytest.raises(OptimizerError, match="a number or a learning-rate schedule"):
        lq.optimizers.Bop(gamma="fast")


def test_case_optimizer_refuses_overlaps_and_idle_optimizers_and_warns_of_orphans():
    w, v = tf.Variable([1.0]), tf.Variable([2.0])
    pairs = [(tf.constant([1.0]), w), (tf.constant([1.0]), v)]
    both = lq.optimizers.CaseOptimizer((lambda _: True, lq.optimizers.Bop()),
                                       (lambda _: True, lq.optimizers.Bop()))
    with pytest.raises(OptimizerError, match="claimed by optimizers"):
        both.apply_gradients(pairs)
    idle = lq.optimizers.CaseOptimizer((lambda _: False, lq.optimizers.Bop()),
                                       default_optimizer=tf.keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match=r"optimizer \S+ \(pair 0\) claims no variable"):
        idle.apply_gradients(pairs)
    first = lq.optimizers.CaseOptimizer((lambda var: var is w, tf.keras.optimizers.SGD(1.0)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first.apply_gradients(pairs)
    assert any("no default_optimizer" in str(c.message) for c in caught)
    assert w.numpy().tolist() == [0.0] and v.numpy().tolist() == [2.0]


def test_quantized_kernels_carry_their_precision():
    layer = lq.layers.QuantDense(2, kernel_quantizer="ste_sign", kernel_constraint="weight_clip")
    noop = lq.layers.QuantDense(2, kernel_quantizer=lq.quantizers.NoOp(precision=1))
    plain = lq.layers.QuantDense(2, input_quantizer="ste_sign")
    for built in (layer, noop, plain):
        built.build((None, 3))
    assert lq.optimizers.Bop.is_binary_variable(layer.kernel)
    assert lq.optimizers.Bop.is_binary_variable(noop.kernel)
    assert not lq.optimizers.Bop.is_binary_variable(plain.kernel)
    assert not lq.optimizers.Bop.is_binary_variable(layer.bias)


def test_a_softmax_quantized_layer_gives_keras_its_logits():
    """Keras's crossentropy reads the logits of a softmax output (as for its
    own Dense and larq's layers) rather than the clipped probabilities."""
    layer = lq.layers.QuantDense(3, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                                 kernel_initializer="ones", activation="softmax")
    x = tf.constant([[30.0, -1.0, 2.0]])
    y = layer(x)
    logits = getattr(y, "_keras_logits", None)
    assert logits is not None and logits.numpy().tolist() == [[1.0, 1.0, 1.0]]


_MIRRORED = r"""
import json, sys, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import graph_override.keras as lq
def build():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((6,)), lq.layers.QuantDense(
        5, use_bias=False, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
        kernel_constraint="weight_clip"), tf.keras.layers.Dense(3, activation="softmax")])
    model.compile(lq.optimizers.CaseOptimizer(
        (lq.optimizers.Bop.is_binary_variable, lq.optimizers.Bop(threshold=1e-5, gamma=0.1)),
        default_optimizer=tf.keras.optimizers.SGD(0.1)), "sparse_categorical_crossentropy")
    return model
rs = np.random.RandomState(0)
x, y = rs.randn(32, 6).astype("f"), rs.randint(0, 3, 32)
single = build()
with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
    mirrored = build()
initial = single.get_weights()[0]
for model in (single, mirrored):
    model.fit(x, y, batch_size=16, shuffle=False, verbose=0, epochs=2)
print(json.dumps(dict(
    kernel_same=bool(np.array_equal(single.get_weights()[0], mirrored.get_weights()[0])),
    flipped=int(np.sum(np.sign(initial) != single.get_weights()[0])),
    float_gap=max(float(np.abs(a - b).max()) for a, b in zip(
        single.get_weights()[1:], mirrored.get_weights()[1:])),
    steps=[int(mirrored.optimizer.iterations.numpy())] + [
        int(o.iterations.numpy()) for o in mirrored.optimizer.optimizers])))
"""


@pytest.mark.slow
def test_case_optimizer_under_mirrored_strategy_gives_one_devices_weights():
    """Two replicas (logical CPUs, set before TensorFlow starts: a fresh
    process): the binary kernel as on one device, the float weights to
    rounding (the replicas' gradients are summed)."""
    import json  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _MIRRORED], env=env, cwd=root,
                          capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["kernel_same"] and result["flipped"] > 0
    assert result["float_gap"] <= 1e-6
    assert result["steps"] == [4, 4, 4]


def test_case_optimizer_config_survives_keras_round_trip():
    """Keras's deserialize changes the config it is given (it lowercases
    class names); the one serialized first stays as it was."""
    case = _case(threshold=1e-4, gamma=0.1)
    config = tf.keras.optimizers.serialize(case)
    again = tf.keras.optimizers.deserialize(config)
    assert tf.keras.optimizers.serialize(again) == config
    assert type(again.optimizers[1]) is tf.keras.optimizers.SGD


_LEGACY = [] if hasattr(tf.keras, "ops") else ["legacy"]


@pytest.mark.parametrize("default", ["new"] + _LEGACY)
def test_case_optimizer_under_a_loss_scale_optimizer(data, default):
    x, y = data
    sgd = (tf.keras.optimizers.legacy.SGD if default == "legacy" else tf.keras.optimizers.SGD)
    model = _model()
    case = lq.optimizers.CaseOptimizer(
        (lq.optimizers.Bop.is_binary_variable, lq.optimizers.Bop(threshold=1e-4, gamma=0.1)),
        default_optimizer=sgd(0.1))
    model.compile(tf.keras.mixed_precision.LossScaleOptimizer(case), "categorical_crossentropy")
    before = model.get_weights()
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    after = model.get_weights()
    assert set(np.unique(after[0])) <= {-1.0, 1.0} and not np.array_equal(before[0], after[0])
    assert not np.array_equal(before[1], after[1])  # the default optimizer trained too


def test_case_optimizer_loads_from_h5_and_trains_on(data, tmp_path):
    x, y = data
    model = _model()
    model.compile(_case(threshold=1e-4, gamma=0.1), "categorical_crossentropy")
    model.fit(x[:16], y[:16], batch_size=8, shuffle=False, verbose=0)
    path = str(tmp_path / "bop.h5")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    assert [type(o).__name__ for o in loaded.optimizer.optimizers] == ["Bop", "SGD"]
    loaded.fit(x[16:], y[16:], batch_size=8, shuffle=False, verbose=0)
    assert loaded.optimizer.var_opt_mapping == model.optimizer.var_opt_mapping
    assert set(np.unique(loaded.layers[0].kernel.numpy())) == {-1.0, 1.0}


def test_a_config_saved_before_the_first_step_keeps_only_named_predicates():
    w, v = tf.Variable([1.0, -1.0]), tf.Variable([2.0])
    w.precision = 1
    pairs = [(tf.constant([1.0, 1.0]), w), (tf.constant([1.0]), v)]
    known = lq.optimizers.CaseOptimizer.from_config(_case(threshold=0.0, gamma=1.0).get_config())
    known.apply_gradients(pairs)
    assert w.numpy().tolist() == [-1.0, -1.0] and v.numpy().tolist() == [pytest.approx(1.9)]
    mine = lq.optimizers.CaseOptimizer((lambda var: var is w, lq.optimizers.Bop()),
                                       default_optimizer=tf.keras.optimizers.SGD(0.1))
    again = lq.optimizers.CaseOptimizer.from_config(mine.get_config())
    with pytest.raises(OptimizerError, match="predicates are not saved"):
        again.apply_gradients(pairs)
