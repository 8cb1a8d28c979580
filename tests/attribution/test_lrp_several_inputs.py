"""LRP on models of several inputs: relevance conserved over the inputs
together; the maps of a model of two inputs equal those of the same model
written with one input (the two concatenated), split, under every kind of
rule and a composite; the same maps from a Keras functional model (a list
or a dict of inputs), a TF2 function, a Session graph and a frozen .pb; a
z-box bound per input; the first layer of each input's path; what no rule
covers, refused by name."""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen
from graph_override.attribution import relevance
from graph_override.errors import AttributionError

import methods_nets as nets

# a [N, 4, 4, 2] -> conv 2x2 valid (KA, BA) -> relu -> flatten (27);
# b [N, 5] -> dense (WB, BB) -> relu (4); concatenated (31) -> dense (WH, BH)
# -> relu (6) -> dense (WO, BO): 3 logits.
RNG = np.random.RandomState(5)
KA = RNG.randn(2, 2, 2, 3).astype(np.float32) * 0.6
BA = np.array([0.2, -0.3, 0.1], np.float32)
WB = RNG.randn(5, 4).astype(np.float32) * 0.6
BB = np.array([0.1, 0.0, -0.2, 0.3], np.float32)
WH = RNG.randn(31, 6).astype(np.float32) * 0.4
BH = np.array([0.1, -0.1, 0.0, 0.2, -0.2, 0.05], np.float32)
WO = RNG.randn(6, 3).astype(np.float32) * 0.5
BO = np.array([0.05, -0.1, 0.0], np.float32)
A = RNG.uniform(-1, 1, (4, 4, 4, 2)).astype(np.float32)
B = RNG.uniform(-1, 1, (4, 5)).astype(np.float32)
WR = RNG.randn(37, 6).astype(np.float32) * 0.4  # the models with an add or a concatenated input
TARGET = np.array([0, 1, 2, 1])
COMPOSITES = ["z", "epsilon:epsilon=0.1", "zplus", "alpha_beta", "epsilon_plus_flat",
              "preset_b_flat"]


def two(a, b, bias=True):
    """The model of two inputs (biases zero with bias=False)."""
    def add(h, v):
        return tf.nn.bias_add(h, v if bias else np.zeros_like(v))
    ha = tf.nn.relu(add(tf.nn.conv2d(a, KA, 1, "VALID", name="conv_a"), BA))
    hb = tf.nn.relu(add(tf.matmul(b, WB, name="dense_b"), BB))
    h = tf.concat([tf.reshape(ha, [-1, 27]), hb], axis=1)
    h = tf.nn.relu(add(tf.matmul(h, WH, name="head"), BH))
    return add(tf.matmul(h, WO, name="out"), BO)


def one(x):
    """The same model of one input: a's 32 values, then b's 5."""
    return two(tf.reshape(x[:, :32], [-1, 4, 4, 2]), x[:, 32:])


def one_split(x):
    """The same again, x cut by Split and b's columns unpacked and packed."""
    a, b = tf.split(x, [32, 5], axis=1)
    b = tf.stack(tf.unstack(tf.identity(b), axis=1), axis=1)
    return two(tf.reshape(tf.slice(a, [0, 0], [-1, 32]), [-1, 4, 4, 2]), b)


def _split(maps):
    return [maps[:, :32].reshape(A.shape), maps[:, 32:]]


def _graph_def(fn=two):
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 5], name="b")
        tf.identity(fn(a, b), name="logits")
    return g.as_graph_def()


@pytest.fixture(scope="module")
def graph_model():
    return attribution.Explainer(_graph_def(), inputs=["a:0", "b:0"], outputs="logits:0")


@pytest.mark.parametrize("composite", COMPOSITES)
def test_the_maps_are_those_of_the_concatenated_model_split(graph_model, composite):
    """Every kind of rule (LRP-0, epsilon, z+, alpha-beta) and composites
    with a flat first layer: on the one-input model the first layers are
    the conv and dense after the slices of x, as they are on each input's
    path in the model of two."""
    got = graph_model.attribute("lrp", [A, B], TARGET, composite=composite)
    want = attribution.lrp(one, np.concatenate([A.reshape(4, -1), B], axis=1), TARGET,
                           composite=composite)
    assert isinstance(got.maps, list) and len(got.maps) == 2
    for g, w in zip(got.maps, _split(want.maps)):  # the same ops on the same values
        assert np.abs(w).max() > 0
        np.testing.assert_array_equal(g, w, err_msg=composite)
    np.testing.assert_array_equal(got.outputs, want.outputs)


def test_ops_that_cut_and_pack_an_input_pass_relevance_on(graph_model):
    """Split, Slice, Unpack, Pack, Identity and Reshape route relevance back
    unchanged: the maps of one_split, split, are those of the two inputs."""
    x = np.concatenate([A.reshape(4, -1), B], axis=1)
    want = attribution.lrp(one_split, x, TARGET, composite="epsilon_plus_flat").maps
    got = graph_model.attribute("lrp", [A, B], TARGET, composite="epsilon_plus_flat").maps
    for g, w in zip(got, _split(want)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("composite", ["z", "epsilon:epsilon=1e-9"])
def test_lrp_0_and_epsilon_without_bias_conserve_over_both_inputs(composite):
    """Without biases, the maps of both inputs together sum to the output;
    each input's alone does not."""
    model = tf.function(lambda a, b: two(a, b, bias=False))
    result = attribution.lrp(model, [A, B], TARGET, composite=composite)
    sums = [m.reshape(4, -1).sum(axis=1, dtype=np.float64) for m in result.maps]
    explained = result.outputs[np.arange(4), TARGET].astype(np.float64)
    np.testing.assert_allclose(sums[0] + sums[1], explained, rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(sums[0]) > 1e-3) and np.all(np.abs(sums[1]) > 1e-3)


def test_a_residual_add_of_two_branches_conserves():
    """An Add of the branches shares relevance in proportion to each."""
    def added(a, b):
        ha = tf.nn.relu(tf.matmul(tf.reshape(a, [-1, 32]), WR[:32, :4]))
        hb = tf.nn.relu(tf.matmul(b, WB))
        return tf.matmul(ha + hb, WO[:4])

    result = attribution.lrp(tf.function(added), [A, B], TARGET, composite="z")
    sums = [m.reshape(4, -1).sum(axis=1, dtype=np.float64) for m in result.maps]
    np.testing.assert_allclose(sums[0] + sums[1], result.outputs[np.arange(4), TARGET],
                               rtol=1e-5, atol=1e-6)
    # by hand: the add's relevance R split as ha * R / (ha + hb), hb * R / (ha + hb)
    ha = np.maximum(A.reshape(4, -1).astype(np.float64) @ WR[:32, :4], 0)
    hb = np.maximum(B.astype(np.float64) @ WB, 0)
    r = (ha + hb) * WO[:4, TARGET].T
    np.testing.assert_allclose(sums[1], (hb * r / (ha + hb + 1e-6)).sum(axis=1),
                               rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    """{form: (Explainer, how x is given)} of the same model of two inputs:
    a Keras model of a list of inputs (x a list or a dict), one of a dict of
    inputs, a Session graph, a .pb, TF2 functions (positional, keywords)."""
    keras = nets.keras_module()
    L = keras.layers
    a, b = keras.Input((4, 4, 2), name="a"), keras.Input((5,), name="b")
    conv, dense_b = L.Conv2D(3, 2, activation="relu"), L.Dense(4, activation="relu")
    head, out = L.Dense(6, activation="relu"), L.Dense(3)
    h = L.Concatenate()([L.Flatten()(conv(a)), dense_b(b)])
    model = keras.Model([a, b], out(head(h)))
    by_name = keras.Model({"a": a, "b": b}, model.outputs[0])  # inputs as a dict
    for layer, weights in [(conv, [KA, BA]), (dense_b, [WB, BB]), (head, [WH, BH]),
                           (out, [WO, BO])]:
        layer.set_weights(weights)
    graph = tf.Graph()
    with graph.as_default():
        pa = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 2], name="a")
        pb = tf.compat.v1.placeholder(tf.float32, [None, 5], name="b")
        logits = tf.identity(two(pa, pb) + 0.0 * tf.reduce_sum(tf.compat.v1.Variable(BO)),
                             name="logits")
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    path = str(tmp_path_factory.mktemp("two") / "two.pb")
    frozen.save(_graph_def(), path)
    out = {"pb": (attribution.Explainer(path, inputs=["a:0", "b:0"], outputs="logits:0"),
                  list),
           "session": (attribution.Explainer(session=session, inputs=[pa, pb],
                                             outputs=logits), list),
           "keras": (attribution.Explainer(model), list),
           "keras dict": (attribution.Explainer(model), dict),
           "keras dict model": (attribution.Explainer(by_name), dict),
           "tf2 function": (attribution.Explainer(tf.function(two)), list),
           "tf2 keywords": (attribution.Explainer(tf.function(lambda b, a: two(a, b))), dict)}
    yield out
    session.close()


@pytest.mark.parametrize("composite", ["epsilon_plus_flat", "z"])
def test_the_forms_give_the_same_maps(forms, composite):
    results = {}
    for form, (explainer, kind) in forms.items():
        x = {"b": B, "a": A} if kind is dict else [A, B]
        maps = explainer.attribute("lrp", x, TARGET, composite=composite).maps
        if kind is dict:
            assert sorted(maps) == ["a", "b"]
            maps = [maps["a"], maps["b"]]
        results[form] = maps
    reference = results.pop("pb")
    assert np.abs(reference[0]).max() > 0 and np.abs(reference[1]).max() > 0
    for form, maps in results.items():
        for got, want in zip(maps, reference):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=form)


def _box(low, high):
    return relevance.composite([("first", relevance.rule("z_box", low=low, high=high)),
                                ("any", "epsilon")])


def test_z_box_takes_a_bound_per_input(graph_model):
    """low/high as a list or a dict, one per input, give each input's first
    layer its own bounds: the maps of naming those layers one by one."""
    by_name = relevance.composite([
        ("name:conv_a", relevance.rule("z_box", low=-1.0, high=1.0)),
        ("name:dense_b", relevance.rule("z_box", low=-2.0, high=3.0)),
        ("any", "epsilon")])
    want = graph_model.attribute("lrp", [A, B], TARGET, composite=by_name).maps
    for composite in (_box([-1.0, -2.0], [1.0, 3.0]),
                      _box({"b": -2.0, "a:0": -1.0}, {"a": 1.0, "b:0": 3.0}),
                      _box((np.full((4, 4, 2), -1.0), np.full(5, -2.0)),
                           [1.0, np.full((1, 5), 3.0)])):
        got = graph_model.attribute("lrp", [A, B], TARGET, composite=composite).maps
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    one_number = graph_model.attribute("lrp", [A, B], TARGET, composite=_box(-2.0, 3.0))
    assert not np.array_equal(one_number.maps[0], want[0])
    np.testing.assert_array_equal(one_number.maps[1], want[1])


def test_the_first_layer_of_each_input_is_first(graph_model):
    """Flat in the first layers (conv_a and dense_b, one per input), z
    elsewhere: each input's map is flat's (x-independent) spread."""
    mine = relevance.composite([("first", "flat"), ("any", "z")])
    maps = graph_model.attribute("lrp", [A, B], TARGET, composite=mine).maps
    other = graph_model.attribute("lrp", [A + 0.5, B - 0.5], TARGET, composite=mine).maps
    # flat's relevance of b: the same value for every input unit of an example
    np.testing.assert_allclose(maps[1], maps[1][:, :1] * np.ones((1, 5)), rtol=1e-5)
    assert not np.allclose(maps[1], other[1])  # (relevance reaching the layer moved)
    assert np.abs(maps[0]).max() > 0


def test_what_no_rule_covers_is_refused_by_name(tmp_path, capsys):
    """A product of the two inputs' branches: the run, the coverage report
    and `inspect --method lrp` name it."""
    graph_def = _graph_def(lambda a, b: tf.matmul(tf.reshape(a, [-1, 32])[:, :5] * b, WB))
    model = attribution.Explainer(graph_def, inputs=["a:0", "b:0"], outputs="logits:0")
    with pytest.raises(AttributionError, match=r"LRP has no rule for Mul on the path of "
                                               r"<GraphDef>: Mul: mul"), \
            pytest.warns(attribution.CoverageWarning, match="lrp does not cover Mul"):
        model.attribute("lrp", [A, B], 0, composite="z")
    report = attribution.coverage_report(graph_def, "lrp", inputs=["a:0", "b:0"],
                                         outputs="logits:0")
    assert [u["op"] for u in report.uncovered] == ["Mul"]
    frozen.save(graph_def, str(tmp_path / "mul.pb"))
    assert cli.main(["inspect", str(tmp_path / "mul.pb"), "--method", "lrp"]) == 1
    out = capsys.readouterr().out
    assert "Mul" in out and "no LRP rule says how relevance crosses it" in out, out


def test_a_batch_normalization_in_a_branch_folds_and_an_unused_input_gets_zeros():
    """The fold (and its check against the model's outputs) with two inputs
    fed: the maps of the same model of one input, split; an input the
    output does not read gets a map of zeros."""
    gamma, beta = np.float32([1.5, 0.5, 2.0]), np.float32([0.1, -0.1, 0.2])
    mean, var = np.float32([0.2, -0.1, 0.0]), np.float32([0.5, 2.0, 0.25])

    def normalized(a, b):
        h = tf.nn.conv2d(a, KA, 1, "VALID")
        h, _, _ = tf.compat.v1.nn.fused_batch_norm(h, gamma, beta, mean, var, epsilon=1e-3,
                                                   is_training=False)
        h = tf.concat([tf.reshape(tf.nn.relu(h), [-1, 27]), tf.nn.relu(b @ WB + BB)], 1)
        return tf.matmul(tf.nn.relu(h @ WH + BH), WO)

    def unused(a, b):  # noqa: ARG001 (b is not read)
        return tf.matmul(tf.reshape(a, [-1, 32]), WR[:32, :3])

    model = attribution.Explainer(_graph_def(normalized), inputs=["a:0", "b:0"],
                                  outputs="logits:0")
    got = model.attribute("lrp", [A, B], TARGET, composite="epsilon_plus").maps
    want = attribution.lrp(lambda x: normalized(tf.reshape(x[:, :32], [-1, 4, 4, 2]),
                                                x[:, 32:]),
                           np.concatenate([A.reshape(4, -1), B], axis=1), TARGET,
                           composite="epsilon_plus").maps
    for g, w in zip(got, _split(want)):
        assert np.abs(w).max() > 0
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    plain = model.attribute("lrp", [A, B], TARGET, composite="epsilon_plus",
                            canonizers=()).maps  # the normalization passes relevance on
    assert not np.allclose(plain[0], got[0], rtol=1e-3)
    model = attribution.Explainer(_graph_def(unused), inputs=["a:0", "b:0"],
                                  outputs="logits:0")
    maps = model.attribute("lrp", [A, B], TARGET, composite="z").maps
    np.testing.assert_array_equal(maps[1], np.zeros_like(B))
    np.testing.assert_allclose(maps[0].reshape(4, -1).sum(axis=1),
                               (A.reshape(4, -1) @ WR[:32, :3])[np.arange(4), TARGET],
                               rtol=1e-5, atol=1e-6)


def _concatenated_first(a, b):
    """The inputs concatenated before the first layer, "dense"."""
    h = tf.concat([tf.reshape(a, [-1, 32]), b], axis=1)
    return tf.matmul(tf.nn.relu(tf.matmul(h, WR, name="dense")), WO)


@pytest.mark.parametrize("fn, low, high, says", [
    (_concatenated_first, [-1.0, -2.0], [1.0, 3.0],
     r"z_box on the layer 'dense': it reads the inputs a:0, b:0 together \(a "
     r"concatenation, an add\), whose low bounds differ; give one number"),
    (two, {"a": -1.0}, 1.0, r"the bounds \{'a': -1.0\} have no value for the input b:0"),
    (two, {"a": -1.0, "b": -1.0, "c": 0.0}, 1.0,
     r"the bounds name 'c', which the model does not take as an input; its inputs: a:0, b:0"),
    (two, [-1.0, 2.0], [1.0, 1.0], r"z_box on the layer 'dense_b': low > high somewhere"),
])
def test_bounds_per_input_that_do_not_fit_are_refused(fn, low, high, says):
    model = attribution.Explainer(_graph_def(fn), inputs=["a:0", "b:0"], outputs="logits:0")
    with pytest.raises(AttributionError, match=says):
        model.attribute("lrp", [A, B], 0, composite=_box(low, high))


def test_one_bound_for_inputs_read_together():
    """A layer reading both inputs takes one number, or the same per input."""
    model = attribution.Explainer(_graph_def(_concatenated_first), inputs=["a:0", "b:0"],
                                  outputs="logits:0")
    one_number = model.attribute("lrp", [A, B], 0, composite=_box(-2.0, 3.0)).maps
    same = model.attribute("lrp", [A, B], 0, composite=_box([-2.0, -2.0], [3.0, 3.0])).maps
    for got, want in zip(same, one_number):
        np.testing.assert_array_equal(got, want)
    assert np.abs(one_number[0]).max() > 0


def test_a_tensor_made_from_an_inputs_shape_is_no_constant_to_fold():
    """zeros of a's batch size added after b's layer: not live, yet not a
    constant (the canonizer would have to run the model to fold it), so
    the layer's chain ends there, as it ends at a scaling by 1 without the
    batch_norm canonizer: the same maps."""
    def between(a, b, how):
        h = tf.matmul(b, WB, name="dense_b")
        h = h + tf.zeros((tf.shape(a)[0], 4)) if how == "shape" else h * 1.0
        hb = tf.nn.relu(tf.nn.bias_add(h, BB))
        ha = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(a, KA, 1, "VALID", name="conv_a"), BA))
        h = tf.concat([tf.reshape(ha, [-1, 27]), hb], axis=1)
        return tf.nn.bias_add(tf.matmul(tf.nn.relu(tf.nn.bias_add(h @ WH, BH)), WO), BO)

    maps = {}
    for how, canonizers in (("shape", None), ("scale", ())):
        model = attribution.Explainer(_graph_def(lambda a, b, how=how: between(a, b, how)),
                                      inputs=["a:0", "b:0"], outputs="logits:0")
        maps[how] = model.attribute("lrp", [A, B], TARGET, composite="z",
                                    canonizers=canonizers).maps
    for got, want in zip(maps["shape"], maps["scale"]):
        assert np.abs(want).max() > 0
        np.testing.assert_array_equal(got, want)


def test_explain_on_the_command_line(tmp_path, monkeypatch, capsys, graph_model):
    monkeypatch.chdir(tmp_path)
    frozen.save(_graph_def(), "two.pb")
    np.savez("x.npz", b=B, a=A)
    assert cli.main(["explain", "two.pb", "--inputs", "a:0,b:0", "--outputs", "logits:0",
                     "--method", "lrp", "--composite", "epsilon_gamma_box:low=-1,high=1",
                     "--data", "x.npz", "--target", "2", "-o", "maps.npz"]) == 0
    assert "lrp maps of 4 example(s), one per input: a (4, 4, 4, 2), b (4, 5)" in \
        capsys.readouterr().out
    want = graph_model.attribute("lrp", {"a": A, "b": B}, 2,
                                 composite="epsilon_gamma_box:low=-1,high=1").maps
    with np.load("maps.npz") as maps:
        assert sorted(maps.files) == ["a", "b"]
        np.testing.assert_array_equal(maps["a"], want["a"])
        np.testing.assert_array_equal(maps["b"], want["b"])
        assert np.abs(maps["b"]).max() > 0


@pytest.mark.parametrize("composite", ["z", "epsilon_plus_flat", "box"])
def test_batches_of_several_inputs_give_one_batchs_maps(graph_model, composite):
    """LRP through the batching of several inputs: every input cut at the
    same rows, the maps joined per input (a bound per input kept for each
    batch); equal to one batch's to float rounding (a MatMul rounds one row
    otherwise than several)."""
    if composite == "box":
        composite = _box({"a": -1.0, "b": -2.0}, {"a": 1.0, "b": 3.0})
    whole = graph_model.attribute("lrp", [A, B], TARGET, composite=composite, batch_size=4)
    for size in (1, 3):
        part = graph_model.attribute("lrp", {"b": B, "a": A}, TARGET, composite=composite,
                                     batch_size=size)
        assert sorted(part.maps) == ["a", "b"]
        for name, w in zip("ab", whole.maps):
            assert np.abs(w).max() > 0
            np.testing.assert_allclose(part.maps[name], w, rtol=1e-5,
                                       atol=1e-6 * np.abs(w).max(), err_msg=(name, size))
        np.testing.assert_allclose(part.outputs, whole.outputs, rtol=1e-5, atol=1e-6)
