"""DeepLIFT's MaxPool and Softmax rules (deeplift_maxpool, deeplift_softmax):
numpy references of SHAP's formulas on tiny batches with ties and exact
zeros, and summation to delta on a CNN with max pooling and on softmax
outputs, where MaxPool's plain gradient misses it."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, overrides, testing, tf2


# ------------------------------------------------------------ numpy references

def _windows(shape, k, s):
    """(i, j, [(row, col), ...]) of each VALID pooling window, in the order of
    its positions (row-major, as MaxPool's argmax takes the first maximum)."""
    h, w = shape
    for i in range(0, h - k + 1, s):
        for j in range(0, w - k + 1, s):
            yield i // s, j // s, [(i + a, j + b) for a in range(k) for b in range(k)]


def np_maxpool(x, k, s):
    out = np.zeros((x.shape[0], (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1,
                    x.shape[3]), x.dtype)
    for i, j, cells in _windows(x.shape[1:3], k, s):
        out[:, i, j] = np.max([x[:, a, b] for a, b in cells], axis=0)
    return out


def np_route(x, grad, k, s):
    """MaxPool's gradient: each window's grad to the first maximum of x."""
    out = np.zeros_like(x)
    for n in range(x.shape[0]):
        for ch in range(x.shape[3]):
            for i, j, cells in _windows(x.shape[1:3], k, s):
                values = [x[n, a, b, ch] for a, b in cells]
                a, b = cells[int(np.argmax(values))]
                out[n, a, b, ch] += grad[n, i, j, ch]
    return out


def np_deeplift_maxpool(x, dy, k, s, threshold=1e-7):
    """SHAP's deep_tf maxpool on the batch [inputs; references]."""
    n = x.shape[0] // 2
    y = np_maxpool(x, k, s)
    cross = np.maximum(y[:n], y[n:])
    total = (np_route(x[:n], dy[:n] * (cross - y[n:]), k, s)
             + np_route(x[n:], dy[:n] * (y[:n] - cross), k, s))
    delta = x[:n] - x[n:]
    small = np.abs(delta) < threshold
    m = np.where(small, 0.0, total / np.where(small, 1.0, delta))
    return np.concatenate([m, m]).astype(x.dtype)


def np_deeplift_softmax(z, dy):
    """SHAP's deep_tf softmax, step by step as SHAP's handlers run it: the
    centring, exp (nonlinearity_1d, threshold 1e-6), the sum (linear), the
    division (nonlinearity_2d, 0 where |delta| < 1e-7), the rescaling."""
    n = z.shape[0] // 2
    zc = z - z.max(axis=-1, keepdims=True)
    e = np.exp(zc)
    total = e.sum(axis=-1, keepdims=True)
    (xe, re), (xs, rs) = (e[:n], e[n:]), (total[:n], total[n:])
    g = dy[:n]
    d_e, d_s = xe - re, xs - rs
    out0 = 0.5 * (xe / xs - re / xs + xe / rs - re / rs)
    out0 = np.where(np.abs(d_e) < 1e-7, 0.0, g * out0 / np.where(d_e == 0, 1, d_e))
    out1 = 0.5 * (xe / xs - xe / rs + re / xs - re / rs)
    out1 = np.where(np.abs(d_s) < 1e-7, 0.0, g * out1 / np.where(d_s == 0, 1, d_s))
    to_e = out0 + out1.sum(axis=-1, keepdims=True)
    d_zc = zc[:n] - zc[n:]
    small = np.abs(d_zc) < 1e-6
    to_zc = to_e * np.where(small, xe, (xe - re) / np.where(small, 1, d_zc))
    d_z = z[:n] - z[n:]
    small = np.abs(d_z) < 1e-6
    m = np.where(small, to_zc, to_zc * d_zc / np.where(small, 1, d_z))
    return np.concatenate([m, m]).astype(z.dtype)


# Two inputs and their references, 4x4 with one channel. Input 0 has two
# equal maxima (3.0) in its first window, reference 0 two (2.0) in its
# second; x == r exactly on the first window of example 1 (its output
# difference is 0) and at single positions elsewhere.
X = np.array([
    [[3.0, 3.0, 0.0, 1.0], [1.0, -1.0, 2.0, 0.5], [0.0, 0.0, -2.0, -1.0],
     [4.0, 0.0, -3.0, -0.5]],
    [[1.0, 2.0, 5.0, 0.0], [0.5, 0.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0],
     [0.0, 1.0, 0.0, 0.25]]], np.float64)[..., None]
R = np.array([
    [[1.0, 0.0, 2.0, 2.0], [1.0, 0.5, 0.0, 1.0], [0.0, 1.0, -2.0, 0.0],
     [0.0, 0.0, 1.0, -0.5]],
    [[1.0, 2.0, 0.0, 3.0], [0.5, 0.0, 1.0, 1.0], [0.0, 2.0, 1.0, 0.0],
     [0.0, 1.0, 0.0, -1.0]]], np.float64)[..., None]
BATCH = np.concatenate([X, R])


def _gradient(fn, x, dy):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return y.numpy(), tape.gradient(y, x, output_gradients=tf.constant(dy)).numpy()


def test_the_case_holds_ties_and_exact_zeros():
    y = np_maxpool(BATCH, 2, 2)
    assert (BATCH[0, :2, :2, 0] == 3.0).sum() == 2  # two equal maxima of x
    assert (BATCH[2, :2, 2:, 0] == 2.0).sum() == 2  # and of r
    assert y[1, 0, 0, 0] == y[3, 0, 0, 0] and (BATCH[1, :2, :2] == BATCH[3, :2, :2]).all()
    assert (BATCH[:2] == BATCH[2:]).sum() >= 12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k, s", [(2, 2), (2, 1), (3, 1)])
def test_maxpool_rule_equals_numpy(dtype, k, s):
    """SHAP's rule, in the tf2 family (eager) and the overrides family (a
    graph), windows apart and overlapping."""
    x = BATCH.astype(dtype)
    dy = np.random.RandomState(k + s).uniform(-1, 1, np_maxpool(x, k, s).shape).astype(dtype)
    expected = np_deeplift_maxpool(x, dy, k, s)
    _, got = _gradient(lambda t: tf2.deeplift_maxpool(t, ksize=k, strides=s), x, dy)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)

    def graph(t):
        return overrides.deeplift_maxpool(t, ksize=k, strides=s)
    out = testing.evaluate(graph, x, "graph", upstream=dy)
    np.testing.assert_allclose(out.gradients[0], expected, rtol=1e-6, atol=1e-7)
    # exact zeros: where x == r nothing is attributed, and each example's
    # attributions sum to dy * (y - y_r)
    assert not (got[:2] * (x[:2] - x[2:]))[x[:2] == x[2:]].any()
    y = np_maxpool(x, k, s)
    np.testing.assert_allclose((got[:2] * (x[:2] - x[2:])).sum(axis=(1, 2, 3)),
                               (dy[:2] * (y[:2] - y[2:])).sum(axis=(1, 2, 3)), rtol=1e-5)


def test_maxpool_rule_with_a_shared_reference_equals_the_reference_repeated():
    x = np.concatenate([X, R[:1]]).astype(np.float32)
    repeated = np.concatenate([X, R[:1], R[:1]]).astype(np.float32)
    dy = np.random.RandomState(0).uniform(-1, 1, (3, 2, 2, 1)).astype(np.float32)
    _, shared = _gradient(lambda t: tf2.deeplift_maxpool(t, shared_reference=True), x, dy)
    _, full = _gradient(tf2.deeplift_maxpool, repeated, np.concatenate([dy[:2], dy[:2]]))
    np.testing.assert_array_equal(shared[:2], full[:2])
    assert not shared[2:].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_rule_equals_numpy(dtype):
    """SHAP's softmax handler, with ties of input and reference (a logit
    equal on both rows, all logits equal) and logits far apart; the
    attributions sum to the change of the output but where SHAP's do not."""
    z = np.array([[1.0, 2.0, -0.5, 0.0], [3.0, 3.0, 3.0, 3.0], [10.0, -10.0, 0.5, 1.0],
                  [0.0, 1.0, 2.0, 0.0], [3.0, 3.0, 3.0, 3.0], [-4.0, 8.0, 0.5, 1.5]], dtype)
    dy = np.random.RandomState(1).uniform(-1, 1, z.shape).astype(dtype)
    dy[3:] = dy[:3]  # the target is the inputs' (the references' dy is not read)
    got = _gradient(tf2.deeplift_softmax, z, dy)[1]
    np.testing.assert_allclose(got, np_deeplift_softmax(z.astype(np.float64), dy)
                               .astype(dtype), rtol=2e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-7)
    s = np.exp(z - z.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    sums = (got[:3] * (z[:3] - z[3:])).sum(-1)
    change = (dy[:3] * (s[:3] - s[3:])).sum(-1)
    np.testing.assert_allclose(sums[:2], change[:2], atol=1e-6)
    assert not got[1].any()  # x == r: nothing to attribute
    # SHAP's exception: logit 2 is 0.5 on both rows of example 2 while the
    # rows' maxima differ (10 and 8); its share, its multiplier times a
    # difference of 0, is missing from the sum (in SHAP's numbers too)
    assert 1e-5 < abs(sums[2] - change[2]) < 1e-3


# ------------------------------------------------------------ whole networks

def _cnn(head=None):
    tf.keras.utils.set_random_seed(3)
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)), layers.Conv2D(4, 3, activation="relu"),
        layers.MaxPooling2D(2), layers.Conv2D(4, 2, padding="same"),
        layers.MaxPooling2D(2, strides=1), layers.Activation("relu"), layers.Flatten(),
        layers.Dense(5, activation=head)])


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    return (rng.uniform(-1, 1, (6, 8, 8, 1)).astype(np.float32),
            rng.uniform(-1, 1, (6, 8, 8, 1)).astype(np.float32))


def _relative_gap(result, outputs_of_baseline, target):
    f_x = result.outputs[np.arange(len(target)), target]
    f_r = outputs_of_baseline[np.arange(len(target)), target]
    return np.abs(result.delta) / np.maximum(np.abs(f_x), np.abs(f_r))


@pytest.mark.parametrize("head", [None, "softmax"])
def test_deeplift_sums_to_the_output_change_through_max_pooling(data, head):
    """Two MaxPools (one overlapping), a random baseline per example and one
    shared, a target per example: the maps sum to f(x) - f(r) to 1e-5 of
    the outputs; MaxPool's plain gradient misses by far more."""
    x, baselines = data
    model = _cnn(head)
    target = np.array([0, 1, 2, 3, 4, 0])
    explainer = attribution.Explainer(model)
    for baseline in (baselines, baselines[0]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", attribution.CoverageWarning)
            result = explainer.attribute("deeplift", x, target, baseline=baseline)
        f_r = model(np.broadcast_to(baseline, x.shape)).numpy()
        assert _relative_gap(result, f_r, target).max() < 1e-5
        plain = attribution.deeplift(model, x, target, baseline=baseline,
                                     rules=["MaxPool=MaxPool"])
        assert _relative_gap(plain, f_r, target).max() > 1e-2


def test_deeplift_maps_of_an_example_equal_to_its_baseline_are_zero(data):
    x, baselines = data
    baselines = baselines.copy()
    baselines[2] = x[2]
    result = attribution.deeplift(_cnn("softmax"), x, 1, baseline=baselines)
    assert not result.maps[2].any() and result.delta[2] == 0.0


def test_the_method_covers_max_pool_and_softmax():
    report = attribution.coverage_report(_cnn("softmax"), "deeplift")
    assert report.ok and report.covered["MaxPool"] == 2 and report.covered["Softmax"] == 1
    assert "Softmax" in {u["op"] for u in attribution.coverage_report(
        _cnn("softmax"), "eps_lrp").uncovered}
