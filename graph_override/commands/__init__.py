"""The subcommands of `graph-override`, one module each: a module here with
HELP, DESCRIPTION, EPILOG, ``configure(parser)`` and ``run(args)`` is a
command (see cli.py). Keep module-level imports light: `--help` imports
every command module, and ``configure`` must not import TensorFlow."""
