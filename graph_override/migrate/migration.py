"""Rewrite override-map code into TF2 code, keeping comments and formatting.

TF2 ignores ``Graph.gradient_override_map`` in eager code and under a
GradientTape inside tf.function, and ``tf_upgrade_v2`` leaves it alone, so
legacy code silently loses its custom gradients. `migrate_source` rewrites
one file::

    @tf.RegisterGradient("SignSTE")              def _sign_ste(op, grad):
    def _sign_ste(op, grad):                         ...
        ...                              ->
    g = tf.get_default_graph()                   y = op_with_gradient(
    with g.gradient_override_map(                        tf.sign, _sign_ste)(x)
            {"Sign": "SignSTE"}):
        y = tf.sign(x)

It handles module-level registrations, the counter idiom (a fresh name per
call, ``"FlipGradient%d" % self.num_calls``), maps onto TensorFlow's own
gradients (``{"Round": "Identity"}``), several keys and several calls per
scope, nested scopes and aliases (``tf.math.sign``, ``tf.compat.v1.sign``,
``import tensorflow.compat.v1 as tf``). Whatever it cannot convert safely
(a map built at run time, a helper defined elsewhere called inside the
scope, an operator that may create a re-routed op) stays as it is and is
reported with file, line and reason. It parses the code with libcst and
never runs it; migrating migrated code changes nothing.
"""

import ast
import collections
import dataclasses
import difflib
import os
import re

import libcst as cst

from graph_override.migrate import analysis as _analysis
from graph_override.migrate import limits as _limits
from graph_override.migrate.rewrite import rewrite
from graph_override.migrate.sources import as_paths, iter_python_files, read_source
from graph_override._files.atomic import atomic_write
from graph_override._files.read import read_regular_file
from graph_override.errors import SourceError

__all__ = [
    "FileResult",
    "MigrationResult",
    "Site",
    "map_names",
    "migrate_file",
    "migrate_paths",
    "migrate_source",
    "write_atomically",
]


@dataclasses.dataclass(frozen=True)
class Site:
    """One place the migration changed, or left for the user."""

    filename: str
    line: int
    message: str

    def __str__(self):
        return "%s:%d: %s" % (self.filename, self.line, self.message)


@dataclasses.dataclass(frozen=True)
class MigrationResult:
    """The migrated text of one file and what was done to it.

    Attributes:
      filename: as given to `migrate_source` (used in messages and diffs).
      original: the input text.
      text: the migrated text (equal to `original` when nothing changed).
      changed: `Site`s rewritten, by line of the input.
      untouched: `Site`s left unconverted, with the reason as message.
      kept: `Site`s of code left on purpose although the sites that used it
        were converted (a registration other code may still use by name),
        with the reason as message. Not sites to convert.
    """

    filename: str
    original: str
    text: str
    changed: tuple
    untouched: tuple
    kept: tuple = ()

    @property
    def modified(self):
        """True if the migrated text differs from the input."""
        return self.text != self.original

    def diff(self):
        """A unified diff from the input to the migrated text ('' if none)."""
        if not self.modified:
            return ""
        return "".join(difflib.unified_diff(
            self.original.splitlines(True), self.text.splitlines(True),
            fromfile="a/" + self.filename.lstrip("/"),
            tofile="b/" + self.filename.lstrip("/")))


def _parse(text, filename):
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        line, column, message = e.editor_line, e.editor_column, e.message
    # Python's own parser names the cause better ("'(' was never closed");
    # it only parses (ast), it never runs anything.
    try:
        ast.parse(text, filename)
    except SyntaxError as e:
        line, column, message = e.lineno or line, e.offset or column, e.msg
    except ValueError:  # source with NUL bytes
        message = "the file contains NUL bytes"
    raise SourceError(
        "%s:%s:%s: cannot parse the file as Python (%s); nothing was "
        "migrated or written. Fix the syntax error (Python 2 code: run it "
        "through 2to3 first) and migrate again." % (
            filename, line, column, message))


def migrate_source(text, filename="<string>", *, keep_registrations=(),
                   wrappers=None):
    """Rewrites the override-map code of one Python source into TF2 code.

    Each ``with <graph>.gradient_override_map({...}):`` scope whose map is a
    dict literal, and whose body only creates ops this tool can name, is
    removed; each call inside it that creates an op the map re-routes
    becomes ``op_with_gradient(<the same function>, <gradient>)(<the same
    arguments>)``. The gradient is the registered function itself when the
    file registers it, else the name, which
    `graph_override.tf2.op_with_gradient` resolves at run time
    (TensorFlow's own such as "Identity" included). ``g =
    tf.get_default_graph()`` and counter names left unused are removed, and
    ``from graph_override.tf2 import op_with_gradient`` is added.

    Never rewritten, always listed in `untouched`: a scope whose ops this
    tool cannot see created inside it (a ``yield``, a call into a helper, an
    imported graph), whose ops run at another time (a generator expression
    across its boundary), or whose output the code inspects (``.op``,
    ``.name``, ``.graph``), and every call of a wrapper around
    ``gradient_override_map`` (this file's, or `wrappers`) that hands the
    open map to its caller's code. A registration
    under a literal name is never removed (code this tool does not see may
    use the name); `kept` says so. Only the counter idiom's registration,
    whose name nothing else can know, goes.

    Example:
      >>> from graph_override.migrate import migrate_source
      >>> legacy = '''import tensorflow.compat.v1 as tf
      ... def quantize(x, n):
      ...     with tf.get_default_graph().gradient_override_map({"Round": "Identity"}):
      ...         return tf.round(x * n) / n
      ... '''
      >>> result = migrate_source(legacy, "dorefa.py")
      >>> print(result.text)
      import tensorflow.compat.v1 as tf
      from graph_override.tf2 import op_with_gradient
      def quantize(x, n):
          return op_with_gradient(tf.round, "Identity")(x * n) / n
      <BLANKLINE>
      >>> [str(s) for s in result.untouched]
      []

    Args:
      text: the source code.
      filename: the name used in messages, sites and diffs.
      keep_registrations: gradient names other files use in their override
        maps (the report of a kept registration then says so).
      wrappers: {name: `graph_override.migrate.analysis.Wrapper`} of the
        wrappers around gradient_override_map that other files define; their
        call sites in this file are listed.

    Returns:
      A `MigrationResult`. Migrating its `text` again changes nothing.

    Raises:
      SourceError: `text` is not valid Python, or nests deeper than
        `graph_override.migrate.limits.MAX_NESTING` levels (nothing is
        migrated).
    """
    if not isinstance(text, str):
        raise TypeError("migrate_source(text): expected str, got %s"
                        % type(text).__name__)
    _limits.check_nesting(text, filename)  # before libcst's parser recurses
    return _limits.run_deep(_migrate_text, filename, text, filename,
                            keep_registrations, wrappers)


def _migrate_text(text, filename, keep_registrations, wrappers):
    module = _parse(text, filename)
    found = {n: w for n, w in (wrappers or {}).items() if n in text}
    found.update({n: dataclasses.replace(w, local=True) for n, w in
                  _analysis.find_wrappers(text, filename).items()})
    if "gradient_override_map" not in text and not found:
        # nothing to do: skip the analysis
        return MigrationResult(filename=filename, original=text, text=text,
                               changed=(), untouched=())
    new_module, plan = rewrite(module, keep_registrations, found)
    new_text = new_module.code if new_module is not module else text
    if new_text != text:
        _parse(new_text, filename + " (migrated)")  # never hand out bad code

    def sites(pairs):
        return tuple(Site(filename, line, msg) for line, msg in pairs)

    return MigrationResult(
        filename=filename, original=text, text=new_text,
        changed=sites(plan.changed), untouched=sites(plan.untouched),
        kept=sites(plan.kept))


# ---------------------------------------------------------------------------
# Files and trees.

@dataclasses.dataclass(frozen=True)
class FileResult:
    """The outcome for one file: a MigrationResult, or the error that
    stopped it (`error`), and whether the file was written."""

    path: str
    result: object = None
    error: str = None
    written: bool = False


def write_atomically(path, data, *, expected=None):
    """Writes bytes `data` to `path` atomically, keeping its permissions.

    A temporary file in the same folder is written, flushed and renamed over
    `path` (`os.replace`), so readers see the old or the new file, never a
    partial one. With `expected`, the write is refused if `path` no longer
    holds those bytes (someone edited it meanwhile).

    Raises:
      SourceError: the file changed since it was read, or cannot be written.
    """
    path = os.path.realpath(path)  # write through a symlink, keep the link
    try:
        if expected is not None:
            current = read_regular_file(
                path, len(expected), error=SourceError,
                expected="the Python file that was migrated",
                too_large="%s: the file grew while it was being migrated; it "
                          "was not written. Run the migration again.")
            if current != expected:
                raise SourceError("%s: the file changed while it was being "
                                  "migrated; it was not written. Run the "
                                  "migration again." % path)
        atomic_write(path, data)
    except OSError as e:
        raise SourceError("%s: cannot write the migrated file (%s); the original "
                          "is unchanged." % (path, e.strerror or e)) from None


def migrate_file(path, *, write=False, keep_registrations=(), wrappers=None):
    """Migrates one file; writes it (atomically) only if `write` is true.

    Returns:
      A `FileResult`; parse and read errors are reported in it, not raised.
    """
    try:
        source = read_source(path)
        _limits.check_nesting(source[1], path)
    except SourceError as e:
        return FileResult(path, error=str(e))
    return _migrate_read_file(path, source, write, keep_registrations, wrappers)


def _migrate_read_file(path, source, write, keep_registrations, wrappers=None):
    """migrate_file on a file already read and checked (`check_nesting`):
    source is read_source's (raw, text, encoding); the write checks the file
    still holds `raw`."""
    raw, text, encoding = source
    try:
        result = _limits.run_deep(_migrate_text, path, text, path,
                                  keep_registrations, wrappers)
    except SourceError as e:
        return FileResult(path, error=str(e))
    written = False
    if write and result.modified:
        data = result.text.encode(encoding)  # utf-8-sig writes the BOM back
        try:
            write_atomically(path, data, expected=raw)
        except SourceError as e:
            return FileResult(path, result=result, error=str(e))
        written = True
    return FileResult(path, result=result, written=written)


_MAP_RE = re.compile(r"gradient_override_map\(\s*\{([^}]*)\}", re.S)
_STR_RE = re.compile(r"""["']([^"'\n]+)["']""")


def map_names(text):
    """Gradient names written as string literals in override maps (a cheap
    scan used to keep registrations that other files rely on)."""
    names = set()
    for body in _MAP_RE.findall(text):
        names.update(_STR_RE.findall(body))
    return names


def migrate_paths(paths, *, write=False):
    """Migrates files and folders (walked recursively for .py files).

    The files are scanned first, so that each one's report knows the
    gradient names the other files use in override maps, and the calls in
    it of wrappers around gradient_override_map that other files define.
    Bad paths and unparsable files are reported in the results (their
    `error`), never written, and do not stop the others.

    Args:
      paths: a list (any iterable) of files and folders; a single path (a
        str or `os.PathLike`) is taken as one path, never as the characters
        of a string.
      write: write the migrated files (atomically).

    Returns:
      A list of `FileResult`, in the order of `paths` and then of the walk.

    Raises:
      TypeError: `paths` or one of them is not a str or `os.PathLike`
        naming a str path (bytes paths are refused).
    """
    paths = as_paths(paths)
    return _limits.run_deep(_migrate_paths, "migrate_paths", paths, write)


def _migrate_paths(paths, write):
    plan, files = [], []  # plan: per path, its files or its error
    for path in paths:
        try:
            found = iter_python_files(path)
        except SourceError as e:
            plan.append(FileResult(path, error=str(e)))
            continue
        plan.append(found)
        files.extend(found)
    # each file is read once, for the scan and the migration
    sources, uses, defined = {}, {}, {}
    for f in files:
        try:
            sources[f] = read_source(f)
            _limits.check_nesting(sources[f][1], f)  # before the scan parses it
            defined[f] = _limits.run_deep(_analysis.find_wrappers, f, sources[f][1], f)
        except SourceError as e:
            sources[f] = e
            continue
        text = sources[f][1]
        uses[f] = map_names(text) if "gradient_override_map" in text else set()
    counts = collections.Counter(n for names in uses.values() for n in names)
    results = []
    for entry in plan:
        if isinstance(entry, FileResult):
            results.append(entry)
            continue
        for f in entry:
            own = uses.get(f, set())
            keep = {n for n, c in counts.items() if c > (1 if n in own else 0)}
            if isinstance(sources[f], SourceError):
                results.append(FileResult(f, error=str(sources[f])))
            else:
                others = {}
                for g, found in defined.items():
                    if g != f:
                        others.update(found)
                results.append(_migrate_read_file(f, sources[f], write, keep, others))
    return results
