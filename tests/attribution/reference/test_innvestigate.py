"""graph_override's LRP against iNNvestigate 2.1.2 itself, on shared weights.

iNNvestigate needs TensorFlow below 2.15 with eager execution off: it runs
in a venv of its own (compat/reference_venv.sh, TensorFlow 2.14), on a
Keras 2 CNN (Conv2D+ReLU, MaxPooling2D, Conv2D+ReLU, AveragePooling2D,
Flatten, Dense+ReLU, Dense) built from the weights this module draws; the
same network here is a Keras model of the release under test, explained by
`attribution.lrp` with the composite that is iNNvestigate's analyzer:

- its rules divide safely (z + 1e-7 where z is exactly 0: ``stabilizer=0``),
  in its pools too; its epsilon is Zennit's (sign(0) = +1);
- its alpha-beta puts the whole bias in both the positive and the negative
  part (``bias="whole"``; Zennit splits it); ``_IB`` leaves it out;
- its w-square has no bias (``w_square(bias=False)``; Zennit's adds b^2);
- its relevance starts from the target's value (``start="output"``).

All maps equal iNNvestigate's to float32 rounding. One process of the
iNNvestigate venv computes them all.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import relevance
from graph_override.training.data import digits

keras = tf.keras
# one reference process computes every map of the module (iNNvestigate: TensorFlow
# 2.14 building each analyzer in graph mode; Zennit: every map in float32 and 64)
pytestmark = pytest.mark.slow
RTOL = 2e-5  # of each map's largest value

_EVERY = {
    "z": ("lrp.z", {}, "z", {}),
    "epsilon": ("lrp.epsilon", {"epsilon": 0.1}, "epsilon", {"epsilon": 0.1}),
    "alpha_2_beta_1": ("lrp.alpha_2_beta_1", {}, "alpha_beta",
                       {"alpha": 2.0, "beta": 1.0, "bias": "whole", "stabilizer": 0.0}),
    "alpha_1_beta_0": ("lrp.alpha_1_beta_0", {}, "alpha_beta",
                       {"alpha": 1.0, "beta": 0.0, "bias": "whole", "stabilizer": 0.0}),
    "alpha_2_beta_1_IB": ("lrp.alpha_2_beta_1_IB", {}, "alpha_beta",
                          {"alpha": 2.0, "beta": 1.0, "bias": "none", "stabilizer": 0.0}),
    "flat": ("lrp.flat", {}, "flat", {"stabilizer": 0.0}),
    "w_square": ("lrp.w_square", {}, "w_square", {"bias": False, "stabilizer": 0.0}),
}
_PRESETS = {"preset_a": "lrp.sequential_preset_a", "preset_b": "lrp.sequential_preset_b",
            "preset_a_flat": "lrp.sequential_preset_a_flat",
            "preset_b_flat": "lrp.sequential_preset_b_flat"}
ANALYZERS = ([{"key": k, "name": v[0], "params": v[1]} for k, v in _EVERY.items()]
             + [{"key": k, "name": v} for k, v in _PRESETS.items()])


def _composite(key):
    if key in _PRESETS:
        return key
    _, _, name, params = _EVERY[key]
    return relevance.composite([("any", relevance.rule(name, **params))], stabilizer=0.0)


def _weights():
    rng = np.random.RandomState(3)

    def kernel(*shape):
        return (rng.randn(*shape) * np.sqrt(2.0 / np.prod(shape[:-1]))).astype(np.float32)

    def bias(n):
        return rng.choice([-0.1, 0.0, 0.1], n).astype(np.float32)

    return {"c0_w": kernel(3, 3, 1, 4), "c0_b": bias(4), "c1_w": kernel(3, 3, 4, 6),
            "c1_b": bias(6), "d0_w": kernel(24, 16), "d0_b": bias(16),
            "d1_w": kernel(16, 10), "d1_b": bias(10)}


def _keras(a):
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        layers.Conv2D(4, 3, padding="same", activation="relu", name="c0"),
        layers.MaxPooling2D(2),
        layers.Conv2D(6, 3, padding="same", activation="relu", name="c1"),
        layers.AveragePooling2D(2), layers.Flatten(),
        layers.Dense(16, activation="relu", name="d0"), layers.Dense(10, name="d1")])
    for key in ("c0", "c1", "d0", "d1"):
        model.get_layer(key).set_weights([a[key + "_w"], a[key + "_b"]])
    return model


@pytest.fixture(scope="module")
def case(innvestigate, tmp_path_factory):
    arrays = _weights()
    images, labels = digits()
    x = images[:5].reshape(-1, 8, 8, 1).copy()
    x[0] = 0.0
    target = labels[:5].astype(np.int64)
    request = tmp_path_factory.mktemp("innvestigate") / "cnn.npz"
    np.savez(request, spec=json.dumps({"analyzers": ANALYZERS}), x=x, target=target, **arrays)
    (theirs,) = innvestigate([request])
    return {"model": _keras(arrays), "x": x, "target": target, "theirs": theirs}


def test_same_network_on_both_sides(case):
    np.testing.assert_allclose(case["model"](case["x"]).numpy(), case["theirs"]["logits"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("key", [a["key"] for a in ANALYZERS])
def test_lrp_equals_innvestigate(case, key):
    ours = attribution.lrp(case["model"], case["x"], case["target"],
                           composite=_composite(key)).maps
    theirs = case["theirs"][key]
    assert ours.shape == theirs.shape and np.all(np.isfinite(ours))
    scale = float(np.max(np.abs(theirs)))
    assert scale > 0
    worst = float(np.max(np.abs(ours - theirs)))
    assert worst <= RTOL * scale, "%s: largest difference %.3g of %.3g" % (key, worst, scale)
