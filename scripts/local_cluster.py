#!/usr/bin/env python
"""Run a training script on a loopback cluster: 1 ps + 2 workers by default.

Every task is its own process running a tf.distribute.Server on a free
127.0.0.1 port; the workers train with between-graph replication (variables
on the parameter servers via replica_device_setter). The script is started
once per task with --cluster SPEC --job-name JOB --task-index I added.

    python scripts/local_cluster.py scripts/train_bnn.py --epochs 2 --no-progress

Prints each worker's output; exits with the largest worker exit status.
Ctrl-C stops every task (workers save a checkpoint first) and exits 130.
"""

import argparse
import sys

from graph_override.cli import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow's native start-up lines stay off stderr

from graph_override.training import cluster  # noqa: E402  pylint: disable=wrong-import-position


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/local_cluster.py --workers 2 "
               "scripts/train_bnn.py --epochs 2 --no-progress")
    parser.add_argument("--ps", type=int, default=1, help="parameter servers (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="kill the workers after this many seconds (default 300)")
    parser.add_argument("script", help="training script, e.g. scripts/train_bnn.py")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="arguments of the script")
    args = parser.parse_args(argv)
    if args.ps < 1 or args.workers < 1:
        parser.error("need at least one ps and one worker")
    try:
        outputs = cluster.launch_local_cluster(
            [sys.executable, args.script] + args.script_args, num_ps=args.ps,
            num_workers=args.workers, timeout=args.timeout)
    except KeyboardInterrupt:
        print("local_cluster.py: interrupted; every task was stopped",
              file=sys.stderr)
        return 130
    for out in outputs:
        print("===== worker %d (exit status %d) =====" % (out.task_index, out.returncode))
        print(out.stdout.rstrip())
        errors = [l for l in out.stderr.splitlines() if "error" in l.lower()]
        if errors:
            print("\n".join(errors))
    # A worker killed at the timeout has returncode -9: report 128 + signal,
    # as a shell does, so it never counts as success.
    return max(rc if rc >= 0 else 128 - rc for rc in (o.returncode for o in outputs))


if __name__ == "__main__":
    sys.exit(main())
