"""Scale-out for a model of two inputs (`attribution.scale_out`,
`scale_out_several`): inputs given as a list or a dict, cut at the same rows
per batch with their per-example targets and baselines, give the maps of one
`Explainer.attribute` call per batch, bit for bit, in the caller's
structure; `ExplainBatches` reads one column per input and writes a maps
column per input. Two logical CPU devices and Ray Data run in processes of
their own: test_scale_out.py."""

import types

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution
from graph_override.attribution import batching, scale_out
from graph_override.errors import AttributionError

# a [N, 4, 4, 1] -> 3x3 Conv2D -> Relu "ha" -> flattened -> WA; b [N, 3] -> WB +
# BB -> Relu "hb" -> WH; logits = the sum.
RNG = np.random.RandomState(21)
K = RNG.randn(3, 3, 1, 2).astype(np.float32)
WA = RNG.randn(32, 3).astype(np.float32)
WB = RNG.randn(3, 4).astype(np.float32)
BB = np.array([0.1, -0.2, 0.0, 0.3], np.float32)
WH = RNG.randn(4, 3).astype(np.float32)
NAMES = ["a:0", "b:0"]
N = 7  # batches of 3: 3, 3 and a last one of 1
A = RNG.randn(N, 4, 4, 1).astype(np.float32)
B = RNG.randn(N, 3).astype(np.float32)
TARGET = np.arange(N) % 3


def graph_def():
    with tf.Graph().as_default() as g:
        a = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, 3], name="b")
        ha = tf.nn.relu(tf.nn.conv2d(a, tf.constant(K), 1, "SAME"), name="ha")
        hb = tf.nn.relu(tf.matmul(b, WB) + BB, name="hb")
        tf.identity(tf.matmul(tf.reshape(ha, [-1, 32]), WA) + tf.matmul(hb, WH),
                    name="logits")
    return g.as_graph_def()


def inputs(structure, a=A, b=B):
    """The inputs as a list (the model's order) or a dict (not in its order)."""
    return [a, b] if structure == "list" else {"b": b, "a": a}


def cases(structure, a=A, b=B):
    """(method, options): a baseline per input, some with a row per example
    (cut with the batches), some one number or one example for all."""
    if structure == "list":
        ig, dl = [a[::-1] * 0.5, 0.0], [0.1, b * 0.25]
    else:  # keyed by input names, with or without ":0"
        ig, dl = {"a": a[::-1] * 0.5, "b:0": 0.0}, {"b": b * 0.25, "a": a[0] * 0.5}
    return [("saliency", {}), ("integrated_gradients", {"steps": 4, "baseline": ig}),
            ("deeplift", {"baseline": dl}), ("smoothgrad", {"samples": 3, "seed": 7})]


def cut(value, start, stop, n):
    """`value` (an array, or a list or dict of them) cut to the rows
    [start, stop) where it has one row per example of n."""
    if isinstance(value, dict):
        return {k: cut(v, start, stop, n) for k, v in value.items()}
    if isinstance(value, list):
        return [cut(v, start, stop, n) for v in value]
    if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n:
        return value[start:stop]
    return value


def one_process(explainer, method, x, target, batch_size, n, **options):
    """`explainer.attribute` on each batch in turn: [Attribution]."""
    def part(start):
        cut_options = cut(options, start, start + batch_size, n)
        if method == "smoothgrad":  # as Explainer.attribute(batch_size=) draws it
            cut_options["seed"] = batching.smoothgrad_seed(options["seed"], start)
        return cut_options
    return [explainer.attribute(method, cut(x, start, start + batch_size, n),
                                cut(target, start, start + batch_size, n), **part(start))
            for start in range(0, n, batch_size)]


def _joined(parts):
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if isinstance(parts[0], list):
        return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]
    return np.concatenate(parts)


def differences(got, batches):
    """What differs between the Attribution `got` and the batches' joined
    (the structure of the maps, then each array's dtype and bits): []."""
    found = []
    for name in ("maps", "outputs", "targets", "delta"):
        left = getattr(got, name)
        parts = [getattr(r, name) for r in batches]
        if left is None or any(p is None for p in parts):
            if left is not None or any(p is not None for p in parts):
                found.append("%s: None on one side" % name)
            continue
        right = _joined(parts)
        if type(left) is not type(right) or (isinstance(left, dict)
                                             and list(left) != list(right)):
            found.append("%s: %s against %s" % (name, type(left).__name__,
                                                 type(right).__name__))
            continue
        pairs = (zip(left.values(), right.values()) if isinstance(left, dict) else
                 zip(left, right) if isinstance(left, list) else [(left, right)])
        for i, (x, y) in enumerate(pairs):
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                found.append("%s[%d]" % (name, i))
    return found


@pytest.fixture(scope="module")
def explainers():
    model = graph_def()
    return [attribution.Explainer(model, inputs=NAMES, outputs="logits:0") for _ in range(2)]


def _two_threads():
    """A strategy of two devices, both this CPU: two threads, each taking
    every other batch (two logical devices: test_scale_out.py)."""
    return types.SimpleNamespace(extended=types.SimpleNamespace(
        worker_devices=("/device:CPU:0", "/device:CPU:0")))


@pytest.mark.parametrize("structure", ["list", "dict"])
def test_two_threads_give_one_call_per_batch_bit_for_bit(explainers, structure):
    """Batches of 3 of 7 examples (the last of 1), on two threads: the maps
    per input in the caller's structure, outputs, targets and completeness
    are those of `attribute` on each batch in turn, bit for bit."""
    scaled, reference = explainers
    for method, options in cases(structure):
        got = scale_out.attribute_on_devices(scaled, method, inputs(structure), TARGET,
                                             batch_size=3, strategy=_two_threads(),
                                             **options)
        want = one_process(reference, method, inputs(structure), TARGET, 3, N, **options)
        assert differences(got, want) == [], (structure, method)
        if structure == "dict":  # the caller's keys, in the model's order
            assert list(got.maps) == ["a", "b"]
            maps = [got.maps["a"], got.maps["b"]]
        else:
            assert isinstance(got.maps, list)
            maps = got.maps
        assert [m.shape for m in maps] == [A.shape, B.shape], (structure, method)
        assert all(np.abs(m).max() > 0 for m in maps), (structure, method)
        np.testing.assert_array_equal(got.targets, TARGET)


def test_a_baseline_per_example_is_cut_with_its_input(explainers):
    """The row-per-example baseline of b is cut (as the reference does) and
    one example's baseline of a is not: against b's baseline reversed, the
    maps of b change; one call on all 7 rows agrees to float rounding."""
    scaled, _ = explainers
    baseline = {"a": A[0] * 0.5, "b": B * 0.25}
    got = scale_out.attribute_on_devices(scaled, "deeplift", inputs("dict"), TARGET,
                                         batch_size=3, strategy=_two_threads(),
                                         baseline=baseline)
    whole = scaled.attribute("deeplift", inputs("dict"), TARGET, batch_size=N,
                             baseline=baseline)
    for key in ("a", "b"):
        np.testing.assert_allclose(got.maps[key], whole.maps[key], rtol=1e-5, atol=1e-6)
    reversed_b = scale_out.attribute_on_devices(
        scaled, "deeplift", inputs("dict"), TARGET, batch_size=3, strategy=_two_threads(),
        baseline=dict(baseline, b=B[::-1] * 0.25))
    assert not np.array_equal(reversed_b.maps["b"], got.maps["b"])


@pytest.mark.parametrize("x, says", [
    ([A, B[:5]], r"different numbers of examples: x\[0\] \(input a:0\) 7, "
                 r"x\[1\] \(input b:0\) 5; every input needs one row per example"),
    ({"a": A[:2], "b": B}, r"different numbers of examples: x\['a'\] 2, x\['b'\] 7"),
    ({"a": A[:0], "b": B[:0]}, r"x holds no examples"),
])
def test_inputs_that_do_not_line_up_are_refused_before_any_batch(explainers, x, says,
                                                                 monkeypatch):
    scaled, _ = explainers
    ran = []
    monkeypatch.setattr(scaled, "attribute", lambda *a, **k: ran.append(a))
    with pytest.raises(AttributionError, match=says):
        scale_out.attribute_on_devices(scaled, "saliency", x, batch_size=2,
                                       strategy=_two_threads())
    assert ran == []
    with pytest.raises(AttributionError, match=r"baseline has no array for the input b:0 "
                                               r"\(its keys: 'a', 'c'\)"):
        scale_out.attribute_on_devices(scaled, "integrated_gradients", [A, B], batch_size=2,
                                       strategy=_two_threads(), baseline={"a": 0.0, "c": 0.0})


def test_explain_batches_reads_a_column_per_input_and_writes_a_maps_column_each():
    model = graph_def()
    batch = {"pa": A[:3], "pb": B[:3], "label": TARGET[:3], "id": np.arange(3)}
    by_name = scale_out.ExplainBatches(model, "deeplift", inputs=NAMES, outputs="logits:0",
                                       columns={"b": "pb", "a:0": "pa"},
                                       target_column="label", baseline={"a": 0.0, "b": 0.5})
    explainer = attribution.Explainer(model, inputs=NAMES, outputs="logits:0")
    want = explainer.attribute("deeplift", {"b": B[:3], "a:0": A[:3]}, TARGET[:3],
                               baseline={"a": 0.0, "b": 0.5})
    out = by_name(batch)
    assert sorted(out) == ["delta", "id", "label", "maps/a", "maps/b", "outputs", "pa", "pb",
                           "targets"]
    np.testing.assert_array_equal(out["maps/a"], want.maps["a:0"])
    np.testing.assert_array_equal(out["maps/b"], want.maps["b"])
    np.testing.assert_array_equal(out["delta"], want.delta)
    np.testing.assert_array_equal(out["id"], np.arange(3))
    assert by_name.column is None
    in_order = scale_out.ExplainBatches(model, "saliency", inputs=NAMES, outputs="logits:0",
                                        columns=["pa", "pb"])
    out = in_order(batch)
    want = explainer.attribute("saliency", [A[:3], B[:3]])
    assert sorted(k for k in out if k.startswith("maps")) == ["maps/a", "maps/b"]
    np.testing.assert_array_equal(out["maps/a"], want.maps[0])
    np.testing.assert_array_equal(out["maps/b"], want.maps[1])
    # Grad-CAM explains a layer: one maps column whatever the inputs
    cam = scale_out.ExplainBatches(model, "grad_cam", inputs=NAMES, outputs="logits:0",
                                   columns=["pa", "pb"], layer="ha:0")(batch)
    assert cam["maps"].shape == (3, 4, 4) and "maps/a" not in cam
    with pytest.raises(AttributionError, match=r"no column 'pc' \(its columns: id, label, "
                                               r"pa, pb\); pass columns="):
        scale_out.ExplainBatches(model, "saliency", inputs=NAMES, outputs="logits:0",
                                 columns={"a": "pa", "b": "pc"})(batch)


@pytest.mark.parametrize("column, columns, says", [
    ("pa", ["pa", "pb"], r"give column= .* or columns= .*, not both"),
    (None, "pa", r"columns='pa': expected a list of column names"),
    (None, [], r"columns=\[\]: expected a list"),
    (None, {"a": 1}, r"columns=\{'a': 1\}: expected a list"),
    (3, None, r"column=3: expected a column name"),
])
def test_explain_batches_refuses_columns_that_do_not_say_which_input(column, columns, says):
    with pytest.raises(AttributionError, match=says):
        scale_out.ExplainBatches("never read.pb", "saliency", column=column, columns=columns)
