"""The legacy modules here are fixtures, not tests: never collect them."""

collect_ignore_glob = ["*.py"]
