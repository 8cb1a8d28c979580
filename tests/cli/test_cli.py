"""The command line starts without TensorFlow and imports it only to run a
command that needs it; a TensorFlow that does not import is a clear error.

Every check runs `graph_override.cli.main` in a fresh interpreter and reports
its exit status and whether `tensorflow` ended up in sys.modules (the test
process itself has TensorFlow imported by conftest)."""

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import graph_override
from graph_override import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from graph_override import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(json.loads(sys.argv[1]))
        except SystemExit as e:
            code = e.code
    print(json.dumps(dict(code=code, tf="tensorflow" in sys.modules,
                          numpy="numpy" in sys.modules,
                          out=out.getvalue(), err=err.getvalue())))
""")

LEGACY = textwrap.dedent('''\
    import tensorflow as tf


    @tf.RegisterGradient("CliSignSTE")
    def _sign_ste_grad(op, grad):
        x = op.inputs[0]
        return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)


    def binary_activation(x):
        g = tf.compat.v1.get_default_graph()
        with g.gradient_override_map({"Sign": "CliSignSTE"}):
            return tf.sign(x)
''')

# A GraphDef in text format, written without TensorFlow: x -> Sign -> y.
MODEL = textwrap.dedent("""\
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "s" op: "Sign" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "y" op: "Identity" input: "s" attr { key: "T" value { type: DT_FLOAT } } }
""")


def _env(*front):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in front] + [str(ROOT)])
    return env


def _probe(argv, cwd, *front):
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)],
                          cwd=str(cwd), env=_env(*front), capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli")
    (path / "legacy.py").write_text(LEGACY)
    (path / "model.pbtxt").write_text(MODEL)
    return path


@pytest.fixture(scope="module")
def broken_tensorflow(tmp_path_factory):
    """A folder whose tensorflow.py fails to import, put first on PYTHONPATH."""
    path = tmp_path_factory.mktemp("broken_tf")
    (path / "tensorflow.py").write_text(
        'raise ImportError("libtensorflow_framework.so.2: cannot open shared '
        'object file (a broken installation)")\n')
    return path


@pytest.mark.parametrize("argv, code, shows", [
    (["--help"], 0, ["inspect", "patch", "migrate", "demo", "--version", "Exit status"]),
    (["--version"], 0, ["graph-override %s" % graph_override.__version__]),
    ([], 2, ["required: COMMAND"]),
    (["no-such-command"], 2, ["invalid choice: 'no-such-command'"]),
    (["migrate"], 2, ["the following arguments are required: PATH"]),
    (["patch", "model.pb"], 2, ["--map"]),
    (["inspect", "--limit", "many", "model.pb"], 2, ["expected a positive number of rows, got 'many'"]),
] + [([name, "--help"], 0, ["usage: graph-override " + name]) for name in cli.COMMANDS])
def test_help_version_and_usage_errors_do_not_import_tensorflow(folder, argv, code, shows):
    """Nor numpy: importing it would take longer than answering (the
    top-level --help and usage errors import every command module)."""
    got = _probe(argv, folder)
    assert got["code"] == code, got
    assert got["tf"] is False, "%r imported TensorFlow" % (argv,)
    assert got["numpy"] is False, "%r imported numpy" % (argv,)
    for text in shows:
        assert text in got["out"] + got["err"], (text, got)


def test_version_names_the_installed_tensorflow_without_importing_it(folder):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    got = _probe(["--version"], folder)
    assert got["numpy"] is False  # no command module is imported for it
    line = got["out"].strip()
    assert line == "graph-override %s (TensorFlow %s, Python %s)" % (
        graph_override.__version__, tf.__version__,
        ".".join(map(str, sys.version_info[:3])))
    assert importlib.metadata.version("tensorflow") == tf.__version__


def test_migrate_runs_without_tensorflow(folder):
    got = _probe(["migrate", "legacy.py"], folder)
    assert got["code"] == 0, got
    assert got["tf"] is False
    assert got["numpy"] is False  # only the command that runs is imported
    assert "+    return op_with_gradient(tf.sign, _sign_ste_grad)(x)" in got["out"]
    assert "1 file(s) read, 1 would be migrated, 0 site(s) left for you" in got["err"]
    assert (folder / "legacy.py").read_text() == LEGACY  # a diff, nothing written


def test_commands_that_need_tensorflow_import_it_when_they_run(folder):
    got = _probe(["inspect", "model.pbtxt"], folder)
    assert got["tf"] is True
    assert got["code"] == 1, got  # the Sign node has a zero gradient: a finding
    assert "Sign" in got["out"]
    assert got["err"] == ""


def test_every_command_module_is_a_command():
    modules = sorted(p.stem for p in (ROOT / "graph_override" / "commands").glob("*.py")
                     if not p.stem.startswith("_"))
    assert sorted(cli.COMMANDS) == modules
    assert cli.COMMANDS[:2] == ("inspect", "patch") and "migrate" in cli.WITHOUT_TENSORFLOW


def test_a_tensorflow_that_fails_to_import_is_a_clear_error(folder, broken_tensorflow):
    got = _probe(["inspect", "model.pbtxt"], folder, broken_tensorflow)
    assert got["code"] == 2, got
    assert got["tf"] is False
    assert got["out"] == ""
    assert got["err"].startswith("graph-override inspect: error: this command needs "
                                 "TensorFlow, and 'import tensorflow' failed: ImportError: "
                                 "libtensorflow_framework.so.2: cannot open shared object file")
    assert "pip install" in got["err"] and got["err"].count("\n") == 1


def test_a_broken_tensorflow_leaves_help_version_and_migrate_working(folder, broken_tensorflow):
    assert _probe(["--help"], folder, broken_tensorflow)["code"] == 0
    assert _probe(["--version"], folder, broken_tensorflow)["code"] == 0
    got = _probe(["migrate", "legacy.py"], folder, broken_tensorflow)
    assert got["code"] == 0 and "op_with_gradient" in got["out"], got


def test_the_import_error_reaches_the_terminal(folder, broken_tensorflow):
    """The native-stderr silencing during the import must not swallow the
    message: run the console entry point with real file descriptors."""
    proc = subprocess.run([sys.executable, "-m", "graph_override", "demo"],
                          cwd=str(folder), env=_env(broken_tensorflow),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    assert "graph-override demo: error: this command needs TensorFlow" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_import_tensorflow_quietly_raises_the_import_error(broken_tensorflow):
    code = ("from graph_override import cli\n"
            "try:\n    cli.import_tensorflow_quietly()\n"
            "except ImportError as e:\n    print('raised', e)\n")
    for level in ("3", "0"):
        env = dict(_env(broken_tensorflow), TF_CPP_MIN_LOG_LEVEL=level)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert proc.stdout.startswith("raised libtensorflow_framework.so.2"), proc.stderr


def test_usage_errors_are_reported_by_one_helper(capsys, tmp_path):
    """The format of an error, 'graph-override COMMAND: error: MESSAGE', is
    written once (commands/_usage.py); the commands and the command line
    report bad usage through its usage_error, exit status 2."""
    import re  # pylint: disable=import-outside-toplevel
    package = pathlib.Path(graph_override.__file__).parent
    modules = [package / "cli.py"] + sorted((package / "commands").glob("*.py"))
    homes = [p.relative_to(package).as_posix() for p in modules
             if re.search(r"graph-override (%s|\w+): error: ", p.read_text())]
    assert homes == ["commands/_usage.py"]
    # One from a command's run, one from the command line's check.
    assert cli.main(["patch", str(tmp_path / "m.pb"), "--map", "Sign=ste_sign"]) == 2
    assert capsys.readouterr().err == (
        "graph-override patch: error: -o OUT is required (or use --dry-run)\n")
    assert cli.main(["demo", "--epochs", "0"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == (
        "graph-override demo: error: --epochs must be at least 1, got 0\n")
