"""Finding the reference implementations (compat/reference_venv.sh) from the tests.

`build()` runs the script (it builds what is missing, under a lock, and
prints where things are); `missing(reason)` skips the test, or fails it when
the environment variable CI is set: CI must not skip the references silently.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "compat" / "reference_venv.sh"


def in_ci():
    return os.environ.get("CI", "") not in ("", "0", "false")


def missing(reason):
    """Skips (locally) or fails (in CI) the test that needs a reference."""
    if in_ci():
        pytest.fail(f"CI needs the reference implementations: {reason}", pytrace=False)
    pytest.skip(reason)


def build(python=sys.executable, env=None):
    """{"captum_python": ..., "pair_path": ...}, or `missing` with the script's reason."""
    env = dict(os.environ if env is None else env, PYTHON=str(python))
    try:
        done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True,
                              text=True, timeout=1200, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        missing(f"compat/reference_venv.sh did not run: {e}")
    if done.returncode != 0:
        missing("compat/reference_venv.sh could not build the reference implementations "
                f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
