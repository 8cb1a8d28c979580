"""The command line on hostile inputs and unusual outputs: special files as
OUT, terminal escape sequences in graphs, ops TensorFlow does not know,
Consts that claim more than they hold."""

import os
import stat

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen
from graph_override.errors import GraphDefError


def _model(tmp_path):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.constant(np.array([[1.0, -2.0], [0.5, 0.0]], np.float32), name="w")
        tf.identity(tf.sign(tf.matmul(x, w), name="s"), name="y")
    path = tmp_path / "model.pb"
    frozen.save(g.as_graph_def(), path)
    return str(path)


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "is a named pipe (FIFO)"),
    (lambda p: os.symlink("/proc/self/fd/1", p), "is a symbolic link to /proc/self/fd/1"),
])
def test_patch_force_refuses_a_special_output(tmp_path, capsys, make, kind):
    model = _model(tmp_path)
    out = str(tmp_path / "out.pb")
    make(out)
    before = os.lstat(out)
    code, _, err = _main(capsys, "patch", model, "-o", out, "--map", "Sign=ste_sign",
                         "--force")
    assert code == 2 and "%s: %s" % (out, kind) in err and "Traceback" not in err
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(os.listdir(tmp_path)) == ["model.pb", "out.pb"]


def test_patch_force_never_replaces_dev_null(tmp_path, capsys):
    model = _model(tmp_path)
    code, _, err = _main(capsys, "patch", model, "-o", "/dev/null", "--map",
                         "Sign=ste_sign", "--force")
    assert code == 2 and "/dev/null: is a character device" in err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_library_save_refuses_a_fifo_even_with_overwrite(tmp_path):
    out = tmp_path / "out.pb"
    os.mkfifo(out)
    with pytest.raises(GraphDefError, match="is a named pipe"):
        frozen.save(frozen.load(_model(tmp_path)), out, overwrite=True)
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
