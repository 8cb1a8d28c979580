"""Saved Keras models and SavedModels as attribution models: each format of
the release in use (Keras 3: .keras, .h5, model.export; Keras 2: .h5,
SavedModel, .keras) gives the in-memory model's maps bit for bit, frozen
inside after the refusals loading applies; `freeze` writes the frozen .pb;
a file that is no model is named for what it is."""

import os

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, cli
from graph_override.errors import AttributionError, GraphDefError

import methods_nets as nets

KERAS_3 = int(tf.keras.__version__.split(".")[0]) >= 3 if hasattr(
    tf.keras, "__version__") else not tf.__version__.startswith("2.15")
FORMATS = ("model.keras", "model.h5", "export") if KERAS_3 else ("model.h5", "saved",
                                                                 "model.keras")
X = nets.images(5, 3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(folder, the in-memory model): the CNN saved in each format."""
    folder = tmp_path_factory.mktemp("saved_models")
    model = nets.cnn_keras_model(nets.cnn_params(0))
    for name in FORMATS:
        path = str(folder / name)
        if name == "export":
            model.export(path, verbose=False)
        else:
            model.save(path)
    return folder, model


@pytest.mark.parametrize("name", FORMATS)
def test_every_saved_format_gives_the_models_maps_bit_for_bit(saved, name):
    folder, model = saved
    explainer = attribution.Explainer(str(folder / name))
    graph = explainer.model_graph(None)
    assert graph.source == str(folder / name)
    for method in ("guided_backprop", "deeplift"):
        expected = attribution.Explainer(model).attribute(method, X, target=1)
        result = explainer.attribute(method, X, target=1)
        assert np.array_equal(result.maps, expected.maps), (name, method)
        assert np.array_equal(result.outputs, expected.outputs)


def test_a_lambda_layer_is_refused_as_keras_safe_mode_refuses_it(tmp_path):
    keras = nets.keras_module()
    model = keras.Sequential([keras.Input((3,)), keras.layers.Lambda(lambda t: t * 2.0),
                              keras.layers.Dense(2)])
    model.save(str(tmp_path / "lambda.keras"))
    with pytest.raises(AttributionError, match=r"lambda\.keras: cannot be loaded as a Keras "
                                               r"model .*"):
        attribution.Explainer(str(tmp_path / "lambda.keras"))


class _Writer(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def __call__(self, x):
        tf.io.write_file("/nonexistent/written", tf.strings.as_string(x[0, 0]))
        return x * 2.0


def test_a_savedmodel_that_reaches_outside_is_refused_before_it_is_loaded(tmp_path):
    path = str(tmp_path / "writer")
    module = _Writer()
    tf.saved_model.save(module, path, signatures=module.__call__)
    with pytest.raises(AttributionError, match=r"holds 1 node\(s\) that reach outside the "
                                               r"model \(.*/WriteFile \(WriteFile\)\); "
                                               r"nothing of it was loaded.*--allow-op "
                                               r"WriteFile"):
        attribution.Explainer(path)
    graph = attribution.Explainer(path, allow_ops=["WriteFile"]).model_graph(None)
    assert graph.output.endswith(":0")


def test_a_file_that_is_no_model_is_named_for_what_it_is(tmp_path):
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(GraphDefError, match=r"x\.npy: is a NumPy array \(\.npy\), not a model "
                                            r"\(a frozen GraphDef .pb/.pbtxt, a Keras "
                                            r".keras/.h5 file or a SavedModel folder\); give "
                                            r"the model first and the array as --data"):
        attribution.Explainer(str(tmp_path / "x.npy"), inputs="x", outputs="y")
    (tmp_path / "model.zip").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    with pytest.raises(GraphDefError, match=r"is a zip archive, not a model .*; if it is a "
                                            r"Keras model, name it \*\.keras"):
        attribution.Explainer(str(tmp_path / "model.zip"), inputs="x", outputs="y")


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", FORMATS)
def test_freeze_writes_the_frozen_graph_and_its_names(saved, name, capsys):
    folder, model = saved
    pb = folder / (name.replace(".", "_") + ".pb")
    code, out, err = _main(capsys, "freeze", str(folder / name), "-o", str(pb))
    assert code == 0, err
    graph = attribution.Explainer(str(folder / name)).model_graph(None)
    assert "input: %s shape (None, 8, 8, 1)\noutput: %s\n" % (graph.input, graph.output) in out
    maps = attribution.Explainer(str(pb), inputs=graph.input, outputs=graph.output).attribute(
        "deconvnet", X, target=2).maps
    assert np.array_equal(maps, attribution.Explainer(model).attribute("deconvnet", X,
                                                                         target=2).maps)
    before = pb.read_bytes()
    code, _, err = _main(capsys, "freeze", str(folder / name), "-o", str(pb))
    assert code == 2 and "exists already; pass --force to replace it" in err
    assert pb.read_bytes() == before
    assert _main(capsys, "freeze", str(folder / name), "-o", str(pb), "--force")[0] == 0
    assert [n for n in os.listdir(folder) if n.startswith(".")] == []


def test_explain_and_inspect_take_a_keras_model_without_names(saved, capsys, tmp_path):
    folder, model = saved
    np.save(tmp_path / "x.npy", X)
    name = FORMATS[0]
    code, out, err = _main(capsys, "explain", str(folder / name), "--method", "saliency",
                           "--data", str(tmp_path / "x.npy"), "-o", str(tmp_path / "m.npy"))
    assert code == 0, err
    assert np.array_equal(np.load(tmp_path / "m.npy"),
                          attribution.Explainer(model).attribute("saliency", X).maps)
    code, out, err = _main(capsys, "inspect", str(folder / name), "--method", "deeplift")
    assert code == 0, err
    assert "every op type on the path is covered" in out
    code, _, err = _main(capsys, "freeze", str(tmp_path / "x.npy"), "-o", str(tmp_path / "f.pb"))
    assert code == 2 and "expected a Keras model (.keras, .h5) or a SavedModel folder" in err
