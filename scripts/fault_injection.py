#!/usr/bin/env python
"""Inject faults into the CLI and the training scripts and count what goes wrong.

Every case runs the real `graph-override` command or scripts/train_bnn.py in a
subprocess, in a fresh temporary folder, and then checks three things:

  losses       an input changed, a previous good output or checkpoint lost,
               or a partial file left (after kill -9: a temporary file that
               the next run of the same command does not remove)
  tracebacks   a Python traceback printed instead of a clear message
  exit codes   by the contract: 0 success, 1 a finding, 2 bad usage or
               unreadable input (a hang counts as a wrong exit code)

The faults: kill -9 at several points of `graph-override patch`, of
`graph-override migrate --write` and of training with checkpoints (then
resuming must work); two concurrent `patch` writers to one new output; full
(RLIMIT_FSIZE, SIGXFSZ ignored) and read-only output folders; damaged
checkpoints (.index or .data truncated, empty, deleted); unreadable inputs
(/dev/zero, a directory, an empty file).

    python scripts/fault_injection.py            # every case, a few minutes
    python scripts/fault_injection.py --quick    # a subset
    python scripts/fault_injection.py -k train-damaged --list

Prints a table and `faults: N cases, L losses, T tracebacks, W wrong exit
codes`; exits 1 if any of L, T, W is above 0.
"""

import argparse
import collections
import contextlib
import glob
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = [sys.executable, "-m", "graph_override"]
TRAIN = [sys.executable, os.path.join(ROOT, "scripts", "train_bnn.py"),
         "--hidden", "16", "--no-progress"]
TRACEBACK = "Traceback (most recent call last)"

Outcome = collections.namedtuple("Outcome", ["case", "exit", "expected", "losses",
                                             "tracebacks", "wrong_exits", "notes"])
Run = collections.namedtuple("Run", ["returncode", "stdout", "stderr", "killed",
                                     "timed_out"])


class Case(collections.namedtuple("Case", ["name", "quick", "function", "args"])):
    """A fault: `function(check, folder, shared, *args)` runs it."""


# ---------------------------------------------------------------- processes

def environment():
    """The environment of every subprocess: this checkout first on the path."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _limits(fsize, memory):
    def apply():
        if memory is not None:
            # A reader of /dev/zero must not take the machine's memory.
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if fsize is not None:
            # Writes past `fsize` bytes fail with EFBIG, as on a full disk.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return apply


def run(argv, cwd, *, fsize=None, memory=None, timeout=180.0, kill_when=None,
        poll=0.002):
    """Runs `argv` in `cwd`; returns a `Run`.

    Args:
      fsize: largest file the process may write (RLIMIT_FSIZE), or None.
      memory: largest address space of the process (RLIMIT_AS), or None.
      timeout: seconds before the process counts as hung and is killed.
      kill_when: ``kill_when(seconds, stdout_so_far) -> bool``, polled every
        `poll` seconds; True sends SIGKILL.
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=environment(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limits(fsize, memory))
    out, err = [], []
    readers = [threading.Thread(target=lambda s=s, b=b: b.extend(s), daemon=True)
               for s, b in ((proc.stdout, out), (proc.stderr, err))]
    for r in readers:
        r.start()
    began, killed, timed_out = time.monotonic(), False, False
    while proc.poll() is None:
        elapsed = time.monotonic() - began
        if kill_when is not None and kill_when(elapsed, "".join(out)):
            proc.kill()
            killed = True
            break
        if elapsed > timeout:
            proc.kill()
            timed_out = True
            break
        time.sleep(poll)
    proc.wait()
    for r in readers:
        r.join(timeout=10)
    return Run(proc.returncode, "".join(out), "".join(err), killed, timed_out)


def has_traceback(result):
    """True when the run printed a Python traceback."""
    return TRACEBACK in result.stdout or TRACEBACK in result.stderr


# ---------------------------------------------------------------- files

def digest(path):
    """sha256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def same_graph(path, reference):
    """True when the GraphDef file `path` holds the GraphDef of the bytes
    `reference` (protobuf maps serialize in no fixed order, so bytes may
    differ between two equal results)."""
    from graph_override.cli import import_tensorflow_quietly  # pylint: disable=import-outside-toplevel
    import_tensorflow_quietly()
    from tensorflow.core.framework import graph_pb2  # pylint: disable=import-outside-toplevel
    with open(path, "rb") as f:
        data = f.read()
    try:
        return graph_pb2.GraphDef.FromString(data) == graph_pb2.GraphDef.FromString(
            reference)
    except Exception:  # pylint: disable=broad-except
        return False


def snapshot(folder):
    """{relative path: sha256} of every file under `folder`, hidden ones too."""
    found = {}
    for base, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = os.path.join(base, name)
            found[os.path.relpath(path, folder)] = digest(path)
    return found


@contextlib.contextmanager
def read_only(folder):
    """Makes `folder` unwritable, also for root; yields how, or None.

    A user's folder gets mode 0555. Root ignores permission bits, so for
    root the folder gets the immutable attribute (chattr +i), which stops
    every process from adding or removing entries. The folder is restored
    afterwards. None: no method worked here (the caller skips).
    """
    method = None
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        method = "chmod 0555"
    elif shutil.which("chattr") and subprocess.run(
            ["chattr", "+i", folder], capture_output=True, check=False).returncode == 0:
        method = "chattr +i"
    try:
        if method is not None:
            try:  # does it hold?
                fd, probe = tempfile.mkstemp(dir=folder)
                os.close(fd)
                os.unlink(probe)
                method = None
            except OSError:
                pass
        yield method
    finally:
        if method == "chmod 0555" or os.geteuid() != 0:
            os.chmod(folder, 0o755)
        elif shutil.which("chattr"):
            subprocess.run(["chattr", "-i", folder], capture_output=True, check=False)


def damage(path, how):
    """Truncates a file to half, empties it, or deletes it."""
    if how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif how == "empty":
        open(path, "wb").close()
    elif how == "deleted":
        os.unlink(path)
    else:
        raise ValueError("damage(how=%r): use truncated, empty or deleted" % (how,))


# ---------------------------------------------------------------- checks

class Check:
    """Collects what went wrong in one case."""

    def __init__(self, name):
        self.name, self.losses, self.tracebacks, self.wrong = name, 0, 0, 0
        self.notes, self.exit, self.expected = [], None, None

    def loss(self, note):
        self.losses += 1
        self.notes.append(note)

    def note(self, note):
        self.notes.append(note)

    def result(self, result, expected=None):
        """Counts a traceback and a wrong exit status (`expected`: a set)."""
        self.exit = ("killed" if result.killed else "hung" if result.timed_out
                     else result.returncode)
        if has_traceback(result):
            self.tracebacks += 1
            tail = [l for l in result.stderr.strip().splitlines() if l.strip()]
            self.notes.append("traceback: %s" % (tail[-1][:160] if tail else "?"))
        if expected is not None:
            self.expected = "/".join(str(e) for e in sorted(expected))
            if result.timed_out or result.returncode not in expected:
                self.wrong += 1
                self.notes.append("exit %s, expected %s" % (self.exit, self.expected))

    def unchanged(self, before, after, what):
        """A loss for every file of `before` that `after` lost or changed."""
        for path, h in sorted(before.items()):
            if path not in after:
                self.loss("%s %s was deleted" % (what, path))
            elif after[path] != h:
                self.loss("%s %s was changed" % (what, path))

    def no_leftovers(self, before, after, allowed=()):
        """A loss for every file that appeared and is not `allowed`."""
        for path in sorted(set(after) - set(before) - set(allowed)):
            self.loss("partial file left: %s" % path)

    def recovered_after_kill(self, folder, before, argv, allowed=(), ok=(0,)):
        """Checks what a kill -9 left. Nothing runs after SIGKILL, so a
        writer's hidden temporary file (``.NAME.PID.*.tmp``) may stay; that
        is no loss if the next run of the same command completes and removes
        it. Anything else left, or a temporary the next run keeps, is a loss.
        Returns the folder's snapshot after all that."""
        after = snapshot(folder)
        left = sorted(set(after) - set(before) - set(allowed))
        temporaries = [p for p in left if os.path.basename(p).startswith(".")
                       and p.endswith(".tmp")]
        if left and temporaries == left:
            rerun = run(argv, folder)
            if rerun.returncode not in ok:
                self.loss("the run after the kill failed (exit %s)" % rerun.returncode)
            after = snapshot(folder)
            gone = [p for p in temporaries if p not in after]
            if gone:
                self.note("kill left %s; the next run removed it" % ", ".join(gone))
        self.no_leftovers(before, after, allowed=allowed)
        return after

    def outcome(self):
        return Outcome(self.name, self.exit, self.expected, self.losses,
                       self.tracebacks, self.wrong, self.notes)


# ---------------------------------------------------------------- shared inputs

class Shared:
    """Inputs built once per run: a frozen model and its patched result, a
    legacy file and its migration, a good training checkpoint."""

    def __init__(self, folder):
        self.folder = folder
        self._cache = {}

    def _once(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def model(self):
        """(model.pb path, the patched bytes, seconds of a normal patch run)."""
        def build():
            d = os.path.join(self.folder, "model")
            os.makedirs(d)
            r = run([sys.executable, os.path.join(ROOT, "scripts", "make_frozen_example.py"),
                     "model.pb"], d)
            if r.returncode:
                raise RuntimeError("make_frozen_example.py failed:\n" + r.stderr)
            began = time.monotonic()
            r = run(CLI + PATCH_ARGS, d)
            if r.returncode:
                raise RuntimeError("graph-override patch failed:\n" + r.stderr)
            seconds = time.monotonic() - began
            with open(os.path.join(d, "out.pb"), "rb") as f:
                patched = f.read()
            os.unlink(os.path.join(d, "out.pb"))
            return os.path.join(d, "model.pb"), patched, seconds
        return self._once("model", build)

    def legacy(self):
        """(legacy source bytes, migrated bytes, seconds of a normal run)."""
        def build():
            d = os.path.join(self.folder, "legacy")
            os.makedirs(d)
            with open(os.path.join(ROOT, "tests", "migration_cases", "sign_ste.py"),
                      "rb") as f:
                source = f.read()
            with open(os.path.join(d, "legacy.py"), "wb") as f:
                f.write(source)
            began = time.monotonic()
            r = run(CLI + ["migrate", "legacy.py", "--write", "-q"], d)
            if r.returncode not in (0, 1):
                raise RuntimeError("graph-override migrate failed:\n" + r.stderr)
            seconds = time.monotonic() - began
            with open(os.path.join(d, "legacy.py"), "rb") as f:
                return source, f.read(), seconds
        return self._once("legacy", build)

    def checkpoint(self):
        """A folder holding checkpoint bnn-21 of one epoch."""
        def build():
            d = os.path.join(self.folder, "ckpt")
            r = run(TRAIN + ["--epochs", "1", "--checkpoint-dir", d], self.folder)
            if r.returncode:
                raise RuntimeError("train_bnn.py failed:\n" + r.stderr)
            return d
        return self._once("ckpt", build)

    def copy_checkpoint(self, target):
        """A copy of the good checkpoint whose state file names it relatively
        (TensorFlow writes absolute paths, which would point at the original)."""
        shutil.copytree(self.checkpoint(), target)
        with open(os.path.join(target, "checkpoint"), "w", encoding="utf-8") as f:
            f.write('model_checkpoint_path: "bnn-21"\n'
                    'all_model_checkpoint_paths: "bnn-21"\n')
        return target


PATCH_ARGS = ["patch", "model.pb", "-o", "out.pb", "--map", "Sign=ste_sign"]
MEMORY = 16 << 30  # address space of a run on an unreadable input


# ---------------------------------------------------------------- patch cases

def _appeared(folder, pattern):
    return lambda seconds, out: bool(glob.glob(os.path.join(folder, pattern)))


def _after(limit):
    return lambda seconds, out: seconds >= limit


def patch_killed(check, folder, shared, when):
    model, patched, seconds = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    trigger = {"import": _after(1.0), "late": _after(0.9 * seconds),
               "temporary file": _appeared(folder, ".out.pb*"),
               "output": _appeared(folder, "out.pb")}[when]
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


def patch_concurrent(check, folder, shared):
    model, patched, _ = shared.model()
    shutil.copy(model, folder)
    before = snapshot(folder)
    results = [None, None]
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, run(CLI + PATCH_ARGS, folder))) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
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


# ---------------------------------------------------------------- migrate cases

MIGRATE_ARGS = ["migrate", "legacy.py", "--write", "-q"]


def migrate_killed(check, folder, shared, when):
    source, migrated, seconds = shared.legacy()
    with open(os.path.join(folder, "legacy.py"), "wb") as f:
        f.write(source)
    before = snapshot(folder)
    trigger = {"start": _after(0.2), "late": _after(0.9 * seconds),
               "temporary file": _appeared(folder, ".legacy.py*")}[when]
    r = run(CLI + MIGRATE_ARGS, folder, kill_when=trigger)
    if not r.killed:
        check.note("finished before the kill")
        check.result(r, {0, 1})
    else:
        check.result(r)
    after = snapshot(folder)
    with open(os.path.join(folder, "legacy.py"), "rb") as f:
        now = f.read()
    if now not in (source, migrated):
        check.loss("legacy.py is neither the original nor the migrated file")
    check.recovered_after_kill(folder, before, CLI + MIGRATE_ARGS, ok=(0, 1))
    with open(os.path.join(folder, "legacy.py"), "rb") as f:
        if f.read() not in (source, migrated):
            check.loss("legacy.py is neither the original nor the migrated file "
                       "after the next run")


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


# ---------------------------------------------------------------- training cases

def _resumes(check, folder, ckpt, epochs, from_step=None):
    """Reruns to the end: must exit 0 and resume from `from_step` if given."""
    r = run(TRAIN + ["--epochs", str(epochs), "--checkpoint-dir", ckpt], folder)
    if r.returncode != 0 or has_traceback(r):
        check.loss("the rerun did not resume (exit %s): %s" % (
            r.returncode, (r.stderr.strip().splitlines() or ["?"])[-1][:160]))
    elif from_step is not None and "at step %d\n" % from_step not in r.stdout:
        check.loss("the rerun did not resume from step %d" % from_step)


def train_killed(check, folder, shared, when):
    del shared
    ckpt = os.path.join(folder, "ckpt")
    trigger = {"import": _after(2.0),
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
    _resumes(check, folder, ckpt, 3)


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
    _resumes(check, folder, ckpt, 2, from_step=21)


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
    _resumes(check, folder, ckpt, 2, from_step=21)


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


# ---------------------------------------------------------------- the cases

def cases():
    """Every case, in the order of the report."""
    found = []

    def add(name, quick, function, *args):
        found.append(Case(name, quick, function, args))

    for when in ("import", "temporary file", "output", "late"):
        add("patch-kill9-%s" % when.replace(" ", "-"), when == "late",
            patch_killed, when)
    add("patch-concurrent-writers", False, patch_concurrent)
    add("patch-full-folder", True, patch_full)
    add("patch-read-only-folder", False, patch_read_only)
    add("patch-existing-output", False, patch_existing_output)
    for when in ("start", "temporary file", "late"):
        add("migrate-kill9-%s" % when.replace(" ", "-"), when == "late",
            migrate_killed, when)
    add("migrate-full-folder", True, migrate_full)
    add("migrate-read-only-folder", True, migrate_read_only)
    for when in ("import", "after a checkpoint", "temporary file"):
        add("train-kill9-%s" % when.replace(" ", "-"), when == "after a checkpoint",
            train_killed, when)
    for where in ("checkpoint directory", "log directory"):
        add("train-full-%s" % where.split()[0], where == "checkpoint directory",
            train_full, where)
        add("train-read-only-%s" % where.split()[0], where == "log directory",
            train_read_only, where)
    for part in (".index", ".data-00000-of-00001"):
        for how in ("truncated", "empty", "deleted"):
            add("train-damaged-%s-%s" % (part.split("-")[0].strip("."), how),
                (part, how) == (".data-00000-of-00001", "truncated"),
                train_damaged, part, how)
    for command, kinds in (("inspect", ("/dev/zero", "directory", "empty file")),
                           ("patch", ("/dev/zero", "directory", "empty file")),
                           ("migrate", ("/dev/zero", "binary module")),
                           ("train", ("/dev/zero", "directory", "empty file"))):
        for kind in kinds:
            add("%s-input-%s" % (command, kind.strip("/").replace("/", "-")
                                 .replace(" ", "-")),
                (command, kind) == ("train", "directory"),
                command_unreadable, command, kind, {2})
    add("migrate-input-empty-module", False, command_unreadable, "migrate",
        "empty module", {0})
    return found


def run_case(case, workdir, shared):
    """Runs one case in its own folder under `workdir`; returns an Outcome."""
    check = Check(case.name)
    folder = tempfile.mkdtemp(prefix=case.name + "-", dir=workdir)
    try:
        case.function(check, folder, shared, *case.args)
    except Exception as e:  # pylint: disable=broad-except
        check.note("the case itself failed: %s: %s" % (type(e).__name__, e))
        check.wrong += 1
    return check.outcome()


def run_cases(selected, workdir=None, on_outcome=None):
    """Runs the cases; returns their Outcomes. `on_outcome(o)` after each."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="faults-", dir=workdir) as top:
        shared = Shared(os.path.join(top, "shared"))
        os.mkdir(shared.folder)
        for case in selected:
            outcomes.append(run_case(case, top, shared))
            if on_outcome is not None:
                on_outcome(outcomes[-1])
    return outcomes


def totals(outcomes):
    """(cases, losses, tracebacks, wrong exit codes)."""
    return (len(outcomes), sum(o.losses for o in outcomes),
            sum(o.tracebacks for o in outcomes), sum(o.wrong_exits for o in outcomes))


def summary_line(outcomes):
    """The report's last line."""
    return "faults: %d cases, %d losses, %d tracebacks, %d wrong exit codes" % totals(
        outcomes)


HEADER = "%-34s %6s %6s %4s %4s %4s  %s" % ("case", "exit", "want", "loss",
                                            "tb", "exit", "notes")


def format_row(o):
    """One line of the table."""
    return "%-34s %6s %6s %4d %4d %4d  %s" % (
        o.case, o.exit, o.expected or "-", o.losses, o.tracebacks, o.wrong_exits,
        "; ".join(o.notes))


def select(all_cases, quick=False, patterns=()):
    """The cases to run: the quick subset and/or names containing a pattern."""
    return [c for c in all_cases if (not quick or c.quick)
            and (not patterns or any(p in c.name for p in patterns))]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python scripts/fault_injection.py --quick\n"
               "  python scripts/fault_injection.py -k patch -k migrate")
    parser.add_argument("--quick", action="store_true",
                        help="only the quick subset (one case per kind of fault)")
    parser.add_argument("-k", dest="patterns", action="append", default=[],
                        metavar="TEXT", help="only cases whose name contains TEXT "
                                             "(repeat for more)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    selected = select(cases(), args.quick, args.patterns)
    if not selected:
        parser.error("no case matches %s" % args.patterns)
    if args.list:
        for c in selected:
            print(c.name)
        return 0
    print(HEADER, flush=True)
    outcomes = run_cases(selected, on_outcome=lambda o: print(format_row(o), flush=True))
    print(summary_line(outcomes))
    return 1 if any(totals(outcomes)[1:]) else 0


if __name__ == "__main__":
    sys.exit(main())
