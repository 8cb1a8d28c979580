"""`python -m graph_override` runs the command line."""

import sys

from graph_override.cli import main

if __name__ == "__main__":  # tools that import every module must not run it
    sys.exit(main())
