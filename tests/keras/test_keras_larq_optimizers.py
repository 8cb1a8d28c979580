"""graph_override.keras's optimizers, FlipRatio, HyperparameterScheduler and
ModelProfile against larq 0.13.3 itself, side by side in one TensorFlow 2.15 process:
weights, Bop's moving averages and metric values bit for bit after the same
steps. On Keras 3 these are skipped without importing larq (see
test_keras_larq.py); there test_keras_optimizers.py checks the same updates
against numpy."""

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as gk

if hasattr(tf.keras, "ops"):  # Keras 3
    pytest.skip("larq 0.13 runs on Keras 2 (TensorFlow 2.15) only",
                allow_module_level=True)
lq = pytest.importorskip("larq")

from test_keras_optimizers import G, THRESHOLD, W0  # noqa: E402

F = np.float32


def _bits(a):
    return np.asarray(a, F).view(np.uint32)


def _model(package, seed=0):
    tf.keras.utils.set_random_seed(seed)
    binary = dict(input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                  kernel_constraint="weight_clip")
    return tf.keras.Sequential([
        tf.keras.Input((6,)), package.layers.QuantDense(5, use_bias=False, **binary),
        tf.keras.layers.BatchNormalization(),
        package.layers.QuantDense(3, activation="softmax", **binary)])


@pytest.fixture(scope="module")
def data():
    rs = np.random.RandomState(0)
    return rs.randn(40, 6).astype(F), np.eye(3, dtype=F)[rs.randint(0, 3, 40)]


def _case(package, default, **bop):
    bop = package.optimizers.Bop(**bop)
    return bop, package.optimizers.CaseOptimizer(
        (package.optimizers.Bop.is_binary_variable, bop), default_optimizer=default)


@pytest.mark.parametrize("default", ["adam", "sgd_momentum"])
def test_case_optimizer_fit_is_larqs_bit_for_bit(data, default):
    """5 steps of model.fit: every weight and Bop's m as larq's."""
    x, y = data
    make = {"adam": lambda: tf.keras.optimizers.legacy.Adam(0.01),
            "sgd_momentum": lambda: tf.keras.optimizers.legacy.SGD(0.1, momentum=0.9)}[default]
    theirs, ours = _model(lq), _model(gk)
    ours.set_weights(theirs.get_weights())
    their_bop, their_case = _case(lq, make(), threshold=1e-5, gamma=1e-2)
    our_bop, our_case = _case(gk, make(), threshold=1e-5, gamma=1e-2)
    theirs.compile(their_case, "categorical_crossentropy")
    ours.compile(our_case, "categorical_crossentropy")
    for model in (theirs, ours):
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(theirs.get_weights(), ours.get_weights()):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    for layer in (0, 2):
        their_m = their_bop.get_slot(theirs.layers[layer].kernel, "m").numpy()
        np.testing.assert_array_equal(_bits(our_bop._slot(ours.layers[layer].kernel)),
                                      _bits(their_m))
    flipped = np.sum(theirs.layers[0].kernel.numpy() != np.sign(np.sign(
        _model(lq).layers[0].kernel.numpy()) + 0.1))
    assert flipped > 0  # Bop did flip weights


@pytest.mark.parametrize("schedule", [False, True], ids=["constant", "schedule"])
def test_bop_edges_are_larqs_bit_for_bit(schedule):
    """|m| == threshold, zero gradients, zero and latent weights, 5 steps."""
    def gamma():
        if schedule:
            return tf.keras.optimizers.schedules.InverseTimeDecay(0.5, 1.0, 1.0)
        return 0.5
    theirs, ours = tf.Variable(W0), tf.Variable(W0)
    their_bop = lq.optimizers.Bop(threshold=float(THRESHOLD), gamma=gamma())
    our_bop = gk.optimizers.Bop(threshold=float(THRESHOLD), gamma=gamma())
    for g in G:
        their_bop.apply_gradients([(tf.constant(g), theirs)])
        our_bop.apply_gradients([(tf.constant(g), ours)])
        np.testing.assert_array_equal(_bits(ours.numpy()), _bits(theirs.numpy()))
    np.testing.assert_array_equal(_bits(our_bop._slot(ours)),
                                  _bits(their_bop.get_slot(theirs, "m")))


def test_flip_ratio_is_larqs():
    rs = np.random.RandomState(1)
    # Signs with ties to the last update, repeats, and an all-flipped step.
    steps = [rs.choice([-1, 1], size=(4, 3)) for _ in range(5)]
    steps += [steps[-1], -steps[-1], np.zeros((4, 3))]
    theirs, ours = lq.metrics.FlipRatio(), gk.metrics.FlipRatio()
    for values in steps:
        theirs.update_state(values)
        ours.update_state(values)
        assert _bits(ours.result()) == _bits(theirs.result())
        assert ours.count.numpy() == theirs.count.numpy()
    theirs.reset_state()
    ours.reset_state()
    for values in steps[:2]:
        theirs.update_state(values)
        ours.update_state(values)
    assert _bits(ours.result()) == _bits(theirs.result())
    assert ours.get_config() == theirs.get_config()


def test_hyperparameter_scheduler_is_larqs(data):
    """Bop's gamma and threshold set per epoch, the default optimizer's rate
    per step: the weights after 3 epochs and the logged values as larq's."""
    x, y = data
    histories, models = [], [_model(lq), _model(gk)]
    models[1].set_weights(models[0].get_weights())
    for package, model in zip((lq, gk), models):
        bop, case = _case(package, tf.keras.optimizers.legacy.Adam(0.01),
                          threshold=1e-5, gamma=1e-2)
        model.compile(case, "categorical_crossentropy")
        scheduler = package.callbacks.HyperparameterScheduler
        callbacks = [
            scheduler(lambda t: 1e-2 / (1.0 + t), "gamma", bop),
            scheduler(lambda t, value: value * 0.5, "threshold", bop, log_name="thr"),
            scheduler(lambda t: 0.01 / (1.0 + t), "lr", case.optimizers[1], update_freq="step")]
        history = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                            callbacks=callbacks)
        histories.append(history.history)
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    assert histories[0].keys() == histories[1].keys() >= {"gamma", "thr", "loss"}
    for key in ("gamma", "thr", "loss"):
        np.testing.assert_array_equal(_bits(histories[1][key]), _bits(histories[0][key]))


def _profile_model(package):
    tf.keras.utils.set_random_seed(0)
    layers = package.layers
    return tf.keras.Sequential([
        tf.keras.Input((16, 16, 1)),
        layers.QuantConv2D(8, 3, kernel_quantizer="ste_sign", kernel_constraint="weight_clip",
                           padding="same", name="conv"),
        tf.keras.layers.MaxPooling2D(2, name="pool"),
        layers.QuantDepthwiseConv2D(3, depthwise_quantizer="ste_tern", input_quantizer="ste_tern",
                                    depthwise_constraint="weight_clip", use_bias=False,
                                    name="depthwise"),
        tf.keras.layers.BatchNormalization(name="bn"),
        tf.keras.layers.Flatten(name="flat"),
        tf.keras.layers.Dense(3, trainable=False, name="dense")], name="profiled")


def test_model_profile_is_larqs():
    theirs, ours = lq.models.ModelProfile(_profile_model(lq)), gk.models.ModelProfile(
        _profile_model(gk))
    for include_macs in (True, False):
        assert ours.generate_table(include_macs) == theirs.generate_table(include_macs)
        assert ours.generate_summary(include_macs) == theirs.generate_summary(include_macs)
    for a, b in zip(ours.layer_profiles, theirs.layer_profiles):
        assert (a.name, a.memory, a.int8_fp_weights_memory, a.fp_equivalent_memory,
                a.input_precision, a.output_shape, a.output_pixels, a.op_count("mac"),
                a.unique_param_bidtwidths, a.unique_op_precisions) == (
            b.name, b.memory, b.int8_fp_weights_memory, b.fp_equivalent_memory,
            b.input_precision, b.output_shape, b.output_pixels, b.op_count("mac"),
            b.unique_param_bidtwidths, b.unique_op_precisions)
        assert [(w.count, w.bitwidth, w.trainable, w.is_bias()) for w in a.weight_profiles] == [
            (w.count, w.bitwidth, w.trainable, w.is_bias()) for w in b.weight_profiles]
    assert (ours.weight_count(trainable=False), ours.op_count("mac", 2)) == (
        theirs.weight_count(trainable=False), theirs.op_count("mac", 2))
