"""atomic_write: the target is wholly replaced or untouched, never partial."""

import os

import pytest

from graph_override._atomic import atomic_write


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
