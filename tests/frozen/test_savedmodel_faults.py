"""`graph-override convert` when things go wrong around it: a full disk,
another writer winning the race for DIR, what a killed convert left."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

import frozen_tf2_models as models
from graph_override import cli, frozen


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("convert") / "model.pb"
    frozen.save(models.binarized_mlp("sign")[0], str(path))
    return str(path)


def _convert(capsys, model, out, *extra):
    code = cli.main(["convert", model, "-o", out, "--inputs", "x", "--outputs", "logits",
                     "--map", "Sign=ste_sign", *extra])
    _, err = capsys.readouterr()
    return code, err


def test_a_full_disk_exits_2_naming_dir_not_the_temporary(model, tmp_path, capsys,
                                                          monkeypatch):
    def full(module, path, signatures=None, options=None):
        os.makedirs(os.path.join(path, "variables"))
        raise tf.errors.ResourceExhaustedError(
            None, None, "%s/variables/variables.data-00000-of-00001; No space left on "
            "device" % path)

    monkeypatch.setattr(tf.saved_model, "save", full)
    out = str(tmp_path / "saved")
    code, err = _convert(capsys, model, out)
    assert code == 2, err
    assert ("%s: the SavedModel could not be written (ResourceExhaustedError: %s/variables"
            % (out, out)) in err
    assert ".tmp" not in err and os.listdir(tmp_path) == []


def test_the_loser_of_a_race_for_dir_exits_2_and_keeps_the_winner(model, tmp_path, capsys,
                                                                  monkeypatch):
    out = str(tmp_path / "saved")
    real = tf.saved_model.save

    def slow(module, path, signatures=None, options=None):
        real(module, path, signatures=signatures, options=options)
        os.mkdir(out)  # the other writer finishes first
        with open(os.path.join(out, "saved_model.pb"), "wb") as f:
            f.write(b"the winner")

    monkeypatch.setattr(tf.saved_model, "save", slow)
    code, err = _convert(capsys, model, out)
    assert code == 2 and "exists already" in err, err
    with open(os.path.join(out, "saved_model.pb"), "rb") as f:
        assert f.read() == b"the winner"
    assert os.listdir(tmp_path) == ["saved"]


def _dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)


def test_the_next_run_restores_dir_and_removes_temporaries_of_a_killed_convert(
        model, tmp_path, capsys):
    out = str(tmp_path / "saved")
    assert _convert(capsys, model, out)[0] == 0
    dead = _dead_pid()
    aside = str(tmp_path / (".saved.%d.abcdefgh.old" % dead))
    os.rename(out, aside)  # killed between the two renames of the old way
    os.mkdir(str(tmp_path / (".saved.%d.ijklmnop.tmp" % dead)))  # a half-written one
    code, err = _convert(capsys, model, out)
    assert code == 2 and "restored the previous content" in err and "exists already" in err
    assert os.listdir(tmp_path) == ["saved"]
    assert len(tf.saved_model.load(out).weights) == 0
    code, err = _convert(capsys, model, out, "--force")
    assert code == 0, err
    assert os.listdir(tmp_path) == ["saved"]
