"""Text from a graph made safe to print on a terminal.

A GraphDef is data from anyone: its node names, op types, function names
and gradient names may hold terminal escape sequences (ESC[2J clears the
screen, OSC 0 sets the window title), carriage returns that overwrite what
was printed, or bidirectional overrides (U+202E) that make text read other
than it is. `printable` writes every such character as an escape (``\\x1b``,
``\\u202e``), as Python's repr does; `EscapingStream` applies it to all that
a command prints (the CLI wraps stdout and stderr in it), so no printer can
forget. JSON output needs nothing more: json.dumps (ensure_ascii) already
escapes every character outside printable ASCII.
"""

import re

__all__ = ["EscapingStream", "printable"]

# C0 controls, DEL, C1 controls; bidi marks, embeddings, overrides, isolates.
_UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_PATTERNS = {}


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match):
    code = ord(match.group())
    if match.group() in _SHORT:
        return _SHORT[match.group()]
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def printable(text, keep=""):
    """`text` with every control and bidi character escaped, except those in
    `keep` (e.g. "\\n" for text of several lines).

    Example:
      >>> print(printable("evil\\x1b[2J\\r\\u202e"))
      evil\\x1b[2J\\r\\u202e
      >>> printable("two\\nlines\\t", keep="\\n\\t") == "two\\nlines\\t"
      True
    """
    pattern = _PATTERNS.get(keep)
    if pattern is None:
        unsafe = "".join(c for c in map(chr, range(0x100)) if re.match("[%s]" % _UNSAFE, c)
                         and c not in keep)
        pattern = _PATTERNS[keep] = re.compile(
            "[%s\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]" % re.escape(unsafe))
    return pattern.sub(_escape, text)


class EscapingStream:
    """A text stream that writes through `printable` (keeping newlines and
    tabs) to `stream`; everything else is `stream`'s."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(printable(text, keep="\n\t"))

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)
