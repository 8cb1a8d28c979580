"""What every fault case of tools/fault_injection.py uses: running a command
with limits and a kill trigger, snapshots and damage of files, the `Check`
that counts losses, tracebacks and wrong exit codes, and the inputs built
once per run (`Shared`)."""

import collections
import contextlib
import glob
import hashlib
import os
import resource
import shutil
import signal
import stat
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


def run_together(argv, cwd, count=2):
    """Runs `count` copies of `argv` in `cwd` at once; returns their `Run`s."""
    results = [None] * count
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, run(argv, cwd)))
               for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


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
    """{relative path: sha256} of every file under `folder`, hidden ones too.

    A symlink is recorded by its target and a FIFO, device or socket by its
    kind, never read (a FIFO would block, /dev/zero never ends)."""
    found = {}
    for base, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = os.path.join(base, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                what = digest(path)
            elif stat.S_ISLNK(mode):
                what = "symlink to " + os.readlink(path)
            else:
                what = "special file, mode %o" % stat.S_IFMT(mode)
            found[os.path.relpath(path, folder)] = what
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
MIGRATE_ARGS = ["migrate", "legacy.py", "--write", "-q"]
MEMORY = 16 << 30  # address space of a run on an unreadable input


# ---------------------------------------------------------------- kill triggers and resuming

def file_appeared(folder, pattern):
    """A kill trigger: a file matching `pattern` exists in `folder`."""
    return lambda seconds, out: bool(glob.glob(os.path.join(folder, pattern)))


def after_seconds(limit):
    """A kill trigger: `limit` seconds have passed."""
    return lambda seconds, out: seconds >= limit


def resumes(check, folder, ckpt, epochs, from_step=None):
    """Reruns to the end: must exit 0 and resume from `from_step` if given."""
    r = run(TRAIN + ["--epochs", str(epochs), "--checkpoint-dir", ckpt], folder)
    if r.returncode != 0 or has_traceback(r):
        check.loss("the rerun did not resume (exit %s): %s" % (
            r.returncode, (r.stderr.strip().splitlines() or ["?"])[-1][:160]))
    elif from_step is not None and "at step %d\n" % from_step not in r.stdout:
        check.loss("the rerun did not resume from step %d" % from_step)
