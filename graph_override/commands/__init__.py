"""The subcommands of `graph-override`, one module each (see cli.py)."""
