"""One `tools/bench.py --quick` run, every section, shared by the benchmark's
tests (test_bench.py: a test per section reads its own part of the report)
and made once per test run, whichever worker asks first (tests/run_cache.py)."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

import run_cache

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _quick_run(folder):
    folder.mkdir()
    (folder / "report").mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               # PAIR's saliency is left out (its row then says so), and
               # larq's layers are measured where this Python has them
               # (TensorFlow 2.15), nowhere else.
               BENCH_SALIENCY_DIR=str(folder / "no-saliency"),
               BENCH_PYTHON_215=(sys.executable if importlib.util.find_spec("larq")
                                 else str(folder / "no-python-2.15")))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick",
                           "--out", str(folder / "report" / "report.md")],
                          cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=1500, check=False)
    (folder / "status.json").write_text(json.dumps(dict(
        returncode=proc.returncode, stderr=proc.stderr[-3000:], env=env["BENCH_PYTHON_215"])))


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory):
    """(status, report path): status has the run's returncode, the end of
    its stderr and the Python it measured larq's layers with."""
    folder = run_cache.shared_file(tmp_path_factory, "bench_quick", _quick_run)
    status = json.loads((folder / "status.json").read_text())
    return status, folder / "report" / "report.md"
