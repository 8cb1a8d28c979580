"""AtomicStream: a file written as a stream is whole or not there; its
sha256 is that of every byte in file order, also through zipfile."""

import errno
import hashlib
import os
import zipfile

import numpy as np
import pytest

from graph_override._files import atomic
from graph_override._files.atomic_stream import AtomicStream

pytestmark = pytest.mark.release_independent


def test_the_bytes_written_in_parts_are_the_file_and_its_sha256(tmp_path):
    target = tmp_path / "out.bin"
    parts = [b"", b"head ", np.arange(5, dtype="<f4"), memoryview(b"tail")]
    with AtomicStream(str(target), exclusive=True) as stream:
        for part in parts:
            stream.write(part)
        assert stream.tell() == 5 + 20 + 4
        assert sorted(os.listdir(tmp_path)) != ["out.bin"]  # a temporary until the commit
        digest = stream.commit()
    data = b"head " + np.arange(5, dtype="<f4").tobytes() + b"tail"
    assert target.read_bytes() == data
    assert digest == hashlib.sha256(data).hexdigest()
    assert os.listdir(tmp_path) == ["out.bin"]
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~atomic._umask()


def test_an_error_in_the_block_leaves_no_file_and_no_temporary(tmp_path):
    with pytest.raises(KeyError):
        with AtomicStream(str(tmp_path / "out.bin")) as stream:
            stream.write(b"half")
            raise KeyError("stop")
    assert os.listdir(tmp_path) == []


def test_exclusive_refuses_an_existing_target_at_the_commit_and_leaves_it(tmp_path):
    target = tmp_path / "out.bin"
    stream = AtomicStream(str(target), exclusive=True)
    stream.write(b"new")
    target.write_bytes(b"mine")  # appeared while the stream was written
    with pytest.raises(FileExistsError):
        stream.commit()
    assert target.read_bytes() == b"mine" and os.listdir(tmp_path) == ["out.bin"]
    replacing = AtomicStream(str(target))
    replacing.write(b"new")
    replacing.commit()
    assert target.read_bytes() == b"new"


def test_a_full_disk_at_the_commit_names_the_target_and_leaves_nothing(tmp_path,
                                                                        monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    stream = AtomicStream(str(tmp_path / "out.bin"))
    stream.write(b"data")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        stream.commit()
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "out.bin")
    assert os.listdir(tmp_path) == []


def test_a_dead_writers_temporary_of_the_same_target_is_removed(tmp_path, monkeypatch):
    dead = next(pid for pid in range(10 ** 9, 10 ** 9 + 1000)
                if not atomic._pid_running(pid))
    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "getpid", lambda: dead)
        stale = atomic.temp_prefix(str(tmp_path / "out.bin")) + "abcdefgh.tmp"
    (tmp_path / stale).write_bytes(b"half")
    with AtomicStream(str(tmp_path / "out.bin")) as stream:
        stream.commit()
    assert os.listdir(tmp_path) == ["out.bin"]


def test_zipfile_writes_through_it_as_a_stream_and_the_hash_covers_every_byte(tmp_path):
    target = tmp_path / "maps.npz"
    with AtomicStream(str(target), exclusive=True) as stream:
        with zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED) as archive:
            with archive.open("a.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.eye(3, dtype="float32"))
        digest = stream.commit()
    assert digest == hashlib.sha256(target.read_bytes()).hexdigest()
    with zipfile.ZipFile(target) as archive:
        assert archive.getinfo("a.npy").flag_bits & 0x08  # sizes after the data: a stream
    with np.load(target) as data:
        assert np.array_equal(data["a"], np.eye(3, dtype="float32"))
