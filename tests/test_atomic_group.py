"""write_all: several files written all or nothing; a failure on one puts
back those written before it (removed if new, their previous content if
replaced), whatever existed before the call; a writer killed outright leaves
every file old, or the next run (`recover`) makes every file new."""

import errno
import os
import pathlib

import pytest

from killed_writers import kill_when_ready
from graph_override import errors
from graph_override._files import atomic, atomic_group
from graph_override._files.atomic_group import recover, write_all

_real_write = atomic.write_temporary
_real_move = atomic.move_into_place

# The same on every TensorFlow release by construction (it writes groups of files;
# no TensorFlow or Keras code runs):
# compat/run.sh runs it under the newest release only.
pytestmark = pytest.mark.release_independent


def _hidden(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


def _fail_on(monkeypatch, target, error, step="write"):
    """Writing `target`'s temporary (step "write") or renaming it into place
    (step "rename") raises `error`; every other file goes through."""
    def write(path, data, **kwargs):
        if os.path.basename(path) == target:
            raise error
        return _real_write(path, data, **kwargs)

    def move(tmp, path, **kwargs):
        if os.path.basename(path) == target:
            raise error
        return _real_move(tmp, path, **kwargs)

    if step == "write":
        monkeypatch.setattr(atomic, "write_temporary", write)
    else:
        monkeypatch.setattr(atomic, "move_into_place", move)


def _state(folder, names):
    """{name: (bytes, mode) or None}."""
    out = {}
    for name in names:
        path = os.path.join(folder, name)
        out[name] = ((open(path, "rb").read(), os.stat(path).st_mode & 0o777)
                     if os.path.exists(path) else None)
    return out


def _files(folder):
    return [(str(folder / "maps.npy"), b"new maps"), (str(folder / "maps.png"), b"new png")]


def test_every_file_is_written_and_no_kept_link_stays(tmp_path):
    (tmp_path / "maps.npy").write_bytes(b"old maps")
    write_all(_files(tmp_path), replace=True)
    assert _state(tmp_path, ["maps.npy", "maps.png"]) == {
        "maps.npy": (b"new maps", 0o666 & ~atomic._umask()),
        "maps.png": (b"new png", 0o666 & ~atomic._umask())}
    assert os.stat(tmp_path / "maps.npy").st_nlink == 1
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("existing", [(), ("maps.npy",), ("maps.png",),
                                      ("maps.npy", "maps.png")])
@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "no-hard-links"])
@pytest.mark.parametrize("step", ["write", "rename"])
def test_a_failure_on_the_second_file_leaves_every_file_as_it_was(
        tmp_path, monkeypatch, existing, links, step):
    for i, name in enumerate(existing):
        (tmp_path / name).write_bytes(b"old %d" % i)
        os.chmod(tmp_path / name, 0o600 + 0o40 * i)
    before = _state(tmp_path, ["maps.npy", "maps.png"])
    if not links:
        monkeypatch.setattr(os, "link", _no_links)
    _fail_on(monkeypatch, "maps.png", OSError(errno.ENOSPC, "No space left on device"), step)
    with pytest.raises(OSError) as info:
        write_all(_files(tmp_path), replace=True, keep_mode=False)
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(tmp_path / "maps.png")  # the file that failed
    assert _state(tmp_path, ["maps.npy", "maps.png"]) == before
    assert _hidden(tmp_path) == []


def _no_links(src, dst):
    raise OSError(errno.EPERM, "Operation not permitted")


def test_a_failure_on_the_first_file_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "maps.png").write_bytes(b"old png")
    before = _state(tmp_path, ["maps.npy", "maps.png"])
    _fail_on(monkeypatch, "maps.npy", OSError(errno.EIO, "Input/output error"))
    with pytest.raises(OSError, match="Input/output error"):
        write_all(_files(tmp_path), replace=True)
    assert _state(tmp_path, ["maps.npy", "maps.png"]) == before
    assert before["maps.npy"] is None and _hidden(tmp_path) == []


def test_an_interrupt_on_the_second_file_puts_the_first_back(tmp_path, monkeypatch):
    (tmp_path / "maps.npy").write_bytes(b"old maps")
    _fail_on(monkeypatch, "maps.png", KeyboardInterrupt(), "rename")
    with pytest.raises(KeyboardInterrupt):
        write_all(_files(tmp_path), replace=True)
    assert (tmp_path / "maps.npy").read_bytes() == b"old maps"
    assert not (tmp_path / "maps.png").exists() and _hidden(tmp_path) == []


def test_without_replace_an_existing_second_file_is_kept_and_the_first_removed(tmp_path):
    (tmp_path / "maps.png").write_bytes(b"old png")
    with pytest.raises(FileExistsError):
        write_all(_files(tmp_path))
    assert (tmp_path / "maps.png").read_bytes() == b"old png"
    assert not (tmp_path / "maps.npy").exists() and _hidden(tmp_path) == []


def test_a_special_second_file_is_refused_and_the_first_removed(tmp_path):
    (tmp_path / "elsewhere").write_bytes(b"kept")
    os.symlink(tmp_path / "elsewhere", tmp_path / "maps.png")
    with pytest.raises(errors.SpecialFileError, match="symbolic link"):
        write_all(_files(tmp_path), replace=True)
    assert os.path.islink(tmp_path / "maps.png")
    assert (tmp_path / "elsewhere").read_bytes() == b"kept"
    assert not (tmp_path / "maps.npy").exists() and _hidden(tmp_path) == []


def test_a_file_that_cannot_be_put_back_is_named(tmp_path, monkeypatch):
    _fail_on(monkeypatch, "maps.png", OSError(errno.ENOSPC, "No space left on device"),
             "rename")
    real_unlink = os.unlink

    def stuck(path, *args, **kwargs):
        if os.path.basename(path) == "maps.npy":
            raise OSError(errno.EROFS, "Read-only file system", path)
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", stuck)
    with pytest.raises(OSError, match=r"written before .*maps.png failed .*No space left.*"
                                      r"could not be put back as it was: Read-only") as info:
        write_all(_files(tmp_path))
    assert info.value.filename == str(tmp_path / "maps.npy")
    assert info.value.__cause__.errno == errno.ENOSPC


def test_a_kept_link_of_a_killed_writer_is_removed_by_the_next_write(tmp_path, monkeypatch):
    target = str(tmp_path / "maps.npy")
    with open(target, "wb") as f:
        f.write(b"old maps")
    monkeypatch.setattr(os, "getpid", lambda: 2 ** 31 - 2)  # a pid no process has
    kept = atomic_group._keep(target)
    monkeypatch.undo()
    assert os.path.basename(kept) in [n for n, _ in atomic.stale_names(target)]
    assert write_all([(target, b"new maps")], replace=True) == []
    assert _hidden(tmp_path) == [] and open(target, "rb").read() == b"new maps"


# A writer of maps.npy and maps.png that stops, announcing it (the file
# argv[3]), at the moment argv[4] names, and is killed there.
_KILLED = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from graph_override._files import atomic, atomic_group
folder, ready, moment = sys.argv[2], sys.argv[3], sys.argv[4]

def stop():
    open(ready, "w").close()
    time.sleep(600)

if moment == "between the renames":
    real = atomic.move_into_place

    def move(tmp, path, **kwargs):
        if os.path.basename(path) == "maps.png":  # maps.npy is new, maps.png not yet
            stop()
        real(tmp, path, **kwargs)

    atomic.move_into_place = move
else:  # "before the journal": both temporaries written, nothing committed
    atomic_group._write_journal = lambda members: stop()
atomic_group.write_all([(os.path.join(folder, "maps.npy"), b"new maps"),
                         (os.path.join(folder, "maps.png"), b"new png")], replace=True)
"""


def _killed_at(folder, moment):
    (folder / "maps.npy").write_bytes(b"old maps")
    (folder / "maps.png").write_bytes(b"old png")
    root = pathlib.Path(atomic.__file__).resolve().parents[2]
    kill_when_ready(_KILLED, folder / "ready", root, folder, folder / "ready", moment)
    return [str(folder / "maps.npy"), str(folder / "maps.png")]


def test_a_kill_between_the_renames_is_finished_by_the_next_run(tmp_path):
    paths = _killed_at(tmp_path, "between the renames")
    # The moment a kill can leave: one file new, one old (and the journal).
    assert (tmp_path / "maps.npy").read_bytes() == b"new maps"
    assert (tmp_path / "maps.png").read_bytes() == b"old png"
    assert any(n.endswith(".group") for n in _hidden(tmp_path))
    notes = recover(paths)
    assert len(notes) == 1 and "finished writing" in notes[0], notes
    assert (tmp_path / "maps.png").read_bytes() == b"new png"
    assert (tmp_path / "maps.npy").read_bytes() == b"new maps"
    assert _hidden(tmp_path) == []


def test_a_kill_before_the_journal_leaves_both_old(tmp_path):
    paths = _killed_at(tmp_path, "before the journal")
    assert (tmp_path / "maps.npy").read_bytes() == b"old maps"
    assert (tmp_path / "maps.png").read_bytes() == b"old png"
    assert recover(paths) == []  # nothing committed: the temporaries go
    assert _hidden(tmp_path) == []
    assert (tmp_path / "maps.png").read_bytes() == b"old png"
