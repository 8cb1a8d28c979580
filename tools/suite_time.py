"""Where the test suite's time goes: a table from pytest's JUnit XML report.

The suite's plugin (tests/suite_timing.py) records for each test the wall
seconds of its setup (fixtures: models built, frozen, trained) and of its
body, and the CPU seconds of the child processes it waited for (TensorFlow
imported in a fresh interpreter, a script run as a user runs it). This tool
sums them by folder and by kind of work and lists the slowest tests.

    python tools/suite_time.py REPORT.xml [REPORT.xml ...] [--top 25]
    python tools/suite_time.py --run [--top 25] -- [pytest arguments]

--run runs `python -m pytest --junitxml=TEMP [pytest arguments]` first (the
README's test command plus a report) and prints pytest's own closing lines
too. Seconds are summed over tests: with several workers they add up to more
than the run's wall time, which the last line gives where the report has it.
Exit status: 0, or 2 for an unreadable report (pytest's status with --run).
"""

import argparse
import collections
import os
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

_PROPERTIES = ("setup_s", "call_s", "teardown_s", "child_cpu_s")


class Case(collections.namedtuple("Case", "node seconds setup call child kinds")):
    """One test: its node id, wall seconds in all, in setup and in its body,
    CPU seconds of its child processes, and its kinds (markers)."""

    @property
    def folder(self):
        parts = self.node.split("::")[0].split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def _node_id(testcase):
    classname, name = testcase.get("classname", ""), testcase.get("name", "")
    # pytest writes "tests.cli.test_cli" (module path, dots) as classname.
    # A test in a class adds the class's name; the module is the longest
    # prefix that is a file (relative to the folder the tool runs in).
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        candidate = "/".join(parts[:cut]) + ".py"
        if pathlib.Path(candidate).is_file():
            return "::".join([candidate] + parts[cut:] + [name])
    return "/".join(parts) + ".py::" + name


def read(path):
    """The Cases of one JUnit XML report, and the run's wall seconds (or None)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        raise ValueError("%s: not a readable JUnit XML report (%s)" % (path, error)) from None
    cases, wall = [], None
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    for suite in suites:
        if suite.get("time"):
            wall = (wall or 0.0) + float(suite.get("time"))
        for testcase in suite.iter("testcase"):
            props = {p.get("name"): p.get("value") for p in testcase.iter("property")}
            number = {k: float(props.get(k) or 0.0) for k in _PROPERTIES}
            kinds = tuple(k for k in (props.get("kinds") or "").split(",") if k)
            cases.append(Case(_node_id(testcase), float(testcase.get("time") or 0.0),
                              number["setup_s"], number["call_s"], number["child_cpu_s"],
                              kinds))
    return cases, wall


def _row(label, count, seconds, total):
    share = 100.0 * seconds / total if total else 0.0
    return "| %s | %d | %.0f | %.0f %% |" % (label, count, seconds, share)


def table(cases, wall=None, top=25):
    """The report as Markdown text."""
    total = sum(c.seconds for c in cases)
    lines = ["%d tests, %.0f s summed over tests%s." % (
        len(cases), total, "" if wall is None else ", %.0f s wall" % wall), ""]
    lines += ["| folder | tests | seconds | share |", "|---|---|---|---|"]
    by_folder = collections.defaultdict(list)
    for case in cases:
        by_folder[case.folder].append(case)
    for folder, group in sorted(by_folder.items(), key=lambda kv: -sum(c.seconds for c in kv[1])):
        lines.append(_row(folder, len(group), sum(c.seconds for c in group), total))
    lines += ["", "| kind of work | tests | seconds | share |", "|---|---|---|---|"]
    kinds = [
        ("fixture setup (models built, frozen or trained)", lambda c: c.setup, lambda c: c.setup > 0),
        ("child processes, CPU (fresh interpreters, scripts)", lambda c: c.child, lambda c: c.child > 0),
        ("tests marked slow", lambda c: c.seconds, lambda c: "slow" in c.kinds),
        ("hypothesis examples", lambda c: c.seconds, lambda c: "hypothesis" in c.kinds),
        ("distribution strategies and clusters", lambda c: c.seconds,
         lambda c: any(w in c.node.lower() for w in ("strategy", "cluster", "distribute"))),
        ("doc pages and README", lambda c: c.seconds, lambda c: c.folder == "tests/docs"),
    ]
    for label, amount, selected in kinds:
        group = [c for c in cases if selected(c)]
        lines.append(_row(label, len(group), sum(amount(c) for c in group), total))
    lines += ["", "The %d slowest tests (seconds: all, setup, body, children's CPU):" % top, ""]
    for case in sorted(cases, key=lambda c: -c.seconds)[:top]:
        lines.append("- %.1f (%.1f, %.1f, %.1f) `%s`" % (case.seconds, case.setup, case.call,
                                                        case.child, case.node))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", help="JUnit XML reports of pytest")
    parser.add_argument("--run", action="store_true",
                        help="run pytest first with the arguments after --")
    parser.add_argument("--top", type=int, default=25, help="how many slowest tests to list")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = parser.parse_args(argv)
    status = 0
    reports = list(args.reports)
    if args.run:
        handle, path = tempfile.mkstemp(suffix=".xml")
        os.close(handle)
        status = subprocess.call([sys.executable, "-m", "pytest", "--junitxml=" + path] + extra)
        reports.append(path)
    if not reports:
        parser.error("give a report, or --run")
    cases, wall = [], None
    for report in reports:
        try:
            got, seconds = read(report)
        except ValueError as error:
            print("suite_time: %s" % error, file=sys.stderr)
            return 2
        cases += got
        if seconds is not None:
            wall = (wall or 0.0) + seconds
    print(table(cases, wall, args.top))
    return status


if __name__ == "__main__":
    sys.exit(main())
