"""The command line on hostile inputs and unusual outputs: special files as
OUT, terminal escape sequences in graphs, ops TensorFlow does not know,
Consts that claim more than they hold."""

import json
import os
import re
import stat

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from graph_override import cli, frozen
from graph_override.errors import GraphDefError
from graph_override.frozen.inspection.report import table


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


# ---------------------------------------------------------------- escape sequences

ESCAPES = "\x1b[2J\x1b]0;pwned\x07\r\u202e\x9b\x7f"
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ESCAPED = r"\x1b[2J\x1b]0;pwned\x07\r\u202e\x9b\x7f"


def _hostile(tmp_path):
    """A graph with the escapes in a gradient name, and one with them in a
    library function's name and its node's name."""
    def base():
        g = graph_pb2.GraphDef()
        n = g.node.add(name="x", op="Placeholder")
        n.attr["dtype"].type = 1
        return g

    g = base()
    n = g.node.add(name="s", op="Sign", input=["x"])
    n.attr["T"].type = 1
    n.attr[frozen.GRADIENT_ATTR].s = ("grad" + ESCAPES).encode()
    gradient = tmp_path / "gradient.pb"
    gradient.write_bytes(g.SerializeToString())
    g = base()
    f = g.library.function.add()
    f.signature.name = "fn" + ESCAPES
    f.signature.input_arg.add(name="a", type=1)
    f.signature.output_arg.add(name="o", type=1)
    n = f.node_def.add(name="inner" + ESCAPES, op="Sign", input=["a"])
    n.attr["T"].type = 1
    f.ret["o"] = "inner%s:y:0" % ESCAPES
    n = g.node.add(name="call", op="PartitionedCall", input=["x"])
    n.attr["Tin"].list.type.append(1)
    n.attr["Tout"].list.type.append(1)
    n.attr["f"].func.name = "fn" + ESCAPES
    library = tmp_path / "library.pb"
    library.write_bytes(g.SerializeToString())
    return str(gradient), str(library)


@pytest.mark.parametrize("command", [["inspect"], ["patch", "--map", "Sign=ste_sign",
                                                   "--force"]])
def test_names_from_a_graph_are_printed_escaped(tmp_path, capsys, command):
    for model in _hostile(tmp_path):
        argv = command[:1] + [model] + command[1:]
        if command[0] == "patch":
            argv += ["-o", str(tmp_path / "out.pb")]
        code, out, err = _main(capsys, *argv)
        assert code in (0, 1), err
        assert not UNSAFE.search(out + err), repr(out + err)
        assert ESCAPED in out + err


def test_json_escapes_them_itself(tmp_path, capsys):
    gradient, library = _hostile(tmp_path)
    for model, key in ((gradient, "gradient_names"), (library, "zero_gradients")):
        code, out, _ = _main(capsys, "inspect", model, "--json")
        assert code == 1 and not UNSAFE.search(out)
        entry = json.loads(out)[key][0]
        assert ESCAPES in (entry.get("name") or entry["node"])  # read back exactly


def test_a_report_table_keeps_one_line_per_row():
    lines = table([("node", "op"), ("a\nb\x1b[2J", "Sign")])
    assert lines[2] == "  a\\nb\\x1b[2J  Sign" and len(lines) == 3
