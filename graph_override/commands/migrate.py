"""graph-override migrate (being built; see the open issue)."""

HELP = "migrate (not available yet)"
DESCRIPTION = HELP
EPILOG = ""


def configure(parser):
    del parser


def run(args):
    del args
    raise SystemExit("graph-override migrate is not available in this version")
