"""`graph-override explain` and `evaluate` at data-set scale for a model of
several inputs (--inputs a:0,b:0 --data a.npy,b.npy): batches of --batch-size, shards of a
map per input, a run killed with SIGKILL and resumed gives the maps of one
uninterrupted process bit for bit (the mechanism of test_cli_explain_shards:
a process forked from tests/warm_python.py's server that kills itself);
`evaluate` scores the two inputs as the model of their concatenation; inputs
of different numbers of examples, or that a metric cannot take, are refused,
naming them."""

import json
import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen
from graph_override.attribution import shards

import warm_python
from test_cli_explain_shards import _KILLER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, BATCH, SHARD, CUT = 10, 2, 4, 5
RNG = np.random.RandomState(5)
W1 = RNG.normal(0, 0.5, (12, 6)).astype(np.float32)
W2 = RNG.normal(0, 0.5, (6, 3)).astype(np.float32)


def _model(x):
    return tf.matmul(tf.nn.relu(tf.matmul(x, W1)), W2, name="logits")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """two.pb (a [N, 5], b [N, 7] concatenated), one.pb (x [N, 12]), the data."""
    path = tmp_path_factory.mktemp("several")
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, CUT], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 12 - CUT], name="b")
        _model(tf.concat([a, b], axis=1))
    frozen.save(g.as_graph_def(), str(path / "two.pb"))
    with tf.Graph().as_default() as g:
        _model(tf.compat.v1.placeholder(tf.float32, [None, 12], name="x"))
    frozen.save(g.as_graph_def(), str(path / "one.pb"))
    x = RNG.uniform(-1, 1, (N, 12)).astype(np.float32)
    np.save(path / "x.npy", x)
    np.save(path / "a.npy", x[:, :CUT])
    np.save(path / "b.npy", x[:, CUT:])
    return path


def _argv(folder, out, method="integrated_gradients", *extra):
    options = {"integrated_gradients": ["--steps", "3"]}
    return (["explain", str(folder / "two.pb"), "--inputs", "a:0,b:0", "--outputs",
             "logits:0", "--method", method, "--data",
             "%s,%s" % (folder / "a.npy", folder / "b.npy"), "-o", str(out),
             "--batch-size", str(BATCH)] + options.get(method, []) + list(extra))


def _run(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def uninterrupted(folder):
    """The maps of one process, at the batch size of the sharded runs."""
    assert cli.main(_argv(folder, folder / "whole.npz")) == 0
    with np.load(folder / "whole.npz") as data:
        return {"a": data["a"], "b": data["b"]}


def test_shards_of_several_inputs_are_one_processs_maps(folder, uninterrupted, capsys):
    out = folder / "sharded"
    code, stdout, err = _run(capsys, _argv(folder, out, "integrated_gradients",
                                           "--shard-size", str(SHARD)))
    assert code == 0, err
    assert "integrated_gradients maps of %d example(s) in 3 shard(s)" % N in stdout
    maps = shards.read_maps(str(out))
    assert isinstance(maps, list) and len(maps) == 2
    assert np.array_equal(maps[0], uninterrupted["a"]) and maps[0].shape == (N, CUT)
    assert np.array_equal(maps[1], uninterrupted["b"]) and maps[1].shape == (N, 12 - CUT)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["name"] for i in manifest["inputs"]] == ["a:0", "b:0"]
    assert [i["path"] for i in manifest["input"]["inputs"]] == [str(folder / "a.npy"),
                                                                 str(folder / "b.npy")]
    with np.load(out / "shard-00002.npz") as data:
        assert sorted(data.files) == ["delta", "maps/a", "maps/b", "outputs", "targets"]
        assert len(data["maps/a"]) == N - 2 * SHARD


@pytest.mark.slow
@pytest.mark.parametrize("point, k", [("after-shard", 1), ("mid-batch", 4)])
def test_a_killed_run_of_several_inputs_resumes_to_one_processs_maps(
        folder, uninterrupted, capsys, point, k):
    out = folder / ("killed-%s" % point)
    argv = _argv(folder, out, "integrated_gradients", "--shard-size", str(SHARD))
    proc = warm_python.run([sys.executable, "-c", _KILLER, point, str(k)] + argv,
                           env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                           text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    finished = {s["file"]: os.stat(out / s["file"])
                for s in shards.read_manifest(str(out))["shards"]}
    assert len(finished) < 3
    code, stdout, err = _run(capsys, argv + ["--resume"])
    assert code == 0, err
    assert "in 3 shard(s)" in stdout
    for name, before in finished.items():  # never written again
        after = os.stat(out / name)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    maps = shards.read_maps(str(out))
    assert np.array_equal(maps[0], uninterrupted["a"])
    assert np.array_equal(maps[1], uninterrupted["b"])


def test_inputs_of_different_numbers_of_examples_are_refused(folder, capsys):
    np.save(folder / "b_short.npy", np.load(folder / "b.npy")[:7])
    for out, extra in (("short.npz", []), ("short", ["--shard-size", str(SHARD)])):
        argv = _argv(folder, folder / out, "saliency", *extra)
        argv[argv.index("--data") + 1] = "%s,%s" % (folder / "a.npy", folder / "b_short.npy")
        code, _, err = _run(capsys, argv)
        assert code == 2
        assert ("the inputs have different numbers of examples: x[0] (input a:0) 10, x[1] "
                "(input b:0) 7") in err
        assert not os.path.exists(folder / out)


def _evaluate(folder, model, inputs, data, maps, out):
    return ["evaluate", str(folder / model), "--inputs", inputs, "--outputs", "logits:0",
            "--data", data, "--maps", maps, "--metric",
            "deletion,insertion,faithfulness_correlation,max_sensitivity,sparseness",
            "--explain", "gradient_input", "--seed", "3", "--target", "1",
            "--set", "max_sensitivity.samples=2", "--set", "faithfulness_correlation.runs=4",
            "--set", "faithfulness_correlation.subset_size=3", "-o", str(out)]


def test_evaluate_scores_two_inputs_as_the_model_of_their_concatenation(folder, capsys):
    assert cli.main(["explain", str(folder / "one.pb"), "--inputs", "x:0", "--outputs",
                     "logits:0", "--method", "gradient_input", "--target", "1", "--data",
                     str(folder / "x.npy"), "-o", str(folder / "x_maps.npy")]) == 0
    maps = np.load(folder / "x_maps.npy")
    np.savez(folder / "two_maps.npz", a=maps[:, :CUT], b=maps[:, CUT:])
    np.save(folder / "ma.npy", maps[:, :CUT])
    np.save(folder / "mb.npy", maps[:, CUT:])
    assert cli.main(_evaluate(folder, "one.pb", "x:0", str(folder / "x.npy"),
                              str(folder / "x_maps.npy"), folder / "one.json")) == 0
    data = "%s,%s" % (folder / "a.npy", folder / "b.npy")
    for name, given in (("npz", str(folder / "two_maps.npz")),
                        ("npy", "%s,%s" % (folder / "ma.npy", folder / "mb.npy"))):
        code, _, err = _run(capsys, _evaluate(folder, "two.pb", "a:0,b:0", data, given,
                                              folder / ("two_%s.json" % name)))
        assert code == 0, err
        one = json.loads((folder / "one.json").read_text())
        two = json.loads((folder / ("two_%s.json" % name)).read_text())
        assert two["examples"] == N
        assert two["metrics"] == one["metrics"]
    np.save(folder / "mb_short.npy", maps[:7, CUT:])
    code, _, err = _run(capsys, _evaluate(folder, "two.pb", "a:0,b:0", data, "%s,%s" % (
        folder / "ma.npy", folder / "mb_short.npy"), folder / "short.json"))
    assert code == 2 and ("the inputs' arrays hold different numbers of examples (--data "
                          "a:0 10, b:0 10; --maps a:0 10, b:0 7)") in err
    code, _, err = _run(capsys, ["evaluate", str(folder / "two.pb"), "--inputs", "a:0,b:0",
                                 "--outputs", "logits:0", "--data", data, "--maps",
                                 str(folder / "two_maps.npz"), "--metric", "road", "-o",
                                 str(folder / "road.json")])
    assert code == 2 and ("road takes images (examples, height, width, channels); the input "
                          "a:0 has shape (10, 5)") in err
    assert not os.path.exists(folder / "road.json")
