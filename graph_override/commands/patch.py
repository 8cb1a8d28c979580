"""graph-override patch (being built; see the open issue)."""

HELP = "patch (not available yet)"
DESCRIPTION = HELP
EPILOG = ""


def configure(parser):
    del parser


def run(args):
    del args
    raise SystemExit("graph-override patch is not available in this version")
