"""Untrusted outputs and graphs for tools/fault_injection.py: `graph-override convert`
killed, on a full folder and racing another convert; special files as OUT
(a named pipe, a symlink to /proc/self/fd/1, /dev/null) under --force; a
file system without hard links (the exclusive write, also killed at its
final step); hostile graphs (terminal escape sequences in names, a Const
that claims 4 TiB, an op TensorFlow does not know inside a loop body)."""

import os
import re
import shutil
import stat
import sys

from fault_injection_common import (CLI, MEMORY, PATCH_ARGS, after_seconds, file_appeared,
                                    run, run_together, same_graph, snapshot)

CONVERT_ARGS = ["convert", "model.pb", "-o", "saved", "--inputs", "x", "--outputs",
                "logits", "--map", "Sign=ste_sign", "--trainable", "kernel"]
# The CLI on a file system where os.link fails (EPERM), as on some FUSE and
# SMB mounts.
NO_LINKS = [sys.executable, "-c",
            "import errno, os, sys\n"
            "def link(src, dst):\n"
            "    raise OSError(errno.EPERM, 'Operation not permitted')\n"
            "os.link = link\n"
            "from graph_override.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n"]
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ESCAPES = "\x1b[2J\x1b]0;pwned\x07\r\u202e\x9b"


def _saved_model_ok(check, folder, what):
    path = os.path.join(folder, "saved", "saved_model.pb")
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        check.loss("saved/ is missing or holds no saved_model.pb %s" % what)


def _hidden(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".saved."))


def convert_killed(check, folder, shared, when, existing):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    args = CLI + CONVERT_ARGS + (["--force"] if existing else [])
    if existing:
        first = run(CLI + CONVERT_ARGS, folder)
        if first.returncode:
            check.note("the first convert failed: %s" % first.stderr.strip()[-160:])
            check.wrong += 1
            return
    before = snapshot(folder)
    trigger = {"temporary folder": file_appeared(folder, ".saved.*"),
               "late": after_seconds(8.0)}[when]
    r = run(args, folder, kill_when=trigger)
    check.result(r, None if r.killed else {0})
    if r.killed and existing and not os.path.isdir(os.path.join(folder, "saved")):
        check.note("the kill left no saved/ (the next run must restore it)")
    elif existing or not r.killed:
        _saved_model_ok(check, folder, "after the kill")
    rerun = run(args, folder)
    if rerun.returncode not in (0, 2):
        check.loss("the run after the kill failed (exit %s)" % rerun.returncode)
    _saved_model_ok(check, folder, "after the next run")
    if _hidden(folder):
        check.loss("hidden folders left after the next run: %s" % ", ".join(_hidden(folder)))
    after = snapshot(folder)
    if after.get("model.pb") != before.get("model.pb"):
        check.loss("input model.pb was changed")


def convert_full(check, folder, shared):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    r = run(CLI + CONVERT_ARGS, folder, fsize=4096)
    check.result(r, {2})
    if os.path.exists(os.path.join(folder, "saved")) or _hidden(folder):
        check.loss("left: %s" % sorted(set(os.listdir(folder)) - {"model.pb"}))
    if ".tmp" in r.stderr:
        check.note("the message names the hidden temporary folder")
        check.wrong += 1


def convert_concurrent(check, folder, shared):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    results = run_together(CLI + CONVERT_ARGS, folder)
    for r in results:
        check.result(r)
    codes = sorted(r.returncode for r in results)
    check.exit, check.expected = "%d,%d" % tuple(codes), "0,2"
    if codes != [0, 2]:
        check.wrong += 1
        check.note("exits %s: one writer must succeed, the other exit 2" % (codes,))
    _saved_model_ok(check, folder, "")
    if _hidden(folder):
        check.loss("hidden folders left: %s" % ", ".join(_hidden(folder)))


def _special(folder, kind):
    if kind == "/dev/null":
        return "/dev/null"
    path = os.path.join(folder, "out.pb")
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/proc/self/fd/1", path)
    return path


def patch_special_output(check, folder, shared, kind):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    out = _special(folder, kind)
    before = os.lstat(out)
    r = run(CLI + ["patch", "model.pb", "-o", out, "--map", "Sign=ste_sign", "--force"],
            folder, timeout=60)
    check.result(r, {2})
    after = os.lstat(out)
    if (after.st_mode, after.st_ino, after.st_rdev) != (before.st_mode, before.st_ino,
                                                         before.st_rdev):
        check.loss("%s was replaced by a %s" % (out, "regular file" if stat.S_ISREG(
            after.st_mode) else "different file"))
    if out not in r.stderr:
        check.note("the message does not name %s" % out)


def patch_no_links(check, folder, shared, when):
    model, patched, seconds = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    out = os.path.join(folder, "out.pb")
    trigger = {None: None, "output": file_appeared(folder, "out.pb"),
               "late": after_seconds(0.9 * seconds)}[when]
    r = run(NO_LINKS + PATCH_ARGS, folder, kill_when=trigger)
    check.result(r, None if r.killed else {0})
    if os.path.exists(out) and not same_graph(out, patched):
        check.loss("out.pb is not the complete result (%d bytes)" % os.path.getsize(out))
    rerun = run(NO_LINKS + PATCH_ARGS, folder)
    if os.path.exists(out) and rerun.returncode == 2 and r.killed:
        check.note("the next run refused the existing out.pb")
    if not os.path.exists(out) or not same_graph(out, patched):
        check.loss("no complete out.pb after the next run")
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after, allowed={"out.pb"})


def _hostile_graph(folder, kind):
    from graph_override.cli import import_tensorflow_quietly  # pylint: disable=import-outside-toplevel
    import_tensorflow_quietly()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel
    g = graph_pb2.GraphDef()
    if kind == "unknown op in a loop body":
        @tf.function
        def f(x):
            return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.sign(v) * 2.0),
                                 [tf.constant(0), x])[1]
        g = f.get_concrete_function(tf.TensorSpec([2], tf.float32)).graph.as_graph_def()
        for function in g.library.function:
            for node in function.node_def:
                if node.op == "Mul":
                    node.op = "NoSuchOp"
    else:
        x = g.node.add(name="x", op="Placeholder")
        x.attr["dtype"].type = 1
        x.attr["shape"].shape.dim.add(size=1)
        c = g.node.add(name="w", op="Const")
        c.attr["dtype"].type = c.attr["value"].tensor.dtype = 1
        if kind == "const of 4 TiB":
            c.attr["value"].tensor.tensor_shape.dim.add(size=2 ** 40)
        c.attr["value"].tensor.float_val.append(1.0)
        s = g.node.add(name="s", op="Sign", input=["x"])
        s.attr["T"].type = 1
        if kind == "escape sequences":
            s.attr["_gradient_op_type"].s = ("grad" + _ESCAPES).encode()
        g.node.add(name="y", op="Mul", input=["s", "w"]).attr["T"].type = 1
    path = os.path.join(folder, "hostile.pb")
    with open(path, "wb") as f:
        f.write(g.SerializeToString())
    return "hostile.pb"


def command_hostile(check, folder, shared, command, kind, expected):
    del shared
    model = _hostile_graph(folder, kind)
    argv = {"inspect": CLI + ["inspect", model],
            "patch": CLI + ["patch", model, "-o", "out.pb", "--map", "Sign=ste_sign"],
            "convert": CLI + ["convert", model, "-o", "saved", "--inputs", "x",
                              "--outputs", "y", "--trainable", "w"]}[command]
    before = snapshot(folder)
    r = run(argv, folder, timeout=120, memory=MEMORY)
    check.result(r, expected)
    if _RAW_CONTROL.search(r.stdout + r.stderr):
        check.wrong += 1
        check.note("printed raw control characters from the graph")
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    if r.returncode != 0:
        check.no_leftovers(before, after)
