"""Runs the code blocks of a Markdown page and compares what they print.

The README and every guide in docs/ are checked by tests/docs/test_doc_pages.py
with this module. The rules a page follows, block by block, in order:

* ```` ```pycon ````: a doctest session (``>>>`` lines and their output),
  checked with ELLIPSIS and NORMALIZE_WHITESPACE.
* ```` ```python ````: executed; what it prints must match the ```` ```text ````
  block that follows it directly, if there is one, and be empty otherwise.
* ```` ```python title="NAME" ```` (or any language with a title): not
  executed; written to the file NAME in the page's scratch folder, so that
  later blocks can run or migrate it.
* ```` ```console ````: each ``$ COMMAND`` line runs in bash in the page's
  scratch folder; the lines up to the next ``$`` are its expected output
  (stdout and stderr together), matched like a doctest (``...`` stands for
  anything).
* ``<!-- run: COMMAND -->`` on a line of its own: a set-up command, run
  before the next block and not shown (for example building a model file).
* ``<!-- not-run: REASON -->`` directly before a block: the block is not run.
  The Quickstart's install commands are such blocks.

Python blocks of one page share one namespace; every page gets its own
scratch folder, holding links to the repository's scripts/ and tools/ folders. Blocks
must leave TensorFlow's global mode alone (build graphs inside
``with tf.Graph().as_default():``).
"""

import contextlib
import doctest
import io
import os
import pathlib
import re
import subprocess
import sys

import warm_python

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_FENCE = re.compile(r"^```([\w+-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_TITLE = re.compile(r'title="([^"]+)"')
_COMMENT = re.compile(r"<!--\s*(run|not-run):\s*(.*?)\s*-->")


class Block:
    """One fenced block: its language, title, text and what precedes it."""

    def __init__(self, lang, title, text, line, setup, skip):
        self.lang, self.title, self.text, self.line = lang, title, text, line
        self.setup, self.skip = setup, skip
        self.expected = None  # the ```text block after a python block

    def __repr__(self):
        return "%s block at line %d" % (self.lang or "plain", self.line)


def blocks(markdown):
    """The page's blocks in order; a ```text block that follows a python
    block directly is that block's expected output, not a block of its own."""
    found, pos, pending_setup = [], 0, []
    for m in _FENCE.finditer(markdown):
        between = markdown[pos:m.start()]
        skip = None
        for c in _COMMENT.finditer(between):
            if c.group(1) == "run":
                pending_setup.append(c.group(2))
            else:
                skip = c.group(2)
        lang = m.group(1)
        title = _TITLE.search(m.group(2))
        line = markdown.count("\n", 0, m.start()) + 1
        text = m.group(3)
        prev = found[-1] if found else None
        if (lang == "text" and prev is not None and prev.lang == "python"
                and prev.title is None and prev.expected is None
                and not between.strip() and not skip):
            prev.expected = text
        else:
            found.append(Block(lang, title.group(1) if title else None, text,
                               line, pending_setup, skip))
            pending_setup = []
        pos = m.end()
    return found


def _match(want, got):
    return doctest.OutputChecker().check_output(want, got, FLAGS)


def _diff(want, got):
    example = doctest.Example("x", want)
    return doctest.OutputChecker().output_difference(example, got, FLAGS)


def _bash(command, cwd, env):
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=600, check=False)
    return proc.stdout


def _environment(scratch):
    del scratch  # the launchers are shared by every page of the run
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # `python` and `graph-override` are launchers of this interpreter
    # (tests/warm_python.py): each command is a new process, forked from one
    # that has imported TensorFlow already. The launcher runs this interpreter
    # by its own path, not through a link: a virtual environment's
    # interpreter reached through a link in another folder does not find its
    # pyvenv.cfg, and runs as the base Python without the environment's
    # packages.
    env["PATH"] = os.pathsep.join([str(warm_python.shims()), os.path.dirname(sys.executable),
                                   env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["COLUMNS"] = "100"
    return env


def _console(block, scratch, env, where):
    failures = []
    commands = re.split(r"^\$ ", block.text, flags=re.M)
    if commands[0].strip():
        failures.append("%s: a console block starts with output, not a `$ ` line" % where)
    for chunk in commands[1:]:
        command, _, want = chunk.partition("\n")
        got = _bash(command, scratch, env)
        if not _match(want, got):
            failures.append("%s: `%s` printed something else:\n%s"
                            % (where, command, _diff(want, got)))
    return failures


def _python(block, namespace, where):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, where, "exec"), namespace)  # pylint: disable=exec-used
    want = block.expected or ""
    if not _match(want, out.getvalue()):
        return ["%s printed something else:\n%s" % (where, _diff(want, out.getvalue()))]
    return []


def _pycon(block, namespace, where):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, namespace, where, where, 0)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    runner.run(test, out=out.write, clear_globs=False)
    if runner.failures:
        return ["%s:\n%s" % (where, out.getvalue())]
    return []


def run_page(path, scratch):
    """Runs every block of the page at `path` in the folder `scratch`.

    Returns a list of failure messages (empty when the page is right).
    """
    path = pathlib.Path(path)
    scratch = pathlib.Path(scratch)
    for folder in ("scripts", "tools"):  # user programs and developer tools
        (scratch / folder).symlink_to(ROOT / folder)
    env = _environment(scratch)
    namespace = {"__name__": "__doc_page__"}
    failures = []
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        for block in blocks(path.read_text(encoding="utf-8")):
            where = "%s:%d" % (path.name, block.line)
            for command in block.setup:
                _bash(command, scratch, env)
            if block.skip:
                continue
            if block.title:
                target = scratch / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
            elif block.lang == "console":
                failures += _console(block, scratch, env, where)
            elif block.lang == "python":
                failures += _python(block, namespace, where)
            elif block.lang == "pycon":
                failures += _pycon(block, namespace, where)
            else:
                failures.append("%s: a ```%s block is neither run nor marked "
                                "<!-- not-run: REASON -->" % (where, block.lang))
    finally:
        os.chdir(cwd)
    return failures
