"""`graph-override explain`: every usage error that needs no model is
reported (exit 2, naming the argument) before TensorFlow is imported, and
nothing is written.

All cases run in one fresh interpreter (the test process has TensorFlow
imported), which reports per case the exit status, stderr and whether
TensorFlow was imported before and after it."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from graph_override import frozen

ROOT = pathlib.Path(__file__).resolve().parents[2]
X = np.array([[1.0, 0.0, -1.0, 0.5], [0.0, 2.0, 0.0, -0.5]], np.float32)


def _model():
    """x [N, 4] -> MatMul -> Relu -> logits [N, 2]."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        h = tf.nn.relu(tf.matmul(x, tf.ones([4, 3])))
        tf.identity(tf.matmul(h, tf.ones([3, 2])), name="logits")
    return g.as_graph_def()


def _savez(path, **arrays):
    with open(path, "wb") as f:  # np.savez would add .npz to the name
        np.savez(f, **arrays)


_PROBE = textwrap.dedent("""
    import contextlib, io, json, signal, sys
    from graph_override import cli

    def hung(signum, frame):  # e.g. reading a FIFO that no one writes
        raise TimeoutError("no answer in 120 s")

    signal.signal(signal.SIGALRM, hung)
    results = {}
    for name, argv, blocked in json.loads(sys.argv[1]):
        saved = {m: sys.modules.get(m) for m in blocked}
        sys.modules.update({m: None for m in blocked})  # import fails
        before = "tensorflow" in sys.modules
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            signal.alarm(120)
            try:
                code = cli.main(argv)
            except SystemExit as e:
                code = e.code
            except Exception as e:  # a traceback instead of a message
                code = "%s: %s" % (type(e).__name__, e)
            signal.alarm(0)
        for m, module in saved.items():
            if module is None:
                del sys.modules[m]
            else:
                sys.modules[m] = module
        results[name] = dict(code=code, err=err.getvalue(), tf_before=before,
                             tf="tensorflow" in sys.modules)
    print(json.dumps(results))
""")

_BASE = {"--inputs": "x:0", "--outputs": "logits:0", "--method": "saliency",
         "--data": "x.npy", "-o": "maps.npy"}


def _argv(model="model.pb", *extra, **changes):
    """explain MODEL with _BASE's options, `changes` (keys without the
    dashes, o for -o; None drops one) and `extra` arguments."""
    options = dict(_BASE)
    for key, value in changes.items():
        flag = "-o" if key == "o" else "--" + key
        options.pop(flag)
        if value is not None:
            options[flag] = value
    return ["explain", model] + [a for kv in options.items() for a in kv] + list(extra)


# (name, argv, modules made unimportable, what stderr says: the argument first)
USAGE_ERRORS = [
    ("no --inputs", _argv(inputs=None), [],
     ["MODEL model.pb: a frozen GraphDef needs --inputs and --outputs", "SavedModel folder "
      "needs neither"]),
    ("no --outputs", _argv(outputs=None), [],
     ["MODEL model.pb: a frozen GraphDef needs --inputs and --outputs"]),
    ("--inputs with a Keras file", _argv("model.keras"), [],
     ["--inputs/--outputs: MODEL model.keras is a Keras model", "leave them out"]),
    ("no --method", _argv(method=None), [], ["required: --method"]),
    ("no --data", _argv(data=None), [], ["required: --data"]),
    ("no -o", _argv(o=None), [], ["required: -o/--output"]),
    ("unknown --method", _argv(method="deeplfit"), [],
     ["--method: ", "Did you mean 'deeplift'?"]),
    ("--baseline the method takes none", _argv("model.pb", "--baseline", "zeros",
                                               method="guided_backprop"), [],
     ["--baseline: guided_backprop takes no baseline"]),
    ("--steps the method takes none", _argv("model.pb", "--steps", "3", method="deeplift"),
     [], ["--steps: only integrated_gradients takes it, not deeplift"]),
    ("--steps 0", _argv("model.pb", "--steps", "0", method="integrated_gradients"), [],
     ["argument --steps: expected a positive number of steps, got '0'"]),
    ("--epsilon with saliency", _argv("model.pb", "--epsilon", "0.1"), [],
     ["--epsilon: only eps_lrp takes it, not saliency"]),
    ("--rule with deeplift", _argv("model.pb", "--rule", "riemann_left", method="deeplift"),
     [], ["--rule: only integrated_gradients takes it, not deeplift"]),
    ("--no-abs with gradient_input", _argv("model.pb", "--no-abs", method="gradient_input"),
     [], ["--no-abs: only saliency takes it, not gradient_input"]),
    ("--seed with saliency", _argv("model.pb", "--seed", "1"), [],
     ["--seed: only smoothgrad takes it, not saliency"]),
    ("--samples with eps_lrp", _argv("model.pb", "--samples", "3", method="eps_lrp"), [],
     ["--samples: only smoothgrad takes it, not eps_lrp"]),
    ("--stdev-spread with grad_cam", _argv("model.pb", "--stdev-spread", "0.1",
                                           method="grad_cam"), [],
     ["--stdev-spread: only smoothgrad takes it, not grad_cam"]),
    ("--magnitude with deconvnet", _argv("model.pb", "--magnitude", method="deconvnet"), [],
     ["--magnitude: only smoothgrad takes it, not deconvnet"]),
    ("--layer with guided_backprop", _argv("model.pb", "--layer", "r:0",
                                           method="guided_backprop"), [],
     ["--layer: only grad_cam takes it, not guided_backprop"]),
    ("--resize with smoothgrad", _argv("model.pb", "--resize", method="smoothgrad"), [],
     ["--resize: only grad_cam takes it, not smoothgrad"]),
    ("--epsilon 0", _argv("model.pb", "--epsilon", "0", method="eps_lrp"), [],
     ["argument --epsilon: expected a finite number > 0, got '0'"]),
    ("--epsilon nan", _argv("model.pb", "--epsilon", "nan", method="eps_lrp"), [],
     ["argument --epsilon: expected a finite number > 0, got 'nan'"]),
    ("--epsilon inf", _argv("model.pb", "--epsilon", "inf", method="eps_lrp"), [],
     ["argument --epsilon: expected a finite number > 0, got 'inf'"]),
    ("--rule unknown", _argv("model.pb", "--rule", "simpson", method="integrated_gradients"),
     [], ["argument --rule: invalid choice: 'simpson'", "riemann_trapezoid"]),
    ("--seed negative", _argv("model.pb", "--seed", "-1", method="smoothgrad"), [],
     ["argument --seed: expected an integer seed >= 0, got '-1'"]),
    ("--samples 0", _argv("model.pb", "--samples", "0", method="smoothgrad"), [],
     ["argument --samples: expected a positive number of samples, got '0'"]),
    ("--stdev-spread negative", _argv("model.pb", "--stdev-spread", "-0.5",
                                      method="smoothgrad"), [],
     ["argument --stdev-spread: expected a finite number >= 0, got '-0.5'"]),
    ("--target not an int", _argv("model.pb", "--target", "cat"), [],
     ["argument --target: expected a class index K >= 0", "got 'cat'"]),
    ("--target negative", _argv("model.pb", "--target", "2,-1"), [],
     ["argument --target: expected a class index K >= 0", "got '2,-1'"]),
    ("MODEL missing", _argv("nosuch.pb"), [],
     ["MODEL nosuch.pb: cannot be read: No such file", "frozen GraphDef file"]),
    ("MODEL a folder", _argv("folder"), [],
     ["MODEL folder: is a directory, not a frozen GraphDef file (.pb or .pbtxt), a Keras "
      "model (.keras, .h5) or a SavedModel folder"]),
    ("--data missing", _argv(data="nosuch.npy"), [],
     ["--data nosuch.npy: cannot be read: No such file"]),
    ("--data text", _argv(data="text.npy"), [], ["--data text.npy: not a .npy array file"]),
    ("--data empty", _argv(data="empty.npy"), [], ["--data empty.npy: is empty"]),
    ("--data a folder", _argv(data="folder"), [],
     ["--data folder: a folder that holds no image files (.png, .jpg, .jpeg, .gif, .bmp)"]),
    ("--shard-size with --force", _argv("model.pb", "--shard-size", "4", "--force"), [],
     ["--force: a folder of shards is never overwritten"]),
    ("--resume without a manifest", _argv("model.pb", "--resume", o="folder"), [],
     ["--resume: folder holds no manifest.json of an earlier run"]),
    ("--feature without TFRecords", _argv("model.pb", "--feature", "image"), [],
     ["--feature and --feature-shape go with TFRecord --data"]),
    ("--batch-size 0", _argv("model.pb", "--batch-size", "0"), [],
     ["argument --batch-size: expected a positive number of examples, got '0'"]),
    ("--data a FIFO", _argv(data="fifo.npy"), [],
     ["--data fifo.npy: is a named pipe (FIFO), not a .npy file"]),
    ("--data .npz", _argv(data="several.npy"), [], ["--data several.npy: holds several arrays"]),
    ("--data pickled", _argv(data="object.npy"), [],
     ["--data object.npy: not a .npy array file that loads without pickle"]),
    ("--data ints", _argv(data="ints.npy"), [], ["--data ints.npy holds int32 values"]),
    ("--data scalar", _argv(data="scalar.npy"), [], ["--data scalar.npy holds a scalar"]),
    ("--data no examples", _argv(data="none.npy"), [],
     ["--data none.npy holds no examples (its first dimension is 0)"]),
    ("--baseline missing", _argv("model.pb", "--baseline", "nosuch.npy", method="deeplift"),
     [], ["--baseline nosuch.npy: cannot be read: No such file"]),
    ("--baseline not .npy", _argv("model.pb", "--baseline", "text.npy", method="deeplift"),
     [], ["--baseline text.npy: not a .npy array file"]),
    ("--baseline ints", _argv("model.pb", "--baseline", "ints.npy",
                              method="integrated_gradients"), [],
     ["--baseline ints.npy holds int32 values"]),
    ("-o exists", _argv(o="exists.npy"), [],
     ["-o exists.npy: exists already; pass --force to replace it"]),
    ("--png exists", _argv("model.pb", "--png", "exists.png"), [],
     ["--png exists.png: exists already; pass --force"]),
    ("-o an input", _argv("model.pb", "--force", o="x.npy"), [],
     ["-o x.npy is an input of this run"]),
    ("-o in no folder", _argv(o="no/such/maps.npy"), [],
     ["-o no/such/maps.npy: the folder", "does not exist; create it first"]),
    ("-o and --png one file", _argv("model.pb", "--png", "same.out", o="same.out"), [],
     ["-o and --png name the same file same.out"]),
    ("-o a symbolic link", _argv("model.pb", "--force", o="link.npy"), [],
     ["-o link.npy: is a symbolic link", "even with --force"]),
    ("--png without matplotlib", _argv("model.pb", "--png", "maps.png"), ["matplotlib"],
     ["--png needs matplotlib", "graph_override[scripts]"]),
]


@pytest.fixture(scope="module")
def usage_probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain_usage")
    frozen.save(_model(), str(folder / "model.pb"))
    np.save(folder / "x.npy", X)
    np.save(folder / "ints.npy", X.astype(np.int32))
    np.save(folder / "object.npy", np.array([{}], dtype=object), allow_pickle=True)
    np.save(folder / "scalar.npy", np.float32(1.0))
    np.save(folder / "none.npy", X[:0])
    _savez(str(folder / "several.npy"), a=X)
    (folder / "text.npy").write_text("not numpy")
    (folder / "empty.npy").write_bytes(b"")
    (folder / "folder").mkdir()
    (folder / "model.keras").write_bytes(b"PK\x03\x04")
    os.mkfifo(folder / "fifo.npy")
    (folder / "saved").mkdir()
    (folder / "saved" / "saved_model.pb").write_bytes(b"")
    for name in ("exists.npy", "exists.png"):
        (folder / name).write_bytes(b"before")
    os.symlink("exists.npy", folder / "link.npy")
    cases = [(name, argv, blocked) for name, argv, blocked, _ in USAGE_ERRORS]
    # Last, a run that proceeds: TensorFlow is imported, so the probe sees it.
    cases.append(("runs", _argv(o="ran.npy"), []))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(cases)], cwd=str(folder),
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name, shows", [(name, shows) for name, _, _, shows in USAGE_ERRORS],
                         ids=[name for name, *_ in USAGE_ERRORS])
def test_usage_errors_are_reported_before_tensorflow_is_imported(usage_probe, name, shows):
    folder, results = usage_probe
    got = results[name]
    assert not got["tf_before"], "an earlier case imported TensorFlow"
    assert got["code"] == 2, got
    assert got["tf"] is False, "%s imported TensorFlow" % name
    for text in shows:
        assert text in got["err"], (text, got["err"])
    assert (folder / "exists.npy").read_bytes() == b"before"
    assert (folder / "exists.png").read_bytes() == b"before"
    assert not (folder / "maps.npy").exists() and not (folder / "maps.png").exists()


def test_the_probe_sees_tensorflow_when_the_run_proceeds(usage_probe):
    folder, results = usage_probe
    assert results["runs"]["code"] == 0 and results["runs"]["tf"] is True, results["runs"]
    assert np.load(folder / "ran.npy").shape == X.shape
