#!/usr/bin/env python
"""Inject faults into the CLI and the training scripts and count what goes wrong.

Every case runs the real `graph-override` command or scripts/train_bnn.py in a
subprocess, in a fresh temporary folder, and then checks three things:

  losses       an input changed, a previous good output or checkpoint lost,
               or a partial file left (after kill -9: a temporary file that
               the next run of the same command does not remove)
  tracebacks   a Python traceback printed instead of a clear message
  exit codes   by the contract: 0 success, 1 a finding, 2 bad usage or
               unreadable input (a hang counts as a wrong exit code)

The faults: kill -9 at several points of `graph-override patch`, of
`graph-override migrate --write`, of `graph-override convert` (also
replacing a SavedModel with --force) and of training with checkpoints (then
resuming must work); two concurrent `patch` or `convert` writers to one new
output; full (RLIMIT_FSIZE, SIGXFSZ ignored) and read-only output folders;
damaged checkpoints (.index or .data truncated, empty, deleted); unreadable
inputs (/dev/zero, a directory, an empty file); special files as OUT under
--force (a named pipe, a symlink to /proc/self/fd/1, /dev/null); a file
system without hard links (also killed at the final step); hostile graphs
(terminal escape sequences in names, a Const that claims 4 TiB, an op
TensorFlow does not know inside a loop body); hostile Python for migrate
(nesting 10,000 deep, a FIFO or a symlink to /dev/zero named *.py, a file
over the size limit, valid code that is merely deep, migrate_paths given one
str); Keras files naming a function the user did not allow (it must not
run); node names colliding in the C reader's hash table.

    python tools/fault_injection.py            # every case, a few minutes
    python tools/fault_injection.py --quick    # a subset
    python tools/fault_injection.py -k train-damaged --list

Prints a table and `faults: N cases, L losses, T tracebacks, W wrong exit
codes`; exits 1 if any of L, T, W is above 0.

This file is the driver (the list of cases, running them, the report); the
cases are in fault_injection_kills.py (kill -9), fault_injection_writes.py
(full and read-only folders, concurrent writers, an existing output),
fault_injection_inputs.py (unreadable inputs, damaged checkpoints),
fault_injection_untrusted.py (convert, special files, no hard links, hostile
graphs), fault_injection_sources.py (hostile Python for migrate),
fault_injection_hostile.py (hostile Keras files, colliding names), and what
they share in fault_injection_common.py.
"""

import argparse
import os
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # the case modules beside this file
    sys.path.insert(0, _HERE)

# pylint: disable=wrong-import-position
# Re-exported: the tests and other scripts use them through this module.
from fault_injection_common import (Case, Check, Outcome, Run, Shared,  # noqa: E402,F401
                                    damage, has_traceback, read_only, run, snapshot)
from fault_injection_hostile import colliding_names, keras_hostile  # noqa: E402
from fault_injection_untrusted import (command_hostile, convert_concurrent,  # noqa: E402
                                       convert_full, convert_killed, patch_no_links,
                                       patch_special_output)
from fault_injection_inputs import command_unreadable, train_damaged  # noqa: E402
from fault_injection_kills import migrate_killed, patch_killed, train_killed  # noqa: E402
from fault_injection_sources import KINDS, migrate_hostile, migrate_paths_str  # noqa: E402
from fault_injection_writes import (migrate_full, migrate_read_only,  # noqa: E402
                                    patch_concurrent, patch_existing_output,
                                    patch_full, patch_read_only, train_full,
                                    train_read_only)
# pylint: enable=wrong-import-position


def cases():
    """Every case, in the order of the report."""
    found = []

    def add(name, quick, function, *args):
        found.append(Case(name, quick, function, args))

    for group in (_patch_and_migrate_cases, _training_cases, _unreadable_input_cases,
                  _untrusted_output_cases, _hostile_input_cases):
        group(add)
    return found


def _patch_and_migrate_cases(add):
    for when in ("import", "temporary file", "output", "late"):
        add("patch-kill9-%s" % when.replace(" ", "-"), when == "late",
            patch_killed, when)
    add("patch-concurrent-writers", False, patch_concurrent)
    add("patch-full-folder", True, patch_full)
    add("patch-read-only-folder", False, patch_read_only)
    add("patch-existing-output", False, patch_existing_output)
    for when in ("start", "temporary file", "late"):
        add("migrate-kill9-%s" % when.replace(" ", "-"), when == "late",
            migrate_killed, when)
    add("migrate-full-folder", True, migrate_full)
    add("migrate-read-only-folder", True, migrate_read_only)


def _training_cases(add):
    for when in ("import", "after a checkpoint", "temporary file"):
        add("train-kill9-%s" % when.replace(" ", "-"), when == "after a checkpoint",
            train_killed, when)
    for where in ("checkpoint directory", "log directory"):
        add("train-full-%s" % where.split()[0], where == "checkpoint directory",
            train_full, where)
        add("train-read-only-%s" % where.split()[0], where == "log directory",
            train_read_only, where)
    for part in (".index", ".data-00000-of-00001"):
        for how in ("truncated", "empty", "deleted"):
            add("train-damaged-%s-%s" % (part.split("-")[0].strip("."), how),
                (part, how) == (".data-00000-of-00001", "truncated"),
                train_damaged, part, how)


def _unreadable_input_cases(add):
    for command, kinds in (("inspect", ("/dev/zero", "directory", "empty file")),
                           ("patch", ("/dev/zero", "directory", "empty file")),
                           ("migrate", ("/dev/zero", "binary module")),
                           ("train", ("/dev/zero", "directory", "empty file"))):
        for kind in kinds:
            add("%s-input-%s" % (command, kind.strip("/").replace("/", "-")
                                 .replace(" ", "-")),
                (command, kind) == ("train", "directory"),
                command_unreadable, command, kind, {2})
    add("migrate-input-empty-module", False, command_unreadable, "migrate",
        "empty module", {0})


def _untrusted_output_cases(add):
    for when, existing in (("temporary folder", False), ("temporary folder", True),
                           ("late", True)):
        add("convert-%skill9-%s" % ("force-" if existing else "", when.replace(" ", "-")),
            (when, existing) == ("late", True), convert_killed, when, existing)
    add("convert-full-folder", False, convert_full)
    add("convert-concurrent-writers", False, convert_concurrent)
    for kind in ("fifo", "symlink to stdout", "/dev/null"):
        add("patch-force-output-%s" % kind.strip("/").replace("/", "-").replace(" ", "-"),
            kind == "fifo", patch_special_output, kind)
    for when in (None, "output", "late"):
        add("patch-no-hard-links%s" % ("-kill9-" + when if when else ""), when is None,
            patch_no_links, when)
    for command, kind, expected in (("inspect", "escape sequences", {1}),
                                    ("patch", "escape sequences", {0}),
                                    ("convert", "const of 4 TiB", {2}),
                                    ("patch", "unknown op in a loop body", {0})):
        add("%s-hostile-%s" % (command, kind.replace(" ", "-")), kind == "escape sequences"
            and command == "inspect", command_hostile, command, kind, expected)


def _hostile_input_cases(add):
    for kind in KINDS:
        add("migrate-hostile-%s" % kind, kind == "nested-brackets", migrate_hostile, kind)
    add("migrate-paths-one-str", False, migrate_paths_str)
    for target in ("package-function", "process-state"):
        for fmt in ("keras", "h5"):
            add("keras-hostile-%s-%s" % (target, fmt),
                (target, fmt) == ("package-function", "keras"),
                keras_hostile, target, fmt)
    add("inspect-colliding-names", True, colliding_names, 2000)


def run_case(case, workdir, shared):
    """Runs one case in its own folder under `workdir`; returns an Outcome."""
    check = Check(case.name)
    folder = tempfile.mkdtemp(prefix=case.name + "-", dir=workdir)
    try:
        case.function(check, folder, shared, *case.args)
    except Exception as e:  # pylint: disable=broad-except
        check.note("the case itself failed: %s: %s" % (type(e).__name__, e))
        check.wrong += 1
    return check.outcome()


def run_cases(selected, workdir=None, on_outcome=None):
    """Runs the cases; returns their Outcomes. `on_outcome(o)` after each."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="faults-", dir=workdir) as top:
        shared = Shared(os.path.join(top, "shared"))
        os.mkdir(shared.folder)
        for case in selected:
            outcomes.append(run_case(case, top, shared))
            if on_outcome is not None:
                on_outcome(outcomes[-1])
    return outcomes


def totals(outcomes):
    """(cases, losses, tracebacks, wrong exit codes)."""
    return (len(outcomes), sum(o.losses for o in outcomes),
            sum(o.tracebacks for o in outcomes), sum(o.wrong_exits for o in outcomes))


def summary_line(outcomes):
    """The report's last line."""
    return "faults: %d cases, %d losses, %d tracebacks, %d wrong exit codes" % totals(
        outcomes)


HEADER = "%-34s %6s %6s %4s %4s %4s  %s" % ("case", "exit", "want", "loss",
                                            "tb", "exit", "notes")


def format_row(o):
    """One line of the table."""
    return "%-34s %6s %6s %4d %4d %4d  %s" % (
        o.case, o.exit, o.expected or "-", o.losses, o.tracebacks, o.wrong_exits,
        "; ".join(o.notes))


def select(all_cases, quick=False, patterns=()):
    """The cases to run: the quick subset and/or names containing a pattern."""
    return [c for c in all_cases if (not quick or c.quick)
            and (not patterns or any(p in c.name for p in patterns))]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python tools/fault_injection.py --quick\n"
               "  python tools/fault_injection.py -k patch -k migrate")
    parser.add_argument("--quick", action="store_true",
                        help="only the quick subset (one case per kind of fault)")
    parser.add_argument("-k", dest="patterns", action="append", default=[],
                        metavar="TEXT", help="only cases whose name contains TEXT "
                                             "(repeat for more)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    selected = select(cases(), args.quick, args.patterns)
    if not selected:
        parser.error("no case matches %s" % args.patterns)
    if args.list:
        for c in selected:
            print(c.name)
        return 0
    print(HEADER, flush=True)
    outcomes = run_cases(selected, on_outcome=lambda o: print(format_row(o), flush=True))
    print(summary_line(outcomes))
    return 1 if any(totals(outcomes)[1:]) else 0


if __name__ == "__main__":
    sys.exit(main())
