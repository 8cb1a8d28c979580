"""The reference machinery: the build's failure paths (a clear reason, a skip
locally, a failure in CI) and the reference scripts' command line."""

import os
import subprocess

import numpy as np
import pytest

import reference_env
import reference_io


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


def test_reference_scripts_answer_each_request_pair(tmp_path, capsys):
    for name, value in (("a", 1.0), ("b", -0.0)):
        np.savez(tmp_path / f"{name}.npz", x=np.float32([value, 0.0]))
    argv = ["ref", *(str(tmp_path / p) for p in ("a.npz", "a.out.npz", "b.npz", "b.out.npz"))]
    assert reference_io.main(argv, lambda request: {"y": request["x"] * 2}) == 0
    with np.load(tmp_path / "b.out.npz") as out:
        np.testing.assert_array_equal(out["y"], np.float32([-0.0, 0.0]))
    assert reference_io.main(argv[:2], lambda request: {}) == 2
    assert "usage: ref REQUEST.npz RESULT.npz" in capsys.readouterr().err
