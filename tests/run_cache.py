"""Files built once per test run and shared by every worker.

The suite runs in several worker processes (pytest-xdist). A session-scoped
fixture runs once per worker; what is expensive to make (a frozen ResNet50, a
trained checkpoint) is made once per run instead: the first worker that asks
makes it under a lock, in the run's shared temporary folder, and the others
wait for it and read the same file. Without xdist the folder is the run's own.

    path = run_cache.shared_file(tmp_path_factory, "resnet50.pb", write)

`write(path)` makes the file (or folder) at `path`; it is moved into place
only when complete, so a worker never reads half a file.
"""

import contextlib
import os
import pathlib
import shutil

try:
    import fcntl
except ImportError:  # no flock (Windows): each worker makes its own copy
    fcntl = None


def run_folder(tmp_path_factory):
    """The temporary folder all workers of this run share."""
    base = pathlib.Path(tmp_path_factory.getbasetemp())
    if os.environ.get("PYTEST_XDIST_WORKER") and fcntl is not None:
        base = base.parent  # .../pytest-N/popen-gwK -> .../pytest-N
    folder = base / "run_cache"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(path):
    with open(str(path) + ".lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def shared_file(tmp_path_factory, name, write):
    """The path of `name` in the run's shared folder, made by write(path) once."""
    path = run_folder(tmp_path_factory) / name
    with _locked(path):
        if not path.exists():
            partial = path.with_name(path.name + ".partial")
            if partial.is_dir():
                shutil.rmtree(partial)
            elif partial.exists():
                partial.unlink()
            write(partial)
            os.replace(partial, path)
    return path
