"""`graph-override explain -o DIR`: maps in shards with a manifest, the same
bit for bit as one uninterrupted process, resumed after the process is
killed with SIGKILL at several points (a true process boundary: a process
forked from tests/warm_python.py's server that kills itself there), finished
shards never written again, and a manifest of another run refused."""

import json
import os
import random
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen
from graph_override.attribution import shards, sources

import warm_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, BATCH, SHARD = 20, 2, 4


def _model():
    rng = np.random.RandomState(0)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 6, 6, 1], name="x")
        h = tf.nn.relu(tf.nn.conv2d(x, tf.constant(rng.normal(0, 0.5, (3, 3, 1, 3)).astype(
            "float32")), 1, "SAME"))
        h = tf.reshape(tf.nn.max_pool2d(h, 2, 2, "VALID"), [-1, 27])
        tf.identity(tf.matmul(h, tf.constant(rng.normal(0, 0.3, (27, 4)).astype("float32"))),
                    name="logits")
    return g.as_graph_def()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("shards")
    frozen.save(_model(), str(path / "model.pb"))
    np.save(path / "x.npy", np.random.RandomState(1).uniform(-1, 1, (N, 6, 6, 1)).astype(
        "float32"))
    return path


def _argv(folder, out, method="integrated_gradients", *extra):
    options = {"integrated_gradients": ["--steps", "3"], "smoothgrad": ["--samples", "2"]}
    return (["explain", str(folder / "model.pb"), "--inputs", "x:0", "--outputs", "logits:0",
             "--method", method, "--data", str(folder / "x.npy"), "-o", str(out),
             "--batch-size", str(BATCH)] + options.get(method, []) + list(extra))


def _run(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def uninterrupted(folder):
    """The maps of one process: one .npy at the batch size of the sharded
    runs, and one with all the examples in one batch."""
    assert cli.main(_argv(folder, folder / "whole.npy")) == 0
    argv = _argv(folder, folder / "one_batch.npy")
    argv[argv.index("--batch-size") + 1] = str(N)
    assert cli.main(argv) == 0
    return np.load(folder / "whole.npy")


def test_sharded_maps_are_one_processs_and_the_manifest_says_what_they_are(
        folder, uninterrupted, capsys):
    out = folder / "sharded"
    code, stdout, _ = _run(capsys, _argv(folder, out, "integrated_gradients", "--shard-size",
                                         str(SHARD)))
    assert code == 0 and "in 5 shard(s)" in stdout
    maps = shards.read_maps(str(out))
    assert maps.dtype == uninterrupted.dtype and np.array_equal(maps, uninterrupted)
    one_batch = np.load(folder / "one_batch.npy")  # another batch size: float rounding
    np.testing.assert_allclose(maps, one_batch, rtol=1e-5, atol=1e-6 * np.abs(one_batch).max())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "graph_override.attribution.shards/1"
    assert manifest["model"] == {"source": str(folder / "model.pb"), "input": "x:0",
                                 "output": "logits:0",
                                 "sha256": sources.file_digest(str(folder / "model.pb"))}
    assert manifest["method"] == "integrated_gradients" and manifest["options"] == {"steps": 3}
    assert manifest["input"]["kind"] == "npy" and manifest["input"]["shape"] == [N, 6, 6, 1]
    assert manifest["input"]["sha256"] == sources.file_digest(str(folder / "x.npy"))
    assert manifest["versions"]["tensorflow"] == tf.__version__
    assert [s["rows"] for s in manifest["shards"]] == [[i, i + SHARD] for i in range(0, N,
                                                                                      SHARD)]
    for shard in manifest["shards"]:
        assert sources.file_digest(str(out / shard["file"])) == shard["sha256"]
        with np.load(out / shard["file"]) as data:
            assert sorted(data.files) == ["delta", "maps", "outputs", "targets"]
    assert sorted(os.listdir(out)) == ["manifest.json"] + ["shard-%05d.npz" % i
                                                           for i in range(5)]


def test_a_manifest_of_another_run_is_refused(folder, uninterrupted, capsys):
    del uninterrupted
    out = folder / "other"
    assert _run(capsys, _argv(folder, out, "integrated_gradients", "--shard-size", "4"))[0] == 0
    code, _, err = _run(capsys, _argv(folder, out, "integrated_gradients", "--shard-size",
                                      "4"))
    assert code == 2 and "holds a run already (manifest.json): resume it" in err
    for change, named in (([], None), (["--target", "1"], "target: null in the manifest"),
                          (["--steps", "5"], 'options: {"steps": 3} in the manifest')):
        argv = _argv(folder, out, "integrated_gradients", "--shard-size", "4", "--resume")
        if change[:1] == ["--steps"]:
            argv[argv.index("--steps") + 1] = change[1]
        else:
            argv += change
        code, _, err = _run(capsys, argv)
        if named is None:
            assert code == 0, err
        else:
            assert code == 2 and "the manifest is of another run" in err and named in err
    code, _, err = _run(capsys, _argv(folder, out, "saliency", "--shard-size", "4", "--resume"))
    assert code == 2 and 'method: "integrated_gradients" in the manifest, "saliency" now' in err
    with open(out / "shard-00002.npz", "r+b") as f:
        f.seek(100)
        f.write(b"\0")
    code, _, err = _run(capsys, _argv(folder, out, "integrated_gradients", "--shard-size",
                                      "4", "--resume"))
    assert code == 2 and "shard-00002.npz: listed in the manifest but missing or changed" in err
    (folder / "busy").mkdir()
    (folder / "busy" / "notes.txt").write_text("mine")
    code, _, err = _run(capsys, _argv(folder, folder / "busy", "saliency", "--shard-size", "4"))
    assert code == 2 and "not empty and holds no manifest.json" in err
    assert os.listdir(folder / "busy") == ["notes.txt"]


_KILLER = r"""
import os, signal, sys
from graph_override import cli
from graph_override._files import atomic
from graph_override.attribution import engine
point, k, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
real_move, real_run = atomic.move_into_place, engine.Explainer.run_batch
seen = {"manifest": 0, "batch": 0}
def kill():
    os.kill(os.getpid(), signal.SIGKILL)
def move(tmp, path, **kwargs):
    name = os.path.basename(path)
    if point == "before-rename" and name == "shard-%05d.npz" % k:
        kill()  # the shard's temporary is written, not yet renamed
    real_move(tmp, path, **kwargs)
    if point == "after-shard" and name == "shard-%05d.npz" % k:
        kill()  # the shard is in place, the manifest does not list it yet
    if point == "after-manifest" and name == "manifest.json":
        seen["manifest"] += 1
        if seen["manifest"] == k:
            kill()
def run_batch(self, *args):
    seen["batch"] += 1
    if point == "mid-batch" and seen["batch"] == k:
        kill()  # computing
    return real_run(self, *args)
atomic.move_into_place = move
engine.Explainer.run_batch = run_batch
sys.exit(cli.main(argv))
"""

_RNG = random.Random(34)  # the kill points, drawn once
KILLS = [("integrated_gradients", "before-rename", _RNG.randrange(5)),
         ("integrated_gradients", "after-shard", _RNG.randrange(4)),
         ("smoothgrad", "after-manifest", _RNG.randrange(2, 6)),
         ("deeplift", "mid-batch", _RNG.randrange(2, 10))]


@pytest.mark.slow
@pytest.mark.parametrize("method, point, k", KILLS)
def test_a_run_killed_at_any_point_resumes_to_one_processs_maps_bit_for_bit(
        folder, uninterrupted, capsys, method, point, k):
    del uninterrupted
    out = folder / ("killed-%s-%s" % (method, point))
    argv = _argv(folder, out, method, "--shard-size", str(SHARD))
    proc = warm_python.run([sys.executable, "-c", _KILLER, point, str(k)] + argv,
                           env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                           text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    manifest = shards.read_manifest(str(out))
    finished = {s["file"]: os.stat(out / s["file"]) for s in manifest["shards"]}
    code, stdout, err = _run(capsys, argv + ["--resume"])
    assert code == 0, err
    assert "in 5 shard(s)" in stdout
    for name, before in finished.items():  # never written again
        after = os.stat(out / name)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    seed = shards.read_manifest(str(out))["options"].get("seed")
    reference = folder / ("reference-%s-%s.npy" % (method, point))
    assert cli.main(_argv(folder, reference, method) + (
        ["--seed", str(seed)] if method == "smoothgrad" else [])) == 0
    assert np.array_equal(shards.read_maps(str(out)), np.load(reference))
    assert sorted(os.listdir(out)) == ["manifest.json"] + ["shard-%05d.npz" % i
                                                           for i in range(5)]


def test_the_picture_says_which_rows_it_shows_and_the_bar_shows_on_a_terminal(
        folder, capsys, monkeypatch):
    png = folder / "p.png"
    code, out, err = _run(capsys, _argv(folder, folder / "p.npy", "saliency", "--png",
                                        str(png)))
    assert code == 0, err
    assert "; picture %s; the picture %s shows rows 0-15 of %d (the first 16)" % (
        png, png, N) in out
    assert err == ""  # stderr is no terminal here: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, out, err = _run(capsys, _argv(folder, folder / "bar", "saliency", "--shard-size",
                                        "4"))
    assert code == 0 and "/%d" % N in err and "example" in err
    code, out, err = _run(capsys, _argv(folder, folder / "quiet", "saliency", "--shard-size",
                                        "4", "--quiet"))
    assert code == 0 and err == ""


def test_a_folder_of_images_is_explained_at_the_models_input_size(folder, capsys):
    images = folder / "images"
    images.mkdir()
    rng = np.random.RandomState(3)
    for i in range(3):
        (images / ("%d.png" % i)).write_bytes(tf.io.encode_png(
            rng.randint(0, 256, (9, 7, 1)).astype(np.uint8)).numpy())
    argv = _argv(folder, folder / "images.npy", "saliency")
    argv[argv.index("--data") + 1] = str(images)
    code, out, err = _run(capsys, argv)
    assert code == 0, err
    rows = np.concatenate([b for _, b in sources.ImageFolder(str(images), (6, 6), 1).batches(
        3)])
    np.save(folder / "rows.npy", rows)
    argv = _argv(folder, folder / "rows_maps.npy", "saliency")
    argv[argv.index("--data") + 1] = str(folder / "rows.npy")
    assert cli.main(argv) == 0
    assert np.array_equal(np.load(folder / "images.npy"), np.load(folder / "rows_maps.npy"))
