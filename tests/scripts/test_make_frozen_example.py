"""scripts/make_frozen_example.py run as a user runs it, in fresh processes:
it prints its own lines and nothing of TensorFlow's native start-up (the
absl, cudart_stub and oneDNN lines that TF_CPP_MIN_LOG_LEVEL does not stop
under TensorFlow 2.21). What the script prints for each model is checked by
the console blocks of docs/guide/frozen.md."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_frozen_example.py"


def _run(folder, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=str(folder), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


@pytest.mark.parametrize("plain", [True, False], ids=["plain", "graph_override"])
def test_build_and_differentiate_print_only_their_own_lines(tmp_path, plain):
    assert _run(tmp_path, "model.pb") == "wrote model.pb: 30 nodes\n"
    out = _run(tmp_path, "--differentiate", "model.pb", *(["--plain"] if plain else []))
    assert out == ("d sum(logits)/dx: 0 of 64 entries nonzero, norm 0.0000; "
                   "graph_override imported: %s\n" % (not plain))
