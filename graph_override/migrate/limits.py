"""What `migrate` accepts: bounded size and nesting, and a stack deep enough.

libcst's native parser recurses once per level of nesting in C, so deeply
nested code overflows the C stack and kills the process (SIGSEGV), and the
Python-side tree walks hit Python's recursion limit on code that is merely
deep but valid (a sum of 400 terms, 200 nested lists). Its trees also take
about 250 bytes of memory per byte of source. So, before any text reaches
libcst:

* `check_nesting` estimates the nesting with Python's tokenizer (no
  recursion, no syntax tree) and refuses what no real code needs: more than
  `MAX_NESTING` levels, and more than 200 brackets open at once, which
  CPython itself refuses;
* `run_deep` runs the parse and the analysis in a thread with a large stack
  and a raised recursion limit, so that what passes the check is migrated,
  and turns a RecursionError or MemoryError that still happens into a
  `SourceError` naming the file;
* files are read with a bounded size (`graph_override.migrate.sources`).
"""

import io
import sys
import threading
import tokenize

from graph_override.errors import SourceError

__all__ = ["MAX_NESTING", "check_nesting", "nesting_depth", "run_deep"]

# Levels of nesting (brackets, operators, attribute chains, elif chains and
# indentation) that one statement may reach. libcst's time grows with the
# square of the depth: 1,000 levels take a few seconds.
MAX_NESTING = 1000
# CPython's own limit (its tokenizer's MAXLEVEL): code beyond it does not run,
# so it is not migrated either.
MAX_BRACKETS = 200
# The stack and recursion limit of the thread that parses and analyses: enough
# for MAX_NESTING levels with room to spare (pages are used only when touched).
STACK_BYTES = 256 << 20
RECURSION_LIMIT = 60000

_KEYWORDS = frozenset(("and", "or", "not", "if", "else", "lambda", "await",
                       "in", "is", "for", "async", "yield", "from"))
_SIBLINGS = frozenset((",", ":", "=", ")", "]", "}"))
_OPENING, _CLOSING = frozenset("([{"), frozenset(")]}")
_IGNORED = frozenset((tokenize.NL, tokenize.COMMENT, tokenize.ENCODING,
                      tokenize.ENDMARKER))


def nesting_depth(text):
    """An estimate of how deep `text` nests, from its tokens alone.

    Each bracket, operator, attribute dot, expression keyword and implicitly
    concatenated string within one element (up to the next comma at its
    level) counts one level, as does each level of indentation and each
    ``elif`` of an open if-chain. Nothing is parsed, so nothing recurses.

    Example:
      >>> from graph_override.migrate.limits import nesting_depth
      >>> nesting_depth("x = [[1, -2], [3]]\\n")
      (3, 1, 2)

    Returns:
      (depth, line, brackets): the deepest estimate, the line where it is
      reached, and the most brackets open at once. Text the tokenizer
      cannot read is estimated up to that point (the parser then reports
      the syntax error).
    """
    best, brackets = (0, 1), 0
    # The sums of both are kept up to date as they change, so that each token
    # costs the same whatever the depth (summing the stack at every token
    # made a file of n nested brackets take n * n / 2 steps).
    elements = [0]      # levels counted in the current element, per open bracket
    chains = {}         # indentation -> elifs of the open if-chain there
    in_elements = in_chains = 0
    indent, start, previous = 0, True, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, string = tok.type, tok.string
            if kind in _IGNORED:
                continue
            if kind == tokenize.INDENT or kind == tokenize.DEDENT:
                indent += 1 if kind == tokenize.INDENT else -1
                # Only the chain one level in can close (one level per DEDENT).
                in_chains -= chains.pop(indent + 1, 0)
                continue
            if kind == tokenize.NEWLINE or string == ";":
                elements, start, previous, in_elements = [0], True, None, 0
                continue
            if start and kind == tokenize.NAME:
                in_chains += _count_elifs(chains, indent, string)
            start = False
            in_elements += _count_element(elements, kind, string, previous)
            brackets = max(brackets, len(elements) - 1)
            previous = kind
            depth = in_elements + indent + in_chains
            if depth > best[0]:
                best = (depth, tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass  # unterminated string or bracket, bad dedent: the parser says which
    return best + (brackets,)


def _count_element(elements, kind, string, previous):
    """Counts one token in `elements` (the levels of the current element per
    open bracket); returns by how much their sum changed."""
    if string == ",":
        closed, elements[-1] = elements[-1], 0
        return -closed
    if string in _CLOSING:
        return -elements.pop() if len(elements) > 1 else 0
    if string in _OPENING:
        elements[-1] += 1
        elements.append(0)
        return 1
    if (kind == tokenize.OP and string not in _SIBLINGS
            or kind == tokenize.NAME and string in _KEYWORDS
            or kind == tokenize.STRING and previous == tokenize.STRING):
        elements[-1] += 1
        return 1
    return 0


def _count_elifs(chains, indent, keyword):
    """Records an ``if`` (a new chain) or ``elif`` at `indent` in `chains`;
    returns by how much their sum changed."""
    if keyword not in ("if", "elif"):
        return 0
    before = chains.get(indent, 0)
    chains[indent] = chains.get(indent, -1) + 1 if keyword == "elif" else 0
    return chains[indent] - before


def check_nesting(text, filename):
    """Refuses text nested deeper than libcst (or CPython) can take.

    Raises:
      SourceError: naming `filename`, the line, the depth and the limit.
    """
    depth, line, brackets = nesting_depth(text)
    if brackets > MAX_BRACKETS:
        raise SourceError(
            "%s: %d brackets open at once (CPython's own limit is %d: 'too many "
            "nested parentheses'); this is not valid Python, so nothing was "
            "migrated. Fix the file and migrate again." % (
                filename, brackets, MAX_BRACKETS))
    if depth > MAX_NESTING:
        raise SourceError(
            "%s:%d: nested about %d levels deep (brackets, operators, attribute "
            "chains, elif chains and indentation; the limit is %d); nothing was "
            "migrated. Such code is usually generated: migrate the hand-written "
            "files, or split the deepest expression or if-elif chain." % (
                filename, line, depth, MAX_NESTING))


_LOCK = threading.RLock()
_LOCAL = threading.local()


def run_deep(fn, filename, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread with a deep stack, for `filename`.

    Calls made while one runs (from inside `fn`) run directly. Exceptions
    are raised again in the caller; a RecursionError or MemoryError becomes
    a `SourceError` naming `filename`.
    """
    if getattr(_LOCAL, "deep", False):
        return _guarded(fn, filename, args, kwargs)
    outcome = {}

    def work():
        _LOCAL.deep = True
        try:
            outcome["value"] = _guarded(fn, filename, args, kwargs)
        except BaseException as e:  # pylint: disable=broad-except
            outcome["error"] = e  # raised again in the caller's thread

    thread = threading.Thread(target=work, name="migrate", daemon=True)
    with _LOCK:  # the stack size and the recursion limit are process-wide
        limit, size = sys.getrecursionlimit(), threading.stack_size()
        sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
        try:
            try:
                threading.stack_size(STACK_BYTES)
                thread.start()
            except (RuntimeError, ValueError, MemoryError):  # no room for that stack
                thread = None
            finally:
                threading.stack_size(size)
            if thread is not None:
                thread.join()
        finally:
            sys.setrecursionlimit(limit)
    if thread is None:
        return _guarded(fn, filename, args, kwargs)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _guarded(fn, filename, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except RecursionError:
        reason = "nested too deeply for the parser (Python's recursion limit)"
    except MemoryError:
        reason = "ran out of memory while parsing it"
    raise SourceError("%s: %s; nothing was migrated. Split its deepest expressions "
                      "into smaller statements and migrate again." % (filename, reason))
