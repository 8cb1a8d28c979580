"""compat/: every constraints file names an installable release of a
supported TensorFlow, and compat/run.sh refuses bad usage before it installs
anything. Offline: nothing here touches the network or creates a venv."""

import pathlib
import re
import subprocess

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


def test_only_compat_module_imports_private_tensorflow():
    offenders = []
    for path in (ROOT / "graph_override").rglob("*.py"):
        if path.name == "_compat.py":
            continue
        text = path.read_text()
        if re.search(r"^\s*(from|import)\s+tensorflow\.python", text, re.M):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, ("only graph_override/_compat.py may import "
                           "tensorflow.python; found in %s" % offenders)


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
