"""`python -m graph_override` runs the command line."""

import sys

from graph_override.cli import main

sys.exit(main())
