"""Input faults of tools/fault_injection.py: unreadable inputs (/dev/zero,
a directory, an empty file, a binary module) to every command, and damaged
checkpoints (.index or .data truncated, emptied, deleted). Each must exit
with a clear message and change nothing."""

import os

from fault_injection_common import CLI, MEMORY, TRAIN, damage, run, snapshot


def _unreadable(folder, kind):
    if kind == "/dev/zero":
        return "/dev/zero"
    path = os.path.join(folder, {"directory": "input.pb", "empty file": "input.pb",
                                 "empty module": "empty.py",
                                 "binary module": "binary.py"}[kind])
    if kind == "directory":
        os.mkdir(path)
    else:
        with open(path, "wb") as f:
            f.write(b"\xff\xfe\x00\x00garbage" if kind == "binary module" else b"")
    return os.path.basename(path)


def command_unreadable(check, folder, shared, command, kind, expected):
    del shared
    path = _unreadable(folder, kind)
    before = snapshot(folder)
    argv = {"inspect": CLI + ["inspect", path],
            "patch": CLI + ["patch", path, "-o", "out.pb", "--map", "Sign=ste_sign"],
            "migrate": CLI + ["migrate", path, "--write"],
            "train": TRAIN + ["--epochs", "1", "--cluster", path]}[command]
    r = run(argv, folder, timeout=60, memory=MEMORY)
    check.result(r, expected)
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


def train_damaged(check, folder, shared, part, how):
    ckpt = shared.copy_checkpoint(os.path.join(folder, "ckpt"))
    damage(os.path.join(ckpt, "bnn-21" + part), how)
    before = snapshot(ckpt)
    r = run(TRAIN + ["--epochs", "2", "--checkpoint-dir", ckpt], folder)
    check.result(r, {2})
    if r.returncode == 2 and "bnn-21" + part.split("-")[0] not in r.stderr:
        check.note("the message does not name the damaged file")
    after = snapshot(ckpt)
    check.unchanged(before, after, "checkpoint file")
    check.no_leftovers(before, after)
