"""`patch`, `inspect` and `convert` report a missing MODEL, a folder (a
SavedModel), a special file, a misspelled estimator and options that do
not go together before importing TensorFlow (as `explain` does), in the
words they use after it.

In process, `cli._tensorflow_or_error` (the step that imports TensorFlow)
fails the test if reached; one fresh interpreter then runs every case and
reports that neither TensorFlow nor numpy was imported (this process has
both)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from graph_override import cli, estimators, frozen
from graph_override.commands import _rules
from graph_override.errors import GraphDefError, RuleError

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
         'node { name: "y" op: "Sign" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n')
MISSPELLED = ("--map 'Sign=ste_sgin': 'ste_sgin' is neither a built-in estimator nor a "
              "registered gradient name. Did you mean 'ste_sign' or 'ste_tern'?")

# (argv, what stderr says, command by command)
CASES = [
    (["patch", "nosuch.pb", "-o", "out.pb", "--map", "Sign=ste_sign"],
     "nosuch.pb: no such file; expected a GraphDef file (.pb or .pbtxt)."),
    (["patch", "saved", "-o", "out.pb", "--map", "Sign=ste_sign"],
     "saved: is a directory; expected a GraphDef file (.pb or .pbtxt). It holds "
     "saved_model.pb: it is a SavedModel directory; freeze it first (graph-override freeze "
     "DIR -o model.pb)"),
    (["patch", "model.pbtxt", "-o", "out.pb", "--map", "Sign=ste_sgin"], MISSPELLED),
    (["patch", "model.pbtxt", "-o", "out.pb", "--map", "Sign=remove", "--map",
      "gradient:X*=flip_gradeint:scale=2"], "'flip_gradeint' is neither a built-in"),
    (["patch", "model.pbtxt", "--map", "Sign=ste_sign"], "-o OUT is required"),
    (["inspect", "nosuch.pb"], "nosuch.pb: no such file"),
    (["inspect", "plain"], "plain: is a directory; expected a GraphDef file (.pb or .pbtxt)."),
    (["inspect", "fifo.pb"], "fifo.pb: is a named pipe (FIFO), not a regular file"),
    (["inspect", "model.pbtxt", "--outputs", "y:0"], "--inputs and --outputs go with --method"),
    (["inspect", "model.pbtxt", "--allow-op", "ReadFile"], "--allow-op goes with --method"),
    (["convert", "saved", "-o", "out", "--inputs", "x", "--outputs", "y"],
     "saved: is a directory"),
    (["convert", "model.pbtxt", "-o", "out", "--inputs", "x", "--outputs", "y", "--map",
      "Sign=ste_sgin"], MISSPELLED),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("early")
    (path / "model.pbtxt").write_text(MODEL)
    (path / "saved").mkdir()
    (path / "saved" / "saved_model.pb").write_bytes(b"")
    (path / "plain").mkdir()
    os.mkfifo(path / "fifo.pb")
    return path


@pytest.mark.release_independent  # what it runs needs no TensorFlow, by design
@pytest.mark.parametrize("argv, shows", CASES, ids=[" ".join(a[:2] + a[-1:]) for a, _ in CASES])
def test_reported_before_the_tensorflow_step(folder, monkeypatch, capsys, argv, shows):
    def tensorflow_step(command):
        raise AssertionError("%s reached the TensorFlow import" % command)

    monkeypatch.chdir(folder)
    monkeypatch.setattr(cli, "_tensorflow_or_error", tensorflow_step)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("graph-override %s: error: " % argv[0])
    assert shows in err and err.count("\n") == 1, err
    assert not (folder / "out.pb").exists() and not (folder / "out").exists()


def test_the_early_words_are_the_late_ones(folder):
    for name in ("nosuch.pb", "saved", "fifo.pb"):
        with pytest.raises(GraphDefError) as info:
            frozen.load(str(folder / name))
        assert str(info.value) == _rules.check_model(str(folder / name))
    with pytest.raises(RuleError) as info:
        frozen.parse_rule("Sign=ste_sgin")
    assert str(info.value) == _rules.check_maps(["Sign=ste_sgin"])


def test_the_estimator_names_are_the_tables():
    assert _rules.estimator_names() == tuple(estimators.ESTIMATORS)


@pytest.mark.release_independent
@pytest.mark.parametrize("text", [
    "Sign=ste_sign", "Sign=ste_sign:clip_value=2", "Identity=Identity", "Sign=remove",
    "Relu=mygrads:guided_relu", "Sign=graph_override.ste_sign(clip_value=1.0)",
    "gradient:graph_override.ste_sign(clip_value=1.0)=ste_tern", "Sign=",
    "Sign=mygrads.guided", "no equals sign"])
def test_what_is_not_a_misspelled_estimator_is_left_to_the_parser(text):
    assert _rules.check_maps([text]) is None


_PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from graph_override import cli
    results = []
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        results.append(dict(code=code, err=err.getvalue()))
    print(json.dumps(dict(results=results, tf="tensorflow" in sys.modules,
                          numpy="numpy" in sys.modules)))
""")


@pytest.mark.release_independent
def test_none_of_them_imports_tensorflow(folder):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([a for a, _ in CASES])],
                          cwd=str(folder), env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["tf"] is False and got["numpy"] is False
    for (argv, shows), result in zip(CASES, got["results"]):
        assert result["code"] == 2 and shows in result["err"], (argv, result)
