"""Bounded memory: every method run batch by batch gives the maps of one call,
bit for bit; the batch bounds what is held whatever the number of examples;
the data sources (memory-mapped .npy, image folders, TFRecords, tf.data)
give the arrays' maps."""

import io
import warnings

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import batching, sources
from graph_override.errors import AttributionError

import methods_nets as nets

OPTIONS = {"integrated_gradients": {"steps": 3}, "smoothgrad": {"samples": 2, "seed": 4},
           "grad_cam": {"layer": "features:0"}, "occlusion": {"patch": 3, "stride": 2}}
N = 11


@pytest.fixture(scope="module")
def explainer():
    return attribution.Explainer(nets.cnn_graph_def(), inputs="x:0", outputs="logits:0")


@pytest.fixture(scope="module")
def x():
    return nets.images(N, 1)


def _same(a, b):
    for name in ("maps", "outputs", "targets", "delta"):
        left, right = getattr(a, name), getattr(b, name)
        assert (left is None) == (right is None), name
        if left is not None:
            assert left.dtype == right.dtype and np.array_equal(left, right), name


def _close(a, b):
    scale = max(1.0, float(np.abs(b.maps).max()))
    np.testing.assert_allclose(a.maps, b.maps, rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_allclose(a.outputs, b.outputs, rtol=1e-5, atol=1e-6)
    if b.targets is not None:
        np.testing.assert_array_equal(a.targets, b.targets)


@pytest.mark.parametrize("method", [m for m in attribution.METHODS if m != "smoothgrad"])
def test_each_batch_gives_the_maps_of_the_method_on_it_alone_bit_for_bit(explainer, x, method):
    """Batching only cuts the rows and the per-example options: each batch is
    the method called on those rows alone, bit for bit; against one call on
    all the rows, float rounding (a kernel may round another number of rows
    differently)."""
    options = OPTIONS.get(method, {})
    targets = np.arange(N) % 3
    baseline = {"baseline": x[::-1] * 0.5} if attribution.METHODS[method].baseline else {}
    whole = explainer.attribute(method, x, targets, batch_size=N, **baseline, **options)
    for size in (1, 4):
        batched = explainer.attribute(method, x, targets, batch_size=size, **baseline, **options)
        alone = [explainer.attribute(method, x[a:a + size], targets[a:a + size], **{
            k: v[a:a + size] for k, v in baseline.items()}, **options)
            for a in range(0, N, size)]
        _same(batched, batching.join(alone))
        _close(batched, whole)
    _same(explainer.attribute(method, x, 1, batch_size=4, **options),
          batching.join([explainer.attribute(method, x[a:a + 4], 1, **options)
                         for a in range(0, N, 4)]))


def test_smoothgrad_draws_each_batchs_noise_from_the_seed_and_its_first_row(explainer, x):
    one = explainer.attribute("smoothgrad", x, batch_size=N, samples=2, seed=4)
    batched = explainer.attribute("smoothgrad", x, batch_size=4, samples=2, seed=4)
    np.testing.assert_array_equal(batched.maps[:4], explainer.attribute(
        "smoothgrad", x[:4], samples=2, seed=4).maps)  # the first batch: the seed itself
    np.testing.assert_array_equal(batched.maps[4:8], explainer.attribute(
        "smoothgrad", x[4:8], samples=2, seed=[4, 4]).maps)
    assert not np.array_equal(batched.maps, one.maps)
    again = explainer.attribute("smoothgrad", x, batch_size=4, samples=2, seed=4)
    np.testing.assert_array_equal(again.maps, batched.maps)


def test_default_batch_size_holds_two_to_the_21_input_values():
    assert batching.default_batch_size((96, 96, 3)) == 75  # 2**21 // 27648
    assert batching.default_batch_size((224, 224, 3)) == 13
    assert batching.default_batch_size((4,)) == 256  # at most 256
    assert batching.default_batch_size((2048, 2048, 3)) == 1  # at least 1
    assert batching.default_batch_size((8, 8, 1), fixed=5) == 5


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_a_bad_batch_size_is_refused(explainer, x, bad):
    with pytest.raises(AttributionError, match=r"batch_size=.*: expected an int >= 1"):
        explainer.attribute("saliency", x, batch_size=bad)


class _Counting:
    """A source that counts the rows it has handed out."""

    def __init__(self, x):
        self.inner = sources.ArraySource(x)
        self.count, self.example_shape = self.inner.count, self.inner.example_shape
        self.read = 0

    def batches(self, batch_size, start=0, stop=None):
        for first, rows in self.inner.batches(batch_size, start, stop):
            self.read += len(rows)
            yield first, rows

    def describe(self):
        return self.inner.describe()


def test_what_is_held_is_bounded_by_the_batch_whatever_the_number_of_examples(
        explainer, monkeypatch):
    """Memory does not grow with N: the model sees at most batch_size rows,
    the rows are read from the source only as each batch runs, and a batch's
    result is let go before the next is read."""
    held = []
    run_batch = type(explainer).run_batch

    def counting(self, method, rows, target, options):
        held.append((len(rows), source.read))
        return run_batch(self, method, rows, target, options)

    monkeypatch.setattr(type(explainer), "run_batch", counting)
    for n in (40, 400):
        held.clear()
        source = _Counting(nets.images(n, 2))
        seen = 0
        for first, result in batching.batches(explainer, "saliency", source, batch_size=8):
            assert first == seen and len(result.maps) <= 8
            seen += len(result.maps)
        assert seen == n
        assert max(rows for rows, _ in held) == 8
        # when the k-th batch runs, the source has handed out k batches, no more
        assert [read for _, read in held] == [min(8 * (k + 1), n) for k in range(len(held))]


def test_a_progress_bar_is_drawn_on_stderr_when_asked(explainer, x, capsys):
    explainer.attribute("saliency", x, batch_size=4)
    assert capsys.readouterr().err == ""
    explainer.attribute("saliency", x, batch_size=4, progress=True)
    err = capsys.readouterr().err
    assert "/%d" % N in err and "example" in err


def test_maps_vanish_when_every_batch_vanishes_and_it_is_said_once():
    w = tf.constant([[1.0], [2.0]])
    dead = attribution.Explainer(lambda t: tf.matmul(tf.nn.relu(t), w))
    x = -np.ones((6, 2), "float32")
    with pytest.warns(attribution.VanishingMapsWarning) as caught:
        dead.attribute("saliency", x, batch_size=2)
    assert len(caught) == 1
    x[5] = 1.0  # the last batch's maps do not vanish: the run's do not
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dead.attribute("saliency", x, batch_size=2)


def test_memory_mapped_npy_and_tf_data_give_the_arrays_maps(explainer, x, tmp_path):
    whole = explainer.attribute("guided_backprop", x, batch_size=N)
    np.save(tmp_path / "x.npy", x)
    npy = sources.NpySource(str(tmp_path / "x.npy"))
    assert isinstance(npy.array, np.memmap)
    _same(explainer.attribute("guided_backprop", npy, batch_size=3), whole)
    dataset = tf.data.Dataset.from_tensor_slices(x)
    _same(explainer.attribute("guided_backprop", dataset, batch_size=3), whole)
    assert npy.describe()["sha256"] == sources.file_digest(str(tmp_path / "x.npy"))


def _png(image):
    return tf.io.encode_png(tf.constant(image)).numpy()


def test_an_image_folder_is_decoded_resized_and_scaled_as_stated(explainer, tmp_path):
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (8, 8, 1), dtype=np.uint8)
    large = rng.integers(0, 256, (12, 10, 1), dtype=np.uint8)
    (tmp_path / "b.png").write_bytes(_png(small))
    (tmp_path / "a.png").write_bytes(_png(large))
    (tmp_path / "notes.txt").write_text("not an image")
    folder = sources.ImageFolder(str(tmp_path), size=(8, 8), channels=1)
    assert folder.names == ["a.png", "b.png"] and folder.count == 2
    (_, rows), = list(folder.batches(5))
    resized = tf.image.resize(tf.cast(large, tf.float32), (8, 8), method="bilinear",
                              antialias=True).numpy()
    np.testing.assert_array_equal(rows[0], (resized * np.float32(1 / 255)).astype("float32"))
    np.testing.assert_array_equal(rows[1], small.astype("float32") * np.float32(1 / 255))
    symmetric = next(sources.ImageFolder(str(tmp_path), (8, 8), 1, "symmetric").batches(5))[1]
    assert symmetric.min() >= -1.0 and symmetric.max() <= 1.0 and symmetric.min() < 0
    maps = explainer.attribute("saliency", folder, batch_size=1).maps
    _same(explainer.attribute("saliency", rows, batch_size=2), attribution.Attribution(
        maps=maps, method="saliency",
        targets=explainer.attribute("saliency", rows).targets,
        outputs=explainer.attribute("saliency", rows).outputs))
    (tmp_path / "c.png").write_bytes(b"\x89PNG damaged")
    with pytest.raises(AttributionError, match="c.png: not an image TensorFlow decodes"):
        list(sources.ImageFolder(str(tmp_path), (8, 8), 1).batches(5))


def _example(**features):
    feature = {}
    for key, value in features.items():
        if isinstance(value, bytes):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(
                value=np.ravel(value)))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_tfrecords_of_floats_and_of_encoded_images(explainer, x, tmp_path):
    path = str(tmp_path / "data.tfrecord")
    images = (x[:5] * 100 + 128).clip(0, 255).astype(np.uint8)
    with tf.io.TFRecordWriter(path) as writer:
        for row, image in zip(x[:5], images):
            writer.write(_example(pixels=row, image=_png(image)))
    floats = sources.TFRecords(path, "pixels", (8, 8, 1))
    assert floats.count == 5
    np.testing.assert_array_equal(np.concatenate([b for _, b in floats.batches(2)]), x[:5])
    np.testing.assert_array_equal(next(floats.batches(2, start=3))[1], x[3:5])
    _same(explainer.attribute("deconvnet", floats, batch_size=2),
          explainer.attribute("deconvnet", x[:5]))
    encoded = sources.TFRecords(path, "image", size=(8, 8), channels=1, scale="byte")
    np.testing.assert_array_equal(np.concatenate([b for _, b in encoded.batches(3)]),
                                  images.astype("float32"))
    with pytest.raises(AttributionError, match="no feature 'label'; they have image, pixels"):
        sources.TFRecords(path, "label")
    with pytest.raises(AttributionError, match="float list: give its shape"):
        sources.TFRecords(path, "pixels")


def test_sources_refuse_what_they_cannot_read(tmp_path):
    with pytest.raises(AttributionError, match="holds no image files"):
        sources.ImageFolder(str(tmp_path))
    with pytest.raises(AttributionError, match="scale='percent': expected one of"):
        sources.ImageFolder(str(tmp_path), scale="percent")
    (tmp_path / "x.npy").write_bytes(io.BytesIO(b"not numpy").getvalue())
    with pytest.raises(AttributionError, match="not a .npy array that memory-maps"):
        sources.NpySource(str(tmp_path / "x.npy"))
    pairs = tf.data.Dataset.from_tensor_slices((np.zeros((2, 3)), np.zeros(2)))
    with pytest.raises(AttributionError, match="expected one tensor per example"):
        sources.as_source(pairs)
