"""atomic_write: the target is wholly replaced or untouched, never partial."""

import errno
import os
import re
import stat
import threading

import pytest

from killed_writers import kill_when_ready
from graph_override import _atomic, errors
from graph_override._atomic import atomic_write

# The same on every TensorFlow release by construction (it writes files;
# no TensorFlow or Keras code runs):
# compat/run.sh runs it under the newest release only.
pytestmark = pytest.mark.release_independent


def _leftovers(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


def test_creates_and_replaces_keeping_the_mode(tmp_path):
    target = tmp_path / "out.bin"
    atomic_write(str(target), b"first")
    assert target.read_bytes() == b"first"
    os.chmod(target, 0o640)
    atomic_write(str(target), b"second")
    assert target.read_bytes() == b"second"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert _leftovers(tmp_path) == []


def test_a_failed_check_leaves_the_target_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"original")

    def refuse(data):
        raise ValueError("bad bytes: %r" % data[:3])

    with pytest.raises(ValueError, match="bad bytes"):
        atomic_write(str(target), b"new content", verify=refuse)
    assert target.read_bytes() == b"original"
    assert _leftovers(tmp_path) == []


def test_missing_folder_raises_and_writes_nothing(tmp_path):
    with pytest.raises(OSError):
        atomic_write(str(tmp_path / "no" / "such" / "dir" / "f"), b"x")
    assert list(tmp_path.iterdir()) == []


def test_interrupt_during_write_cleans_up(tmp_path, monkeypatch):
    target = tmp_path / "out.bin"
    target.write_bytes(b"original")

    def boom(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(target), b"new")
    assert target.read_bytes() == b"original"
    assert _leftovers(tmp_path) == []


def test_a_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(str(tmp_path / "new.bin"), b"x")
        atomic_write(str(tmp_path / "new.bin"), b"y", keep_mode=False)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new.bin").st_mode & 0o777 == 0o644


def test_exclusive_refuses_an_existing_target_and_leaves_it(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        atomic_write(str(target), b"mine", exclusive=True)
    assert target.read_bytes() == b"someone else's"
    assert _leftovers(tmp_path) == []
    atomic_write(str(tmp_path / "new.bin"), b"mine", exclusive=True)
    assert (tmp_path / "new.bin").read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == ["new.bin", "out.bin"]


def _race(tmp_path, exclusive, writers=2):
    """`writers` threads write one new file at once: all of them pass every
    earlier step, then meet at a barrier just before the final one."""
    target = str(tmp_path / "out.bin")
    barrier = threading.Barrier(writers, timeout=30)
    outcome = {}

    def write(k):
        try:
            atomic_write(target, b"writer %d" % k, exclusive=exclusive,
                         verify=lambda data: barrier.wait())
            outcome[k] = "wrote"
        except FileExistsError:
            outcome[k] = "refused"

    threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return target, outcome


def test_racing_exclusive_writers_exactly_one_wins(tmp_path):
    target, outcome = _race(tmp_path, exclusive=True, writers=3)
    winners = [k for k, v in outcome.items() if v == "wrote"]
    assert len(outcome) == 3 and len(winners) == 1, outcome
    with open(target, "rb") as f:
        assert f.read() == b"writer %d" % winners[0]
    assert _leftovers(tmp_path) == []


def test_racing_replacing_writers_all_succeed_with_one_whole_file(tmp_path):
    target, outcome = _race(tmp_path, exclusive=False)
    assert sorted(outcome.values()) == ["wrote", "wrote"]
    with open(target, "rb") as f:
        assert f.read() in (b"writer 0", b"writer 1")
    assert _leftovers(tmp_path) == []


def test_exclusive_without_hard_links_still_refuses(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    atomic_write(str(tmp_path / "out.bin"), b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(str(tmp_path / "out.bin"), b"second", exclusive=True)
    assert (tmp_path / "out.bin").read_bytes() == b"first"
    assert _leftovers(tmp_path) == []


_KILLED_WRITER = r"""
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("_atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)

def stall(data):
    with open(sys.argv[3], "w") as f:
        f.write("ready")
    time.sleep(600)

atomic.atomic_write(sys.argv[2], b"x" * 1000000, verify=stall, exclusive=True)
"""


def test_a_writer_killed_mid_write_leaves_no_target_and_no_lasting_temporary(tmp_path):
    target, ready = tmp_path / "out.bin", tmp_path / "ready"
    kill_when_ready(_KILLED_WRITER, ready, _atomic.__file__, target, ready)
    assert not target.exists()
    assert len(_leftovers(tmp_path)) == 1  # what SIGKILL leaves: a hidden temporary
    atomic_write(str(target), b"next run", exclusive=True)
    assert target.read_bytes() == b"next run"
    assert _leftovers(tmp_path) == []  # the dead writer's temporary is gone


def test_temporaries_of_running_writers_are_kept(tmp_path):
    mine = tmp_path / (".out.bin.%d.abc.tmp" % os.getppid())  # a live process
    mine.write_bytes(b"in progress")
    other = tmp_path / ".other.bin.1.abc.tmp"  # another target's
    other.write_bytes(b"not ours")
    atomic_write(str(tmp_path / "out.bin"), b"data")
    assert mine.exists() and other.exists()


# ---------------------------------------------------------------- special targets

@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a named pipe (FIFO)"),
    (lambda p: os.symlink("/proc/self/fd/1", p), "a symbolic link to /proc/self/fd/1"),
    (lambda p: os.symlink("elsewhere.bin", p), "a symbolic link to elsewhere.bin"),
])
def test_a_special_target_is_refused_and_kept(tmp_path, make, kind):
    target = tmp_path / "out.bin"
    make(str(target))
    before = os.lstat(target)
    with pytest.raises(errors.SpecialFileError, match="out.bin: is %s" % re.escape(kind)):
        atomic_write(str(target), b"data")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(os.listdir(tmp_path)) == ["out.bin"]


def test_dev_null_is_refused_and_stays_a_device():
    with pytest.raises(errors.SpecialFileError,
                       match="/dev/null: is a character device, not a regular file"):
        atomic_write("/dev/null", b"data")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_regular_file_is_still_replaced(tmp_path):
    (tmp_path / "out.bin").write_bytes(b"old")
    atomic_write(str(tmp_path / "out.bin"), b"new")
    assert (tmp_path / "out.bin").read_bytes() == b"new"


# ---------------------------------------------------------------- long names

@pytest.mark.parametrize("length", [1, 200, 235, 240, 254, 255])
def test_every_legal_name_length_is_written(tmp_path, length):
    name = "n" * length
    atomic_write(str(tmp_path / name), b"data", exclusive=True)
    atomic_write(str(tmp_path / name), b"again")
    assert (tmp_path / name).read_bytes() == b"again"
    assert sorted(os.listdir(tmp_path)) == [name]


def _dead_pid(digits):
    """A pid of `digits` digits that no process has here."""
    for pid in range(10 ** (digits - 1), 10 ** digits):
        if not _atomic._pid_running(pid):
            return pid
    pytest.skip("every %d-digit pid runs here" % digits)


# A crashed writer's pid may be shorter or longer than this process's (up to
# 10 digits, 2**31 - 1): its temporary must still fit and still be found.
@pytest.mark.parametrize("digits", [1, 10])
def test_temporaries_of_long_names_are_unique_and_removed_when_stale(tmp_path, monkeypatch,
                                                                     digits):
    name = "\u00e9" * 127  # 254 bytes
    dead = _dead_pid(digits)
    with monkeypatch.context() as patch:
        patch.setattr(_atomic.os, "getpid", lambda: dead)
        prefix = _atomic.temp_prefix(str(tmp_path / name))
    assert prefix.endswith(".%d." % dead)
    stale = prefix + "abcdefgh.tmp"
    assert len(os.fsencode(stale)) <= 255
    (tmp_path / stale).write_bytes(b"half")
    assert _atomic.stale_names(str(tmp_path / name)) == [(stale, dead)]
    atomic_write(str(tmp_path / name), b"data")
    assert sorted(os.listdir(tmp_path)) == [name]


def test_an_error_names_the_target_not_the_temporary(tmp_path, monkeypatch):
    def refused(dir, prefix, suffix):  # what mkstemp raises in a read-only folder
        raise PermissionError(errno.EACCES, "Permission denied",
                              os.path.join(dir, prefix + "abcdefgh" + suffix))

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", refused)
    with pytest.raises(PermissionError) as info:
        atomic_write(str(tmp_path / "out.bin"), b"data")
    assert info.value.filename == str(tmp_path / "out.bin")
    assert ".tmp" not in str(info.value) and "nothing was written" in str(info.value)


def test_a_full_disk_names_the_target(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        atomic_write(str(tmp_path / "out.bin"), b"data")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "out.bin")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- no hard links

def _no_links(src, dst):
    raise OSError(errno.EPERM, "Operation not permitted")


def test_without_hard_links_the_exclusive_write_never_shows_an_empty_target(
        tmp_path, monkeypatch):
    monkeypatch.setattr(os, "link", _no_links)
    seen = []
    real_replace = os.replace

    def look(src, dst):  # the last-resort path's final step, if it is taken
        seen.append(os.path.getsize(dst) if os.path.exists(dst) else None)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", look)
    atomic_write(str(tmp_path / "out.bin"), b"first", exclusive=True)
    assert seen == [] and (tmp_path / "out.bin").read_bytes() == b"first"


def test_without_renameat2_and_hard_links_the_claim_still_refuses(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "link", _no_links)
    monkeypatch.setattr(_atomic, "_renameat2", None)
    atomic_write(str(tmp_path / "out.bin"), b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(str(tmp_path / "out.bin"), b"second", exclusive=True)
    assert (tmp_path / "out.bin").read_bytes() == b"first"


_KILLED_AT_THE_FINAL_STEP = r"""
import errno, os, sys, time
sys.path.insert(0, sys.argv[4])
from graph_override import _atomic as atomic

def no_links(src, dst):
    raise OSError(errno.EPERM, "Operation not permitted")

def stall(*args):
    with open(sys.argv[3], "w") as f:
        f.write("ready")
    time.sleep(600)

os.link = no_links
real_replace = os.replace
os.replace = lambda *a: (stall(), real_replace(*a))
real_rename = getattr(atomic, "rename_noreplace", None)
if real_rename is not None:
    atomic.rename_noreplace = lambda *a: (stall(), real_rename(*a))[1]
atomic.atomic_write(sys.argv[2], b"x" * 1000000, exclusive=True)
"""


def test_without_hard_links_a_kill_at_the_final_step_leaves_no_empty_target(tmp_path):
    target, ready = tmp_path / "out.bin", tmp_path / "ready"
    root = os.path.dirname(os.path.dirname(os.path.abspath(_atomic.__file__)))
    kill_when_ready(_KILLED_AT_THE_FINAL_STEP, ready, "-", target, ready, root)
    assert not os.path.lexists(target)  # before: a 0-byte out.bin, refused ever after
    atomic_write(str(target), b"next run", exclusive=True)
    assert target.read_bytes() == b"next run"
    assert _leftovers(tmp_path) == []
