"""larq-zoo 2.3.2 on TensorFlow 2.15, for the zoo tests: its python (the
one that has larq), compat/reference_zoo.sh's folder on its path, and the
reference files it writes (tests/keras/zoo_reference.py), made once per
test run (tests/run_cache.py) in one process per kind of file.

The python is this one where larq is installed (TensorFlow 2.15), else
GRAPH_OVERRIDE_PYTHON_215 or compat/.venv-2.15/bin/python (compat/run.sh
builds it). Without one the tests skip, saying why.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

import run_cache

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = pathlib.Path(__file__).resolve().parent / "zoo_reference.py"


# larq-zoo's models saved on TensorFlow 2.15 for the tests: small inputs (the
# smallest each takes, near) and 10 classes, for cheap files; TFOps holds ops
# Keras 2 records as TFOpLambda layers (zoo_reference.py).
SAVED = ("QuickNetSmall:32:10", "BiRealNet:32:10", "BinaryResNetE18:64:10",
         "DoReFaNet:64:10", "BinaryAlexNet:64:10", "RealToBinaryNet:32:10",
         "MeliusNet22:32:10", "BinaryDenseNet28:32:10", "TFOps:8")


def python_215():
    """TensorFlow 2.15's python (larq 0.13.3 there), or a skip."""
    if importlib.util.find_spec("larq") is not None:
        return sys.executable
    python = pathlib.Path(os.environ.get("GRAPH_OVERRIDE_PYTHON_215")
                          or ROOT / "compat" / ".venv-2.15" / "bin" / "python")
    if not python.exists():
        pytest.skip("no TensorFlow 2.15 python at %s (compat/run.sh 2.15 builds it; "
                    "GRAPH_OVERRIDE_PYTHON_215 names another): larq-zoo runs only there"
                    % python)
    return str(python)


def _zoo_path(python):
    done = subprocess.run(["bash", str(ROOT / "compat" / "reference_zoo.sh")],
                          env=dict(os.environ, PYTHON=python), capture_output=True,
                          text=True, timeout=900, check=False)
    if done.returncode != 0:
        pytest.skip("compat/reference_zoo.sh could not install larq-zoo (exit %d): %s"
                    % (done.returncode, done.stderr.strip()[-1500:]))
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)[
        "zoo_path"]


def _run(python, args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=_zoo_path(python))
    done = subprocess.run([python, str(SCRIPT)] + args, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise AssertionError("larq-zoo's reference run failed (exit %d): %s"
                             % (done.returncode, done.stderr.strip()[-3000:]))


def summaries(tmp_path_factory, name, specs):
    """{"NAME:SIZE:CLASSES": {"text", "trainable", "non_trainable",
    "binarized"}} of larq-zoo's models, as larq 0.13.3 counts them."""
    python = python_215()
    path = run_cache.shared_file(tmp_path_factory, name, lambda out: _run(
        python, ["summary", str(out)] + list(specs)))
    return json.loads(path.read_text())


def saved_models(tmp_path_factory):
    """The folder where larq-zoo's models of `SAVED` were saved by larq on
    TensorFlow 2.15 (NAME.h5, NAME.x.npy, NAME.y.npy), once per run."""
    python = python_215()

    def write(out):
        out.mkdir()
        _run(python, ["save", str(out)] + list(SAVED))
    return run_cache.shared_file(tmp_path_factory, "zoo_saved", write)
