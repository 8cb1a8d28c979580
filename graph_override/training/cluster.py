"""TensorFlow's own distributed runtime for the training scripts.

Between-graph replication, as TF1 training jobs did it: every task is a
process running a `tf.distribute.Server`; parameter servers (job "ps") only
serve variables; every worker builds its own copy of the graph under
`tf.compat.v1.train.replica_device_setter` (variables on the ps tasks,
compute on the worker) and runs its own Session against its own server.
Worker 0 is the chief: it initializes or restores the variables and writes
checkpoints and summaries. Gradient overrides are resolved in each worker's
process when it builds its graph, so they hold on every worker.

A cluster that cannot be reached fails with `ClusterUnreachableError` within
`timeout` seconds (a TCP check of the parameter servers, then a Session
``operation_timeout_in_ms``), never hangs.

`local_cluster_spec` and `launch_local_cluster` run a whole cluster on
loopback ports, one subprocess per task, for trying it on one machine.
"""

import collections
import json
import os
import signal
import socket
import subprocess
import threading
import time

import tensorflow as tf

from graph_override.training.errors import ClusterSpecError, ClusterUnreachableError

__all__ = ["ClusterTask", "TaskOutput",
           "device_setter", "free_loopback_ports", "launch_local_cluster",
           "local_cluster_spec", "parse_cluster_spec", "run_parameter_server",
           "start_worker", "wait_for_tasks"]

_JOBS = ("ps", "worker")


def parse_cluster_spec(text):
    """A cluster spec {"ps": [...], "worker": [...]} from text or a file.

    Accepts JSON (``{"ps": ["localhost:2222"], "worker": [...]}``, or a
    TF_CONFIG-style ``{"cluster": {...}, ...}``), the short form
    ``ps=host:port;worker=host:port,host:port``, or the path of a file
    holding either.

    Example:
      >>> parse_cluster_spec("ps=localhost:2222;worker=localhost:2223,localhost:2224")
      {'ps': ['localhost:2222'], 'worker': ['localhost:2223', 'localhost:2224']}

    Raises:
      ClusterSpecError: unreadable text, unknown jobs, bad addresses, or no
        ps or worker task.
    """
    source = "cluster spec %r" % (text,)
    if os.path.isfile(text):
        source = "cluster spec file %s" % text
        with open(text, encoding="utf-8") as f:
            text = f.read()
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError as e:
            raise ClusterSpecError("%s is not valid JSON: %s" % (source, e)) from e
        if isinstance(spec, dict) and isinstance(spec.get("cluster"), dict):
            spec = spec["cluster"]
    else:
        spec = {}
        for part in filter(None, (p.strip() for p in text.split(";"))):
            job, sep, hosts = part.partition("=")
            if not sep:
                raise ClusterSpecError(
                    "%s: expected JOB=HOST:PORT[,HOST:PORT...] parts separated "
                    "by ';', got %r" % (source, part))
            spec[job.strip()] = [h.strip() for h in hosts.split(",") if h.strip()]
    return _validate(spec, source)


def _validate(spec, source):
    if not isinstance(spec, dict):
        raise ClusterSpecError("%s must map job names to address lists, got %s"
                               % (source, type(spec).__name__))
    unknown = sorted(set(spec) - set(_JOBS))
    if unknown:
        raise ClusterSpecError("%s: unknown job(s) %s; this between-graph setup "
                               "uses jobs 'ps' and 'worker'" % (source, unknown))
    out = {}
    for job in _JOBS:
        hosts = spec.get(job)
        if not hosts or not isinstance(hosts, list):
            raise ClusterSpecError("%s needs at least one %r task (a list of "
                                   "host:port), got %r" % (source, job, hosts))
        for h in hosts:
            host, _, port = str(h).rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ClusterSpecError("%s: %r in job %r is not host:port"
                                       % (source, h, job))
        out[job] = [str(h) for h in hosts]
    return out


class ClusterTask(collections.namedtuple(
        "ClusterTask", ["spec", "job_name", "task_index", "timeout"])):
    """One task of a cluster: the spec, this task's job and index.

    Example:
      >>> t = ClusterTask.create("ps=localhost:2222;worker=localhost:2223", "worker", 0)
      >>> t.is_chief, t.address, t.device_filters()
      (True, 'localhost:2223', ['/job:ps', '/job:worker/task:0'])

    Attributes:
      spec: {"ps": [...], "worker": [...]}.
      job_name: "ps" or "worker".
      task_index: index in the job's address list.
      timeout: seconds to wait for the other tasks before failing.
    """

    @classmethod
    def create(cls, spec, job_name, task_index, timeout=30.0):
        """Validates and builds a task; spec may be text for parse_cluster_spec."""
        if isinstance(spec, str):
            spec = parse_cluster_spec(spec)
        else:
            spec = _validate(spec, "cluster spec")
        if job_name not in _JOBS:
            raise ClusterSpecError("job name %r: use 'ps' or 'worker'" % (job_name,))
        if not isinstance(task_index, int) or not 0 <= task_index < len(spec[job_name]):
            raise ClusterSpecError(
                "task index %r: job %r has %d task(s) in the cluster spec, so "
                "use 0 to %d" % (task_index, job_name, len(spec[job_name]),
                                 len(spec[job_name]) - 1))
        if not timeout > 0:
            raise ClusterSpecError("cluster timeout must be > 0 seconds, got %r"
                                   % (timeout,))
        return cls(spec, job_name, task_index, float(timeout))

    @property
    def is_chief(self):
        return self.job_name == "worker" and self.task_index == 0

    @property
    def address(self):
        return self.spec[self.job_name][self.task_index]

    @property
    def timeout_ms(self):
        return int(self.timeout * 1000)

    def device_filters(self):
        """This worker talks to the ps tasks and itself, not other workers."""
        return ["/job:ps", "/job:%s/task:%d" % (self.job_name, self.task_index)]


def wait_for_tasks(addresses, timeout):
    """Waits until every host:port accepts TCP connections.

    Raises:
      ClusterUnreachableError: naming the addresses still closed after
        `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    pending = list(addresses)
    while pending:
        for address in list(pending):
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=1.0):
                    pending.remove(address)
            except OSError:
                pass
        if pending and time.monotonic() >= deadline:
            raise ClusterUnreachableError(
                "cluster tasks %s did not accept connections within %g s. "
                "Start them first (e.g. `python scripts/train_bnn.py --cluster "
                "SPEC --job-name ps --task-index 0`), check host:port in the "
                "cluster spec, or raise --cluster-timeout." % (
                    ", ".join(pending), timeout))
        if pending:
            time.sleep(0.2)


def _server(task):
    cluster = tf.train.ClusterSpec(task.spec)
    try:
        return tf.distribute.Server(cluster, job_name=task.job_name,
                                    task_index=task.task_index, start=True)
    except (tf.errors.OpError, RuntimeError) as e:
        raise ClusterUnreachableError(
            "cannot start the %s task %d server on %s: %s (is the port taken "
            "by another process?)" % (task.job_name, task.task_index,
                                      task.address, str(e).splitlines()[0])) from e


def start_worker(task):
    """Starts this worker's server, then waits for every other task.

    The ps tasks must be up to hold the variables; waiting for the other
    workers too starts them together (no worker trains alone while another
    is still importing TensorFlow) and names a worker that never came.
    """
    if task.job_name != "worker":
        raise ClusterSpecError("start_worker needs a worker task, got job %r"
                               % (task.job_name,))
    wait_for_tasks(task.spec["ps"], task.timeout)
    server = _server(task)
    wait_for_tasks([a for i, a in enumerate(task.spec["worker"])
                    if i != task.task_index], task.timeout)
    return server


def run_parameter_server(task, on_ready=None):
    """Serves variables for the workers until SIGINT (Ctrl-C) or SIGTERM.

    TensorFlow's ``Server.join()`` blocks in native code, where Python never
    sees a signal, so the server runs in its own threads while this one
    waits on an event that the signal handlers set. Returns once a signal
    came (the previous handlers are back in place); TensorFlow cannot stop a
    server, so the caller should then end the process (the scripts exit 0).

    Args:
      task: a ps `ClusterTask`.
      on_ready: called once the server is up and the signals are handled.
    """
    if task.job_name != "ps":
        raise ClusterSpecError("run_parameter_server needs a ps task, got job %r"
                               % (task.job_name,))
    stop = threading.Event()
    handlers = {}
    try:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, lambda *_: stop.set())
        except ValueError:  # not the main thread: signals cannot reach us
            _server(task).join()
        server = _server(task)
        if on_ready is not None:
            on_ready()
        while not stop.wait(0.1):
            pass
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return server


def device_setter(task):
    """Variables on the ps tasks (round robin), ops on this worker."""
    return tf.compat.v1.train.replica_device_setter(
        worker_device="/job:worker/task:%d" % task.task_index,
        cluster=tf.train.ClusterSpec(task.spec))


def free_loopback_ports(n):
    """`n` distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def local_cluster_spec(num_ps=1, num_workers=2):
    """A cluster spec on free loopback ports.

    Example:
      >>> spec = local_cluster_spec(1, 2)
      >>> len(spec["ps"]), len(spec["worker"]), spec["ps"][0].startswith("localhost:")
      (1, 2, True)
    """
    ports = free_loopback_ports(num_ps + num_workers)
    hosts = ["localhost:%d" % p for p in ports]
    return {"ps": hosts[:num_ps], "worker": hosts[num_ps:]}


TaskOutput = collections.namedtuple("TaskOutput", ["job_name", "task_index",
                                                   "returncode", "stdout", "stderr"])


def launch_local_cluster(command, num_ps=1, num_workers=2, timeout=300.0, env=None):
    """Runs `command` as every task of a loopback cluster; one process each.

    Each task runs ``command + ["--cluster", SPEC, "--job-name", JOB,
    "--task-index", I]``. Waits for the workers, then stops the parameter
    servers (SIGTERM; SIGKILL if one still runs 5 s later) and returns the
    workers' outputs. On Ctrl-C every task gets the same SIGINT from the
    terminal; the KeyboardInterrupt raised here stops the tasks likewise.

    Args:
      command: argv list, e.g. [sys.executable, "scripts/train_bnn.py", ...].
      num_ps, num_workers: tasks per job.
      timeout: seconds before the workers are killed.
      env: environment of the tasks (default: this one, quiet TensorFlow).

    Returns:
      [TaskOutput] of the workers, in task order.
    """
    spec = local_cluster_spec(num_ps, num_workers)
    spec_json = json.dumps(spec)
    env = dict(os.environ if env is None else env)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    procs = []
    try:
        for job in _JOBS:
            for i in range(len(spec[job])):
                argv = list(command) + ["--cluster", spec_json, "--job-name", job,
                                        "--task-index", str(i)]
                procs.append((job, i, subprocess.Popen(
                    argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, env=env)))
        deadline = time.monotonic() + timeout
        outputs = []
        for job, i, p in procs:
            if job != "worker":
                continue
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                err += "\n[killed after %.0f s]" % timeout
            outputs.append(TaskOutput(job, i, p.returncode, out, err))
        return outputs
    finally:
        for _, _, p in procs:
            if p.poll() is None:
                p.terminate()
        for _, _, p in procs:
            try:
                p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()

