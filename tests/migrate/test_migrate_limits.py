"""What `migrate` reads and how deep it parses: hostile and unusual inputs.

A str given to migrate_paths is one path; FIFOs, devices and files over the
size limit are refused before anything is read; code nested deeper than
libcst can take is refused before libcst sees it (its native parser would
overflow the C stack), and valid code that is merely deep is migrated. Each
refusal names the file and the limit, the CLI exits 2 and goes on with the
other files, and nothing prints a traceback.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from graph_override import cli, migrate
from graph_override.errors import SourceError
from graph_override.migrate import limits, sources
from graph_override.migrate import migration as _migration

# The same on every TensorFlow release by construction (it reads and refuses source files;
# no TensorFlow or Keras code runs):
# compat/run.sh runs it under the newest release only.
pytestmark = pytest.mark.release_independent

HEADER = "import tensorflow.compat.v1 as tf\n"
SCOPE = ('with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
         '    y = tf.sign(%s)\n')
LEGACY = HEADER + SCOPE % "x"
MIGRATED = (HEADER + "from graph_override.tf2 import op_with_gradient\n"
            'y = op_with_gradient(tf.sign, "Identity")(x)\n')
# Generous: the CLI starts without TensorFlow in about a second. A regression
# that blocks (a FIFO opened for reading) fails here instead of hanging.
TIMEOUT = 120


def _cli(*args):
    """Runs graph-override in a child process: (status, stdout, stderr)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "graph_override", *args],
                              capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("graph-override %s did not finish in %d s" % (" ".join(args), TIMEOUT))
    return proc.returncode, proc.stdout, proc.stderr


# ---------------------------------------------------------------------------
# migrate_paths(str): one path, never its characters.

@pytest.fixture
def confined(tmp_path, monkeypatch):
    """Records every path migrate_paths walks or reads, and walks or reads
    none outside tmp_path (so a regression cannot touch the machine)."""
    seen = []
    walk, read = _migration.iter_python_files, _migration.read_source

    def inside(path):
        seen.append(path)
        return os.path.abspath(path).startswith(str(tmp_path) + os.sep) or \
            os.path.abspath(path) == str(tmp_path)

    def guarded_walk(path):
        return walk(path) if inside(path) else []

    def guarded_read(path):
        if not inside(path):
            raise SourceError("%s: outside the test's folder" % path)
        return read(path)

    monkeypatch.setattr(_migration, "iter_python_files", guarded_walk)
    monkeypatch.setattr(_migration, "read_source", guarded_read)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(LEGACY)
    return tmp_path, seen


@pytest.mark.parametrize("as_type", [str, pathlib.Path], ids=["str", "PathLike"])
def test_migrate_paths_takes_a_single_path_as_one_path(confined, as_type):
    tmp_path, seen = confined
    results = migrate.migrate_paths(as_type(tmp_path), write=True)
    assert [(r.path, r.error, r.written) for r in results] == [
        (str(tmp_path / "pkg" / "m.py"), None, True)]
    assert (tmp_path / "pkg" / "m.py").read_text() == MIGRATED
    assert seen and all(p.startswith(str(tmp_path)) for p in seen), seen


def test_migrate_paths_takes_lists_of_str_and_pathlike(confined):
    tmp_path, seen = confined
    results = migrate.migrate_paths([tmp_path / "pkg", str(tmp_path / "pkg" / "m.py")])
    assert [(r.path, r.error, r.written) for r in results] == [
        (str(tmp_path / "pkg" / "m.py"), None, False)] * 2
    assert all(p.startswith(str(tmp_path)) for p in seen), seen


@pytest.mark.parametrize("paths", [b"/tmp", [b"/tmp"], 5, [None], ["a.py", 3]],
                         ids=["bytes", "bytes-in-list", "int", "None-in-list", "int-in-list"])
def test_migrate_paths_refuses_what_is_no_path_before_reading(confined, paths):
    _, seen = confined
    with pytest.raises(TypeError, match=r"migrate_paths\(paths\): expected a list of "
                                        r"paths \(str or os.PathLike\) or one such path"):
        migrate.migrate_paths(paths, write=True)
    assert seen == []


# ---------------------------------------------------------------------------
# Special files and size.

def test_fifo_named_py_is_refused_without_blocking_and_the_run_goes_on(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")  # no writer: a plain open() would block
    (tmp_path / "m.py").write_text(LEGACY)
    status, _, err = _cli("migrate", str(tmp_path), "--write")
    assert status == 2, err
    assert ("error: %s: is a named pipe (FIFO), not a regular file; expected a "
            "Python source file. Nothing was read." % (tmp_path / "pipe.py")) in err
    assert "Traceback" not in err
    assert (tmp_path / "m.py").read_text() == MIGRATED
    assert (tmp_path / "pipe.py").is_fifo()


def test_symlink_to_dev_zero_is_refused_before_reading(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "m.py").write_text(LEGACY)
    # A bound on the child's memory, so that a regression (reading /dev/zero
    # to its end) fails with MemoryError instead of exhausting the machine.
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
            "from graph_override import cli\n"
            "sys.exit(cli.main(['migrate', %r, %r]))\n" % (
                str(tmp_path / "zero.py"), str(tmp_path / "m.py")))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert proc.returncode == 2, proc.stderr
    assert ("error: %s: is a character device, not a regular file; expected a Python "
            "source file. Nothing was read." % (tmp_path / "zero.py")) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("--- a/")  # m.py's diff


def test_file_over_the_size_limit_is_refused_and_the_limit_is_inclusive(
        tmp_path, monkeypatch, capsys):
    limit = len(LEGACY.encode())
    monkeypatch.setattr(sources, "MAX_SOURCE_BYTES", limit)
    (tmp_path / "a_exact.py").write_text(LEGACY)                # exactly the limit
    (tmp_path / "b_over.py").write_text(LEGACY + "\n")          # one byte over
    assert cli.main(["migrate", str(tmp_path), "--write"]) == 2
    _, err = capsys.readouterr()
    assert ("error: %s: is over %d bytes, the most migrate reads from one Python "
            "file" % (tmp_path / "b_over.py", limit)) in err
    assert "migrate the hand-written code, or split the file" in err
    assert (tmp_path / "a_exact.py").read_text() == MIGRATED
    assert (tmp_path / "b_over.py").read_text() == LEGACY + "\n"


def test_size_limit_stops_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_SOURCE_BYTES", 1000)
    path = tmp_path / "big.py"
    path.write_text("x = 1\n" * 100000)
    reads = []
    real_fdopen = os.fdopen

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            data = self.f.read(n)
            reads.append(len(data))
            return data

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Counting(real_fdopen(*a, **k)))
    with pytest.raises(SourceError, match="big.py: is over 1000 bytes"):
        sources.read_source(str(path))
    assert sum(reads) == 1001


def test_default_size_limit_holds_every_hand_written_file():
    import glob
    import sysconfig
    largest = max(os.path.getsize(f) for f in
                  glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    assert largest < sources.MAX_SOURCE_BYTES


# ---------------------------------------------------------------------------
# Nesting: estimated from tokens, refused before libcst parses.

@pytest.mark.parametrize("text, depth", [
    ("x = 1\n", 0),
    ("x = [-1, -2, -3]\n", 2),                 # a comma starts a sibling
    ("x = a.b.c\n", 2),
    ("x = '(((' + ')' # [[[\n", 1),          # brackets in strings and comments
    ('x = "a" "b" "c"\n', 2),                # implicit concatenation nests
    ("x = not not not y\n", 3),
    ("x = f(g(h(1)))\n", 3),
    ("if a:\n    pass\nelif b:\n    pass\nelif c:\n    y = -1\n", 4),
    ("def f():\n    if a:\n        return -x\n", 3),
    ("x = (\n", 1),                          # unterminated: estimated so far
])
def test_nesting_depth_estimates(text, depth):
    assert limits.nesting_depth(text)[0] == depth


def test_nesting_limit_is_inclusive(monkeypatch):
    monkeypatch.setattr(limits, "MAX_NESTING", 50)
    text = HEADER + SCOPE % "x" + "z = " + "not " * 50 + "w\n"
    assert migrate.migrate_source(text, "m.py").modified
    with pytest.raises(SourceError, match=r"^m.py:4: nested about 51 levels deep .*"
                                          r"the limit is 50\); nothing was migrated"):
        migrate.migrate_source(text.replace("not w", "not not w"), "m.py")


def test_brackets_beyond_cpythons_limit_are_refused():
    ok = HEADER + SCOPE % "x" + "z = " + "[" * 200 + "]" * 200 + "\n"
    assert migrate.migrate_source(ok, "m.py").text.endswith("]\n")
    with pytest.raises(SourceError, match=r"m.py: 201 brackets open at once \(CPython's "
                                          r"own limit is 200"):
        migrate.migrate_source(ok.replace("[", "[[", 1).replace("]", "]]", 1), "m.py")


def _elif_line(minus_signs):
    """Line 4 nests 4 + minus_signs levels: an indent, an elif, the list
    opened first (its 150 brackets, with commas, are closed again), + and
    the minus signs."""
    return ("if a:\n    pass\nelif b:\n    z = " + "[" * 150 + "a, " * 3 + "]" * 150
            + " + " + "-" * minus_signs + "w\n")


def test_nesting_limit_of_1000_levels_is_inclusive():
    assert limits.nesting_depth(_elif_line(996)) == (1000, 4, 150)
    limits.check_nesting(_elif_line(996), "m.py")
    with pytest.raises(SourceError, match=r"^m.py:4: nested about 1001 levels deep .*"
                                          r"the limit is 1000\); nothing was migrated"):
        limits.check_nesting(_elif_line(997), "m.py")


def _work(text, monkeypatch):
    """The steps nesting_depth takes on `text`: the lines it and its helpers
    run, plus the items they hand to sum() (a C loop that no line counts)."""
    steps = [0]

    def counting_sum(items, *start):
        items = list(items)
        steps[0] += len(items)
        return sum(items, *start)

    def trace(frame, event, arg):
        if frame.f_code.co_filename != limits.__file__:
            return None
        def lines(frame, event, arg):
            steps[0] += event == "line"
            return lines
        return lines

    monkeypatch.setattr(limits, "sum", counting_sum, raising=False)
    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        limits.nesting_depth(text)
    finally:
        sys.settrace(previous)
    return steps[0]


@pytest.mark.parametrize("unit", ["[", "(-"], ids=["brackets", "mixed"])
def test_nesting_depth_does_the_same_work_for_each_further_level(unit, monkeypatch):
    """Linear: 400 more levels cost the same steps at any depth (summing the
    open brackets at every token made them cost more the deeper they went)."""
    closing = {"[": "]", "(-": ")"}[unit]
    work = [_work("z = " + unit * n + "w" + closing * n + "\n", monkeypatch)
            for n in (400, 800, 1200)]
    assert work[2] - work[1] == work[1] - work[0] > 0


def test_a_2_mib_file_of_nested_brackets_is_refused_with_linear_work(
        tmp_path, monkeypatch, capsys):
    """The size limit's worth of brackets, counted in a bounded number of
    steps (this took about 13 hours when each token summed the stack): any
    sum() over more items than the file has characters fails at once."""
    n = (sources.MAX_SOURCE_BYTES - len("z = \n\n")) // 2
    path = tmp_path / "deep.py"
    path.write_text("z = " + "[" * n + "]" * n + "\n\n")
    assert path.stat().st_size == sources.MAX_SOURCE_BYTES
    summed = [0]

    def bounded_sum(items, *start):
        items = list(items)
        summed[0] += len(items)
        if summed[0] > sources.MAX_SOURCE_BYTES:
            raise AssertionError("nesting_depth summed %d items" % summed[0])
        return sum(items, *start)

    monkeypatch.setattr(limits, "sum", bounded_sum, raising=False)
    assert cli.main(["migrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error: %s: %d brackets open at once (CPython's own limit is 200" % (
        path, n) in err
    assert "Traceback" not in err


DEEP = {
    "brackets": "z = " + "[" * 10000 + "]" * 10000 + "\n",
    "not": "z = " + "not " * 10000 + "w\n",
    "lambda": "z = " + "lambda: " * 10000 + "w\n",
    "elif": "if a == 0:\n    pass\n" + "elif a:\n    pass\n" * 10000,
}


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_10000_deep_nesting_exits_2_without_a_crash(tmp_path, kind):
    """libcst's native parser overflows the C stack on these (SIGSEGV): the
    file is refused before it gets there, and the other files migrate."""
    (tmp_path / "deep.py").write_text(HEADER + DEEP[kind])
    (tmp_path / "m.py").write_text(LEGACY)
    status, out, err = _cli("migrate", str(tmp_path))
    assert status == 2, (status, err[-2000:])
    assert "error: %s" % (tmp_path / "deep.py") in err
    assert "(CPython's own limit is 200" in err if kind == "brackets" else \
        "levels deep" in err and "the limit is 1000" in err
    assert "Traceback" not in err
    assert "+++ b/%s" % str(tmp_path / "m.py").lstrip("/") in out


@pytest.mark.parametrize("deep", [
    " + ".join(["x"] * 400),
    "x + len(" * 199 + "x" + ")" * 199,
], ids=["sum-400", "calls-199"])
def test_valid_deep_code_in_a_scope_is_migrated(deep):
    limit = sys.getrecursionlimit()
    r = migrate.migrate_source(HEADER + SCOPE % deep, "m.py")
    assert sys.getrecursionlimit() == limit
    assert [s.line for s in r.changed] == [2, 3]  # the scope and the call
    assert r.text == (HEADER + "from graph_override.tf2 import op_with_gradient\n"
                      'y = op_with_gradient(tf.sign, "Identity")(%s)\n' % deep)
    assert r.untouched == ()


@pytest.mark.parametrize("deep", [
    "[" * 200 + "]" * 200,
    "f(" * 200 + "x" + ")" * 200,
], ids=["lists-200", "calls-200"])
def test_valid_deep_code_beside_a_scope_is_migrated(deep):
    text = HEADER + SCOPE % "x" + "z = %s\n" % deep
    r = migrate.migrate_source(text, "m.py")
    assert r.text == MIGRATED + "z = %s\n" % deep
    assert migrate.migrate_source(r.text, "m.py").changed == ()


def test_cli_migrates_a_400_term_sum(tmp_path, capsys):
    path = tmp_path / "sum.py"
    path.write_text(HEADER + SCOPE % " + ".join(["1"] * 400))
    assert cli.main(["migrate", str(path), "--write"]) == 0
    assert "op_with_gradient(tf.sign" in path.read_text()
    assert "Traceback" not in capsys.readouterr().err


# ---------------------------------------------------------------------------
# The deep-stack runner.

def test_run_deep_turns_a_recursion_error_into_a_source_error():
    def forever(n):
        return forever(n + 1)

    limit = sys.getrecursionlimit()
    with pytest.raises(SourceError, match=r"^x.py: nested too deeply for the parser "
                                          r"\(Python's recursion limit\); nothing was "
                                          r"migrated"):
        limits.run_deep(forever, "x.py", 0)
    assert sys.getrecursionlimit() == limit


def test_run_deep_returns_and_raises_as_the_function_does():
    assert limits.run_deep(lambda a, b=0: a + b, "x.py", 1, b=2) == 3
    with pytest.raises(KeyError, match="boom"):
        limits.run_deep(lambda: {}["boom"], "x.py")


def test_help_and_guide_name_the_limits_in_force():
    from graph_override.commands import migrate as command
    guide = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "guide" /
             "migration.md").read_text()
    size = "%d MiB" % (sources.MAX_SOURCE_BYTES >> 20)
    nesting = "{:,}".format(limits.MAX_NESTING)
    assert sources.MAX_SOURCE_BYTES % (1 << 20) == 0
    for text in (command.DESCRIPTION, guide):
        assert "at most %s" % size in text and "%s levels" % nesting in text


def test_write_refuses_a_file_that_grew_or_became_a_fifo_since_it_was_read(tmp_path):
    import threading
    path = tmp_path / "m.py"
    path.write_text(LEGACY + "# more\n")  # grew after LEGACY was read
    with pytest.raises(SourceError, match="m.py: the file grew while it was being "
                                          "migrated; it was not written"):
        migrate.write_atomically(str(path), MIGRATED.encode(), expected=LEGACY.encode())
    assert path.read_text() == LEGACY + "# more\n"
    path.unlink()
    os.mkfifo(path)  # replaced by a FIFO: reading it must not block
    errors = []

    def write():
        try:
            migrate.write_atomically(str(path), MIGRATED.encode(), expected=LEGACY.encode())
        except SourceError as e:
            errors.append(str(e))

    worker = threading.Thread(target=write, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert errors == ["%s: is a named pipe (FIFO), not a regular file; expected the Python "
                      "file that was migrated. Nothing was read." % path]
    assert path.is_fifo()
