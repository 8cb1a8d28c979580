"""Tests of scripts/train_*.py: flags, printed results, exit codes, kill and resume.

Most runs call the scripts' main(argv) in this process (TensorFlow is
imported once); the kill test runs the script as a real subprocess.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scripts():
    return {n: _load(n) for n in ("train_bnn", "train_dann", "train_dorefa")}


def _run(scripts, name, argv, capsys):
    code = scripts[name].main(argv + ["--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def test_train_bnn_prints_test_accuracy_last(scripts, capsys, tmp_path):
    code, out, _ = _run(scripts, "train_bnn", [
        "--epochs", "1", "--hidden", "32", "--family", "stopgrad",
        "--logdir", str(tmp_path / "logs")], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0] == "BinaryNet on digits: family stopgrad, 1 epochs, seed 0"
    assert re.fullmatch(r"test accuracy: 0\.\d{4}", lines[-1])
    assert re.search(r"ran 21 steps \(global step 0 -> 21\)", out)
    assert os.listdir(str(tmp_path / "logs"))


@pytest.mark.parametrize("name", ["train_bnn", "train_dann", "train_dorefa"])
def test_unknown_family_is_a_usage_error(scripts, capsys, name):
    with pytest.raises(SystemExit) as e:
        scripts[name].main(["--family", "override"])
    assert e.value.code == 2
    assert "invalid choice: 'override'" in capsys.readouterr().err


def test_checkpoint_dir_of_another_model_exits_2(scripts, capsys, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    assert _run(scripts, "train_bnn", ["--epochs", "1", "--hidden", "16",
                                       "--checkpoint-dir", ckpt], capsys)[0] == 0
    code, out, err = _run(scripts, "train_bnn", ["--epochs", "1", "--hidden", "32",
                                                 "--checkpoint-dir", ckpt], capsys)
    assert code == 2
    assert "train_bnn.py: error: checkpoint directory %s holds a different model" % ckpt in err
    assert "test accuracy" not in out


def test_train_dorefa_prints_a_table_of_bit_widths(scripts, capsys):
    code, out, _ = _run(scripts, "train_dorefa", ["--epochs", "1", "--bits", "1:1", "2:4"],
                        capsys)
    assert code == 0
    rows = re.findall(r"^\s+(\d+) \|\s+(\d+) \| (0\.\d{4})$", out, re.M)
    assert [(w, a) for w, a, _ in rows] == [("1", "1"), ("2", "4")]
    assert out.strip().splitlines()[-1] == "test accuracy (W2:A4): %s" % rows[-1][2]


@pytest.mark.parametrize("bits", ["0:2", "2", "a:b"])
def test_train_dorefa_rejects_bad_bits(scripts, capsys, bits):
    with pytest.raises(SystemExit) as e:
        scripts["train_dorefa"].main(["--bits", bits])
    assert e.value.code == 2
    assert "--bits" in capsys.readouterr().err


def test_train_dann_prints_both_target_accuracies(scripts, capsys):
    code, out, _ = _run(scripts, "train_dann", ["--epochs", "2", "--seed", "1"], capsys)
    assert code == 0
    assert re.fullmatch(r"target accuracy: source-only 0\.\d{4}, DANN 0\.\d{4} \([+-]0\.\d{4}\)",
                        out.strip().splitlines()[-1])


@pytest.mark.parametrize("spec, message", [
    ("ps=localhost:1;chief=localhost:2", "unknown job"),
    ("worker=localhost:2", "needs at least one 'ps' task"),
    ('{"ps": ["localhost:1"], "worker": [', "is not valid JSON"),
    ("ps=localhost;worker=localhost:2", "is not host:port"),
])
def test_bad_cluster_spec_exits_2(scripts, capsys, spec, message):
    code, _, err = _run(scripts, "train_bnn", ["--cluster", spec], capsys)
    assert code == 2 and message in err


def test_task_index_outside_the_spec_exits_2(scripts, capsys):
    code, _, err = _run(scripts, "train_bnn", [
        "--cluster", "ps=localhost:1;worker=localhost:2", "--task-index", "1"], capsys)
    assert code == 2 and "job 'worker' has 1 task(s)" in err


def test_killed_run_resumes_from_its_last_checkpoint(scripts, capsys, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(SCRIPTS, "train_bnn.py"), "--epochs", "50",
         "--hidden", "64", "--checkpoint-every", "5", "--no-progress",
         "--checkpoint-dir", ckpt],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("checkpoint saved at step 10:"):
                proc.kill()  # SIGKILL: no chance to save anything more
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode != 0, "".join(seen)
    saved = int(tf.train.latest_checkpoint(ckpt).rsplit("-", 1)[1])
    assert saved >= 10 and (saved % 5 == 0 or saved % 21 == 0)
    epochs = saved // 21 + 2
    code, out, _ = _run(scripts, "train_bnn", [
        "--epochs", str(epochs), "--hidden", "64", "--checkpoint-dir", ckpt], capsys)
    assert code == 0
    assert re.search(r"^resumed from .*bnn-%d at step %d$" % (saved, saved), out, re.M)
    total = 21 * epochs
    assert "ran %d steps (global step %d -> %d)" % (total - saved, saved, total) in out
    assert out.strip().splitlines()[-1].startswith("test accuracy: ")


# ---------------------------------------------------------------- faults

def test_log_every_prints_every_nth_epoch_and_the_last(scripts, capsys):
    code, out, _ = _run(scripts, "train_bnn", ["--epochs", "3", "--hidden", "8",
                                               "--log-every", "2"], capsys)
    assert code == 0
    assert re.findall(r"^epoch (\d+), step", out, re.M) == ["2", "3"]
    code, _, err = _run(scripts, "train_bnn", ["--log-every", "0"], capsys)
    assert code == 2 and "--log-every must be 1 or more, got 0" in err


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """A checkpoint directory of scripts/train_bnn.py --hidden 16 --epochs 1."""
    ckpt = str(tmp_path_factory.mktemp("one_epoch") / "ckpt")
    scripts = {"train_bnn": _load("train_bnn")}
    assert scripts["train_bnn"].main(["--epochs", "1", "--hidden", "16", "--no-progress",
                                      "--checkpoint-dir", ckpt]) == 0
    return ckpt


def _copy(ckpt, target):
    shutil.copytree(ckpt, target)
    with open(os.path.join(target, "checkpoint"), "w") as f:  # relative names
        f.write('model_checkpoint_path: "bnn-21"\nall_model_checkpoint_paths: "bnn-21"\n')
    return target


def _files(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("how", ["truncated", "empty", "deleted"])
def test_damaged_checkpoint_data_exits_2_naming_the_file(scripts, capsys, tmp_path,
                                                        one_epoch, how):
    ckpt = _copy(one_epoch, str(tmp_path / "ckpt"))
    data_file = os.path.join(ckpt, "bnn-21.data-00000-of-00001")
    if how == "deleted":
        os.unlink(data_file)
    else:
        with open(data_file, "r+b") as f:
            f.truncate(0 if how == "empty" else os.path.getsize(data_file) // 2)
    before = _files(ckpt)
    code, out, err = _run(scripts, "train_bnn", ["--epochs", "2", "--hidden", "16",
                                                 "--checkpoint-dir", ckpt], capsys)
    assert code == 2
    assert err.startswith("train_bnn.py: error: checkpoint directory %s: checkpoint "
                          "%s/bnn-21 is damaged: " % (ckpt, ckpt)), err
    assert data_file in err and "Traceback" not in err
    assert "epoch 2," not in out and _files(ckpt) == before


def _limited(argv, fsize):
    """Runs a script with files limited to `fsize` bytes, as on a full disk."""
    code = ("import os, resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (%d, %d))\n"
            "os.execv(sys.executable, [sys.executable] + sys.argv[1:])\n" % (fsize, fsize))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code] + argv, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.slow
def test_full_disk_during_training_exits_2_and_keeps_the_last_checkpoint(
        scripts, capsys, tmp_path, one_epoch):
    ckpt = _copy(one_epoch, str(tmp_path / "ckpt"))
    before = _files(ckpt)
    # The checkpoint of step 42 (its data file is 15 kB) cannot be written.
    proc = _limited([os.path.join(SCRIPTS, "train_bnn.py"), "--epochs", "2", "--hidden",
                     "16", "--no-progress", "--checkpoint-dir", ckpt], 4096)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert ("train_bnn.py: error: cannot write checkpoint %s/bnn-42: " % ckpt
            in proc.stderr)
    assert "The last good checkpoint is %s/bnn-21." % ckpt in proc.stderr
    assert _files(ckpt) == before  # nothing half-written is left
    # ... and it restores: the rerun goes on from step 21.
    code, out, _ = _run(scripts, "train_bnn", ["--epochs", "2", "--hidden", "16",
                                               "--checkpoint-dir", ckpt], capsys)
    assert code == 0 and re.search(r"^resumed from .*bnn-21 at step 21$", out, re.M)
    assert "ran 21 steps (global step 21 -> 42)" in out


@pytest.mark.slow
def test_full_disk_under_the_logdir_exits_2_before_training(tmp_path):
    logdir = str(tmp_path / "logs")
    proc = _limited([os.path.join(SCRIPTS, "train_bnn.py"), "--epochs", "1", "--hidden",
                     "8", "--no-progress", "--logdir", logdir], 4096)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert re.search(r"^train_bnn.py: error: cannot write TensorBoard summaries to "
                     r"%s/events\.out\.tfevents\.\S+: .*File too large"
                     % re.escape(logdir), proc.stderr, re.M), proc.stderr[-3000:]
    assert "epoch 1" not in proc.stdout


def test_read_only_checkpoint_dir_exits_2_before_training(scripts, capsys, tmp_path,
                                                          load_tool, one_epoch):
    ckpt = _copy(one_epoch, str(tmp_path / "ckpt"))
    before = _files(ckpt)
    with load_tool("fault_injection").read_only(ckpt) as how:
        if how is None:
            pytest.skip("no way to make a folder read-only here (not root, no chattr)")
        code, out, err = _run(scripts, "train_bnn", ["--epochs", "2", "--hidden", "16",
                                                     "--checkpoint-dir", ckpt], capsys)
    assert code == 2
    assert err.startswith("train_bnn.py: error: checkpoint directory %s cannot be "
                          "written: " % ckpt), err
    assert "epoch 2," not in out and _files(ckpt) == before


# ---------------------------------------------------------------- graph-override demo

@pytest.fixture(scope="module")
def demo():
    from graph_override.commands import demo as module  # pylint: disable=import-outside-toplevel
    return module


def _demo(argv, capsys):
    from graph_override import cli  # pylint: disable=import-outside-toplevel
    code = cli.main(["demo"] + argv)
    return code, capsys.readouterr().out


def test_demo_trains_the_bnn_and_both_families_agree(capsys):
    code, out = _demo(["--epochs", "2"], capsys)
    assert code == 0, out
    assert "TensorFlow's Sign gradient [0.0, 0.0, 0.0, 0.0], ste_sign [1.0, 1.0, 1.0, 0.0]" in out
    assert out.count("epoch 2, step 42:") == 2  # one run per family
    assert "largest loss difference between the families: 0.0e+00" in out
    assert "three families agree" in out


def test_demo_exit_status_reports_a_failed_check(demo, capsys, monkeypatch):
    monkeypatch.setattr(demo, "MIN_ACCURACY", 1.01)  # unreachable on purpose
    code, out = _demo(["--epochs", "1"], capsys)
    assert code == 1
    assert out.strip().endswith("CHECK FAILED: see above.")
    assert _demo(["--epochs", "0"], capsys)[0] == 2


def test_demo_without_scikit_learn_skips_part_1_and_says_what_to_install(
        demo, capsys, monkeypatch):
    from graph_override.training import data  # pylint: disable=import-outside-toplevel

    def missing():
        raise ImportError("graph_override.training needs scikit-learn for its data "
                          "(...): run `python -m pip install scikit-learn`")
    monkeypatch.setattr(data, "digits", missing)
    code, out = _demo([], capsys)
    assert code == 0  # part 2 still checks the families
    assert "skipped: graph_override.training needs scikit-learn" in out
    assert "install scikit-learn to train on the digits" in out


def test_script_without_scikit_learn_says_what_to_install(scripts, capsys, monkeypatch):
    from graph_override.training import data  # pylint: disable=import-outside-toplevel

    def missing():
        raise ImportError("graph_override.training needs scikit-learn for its data: "
                          "run `python -m pip install scikit-learn`")
    monkeypatch.setattr(data, "digits", missing)
    code, _, err = _run(scripts, "train_bnn", ["--epochs", "1"], capsys)
    assert code == 2
    assert "train_bnn.py: error: graph_override.training needs scikit-learn" in err


def test_demo_agreement_check_uses_the_numbers_not_their_printout():
    from graph_override.commands import demo as demo_command  # pylint: disable=import-outside-toplevel
    assert demo_command._agrees((True, 1e-5))  # pylint: disable=protected-access
    assert not demo_command._agrees((True, 1.04e-5))  # pylint: disable=protected-access
    assert not demo_command._agrees((True, float("nan")))  # pylint: disable=protected-access
    assert not demo_command._agrees((False, 0.0))  # pylint: disable=protected-access
