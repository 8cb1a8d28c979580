"""tools/fuzz_scan.py: a tiny bounded fuzz of the C reader under ASan and
UBSan passes, and a reader with undefined behaviour fails it."""

import io
import pathlib
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import fuzz_scan  # pylint: disable=wrong-import-position,import-error

needs_asan = pytest.mark.skipif(fuzz_scan.runtime() is None, reason="gcc with libasan needed")


@pytest.mark.slow
@needs_asan
def test_a_tiny_fuzz_of_the_reader_passes():
    out = io.StringIO()
    assert fuzz_scan.run(60, seed=3, out=out) == 0, out.getvalue()
    assert "60 cases (seed 3)" in out.getvalue() and "no sanitizer report" in out.getvalue()


@pytest.mark.slow
@needs_asan
def test_undefined_behaviour_in_the_reader_fails_the_fuzz(tmp_path):
    """A signed overflow planted in node_count: UBSan reports it and the
    tool exits 1, keeping the inputs."""
    source = fuzz_scan.find_source()
    for path in source.parent.glob("_scan*.[ch]"):
        shutil.copy(path, tmp_path)
    planted = tmp_path / source.name
    text = planted.read_text()
    anchor = "        count += field == 1;\n"
    assert anchor in text
    planted.write_text(text.replace(anchor, anchor + "        volatile int big = 2147483647;\n"
                                    "        count += big + (int)(count > 0);\n"))
    out = io.StringIO()
    assert fuzz_scan.run(20, seed=0, out=out, source=planted, keep=str(tmp_path / "k")) == 1
    assert "runtime error: signed integer overflow" in out.getvalue()
    assert (tmp_path / "k" / "cases.pickle").exists()


def test_mutations_are_seeded_and_bounded():
    first, again = fuzz_scan.cases(40, seed=5), fuzz_scan.cases(40, seed=5)
    assert first == again and len(first) == 40
    assert first != fuzz_scan.cases(40, seed=6)
    assert first[:len(fuzz_scan.seeds())] == [(s, b"") for s in fuzz_scan.seeds()]


def test_bad_usage_exits_2():
    with pytest.raises(SystemExit) as info:
        fuzz_scan.main(["--cases", "0"])
    assert info.value.code == 2


def test_ci_runs_the_fuzz():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python tools/fuzz_scan.py --cases 3000 --seed 0" in lines
