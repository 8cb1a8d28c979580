"""LRP on layers (`attribution.lrp`, `attribution.relevance`): relevance is
conserved layer by layer, batch normalizations fold in both frozen forms
without changing the outputs, composites pick rules by type, position and
name, and what no rule covers is refused by name (Zennit and iNNvestigate
themselves: tests/attribution/reference/)."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen
from graph_override.attribution import relevance
from graph_override.attribution.relevance import explain, structure
from graph_override.errors import AttributionError

RNG = np.random.RandomState(7)
X = RNG.uniform(-1, 1, (3, 6, 6, 2)).astype(np.float32)
K1 = RNG.randn(3, 3, 2, 4).astype(np.float32) * 0.5
K2 = RNG.randn(3, 3, 4, 4).astype(np.float32) * 0.5
W = RNG.randn(3 * 3 * 4, 5).astype(np.float32) * 0.3
B1 = np.array([0.1, -0.2, 0.0, 0.3], np.float32)
GAMMA, BETA = np.float32([1.5, 0.5, 1.0, 2.0]), np.float32([0.1, -0.1, 0.2, 0.0])
MEAN, VAR = np.float32([0.2, -0.1, 0.0, 0.3]), np.float32([0.5, 2.0, 1.0, 0.25])


def _net(x, bias=True, batch_norm=None):
    """conv (+ bias) [+ batch norm] relu, then a residual conv added to it,
    max pool, avg pool over the rest, dense: every part LRP knows."""
    h = tf.nn.conv2d(x, K1, 1, "SAME")
    if bias:
        h = tf.nn.bias_add(h, B1)
    if batch_norm == "fused":
        h, _, _ = tf.compat.v1.nn.fused_batch_norm(h, GAMMA, BETA, MEAN, VAR, epsilon=1e-3,
                                                   is_training=False)
    elif batch_norm == "keras3":  # Rsqrt, Mul, Sub, AddV2, as Keras 3 freezes it
        h = tf.nn.batch_normalization(h, MEAN, VAR, BETA, GAMMA, 1e-3)
    h = tf.nn.relu(h)
    h = h + tf.nn.conv2d(h, K2, 1, "SAME")
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.avg_pool2d(h, 1, 1, "VALID")
    return tf.matmul(tf.reshape(h, [-1, 3 * 3 * 4]), W)


def _graph_def(fn):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 2], name="x")
        tf.identity(fn(x), name="logits")
    return g.as_graph_def()


def _lrp(model, composite, **options):
    return attribution.lrp(model, X, 1, inputs="x:0", outputs="logits:0",
                           composite=composite, **options)


@pytest.mark.parametrize("composite", ["z", "epsilon:epsilon=1e-9"])
def test_lrp_0_and_epsilon_without_bias_conserve_relevance(composite):
    """Without biases every layer, pool and residual add passes on all the
    relevance it gets: the maps sum to the target's output."""
    result = _lrp(_graph_def(lambda x: _net(x, bias=False)), composite)
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2, 3)), result.outputs[:, 1],
                               rtol=1e-5)


def test_conservation_holds_layer_by_layer_and_epsilon_absorbs_its_share():
    """Dense layers without bias, explained from each layer's input on: LRP-0
    gives every layer the output's value; epsilon keeps at each layer
    sum_j R_j z_j / (z_j + eps sign z_j), what the rule says it absorbs."""
    ws = [RNG.randn(8, 6).astype(np.float32), RNG.randn(6, 6).astype(np.float32),
          RNG.randn(6, 3).astype(np.float32)]
    x = RNG.randn(4, 8).astype(np.float32)

    def tail(k):
        def f(a):
            for i, w in enumerate(ws[k:], k):
                a = tf.matmul(a, w)
                a = tf.nn.relu(a) if i < len(ws) - 1 else a
            return a
        return f

    acts = [x]
    for w in ws[:-1]:
        acts.append(np.maximum(acts[-1] @ w, 0))
    y = acts[-1] @ ws[-1]
    for k in range(len(ws)):
        sums = attribution.lrp(tail(k), acts[k], 2, composite="z").maps.sum(axis=1)
        np.testing.assert_allclose(sums, y[:, 2], rtol=1e-5)
    eps = 0.5
    for k in range(len(ws) - 1):
        r_out = attribution.lrp(tail(k + 1), acts[k + 1], 2, composite="epsilon:epsilon=0.5")
        z = acts[k] @ ws[k]
        kept = (r_out.maps * z / (z + eps * np.where(z >= 0, 1.0, -1.0))).sum(axis=1)
        r_in = attribution.lrp(tail(k), acts[k], 2, composite="epsilon:epsilon=0.5").maps
        np.testing.assert_allclose(r_in.sum(axis=1), kept, rtol=1e-5, atol=1e-6)


def _folded_by_hand(x):
    scale = GAMMA / np.sqrt(VAR + np.float32(1e-3))
    h = tf.nn.conv2d(x, K1 * scale, 1, "SAME") + ((B1 - MEAN) * scale + BETA)
    return _net_after_first_layer(h)


def _net_after_first_layer(h):
    h = tf.nn.relu(h)
    h = h + tf.nn.conv2d(h, K2, 1, "SAME")
    h = tf.nn.avg_pool2d(tf.nn.max_pool2d(h, 2, 2, "VALID"), 1, 1, "VALID")
    return tf.matmul(tf.reshape(h, [-1, 3 * 3 * 4]), W)


@pytest.mark.parametrize("form", ["fused", "keras3"])
def test_batch_normalization_folds_into_the_layer_before_it(form):
    """FusedBatchNormV3 and Rsqrt/Mul/Sub/AddV2 fold into the conv before
    them: no batch normalization op is left, the outputs are the model's,
    and the maps are those of the model folded by hand."""
    graph_def = _graph_def(lambda x: _net(x, batch_norm=form))
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    ready, function, _ = explain.prepared(explainer, X, "epsilon_plus_flat")
    look = structure.analyze(ready.graph_def, "x:0", ready.output)
    assert [look.nodes[n].op for n in look.path if look.kind[n] in ("batch_norm", "scale")] \
        == []
    assert len([n for n in graph_def.node if n.op in ("FusedBatchNormV3", "Rsqrt")]) == 1
    with tf.Graph().as_default():
        plain = frozen.to_function(graph_def, ["x:0"], ["logits:0"])
    np.testing.assert_allclose(function(tf.constant(X)).numpy(), plain(tf.constant(X)).numpy(),
                               rtol=1e-5, atol=1e-6)
    ours = attribution.lrp(explainer, X, 1, composite="epsilon_plus_flat").maps
    by_hand = _lrp(_graph_def(_folded_by_hand), "epsilon_plus_flat").maps
    np.testing.assert_allclose(ours, by_hand, rtol=1e-4, atol=1e-6)


def test_a_batch_normalization_after_no_layer_is_refused_or_passed():
    graph_def = _graph_def(lambda x: _net(tf.compat.v1.nn.fused_batch_norm(
        x, GAMMA[:2], BETA[:2], MEAN[:2], VAR[:2], is_training=False)[0]))
    with pytest.raises(AttributionError, match=r"cannot fold .*FusedBatchNorm.*"
                                               r"follows 'x' \(Placeholder\).*canonizers=\(\)"):
        _lrp(graph_def, "epsilon_plus")
    passed = _lrp(graph_def, "epsilon_plus", canonizers=())
    assert np.all(np.isfinite(passed.maps)) and np.abs(passed.maps).max() > 0


def test_an_op_no_rule_covers_is_named_and_refused():
    graph_def = _graph_def(lambda x: _net(x) * tf.reduce_sum(tf.sin(x)))
    with pytest.raises(AttributionError, match=r"no rule for Mul, Sin on the path.*"
                                               r"Sin: .*Sin"):
        _lrp(graph_def, "epsilon_plus")
    report = attribution.coverage_report(graph_def, "lrp", inputs="x:0", outputs="logits:0")
    assert {u["op"] for u in report.uncovered} == {"Mul", "Sin"}


def test_a_softmax_at_the_output_is_skipped():
    logits = _lrp(_graph_def(_net), "epsilon_plus")
    softmax = _lrp(_graph_def(lambda x: tf.nn.softmax(_net(x))), "epsilon_plus")
    np.testing.assert_array_equal(softmax.maps, logits.maps)
    np.testing.assert_array_equal(softmax.outputs, logits.outputs)


def test_max_pool_winner_takes_all_or_shares_in_proportion():
    def pool(x):
        return tf.reshape(tf.nn.max_pool2d(x, 2, 2, "VALID"), [-1, 9 * 2])

    x = np.abs(X)
    winner = attribution.lrp(pool, x, 3, composite="z").maps
    shared = attribution.lrp(pool, x, 3, composite="z", max_pool="proportional").maps
    # output 3 is channel 1 of window (0, 1): rows 0-1, columns 2-3
    window = x[:, 0:2, 2:4, 1]
    expected = np.zeros_like(x)
    expected[:, 0:2, 2:4, 1] = window / window.sum(axis=(1, 2), keepdims=True) * \
        window.max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(shared, expected, rtol=1e-5, atol=1e-7)
    assert np.count_nonzero(winner) == len(x)
    np.testing.assert_allclose(winner.sum(axis=(1, 2, 3)), window.max(axis=(1, 2)), rtol=1e-6)


def test_composites_choose_rules_by_type_position_and_name():
    mine = relevance.composite([
        ("first", "flat"), (("conv", "name:Conv2D_1"), relevance.rule("gamma", gamma=0.5)),
        ("conv", "zplus"), ("head", "epsilon:epsilon=0.25")])
    explainer = attribution.Explainer(_graph_def(_net), inputs="x:0", outputs="logits:0")
    ready, _, _ = explain.prepared(explainer, X, mine)
    assert [(op, str(rule)) for _, op, rule in ready.layers] == [
        ("Conv2D", "flat(stabilizer=1e-06)"), ("Conv2D", "gamma(gamma=0.5, stabilizer=1e-06)"),
        ("MatMul", "epsilon(epsilon=0.25)")]
    with pytest.raises(AttributionError, match=r"no rule for the layer.*MatMul"):
        attribution.lrp(explainer, X, 1, composite=relevance.composite([("conv", "zplus")]))


@pytest.mark.parametrize("composite, message", [
    ("epsilon_pluss", r"not an LRP composite.*Did you mean 'epsilon_plus'"),
    ("alpha_beta:alpha=2,beta=2", r"alpha - beta must be 1"),
    ("epsilon_gamma_box", r"z_box needs low= and high="),
    ("epsilon:epsilon=-1", r"epsilon=-1.0 must be a finite number >= 0"),
    ("z_box:low=1,high=0", r"low > high"),
])
def test_bad_composites_are_refused_with_the_reason(composite, message):
    with pytest.raises(AttributionError, match=message):
        attribution.lrp(lambda x: x, X, 0, composite=composite)


def test_explain_and_inspect_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "net.pb"
    frozen.save(_graph_def(_net), str(path))
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "maps.npy"
    status = cli.main(["explain", str(path), "--inputs", "x:0", "--outputs", "logits:0",
                       "--method", "lrp", "--composite", "epsilon_gamma_box:low=-1,high=1",
                       "--start", "one", "--data", str(tmp_path / "x.npy"), "--target", "1",
                       "-o", str(out)])
    assert status == 0, capsys.readouterr()
    expected = _lrp(_graph_def(_net), "epsilon_gamma_box:low=-1,high=1", start="one").maps
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6)
    bad = tmp_path / "bad.pb"
    frozen.save(_graph_def(lambda x: _net(tf.sin(x))), str(bad))
    capsys.readouterr()
    assert cli.main(["inspect", str(bad), "--method", "lrp", "--inputs", "x:0",
                     "--outputs", "logits:0"]) == 1
    assert "Sin" in capsys.readouterr().out


def test_depthwise_and_transposed_convolutions_are_layers_that_conserve():
    """A transposed convolution, a depthwise convolution and a dense layer,
    without biases: each is a layer (its rule on it), and LRP-0 passes all
    the relevance on, which it would not if a convolution's transpose
    (its op's own attributes: strides, padding, output size) were wrong."""
    k_t = RNG.randn(3, 3, 3, 2).astype(np.float32)  # out channels 3, in channels 2
    k_d = RNG.randn(3, 3, 3, 2).astype(np.float32)  # channel multiplier 2
    w = RNG.randn(12 * 12 * 6, 4).astype(np.float32)

    def net(x):
        n = tf.shape(x)[0]
        h = tf.nn.conv2d_transpose(x, k_t, tf.stack([n, 12, 12, 3]), 2, "SAME")
        h = tf.nn.depthwise_conv2d(tf.nn.relu(h), k_d, [1, 1, 1, 1], "SAME")
        return tf.matmul(tf.reshape(tf.nn.relu(h), [-1, 12 * 12 * 6]), w)

    graph_def = _graph_def(net)
    explainer = attribution.Explainer(graph_def, inputs="x:0", outputs="logits:0")
    ready, _, _ = explain.prepared(explainer, X, "z")
    assert [op for _, op, _ in ready.layers] == [
        "Conv2DBackpropInput", "DepthwiseConv2dNative", "MatMul"]
    result = attribution.lrp(explainer, X, 2, composite="z")
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2, 3)), result.outputs[:, 2],
                               rtol=1e-4)
