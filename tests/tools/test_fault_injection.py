"""Tests of tools/fault_injection.py: its checks count what they should,
and a quick subset of the faults runs against the real training script."""

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def faults(load_tool):
    return load_tool("fault_injection")


def _run(returncode=0, stdout="", stderr="", killed=False, timed_out=False, faults=None):
    return faults.Run(returncode, stdout, stderr, killed, timed_out)


def test_check_counts_tracebacks_wrong_exits_and_hangs(faults):
    check = faults.Check("x")
    check.result(_run(1, stderr="Traceback (most recent call last):\n  ...\nKeyError: 'a'\n",
                      faults=faults), {2})
    check.result(_run(2, stderr="prog: error: clear\n", faults=faults), {2})
    check.result(_run(-9, timed_out=True, faults=faults), {2})
    o = check.outcome()
    assert (o.tracebacks, o.wrong_exits, o.losses) == (1, 2, 0)
    assert o.exit == "hung" and "traceback: KeyError: 'a'" in o.notes
    assert "exit 1, expected 2" in o.notes and "exit hung, expected 2" in o.notes
    killed = faults.Check("k")
    killed.result(_run(-9, killed=True, faults=faults))  # no contract for kill -9
    assert killed.outcome().wrong_exits == 0 and killed.outcome().exit == "killed"


def test_snapshot_finds_changed_deleted_and_left_over_files(faults, tmp_path):
    (tmp_path / "input.pb").write_bytes(b"model")
    (tmp_path / "keep.txt").write_bytes(b"same")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "gone").write_bytes(b"x")
    before = faults.snapshot(str(tmp_path))
    assert sorted(before) == ["input.pb", "keep.txt", os.path.join("sub", "gone")]
    (tmp_path / "input.pb").write_bytes(b"modeL")
    (tmp_path / "sub" / "gone").unlink()
    (tmp_path / ".out.pb.abc.tmp").write_bytes(b"")
    (tmp_path / "out.pb").write_bytes(b"result")
    after = faults.snapshot(str(tmp_path))
    check = faults.Check("files")
    check.unchanged(before, after, "input")
    check.no_leftovers(before, after, allowed={"out.pb"})
    o = check.outcome()
    assert o.losses == 3
    assert o.notes == ["input input.pb was changed",
                       "input %s was deleted" % os.path.join("sub", "gone"),
                       "partial file left: .out.pb.abc.tmp"]


def _write_out(tmp_path):
    """A command that writes out.pb the way every writer here does."""
    return [sys.executable, "-c",
            "from graph_override._files.atomic import atomic_write; atomic_write('out.pb', b'new')"]


def test_a_temporary_left_by_kill_9_is_no_loss_if_the_next_run_removes_it(faults, tmp_path):
    before = faults.snapshot(str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / (".out.pb.%s.abcd.tmp" % dead)).write_bytes(b"half")  # its writer died
    check = faults.Check("k")
    check.recovered_after_kill(str(tmp_path), before, _write_out(tmp_path), allowed={"out.pb"})
    o = check.outcome()
    assert o.losses == 0 and "the next run removed it" in " ".join(o.notes)
    assert (tmp_path / "out.pb").read_bytes() == b"new"


def test_a_temporary_the_next_run_keeps_is_a_loss(faults, tmp_path):
    before = faults.snapshot(str(tmp_path))
    (tmp_path / ".other.pb.1.abcd.tmp").write_bytes(b"half")  # not out.pb's
    check = faults.Check("k")
    check.recovered_after_kill(str(tmp_path), before, _write_out(tmp_path), allowed={"out.pb"})
    assert check.outcome().losses == 1
    (tmp_path / "stray.txt").write_bytes(b"x")  # not a temporary: no rerun helps
    check = faults.Check("k")
    check.recovered_after_kill(str(tmp_path), before, _write_out(tmp_path), allowed={"out.pb"})
    assert check.outcome().losses == 2


@pytest.mark.parametrize("how, size", [("truncated", 5), ("empty", 0), ("deleted", None)])
def test_damage(faults, tmp_path, how, size):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    faults.damage(str(path), how)
    assert (path.stat().st_size if path.exists() else None) == size
    with pytest.raises(ValueError, match="truncated, empty or deleted"):
        faults.damage(str(tmp_path / "g"), "burnt")


def test_read_only_stops_writes_and_is_undone(faults, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with faults.read_only(str(folder)) as how:
        if how is None:
            pytest.skip("no way to make a folder read-only here")
        with pytest.raises(OSError):
            (folder / "new").write_bytes(b"x")
    (folder / "new").write_bytes(b"x")  # writable again
    assert how in ("chmod 0555", "chattr +i")


def test_run_kills_on_its_trigger_and_sees_a_full_disk(faults, tmp_path):
    r = faults.run([sys.executable, "-c", "import time; print('up', flush=True); "
                    "time.sleep(60)"], str(tmp_path), kill_when=lambda s, out: "up" in out)
    assert r.killed and r.returncode == -9 and r.stdout == "up\n"
    r = faults.run([sys.executable, "-c", "with open('big', 'wb') as f:\n"
                    "    f.write(b'x' * 5000)"], str(tmp_path), fsize=1000)
    assert r.returncode == 1 and "File too large" in r.stderr and faults.has_traceback(r)
    assert (tmp_path / "big").stat().st_size == 1000


def test_summary_table_and_selection(faults):
    outcomes = [faults.Outcome("a", 2, "2", 0, 0, 0, []),
                faults.Outcome("b", 1, "2", 1, 1, 1, ["traceback: X"])]
    assert faults.summary_line(outcomes) == (
        "faults: 2 cases, 1 losses, 1 tracebacks, 1 wrong exit codes")
    assert faults.format_row(outcomes[1]).split()[:6] == ["b", "1", "2", "1", "1", "1"]
    every = faults.cases()
    names = [c.name for c in every]
    assert len(names) == len(set(names)) >= 30
    quick = faults.select(every, quick=True)
    assert 0 < len(quick) < len(every)
    assert [c.name for c in faults.select(every, patterns=["train-damaged-index"])] == [
        "train-damaged-index-truncated", "train-damaged-index-empty",
        "train-damaged-index-deleted"]


def _run_faults(tmp_path, *patterns):
    """tools/fault_injection.py -k PATTERN...: (its exit status, the table's
    rows by case, its last line); its temporary folders go under tmp_path."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "tools", "fault_injection.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(tmp_path))
    argv = [sys.executable, script] + [a for p in patterns for a in ("-k", p)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1200)
    lines = proc.stdout.strip().splitlines() or [proc.stderr[-2000:]]
    return proc.returncode, {l.split()[0]: l.split()[1:6] for l in lines[1:-1]}, lines[-1]


@pytest.mark.slow
def test_quick_training_faults_lose_nothing_and_exit_clearly(tmp_path):
    # The script end to end, on faults of the training script.
    status, rows, last = _run_faults(tmp_path, "train-damaged-data-truncated",
                                     "train-read-only-log", "train-input-directory")
    assert last == "faults: 3 cases, 0 losses, 0 tracebacks, 0 wrong exit codes", rows
    assert status == 0
    assert rows["train-damaged-data-truncated"] == ["2", "2", "0", "0", "0"]
    assert os.listdir(str(tmp_path)) == []  # its temporary folders are gone


def test_snapshot_never_reads_fifos_or_devices(faults, tmp_path):
    import threading
    os.mkfifo(tmp_path / "pipe.py")                   # reading would block
    os.symlink("/dev/zero", tmp_path / "zero.py")     # reading would never end
    (tmp_path / "m.py").write_bytes(b"x = 1\n")
    found = []
    worker = threading.Thread(target=lambda: found.append(faults.snapshot(str(tmp_path))),
                              daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert found, "snapshot blocked on a special file"
    assert found[0]["zero.py"] == "symlink to /dev/zero"
    assert found[0]["pipe.py"].startswith("special file, mode ")
    assert len(found[0]["m.py"]) == 64


def test_migrate_hostile_cases_are_listed(faults):
    names = [c.name for c in faults.cases()]
    for kind in ("nested-brackets", "nested-elif", "nested-not", "huge-file", "fifo",
                 "dev-zero-symlink", "sum-400", "lists-200"):
        assert "migrate-hostile-%s" % kind in names
    assert "migrate-paths-one-str" in names


@pytest.mark.slow
def test_hostile_python_for_migrate_loses_nothing_and_exits_2(tmp_path):
    status, rows, last = _run_faults(tmp_path, "migrate-hostile", "migrate-paths-one-str")
    assert last == "faults: 9 cases, 0 losses, 0 tracebacks, 0 wrong exit codes", rows
    assert status == 0
    assert rows["migrate-hostile-fifo"] == ["2", "2", "0", "0", "0"]
    assert rows["migrate-hostile-sum-400"] == ["0", "0/1", "0", "0", "0"]
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.slow
def test_hostile_keras_files_and_colliding_names_are_covered(faults, tmp_path):
    """A Keras file naming a user package's function must be refused with
    nothing run; colliding node names must read as with the Python reader."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "tools", "fault_injection.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, script, "-k", "keras-hostile-package-function-keras",
         "-k", "inspect-colliding-names"],
        capture_output=True, text=True, env=env, timeout=900)
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "faults: 2 cases, 0 losses, 0 tracebacks, 0 wrong exit codes", (
        proc.stdout + proc.stderr[-2000:])
    names = [c.name for c in faults.cases()]
    assert {"keras-hostile-process-state-h5", "keras-hostile-package-function-h5"} <= set(names)


def test_the_untrusted_output_and_graph_faults_are_cases(faults):
    names = {c.name for c in faults.cases()}
    assert {"convert-kill9-temporary-folder", "convert-force-kill9-late",
            "convert-full-folder", "convert-concurrent-writers",
            "patch-force-output-fifo", "patch-force-output-symlink-to-stdout",
            "patch-force-output-dev-null", "patch-no-hard-links",
            "patch-no-hard-links-kill9-output", "inspect-hostile-escape-sequences",
            "patch-hostile-escape-sequences", "convert-hostile-const-of-4-TiB",
            "patch-hostile-unknown-op-in-a-loop-body"} <= names


def test_raw_control_characters_count_as_wrong(faults, tmp_path, monkeypatch):
    hostile = sys.modules["fault_injection_untrusted"]  # imported by the driver
    monkeypatch.setattr(hostile, "run", lambda argv, cwd, **kw: faults.Run(
        1, "name grad\x1b[2J\n", "", False, False))
    check = faults.Check("k")
    hostile.command_hostile(check, str(tmp_path), None, "inspect", "const of 4 TiB", {1})
    o = check.outcome()
    assert o.wrong_exits == 1 and "printed raw control characters" in " ".join(o.notes)
    check = faults.Check("k")
    monkeypatch.setattr(hostile, "run", lambda argv, cwd, **kw: faults.Run(
        1, "name grad\\x1b[2J\n", "", False, False))
    hostile.command_hostile(check, str(tmp_path), None, "inspect", "const of 4 TiB", {1})
    assert check.outcome().wrong_exits == 0
