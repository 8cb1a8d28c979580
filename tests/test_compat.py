"""compat/: every constraints file names an installable release of a
supported TensorFlow, and compat/run.sh refuses bad usage before it installs
anything; the TensorFlow internals graph_override uses stay where they are
allowed and are listed in docs/guide/compat.md. Offline: nothing here touches
the network or creates a venv."""

import ast
import pathlib
import re
import subprocess
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPAT = ROOT / "compat"
CI = ROOT / ".ci" / "run"

# A requirement line: name, a version specifier; comments and blanks aside.
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9][0-9A-Za-z.*+!-]*)$")


def supported_releases():
    text = (COMPAT / "README.md").read_text()
    m = re.search(r"^Supported releases: (.+)$", text, re.M)
    assert m, "compat/README.md has no 'Supported releases: ...' line"
    return [v.strip() for v in m.group(1).split(",")]


def parse_constraints(path):
    """{normalized package name: version} of a constraints file; raises on
    any line that is not a comment, a blank or `name==version`."""
    pins = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _REQ.match(line)
        if not m:
            raise ValueError("%s:%d: not a `name==version` pin: %r" % (path.name, n, raw))
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        if name in pins:
            raise ValueError("%s:%d: %s pinned twice" % (path.name, n, name))
        pins[name] = m.group(2)
    return pins


def constraint_files():
    return sorted(COMPAT.glob("tf-*.txt"))


def test_supported_list_and_files_agree():
    releases = supported_releases()
    assert "2.15" in releases and "2.21" in releases
    files = {p.name[len("tf-"):-len(".txt")] for p in constraint_files()}
    assert files == set(releases)


@pytest.mark.parametrize("path", constraint_files(), ids=lambda p: p.name)
def test_constraints_pin_an_installable_release(path):
    release = path.name[len("tf-"):-len(".txt")]
    pins = parse_constraints(path)
    version = pins.get("tensorflow")
    assert version is not None, "%s does not pin tensorflow" % path.name
    # tensorflow==X.Y.Z or ==X.Y.*: an exact, existing-form release of X.Y.
    assert re.fullmatch(re.escape(release) + r"\.(\d+|\*)", version), (
        "%s pins tensorflow==%s, not a %s release" % (path.name, version, release))
    # Every pin is a concrete version (no wildcard but tensorflow's patch).
    for name, v in pins.items():
        assert re.fullmatch(r"\d+(\.\d+)*(\.\*)?", v), (path.name, name, v)


def test_release_specific_pins():
    old = parse_constraints(COMPAT / "tf-2.15.txt")
    assert old["numpy"].startswith("1.")          # TF 2.15 is built on numpy 1
    assert old["keras"].startswith("2.15")        # and ships Keras 2
    assert int(old["protobuf"].split(".")[0]) < 5
    new = parse_constraints(COMPAT / "tf-2.21.txt")
    assert new["numpy"].startswith("2.") and new["keras"].startswith("3.")


def test_parser_rejects_a_malformed_file(tmp_path):
    bad = tmp_path / "tf-9.9.txt"
    bad.write_text("tensorflow>=2.15\n")
    with pytest.raises(ValueError, match="not a `name==version` pin"):
        parse_constraints(bad)


def _run_sh(*args):
    return subprocess.run(["bash", str(COMPAT / "run.sh"), *args], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60)


def test_run_sh_without_a_release_prints_usage():
    r = _run_sh()
    assert r.returncode == 2
    assert "usage: compat/run.sh TF_VERSION" in r.stderr
    for release in supported_releases():
        assert release in r.stderr


def test_run_sh_refuses_an_unknown_release_before_installing():
    r = _run_sh("1.15")
    assert r.returncode == 2
    assert "no constraints file compat/tf-1.15.txt" in r.stderr
    assert not (COMPAT / ".venv-1.15").exists()


def test_ci_runs_quickstart_first_then_the_oldest_release():
    lines = [l.strip() for l in CI.read_text().splitlines()
             if l.strip() and not l.strip().startswith("#")]
    commands = [l for l in lines if "pytest" in l or "compat/run.sh" in l]
    assert commands[0] == 'python -m pip install -e ".[test]" && python -m pytest'
    assert any(re.search(r"compat/run\.sh 2\.15\b", c) for c in commands[1:])


# --- TensorFlow internals: where graph_override may use them, and the list in
# docs/guide/compat.md ------------------------------------------------------

COMPAT_MD = ROOT / "docs" / "guide" / "compat.md"
# Where each kind of internal may be used (relative to the repository).
ALLOWED = {
    "tensorflow.python": {"graph_override/_tensorflow/compat.py"},
    "private attribute": {"graph_override/_tensorflow/compat.py"},
    "autograph protocol": {"graph_override/errors.py"},
    "tensorflow.core": None,  # the file formats' protobuf modules: anywhere
}
# Attributes AutoGraph looks up on user objects; found by name, as no import
# or underscore gives them away.
AUTOGRAPH_PROTOCOLS = ("ag_pass_through",)
# Private attributes that are not TensorFlow's: Python's documented os._exit,
# and argparse namespaces' _run, which cli.py sets with set_defaults(_run=...).
NOT_TENSORFLOW = {("os", "_exit"), ("args", "_run")}


def _own_names(tree):
    """Names bound in `tree` to graph_override's modules and objects."""
    own = {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").startswith("graph_override"):
                own.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            own.update(a.asname or a.name.split(".")[0] for a in node.names
                       if a.name.startswith("graph_override"))
    return own


def tensorflow_internals(source, filename):
    """[(kind, internal, filename, line)] of one module's source: imports of
    tensorflow.python and tensorflow.core (the full module name; ``from A
    import b`` gives ``A.b``), private attributes read or set on objects that
    are not graph_override's own, and AutoGraph protocol attributes."""
    tree = ast.parse(source, filename)
    own = _own_names(tree)
    found = []
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = ["%s.%s" % (node.module, a.name) for a in node.names]
        for module in modules:
            for kind in ("tensorflow.python", "tensorflow.core"):
                if module == kind or module.startswith(kind + "."):
                    found.append((kind, module, filename, node.lineno))
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            receiver = ast.unparse(node.value)
            if receiver not in own and (receiver, node.attr) not in NOT_TENSORFLOW:
                found.append(("private attribute", node.attr, filename, node.lineno))
        if isinstance(node, ast.Name) and node.id in AUTOGRAPH_PROTOCOLS \
                or isinstance(node, ast.Attribute) and node.attr in AUTOGRAPH_PROTOCOLS:
            found.append(("autograph protocol", getattr(node, "id", None)
                          or node.attr, filename, node.lineno))
    return found


def documented_internals(text):
    """[(backticked names of the internal, backticked .py files)] of the rows
    of compat.md's table under 'TensorFlow internals graph_override uses'."""
    heading = "## TensorFlow internals graph_override uses"
    assert heading in text, "docs/guide/compat.md has no section %r" % heading
    section = text.split(heading, 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= set("-"):
            continue
        rows.append((re.findall(r"`([^`]+)`", cells[0]),
                     [f for f in re.findall(r"`([^`]+)`", cells[1]) if f.endswith(".py")]))
    return rows


def _listed(internal, filename, rows):
    for names, files in rows:
        if filename in files and any(n == internal or n.split(".")[-1] == internal
                                     for n in names):
            return True
    return False


def internal_problems(found, rows):
    """What is wrong with `found` internals: used where their kind is not
    allowed, or not listed in compat.md with the file that uses them."""
    problems = []
    for kind, internal, filename, line in found:
        allowed = ALLOWED[kind]
        if allowed is not None and filename not in allowed:
            problems.append("%s:%d uses %s %s; only %s may" % (
                filename, line, kind, internal, " or ".join(sorted(allowed))))
        if not _listed(internal, filename, rows):
            problems.append("%s:%d uses %s %s, which docs/guide/compat.md does not list "
                            "with that file" % (filename, line, kind, internal))
    return problems


def test_tensorflow_internals_are_confined_and_listed():
    found = []
    for path in sorted((ROOT / "graph_override").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        found += tensorflow_internals(path.read_text(), relative)
    kinds = {kind for kind, *_ in found}
    assert kinds == set(ALLOWED), kinds  # the scan sees each kind it looks for
    problems = internal_problems(found, documented_internals(COMPAT_MD.read_text()))
    assert not problems, "\n".join(problems)


def test_the_scan_catches_a_new_unlisted_internal():
    rows = documented_internals(COMPAT_MD.read_text())
    source = textwrap.dedent("""
        import tensorflow as tf
        from tensorflow.python.ops import gen_math_ops
        from graph_override._tensorflow import compat
        from graph_override.frozen.tf2 import graph as function_graph

        def f(graph, x):
            graph._unsafe_unfinalize()
            compat.tape_records([x])        # graph_override's own: fine
            function_graph._tensor_name("x")  # graph_override's own: fine
            return gen_math_ops.sign(x)
        """)
    found = tensorflow_internals(source, "graph_override/frozen/new.py")
    assert [(k, i) for k, i, _, _ in found] == [
        ("tensorflow.python", "tensorflow.python.ops.gen_math_ops"),
        ("private attribute", "_unsafe_unfinalize")]
    problems = internal_problems(found, rows)
    assert len(problems) == 4, problems
    assert "graph_override/frozen/new.py:3 uses tensorflow.python" in problems[0]
    # In _tensorflow/compat.py the same uses are allowed, and still must be listed.
    found = tensorflow_internals(source, "graph_override/_tensorflow/compat.py")
    problems = internal_problems(found, rows)
    assert len(problems) == 2 and all("does not list" in p for p in problems)
    # A listed one passes.
    found = tensorflow_internals("def n(g):\n    return g._nodes_by_id\n",
                                 "graph_override/_tensorflow/compat.py")
    assert found and internal_problems(found, rows) == []
    # A protocol attribute is found by name, outside errors.py refused.
    found = tensorflow_internals("class E(Exception):\n    ag_pass_through = True\n",
                                 "graph_override/scope.py")
    assert [p.split(" uses ")[1] for p in internal_problems(found, rows)] == [
        "autograph protocol ag_pass_through; only graph_override/errors.py may",
        "autograph protocol ag_pass_through, which docs/guide/compat.md does not "
        "list with that file"]


def test_known_failures_name_existing_tests():
    """Every deselected node id names a test that exists (so a renamed or
    fixed test does not leave a stale entry hiding nothing, or something)."""
    for path in COMPAT.glob("known-failures-*.txt"):
        release = path.name[len("known-failures-"):-len(".txt")]
        assert release in supported_releases(), path.name
        for raw in path.read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            file_part, _, test_part = line.partition("::")
            test_file = ROOT / file_part
            assert test_file.is_file(), (path.name, line)
            function = test_part.split("[", 1)[0]
            assert re.search(r"^def %s\(" % re.escape(function), test_file.read_text(), re.M), (
                path.name, line)


def test_run_sh_deselects_the_known_failures_loudly():
    text = (COMPAT / "run.sh").read_text()
    assert "known-failures-$VERSION.txt" in text and "--deselect" in text
    assert "deselecting" in text
