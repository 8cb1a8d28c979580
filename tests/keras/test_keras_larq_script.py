"""A larq script runs after changing only its import line: tests/data's
script in larq's documented style, run as a fresh process with
``import larq as lq`` changed to ``import graph_override.keras as lq`` (and,
where larq is installed, TensorFlow 2.15, also as it is: the same printout)."""

import importlib.util
import os
import subprocess
import sys

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "data", "larq_style_script.py")
LARQ_IMPORT = "import larq as lq\n"


def _run(path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, path], cwd=os.path.dirname(path), env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def changed_output(tmp_path_factory):
    with open(SCRIPT) as f:
        text = f.read()
    assert text.count(LARQ_IMPORT) == 1 and "graph_override" not in text.split('"""')[2]
    path = tmp_path_factory.mktemp("script") / "train.py"
    path.write_text(text.replace(LARQ_IMPORT, "import graph_override.keras as lq\n"))
    return _run(str(path))


@pytest.mark.slow
def test_larq_script_runs_after_changing_its_import_line(changed_output):
    lines = changed_output.splitlines()
    assert lines[0].startswith("+sequential stats")
    # larq's counts: binary kernels 3x3x1x16, 3x3x16x32, 288x32 (3x3x32 after
    # Flatten) and 32x2; 32-bit: each batch normalization's moving mean and
    # variance; MACs: 6x6 positions of the float-input 3x3x16 kernel, 3x3 of
    # the binary 3x3x16x32 one, then the dense kernels.
    total = next(l.split() for l in lines if l.split()[1:2] == ["Total"])
    assert total[2:4] == [str(144 + 4608 + 288 * 32 + 32 * 2), str(2 * (16 + 32 + 32 + 2))]
    assert total[5:7] == [str(9 * 4608 + 288 * 32 + 32 * 2), str(36 * 144)]
    assert lines[-1] == "trained: loss finite, accuracy in [0, 1]: True"


@pytest.mark.slow
@pytest.mark.skipif(hasattr(tf.keras, "ops") or importlib.util.find_spec("larq") is None,
                    reason="larq 0.13 runs on Keras 2 (TensorFlow 2.15) only")
def test_the_changed_script_prints_what_larq_prints(changed_output):
    assert _run(SCRIPT) == changed_output
