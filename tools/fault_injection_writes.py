"""Output faults of tools/fault_injection.py: full (RLIMIT_FSIZE) and
read-only folders under patch, migrate and training, two concurrent patch
writers to one new output, and an output that exists already. Inputs, a
previous result and the last good checkpoint must survive, with no partial
file left."""

import os
import shutil

from fault_injection_common import (CLI, MIGRATE_ARGS, PATCH_ARGS, TRAIN, read_only,
                                    resumes, run, run_together, same_graph, snapshot)


def patch_concurrent(check, folder, shared):
    model, patched, _ = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    results = run_together(CLI + PATCH_ARGS, folder)
    codes = sorted(r.returncode for r in results)
    for r in results:
        check.result(r)
    check.exit, check.expected = "%d,%d" % tuple(codes), "0,2"
    if codes[0] != 0 or codes[1] == 0:
        check.wrong += 1
        check.note("exits %s: exactly one writer must succeed" % (codes,))
    if codes == [0, 0]:
        check.loss("both writers succeeded: one result silently replaced the other")
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    out = os.path.join(folder, "out.pb")
    if not os.path.exists(out) or not same_graph(out, patched):
        check.loss("out.pb is missing or not one complete result")
    check.no_leftovers(before, after, allowed={"out.pb"})


def patch_full(check, folder, shared):
    model, patched, _ = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    r = run(CLI + PATCH_ARGS, folder, fsize=len(patched) // 2)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


def patch_read_only(check, folder, shared):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    out_dir = os.path.join(folder, "out")
    os.mkdir(out_dir)
    before = snapshot(folder)
    with read_only(out_dir) as how:
        if how is None:
            check.note("skipped: no way to make a folder read-only here")
            return
        r = run(CLI + ["patch", "model.pb", "-o", "out/out.pb", "--map",
                       "Sign=ste_sign"], folder)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


def patch_existing_output(check, folder, shared):
    model, _, _ = shared.model()
    shutil.copy(model, folder)
    with open(os.path.join(folder, "out.pb"), "wb") as f:
        f.write(b"a previous result")
    before = snapshot(folder)
    r = run(CLI + PATCH_ARGS, folder)
    check.result(r, {2})
    check.unchanged(before, snapshot(folder), "previous output")


def migrate_full(check, folder, shared):
    source, migrated, _ = shared.legacy()
    with open(os.path.join(folder, "legacy.py"), "wb") as f:
        f.write(source)
    before = snapshot(folder)
    r = run(CLI + MIGRATE_ARGS, folder, fsize=len(migrated) // 2)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


def migrate_read_only(check, folder, shared):
    source, _, _ = shared.legacy()
    with open(os.path.join(folder, "legacy.py"), "wb") as f:
        f.write(source)
    before = snapshot(folder)
    with read_only(folder) as how:
        if how is None:
            check.note("skipped: no way to make a folder read-only here")
            return
        r = run(CLI + MIGRATE_ARGS, folder)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after)


def train_full(check, folder, shared, where):
    ckpt = shared.copy_checkpoint(os.path.join(folder, "ckpt"))
    before = snapshot(ckpt)
    args = ["--epochs", "2", "--checkpoint-dir", ckpt]
    if where == "log directory":
        args += ["--logdir", os.path.join(folder, "logs")]
    r = run(TRAIN + args, folder, fsize=4096)
    check.result(r, {2})
    after = snapshot(ckpt)
    check.unchanged(before, after, "checkpoint file")
    check.no_leftovers(before, after)
    resumes(check, folder, ckpt, 2, from_step=21)


def train_read_only(check, folder, shared, where):
    ckpt = shared.copy_checkpoint(os.path.join(folder, "ckpt"))
    logs = os.path.join(folder, "logs")
    os.mkdir(logs)
    before = snapshot(folder)
    with read_only(ckpt if where == "checkpoint directory" else logs) as how:
        if how is None:
            check.note("skipped: no way to make a folder read-only here")
            return
        r = run(TRAIN + ["--epochs", "2", "--checkpoint-dir", ckpt, "--logdir", logs],
                folder)
    check.result(r, {2})
    after = snapshot(folder)
    check.unchanged(before, after, "checkpoint file")
    check.no_leftovers(before, after)
    resumes(check, folder, ckpt, 2, from_step=21)
