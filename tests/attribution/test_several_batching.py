"""A model of several inputs at data-set scale: `batch_size` cuts every input
at the same rows, the maps come back joined per input and are one batch's,
bit for bit (a frozen graph of two inputs and a Keras model of two); the
model never sees more than a batch; .npy files, a tf.data.Dataset of tuples
or dicts and shards with a map per input give the same maps; inputs of
different numbers of examples are refused, naming each input and its count."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import batching, several_sources, shards, sources
from graph_override.errors import AttributionError

import methods_nets as nets

N = 9
RNG = np.random.RandomState(34)
W1 = RNG.randn(3, 4).astype(np.float32)
B1 = np.array([0.5, -5.0, 0.0, 0.25], np.float32)  # unit 1 dead
W2 = RNG.randn(4, 3).astype(np.float32)
WB = RNG.randn(3, 4).astype(np.float32)
W3 = RNG.randn(4, 3).astype(np.float32)
A = RNG.randn(N, 2, 2, 3).astype(np.float32)
B = RNG.randn(N, 3).astype(np.float32)
TARGETS = np.arange(N) % 3
METHODS = ["saliency", "gradient_input", "integrated_gradients", "deeplift",
           "guided_backprop", "eps_lrp", "grad_cam"]
OPTIONS = {"integrated_gradients": {"steps": 3}}


def _dense(x, w):
    """x @ w as a product and a sum, whose rounding does not depend on the
    number of rows: a MatMul's does (TensorFlow's CPU kernel rounds the last
    bit of one row otherwise than of several), which would hide what
    batching itself does behind the kernel's choice."""
    return tf.reduce_sum(x[..., None] * w, axis=-2)


def _graph_def():
    """a [N, 2, 2, 3] -> per-pixel dense, Relu, mean; b [N, 3] -> dense, Relu;
    the two summed."""
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 3], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 3], name="b")
        ha = tf.nn.relu(_dense(a, W1) + B1, name="ha")
        hb = tf.nn.relu(_dense(b, WB), name="hb")
        tf.add(_dense(tf.reduce_mean(ha, axis=[1, 2]), W2), _dense(hb, W3), name="logits")
    return g.as_graph_def()


def _keras_model():
    keras = nets.keras_module()

    class Dense(keras.layers.Layer):
        """`_dense` as a Keras layer, with an optional bias and Relu."""

        def __init__(self, w, bias=None, relu=False, **kwargs):
            super().__init__(**kwargs)
            self.w, self.bias, self.relu = w, bias, relu

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=self.w.shape, initializer="zeros",
                                          name="kernel")
            self.kernel.assign(self.w)

        def call(self, x):
            y = _dense(x, self.kernel)
            y = y if self.bias is None else y + self.bias
            return tf.nn.relu(y) if self.relu else y

    a, b = keras.Input((2, 2, 3), name="a"), keras.Input((3,), name="b")
    ha = Dense(W1, B1, relu=True, name="ha")(a)
    la = Dense(W2)(keras.layers.GlobalAveragePooling2D()(ha))
    lb = Dense(W3)(Dense(WB, relu=True)(b))
    return keras.Model([a, b], keras.layers.Add()([la, lb]))


@pytest.fixture(scope="module")
def models():
    return {"frozen graph": attribution.Explainer(_graph_def(), inputs=["a:0", "b:0"],
                                                  outputs="logits:0"),
            "keras": attribution.Explainer(_keras_model())}


def _same(a, b, what=""):
    """Bit for bit: maps per input (a list or dict), outputs, targets, delta."""
    for name in ("maps", "outputs", "targets", "delta"):
        left, right = getattr(a, name), getattr(b, name)
        assert (left is None) == (right is None), (what, name)
        if isinstance(left, dict):
            assert list(left) == list(right), (what, name)
            left, right = list(left.values()), list(right.values())
        if isinstance(left, list):
            assert isinstance(right, list) and len(left) == len(right), (what, name)
            for i, (x, y) in enumerate(zip(left, right)):
                assert x.dtype == y.dtype and np.array_equal(x, y), (what, name, i)
        elif left is not None:
            assert left.dtype == right.dtype and np.array_equal(left, right), (what, name)


@pytest.mark.parametrize("form", ["frozen graph", "keras"])
@pytest.mark.parametrize("method", METHODS)
def test_batched_maps_of_two_inputs_are_one_batchs_bit_for_bit(models, form, method,
                                                                monkeypatch):
    """Batches of 1, 4 and 9 rows (the last batch short) give one batch's maps
    (a list or a dict of them, as x was given), outputs, targets and
    completeness, bit for bit; the model saw batches of at most that size."""
    explainer = models[form]
    options = dict(OPTIONS.get(method, {}))
    if attribution.METHODS[method].baseline:  # one baseline per example of each input
        options["baseline"] = [A[::-1] * 0.5, 0.25]
    whole = explainer.attribute(method, [A, B], TARGETS, batch_size=N, **options)
    seen = []
    run_batch = type(explainer).run_batch

    def counting(self, method_, x, target, options_):
        seen.append([len(v) for v in (x.values() if isinstance(x, dict) else x)])
        return run_batch(self, method_, x, target, options_)

    monkeypatch.setattr(type(explainer), "run_batch", counting)
    for size in (1, 4):
        seen.clear()
        batched = explainer.attribute(method, [A, B], TARGETS, batch_size=size, **options)
        _same(batched, whole, (form, method, size))
        assert seen == [[min(size, N - r)] * 2 for r in range(0, N, size)]
    if method != "grad_cam":  # a layer's maps are one array whatever the inputs' structure
        by_name = explainer.attribute(method, {"b": B, "a": A}, TARGETS, batch_size=4,
                                      **dict(options, **({"baseline": {
                                          "a": A[::-1] * 0.5, "b": 0.25}}
                                          if "baseline" in options else {})))
        assert isinstance(by_name.maps, dict) and sorted(by_name.maps) == ["a", "b"]
        np.testing.assert_array_equal(by_name.maps["a"], whole.maps[0])
        np.testing.assert_array_equal(by_name.maps["b"], whole.maps[1])


def test_the_batches_are_read_as_they_run_from_memory_mapped_npy_files(models, tmp_path,
                                                                         monkeypatch):
    """Two .npy files, each memory-mapped: the k-th batch runs when k
    batches' rows have been read, no more; the maps are the arrays'."""
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    explainer = models["frozen graph"]
    parts = [sources.NpySource(str(tmp_path / name)) for name in ("a.npy", "b.npy")]
    read = []
    real = sources.NpySource.batches

    def reading(self, batch_size, start=0, stop=None):
        for first, rows in real(self, batch_size, start, stop):
            read.append(len(rows))
            yield first, rows

    monkeypatch.setattr(sources.NpySource, "batches", reading)
    held = []
    for first, result in batching.batches(explainer, "saliency", parts, TARGETS, batch_size=2):
        held.append((first, sum(read)))
        assert [len(m) for m in result.maps] == [min(2, N - first)] * 2
    assert [f for f, _ in held] == list(range(0, N, 2))
    assert [r for _, r in held] == [2 * min(2 * (k + 1), N) for k in range(len(held))]
    whole = explainer.attribute("saliency", [A, B], TARGETS, batch_size=N)
    _same(explainer.attribute("saliency", parts, TARGETS, batch_size=2), whole)


def test_a_dataset_of_tuples_or_dicts_gives_the_arrays_maps(models):
    """A tuple or dict per example is the inputs of a model of several; for
    a graph or a Keras model of one input, a dataset of (x, label) pairs is
    refused, saying to map it to the input."""
    with tf.Graph().as_default() as g:
        tf.identity(tf.compat.v1.placeholder(tf.float32, [None, 3], name="x") * 2.0,
                    name="y")
    keras = nets.keras_module()
    one_input = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    pairs = tf.data.Dataset.from_tensor_slices((B, TARGETS))
    for model in (attribution.Explainer(g.as_graph_def(), inputs="x:0", outputs="y:0"),
                  attribution.Explainer(one_input)):
        with pytest.raises(AttributionError, match=r"expected one tensor per example \(map "
                                                   r"it to the input: ds.map\(lambda x, y: x"):
            model.attribute("saliency", pairs, batch_size=4)
    explainer = models["keras"]
    whole = explainer.attribute("integrated_gradients", [A, B], TARGETS, batch_size=N, steps=3)
    as_tuples = tf.data.Dataset.from_tensor_slices((A, B))
    _same(explainer.attribute("integrated_gradients", as_tuples, TARGETS, batch_size=4,
                              steps=3), whole)
    as_dicts = tf.data.Dataset.from_tensor_slices({"b": B, "a": A})
    result = explainer.attribute("integrated_gradients", as_dicts, TARGETS, batch_size=4,
                                 steps=3)
    assert sorted(result.maps) == ["a", "b"]
    np.testing.assert_array_equal(result.maps["a"], whole.maps[0])
    np.testing.assert_array_equal(result.maps["b"], whole.maps[1])


def test_a_progress_bar_counts_examples_of_several_inputs(models, capsys):
    models["frozen graph"].attribute("saliency", [A, B], batch_size=4, progress=True)
    err = capsys.readouterr().err
    assert "0/%d" % N in err and "example" in err


@pytest.mark.parametrize("x, says", [
    ([A, B[:7]], r"different numbers of examples: x\[0\] \(input a:0\) 9, "
                 r"x\[1\] \(input b:0\) 7; every input needs one row per example"),
    ({"a": A[:2], "b": B}, r"different numbers of examples: x\['a'\] 2, x\['b'\] 9"),
])
def test_inputs_of_different_numbers_of_examples_are_refused_naming_them(models, x, says,
                                                                          tmp_path):
    explainer = models["frozen graph"]
    for size in (None, 2, N):
        with pytest.raises(AttributionError, match=says):
            explainer.attribute("saliency", x, batch_size=size)
    with pytest.raises(AttributionError, match=says):
        next(batching.batches(explainer, "saliency", x, batch_size=2))
    with pytest.raises(AttributionError, match=says):
        shards.explain_to_folder(explainer, "saliency", x, str(tmp_path / "out"), batch_size=2)
    assert not (tmp_path / "out").exists()


def test_shards_hold_a_map_per_input_and_the_manifest_lists_the_inputs(models, tmp_path):
    """Shards of 4 rows in batches of 2 from a dict of inputs: each shard
    holds maps/a and maps/b; read back as a dict, the maps of one batch."""
    explainer = models["frozen graph"]
    out = str(tmp_path / "maps")
    manifest = shards.explain_to_folder(explainer, "deeplift", {"a": A, "b:0": B}, out,
                                        TARGETS, batch_size=2, shard_size=4)
    assert manifest["inputs"] == [{"name": "a:0", "key": "a", "maps": "maps/a"},
                                  {"name": "b:0", "key": "b:0", "maps": "maps/b"}]
    assert manifest["model"]["input"] == ["a:0", "b:0"]
    assert [s["rows"] for s in manifest["shards"]] == [[0, 4], [4, 8], [8, 9]]
    assert json.loads((tmp_path / "maps" / "manifest.json").read_text()) == manifest
    with np.load(os.path.join(out, "shard-00001.npz")) as data:
        assert sorted(data.files) == ["delta", "maps/a", "maps/b", "outputs", "targets"]
        assert data["maps/a"].shape == (4, 2, 2, 3) and data["maps/b"].shape == (4, 3)
    whole = explainer.attribute("deeplift", [A, B], TARGETS, batch_size=N)
    maps = shards.read_maps(out)
    assert list(maps) == ["a", "b:0"]
    np.testing.assert_array_equal(maps["a"], whole.maps[0])
    np.testing.assert_array_equal(maps["b:0"], whole.maps[1])
    listed = shards.explain_to_folder(explainer, "deeplift", [A, B], str(tmp_path / "list"),
                                      TARGETS, batch_size=2, shard_size=4)
    assert [i["key"] for i in listed["inputs"]] == [None, None]
    assert listed["input"]["kind"] == "several"
    assert [i["input"] for i in listed["input"]["inputs"]] == ["a:0", "b:0"]
    for got, want in zip(shards.read_maps(str(tmp_path / "list")), whole.maps):
        np.testing.assert_array_equal(got, want)


def test_the_default_batch_size_counts_every_inputs_values(models):
    source = several_sources.as_source([np.zeros((3, 64, 64, 3), "f"),
                                        np.zeros((3, 1000), "f")])
    assert source.example_shape == (64 * 64 * 3 + 1000,)
    assert batching.default_batch_size(source.example_shape) == 2 ** 21 // 13288
    assert batching.batch_size_for(models["keras"], source) == 157


def test_with_a_matmul_each_batch_is_the_method_on_its_rows_alone_bit_for_bit():
    """Where a kernel rounds a batch's rows otherwise than one call's (a
    MatMul on 1 row), each batch is still the method called on those rows
    alone, bit for bit, and one call's maps to float rounding."""
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 3], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 3], name="b")
        tf.add(tf.matmul(tf.reshape(a, [-1, 12]), np.tile(W2, (3, 1))),
               tf.matmul(tf.nn.relu(tf.matmul(b, WB)), W3), name="logits")
    explainer = attribution.Explainer(g.as_graph_def(), inputs=["a:0", "b:0"],
                                      outputs="logits:0")
    batched = explainer.attribute("gradient_input", [A, B], TARGETS, batch_size=4)
    alone = [explainer.attribute("gradient_input", [A[r:r + 4], B[r:r + 4]],
                                 TARGETS[r:r + 4]) for r in range(0, N, 4)]
    _same(batched, batching.join(alone))
    whole = explainer.attribute("gradient_input", [A, B], TARGETS, batch_size=N)
    for got, want in zip(batched.maps, whole.maps):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

