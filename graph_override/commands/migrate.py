"""graph-override migrate: rewrite override-map code into TF2 code."""

import sys

HELP = "rewrite gradient_override_map / RegisterGradient code into TF2 code"
DESCRIPTION = """\
Rewrites each `with <graph>.gradient_override_map({...}):` scope of the given
Python files (folders are walked recursively for *.py) into calls of
graph_override.tf2.op_with_gradient, which work in eager mode, tf.function and
Keras, where TF2 silently ignores override maps. Comments and formatting are
kept; the code is parsed, never run.

By default a unified diff is printed (stdout) and nothing is written; --write
replaces the files atomically. The sites changed, the sites left for you and
the registrations kept (with file, line and reason) are listed on stderr. A
scope whose ops are created out of the tool's sight (a yield, a helper call,
an imported graph) and every call of a project's wrapper around
gradient_override_map are left as they are and listed.

Only regular files of at most 2 MiB are read (a FIFO or a device named *.py
is refused before anything is read), and code nested over 1,000 levels deep
is refused before it is parsed; such a file gets an error line naming the
limit, and the other files are migrated.

Exit status: 0 every site seen was converted, 1 some sites were left
unconverted (listed), 2 a path could not be read or parsed, or a file was
refused (such a file is never written)."""
EPILOG = ("examples:\n"
          "  graph-override migrate models/            # show the diff\n"
          "  graph-override migrate models/ --write    # apply it\n"
          "  graph-override migrate a.py b.py -q       # only the diff and the "
          "sites left")


def configure(parser):
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="Python files or folders (walked recursively)")
    parser.add_argument("--write", action="store_true",
                        help="write the migrated files (atomically) instead of "
                             "printing a diff")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not list the sites that were changed")


def run(args):
    from graph_override import migrate  # pylint: disable=import-outside-toplevel
    results = migrate.migrate_paths(args.paths, write=args.write)
    bad = left = changed_files = 0
    for r in results:
        if r.error is not None:
            bad += 1
            print("error: %s" % r.error, file=sys.stderr)
            continue
        res = r.result
        if res.modified:
            changed_files += 1
            if not args.write:
                sys.stdout.write(res.diff())
        if not args.quiet:
            for site in res.changed:
                print("changed: %s" % site, file=sys.stderr)
        for site in res.kept:
            print("kept:    %s" % site, file=sys.stderr)
        for site in res.untouched:
            left += 1
            print("left:    %s" % site, file=sys.stderr)
    files = sum(1 for r in results if r.error is None)
    verb = "migrated and written" if args.write else "would be migrated"
    print("%d file(s) read, %d %s, %d site(s) left for you, %d error(s)%s" % (
        files, changed_files, verb, left, bad,
        "" if args.write or not changed_files else
        "; run again with --write to apply"), file=sys.stderr)
    if bad:
        return 2
    return 1 if left else 0
