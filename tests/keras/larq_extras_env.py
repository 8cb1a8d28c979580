"""The test-only larq material of compat/larq_extras.sh, found from the tests:
`build()` runs the script (it builds what is missing, under a lock, and
prints where things are); a failure skips the test, or fails it when the
environment variable CI is set (CI must not skip them silently)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "compat" / "larq_extras.sh"


def missing(reason):
    """Skips (locally) or fails (in CI) the test that needs the material."""
    if os.environ.get("CI", "") not in ("", "0", "false"):
        pytest.fail("CI needs compat/larq_extras.sh's material: %s" % reason, pytrace=False)
    pytest.skip(reason)


def build():
    """{"larq_tests": folder of larq's test files, "lce_path": folder holding
    larq_compute_engine}, or `missing` with the script's reason."""
    env = dict(os.environ, PYTHON=sys.executable)
    try:
        done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True,
                              text=True, timeout=1200, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        missing("compat/larq_extras.sh did not run: %s" % e)
    if done.returncode != 0:
        missing("compat/larq_extras.sh failed (exit %d): %s"
                % (done.returncode, done.stderr.strip()[-2000:]))
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
