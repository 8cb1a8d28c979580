"""Scale-out (`attribution.scale_out`): batches explained on every device of
a tf.distribute strategy (two logical CPU devices, in a process of their own:
devices are configured before TensorFlow starts) and by a pool of Ray Data
actors give the maps of one process explaining the same batches, bit for bit."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import batching, scale_out
from graph_override.errors import AttributionError

import methods_nets as nets

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# (method, options) run on two devices; the baseline differs per example, so
# it is cut with the batches.
CASES = [("smoothgrad", {"samples": 3, "seed": 7}),
         ("integrated_gradients", {"steps": 5, "internal_batch_size": 10}),
         ("deeplift", {"baseline": "per example"}), ("grad_cam", {})]


def graph_def():
    return nets.cnn_graph_def()


def one_process(model, method, x, target, batch_size, mode, **options):
    """A fresh Explainer on one device explaining the same batches in turn."""
    explainer = attribution.Explainer(model, inputs="x:0", outputs="logits:0", mode=mode)
    maps = []
    for start, stop in scale_out.batches(len(x), batch_size):
        part = {k: v[start:stop] if k == "baseline" and np.shape(v) == x.shape else v
                for k, v in options.items()}
        if method == "smoothgrad":  # as Explainer.attribute(batch_size=) draws it
            part["seed"] = batching.smoothgrad_seed(options["seed"], start)
        maps.append(explainer.attribute(method, x[start:stop], target[start:stop],
                                        **part).maps)
    return np.concatenate(maps)


def options_for(options, x):
    if options.get("baseline") == "per example":
        return dict(options, baseline=np.random.RandomState(2).uniform(
            -0.1, 0.1, x.shape).astype("float32"))
    return options


# A process with two logical CPU devices (set before TensorFlow runs
# anything, so in a process of its own); the scripts below go on from here.
_PRELUDE = r"""
import json, sys
import numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from graph_override import attribution
from graph_override.attribution import scale_out
"""

_TWO_DEVICES = _PRELUDE + r"""
import test_scale_out as t
import methods_nets as nets
model = t.graph_def()
x = nets.images(7, seed=11)
target = np.arange(7) % 3
out = {"devices": scale_out.local_devices()}
for mode in ("exact", "fast"):
    for method, options in t.CASES:
        options = t.options_for(options, x)
        explainer = attribution.Explainer(model, inputs="x:0", outputs="logits:0", mode=mode)
        ran_on, attribute = set(), explainer.attribute
        def recording(*a, **k):
            ran_on.add(tf.identity(0.0).device)
            return attribute(*a, **k)
        explainer.attribute = recording
        got = scale_out.attribute_on_devices(explainer, method, x, target, batch_size=2,
                                             **options)
        want = t.one_process(model, method, x, target, 2, mode, **options)
        out["%s %s" % (mode, method)] = dict(
            same=got.maps.tobytes() == want.maps.tobytes() if hasattr(want, "maps")
            else got.maps.tobytes() == want.tobytes(),
            devices=sorted(d.rsplit("/", 1)[-1] for d in ran_on),
            nonzero=bool(np.abs(got.maps).max() > 0), rows=len(got.maps))
print(json.dumps(out))
"""


def _on_two_devices(script):
    """What `script` printed (its last line, JSON), run in a process of two
    logical CPU devices, after checking it saw both."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script, str(HERE), str(ROOT)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [d.rsplit("/", 1)[-1] for d in out.pop("devices")] == ["device:CPU:0",
                                                                   "device:CPU:1"]
    return out


@pytest.mark.slow
def test_two_logical_cpu_devices_give_one_process_maps_bit_for_bit():
    out = _on_two_devices(_TWO_DEVICES)
    assert sorted(out) == sorted("%s %s" % (m, c) for m in ("exact", "fast") for c, _ in CASES)
    for case, result in out.items():
        assert result == dict(same=True, devices=["device:CPU:0", "device:CPU:1"],
                              nonzero=True, rows=7), case


_TWO_DEVICES_SEVERAL = _PRELUDE + r"""
import test_scale_out_several as s
model = s.graph_def()
out = {"devices": scale_out.local_devices()}
for mode in ("exact", "fast"):
    explainer, reference = [attribution.Explainer(model, inputs=s.NAMES, outputs="logits:0",
                                                  mode=mode) for _ in range(2)]
    ran_on, attribute = set(), explainer.attribute
    def recording(*a, **k):
        ran_on.add(tf.identity(0.0).device)
        return attribute(*a, **k)
    explainer.attribute = recording
    for structure in ("list", "dict"):
        for method, options in s.cases(structure):
            ran_on.clear()
            got = scale_out.attribute_on_devices(explainer, method, s.inputs(structure),
                                                 s.TARGET, batch_size=3, **options)
            want = s.one_process(reference, method, s.inputs(structure), s.TARGET, 3, s.N,
                                 **options)
            maps = list(got.maps.values()) if structure == "dict" else got.maps
            out["%s %s %s" % (mode, structure, method)] = dict(
                differences=s.differences(got, want),
                devices=sorted(d.rsplit("/", 1)[-1] for d in ran_on),
                nonzero=all(bool(abs(m).max() > 0) for m in maps),
                rows=[len(m) for m in maps])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_two_logical_cpu_devices_explain_a_model_of_two_inputs_as_one_process():
    """A list and a dict of two inputs, 7 examples in batches of 3 (the last
    of 1), a baseline per input with a row per example: both devices ran
    batches, and the maps, outputs, targets and completeness are those of
    `attribute` on each batch in turn, bit for bit, in both modes."""
    out = _on_two_devices(_TWO_DEVICES_SEVERAL)
    methods = ["saliency", "integrated_gradients", "deeplift", "smoothgrad"]
    assert sorted(out) == sorted("%s %s %s" % (m, st, c) for m in ("exact", "fast")
                                 for st in ("list", "dict") for c in methods)
    for case, result in out.items():
        assert result == dict(differences=[], devices=["device:CPU:0", "device:CPU:1"],
                              nonzero=True, rows=[7, 7]), case


@pytest.fixture(scope="module")
def model():
    return graph_def()


def test_one_device_strategy_cuts_targets_and_per_example_baselines(model):
    x = nets.images(5, seed=1)
    target = np.array([2, 0, 1, 1, 0])
    baseline = np.random.RandomState(3).uniform(-0.2, 0.2, x.shape).astype("float32")
    explainer = attribution.Explainer(model, inputs="x:0", outputs="logits:0")
    got = scale_out.attribute_on_devices(explainer, "deeplift", x, target, batch_size=2,
                                         strategy=tf.distribute.OneDeviceStrategy("/cpu:0"),
                                         baseline=baseline)
    want = one_process(model, "deeplift", x, target, 2, "exact", baseline=baseline)
    np.testing.assert_array_equal(got.maps, want)
    np.testing.assert_array_equal(got.targets, target)
    assert got.delta.shape == (5,) and got.outputs.shape == (5, 3)
    # One example's shape is every example's baseline, not cut (here 5 rows of 8x8x1).
    one = baseline[0]
    got = scale_out.attribute_on_devices(explainer, "integrated_gradients", x, 1,
                                         batch_size=3, baseline=one, steps=4)
    want = one_process(model, "integrated_gradients", x, np.full(5, 1), 3, "exact",
                       baseline=one, steps=4)
    np.testing.assert_array_equal(got.maps, want)


def test_smoothgrad_draws_each_batch_as_one_batched_call_does(model):
    """The batch at row R draws from [seed, R], as `Explainer.attribute`
    with the same `batch_size` (and `explain_to_folder`) draw it: the same
    bits; without a seed, one is drawn for the run."""
    x = nets.images(5, seed=6)
    explainer = attribution.Explainer(model, inputs="x:0", outputs="logits:0")
    one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
    got = scale_out.attribute_on_devices(explainer, "smoothgrad", x, 1, batch_size=2,
                                         strategy=one_device, samples=3, seed=5)
    want = explainer.attribute("smoothgrad", x, 1, batch_size=2, samples=3, seed=5)
    np.testing.assert_array_equal(got.maps, want.maps)
    same_seed = explainer.attribute("smoothgrad", x[2:4], 1, samples=3, seed=5)
    assert not np.array_equal(got.maps[2:4], same_seed.maps)
    unseeded = scale_out.attribute_on_devices(explainer, "smoothgrad", x[:2], 1, batch_size=2,
                                              strategy=one_device, samples=3)
    assert unseeded.maps.shape == (2, 8, 8, 1) and np.abs(unseeded.maps).max() > 0


def test_batches_are_checked():
    assert scale_out.batches(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert scale_out.batches(0, 3) == []
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(AttributionError, match=r"batch_size=.*expected an int >= 1"):
            scale_out.batches(4, bad)
    with pytest.raises(AttributionError, match="expected an Explainer"):
        scale_out.attribute_on_devices("model.pb", "saliency", np.zeros((1, 2)), batch_size=1)


def test_explain_batches_adds_the_maps_to_the_batch(model):
    x = nets.images(3, seed=4)
    fn = scale_out.ExplainBatches(model, "integrated_gradients", inputs="x:0",
                                  outputs="logits:0", column="data", target_column="label",
                                  steps=4)
    out = fn({"data": x, "label": np.array([0, 1, 2]), "id": np.arange(3)})
    want = attribution.attribute(model, "integrated_gradients", x, np.array([0, 1, 2]),
                                 inputs="x:0", outputs="logits:0", steps=4)
    np.testing.assert_array_equal(out["maps"], want.maps)
    np.testing.assert_array_equal(out["delta"], want.delta)
    np.testing.assert_array_equal(out["id"], np.arange(3))
    assert sorted(out) == ["data", "delta", "id", "label", "maps", "outputs", "targets"]
    with pytest.raises(AttributionError, match=r"no column 'data' \(its columns: x\)"):
        fn({"x": x})


_RAY = r"""
import json, sys
import numpy as np
import ray
sys.path[:0] = [sys.argv[1]]
from graph_override.attribution import batching, scale_out
import test_scale_out as t
import methods_nets as nets
model = t.graph_def()
x = nets.images(12, seed=3)
target = np.arange(12) % 3
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
         object_store_memory=80 * 2**20)
ray.data.DataContext.get_current().execution_options.preserve_order = True
ds = ray.data.from_items([{"id": i, "x": x[i], "label": target[i]} for i in range(12)],
                         override_num_blocks=4)
out = {}
for mode in ("exact",):  # the fast mode: the two-device test
    rows = ds.map_batches(scale_out.ExplainBatches, fn_constructor_kwargs=dict(
        model=model, method="deeplift", inputs="x:0", outputs="logits:0", mode=mode,
        target_column="label", threads=1), batch_size=3, concurrency=2,
        batch_format="numpy").take_all()
    want = t.one_process(model, "deeplift", x, target, 3, mode)
    got = np.stack([r["maps"] for r in rows])
    out[mode] = dict(ids=[int(r["id"]) for r in rows], same=got.tobytes() == want.tobytes(),
                     nonzero=bool(np.abs(got).max() > 0))
ray.shutdown()
print(json.dumps(out))
"""


def _ray_env():
    """The environment of a process that imports Ray: the engine installed
    beside the TensorFlow under test by compat/engine_venv.sh (skipped
    locally, failed in CI, where it cannot be)."""
    from reference.reference_env import missing  # pylint: disable=import-outside-toplevel
    env = dict(os.environ, PYTHON=sys.executable)
    built = subprocess.run(["bash", str(ROOT / "compat" / "engine_venv.sh")], env=env,
                           capture_output=True, text=True, timeout=1200, check=False)
    if built.returncode != 0:
        missing("compat/engine_venv.sh could not install Ray (exit %d): %s"
                % (built.returncode, built.stderr.strip()[-2000:]))
    ray_path = dict(line.split("=", 1) for line in built.stdout.splitlines()
                    if "=" in line)["ray_path"]
    # Ray's workers are new interpreters: the path reaches them through
    # PYTHONPATH (Ray's numpy and protobuf are pinned to this python's own).
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), ray_path]))


def _run_ray(script):
    """The JSON that `script` (run with Ray importable) prints last."""
    env = _ray_env()
    with tempfile.TemporaryDirectory(prefix="ray") as short:  # Ray's sockets: short paths
        proc = subprocess.run([sys.executable, "-c", script, str(HERE)], capture_output=True,
                              text=True, env=dict(env, RAY_TMPDIR=short), timeout=900,
                              check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_ray_data_actor_pool_gives_one_process_maps_bit_for_bit():
    """Two Ray Data actors (a local Ray, the engine installed beside the
    TensorFlow under test by compat/engine_venv.sh) explain a dataset in
    batches of 3: every example's maps are one process's, in order."""
    out = _run_ray(_RAY)
    assert out == {"exact": dict(ids=list(range(12)), same=True, nonzero=True)}


_RAY_SEVERAL = r"""
import json, sys
import numpy as np
import ray
sys.path[:0] = [sys.argv[1]]
from graph_override import attribution
from graph_override.attribution import batching, scale_out
import test_scale_out_several as s
model = s.graph_def()
rng = np.random.RandomState(5)
a = rng.randn(12, 4, 4, 1).astype("float32")
b = rng.randn(12, 3).astype("float32")
target = np.arange(12) % 3
baseline = {"a": 0.0, "b": b[0] * 0.5}
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
         object_store_memory=80 * 2**20)
ray.data.DataContext.get_current().execution_options.preserve_order = True
ds = ray.data.from_items([{"id": i, "pixels": a[i], "meta": b[i], "label": target[i]}
                          for i in range(12)], override_num_blocks=4)
rows = ds.map_batches(scale_out.ExplainBatches, fn_constructor_kwargs=dict(
    model=model, method="deeplift", inputs=s.NAMES, outputs="logits:0",
    columns={"a": "pixels", "b:0": "meta"}, target_column="label", threads=1,
    baseline=baseline), batch_size=3, concurrency=2, batch_format="numpy").take_all()
reference = attribution.Explainer(model, inputs=s.NAMES, outputs="logits:0")
want = s.one_process(reference, "deeplift", {"a": a, "b:0": b}, target, 3, 12,
                     baseline=baseline)
out = dict(ids=[int(r["id"]) for r in rows], columns=sorted(rows[0]))
for key, column in (("a", "maps/a"), ("b:0", "maps/b")):
    got = np.stack([r[column] for r in rows])
    joined = np.concatenate([w.maps[key] for w in want])
    out[column] = dict(same=got.tobytes() == joined.tobytes(),
                       nonzero=bool(np.abs(got).max() > 0))
ray.shutdown()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_ray_data_explains_a_model_of_two_inputs_as_one_process():
    """Two Ray Data actors read a column per input (named apart from the
    inputs) and write a maps column per input: every example's maps of
    both inputs are one process's, bit for bit, in order."""
    out = _run_ray(_RAY_SEVERAL)
    assert out == {"ids": list(range(12)),
                   "columns": ["delta", "id", "label", "maps/a", "maps/b", "meta", "outputs",
                               "pixels", "targets"],
                   "maps/a": dict(same=True, nonzero=True),
                   "maps/b": dict(same=True, nonzero=True)}
