"""`graph-override explain` on hostile or impossible input: ops that reach
outside the model refused unless --allow-op names them, a function that
calls itself, damaged Consts, a .npy that claims terabytes, runs that cannot
fit in memory, a --map function that raises; each is one line on stderr
with the documented exit status (2 bad usage or unreadable input, 1 cannot
run), and nothing is written. A run killed while renaming its pair is
finished by the next run."""

import os

import numpy as np
import pytest
import tensorflow as tf

from untrusted_graphs import damaged_model, recursive_graph, refuse_imports
from graph_override import cli, frozen
from graph_override._files import atomic, atomic_group

W = np.array([[1.0, -2.0], [0.5, 1.0]], np.float32)
X = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)


def _save(graph, path):
    frozen.save(graph.as_graph_def() if hasattr(graph, "as_graph_def") else graph, str(path))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        tf.identity(tf.matmul(x, W), name="logits")
    _save(g, tmp_path / "model.pb")
    np.save(tmp_path / "x.npy", X)
    return tmp_path


def _explain(capsys, *extra, model="model.pb", method="saliency", data="x.npy"):
    code = cli.main(["explain", model, "--inputs", "x:0", "--outputs", "logits:0",
                     "--method", method, "--data", data, "-o", "maps.npy"] + list(extra))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err):
    assert "Traceback" not in err, err
    assert err.startswith("graph-override explain: error: ") and err.count("\n") == 1, err
    return err


def _written(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("maps") or n.startswith("."))


def test_a_file_op_on_the_path_is_refused_unless_allowed(folder, capsys):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        write = tf.io.write_file(str(folder / "written.txt"), "pwned", name="write")
        read = tf.io.read_file(str(folder / "x.npy"), name="read")
        with tf.control_dependencies([write, read]):
            tf.identity(tf.matmul(x, W), name="logits")
    _save(g, folder / "files.pb")
    code, _, err = _explain(capsys, model="files.pb")
    assert code == 2
    _one_line(err)
    for text in ("node 'write' (WriteFile), which writes files", "node 'read' (ReadFile)",
                 "--allow-op ReadFile --allow-op WriteFile", "nothing was run"):
        assert text in err, (text, err)
    assert not (folder / "written.txt").exists() and _written(folder) == []
    code, _, err = _explain(capsys, "--allow-op", "WriteFile", model="files.pb")
    assert code == 2 and "--allow-op ReadFile)" in err and "WriteFile)" not in err, err
    code, out, err = _explain(capsys, "--allow-op", "WriteFile", "--allow-op", "ReadFile",
                              "--target", "0", model="files.pb")
    assert code == 0, err
    assert (folder / "written.txt").read_text() == "pwned"
    np.testing.assert_allclose(np.load(folder / "maps.npy"), np.abs(np.tile(W[:, 0], (2, 1))))


def test_inspect_method_lists_what_explain_refuses(folder, capsys):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        read = tf.io.read_file(str(folder / "x.npy"), name="read")
        with tf.control_dependencies([read]):
            tf.identity(tf.matmul(x, W), name="logits")
    _save(g, folder / "files.pb")
    argv = ["inspect", "files.pb", "--method", "saliency", "--inputs", "x:0",
            "--outputs", "logits:0"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "every op type on the path is covered" in out
    assert "which `explain` refuses to run (if you trust this graph: --allow-op ReadFile)" in out
    assert "read  ReadFile  reads files" in out
    assert cli.main(argv + ["--allow-op", "ReadFile"]) == 0
    assert "refuses" not in capsys.readouterr().out


def test_a_function_that_calls_itself_is_one_line(folder, capsys, monkeypatch):
    refuse_imports(monkeypatch)  # without the refusal, the import would crash the process
    (folder / "recursive.pb").write_bytes(recursive_graph(("F", "G"), "call").SerializeToString())
    code = cli.main(["explain", "recursive.pb", "--inputs", "x:0", "--outputs", "y:0",
                     "--method", "saliency", "--data", "x.npy", "-o", "maps.npy"])
    assert code == 1
    assert "library function 'F' calls itself ('F' -> 'G' -> 'F')" in _one_line(
        capsys.readouterr().err)
    assert _written(folder) == []


@pytest.mark.parametrize("how", ["fill", "short", "negative", "dtype", "strings",
                                 "colocation"])
def test_a_damaged_graph_is_one_line_and_exit_2(folder, capsys, monkeypatch, how):
    _save(damaged_model(how), folder / "damaged.pb")
    refuse_imports(monkeypatch)  # a DT_STRING value in a float Const aborts TensorFlow
    code, _, err = _explain(capsys, model="damaged.pb")
    assert code == 2, err
    assert "damaged.pb: " in _one_line(err)
    assert _written(folder) == []


def test_convert_refuses_a_colocation_with_a_missing_node_in_one_line(folder, capsys):
    _save(damaged_model("colocation"), folder / "damaged.pb")
    code = cli.main(["convert", "damaged.pb", "-o", "saved", "--inputs", "x", "--outputs",
                     "logits"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "node 'w' is to be colocated with node 'missing'" in err
    assert not (folder / "saved").exists()


def test_a_npy_that_claims_terabytes_is_refused_before_loading(folder, capsys):
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1), }"
    header += b" " * (112 - 10 - len(header) - 1) + b"\n"
    data = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
    assert len(data) == 112
    (folder / "huge.npy").write_bytes(data)
    code, _, err = _explain(capsys, data="huge.npy")
    assert code == 2
    assert ("--data huge.npy: its header claims float32 values of shape (1099511627776, 1) "
            "(4,398,046,511,104 bytes), but the file holds 0 bytes" in _one_line(err))
    assert _written(folder) == []


def test_steps_that_cannot_fit_in_memory_are_one_line(folder, capsys):
    code, _, err = _explain(capsys, "--steps", str(10 ** 15), method="integrated_gradients")
    assert code == 1
    assert "out of memory computing the maps" in _one_line(err) and "--steps" in err
    assert _written(folder) == []


@pytest.mark.skipif(open("/proc/sys/vm/overcommit_memory").read().strip() == "1"
                    if os.path.exists("/proc/sys/vm/overcommit_memory") else False,
                    reason="with overcommit always on, the allocation would succeed "
                           "and the kernel kill the process instead")
def test_a_batch_that_cannot_fit_is_one_line(folder, capsys):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        huge = tf.tile(x, [1, 2 ** 44], name="huge")  # 2**48 floats per batch of 2
        tf.identity(tf.reduce_sum(huge, axis=1, keepdims=True) * W[:1], name="logits")
    _save(g, folder / "huge.pb")
    code, _, err = _explain(capsys, model="huge.pb")
    assert code == 1, err
    assert "huge.pb: TensorFlow cannot run the model: ResourceExhaustedError: OOM" \
        in _one_line(err)
    assert "use a smaller --batch-size" in err and _written(folder) == []


@pytest.mark.parametrize("exception", ["TypeError", "ValueError", "RuntimeError", "KeyError"])
def test_a_map_function_that_raises_is_one_line_naming_it(folder, capsys, exception):
    module = "raising_grads_%s" % exception.lower()  # a module, and name, per case
    (folder / (module + ".py")).write_text(
        "def bad(op, grad):\n    raise %s('my gradient is broken')\n" % exception)
    code, _, err = _explain(capsys, "--map", "MatMul=%s:bad" % module)
    assert code == 1
    _one_line(err)
    assert ("gradient function %s:bad raised %s: " % (module, exception)) in err, err
    assert "my gradient is broken" in err and "%s.py:2" % module in err
    assert "for node 'MatMul' (MatMul)" in err and "Fallback" not in err
    assert _written(folder) == []


def test_the_next_run_finishes_a_pair_a_killed_run_left(folder, capsys, monkeypatch):
    """The state a kill between the two renames leaves (test_atomic_group.py
    makes it with a real SIGKILL): new maps, the old picture, the journal."""
    (folder / "maps.npy").write_bytes(b"old maps")
    (folder / "maps.png").write_bytes(b"old png")
    monkeypatch.setattr(os, "getpid", lambda: 2 ** 31 - 2)  # a pid no process has
    real_move = atomic.move_into_place

    def killed(tmp, path, **kwargs):
        if path.endswith("maps.png"):
            raise SystemExit("killed")  # stands for SIGKILL: nothing is undone below
        real_move(tmp, path, **kwargs)

    monkeypatch.setattr(atomic, "move_into_place", killed)
    monkeypatch.setattr(atomic_group, "_undo", lambda done, error: None)
    monkeypatch.setattr(atomic_group, "_unlink", lambda path: None)
    with pytest.raises(SystemExit):
        atomic_group.write_all([(str(folder / "maps.npy"), b"new maps"),
                                 (str(folder / "maps.png"), b"new png")], replace=True)
    monkeypatch.undo()
    monkeypatch.chdir(folder)
    assert (folder / "maps.npy").read_bytes() == b"new maps"
    assert (folder / "maps.png").read_bytes() == b"old png"
    code, _, err = _explain(capsys, "--png", "maps.png")  # no --force: refused, but first...
    assert code == 2 and "-o maps.npy: exists already" in err
    assert "finished writing" in err and "maps.npy and" in err
    assert (folder / "maps.png").read_bytes() == b"new png"  # ... the pair is whole again
    assert [n for n in os.listdir(folder) if n.startswith(".")] == []
