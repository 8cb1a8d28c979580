"""Section 5 of tools/bench.py: how fast the command line answers.

Each command runs in a fresh Python process, as a user starts it; the wall
time of the whole process is measured. Two baselines run beside them:
`python -c pass` (the interpreter alone) and `python -c "import tensorflow"`
(what every command cost when the command line imported TensorFlow first).
Repetition by repetition, in a rotating order, every command runs once; a
ratio is the median over repetitions of the ratio within each repetition.

    python tools/bench_cli.py --repeats 5
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from bench_common import ROOT, load_script, median, rotations

# Goals: --help at once; migrate of a 400-line file in about the time of a
# TensorFlow-free Python start plus the migration itself.
GOALS = {"graph-override --help": 0.5, "graph-override migrate legacy.py (400 lines)": 1.5}

# A frozen GraphDef in text format, for a command that needs TensorFlow.
_MODEL = (
    'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
    'node { name: "s" op: "Sign" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n')


def legacy_file(folder, lines=400):
    """Writes legacy.py, a file of about `lines` lines dense with override
    scopes and registrations (tools/bench_migrate.py's generator, the
    worst case for the migration), into `folder`; returns its path."""
    module = load_script("bench_migrate")
    path = pathlib.Path(folder) / "legacy.py"
    path.write_text(module._file_text(0, lines))  # pylint: disable=protected-access
    return path


def commands(folder):
    """(label, argv) of every process timed, baselines first."""
    go = [sys.executable, "-m", "graph_override"]
    model = pathlib.Path(folder) / "model.pbtxt"
    model.write_text(_MODEL)
    return [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ('python -c "import tensorflow"', [sys.executable, "-c", "import tensorflow"]),
        ("graph-override --help", go + ["--help"]),
        ("graph-override --version", go + ["--version"]),
        ("graph-override migrate --bad-option (usage error)", go + ["migrate", "--bad-option"]),
        ("graph-override migrate legacy.py (400 lines)",
         go + ["migrate", "-q", str(legacy_file(folder))]),
        ("graph-override inspect model.pbtxt (imports TensorFlow)",
         go + ["inspect", str(model)]),
    ]


def _environment():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _run_once(argv, env, cwd):
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=600, check=False)
    return time.perf_counter() - start, proc


def run(repeats=5, log=print):
    """Times every command; returns one dict per command with the median
    seconds, the spread, the ratios to both baselines, the exit status and
    the goal (seconds) where there is one."""
    env = _environment()
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as folder:
        table = commands(folder)
        times = {label: [] for label, _ in table}
        status = {}
        for _, argv in table:  # warm up: file caches, .pyc files
            _run_once(argv, env, folder)
        for order in rotations(table, repeats):
            for label, argv in order:
                seconds, proc = _run_once(argv, env, folder)
                times[label].append(seconds)
                status[label] = proc.returncode
                if proc.returncode not in (0, 1, 2):
                    raise RuntimeError("%s exited %d: %s" % (
                        label, proc.returncode, proc.stderr.decode()[-500:]))
        log("command-line start: %d repetitions of %d commands" % (repeats, len(table)))
    python, tensorflow = times[table[0][0]], times[table[1][0]]
    rows = []
    for label, _ in table:
        t = times[label]
        rows.append(dict(
            command=label, seconds=median(t), spread=max(t) - min(t),
            ratio_python=median(a / b for a, b in zip(t, python)),
            ratio_tensorflow=median(a / b for a, b in zip(t, tensorflow)),
            exit_status=status[label], goal=GOALS.get(label), repeats=repeats))
    return rows


def bench_section(cfg, log):
    """Section 5 of tools/bench.py: `run` with the report's repetitions."""
    return run(cfg["cli_repeats"], log)


def format_rows(rows):
    """The rows as a plain-text table."""
    out = ["%-58s %8s %8s %10s %10s %5s %6s" % (
        "command", "median s", "spread", "/ python", "/ import tf", "exit", "goal")]
    for r in rows:
        out.append("%-58s %8.3f %8.3f %10.2f %10.2f %5d %6s" % (
            r["command"], r["seconds"], r["spread"], r["ratio_python"],
            r["ratio_tensorflow"], r["exit_status"],
            "-" if r["goal"] is None else "%.1f s" % r["goal"]))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5,
                        help="repetitions of every command (default 5)")
    args = parser.parse_args(argv)
    print(format_rows(run(args.repeats, log=lambda m: print(m, file=sys.stderr))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
