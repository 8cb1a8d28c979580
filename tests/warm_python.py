"""Fresh Python processes that start with TensorFlow already imported.

Many tests run a program as a user runs it: a script of scripts/, a
`graph-override` command of a guide, a check in a process that never
imported graph_override. Each such process spends seconds importing
TensorFlow before it does anything. This module keeps one server process per
test worker that has imported TensorFlow, numpy and Keras (and nothing of
graph_override) and forks a child for each command: the child is a new
process with a new pid, its own stdin, stdout, stderr, working folder,
environment and argv, in which graph_override has never been imported: what
the tests ask of a "fresh process". Forking costs about 0.2 s where importing
TensorFlow costs 3-5 s.

Programs reach the server through two small launchers, `python` and
`graph-override`, in the folder `shims()` returns: put it first on PATH (the
guides' commands run so, tests/doc_blocks.py), or call `run()`, a drop-in for
subprocess.run with argv[0] == sys.executable. A launcher runs the real
program instead (exec) whenever a forked child could differ from a new
interpreter:
  - options other than `-c CODE`, `-m MODULE` or a script path (`-u`, `-I`,
    `-X ...`, reading the program from stdin);
  - an environment whose PYTHONPATH, PYTHONHASHSEED or any TF_* variable
    differs from the server's (TensorFlow and Python read those at start-up);
  - no server (it failed to start, or GRAPH_OVERRIDE_TEST_NO_FORK=1).
Tests whose point is start-up itself (what a command imports, a broken
TensorFlow, the console script's entry point, signals and kills) use
subprocess directly.
"""

import atexit
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]
_PRELOAD = "import numpy, tensorflow as tf; tf.keras.layers.Dense; tf.compat.v1.Session"
_PRELOAD_TIMEOUT = 300
# Variables read when the interpreter or TensorFlow starts: a child forked
# from the server would not see a different value, so the launcher execs.
_START_UP = ("PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONDONTWRITEBYTECODE",
             "PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONSAFEPATH", "PYTHONUNBUFFERED",
             "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONMALLOC", "PYTHONFAULTHANDLER")

# TensorFlow variables read when they are used, not at import: a child
# forked after `import tensorflow` sees them as a new interpreter does.
_READ_LATER = ("TF_CONFIG",)

_LAUNCHER = '''#!{python} -S
# A launcher of tests/warm_python.py: asks the server at {socket!r} to fork a
# child that runs this command, or runs the real program.
import array, json, os, socket, sys
REAL = {real!r}
argv = sys.argv[1:]
def real():
    os.execv(REAL[0], REAL + argv)
if os.environ.get("GRAPH_OVERRIDE_TEST_NO_FORK", "") not in ("", "0"):
    real()
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({socket!r})
except OSError:
    real()
import resource
limits = dict((name, resource.getrlimit(getattr(resource, name)))
              for name in dir(resource) if name.startswith("RLIMIT_"))
mask = os.umask(0o22)
os.umask(mask)
head = json.dumps(dict(program={program!r}, argv=argv, cwd=os.getcwd(), env=dict(os.environ),
                       limits=limits, umask=mask)).encode()
socket.send_fds(s, [len(head).to_bytes(8, "big") + head], [0, 1, 2])
answer = b""
while True:
    chunk = s.recv(64)
    if not chunk:
        break
    answer += chunk
answer = answer.decode()
if answer == "exec":
    real()
if not answer.startswith("status "):
    sys.stderr.write("warm_python: the server went away (%r)\\n" % answer)
    sys.exit(1)
status = int(answer.split()[1])
if status < 0:
    os.kill(os.getpid(), -status)
sys.exit(status)
'''


def _entries(env):
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _shadows(folder, preloaded):
    """Whether `folder` holds a module the server has imported already."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(name.split(".")[0] in preloaded for name in names)


def _runnable(program, argv, env, own_env, preloaded):
    """Whether a forked child runs this command as a new interpreter would."""
    for name in set(env) | set(own_env):
        start_up = name in _START_UP or (name.startswith("TF_") and name not in _READ_LATER)
        if start_up and env.get(name) != own_env.get(name):
            return False
    own = _entries(own_env)
    if any(_shadows(p, preloaded) for p in _entries(env) if p not in own):
        return False
    if program == "graph-override":
        return True
    if not argv:
        return False
    if argv[0] in ("-c", "-m"):
        return len(argv) >= 2
    return not argv[0].startswith("-")


def _stream(fd, mode, errors, line_buffering, unbuffered):
    """A standard stream on `fd` as the interpreter makes it: with
    PYTHONUNBUFFERED the text layer writes straight to the file."""
    import io  # pylint: disable=import-outside-toplevel
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "rb":
        return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors=errors)
    if unbuffered:
        return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors=errors,
                            line_buffering=line_buffering)


def _child(request, site_path):
    """In the forked child: become the command, run it, exit with its status."""
    import builtins  # pylint: disable=import-outside-toplevel
    import resource  # pylint: disable=import-outside-toplevel
    program, argv, cwd, env = (request[k] for k in ("program", "argv", "cwd", "env"))
    limits, mask = request["limits"], request["umask"]
    import runpy  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # As a new interpreter sets them up: stdout line-buffered on a terminal
    # only, stderr always (Python 3.9 and later).
    unbuffered = env.get("PYTHONUNBUFFERED", "") != ""
    sys.stdin = sys.__stdin__ = _stream(0, "rb", "strict", False, unbuffered)
    sys.stdout = sys.__stdout__ = _stream(1, "wb", "strict", os.isatty(1), unbuffered)
    sys.stderr = sys.__stderr__ = _stream(2, "wb", "backslashreplace", True, unbuffered)
    for limit, value in limits.items():
        resource.setrlimit(getattr(resource, limit), value)
    os.umask(mask)
    base_path = _entries(env) + site_path
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    status = 0
    try:
        if program == "graph-override":
            sys.argv = ["graph-override"] + argv
            sys.path[:] = [os.path.dirname(sys.executable)] + base_path
            from graph_override import cli  # pylint: disable=import-outside-toplevel
            sys.exit(cli.main())
        elif argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            sys.path[:] = [""] + base_path
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)  # pylint: disable=exec-used
        elif argv[0] == "-m":
            sys.argv = [argv[1]] + argv[2:]
            sys.path[:] = [cwd] + base_path
            sys.modules["__main__"] = main
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(argv[0])
            sys.argv = argv
            sys.path[:] = [os.path.dirname(script)] + base_path
            sys.modules["__main__"] = main
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            status = 0
        elif isinstance(stop.code, int):
            status = stop.code & 0xFF
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException as error:  # pylint: disable=broad-except
        # The traceback a new interpreter prints: from the program's own
        # first frame, without this module's and runpy's.
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
            tb = tb.tb_next
        sys.excepthook(type(error), error, tb)
        status = 1
    try:
        atexit._run_exitfuncs()  # pylint: disable=protected-access
    finally:
        for out in (sys.stdout, sys.stderr):
            try:
                out.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


def _serve(path):
    """The server: preload, listen, fork a monitor per request, which forks
    the child that runs the command and reports its exit status."""
    own = _entries(os.environ)
    # Without this file's folder (sys.path[0]) and PYTHONPATH's entries: each
    # child puts its own PYTHONPATH in front.
    site_path = [p for p in sys.path[1:] if p not in own]
    exec(_PRELOAD, {})  # pylint: disable=exec-used
    preloaded = {name.split(".")[0] for name in sys.modules}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    own_env = dict(os.environ)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() != 0:
            conn.close()
            continue
        # The monitor.
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        passed = []
        try:
            size = b""
            while len(size) < 8:
                data, fds, _, _ = socket.recv_fds(conn, 8 - len(size), 3)
                size += data
                if fds:
                    passed = fds
                if not data:
                    os._exit(1)
            size = int.from_bytes(size, "big")
            head = b""
            while len(head) < size:
                data = conn.recv(size - len(head))
                if not data:
                    os._exit(1)
                head += data
            request = json.loads(head)
            if not _runnable(request["program"], request["argv"], request["env"], own_env,
                             preloaded):
                conn.sendall(b"exec")
                os._exit(0)
            pid = os.fork()
            if pid == 0:
                conn.close()
                for target, fd in enumerate(passed):
                    os.dup2(fd, target)
                    os.close(fd)
                _child(request, site_path)
            for fd in passed:
                os.close(fd)
            _, status = os.waitpid(pid, 0)
            conn.sendall(b"status %d" % os.waitstatus_to_exitcode(status))
        finally:
            os._exit(0)


class _Server:
    def __init__(self):
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="warm_python_"))
        self.socket = str(self.folder / "server.sock")
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.socket],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, text=True,
            stderr=open(self.folder / "server.log", "wb"))  # pylint: disable=consider-using-with
        ready = []
        reader = threading.Thread(target=lambda: ready.append(self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(_PRELOAD_TIMEOUT)
        if not (ready and ready[0].strip() == "ready"):
            # It failed to import TensorFlow, or hangs: the launchers find
            # no socket and run the real programs.
            self.stop()
        launchers = {
            "python": [sys.executable],
            "graph-override": [sys.executable, "-c",
                               "import sys; from graph_override.cli import main; "
                               "sys.argv[0] = 'graph-override'; sys.exit(main())"],
        }
        self.bin = self.folder / "bin"
        self.bin.mkdir()
        for name, real in launchers.items():
            launcher = self.bin / name
            launcher.write_text(_LAUNCHER.format(python=sys.executable, socket=self.socket,
                                                 real=real, program=name))
            launcher.chmod(0o755)
        atexit.register(self.stop)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


_server = None


def _get():
    global _server  # pylint: disable=global-statement
    if _server is None:
        _server = _Server()
    return _server


def shims():
    """The folder of the `python` and `graph-override` launchers."""
    return _get().bin


def _through_server(argv):
    argv = list(argv)
    if argv and argv[0] == sys.executable:
        argv[0] = str(shims() / "python")
    return argv


def run(argv, **kwargs):
    """subprocess.run(argv, **kwargs), through the server when argv[0] is
    this interpreter (sys.executable)."""
    return subprocess.run(_through_server(argv), **kwargs)  # pylint: disable=subprocess-run-check


def popen(argv, **kwargs):
    """subprocess.Popen(argv, **kwargs), likewise. Signals sent to it reach
    the launcher, not the forked child: a test that kills or interrupts the
    program uses subprocess.Popen."""
    return subprocess.Popen(_through_server(argv), **kwargs)  # pylint: disable=consider-using-with



if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve(sys.argv[2])
