"""Shards written batch by batch in a thread of their own: the same members,
byte for byte, as numpy.savez of the joined batches; never a whole shard's
maps in memory; a failed write raised in the caller's thread, leaving no
partial file, and the run resumable to the same maps."""

import hashlib
import io
import os
import threading
import tracemalloc
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import methods, shard_writer, shards
from graph_override.errors import AttributionError

SIDE, N, BATCH, SHARD = 32, 512, 8, 256


@pytest.fixture(scope="module")
def explainer():
    w = np.random.RandomState(0).normal(0, 0.05, (SIDE * SIDE * 3, 3)).astype("float32")
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, SIDE, SIDE, 3], name="x")
        tf.identity(tf.matmul(tf.reshape(x, [-1, SIDE * SIDE * 3]), w), name="logits")
    return attribution.Explainer(g.as_graph_def(), inputs="x:0", outputs="logits:0")


@pytest.fixture(scope="module")
def data():
    x = np.random.RandomState(1).uniform(-1, 1, (N, SIDE, SIDE, 3)).astype("float32")
    x[:, 0] = 0.0
    return x


def _batch(rows, seed, delta=True):
    rng = np.random.RandomState(seed)
    return methods.Attribution(
        maps=rng.normal(size=(rows, 5, 4, 3)).astype("float32"), method="m",
        targets=np.arange(rows), outputs=rng.normal(size=(rows, 7)).astype("float32"),
        delta=rng.normal(size=rows).astype("float32") if delta else None)


@pytest.mark.parametrize("delta", [True, False])
def test_the_members_are_numpy_savez_s_byte_for_byte(tmp_path, delta):
    parts = [_batch(4, 0, delta), _batch(4, 1, delta), _batch(2, 2, delta)]
    shard = shard_writer.ShardFile(str(tmp_path / "shard.npz"), 10)
    for part in parts:
        shard.add(part)
    digest = shard.finish()
    arrays = {name: np.concatenate([getattr(p, name) for p in parts])
              for name in ("maps", "outputs", "targets") + (("delta",) if delta else ())}
    expected = io.BytesIO()
    np.savez(expected, **arrays)
    with zipfile.ZipFile(tmp_path / "shard.npz") as ours, zipfile.ZipFile(expected) as theirs:
        assert ours.namelist() == theirs.namelist() == [k + ".npy" for k in arrays]
        for name in theirs.namelist():
            assert ours.read(name) == theirs.read(name), name
    assert digest == hashlib.sha256((tmp_path / "shard.npz").read_bytes()).hexdigest()
    assert os.listdir(tmp_path) == ["shard.npz"]


def _two(rows, seed, as_dict):
    rng = np.random.RandomState(seed)
    a = rng.normal(size=(rows, 3, 2)).astype("float32")
    b = rng.normal(size=(rows, 5)).astype("float64")
    return methods.Attribution(maps={"a": a, "b": b} if as_dict else [a, b], method="m",
                               targets=np.arange(rows), outputs=rng.normal(size=(rows, 2)))


@pytest.mark.parametrize("as_dict", [False, True])
def test_several_inputs_maps_are_a_member_each_as_numpy_savez_writes_them(tmp_path, as_dict):
    """A model of several inputs: ``maps/a`` written as it comes, ``maps/b``
    through a temporary file copied in at the end (no temporary left), the
    bytes those of numpy.savez of the joined maps, in the inputs' order."""
    parts = [_two(4, 0, as_dict), _two(3, 1, as_dict)]
    shard = shard_writer.ShardFile(str(tmp_path / "shard.npz"), 7, ["maps/a", "maps/b"])
    for part in parts:
        shard.add(part)
    shard.finish()
    maps = [(m.values() if as_dict else m) for m in (p.maps for p in parts)]
    a, b = (np.concatenate(arrays) for arrays in zip(*[list(m) for m in maps]))
    expected = io.BytesIO()
    np.savez(expected, **{"maps/a": a, "maps/b": b,
                          "outputs": np.concatenate([p.outputs for p in parts]),
                          "targets": np.concatenate([p.targets for p in parts])})
    with zipfile.ZipFile(tmp_path / "shard.npz") as ours, zipfile.ZipFile(expected) as theirs:
        assert ours.namelist() == theirs.namelist()
        assert ours.namelist()[:2] == ["maps/a.npy", "maps/b.npy"]
        for name in theirs.namelist():
            assert ours.read(name) == theirs.read(name), name
    assert os.listdir(tmp_path) == ["shard.npz"]


def test_several_inputs_batch_that_does_not_fit_leaves_no_file(tmp_path):
    shard = shard_writer.ShardFile(str(tmp_path / "shard.npz"), 6, ["maps/a", "maps/b"])
    shard.add(_two(3, 0, False))
    wrong = _two(3, 1, False)
    wrong.maps[1] = wrong.maps[1][:, :4]
    with pytest.raises(AttributionError, match=r"float64 of shape \(4,\), the shard's "):
        shard.add(wrong)
    with pytest.raises(AttributionError, match=r"maps of 1 inputs, the shard 2 \(maps/a, maps/b\)"):
        shard_writer.ShardFile(str(tmp_path / "other.npz"), 6, ["maps/a", "maps/b"]).add(
            methods.Attribution(maps=[np.zeros((1, 2))], method="m", targets=np.arange(1),
                                outputs=np.zeros((1, 2))))
    assert os.listdir(tmp_path) == []


def test_a_batch_that_does_not_fit_is_refused_and_leaves_no_file(tmp_path):
    shard = shard_writer.ShardFile(str(tmp_path / "shard.npz"), 6)
    shard.add(_batch(4, 0))
    with pytest.raises(AttributionError, match=r"shard\.npz: more than the shard's 6 rows"):
        shard.add(_batch(4, 1))
    assert os.listdir(tmp_path) == []
    shard = shard_writer.ShardFile(str(tmp_path / "shard.npz"), 6)
    shard.add(_batch(4, 0))
    with pytest.raises(AttributionError, match=r"4 rows written, the shard has 6"):
        shard.finish()
    assert os.listdir(tmp_path) == []


def test_a_failed_job_is_raised_in_the_callers_thread_and_stops_the_later_ones():
    writer = shard_writer.Writer()
    ran = []
    writer.submit(lambda: ran.append(threading.current_thread()))
    writer.submit(lambda: 1 / 0)
    writer.submit(lambda: ran.append("after"))
    with pytest.raises(ZeroDivisionError):
        writer.close()
    assert len(ran) == 1 and ran[0] is not threading.main_thread()


def test_a_shard_s_maps_are_never_all_in_memory_and_are_written_beside_the_model(
        explainer, data, tmp_path, monkeypatch):
    """The maps go to the file batch by batch, from another thread: the
    Python-side peak of the run stays under half a shard's maps (a joined
    shard and its in-memory .npz were each a whole shard)."""
    threads = set()
    add = shard_writer.ShardFile.add

    def spy(self, result):
        threads.add(threading.current_thread())
        return add(self, result)

    monkeypatch.setattr(shard_writer.ShardFile, "add", spy)
    explainer.attribute("gradient_input", data[:BATCH], target=0)  # warm
    tracemalloc.start()
    try:
        manifest = shards.explain_to_folder(explainer, "gradient_input", data,
                                            str(tmp_path / "maps"), target=0,
                                            batch_size=BATCH, shard_size=SHARD)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    shard_bytes = SHARD * data[0].nbytes
    assert peak < shard_bytes // 2, (peak, shard_bytes)
    assert threading.main_thread() not in threads and len(threads) == 1
    assert [s["rows"] for s in manifest["shards"]] == [[0, SHARD], [SHARD, N]]
    one_call = explainer.attribute("gradient_input", data, target=0, batch_size=BATCH)
    assert np.array_equal(shards.read_maps(str(tmp_path / "maps")), one_call.maps)


def test_a_write_that_fails_stops_the_run_keeps_the_finished_shards_and_resumes(
        explainer, data, tmp_path, monkeypatch):
    add = shard_writer.ShardFile.add

    def full_disk(self, result):
        if os.path.basename(self.path) == "shard-00001.npz":
            raise OSError(28, "No space left on device", self.path)
        return add(self, result)

    folder = str(tmp_path / "maps")
    with monkeypatch.context() as patch:
        patch.setattr(shard_writer.ShardFile, "add", full_disk)
        with pytest.raises(OSError, match="No space left on device"):
            shards.explain_to_folder(explainer, "gradient_input", data, folder, target=0,
                                     batch_size=BATCH, shard_size=SHARD)
    assert sorted(os.listdir(folder)) == ["manifest.json", "shard-00000.npz"]
    assert [s["rows"] for s in shards.read_manifest(folder)["shards"]] == [[0, SHARD]]
    shards.explain_to_folder(explainer, "gradient_input", data, folder, target=0,
                             batch_size=BATCH, shard_size=SHARD, resume=True)
    one_call = explainer.attribute("gradient_input", data, target=0, batch_size=BATCH)
    assert np.array_equal(shards.read_maps(folder), one_call.maps)
    assert sorted(os.listdir(folder)) == ["manifest.json", "shard-00000.npz",
                                          "shard-00001.npz"]
