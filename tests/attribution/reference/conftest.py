"""The reference implementations, reached in subprocesses.

compat/reference_venv.sh builds them once (under a lock, so parallel test
runs share one build) in compat/.reference/: a venv with torch and Captum
(no TensorFlow), and PAIR's `saliency` package in a folder for the python
under test. When they cannot be built the tests skip, saying why, except in
CI (the environment variable CI is set), where they fail: CI must not skip
the references silently.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import reference_env as reference_env_lib

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def reference_env():
    """{"captum_python": ..., "pair_path": ...}, built by compat/reference_venv.sh."""
    return reference_env_lib.build()


def _run(python, script, requests, env=None):
    """Runs `python script REQUEST RESULT ...` and returns each result's arrays."""
    requests = [pathlib.Path(r) for r in requests]
    results = [r.with_name(r.stem + "." + script.stem + ".npz") for r in requests]
    argv = [str(python), str(script)]
    for pair in zip(requests, results):
        argv += [str(p) for p in pair]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                          env=env)
    if done.returncode != 0:
        raise AssertionError(f"{script.name} failed (exit {done.returncode}):\n{done.stderr}")
    loaded = []
    for result in results:
        with np.load(result) as arrays:
            loaded.append(dict(arrays))
    return loaded


@pytest.fixture(scope="session")
def captum(reference_env):
    """captum([request, ...]) -> Captum's maps for each request (captum_maps.py,
    one subprocess in the torch venv)."""
    return lambda requests: _run(reference_env["captum_python"], HERE / "captum_maps.py",
                                 requests)


@pytest.fixture(scope="session")
def quantus(reference_env):
    """quantus([request, ...]) -> Quantus's scores for each request
    (quantus_scores.py, one subprocess in the torch venv)."""
    return lambda requests: _run(reference_env["captum_python"], HERE / "quantus_scores.py",
                                 requests)


@pytest.fixture(scope="session")
def pair_saliency(reference_env):
    """pair_saliency([request, ...]) -> PAIR's maps and the frozen graph for
    each request (pair_maps.py, one subprocess of this python, PAIR's package
    on its path)."""
    path = os.pathsep.join(p for p in (reference_env["pair_path"],
                                       os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    return lambda requests: _run(sys.executable, HERE / "pair_maps.py", requests, env)
