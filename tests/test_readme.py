"""README's Quickstart is what CI runs, and the CLI answers as documented."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def quickstart_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_quickstart_has_exactly_two_self_contained_commands():
    commands = quickstart_commands()
    assert len(commands) == 2, commands
    for command in commands:
        assert command.startswith("python -m pip install "), command
    assert commands[0].endswith("graph-override demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert quickstart_commands()[1] in ci.splitlines()


def test_setup_declares_what_the_quickstart_needs():
    setup = (ROOT / "setup.py").read_text()
    assert '"graph-override=graph_override.cli:main"' in setup
    assert '"test": [' in setup and '"pytest' in setup


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "graph_override", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_help_and_bad_usage():
    result = _cli("--help")
    assert result.returncode == 0
    for command in ("inspect", "patch", "migrate", "demo"):
        assert command in result.stdout
    assert _cli().returncode == 2
    assert _cli("no-such-command").returncode == 2


@pytest.mark.slow
def test_demo_runs_and_succeeds():
    result = _cli("demo")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "three families agree" in result.stdout


def _python_blocks():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_has_python_examples():
    assert len(_python_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_blocks_run(index, capsys, tmp_path, monkeypatch):
    block = _python_blocks()[index]
    monkeypatch.chdir(tmp_path)
    if "model.pb" in block:  # the frozen-graph tour works on the example model
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_frozen_example.py"),
                        "model.pb"], check=True, capture_output=True, timeout=300)
    exec(compile(block, "README.md[python %d]" % index, "exec"), {})  # pylint: disable=exec-used
    out = capsys.readouterr().out
    assert out.strip(), "each README example prints what it shows"
