"""graph_override's LRP against Zennit 0.5.1 (PyTorch) on the same weights.

Four networks, each built twice from one set of numpy weights (a Keras
model here, a torch module in zennit_maps.py): an MLP, a CNN with MaxPool,
a model of two inputs (a conv branch and a dense branch, concatenated before
a dense head: Zennit through torch's autograd on a module of two inputs),
and a small ResNet block with batch normalizations and a residual add
(canonized on both sides: Zennit's SequentialMergeBatchNorm, our
``batch_norm`` canonizer; under Keras 3 the batch normalization is frozen
as Rsqrt/Mul/Sub/AddV2, under Keras 2 as FusedBatchNormV3). Every rule in
every layer and every Zennit composite, started from a one-hot output as
Zennit starts (``start="one"``), equal to float32 rounding. Zennit's
maps for all of them come from one torch process per module.
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

# float32 rounding, relative to each map's largest value: the rules divide by
# sums of float32 products, which TensorFlow and torch add in other orders.
# Where a rule divides by a near-cancelling sum (the residual add of two
# terms of opposite signs, under flat, w_square and z_box) rounding is
# amplified: there the bound is a few times how far Zennit's own float32 map
# is from its float64 one (each side rounds its own way; in float64 the two
# agree to 6e-8 of the largest value on every map, measured).
RTOL = 2e-5
ROUNDING = 10.0
# Zennit's SequentialMergeBatchNorm sets a merged BatchNorm2d's statistics
# to the identity's but keeps its eps: the merged model scales each
# activation by 1 / sqrt(1 + eps), which the residual add's near-cancelling
# sums amplify (with Keras's default eps of 1e-3, maps 5e-4 apart; with
# 1.001e-5, 4e-4 under flat). With eps 1e-9 the merged model is the model.
BN_EPSILON = 1e-9
LOW, HIGH = -1.0, 2.0

RULES = {
    "z": ("z", {}),
    "epsilon": ("epsilon", {"epsilon": 0.25}),
    "zplus": ("zplus", {}),
    "alpha2_beta1": ("alpha_beta", {"alpha": 2.0, "beta": 1.0}),
    "alpha3_beta2": ("alpha_beta", {"alpha": 3.0, "beta": 2.0}),
    "gamma": ("gamma", {"gamma": 0.25}),
    "w_square": ("w_square", {}),
    "flat": ("flat", {}),
    "z_box": ("z_box", {"low": LOW, "high": HIGH}),
}
COMPOSITES = {
    "epsilon_plus": {}, "epsilon_plus_flat": {}, "epsilon_alpha2_beta1": {},
    "epsilon_alpha2_beta1_flat": {}, "epsilon_gamma_box": {"low": LOW, "high": HIGH},
}
METHODS = ([{"key": k, "rule": name, "params": p} for k, (name, p) in RULES.items()]
           + [{"key": k, "composite": k, "params": p} for k, p in COMPOSITES.items()])
# two inputs: Zennit's first-layer composites take the first module of the
# model (one layer); ours the first layer of each input's path, given to
# Zennit by name ("first")
TWO_METHODS = ([m for m in METHODS if m.get("composite") not in ("epsilon_plus_flat",
                                                                   "epsilon_alpha2_beta1_flat")]
               + [{"key": "epsilon_plus_flat", "composite": "epsilon_plus_flat",
                   "params": {}, "first": ["a0", "b0"]}])


def _weights(net, rng):
    def kernel(*shape):
        fan_in = int(np.prod(shape[:-1]))
        return (rng.randn(*shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def bias(n):
        b = rng.choice([-0.1, 0.1], n).astype(np.float32)
        b[:1] = 0.0
        return b

    def bn(key, n):
        return {key + "_gamma": rng.uniform(0.5, 1.5, n).astype(np.float32),
                key + "_beta": rng.uniform(-0.2, 0.2, n).astype(np.float32),
                key + "_mean": rng.uniform(-0.2, 0.2, n).astype(np.float32),
                key + "_var": rng.uniform(0.5, 1.5, n).astype(np.float32)}

    if net == "mlp":
        return {"d0_w": kernel(64, 16), "d0_b": bias(16), "d1_w": kernel(16, 16),
                "d1_b": bias(16), "d2_w": kernel(16, 10), "d2_b": bias(10)}
    if net == "two":
        return {"a0_w": kernel(2, 2, 2, 3), "a0_b": bias(3), "b0_w": kernel(5, 4),
                "b0_b": bias(4), "h_w": kernel(31, 6), "h_b": bias(6), "o_w": kernel(6, 3),
                "o_b": bias(3)}
    if net == "cnn":
        return {"c0_w": kernel(3, 3, 1, 4), "c0_b": bias(4), "c1_w": kernel(3, 3, 4, 6),
                "c1_b": bias(6), "d_w": kernel(54, 10), "d_b": bias(10)}
    return {"c0_w": kernel(3, 3, 1, 4), "c0_b": bias(4), **bn("bn0", 4),
            "c1_w": kernel(3, 3, 4, 4), **bn("bn1", 4),
            "c2_w": kernel(3, 3, 4, 4), "c2_b": bias(4), **bn("bn2", 4),
            "d_w": kernel(64, 10), "d_b": bias(10)}


def _keras(net, a):
    L = keras.layers

    def conv(key, padding, bias=True):
        layer = L.Conv2D(a[key + "_w"].shape[-1], 3, padding=padding, use_bias=bias, name=key)
        return layer, [a[key + "_w"]] + ([a[key + "_b"]] if bias else [])

    def bn(key):
        return L.BatchNormalization(epsilon=BN_EPSILON, name=key), [
            a[key + s] for s in ("_gamma", "_beta", "_mean", "_var")]

    if net == "mlp":
        x = keras.Input((64,))
        parts = [(L.Dense(16, name="d0"), ["d0"]), (L.ReLU(), None),
                 (L.Dense(16, name="d1"), ["d1"]), (L.ReLU(), None),
                 (L.Dense(10, name="d2"), ["d2"])]
        h, built = x, []
        for layer, keys in parts:
            h = layer(h)
            if keys:
                built.append((layer, [a[keys[0] + "_w"], a[keys[0] + "_b"]]))
        model = keras.Model(x, h)
    elif net == "two":
        x = [keras.Input((4, 4, 2), name="a"), keras.Input((5,), name="b")]
        layers = [L.Conv2D(3, 2, name="a0"), L.Dense(4, name="b0"), L.Dense(6, name="h"),
                  L.Dense(3, name="o")]
        h = L.Concatenate()([L.Flatten()(L.ReLU()(layers[0](x[0]))),
                             L.ReLU()(layers[1](x[1]))])
        model = keras.Model(x, layers[3](L.ReLU()(layers[2](h))))
        built = [(la, [a[la.name + "_w"], a[la.name + "_b"]]) for la in layers]
    elif net == "cnn":
        x = keras.Input((8, 8, 1))
        (c0, w0), (c1, w1) = conv("c0", "valid"), conv("c1", "same")
        dense = L.Dense(10, name="d")
        h = L.MaxPooling2D(2)(L.ReLU()(c0(x)))
        h = dense(L.Flatten()(L.ReLU()(c1(h))))
        model, built = keras.Model(x, h), [(c0, w0), (c1, w1), (dense, [a["d_w"], a["d_b"]])]
    else:
        x = keras.Input((8, 8, 1))
        (c0, w0), (c1, w1), (c2, w2) = conv("c0", "same"), conv("c1", "same", False), \
            conv("c2", "same")
        (b0, v0), (b1, v1), (b2, v2) = bn("bn0"), bn("bn1"), bn("bn2")
        dense = L.Dense(10, name="d")
        h = L.ReLU()(b0(c0(x)))
        branch = b2(c2(L.ReLU()(b1(c1(h)))))
        out = L.AveragePooling2D(2)(L.ReLU()(L.Add()([h, branch])))
        model = keras.Model(x, dense(L.Flatten()(out)))
        built = [(c0, w0), (c1, w1), (c2, w2), (b0, v0), (b1, v1), (b2, v2),
                 (dense, [a["d_w"], a["d_b"]])]
    for layer, values in built:
        layer.set_weights(values)
    return model


def _inputs(net):
    if net == "two":
        rng = np.random.RandomState(3)
        return ([rng.uniform(-1, 1, (5, 4, 4, 2)).astype(np.float32),
                 rng.uniform(-1, 1, (5, 5)).astype(np.float32)], np.array([0, 1, 2, 1, 0]))
    images, labels = digits()
    x = images[:5].copy()
    x[0] = 0.0
    return (x if net == "mlp" else x.reshape(-1, 8, 8, 1)), labels[:5].astype(np.int64)


class Case:
    def __init__(self, net, folder):
        self.arrays = _weights(net, np.random.RandomState(
            {"mlp": 0, "cnn": 1, "resnet": 2, "two": 4}[net]))
        self.x, self.target = _inputs(net)
        self.model = _keras(net, self.arrays)
        self.request = folder / ("%s.npz" % net)
        x = {"x": self.x[0], "x_b": self.x[1]} if net == "two" else {"x": self.x}
        methods = TWO_METHODS if net == "two" else METHODS
        np.savez(self.request, spec=json.dumps({"net": net, "methods": methods}),
                 target=self.target, **x, **self.arrays)
        self.zennit = None


@pytest.fixture(scope="module")
def cases(zennit, tmp_path_factory):
    folder = tmp_path_factory.mktemp("zennit")
    built = {net: Case(net, folder) for net in ("mlp", "cnn", "resnet", "two")}
    for case, result in zip(built.values(), zennit([c.request for c in built.values()])):
        case.zennit = result
    return built


def _ours(case, method):
    if "rule" in method:
        composite = relevance.composite([("any", relevance.rule(method["rule"],
                                                                **method["params"]))])
    else:
        composite = relevance.composites.named(method["composite"], **method["params"])
    return attribution.lrp(case.model, case.x, case.target, composite=composite, start="one")


@pytest.mark.parametrize("net", ["mlp", "cnn", "resnet", "two"])
def test_same_network_on_both_sides(cases, net):
    case = cases[net]
    np.testing.assert_allclose(case.model(case.x).numpy(), case.zennit["logits"],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("key", [m["key"] for m in METHODS])
@pytest.mark.parametrize("net", ["mlp", "cnn", "resnet"])
def test_lrp_equals_zennit(cases, net, key):
    case = cases[net]
    method = next(m for m in METHODS if m["key"] == key)
    ours = _ours(case, method).maps
    theirs = case.zennit[key + ".f64"]
    rounding = float(np.nanmax(np.abs(case.zennit[key] - theirs)))
    rounding = rounding if np.isfinite(rounding) else 0.0
    assert ours.shape == theirs.shape
    assert np.all(np.isfinite(ours))
    rows = np.all(np.isfinite(theirs.reshape(len(theirs), -1)), axis=1)
    if key == "z":  # Zennit's Epsilon(0) is 0/0 where z = 0 (the all-zero image's
        # zero-bias units, in the MLP and CNN); ours divides by 1e-7 there, as
        # iNNvestigate does
        assert rows[1:].all() and rows[0] == (net == "resnet")
        ours, theirs = ours[rows], theirs[rows]
    assert rows.all() or key == "z"
    scale = float(np.max(np.abs(theirs)))
    assert scale > 0
    worst = float(np.max(np.abs(ours - theirs)))
    assert worst <= max(RTOL * scale, ROUNDING * rounding), (
        "%s on %s: largest difference %.3g of %.3g (Zennit float32 - float64: %.3g)" % (
            key, net, worst, scale, rounding))


@pytest.mark.parametrize("key", [m["key"] for m in TWO_METHODS])
def test_lrp_of_two_inputs_equals_zennit(cases, key):
    """A map per input, each equal to Zennit's relevance of that input."""
    case = cases["two"]
    method = next(m for m in TWO_METHODS if m["key"] == key)
    ours = _ours(case, method).maps
    theirs = [case.zennit[key + ".f64"], case.zennit[key + "_b.f64"]]
    if key == "z":  # example 3's head units are all dead: Zennit's Epsilon(0) is 0/0
        # at the output layer, NaN in every map of it; ours divides by 1e-7: zeros
        rows = np.all(np.isfinite(theirs[1]), axis=1)
        assert rows.tolist() == [True, True, True, False, True]
        np.testing.assert_array_equal(ours[0][3], 0.0)
        np.testing.assert_array_equal(ours[1][3], 0.0)
        ours, theirs = [m[rows] for m in ours], [m[rows] for m in theirs]
    rounding = max(float(np.nanmax(np.abs(case.zennit[k] - case.zennit[k + ".f64"])))
                   for k in (key, key + "_b"))
    scale = max(float(np.max(np.abs(t))) for t in theirs)
    assert scale > 0 and all(np.abs(t).max() > 0 for t in theirs)
    for got, want in zip(ours, theirs):
        assert got.shape == want.shape
        worst = float(np.max(np.abs(got - want)))
        assert worst <= max(RTOL * scale, ROUNDING * rounding), (
            "%s: largest difference %.3g of %.3g (Zennit float32 - float64: %.3g)" % (
                key, worst, scale, rounding))
