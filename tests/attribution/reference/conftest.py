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

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _missing(reason):
    if os.environ.get("CI", "") not in ("", "0", "false"):
        pytest.fail(f"CI needs the reference implementations: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def reference_env():
    """{"captum_python": ..., "pair_path": ...}, built by compat/reference_venv.sh."""
    script = ROOT / "compat" / "reference_venv.sh"
    env = dict(os.environ, PYTHON=sys.executable)
    try:
        done = subprocess.run(["bash", str(script)], env=env, capture_output=True,
                              text=True, timeout=1200, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        _missing(f"compat/reference_venv.sh did not run: {e}")
    if done.returncode != 0:
        _missing("compat/reference_venv.sh could not build the reference venv "
                 f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def run_reference(python, script, request, result, env=None):
    """Runs `python script request result` and returns the result's arrays."""
    done = subprocess.run([str(python), str(script), str(request), str(result)],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=env)
    if done.returncode != 0:
        raise AssertionError(f"{script.name} failed (exit {done.returncode}):\n{done.stderr}")
    with np.load(result) as arrays:
        return dict(arrays)


@pytest.fixture(scope="session")
def captum(reference_env):
    """captum(request_path) -> Captum's maps (captum_maps.py) as a dict of arrays."""
    def run(request):
        request = pathlib.Path(request)
        return run_reference(reference_env["captum_python"], HERE / "captum_maps.py",
                             request, request.with_name(request.stem + ".captum.npz"))
    return run
