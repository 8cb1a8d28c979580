"""Occlusion: the maps against a numpy loop over the patches (one occluded
copy at a time), strides that do not divide the input, overlapping patches,
baselines per example, the batch bound, the refusals, and the command line.
(Captum's Occlusion on the same weights: reference/test_captum.py; the same
maps from every model form: test_methods_forms.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli, frozen
from graph_override.attribution import engine, occlusions
from graph_override.errors import AttributionError

import methods_nets as nets


@pytest.fixture(scope="module")
def cnn():
    return nets.cnn_params(0)


@pytest.fixture(scope="module")
def explainer(cnn):
    return attribution.Explainer(tf.function(lambda t: nets.cnn(cnn, t)))


def _model(cnn):
    return lambda x: nets.cnn(cnn, tf.constant(x)).numpy()


def np_occlusion(f, x, target, patch, stride, baseline):
    """The definition, one occluded copy per call: the patch corners every
    stride along each axis of an example until a patch reaches the end (the
    last one cut there), each element the mean drop over its patches."""
    n, shape = x.shape[0], x.shape[1:]
    plain = f(x)[np.arange(n), target]
    total, count = np.zeros(x.shape), np.zeros(shape)
    corners = [list(range(0, max(size - p, 0) + s, s)) for size, p, s in
               zip(shape, patch, stride)]
    for corner in np.array(np.meshgrid(*corners, indexing="ij")).reshape(len(shape), -1).T:
        box = tuple(slice(c, min(c + p, size)) for c, p, size in zip(corner, patch, shape))
        for i in range(n):
            copy = x[i:i + 1].copy()
            copy[(0,) + box] = baseline[i][box]
            total[(i,) + box] += plain[i] - f(copy)[0, target[i]]
        count[box] += 1
    return total / count


@pytest.mark.parametrize("patch, stride", [
    ((3, 3, 1), (2, 2, 1)),   # 8 = 2 * 2 + 3 + 1: the last patch is cut at the edge
    ((2, 2, 1), (2, 2, 1)),   # patches apart
    ((4, 3, 1), (1, 3, 1)),   # rows overlap, columns apart and cut
    ((8, 8, 1), (1, 1, 1)),   # the whole image
])
def test_occlusion_equals_a_numpy_loop(cnn, explainer, patch, stride):
    x = nets.images(3, seed=2)
    baseline = np.random.RandomState(3).uniform(-1, 1, x.shape).astype(np.float32)
    target = np.array([0, 2, 1])
    result = explainer.attribute("occlusion", x, target, patch=patch, stride=stride,
                                 baseline=baseline, internal_batch_size=7)
    expected = np_occlusion(_model(cnn), x, target, patch, stride, baseline)
    np.testing.assert_allclose(result.maps, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(result.maps).max() > 1e-2 and result.maps.dtype == np.float32
    np.testing.assert_array_equal(result.targets, target)


def test_an_int_patch_covers_every_axis_but_the_last(explainer):
    x = nets.images(2, seed=4)
    by_int = explainer.attribute("occlusion", x, 1, patch=3, stride=2).maps
    by_tuple = explainer.attribute("occlusion", x, 1, patch=(3, 3), stride=(2, 2)).maps
    full = explainer.attribute("occlusion", x, 1, patch=(3, 3, 1), stride=(2, 2, 1)).maps
    np.testing.assert_array_equal(by_int, by_tuple)
    np.testing.assert_array_equal(by_int, full)
    assert occlusions.patch_shape(3, (8, 8, 3)) == (3, 3, 3)
    assert occlusions.patch_shape(5, (64,)) == (5,)
    assert occlusions.patch_shape((2,), (10, 4)) == (2, 4)


def test_every_element_is_covered_and_patches_are_cut_at_the_edge():
    boxes = list(occlusions.windows((8,), (3,), (2,)))
    assert [(b[0].start, b[0].stop) for b in boxes] == [(0, 3), (2, 5), (4, 7), (6, 8)]
    assert len(list(occlusions.windows((8, 8, 1), (3, 3, 1), (2, 2, 1)))) == 16
    assert len(list(occlusions.windows((5,), (5,), (1,)))) == 1


@pytest.mark.parametrize("rows", [1, 10, 1000])
def test_the_batch_bound_holds_and_leaves_the_maps_as_they_are(explainer, rows, monkeypatch):
    x = nets.images(4, seed=5)
    seen = []
    outputs = engine._Context.outputs  # pylint: disable=protected-access

    def counted(self, batch):
        seen.append(batch.shape[0])
        return outputs(self, batch)

    monkeypatch.setattr(engine._Context, "outputs", counted)  # pylint: disable=protected-access
    maps = explainer.attribute("occlusion", x, 2, patch=3, stride=2,
                               internal_batch_size=rows).maps
    monkeypatch.undo()
    reference = explainer.attribute("occlusion", x, 2, patch=3, stride=2,
                                    internal_batch_size=4).maps
    np.testing.assert_allclose(maps, reference, rtol=1e-6, atol=1e-7)
    copies = seen[1:]  # after f(x) itself
    assert sum(copies) == 16 * 4 and max(copies) <= max(rows, 4)
    if rows == 1000:
        assert copies == [64]  # every patch in one call


def test_a_fixed_batch_dimension_runs_one_patch_per_call(cnn):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 1], name="x")
        tf.identity(nets.cnn(cnn, x), name="logits")
    images = nets.images(2, seed=6)
    fixed = attribution.occlusion(g.as_graph_def(), images, 1, inputs="x:0", outputs="logits:0",
                                  patch=4, stride=4)
    free = attribution.occlusion(tf.function(lambda t: nets.cnn(cnn, t)), images, 1,
                                 patch=4, stride=4)
    np.testing.assert_allclose(fixed.maps, free.maps, rtol=1e-5, atol=1e-6)


def test_a_callable_target_and_the_baseline_forms(cnn, explainer):
    x = nets.images(2, seed=7)
    by_class = explainer.attribute("occlusion", x, 1, patch=2, stride=2, baseline=0.5).maps
    by_callable = explainer.attribute("occlusion", x, lambda y: y[:, 1], patch=2, stride=2,
                                      baseline=np.full((8, 8, 1), 0.5, np.float32)).maps
    np.testing.assert_allclose(by_class, by_callable, rtol=1e-6, atol=1e-7)
    # occluding with the input's own values changes nothing: maps exactly 0
    with pytest.warns(attribution.VanishingMapsWarning):
        same = explainer.attribute("occlusion", x, 1, patch=2, stride=2, baseline=x).maps
    assert not same.any()


@pytest.mark.parametrize("options, match", [
    ({"patch": 9}, r"the patch \(9, 9, 1\) is larger than an example, shape \(8, 8, 1\) "
                   r"\(axis 0: 9 > 8\)"),
    ({"patch": (2, 2, 2)}, r"axis 2: 2 > 1"),
    ({"patch": 2, "stride": 3}, r"stride \(3, 3, 1\) is larger than the patch \(2, 2, 1\)"),
    ({"patch": (1, 1, 1, 1)}, r"has 4 axes; an example has 3"),
    ({"patch": 0}, r"patch=0: expected an int >= 1"),
    ({"patch": 2.5}, r"patch=2.5: expected an int >= 1"),
    ({"patch": 2, "internal_batch_size": 0}, r"internal_batch_size=0"),
    ({"patch": 2, "baseline": np.zeros((3, 3))}, r"baseline has shape \(3, 3\)"),
    ({}, r"occlusion needs the patch's size: patch=3"),
])
def test_refusals_say_what_and_what_to_do(explainer, options, match):
    with pytest.raises((AttributionError, TypeError), match=match):
        explainer.attribute("occlusion", nets.images(2, seed=8), 0, **options)


def test_the_command_line_takes_patch_stride_and_a_number_as_baseline(cnn, tmp_path,
                                                                      monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    session, x, logits = nets.cnn_session(cnn)
    with session.graph.as_default():
        frozen.save(tf.compat.v1.graph_util.convert_variables_to_constants(
            session, session.graph.as_graph_def(), ["logits"]), "cnn.pb")
    session.close()
    images = nets.images(3, seed=9)
    np.save("x.npy", images)
    argv = ["explain", "cnn.pb", "--inputs", "x:0", "--outputs", "logits:0", "--data",
            "x.npy", "--target", "2", "-o", "occ.npy"]
    assert cli.main(argv + ["--method", "occlusion", "--patch", "3,3", "--stride", "2",
                            "--baseline", "0.25", "--internal-batch-size", "5"]) == 0
    assert "occlusion maps of 3 example(s)" in capsys.readouterr().out
    api = attribution.occlusion("cnn.pb", images, 2, inputs="x:0", outputs="logits:0",
                                patch=(3, 3), stride=2, baseline=0.25)
    np.testing.assert_allclose(np.load("occ.npy"), api.maps, rtol=1e-6, atol=1e-7)
    for extra, message in (
            (["--method", "occlusion", "--force"], "occlusion needs the patch's size"),
            (["--method", "saliency", "--patch", "3"], "--patch: only occlusion takes it"),
            (["--method", "occlusion", "--patch", "9", "--force"], "larger than an example")):
        assert cli.main(argv + extra) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_status:  # argparse's own usage error
        cli.main(argv + ["--method", "occlusion", "--patch", "0"])
    assert exit_status.value.code == 2
    assert "expected a size N >= 1" in capsys.readouterr().err


def test_a_model_of_two_inputs_gets_the_patch_over_each_input():
    """An image and a vector: each input is occluded patch by patch on its
    own axes, the other left as it is; a map per input."""
    rng = np.random.RandomState(11)
    w_image = rng.randn(16, 2).astype(np.float32)
    w_vector = rng.randn(3, 2).astype(np.float32)

    def logits(image, vector):
        return np.tanh(image.reshape(len(image), -1) @ w_image + vector @ w_vector)

    model = tf.function(lambda image, vector: tf.tanh(
        tf.matmul(tf.reshape(image, [-1, 16]), w_image) + tf.matmul(vector, w_vector)))
    image = rng.uniform(-1, 1, (2, 4, 4, 1)).astype(np.float32)
    vector = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    result = attribution.occlusion(model, [image, vector], 1, patch=2, stride=2,
                                   baseline=0.5)
    plain = logits(image, vector)[:, 1]
    expected_image = np.zeros(image.shape)
    for i in (0, 2):
        for j in (0, 2):
            copy = image.copy()
            copy[:, i:i + 2, j:j + 2] = 0.5
            expected_image[:, i:i + 2, j:j + 2] = (plain - logits(copy, vector)[:, 1])[
                :, None, None, None]
    expected_vector = np.zeros(vector.shape)
    counts = np.zeros(3)
    for k in (0, 2):  # patches [0, 2) and [2, 3), cut at the edge
        copy = vector.copy()
        copy[:, k:k + 2] = 0.5
        expected_vector[:, k:k + 2] += (plain - logits(image, copy)[:, 1])[:, None]
        counts[k:k + 2] += 1
    np.testing.assert_allclose(result.maps[0], expected_image, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.maps[1], expected_vector / counts, rtol=1e-5, atol=1e-6)
