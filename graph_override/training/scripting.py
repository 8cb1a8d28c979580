"""Flags and error handling shared by scripts/train_*.py.

The scripts stay thin: they add their own flags, call `add_common_flags`,
and hand `loop_arguments(args)` to a `recipes` function inside
`run_main`, which turns the library's errors into messages and exit codes
(0 done, 1 the cluster could not be reached, 2 bad usage or input, or a
folder that cannot be written) and serves, when the task is a parameter
server, until Ctrl-C (SIGINT) or SIGTERM, then exits 0.
"""

import argparse
import os
import sys

from graph_override.training import cluster as cluster_lib
from graph_override.training import models
from graph_override.training.errors import ClusterUnreachableError

__all__ = ["add_common_flags", "loop_arguments", "new_parser", "run_main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_common_flags(parser, epochs, log_every=1):
    """Adds --family, --epochs, --log-every, --seed, --logdir,
    --checkpoint-dir and the cluster flags."""
    parser.add_argument("--family", choices=models.FAMILIES, default="overrides",
                        help="how the estimators get their gradient: overrides "
                             "(gradient_override_map), stopgrad (stop_gradient "
                             "identity) or tf2 (tf.custom_gradient); default "
                             "overrides")
    parser.add_argument("--epochs", type=int, default=epochs,
                        help="training epochs (default %d)" % epochs)
    parser.add_argument("--log-every", type=int, default=log_every, metavar="EPOCHS",
                        help="print the evaluation of every EPOCHS-th epoch and "
                             "of the last (default %d)" % log_every)
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--logdir", help="TensorBoard summaries go here")
    parser.add_argument("--checkpoint-dir",
                        help="save checkpoints here and resume from the latest one")
    parser.add_argument("--checkpoint-every", type=int, metavar="STEPS",
                        help="also save every STEPS steps (default: at an epoch's "
                             "end at most every 30 s, at the end, and on Ctrl-C)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar")
    group = parser.add_argument_group(
        "distributed (TensorFlow's runtime, between-graph replication)")
    group.add_argument("--cluster", metavar="SPEC",
                       help='cluster spec: JSON {"ps": [...], "worker": [...]}, '
                            "ps=HOST:PORT;worker=HOST:PORT,HOST:PORT, or a file")
    group.add_argument("--job-name", choices=("ps", "worker"), default="worker",
                       help="this task's job (default worker)")
    group.add_argument("--task-index", type=int, default=0,
                       help="this task's index in its job (default 0; worker 0 "
                            "is the chief)")
    group.add_argument("--cluster-timeout", type=float, default=30.0,
                       metavar="SECONDS",
                       help="fail if the cluster does not answer within this "
                            "time (default 30)")


def loop_arguments(args):
    """The `loop.train` keyword arguments of the parsed common flags."""
    task = None
    if args.cluster:
        task = cluster_lib.ClusterTask.create(args.cluster, args.job_name,
                                              args.task_index, args.cluster_timeout)
    if args.epochs < 0:
        raise ValueError("--epochs must be 0 or more, got %d" % args.epochs)
    if args.log_every < 1:
        raise ValueError("--log-every must be 1 or more, got %d" % args.log_every)
    return dict(logdir=args.logdir, checkpoint_dir=args.checkpoint_dir,
                checkpoint_every=args.checkpoint_every, cluster=task,
                progress=not args.no_progress, log=print, log_every=args.log_every)


def run_main(parser, body, argv=None):
    """Parses argv, serves a ps task or runs ``body(args, loop_args)``.

    Returns the exit status; errors print as ``PROG: error: message``.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = parser.parse_args(argv)
    try:
        loop_args = loop_arguments(args)
        task = loop_args["cluster"]
        if task is not None and task.job_name == "ps":
            cluster_lib.run_parameter_server(task, on_ready=lambda: print(
                "parameter server %d serving on %s (stop it with Ctrl-C or "
                "kill)" % (task.task_index, task.address), flush=True))
            print("parameter server %d stopped" % task.task_index, flush=True)
            # TensorFlow cannot stop its server, and tearing the runtime
            # down around it takes seconds: end the process at once.
            sys.stderr.flush()
            os._exit(EXIT_OK)  # pylint: disable=protected-access
        if task is not None:
            print("worker %d of %d on %s%s" % (
                task.task_index, len(task.spec["worker"]), task.address,
                " (chief)" if task.is_chief else ""), flush=True)
        body(args, loop_args)
    except ClusterUnreachableError as e:
        print("%s: error: %s" % (parser.prog, e), file=sys.stderr)
        if getattr(e, "session", None) is not None:
            # TensorFlow would block closing a Session whose ps tasks died.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_FAILED)  # pylint: disable=protected-access
        return EXIT_FAILED
    except (ValueError, OSError, ImportError) as e:  # ImportError: no scikit-learn
        print("%s: error: %s" % (parser.prog, e), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("%s: interrupted; rerun with the same --checkpoint-dir to resume"
              % parser.prog, file=sys.stderr)
        return 130
    return EXIT_OK


def new_parser(script, description, epilog):
    """An ArgumentParser named after `script` (a path) keeping line breaks."""
    return argparse.ArgumentParser(
        prog=os.path.basename(script), description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter)
