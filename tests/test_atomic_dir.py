"""_atomic_dir: a directory replaced in one step; what killed writers left is
cleaned up or restored by the next run."""

import os
import subprocess
import sys

import pytest

from killed_writers import kill_when_ready
from graph_override import _atomic, _atomic_dir

# The same on every TensorFlow release by construction (it writes folders;
# no TensorFlow or Keras code runs):
# compat/run.sh runs it under the newest release only.
pytestmark = pytest.mark.release_independent


def _dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)


def _dir(path, content):
    os.mkdir(path)
    with open(os.path.join(path, "saved_model.pb"), "w") as f:
        f.write(content)


def _content(path):
    with open(os.path.join(path, "saved_model.pb")) as f:
        return f.read()


def test_an_existing_directory_is_swapped_in_one_step(tmp_path, monkeypatch):
    target = str(tmp_path / "saved")
    _dir(target, "old")
    tmp = _atomic_dir.make_temporary(target)
    with open(os.path.join(tmp, "saved_model.pb"), "w") as f:
        f.write("new")

    def no_rename(*args):  # two renames leave a moment with no `saved`
        raise AssertionError("renamed in two steps: %s" % (args,))

    monkeypatch.setattr(os, "rename", no_rename)
    _atomic_dir.replace(tmp, target)
    assert _content(target) == "new" and os.listdir(tmp_path) == ["saved"]


def test_a_new_directory_is_not_put_over_one_that_appeared(tmp_path):
    target = str(tmp_path / "saved")
    tmp = _atomic_dir.make_temporary(target)
    os.mkdir(target)  # another writer, empty so far: rename(2) would replace it
    with pytest.raises(FileExistsError):
        _atomic_dir.replace(tmp, target, overwrite=False)
    assert os.listdir(target) == [] and os.path.isdir(tmp)


@pytest.mark.parametrize("exchange", [True, False])
def test_without_exchange_the_two_renames_still_replace(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(_atomic, "_renameat2", None)
    target = str(tmp_path / "saved")
    _dir(target, "old")
    tmp = _atomic_dir.make_temporary(target)
    _dir(os.path.join(tmp, "x"), "y")
    _atomic_dir.replace(tmp, target)
    assert os.listdir(target) == ["x"] and os.listdir(tmp_path) == ["saved"]


def test_recover_restores_a_directory_left_aside_by_a_killed_writer(tmp_path):
    target = str(tmp_path / "saved")
    dead = _dead_pid()
    aside = str(tmp_path / (".saved.%d.abcdefgh.old" % dead))
    _dir(aside, "old")
    _dir(str(tmp_path / (".saved.%d.ijklmnop.tmp" % dead)), "half")
    live = str(tmp_path / (".saved.%d.qrstuvwx.tmp" % os.getppid()))  # still running
    _dir(live, "in progress")
    notes = _atomic_dir.recover(target)
    assert _content(target) == "old"
    assert len(notes) == 1 and "restored the previous content" in notes[0]
    assert "process %d" % dead in notes[0]
    assert sorted(os.listdir(tmp_path)) == sorted(["saved", os.path.basename(live)])
    assert _atomic_dir.recover(target) == []  # nothing left to do


def test_recover_deletes_the_old_directory_once_the_new_one_is_in_place(tmp_path):
    target = str(tmp_path / "saved")
    _dir(target, "new")
    _dir(str(tmp_path / (".saved.%d.abcdefgh.old" % _dead_pid())), "old")
    assert _atomic_dir.recover(target) == []
    assert _content(target) == "new" and os.listdir(tmp_path) == ["saved"]


_KILLED_BETWEEN_RENAMES = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from graph_override import _atomic, _atomic_dir
_atomic._renameat2 = None  # no RENAME_EXCHANGE: the two-rename path
real = os.rename
calls = []

def rename(src, dst):
    calls.append(dst)
    if len(calls) == 2:  # the old one is aside, the new one not yet in place
        open(sys.argv[3], "w").close()
        time.sleep(600)
    real(src, dst)

os.rename = rename
tmp = _atomic_dir.make_temporary(sys.argv[2])
os.mkdir(os.path.join(tmp, "new"))
_atomic_dir.replace(tmp, sys.argv[2])
"""


def test_a_kill_between_the_two_renames_is_repaired_by_the_next_run(tmp_path):
    target, ready = str(tmp_path / "saved"), tmp_path / "ready"
    _dir(target, "old")
    root = os.path.dirname(os.path.dirname(os.path.abspath(_atomic.__file__)))
    kill_when_ready(_KILLED_BETWEEN_RENAMES, ready, root, target, ready)
    assert not os.path.exists(target)  # the moment the exchange never shows
    assert len(_atomic_dir.recover(target)) == 1
    assert _content(target) == "old" and os.listdir(tmp_path) == ["saved"]
