"""`graph-override explain --png` on a model of several inputs: a row per
example, an input and its map per input (an image, a 2-D array, a vector),
the columns named after the inputs, one colour scale per example shared by
its inputs (`_picture_several.layout`, checked on maps with exact zeros,
ties, all-zero and negative-only maps); the line saying which rows are
drawn; the folder of shards; inputs it cannot draw refused before the model
runs; nothing written when the drawing fails."""

import io
import os

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen
from graph_override.attribution import engine, shards
from graph_override.commands import _picture, _picture_several

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

N = 20  # more than _picture.MAX_ROWS
NAMES = ["image:0", "seq:0", "meta:0"]


def _model():
    """logits [N, 3] = relu(flat(image) W1 + flat(seq) W2 + meta W3): image
    [N, 4, 4, 3], seq [N, 2, 5] (2-D, not an image), meta [N, 3]."""
    rng = np.random.RandomState(0)
    with tf.Graph().as_default() as g:
        image = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 3], name="image")
        seq = tf.compat.v1.placeholder(tf.float32, [None, 2, 5], name="seq")
        meta = tf.compat.v1.placeholder(tf.float32, [None, 3], name="meta")
        pre = (tf.matmul(tf.reshape(image, [-1, 48]), rng.randn(48, 3).astype("float32"))
               + tf.matmul(tf.reshape(seq, [-1, 10]), rng.randn(10, 3).astype("float32"))
               + tf.matmul(meta, rng.randn(3, 3).astype("float32")))
        tf.nn.relu(pre, name="logits")
    return g.as_graph_def()


def _clip_model():
    """An input of 4 dimensions per example (a clip of 2 frames 2x2x1)."""
    with tf.Graph().as_default() as g:
        clip = tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 2, 1], name="clip")
        meta = tf.compat.v1.placeholder(tf.float32, [None, 3], name="meta")
        tf.identity(tf.reshape(clip, [-1, 8])[:, :3] + meta, name="logits")
    return g.as_graph_def()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("png_several")
    frozen.save(_model(), str(path / "model.pb"))
    frozen.save(_clip_model(), str(path / "clip.pb"))
    rng = np.random.RandomState(1)
    data = {"image": rng.uniform(-1, 1, (N, 4, 4, 3)), "seq": rng.uniform(-1, 1, (N, 2, 5)),
            "meta": rng.uniform(-1, 1, (N, 3))}
    data["meta"][:, 1] = 0.0  # exact zeros: their DeepLIFT maps are exactly 0
    for name, array in data.items():
        np.save(path / ("%s.npy" % name), array[:3].astype("float32"))
        np.save(path / ("many_%s.npy" % name), array.astype("float32"))
    np.savez(path / "x.npz", meta=data["meta"][:3].astype("float32"),
             image=data["image"][:3].astype("float32"), seq=data["seq"][:3].astype("float32"))
    np.save(path / "clip.npy", np.ones((2, 2, 2, 2, 1), np.float32))
    np.save(path / "meta2.npy", np.ones((2, 3), np.float32))
    return path


@pytest.fixture
def here(folder, monkeypatch):
    monkeypatch.chdir(folder)
    yield folder
    for name in os.listdir(folder):
        if name.startswith("out") or name.endswith(".png"):
            path = folder / name
            if path.is_dir():
                for part in os.listdir(path):
                    os.remove(path / part)
                os.rmdir(path)
            else:
                os.remove(path)


def _explain(capsys, *extra, model="model.pb", inputs="image:0,seq:0,meta:0"):
    code = cli.main(["explain", model, "--inputs", inputs, "--outputs", "logits:0", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _pixels(png):
    with Image.open(io.BytesIO(png) if isinstance(png, bytes) else png) as picture:
        return picture.format, picture.size, np.asarray(picture.convert("RGBA"))


def _size(rows, columns):
    width, height = _picture_several.figure_size(rows, columns)
    return round(width * _picture.DPI), round(height * _picture.DPI)


@pytest.mark.parametrize("data", ["image.npy,seq.npy,meta.npy", "x.npz"])
def test_the_picture_draws_each_input_beside_its_map(here, capsys, data):
    code, out, err = _explain(capsys, "--method", "deeplift", "--target", "1", "--data", data,
                              "-o", "out.npz", "--png", "maps.png")
    assert code == 0, err
    assert out.rstrip().endswith("; picture maps.png"), out  # all 3 rows: no rows line
    with np.load("out.npz") as saved:
        maps = [saved[n] for n in ("image", "seq", "meta")]
    assert (maps[2][:, 1] == 0).all() and np.abs(maps[2]).max() > 0
    x = [np.load(n) for n in ("image.npy", "seq.npy", "meta.npy")]
    grid = _picture_several.layout(x, maps, names=NAMES, method="deeplift",
                                   targets=[1, 1, 1])
    assert (grid.rows, grid.columns, grid.count) == (3, 6, 3)
    assert grid.titles == ["image", "deeplift map of image", "seq", "deeplift map of seq",
                           "meta", "deeplift map of meta"]
    assert grid.labels == ["example 0, target 1", "example 1, target 1",
                           "example 2, target 1"]
    assert [p.kind for p in grid.panels[0]] == ["image", "heat", "image", "heat", "bars",
                                                "bars"]
    form, size, pixels = _pixels("maps.png")
    assert form == "PNG" and size == _size(3, 6) == (1536, 672)
    drawn = _picture_several.draw(x, maps, names=NAMES, method="deeplift",
                                  targets=np.array([1, 1, 1]), title="model.pb")
    assert np.array_equal(_pixels(drawn)[2], pixels)  # the picture of exactly these maps


def test_one_colour_scale_per_example_shared_by_its_inputs():
    image = np.zeros((5, 2, 2, 3))
    image[0, 0, 0] = [1.0, 0.5, 0.5]  # summed over the channels: 2, the row's largest
    image[2] = -0.25  # negative only: -0.75 per pixel
    image[3, 1, 1] = [1.0, 1.0, 1.0]  # a tie with meta's 3
    image[4, 0, 0] = [np.nan, 0.0, 0.0]
    meta = np.array([[0.0, -1.5, 1.0], [0.0, 0.0, 0.0], [-0.5, 0.0, -0.1], [3.0, 0.0, 3.0],
                     [0.0, 0.5, 0.0]])
    grid = _picture_several.layout([np.ones((5, 2, 2, 3)), np.ones((5, 3))], [image, meta],
                                   names=["a:0", "b:0"], method="saliency")
    scales = [row[1].scale for row in grid.panels]
    assert [row[3].scale for row in grid.panels] == scales  # shared by both inputs
    assert scales == [("RdBu_r", -2.0, 2.0),  # signed (meta has a negative): diverging
                      ("Reds", 0.0, 1.0),  # all-zero maps: no 0/0
                      ("RdBu_r", -0.75, 0.75),  # negative only
                      ("Reds", 0.0, 3.0),  # ties, positive only: from 0
                      ("Reds", 0.0, 0.5)]  # NaN left out of the scale
    for i in range(5):
        assert np.array_equal(grid.panels[i][1].values, image[i].sum(axis=-1), equal_nan=True)
        assert np.array_equal(grid.panels[i][3].values, meta[i])
    assert grid.panels[1][1].values.shape == (2, 2) and (grid.panels[1][1].values == 0).all()
    dicts = _picture_several.layout({"b": np.ones((5, 3)), "a:0": np.ones((5, 2, 2, 3))},
                                    {"b": meta, "a:0": image}, names=["a:0", "b:0"],
                                    method="saliency")  # a dict: in the model's order
    assert dicts.titles == grid.titles and [r[1].scale for r in dicts.panels] == scales
    one = _picture_several.layout([np.ones(2), np.ones(2)], [np.array([-2.0, 0.0]),
                                                             np.zeros(2)], method="m")
    assert one.titles[::2] == ["input_0", "input_1"]  # one value per example: one bar
    assert [(p.kind, p.values.shape) for p in one.panels[0]] == [("bars", (1,))] * 4


def _targets(out):
    """The targets of the shards of the folder `out`, joined."""
    parts = []
    for shard in shards.read_manifest(out)["shards"]:
        with np.load(os.path.join(out, shard["file"])) as data:
            parts.append(data["targets"])
    return np.concatenate(parts)


@pytest.mark.parametrize("out", ["out.npz", "out_dir"])
def test_the_picture_says_which_rows_it_shows(here, capsys, monkeypatch, out):
    """Drawn with 3 rows at most (MAX_ROWS is 16: 96 panels of 3 inputs take
    matplotlib 10 s); from the folder, those rows come from 2 shards."""
    monkeypatch.setattr(_picture, "MAX_ROWS", 3)
    shard = ["--batch-size", "2", "--shard-size", "2"] if out == "out_dir" else []
    code, stdout, err = _explain(capsys, "--method", "saliency", "--data",
                                 "many_image.npy,many_seq.npy,many_meta.npy", "-o", out,
                                 "--png", "many.png", *shard)
    assert code == 0, err
    assert stdout.rstrip().endswith(
        "; picture many.png; the picture many.png shows rows 0-2 of 20 (the first 3)"), stdout
    form, size, pixels = _pixels("many.png")
    assert form == "PNG" and size == _size(3, 6)
    if out == "out_dir":  # drawn from the shards: the first 3 rows of each input's maps
        maps = shards.read_maps(out)
        assert [m.shape for m in maps] == [(N, 4, 4, 3), (N, 2, 5), (N, 3)]
        x = [np.load("many_%s.npy" % n)[:3] for n in ("image", "seq", "meta")]
        drawn = _picture_several.draw(x, [m[:3] for m in maps], names=NAMES,
                                      method="saliency", targets=_targets(out)[:3],
                                      title="model.pb")
        assert np.array_equal(_pixels(drawn)[2], pixels)


@pytest.mark.parametrize("argv, says", [
    (["--data", "clip.npy,meta2.npy", "-o", "out.npz"],
     "--png cannot draw the input clip: its examples have shape (2, 2, 2, 1) (4 dimensions)"),
    (["--data", "clip.npy,meta2.npy", "-o", "out_dir", "--shard-size", "2"],
     "--png cannot draw the input clip: its examples have shape (2, 2, 2, 1)"),
    (["--inputs", "clip:0", "--data", "clip.npy", "-o", "out.npy"],
     "--png cannot draw --data clip.npy: its examples have shape (2, 2, 2, 1)"),
    (["--method", "grad_cam", "--data", "clip.npy,meta2.npy", "-o", "out.npz"],
     "--png draws a map per input; grad_cam's map is of a layer, not of the inputs "
     "clip:0, meta:0"),
])
def test_what_it_cannot_draw_is_refused_before_the_model_runs(here, capsys, monkeypatch,
                                                               argv, says):
    def never(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setattr(engine, "Explainer", never)
    code, out, err = _explain(capsys, "--method", "saliency", "--png", "clip.png", *argv,
                              model="clip.pb", inputs="clip:0,meta:0")
    assert code == 2 and says in err and "leave out --png" in err, err
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert not [n for n in os.listdir(here) if n.startswith("out") or n.endswith(".png")]


def test_a_picture_that_fails_to_draw_writes_nothing(here, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the Agg renderer ran out of memory")

    monkeypatch.setattr(_picture, "draw_map", broken)
    code, out, err = _explain(capsys, "--method", "saliency", "--data", "x.npz", "-o",
                              "out.npz", "--png", "maps.png")
    assert code == 2 and out == ""
    assert ("--png maps.png: matplotlib failed to draw the picture (RuntimeError: the Agg "
            "renderer ran out of memory); nothing was written") in err, err
    assert not [n for n in os.listdir(here) if n.startswith(("out", ".")) or
                n.endswith((".png", ".tmp"))]
