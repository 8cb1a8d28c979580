"""The reference environment's failure paths: a clear reason, a skip locally, a failure in CI."""

import os
import subprocess

import pytest

import reference_env


def test_script_says_which_python_it_cannot_use(tmp_path):
    env = dict(os.environ, PYTHON=str(tmp_path / "no-python"),
               GRAPH_OVERRIDE_REFERENCE_DIR=str(tmp_path / "reference"))
    done = subprocess.run(["bash", str(reference_env.SCRIPT)], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert "PYTHON=" + str(tmp_path / "no-python") + " does not run" in done.stderr
    assert not (tmp_path / "reference").exists()


@pytest.mark.parametrize("ci, outcome", [("", pytest.skip.Exception),
                                         ("0", pytest.skip.Exception),
                                         ("true", pytest.fail.Exception),
                                         ("1", pytest.fail.Exception)])
def test_build_failure_skips_locally_and_fails_in_ci(tmp_path, monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("GRAPH_OVERRIDE_REFERENCE_DIR", str(tmp_path / "reference"))
    with pytest.raises(outcome, match="does not run; set PYTHON"):
        reference_env.build(python=tmp_path / "no-python")
