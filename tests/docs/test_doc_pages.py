"""Every code block of the guides runs and prints what the page shows
(the rules are in tests/doc_blocks.py)."""

import subprocess
import sys

import pytest

import doc_blocks

ROOT = doc_blocks.ROOT
# README.md and every page of the site (docs/benchmarks.md, written by
# tools/bench.py, holds no code blocks).
PAGES = ["README.md"] + sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
    if p.parent.name != "api")


def test_the_harness_runs_and_compares(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run: echo hidden > made.txt -->\n"
        "```python title=\"m.py\"\nprint('from a file')\n```\n\n"
        "```console\n$ cat made.txt\nhidden\n$ python m.py\nfrom a file\n```\n\n"
        "```python\nx = 6 * 7\nprint(x)\n```\n```text\n42\n```\n\n"
        "```pycon\n>>> x + 1\n43\n```\n\n"
        "<!-- not-run: shown only -->\n```sh\nrm -rf /\n```\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert doc_blocks.run_page(page, scratch) == []
    page.write_text("```python\nprint(1)\n```\n```text\n2\n```\n\n"
                    "```console\n$ echo a\nb\n```\n\n```sh\nls\n```\n"
                    "```pycon\n>>> 1\n2\n```\n")
    scratch = tmp_path / "scratch2"
    scratch.mkdir()
    failures = doc_blocks.run_page(page, scratch)
    assert len(failures) == 4, failures
    assert "not-run" in failures[2]


def test_the_pages_python_is_the_one_running_the_tests_in_a_venv(tmp_path):
    """In a virtual environment, `python` in a page's commands is the
    environment's interpreter with its packages, not the base Python."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    probe = ("import sys; sys.path.insert(0, %r); import doc_blocks, pathlib; "
             "scratch = pathlib.Path(%r); env = doc_blocks._environment(scratch); "
             "print(doc_blocks._bash('python -c \"import sys; print(sys.prefix)\"', "
             "scratch, env).strip())" % (str(ROOT / "tests"), str(tmp_path)))
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == str(venv)


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run_and_print_what_they_show(page, tmp_path):
    failures = doc_blocks.run_page(ROOT / page, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_the_errors_page_has_a_section_for_every_error_class():
    from graph_override import errors, scope  # pylint: disable=import-outside-toplevel
    text = (ROOT / "docs" / "guide" / "errors.md").read_text()
    headings = {w for line in text.splitlines() if line.startswith("## ")
                for w in line[3:].replace(" and ", " ").split()}
    names = set(errors.__all__) | {"GraphOverrideError", scope.NoMatchWarning.__name__}
    assert names <= headings, sorted(names - headings)


def test_the_architecture_page_maps_every_module():
    """Every module of graph_override/ has a row in docs/architecture.md's
    module map, with a line count within 20 % (or 20 lines) of the file's."""
    import re  # pylint: disable=import-outside-toplevel
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| `(graph_override/[\w/]+\.py)` \| (\d+) \|", text, re.M))
    modules = sorted(p.relative_to(ROOT).as_posix()
                     for p in (ROOT / "graph_override").rglob("*.py"))
    assert [m for m in modules if m not in rows] == []
    assert [m for m in rows if m not in modules] == []
    for module, listed in rows.items():
        lines = len((ROOT / module).read_text().splitlines())
        assert abs(lines - int(listed)) <= max(20, 0.2 * lines), (module, listed, lines)
