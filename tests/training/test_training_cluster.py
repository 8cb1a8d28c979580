"""Tests of graph_override.training.cluster: specs, loopback clusters, failures.

Every cluster task is its own process (TensorFlow's servers cannot be
stopped in-process). Unreachable clusters must fail with a clear message in
bounded time: each such run has a subprocess timeout far above the
--cluster-timeout it passes, so a hang fails the test instead of stalling it.
"""

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from graph_override.training import cluster
from graph_override.training.errors import ClusterSpecError, ClusterUnreachableError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_BNN = os.path.join(ROOT, "scripts", "train_bnn.py")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


# ---------------------------------------------------------------- specs

def test_parse_short_form_json_tf_config_and_file(tmp_path):
    want = {"ps": ["localhost:2222"], "worker": ["localhost:2223", "10.0.0.2:2224"]}
    assert cluster.parse_cluster_spec(
        " ps=localhost:2222 ; worker=localhost:2223, 10.0.0.2:2224 ;") == want
    assert cluster.parse_cluster_spec(json.dumps(want)) == want
    tf_config = {"cluster": want, "task": {"type": "worker", "index": 1}}
    assert cluster.parse_cluster_spec(json.dumps(tf_config)) == want
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(want))
    assert cluster.parse_cluster_spec(str(path)) == want


@pytest.mark.parametrize("text, message", [
    ("ps=localhost:1", "needs at least one 'worker' task"),
    ("ps=;worker=localhost:2", "needs at least one 'ps' task"),
    ("ps=localhost:1;worker=localhost:2;evaluator=localhost:3", "unknown job"),
    ("ps=localhost:0;worker=localhost:2", "is not host:port"),
    ("ps=localhost:65536;worker=localhost:2", "is not host:port"),
    ("ps=:22;worker=localhost:2", "is not host:port"),
    ("ps localhost:1", "expected JOB=HOST:PORT"),
    ("{not json", "is not valid JSON"),
    ('["localhost:1"]', "expected JOB=HOST:PORT"),
])
def test_bad_specs_are_clear_errors(text, message):
    with pytest.raises(ClusterSpecError, match=re.escape(message)) as e:
        cluster.parse_cluster_spec(text)
    assert isinstance(e.value, ValueError)


def test_cluster_task_checks_job_index_and_timeout():
    spec = "ps=localhost:1;worker=localhost:2,localhost:3"
    task = cluster.ClusterTask.create(spec, "worker", 1, timeout=5)
    assert not task.is_chief and task.address == "localhost:3"
    assert task.device_filters() == ["/job:ps", "/job:worker/task:1"]
    assert task.timeout_ms == 5000
    assert cluster.ClusterTask.create(spec, "ps", 0).address == "localhost:1"
    with pytest.raises(ClusterSpecError, match="use 0 to 1"):
        cluster.ClusterTask.create(spec, "worker", 2)
    with pytest.raises(ClusterSpecError, match="use 0 to 1"):
        cluster.ClusterTask.create(spec, "worker", -1)
    with pytest.raises(ClusterSpecError, match="'chief'"):
        cluster.ClusterTask.create(spec, "chief", 0)
    with pytest.raises(ClusterSpecError, match="> 0 seconds"):
        cluster.ClusterTask.create(spec, "worker", 0, timeout=0)


def test_local_cluster_spec_uses_distinct_free_loopback_ports():
    spec = cluster.local_cluster_spec(2, 3)
    hosts = spec["ps"] + spec["worker"]
    assert len(spec["ps"]) == 2 and len(spec["worker"]) == 3
    assert len(set(hosts)) == 5 and all(h.startswith("localhost:") for h in hosts)


def test_wait_for_tasks_returns_once_ports_listen_and_names_closed_ones():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        cluster.wait_for_tasks(["127.0.0.1:%d" % port], timeout=5)
        closed, = cluster.free_loopback_ports(1)
        with pytest.raises(ClusterUnreachableError) as e:
            cluster.wait_for_tasks(["127.0.0.1:%d" % port, "127.0.0.1:%d" % closed],
                                   timeout=0.5)
    msg = str(e.value)
    assert "127.0.0.1:%d did not accept connections within 0.5 s" % closed in msg
    assert "127.0.0.1:%d," % port not in msg
    assert isinstance(e.value, ConnectionError)


# ---------------------------------------------------------------- processes

def test_unreachable_parameter_server_fails_in_bounded_time():
    ps, worker = cluster.free_loopback_ports(2)
    proc = subprocess.run(
        [sys.executable, TRAIN_BNN, "--no-progress", "--cluster-timeout", "2",
         "--cluster", "ps=127.0.0.1:%d;worker=127.0.0.1:%d" % (ps, worker)],
        capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert ("train_bnn.py: error: cluster tasks 127.0.0.1:%d did not accept "
            "connections within 2 s" % ps) in proc.stderr
    assert "test accuracy" not in proc.stdout


@pytest.mark.slow
def test_loopback_cluster_trains_with_ste_gradients_on_both_workers():
    outputs = cluster.launch_local_cluster(
        [sys.executable, TRAIN_BNN, "--epochs", "5", "--hidden", "64", "--no-progress"],
        num_ps=1, num_workers=2, timeout=240, env=ENV)
    assert [o.task_index for o in outputs] == [0, 1]
    steps = []
    for o in outputs:
        assert o.returncode == 0, o.stderr[-2000:]
        assert ("(chief)" in o.stdout) == (o.task_index == 0)
        ran = re.search(r"ran (\d+) steps \(global step (\d+) -> (\d+)\).*"
                        r"through ste_sign: ([0-9.e+-]+)", o.stdout)
        assert ran, o.stdout
        steps.append(int(ran.group(1)))
        # The override was resolved in this worker's process: STE gradients.
        assert float(ran.group(4)) > 1e-4
        assert int(ran.group(3)) >= 105
        assert re.search(r"^test accuracy: 0\.\d{4}$", o.stdout, re.M)
    # Between-graph replication: both workers advanced the shared global step.
    assert all(s > 0 for s in steps) and sum(steps) >= 105


@pytest.mark.slow
@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_parameter_server_lost_mid_run_ends_the_worker_in_bounded_time(how):
    # A killed ps resets the connection; a frozen one (SIGSTOP) answers
    # nothing, so only the per-step deadline (--cluster-timeout) ends the run.
    import signal  # pylint: disable=import-outside-toplevel
    spec = json.dumps(cluster.local_cluster_spec(1, 1))
    ps = subprocess.Popen([sys.executable, TRAIN_BNN, "--cluster", spec, "--job-name", "ps"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=ENV)
    worker = None
    try:
        assert "parameter server 0 serving" in ps.stdout.readline()
        worker = subprocess.Popen(
            [sys.executable, TRAIN_BNN, "--cluster", spec, "--epochs", "5000",
             "--cluster-timeout", "3", "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        for line in worker.stdout:
            if line.startswith("epoch 2,"):
                break
        ps.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        out, err = worker.communicate(timeout=120)  # a hang fails here
    finally:
        for p in (worker, ps):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.communicate()
    assert worker.returncode == 1, err[-2000:]
    assert "train_bnn.py: error: worker 0 lost the cluster during training" in err
    if how == "frozen":
        assert "DeadlineExceededError" in err
    else:  # gRPC reports a reset connection; the exact class is TensorFlow's
        assert "UnavailableError" in err or "AbortedError" in err
    assert "test accuracy" not in out


@pytest.mark.slow
def test_worker_whose_chief_never_initializes_fails_in_bounded_time():
    # The chief's server is up (a bare tf.distribute.Server) but nobody
    # initializes the variables: worker 1 must give up after --cluster-timeout.
    spec = cluster.local_cluster_spec(1, 2)
    serve = ("import sys, tensorflow as tf\n"
             "s = tf.distribute.Server(tf.train.ClusterSpec(%r), job_name=sys.argv[1], "
             "task_index=0)\nprint('up', flush=True)\ns.join()\n" % (spec,))
    servers = [subprocess.Popen([sys.executable, "-c", serve, job], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=ENV)
               for job in ("ps", "worker")]
    try:
        for s in servers:
            assert s.stdout.readline().strip() == "up"
        proc = subprocess.run(
            [sys.executable, TRAIN_BNN, "--no-progress", "--cluster", json.dumps(spec),
             "--task-index", "1", "--cluster-timeout", "3"],
            capture_output=True, text=True, env=ENV, timeout=120)
    finally:
        for s in servers:
            s.kill()
            s.communicate()
    assert proc.returncode == 1, proc.stderr
    assert "worker waited 3 s for the chief (worker task 0) to initialize" in proc.stderr


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_parameter_server_stops_on_ctrl_c_and_sigterm_and_exits_0(how):
    # Server.join() blocks in native code where Python never sees SIGINT;
    # the ps must stop at once and exit 0 (a hang fails at the timeout).
    import signal  # pylint: disable=import-outside-toplevel
    ps_port, worker_port = cluster.free_loopback_ports(2)
    spec = "ps=127.0.0.1:%d;worker=127.0.0.1:%d" % (ps_port, worker_port)
    ps = subprocess.Popen([sys.executable, TRAIN_BNN, "--cluster", spec, "--job-name", "ps"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=ENV)
    try:
        line = ps.stdout.readline()
        assert line.startswith("parameter server 0 serving on 127.0.0.1:%d" % ps_port), line
        cluster.wait_for_tasks(["127.0.0.1:%d" % ps_port], timeout=30)
        ps.send_signal(getattr(signal, how))
        out, err = ps.communicate(timeout=20)
    finally:
        if ps.poll() is None:
            ps.kill()
            ps.communicate()
    assert ps.returncode == 0, err[-2000:]
    assert out == "parameter server 0 stopped\n"
    assert "Traceback" not in err
