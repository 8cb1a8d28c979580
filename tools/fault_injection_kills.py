"""kill -9 faults of tools/fault_injection.py: `graph-override patch`,
`graph-override migrate --write` and training with checkpoints killed at
several points; what is left must be the input, a complete result or a
temporary that the next run removes, and training must resume."""

import glob
import os
import shutil

from fault_injection_common import (CLI, MIGRATE_ARGS, PATCH_ARGS, TRAIN,
                                    after_seconds, file_appeared, resumes, run,
                                    same_graph, snapshot)


def patch_killed(check, folder, shared, when):
    model, patched, seconds = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    trigger = {"import": after_seconds(1.0), "late": after_seconds(0.9 * seconds),
               "temporary file": file_appeared(folder, ".out.pb*"),
               "output": file_appeared(folder, "out.pb")}[when]
    r = run(CLI + PATCH_ARGS, folder, kill_when=trigger)
    if not r.killed:
        check.note("finished before the kill")
        check.result(r, {0})
    else:
        check.result(r)
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    out = os.path.join(folder, "out.pb")
    if os.path.exists(out) and not same_graph(out, patched):
        check.loss("out.pb is not the complete result")
    after = check.recovered_after_kill(folder, before, CLI + PATCH_ARGS, allowed={"out.pb"})
    if os.path.exists(out) and not same_graph(out, patched):
        check.loss("out.pb is not the complete result after the next run")


def migrate_killed(check, folder, shared, when):
    source, migrated, seconds = shared.legacy()
    with open(os.path.join(folder, "legacy.py"), "wb") as f:
        f.write(source)
    before = snapshot(folder)
    trigger = {"start": after_seconds(0.2), "late": after_seconds(0.9 * seconds),
               "temporary file": file_appeared(folder, ".legacy.py*")}[when]
    r = run(CLI + MIGRATE_ARGS, folder, kill_when=trigger)
    if not r.killed:
        check.note("finished before the kill")
        check.result(r, {0, 1})
    else:
        check.result(r)
    with open(os.path.join(folder, "legacy.py"), "rb") as f:
        now = f.read()
    if now not in (source, migrated):
        check.loss("legacy.py is neither the original nor the migrated file")
    check.recovered_after_kill(folder, before, CLI + MIGRATE_ARGS, ok=(0, 1))
    with open(os.path.join(folder, "legacy.py"), "rb") as f:
        if f.read() not in (source, migrated):
            check.loss("legacy.py is neither the original nor the migrated file "
                       "after the next run")


def train_killed(check, folder, shared, when):
    del shared
    ckpt = os.path.join(folder, "ckpt")
    trigger = {"import": after_seconds(2.0),
               "after a checkpoint": lambda s, out: "checkpoint saved at step 10:" in out,
               "temporary file": lambda s, out: bool(
                   glob.glob(os.path.join(ckpt, "*temp*"))
                   or glob.glob(os.path.join(ckpt, "*.tmp*")))}[when]
    r = run(TRAIN + ["--epochs", "3", "--checkpoint-every", "5",
                     "--checkpoint-dir", ckpt], folder, kill_when=trigger)
    if not r.killed:
        check.note("finished before the kill")
        check.result(r, {0})
    else:
        check.result(r)
    resumes(check, folder, ckpt, 3)
