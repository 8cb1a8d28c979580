"""graph-override inspect (being built; see the open issue)."""

HELP = "inspect (not available yet)"
DESCRIPTION = HELP
EPILOG = ""


def configure(parser):
    del parser


def run(args):
    del args
    raise SystemExit("graph-override inspect is not available in this version")
