"""README's Quickstart is what CI runs, and the CLI answers as documented."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


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


def test_ci_runs_both_quickstart_commands_in_a_fresh_venv():
    """Stage 1 of CI is a newcomer's run: a venv without the system's site
    packages, activated, then both commands as printed, each stopping the run
    when it fails; the suite runs once."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    first, second = (lines.index(c) for c in quickstart_commands())
    venv = [i for i, l in enumerate(lines) if l.startswith("python -m venv ")]
    activate = [i for i, l in enumerate(lines) if l.startswith("source ") and "/bin/activate" in l]
    assert len(venv) == 1 and "--system-site-packages" not in lines[venv[0]]
    assert activate and venv[0] < activate[0] < first < second
    assert lines[first + 1] == lines[second + 1] == "stop_if_failed"
    # The suite runs once, then its heavy cross-checks once (pytest.ini).
    runs = [l for l in lines if "pytest" in l and not l.lstrip().startswith(("#", "echo "))]
    assert runs == [lines[second], "python -m pytest -m heavy"]
    helper = next(l for l in lines if l.startswith("stop_if_failed() "))
    for command, status, reached in [("false && true", 1, False), ("(exit 3) && true", 3, False),
                                     ("true && true", 0, True)]:
        run = subprocess.run(["bash", "-c", "set -euo pipefail\n%s\n%s\nstop_if_failed\n"
                              "echo reached" % (helper, command)],
                             capture_output=True, text=True, check=False)
        assert (run.returncode, "reached" in run.stdout) == (status, reached), command


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


def test_readme_is_short_and_its_blocks_follow_the_page_rules():
    """README's blocks are run by tests/docs/test_doc_pages.py; here: it is in its
    list, short enough to read in minutes, and the Quickstart is shown, not run."""
    import doc_blocks  # pylint: disable=import-outside-toplevel
    import test_doc_pages  # pylint: disable=import-outside-toplevel
    assert "README.md" in test_doc_pages.PAGES
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    first = doc_blocks.blocks(text.split("## Quickstart", 1)[1])[0]
    assert first.skip == "installs the package"
    assert [line for line in first.text.splitlines() if line.strip()] == quickstart_commands()
    runs = [b for b in doc_blocks.blocks(text) if not b.skip]
    assert {b.lang for b in runs} >= {"python", "console", "pycon"}
    assert all(b.expected for b in runs if b.lang == "python" and not b.title)


def _mkdocs_nav():
    return set(re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$",
                          (ROOT / "mkdocs.yml").read_text(), re.M))


def test_readme_links_point_at_files_or_site_pages():
    """Every relative link of README names a file of the repository or a page
    of the site's nav (which `mkdocs build --strict` requires to exist)."""
    text = (ROOT / "README.md").read_text()
    nav = _mkdocs_nav()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 10
    for link in links:
        if "://" in link:
            continue
        assert (ROOT / link).exists() or (
            link.startswith("docs/") and link[len("docs/"):] in nav), link


def test_python_requires_is_what_the_code_and_tensorflow_allow():
    """python_requires names the oldest Python of the oldest supported
    TensorFlow (2.15: 3.9-3.11), and every module parses as that Python."""
    import ast  # pylint: disable=import-outside-toplevel
    setup = (ROOT / "setup.py").read_text()
    oldest = re.search(r'python_requires=">=3\.(\d+)"', setup)
    assert oldest and oldest.group(1) == "9", "python_requires changed: update README and compat"
    for version in ("3.9", "3.10", "3.11", "3.12", "3.13"):
        assert "Python :: %s\"" % version in setup
    for path in sorted((ROOT / "graph_override").rglob("*.py")):
        ast.parse(path.read_text(), str(path), feature_version=(3, 9))
    readme = (ROOT / "README.md").read_text()
    assert "| 2.21 (current) | 3.10-3.13 |" in readme
    assert "| 2.15 (oldest: the last with Keras 2 and numpy 1) | 3.9-3.11 |" in readme


def test_setup_extras_say_what_they_add():
    setup = (ROOT / "setup.py").read_text()
    for extra, packages in (("docs", ("mkdocs>=", "mkdocs-material>=", "mkdocstrings[python]>=")),
                            ("scripts", ("matplotlib>=",))):
        block = re.search(r'"%s": \[(.*?)\],\n' % extra, setup, re.S)
        assert block, extra
        for package in packages:
            assert '"%s' % package in block.group(1), (extra, package)


def test_ci_builds_the_site_strictly_after_the_tests():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    tests = lines.index(quickstart_commands()[1])
    build = [i for i, line in enumerate(lines) if line.startswith("mkdocs build --strict")]
    assert build and build[0] > tests
    assert any('pip install -e ".[docs]"' in line for line in lines[tests:build[0]])


def test_pyproject_builds_through_setuptools_and_setup_py_keeps_the_metadata():
    lines = [line for line in (ROOT / "pyproject.toml").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["[build-system]", 'requires = ["setuptools>=64"]',
                     'build-backend = "setuptools.build_meta"']


@pytest.mark.slow
def test_a_wheel_builds_with_the_c_reader(tmp_path):
    """`pip wheel .` (PEP 517, from a copy of the sources) builds the C
    extension into the wheel; no download: the build uses this Python's
    setuptools."""
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    import shutil  # pylint: disable=import-outside-toplevel
    import zipfile  # pylint: disable=import-outside-toplevel
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "build", "*.so", "__pycache__", ".venv*", "*.egg-info", "site"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                          "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wheel, = (tmp_path / "dist").glob("graph_override-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.fullmatch(r"graph_override/frozen/graphdef/_scan\..*\.so", n) for n in names), names
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
