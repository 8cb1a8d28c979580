"""iNNvestigate's published reference maps (its tests/references/layer/*.hdf5,
kept unchanged in the shared peer_refs folder beside the repository) are
ours with the target the attribution guide gives: its GuidedBackprop and
Deconvnet start the backward pass from the selected output's value y_c, not
from 1, which is the gradient of 0.5 * y_c ** 2; its Gradient and (on these
one-layer models) LRPEpsilon start from 1.

Each reference holds six one-layer models on a 10x10x3 input (weights,
input, output, map); the neuron is each example's largest output
("max_activation"), compared as iNNvestigate compares them
(``np.allclose(rtol=1e-2, atol=1e-8)``)."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution

h5py = pytest.importorskip("h5py")

REFS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "peer_refs" / "innvestigate"
LAYERS = ("Dense", "Dense_relu", "Conv2D", "Conv2D_relu", "AveragePooling2D", "MaxPooling2D")


def _model(layer, weights):
    """iNNvestigate's one-layer model: the layer, then Flatten."""
    w = [tf.constant(v) for v in weights]

    def model(x):
        if layer.startswith("Dense"):
            h = tf.tensordot(x, w[0], 1) + w[1]
        elif layer.startswith("Conv2D"):
            h = tf.nn.conv2d(x, w[0], 1, "VALID") + w[1]
        elif layer == "AveragePooling2D":
            h = tf.nn.avg_pool2d(x, 2, 2, "VALID")
        else:
            h = tf.nn.max_pool2d(x, 2, 2, "VALID")
        if layer.endswith("_relu"):
            h = tf.nn.relu(h)
        return tf.reshape(h, [tf.shape(x)[0], -1])

    return model


def _half_square(y):
    return 0.5 * tf.reduce_max(y, axis=1) ** 2


@pytest.mark.parametrize("analyzer, method, target, options", [
    ("GuidedBackprop", "guided_backprop", _half_square, {}),
    ("Deconvnet", "deconvnet", _half_square, {}),
    ("Gradient", "saliency", None, {"abs": False}),
    ("LRPEpsilon", "eps_lrp", None, {}),
], ids=["GuidedBackprop", "Deconvnet", "Gradient", "LRPEpsilon"])
def test_innvestigate_reference_maps(analyzer, method, target, options):
    path = REFS / ("%s.hdf5" % analyzer)
    if not path.exists():
        pytest.skip("no peer reference data at %s" % path)
    with h5py.File(path, "r") as refs:
        x = refs["input"][()].astype(np.float32)
        starting_from_one = []
        for layer in LAYERS:
            group = refs[layer]
            weights = [group["weights"][k][()] for k in sorted(group["weights"], key=int)]
            model = _model(layer, weights)
            np.testing.assert_allclose(model(tf.constant(x)).numpy(), group["output"][()],
                                       rtol=1e-5, atol=1e-5, err_msg=layer)
            expected = group["attribution"][()]
            maps = attribution.attribute(model, method, x, target, **options).maps
            assert np.allclose(maps, expected, rtol=1e-2, atol=1e-8), layer
            assert np.abs(maps).max() > 0
            from_one = attribution.attribute(model, method, x, None, **options).maps
            starting_from_one.append(np.allclose(from_one, expected, rtol=1e-2, atol=1e-8))
    if target is _half_square:
        # Started from 1, only the max pool (whose output is one of x's
        # values, the same map whatever the start up to y_c) would agree.
        assert starting_from_one == [False] * 5 + [True]


def test_innvestigate_lrp_epsilon_reference_maps_from_the_layer_rules():
    """LRPEpsilon's reference maps (epsilon 1e-7, the bias in z, relevance
    starting from the selected output's value) are `attribution.lrp`'s
    epsilon rule in every layer, on every one-layer model: the layer, the
    average pool (shared in proportion) and the max pool (to the maximum)."""
    path = REFS / "LRPEpsilon.hdf5"
    if not path.exists():
        pytest.skip("no peer reference data at %s" % path)
    with h5py.File(path, "r") as refs:
        x = refs["input"][()].astype(np.float32)
        for layer in LAYERS:
            group = refs[layer]
            weights = [group["weights"][k][()] for k in sorted(group["weights"], key=int)]
            maps = attribution.lrp(_model(layer, weights), x, None,
                                   composite="epsilon:epsilon=1e-7").maps
            expected = group["attribution"][()]
            assert np.allclose(maps, expected, rtol=1e-2, atol=1e-8), layer
            assert np.abs(maps).max() > 0
