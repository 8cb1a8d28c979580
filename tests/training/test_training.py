"""Tests of graph_override.training: data, models, the Session loop, resume.

Short runs on the real digits. The expensive runs are module-scoped fixtures
shared by the tests that read them.
"""

import glob
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from graph_override import errors, overrides, stopgrad, tf2
from graph_override.training import config, data, loop, models, recipes, storage
from graph_override.training.errors import (CheckpointDamagedError,
                                            CheckpointMismatchError,
                                            TrainingOutputError, UnknownFamilyError)

SMALL = dict(hidden=(64,), epochs=2, seed=3)


# ---------------------------------------------------------------- data

def test_digits_split_is_fixed_stratified_and_scaled():
    s = data.digits_splits()
    assert s.x_train.shape == (1347, 64) and s.x_test.shape == (450, 64)
    assert s.x_train.dtype == np.float32 and s.y_train.dtype == np.int64
    # Pixels are 0..16 scaled to [0, 1]: exact zeros and exact ones occur.
    assert s.x_train.min() == 0.0 and s.x_train.max() == 1.0
    from sklearn.datasets import load_digits
    per_class = np.bincount(load_digits().target, minlength=10)
    np.testing.assert_array_equal(np.bincount(s.y_test, minlength=10),
                                  np.round(0.25 * per_class).astype(int))
    again = data.digits_splits()
    np.testing.assert_array_equal(s.x_test, again.x_test)
    # Train and test images are different samples of the 1797.
    assert len(s.y_train) + len(s.y_test) == 1797


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1])
def test_digits_split_rejects_bad_fraction(bad):
    with pytest.raises(ValueError, match="test_fraction"):
        data.digits_splits(test_fraction=bad)


def test_batches_are_a_function_of_seed_and_epoch_and_drop_the_rest():
    a = data.batches(10, 4, seed=1, epoch=2)
    b = data.batches(10, 4, seed=1, epoch=2)
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert [len(x) for x in a] == [4, 4]  # 2 left over are dropped
    assert len(set(np.concatenate(a).tolist())) == 8
    assert [x.tolist() for x in data.batches(10, 4, 1, 3)] != [x.tolist() for x in a]
    assert [len(x) for x in data.batches(5, 5, 0, 0)] == [5]  # boundary: one batch
    for bad in (0, 6):
        with pytest.raises(ValueError, match="batch_size"):
            data.batches(5, bad, 0, 0)


def test_domain_shift_matches_numpy_reference():
    x = data.digits_splits().x_test[:7]
    got = data.domain_shift(x, seed=4)
    rng = np.random.RandomState(4)
    a = rng.uniform(0.3, 0.8, size=(7, 1, 1))
    bx = rng.uniform(-1.0, 1.0, size=(7, 1, 1))
    by = rng.uniform(-1.0, 1.0, size=(7, 1, 1))
    r = np.arange(8) / 7.0 - 0.5
    want = x.reshape(7, 8, 8) + a + bx * r[None, None, :] + by * r[None, :, None]
    np.testing.assert_allclose(got, want.reshape(7, 64), rtol=1e-6, atol=1e-6)
    # gradient=0 and a fixed offset: a constant added to every pixel, exactly.
    flat = data.domain_shift(np.zeros((2, 64), np.float32), offset=(0.5, 0.5),
                             gradient=0.0)
    np.testing.assert_array_equal(flat, np.full((2, 64), 0.5, np.float32))
    with pytest.raises(ValueError, match=r"shape \(N, 64\)"):
        data.domain_shift(np.zeros((2, 8, 8)))


def test_dann_splits_source_and_target_are_disjoint_halves():
    d = data.dann_splits(seed=0)
    assert len(d.y_source) == 673 and len(d.x_target) == 674
    assert not hasattr(d, "y_target")  # target training labels are never exposed
    s = data.digits_splits()
    # Source images are unshifted training images.
    rows = {r.tobytes() for r in s.x_train}
    assert all(r.tobytes() in rows for r in d.x_source)


# ---------------------------------------------------------------- families

def test_resolve_family_accepts_names_and_modules():
    assert models.resolve_family("overrides") is overrides
    assert models.resolve_family("stopgrad") is stopgrad
    assert models.resolve_family(tf2) is tf2


@pytest.mark.parametrize("bad", ["override", "Overrides", "", None])
def test_unknown_family_is_a_clear_error(bad):
    with pytest.raises(UnknownFamilyError, match="overrides, stopgrad, tf2") as e:
        models.resolve_family(bad)
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, errors.GraphOverrideError)


def test_module_that_is_not_a_family_is_refused():
    with pytest.raises(UnknownFamilyError, match="'numpy'"):
        models.resolve_family(np)


def test_unknown_family_fails_before_any_training():
    with pytest.raises(UnknownFamilyError, match="'sign'"):
        recipes.train_bnn("sign", epochs=1)


def test_bnn_graph_binarizes_weights_and_activations():
    with tf.Graph().as_default() as g:
        models.build_bnn("overrides", hidden=(8, 8))
        ops = g.get_operations()
    sign_gradients = {op.get_attr("_gradient_op_type").decode() for op in ops
                      if op.type == "Sign" and "_gradient_op_type" in op.node_def.attr}
    assert "graph_override.ste_sign(clip_value=1.0)" in sign_gradients
    assert not any(op.type.startswith("FusedBatchNorm") for op in ops)
    names = {op.name for op in ops}
    for i in range(3):
        assert "bnn/binary_kernel%d/Sign" % i in names
    assert {"bnn/binary_activation0/Sign", "bnn/binary_activation1/Sign"} <= names


def test_dorefa_rejects_bad_bit_widths():
    with tf.Graph().as_default():
        for bad in (0, 1.5, True):
            with pytest.raises(ValueError, match="whole number of bits"):
                models.build_dorefa("stopgrad", weight_bits=bad)


# ---------------------------------------------------------------- training runs

@pytest.fixture(scope="module")
def bnn_runs():
    return {fam: recipes.train_bnn(fam, **SMALL) for fam in models.FAMILIES}


def _losses(result):
    return np.array([loss for _, loss in result.losses])


def test_bnn_loss_decreases(bnn_runs):
    losses = _losses(bnn_runs["overrides"])
    assert len(losses) == 42
    assert [s for s, _ in bnn_runs["overrides"].losses] == list(range(1, 43))
    assert losses[-5:].mean() < 0.5 * losses[:5].mean()


def test_families_give_the_same_loss_trajectory(bnn_runs):
    ref = _losses(bnn_runs["tf2"])  # tf.custom_gradient: the oracle
    for fam in ("overrides", "stopgrad"):
        np.testing.assert_allclose(_losses(bnn_runs[fam]), ref, rtol=1e-5, atol=1e-6,
                                   err_msg=fam)
        assert bnn_runs[fam].evaluations[-1][2] == pytest.approx(
            bnn_runs["tf2"].evaluations[-1][2], abs=1e-6)


def test_straight_through_gradient_reaches_the_first_layer(bnn_runs):
    # Through three binarizations; TF's own Sign gradient would give 0.
    for fam, run in bnn_runs.items():
        assert run.probes["ste_grad_norm"] > 1e-4, fam


@pytest.mark.parametrize("family", models.FAMILIES)
def test_bnn_gradient_equals_the_numpy_straight_through_reference(family):
    # One binary layer: logits = bn(x @ W_b), W_b = ste_sign(W), so
    # d loss / d W must be (d loss / d W_b) * [|W| <= 1] exactly.
    split = data.digits_splits()
    x, y = split.x_train[:16], split.y_train[:16]
    with tf.Graph().as_default() as g:
        m = models.build_bnn(family, hidden=(), seed=1)
        w, = tf.compat.v1.global_variables("bnn/dense0/kernel")
        w_b = g.get_operation_by_name("bnn/MatMul").inputs[1]
        g_w, g_wb = tf.gradients(m.loss, [w, w_b])
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            w_val = sess.run(w)
            # Latent weights exactly at the clip boundary, beyond it, and 0.
            w_val[0, :4] = [1.0, -1.0, 1.5, 0.0]
            w_val[1, :2] = [-1.0000001, 0.9999999]
            sess.run(w.assign(w_val))
            gw, gwb, wb = sess.run([g_w, g_wb, w_b], {
                m.inputs["x"]: x, m.inputs["y"]: y, m.training: True})
    np.testing.assert_array_equal(wb, np.where(w_val >= 0, 1.0, -1.0))
    np.testing.assert_allclose(gw, gwb * (np.abs(w_val) <= 1.0), rtol=1e-6, atol=1e-9)
    assert gw[0, 2] == 0.0 and gw[1, 0] == 0.0  # |w| > clip: no gradient
    assert np.count_nonzero(gw[0, [0, 1, 3]]) == 3 or np.count_nonzero(gwb[0, :4]) < 4
    assert np.count_nonzero(gw) > 0


def test_bnn_reaches_95_percent_on_the_held_out_digits():
    # The default recipe of scripts/train_bnn.py (20 epochs, a few seconds).
    for fam in ("overrides", "stopgrad"):
        result = recipes.train_bnn(fam)
        assert result.evaluations[-1][2]["test"] >= 0.95, fam


def test_dann_and_source_only_short_runs():
    runs = {fam: recipes.train_dann(fam, epochs=3, hidden=(32, 16), seed=1)
            for fam in ("overrides", "stopgrad")}
    a, b = runs["overrides"], runs["stopgrad"]
    np.testing.assert_allclose(_losses(a.dann_result), _losses(b.dann_result),
                               rtol=1e-5, atol=1e-6)
    # The reversal sends the domain gradient into the features only in DANN.
    assert a.dann_result.probes["reversed_grad_norm"] > 0.0
    assert a.source_only_result.probes["reversed_grad_norm"] == 0.0
    assert 0.0 < a.dann <= 1.0 and 0.0 < a.source_only <= 1.0


def test_dann_gradient_reversal_negates_the_domain_gradient():
    with tf.Graph().as_default() as g:
        m = models.build_dann("overrides", hidden=(8, 4), total_steps=None)
        rev = g.get_tensor_by_name("dann/gradient_reversal/Identity:0")
        features = rev.op.inputs[0]
        domain_loss = m.metrics["domain_loss"]
        g_rev, g_feat = tf.gradients(domain_loss, [rev, features])
        d = data.dann_splits()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            a, b = sess.run([g_rev, g_feat], {m.inputs["x"]: d.x_source[:8],
                                              m.inputs["y"]: d.y_source[:8],
                                              m.inputs["x_target"]: d.x_target[:8]})
    np.testing.assert_array_equal(b, -a)
    assert np.count_nonzero(a) > 0


def test_dorefa_short_runs_agree_and_learn():
    for bits in ((1, 2), (2, 2)):
        rows = {fam: recipes.train_dorefa(fam, bits=[bits], epochs=2, hidden=(64,))[0]
                for fam in ("overrides", "stopgrad")}
        la, lb = _losses(rows["overrides"].result), _losses(rows["stopgrad"].result)
        np.testing.assert_allclose(la, lb, rtol=1e-5, atol=1e-6, err_msg=str(bits))
        assert la[-5:].mean() < 0.5 * la[:5].mean()
        assert rows["overrides"].result.probes["ste_grad_norm"] > 0.0


# ---------------------------------------------------------------- checkpoints

class _Interrupt:
    def __init__(self, at):
        self.at = at

    def __call__(self, step, loss):
        if step == self.at:
            raise KeyboardInterrupt


def test_interrupted_run_resumes_exactly_where_it_stopped(tmp_path, bnn_runs):
    ckpt = str(tmp_path / "ckpt")
    messages = []
    with pytest.raises(KeyboardInterrupt):
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, on_step=_Interrupt(30),
                          log=messages.append, **SMALL)
    assert any("checkpoint saved at step 30" in m for m in messages)
    assert tf.train.latest_checkpoint(ckpt).endswith("bnn-30")
    resumed = recipes.train_bnn("stopgrad", checkpoint_dir=ckpt, log=messages.append,
                                **SMALL)
    assert resumed.start_step == 30 and resumed.global_step == 42
    assert [s for s, _ in resumed.losses] == list(range(31, 43))
    # Same batches, same weights: the rest of the uninterrupted trajectory.
    np.testing.assert_allclose(_losses(resumed), _losses(bnn_runs["overrides"])[30:],
                               rtol=1e-5, atol=1e-6)
    assert any(m.startswith("resumed from ") and m.endswith("at step 30")
               for m in messages)
    # Nothing left to do: a third run restores, trains nothing, reports.
    done = recipes.train_bnn("overrides", checkpoint_dir=ckpt, **SMALL)
    assert done.start_step == 42 and done.losses == []
    assert done.evaluations[-1][2]["test"] == pytest.approx(
        resumed.evaluations[-1][2]["test"])


def test_a_copied_checkpoint_directory_resumes_from_its_own_files(tmp_path):
    import shutil  # pylint: disable=import-outside-toplevel
    original, copy = str(tmp_path / "a"), str(tmp_path / "b")
    recipes.train_bnn("overrides", checkpoint_dir=original, hidden=(8,), epochs=1)
    shutil.copytree(original, copy)
    shutil.rmtree(original)
    messages = []
    resumed = recipes.train_bnn("overrides", checkpoint_dir=copy, hidden=(8,),
                                epochs=2, log=messages.append)
    assert resumed.start_step == 21
    assert "resumed from %s/bnn-21 at step 21" % copy in messages


def test_checkpoint_every_saves_between_epochs(tmp_path):
    ckpt = str(tmp_path / "c")
    recipes.train_bnn("overrides", checkpoint_dir=ckpt, checkpoint_every=8,
                      hidden=(16,), epochs=1)
    state = tf.train.get_checkpoint_state(ckpt)
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)
    assert steps == [8, 16, 21]  # max_to_keep=3: the latest three


def test_checkpoint_of_another_architecture_is_a_clear_error(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(32,), epochs=1)
    with pytest.raises(CheckpointMismatchError) as e:
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(64,), epochs=1)
    msg = str(e.value)
    assert ckpt in msg and "bnn/dense0/kernel has shape [64, 32]" in msg
    assert "needs [64, 64]" in msg and "new --checkpoint-dir" in msg
    assert isinstance(e.value, ValueError)


def test_checkpoint_of_another_model_is_a_clear_error(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=1)
    split = data.digits_splits()
    with pytest.raises(CheckpointMismatchError, match="holds a different model") as e:
        loop.train(lambda: models.build_dorefa("overrides", hidden=(16,)),
                   recipes._classifier_feeds(split.x_train, split.y_train, 64, 0),  # pylint: disable=protected-access
                   lambda m: {}, epochs=1, checkpoint_dir=ckpt)
    msg = str(e.value)
    assert "dorefa/dense0/kernel [64, 16] is missing" in msg
    assert "It holds e.g. bnn/" in msg and ckpt in msg


def test_unreadable_checkpoint_is_a_clear_error(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "checkpoint").write_text('model_checkpoint_path: "bnn-5"\n')
    (ckpt / "bnn-5.index").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointMismatchError, match="cannot read checkpoint"):
        recipes.train_bnn("overrides", checkpoint_dir=str(ckpt), hidden=(16,), epochs=1)


DATA = "bnn-21.data-00000-of-00001"


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    """A checkpoint directory holding bnn-21 (one epoch of a small BNN)."""
    ckpt = str(tmp_path_factory.mktemp("good") / "ckpt")
    recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=1)
    return ckpt


def _copy_checkpoint(source, target):
    # The state file TensorFlow writes holds absolute paths: name the copy's own.
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.copytree(source, target)
    (pathlib.Path(target) / "checkpoint").write_text(
        'model_checkpoint_path: "bnn-21"\nall_model_checkpoint_paths: "bnn-21"\n')
    return target


@pytest.mark.parametrize("how", ["truncated", "empty", "deleted", "corrupt"])
def test_damaged_checkpoint_data_is_a_clear_error_naming_the_file(
        tmp_path, good_checkpoint, how):
    ckpt = _copy_checkpoint(good_checkpoint, str(tmp_path / "ckpt"))
    data_file = os.path.join(ckpt, DATA)
    size = os.path.getsize(data_file)
    if how == "truncated":
        with open(data_file, "r+b") as f:
            f.truncate(size // 2)
    elif how == "empty":
        open(data_file, "wb").close()
    elif how == "deleted":
        os.unlink(data_file)
    else:  # same size, one flipped block: only the checksum tells
        with open(data_file, "r+b") as f:
            f.seek(size // 2)
            block = f.read(4)
            f.seek(size // 2)
            f.write(bytes(b ^ 0xFF for b in block))
    steps = []
    with pytest.raises(CheckpointDamagedError) as e:
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=2,
                          on_step=lambda step, loss: steps.append(step))
    msg = str(e.value)
    assert data_file in msg and "is damaged" in msg, msg
    assert ("missing" if how == "deleted" else "cannot be read") in msg
    assert "Nothing was trained" in msg and "empty --checkpoint-dir" in msg
    assert steps == []
    # Still a CheckpointMismatchError and a ValueError: the scripts exit 2.
    assert isinstance(e.value, CheckpointMismatchError)
    assert isinstance(e.value, ValueError) and e.value.filename.endswith("bnn-21")


def test_damaged_latest_checkpoint_names_the_older_ones(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    recipes.train_bnn("overrides", checkpoint_dir=ckpt, checkpoint_every=8,
                      hidden=(16,), epochs=1)
    open(os.path.join(ckpt, DATA), "wb").close()
    with pytest.raises(CheckpointDamagedError, match="older checkpoint") as e:
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=2)
    assert "(bnn-8, bnn-16)" in str(e.value)


@pytest.mark.parametrize("how", ["empty", "deleted"])
def test_damaged_index_is_a_damaged_checkpoint(tmp_path, good_checkpoint, how):
    # Without its .index, tf.train.latest_checkpoint sees no checkpoint at
    # all: training would silently start afresh over the directory.
    ckpt = _copy_checkpoint(good_checkpoint, str(tmp_path / "ckpt"))
    index = os.path.join(ckpt, "bnn-21.index")
    if how == "empty":
        open(index, "wb").close()
    else:
        os.unlink(index)
    before = sorted(os.listdir(ckpt))
    with pytest.raises(CheckpointDamagedError, match=r"bnn-21\.index.*Nothing was trained"):
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=2)
    assert sorted(os.listdir(ckpt)) == before


def test_unreadable_state_file_is_a_damaged_checkpoint(tmp_path, good_checkpoint):
    ckpt = _copy_checkpoint(good_checkpoint, str(tmp_path / "ckpt"))
    (pathlib.Path(ckpt) / "checkpoint").write_bytes(b"\x00\xffnot a state {")
    with pytest.raises(CheckpointDamagedError,
                       match=r"the state file .*checkpoint cannot be read"):
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,), epochs=2)
    assert storage.latest_checkpoint(str(tmp_path)) is None  # no state file: none


@pytest.mark.parametrize("which", ["checkpoint_dir", "logdir"])
def test_folder_that_cannot_be_created_fails_before_training(tmp_path, which):
    (tmp_path / "file").write_text("a file, not a folder")
    folder = str(tmp_path / "file" / "out")
    steps = []
    with pytest.raises(TrainingOutputError) as e:
        recipes.train_bnn("overrides", hidden=(8,), epochs=1, **{which: folder},
                          on_step=lambda step, loss: steps.append(step))
    assert steps == []  # not after an epoch of training
    what = "checkpoint directory" if which == "checkpoint_dir" else "log directory"
    assert str(e.value).startswith("%s %s cannot be written: " % (what, folder))
    assert isinstance(e.value, OSError) and e.value.filename == folder


def test_read_only_checkpoint_dir_fails_before_training(tmp_path, load_tool):
    faults = load_tool("fault_injection")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    with faults.read_only(str(ckpt)) as how:
        if how is None:
            pytest.skip("no way to make a folder read-only here (not root, "
                        "no chattr)")
        steps = []
        with pytest.raises(TrainingOutputError, match="cannot be written"):
            recipes.train_bnn("overrides", hidden=(8,), epochs=1,
                              checkpoint_dir=str(ckpt),
                              on_step=lambda step, loss: steps.append(step))
    assert steps == [] and os.listdir(str(ckpt)) == []


def test_check_writable_creates_the_folder_and_leaves_nothing(tmp_path):
    folder = tmp_path / "a" / "b"
    storage.check_writable(str(folder), "log directory")
    assert folder.is_dir() and list(folder.iterdir()) == []


class _FailingSaver:
    """Saver.save that writes what a full disk leaves, then fails."""

    def __init__(self, saver, at, leave):
        self.saver, self.at, self.leave = saver, at, leave

    def save(self, sess, prefix, global_step):
        if global_step != self.at:
            return self.saver.save(sess, prefix, global_step=global_step)
        new = "%s-%d" % (prefix, global_step)
        folder = os.path.dirname(prefix)
        if self.leave == "partial data":
            open(new + ".data-00000-of-00001.tempstate123", "wb").write(b"x" * 10)
            open(new + ".index", "wb").write(b"half an index")
        elif self.leave == "state names a broken checkpoint":
            open(new + ".data-00000-of-00001", "wb").write(b"")
            open(new + ".index", "wb").write(b"")
            open(os.path.join(folder, "checkpoint.tmp9f"), "wb").write(b"model_")
            tf.compat.v1.train.update_checkpoint_state(folder, new)
        elif self.leave == "whole checkpoint, no meta graph":
            self.saver.save(sess, prefix, global_step=global_step,
                            write_meta_graph=False)
            open(new + ".meta.tmp5e", "wb").write(b"\x00" * 10)
        raise tf.errors.ResourceExhaustedError(None, None, new + ": No space left on device")


@pytest.mark.parametrize("leave", ["partial data", "state names a broken checkpoint",
                                   "whole checkpoint, no meta graph"])
def test_failed_save_keeps_the_last_good_checkpoint_and_removes_the_rest(
        tmp_path, monkeypatch, leave):
    ckpt = str(tmp_path / "ckpt")
    real_saver = tf.compat.v1.train.Saver
    monkeypatch.setattr(tf.compat.v1.train, "Saver",
                        lambda **kw: _FailingSaver(real_saver(**kw), 16, leave))
    with pytest.raises(TrainingOutputError) as e:
        recipes.train_bnn("overrides", checkpoint_dir=ckpt, checkpoint_every=8,
                          hidden=(16,), epochs=1)
    monkeypatch.undo()
    msg = str(e.value)
    assert msg.startswith("cannot write checkpoint %s/bnn-16: " % ckpt), msg
    assert "No space left on device" in msg and "rerun with the same --checkpoint-dir" in msg
    assert isinstance(e.value, OSError)
    files = sorted(os.listdir(ckpt))
    if leave == "whole checkpoint, no meta graph":
        assert "written whole before the failure and is kept" in msg
        assert tf.train.latest_checkpoint(ckpt).endswith("bnn-16")
        assert files == ["bnn-16.data-00000-of-00001", "bnn-16.index",
                         "bnn-8.data-00000-of-00001", "bnn-8.index", "bnn-8.meta",
                         "checkpoint"]
    else:
        assert "The last good checkpoint is %s/bnn-8." % ckpt in msg
        assert tf.train.latest_checkpoint(ckpt).endswith("bnn-8")
        assert files == ["bnn-8.data-00000-of-00001", "bnn-8.index", "bnn-8.meta",
                         "checkpoint"]
    # The checkpoint left behind restores and training goes on from it.
    resumed = recipes.train_bnn("overrides", checkpoint_dir=ckpt, hidden=(16,),
                                epochs=1)
    assert resumed.start_step == (16 if "whole" in leave else 8)
    assert resumed.global_step == 21


def test_summary_write_failure_is_a_clear_error(tmp_path, monkeypatch):
    logdir = str(tmp_path / "logs")
    real = tf.io.TFRecordWriter

    class Full:
        def __init__(self, path):
            self.writer, self.records = real(path), 0

        def write(self, record):
            self.records += 1
            if self.records > 4:
                raise IndexError("%s; File too large" % logdir)
            self.writer.write(record)

        def flush(self):
            self.writer.flush()

        def close(self):
            self.writer.close()

    monkeypatch.setattr(tf.io, "TFRecordWriter", Full)
    with pytest.raises(TrainingOutputError) as e:
        recipes.train_bnn("overrides", logdir=logdir, hidden=(8,), epochs=1)
    assert str(e.value).startswith("cannot write TensorBoard summaries to %s/events."
                                   % logdir)
    assert "File too large" in str(e.value) and "another --logdir" in str(e.value)


# ---------------------------------------------------------------- summaries

def test_tensorboard_summaries_hold_loss_and_accuracy(tmp_path):
    logdir = str(tmp_path / "logs")
    recipes.train_bnn("overrides", logdir=logdir, hidden=(16,), epochs=1)
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1
    tags = {}
    for event in tf.compat.v1.train.summary_iterator(files[0]):
        for v in event.summary.value:
            tags.setdefault(v.tag, []).append(event.step)
    # Every 10 steps, tagged with the global step after the update.
    assert tags["train/loss"] == [1, 11, 21]
    assert tags["eval/test_accuracy"] == [21]
    assert "eval/train_accuracy" in tags


def test_log_every_logs_every_nth_epoch_and_the_last(tmp_path):
    messages = []
    result = recipes.train_bnn("overrides", hidden=(8,), epochs=7, log_every=3,
                               log=messages.append)
    logged = [int(m.split(",")[0].split()[1]) for m in messages if m.startswith("epoch ")]
    assert logged == [3, 6, 7]
    assert [e for e, _, _ in result.evaluations] == [1, 2, 3, 4, 5, 6, 7]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="log_every"):
            recipes.train_bnn("overrides", hidden=(8,), epochs=1, log_every=bad)


def test_probes_are_fetched_only_with_the_last_step():
    counted = []

    def build():
        m = models.build_bnn("overrides", hidden=(8,))
        count = tf.compat.v1.py_func(lambda: np.float32(len(counted.append(1) or counted)),
                                     [], tf.float32, stateful=True)
        return m._replace(probes=dict(m.probes, count=count))

    split = data.digits_splits()
    result = loop.train(build, recipes._classifier_feeds(  # pylint: disable=protected-access
        split.x_train, split.y_train, 64, 0), lambda m: {}, epochs=2)
    assert result.global_step == 42
    assert len(counted) == 1 and result.probes["count"] == 1.0
    assert result.probes["ste_grad_norm"] > 0.0


def test_negative_epochs_are_refused():
    with pytest.raises(ValueError, match="epochs"):
        recipes.train_bnn("overrides", epochs=-1, hidden=(8,))


@pytest.mark.slow
def test_dann_beats_source_only_on_the_target_over_three_seeds():
    # The recipe of scripts/train_dann.py and of the README table.
    source_only, dann = [], []
    for seed in range(3):
        c = recipes.train_dann("overrides", seed=seed)
        source_only.append(c.source_only)
        dann.append(c.dann)
    assert np.mean(dann) > np.mean(source_only) + 0.03, (source_only, dann)


# ---------------------------------------------------------------- docstrings

def test_progress_bar_goes_to_stderr(capsys):
    recipes.train_bnn("overrides", hidden=(8,), epochs=1, progress=True, log=print)
    out, err = capsys.readouterr()
    assert "21/21" in err and "step" in err  # tqdm's final count, on stderr
    assert out.startswith("epoch 1, step 21: loss ")  # messages stay on stdout
    assert "21/21" not in out


# --- TrainConfig: the settings of a run, one object ------------------------------

def test_train_config_and_keyword_settings_give_the_same_run():
    split = data.digits_splits()
    feeds = recipes._classifier_feeds(  # pylint: disable=protected-access
        split.x_train, split.y_train, 64, 0)
    evals = lambda m: {"test": {m.inputs["x"]: split.x_test, m.inputs["y"]: split.y_test}}
    build = lambda: models.build_bnn("overrides", hidden=(8,))
    by_config = loop.train(build, feeds, evals, config.TrainConfig(epochs=1, seed=3))
    by_keywords = loop.train(build, feeds, evals, epochs=1, seed=3)
    replaced = loop.train(build, feeds, evals, config.TrainConfig(epochs=5, seed=3), epochs=1)
    assert by_config.losses == by_keywords.losses == replaced.losses
    assert by_config.global_step == replaced.global_step == 21


@pytest.mark.parametrize("settings, error, match", [
    (dict(epochs=1, chekpoint_dir="x"), TypeError,
     r"unknown setting 'chekpoint_dir' \(did you mean 'checkpoint_dir'\?\)"),
    (dict(seed=0), TypeError, "give the number of epochs"),
    (dict(epochs=1.5), ValueError, r"TrainConfig\(epochs=1.5\)"),
    (dict(epochs=True), ValueError, r"TrainConfig\(epochs=True\)"),
    (dict(epochs=1, checkpoint_every=0), ValueError, "checkpoint_every=0"),
    (dict(epochs=1, checkpoint_secs=-1.0), ValueError, "checkpoint_secs=-1.0"),
    (dict(epochs=1, checkpoint_secs=float("nan")), ValueError, "checkpoint_secs=nan"),
    (dict(epochs=1, on_step=3), TypeError, "on_step=3"),
])
def test_bad_train_settings_fail_before_any_graph_is_built(settings, error, match):
    built = []
    with pytest.raises(error, match=match):
        loop.train(lambda: built.append(1), lambda m, e: [], lambda m: {}, **settings)
    assert not built


def test_train_config_rejects_what_is_not_a_config():
    with pytest.raises(TypeError, match="use a TrainConfig or None"):
        loop.train(lambda: None, lambda m, e: [], lambda m: {}, {"epochs": 1})


def test_train_config_boundaries_are_accepted():
    c = config.TrainConfig(epochs=0, checkpoint_every=1, checkpoint_secs=0, log_every=1)
    assert (c.epochs, c.checkpoint_every, c.checkpoint_secs) == (0, 1, 0)
    assert c.replace(log_every=2).log_every == 2 and c.log_every == 1
