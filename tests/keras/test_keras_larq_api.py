"""The rest of larq's API in graph_override.keras, on both releases: context
scopes, FlipRatio, HyperparameterScheduler, activations, math, utils,
__version__, and the error a missing larq name raises."""

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq
from graph_override.errors import OptimizerError, QuantizerError, UnavailableNameError

EDGES = np.array([0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 0.5, -2.0, np.nan], np.float32)


def test_quantized_scope_nests_and_restores_on_errors():
    assert lq.context.should_quantize() is False
    with lq.context.quantized_scope(True) as value:
        assert value is True and lq.context.should_quantize() is True
        with pytest.raises(RuntimeError):
            with lq.context.quantized_scope(False):
                assert lq.context.should_quantize() is False
                raise RuntimeError
        assert lq.context.should_quantize() is True
    assert lq.context.should_quantize() is False


def test_metrics_scope_is_larqs_and_quantizers_refuse_it():
    assert lq.context.get_training_metrics() == set()
    with lq.context.metrics_scope(["flip_ratio"]):
        assert lq.context.get_training_metrics() == {"flip_ratio"}
        with pytest.raises(QuantizerError, match="metrics_scope.*FlipRatio"):
            lq.layers.QuantDense(2, kernel_quantizer="ste_sign")
    assert lq.context.get_training_metrics() == set()
    with pytest.raises(ValueError, match="unknown_metric"):
        with lq.context.metrics_scope(["flip_ratio", "unknown_metric"]):
            pass
    assert lq.context.get_training_metrics() == set()
    lq.layers.QuantDense(2, kernel_quantizer="ste_sign")  # outside the scope


def test_flip_ratio_counts_changes_after_the_first_update():
    m = lq.metrics.FlipRatio()
    assert float(m.result()) == 0.0
    for values, total, count, result in [([1, 1], 0.0, 1, 0.0), ([2, 2], 1.0, 2, 1.0),
                                         ([1, 2], 1.5, 3, 0.75), ([1, 2], 1.5, 4, 0.5)]:
        m.update_state(np.array(values))
        assert m._previous_values.numpy().tolist() == values
        assert (float(m.total.numpy()), float(m.count.numpy()), float(m.result())) == (
            total, count, result)
    m.reset_state()
    m.update_state(np.array([2, 1]))  # the previous values survive the reset
    assert (float(m.total.numpy()), float(m.count.numpy())) == (0.0, 1.0)
    m.update_state(np.array([2, 2]))
    assert float(m.result()) == 0.5
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        m.update_state(np.array([1, 1, 1]))


def test_flip_ratio_config_and_int8_comparison():
    m = lq.metrics.FlipRatio(values_dtype="int16", name="mcv", dtype=tf.float16)
    again = lq.metrics.FlipRatio.from_config(m.get_config())
    assert (again.name, again.values_dtype, again.stateful) == ("mcv", tf.int16, True)
    assert again.dtype == tf.float16
    m = lq.metrics.FlipRatio()
    m.update_state(np.array([0.2, -0.7]))
    m.update_state(np.array([0.9, -0.1]))  # int8 casts both to 0: no change
    assert float(m.result()) == 0.0


def test_flip_ratio_in_compile_raises_quantizer_error():
    import sys  # pylint: disable=import-outside-toplevel
    if "larq" in sys.modules:
        pytest.skip("larq, imported in this process for other tests, holds the name")
    assert tf.keras.utils.get_custom_objects()["flip_ratio"] is lq.metrics.FlipRatio
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse", metrics=["flip_ratio"])
    with pytest.raises(QuantizerError, match="not a metric of .y_true, y_pred."):
        model.fit(np.zeros((2, 2), np.float32), np.zeros((2, 1), np.float32), verbose=0)


def _fit_with(callback, epochs=3, optimizer=None):
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer or tf.keras.optimizers.SGD(0.1), "mse")
    history = model.fit(np.ones((6, 2), np.float32), np.ones((6, 1), np.float32),
                        batch_size=2, epochs=epochs, verbose=0, callbacks=[callback])
    return model, history.history


def test_scheduler_sets_bops_variables_per_epoch_and_logs_them():
    bop = lq.optimizers.Bop(threshold=1e-6, gamma=1e-3)
    case = lq.optimizers.CaseOptimizer((lambda v: "kernel" in v.name, bop),
                                       default_optimizer=tf.keras.optimizers.SGD(0.1))
    scheduler = lq.callbacks.HyperparameterScheduler(lambda t: 0.5 ** t, "gamma", bop,
                                                     log_name="bop_gamma")
    _, logs = _fit_with(scheduler, optimizer=case)
    assert float(bop.gamma.numpy()) == 0.25
    assert [float(v) for v in logs["bop_gamma"]] == [1.0, 0.5, 0.25]


def test_scheduler_per_step_reads_the_optimizer_step_and_knows_lr():
    scheduler = lq.callbacks.HyperparameterScheduler(lambda t, lr: 1.0 / (1.0 + t), "lr",
                                                     update_freq="step")
    model, _ = _fit_with(scheduler, epochs=2)
    # 6 steps: the last set at step 5, before its update.
    assert float(model.optimizer.learning_rate.numpy()) == np.float32(1.0 / 6.0)
    with pytest.raises(OptimizerError, match="'step' or 'epoch'"):
        lq.callbacks.HyperparameterScheduler(lambda t: t, "lr", update_freq="batch")
    with pytest.raises(ValueError, match='must have a "gamma" attribute'):
        _fit_with(lq.callbacks.HyperparameterScheduler(lambda t: t, "gamma"), epochs=1)


def test_math_and_activations_at_zeros_and_boundaries():
    x = tf.constant(EDGES)
    sign = lq.math.sign(x).numpy()
    assert sign[:8].tolist() == [1, 1, 1, -1, 1, -1, 1, -1] and np.isnan(sign[8])
    assert lq.math.heaviside(x).numpy()[:8].tolist() == [0, 0, 1, 0, 1, 0, 1, 0]
    assert lq.activations.hard_tanh(x).numpy()[:8].tolist() == [
        0, 0, 1, -1, np.float32(1e-30), np.float32(-1e-30), 0.5, -1]
    leaky = lq.activations.leaky_tanh(tf.constant([-3.0, -1.0, 0.5, 1.0, 2.0])).numpy()
    np.testing.assert_array_equal(leaky, np.float32([-1.4, -1.0, 0.5, 1.0, 1.2]))
    layer = tf.keras.layers.Activation("hard_tanh")
    assert layer(tf.constant([-3.0, 0.25])).numpy().tolist() == [-1.0, 0.25]


def test_utils_are_larqs():
    # larq's utils_test: 2**i bits for i = 0..43.
    expected = ["0.12 B", "0.25 B", "0.50 B"] + [
        "%d.00 %s" % (2 ** j, unit) for unit in ("B", "KiB", "MiB", "GiB")
        for j in range(10)] + ["1,024.00 GiB"]
    assert [lq.utils.memory_as_readable_str(2 ** i) for i in range(44)] == expected

    @lq.utils.set_precision(8)
    def toy(x):
        return x

    assert toy.precision == 8

    class Thing:
        value = 1

    with pytest.raises(KeyError):
        with lq.utils.patch_object(Thing, "value", 2):
            assert Thing.value == 2
            raise KeyError
    assert Thing.value == 1


def test_version_and_missing_names():
    assert lq.__version__ == "0.13.3"
    with pytest.raises(UnavailableNameError, match="quantized_weights"):
        lq.quantized_variable  # noqa: B018
    with pytest.raises(AttributeError, match="did you mean 'Bop'"):
        lq.optimizers.Bopp  # noqa: B018
    assert not hasattr(lq.context, "quantized_variable")
    assert not hasattr(lq, "__wrapped__")


def test_model_profile_counts_as_larqs_test_and_summary_prints():
    """larq's models_test numbers (bits per weight, MACs at the larger of the
    input's and the weight's precision), and summary's totals from the same counts."""
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)),
        lq.layers.QuantConv2D(4, 3, kernel_quantizer="ste_sign", padding="same"),
        lq.layers.QuantDense(2, input_quantizer="ste_tern", kernel_quantizer="ste_sign",
                             kernel_constraint="weight_clip", use_bias=False),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(3, trainable=False)])
    profile = lq.models.ModelProfile(model)
    conv, dense, flat, last = profile.layer_profiles
    assert [conv.memory, dense.memory, flat.memory, last.memory] == [
        1 * 36 + 32 * 4, 1 * 8, 0, 32 * (128 * 3 + 3)]
    assert conv.int8_fp_weights_memory == 36 + 8 * 4
    assert (conv.op_count("mac", 32), dense.op_count("mac", 2), flat.op_count("mac")) == (
        36 * 64, 8 * 64, 0)
    assert last.op_count("mac") == 128 * 3 and dense.input_precision == 2
    assert profile.weight_count(trainable=False) == 387 and profile.unique_op_precisions == [2, 32]
    with pytest.raises(ValueError, match="MAC"):
        profile.op_count("flop")
    lines = []
    lq.models.summary(model, print_fn=lines.append)
    for name, value in profile.generate_summary():
        assert name in lines[1] and str(value if isinstance(value, str) else "%.2f" % value) in lines[1]
