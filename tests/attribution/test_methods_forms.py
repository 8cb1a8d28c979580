"""The model forms: a tf.compat.v1 Session graph, its frozen .pb and the
Keras model with the same weights give the same maps; rules reach ops in
Keras layers and in the function library; TF1 control flow."""

import re

import numpy as np
import pytest
import tensorflow as tf

from graph_override import attribution, frozen
from graph_override.attribution import method_table
from graph_override.errors import AttributionError, ConversionError

import methods_nets as nets

# The three forms freeze to different graphs (Keras adds casts and reads,
# BiasAdd vs Add), run by the same engine: float32 rounding apart.
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def cnn():
    return nets.cnn_params(0)


@pytest.fixture(scope="module")
def forms(cnn, tmp_path_factory):
    """{form: Explainer} of the same CNN."""
    session, x, logits = nets.cnn_session(cnn)
    path = tmp_path_factory.mktemp("cnn") / "cnn.pb"
    with session.graph.as_default():
        graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
            session, session.graph.as_graph_def(), ["logits"])
    frozen.save(graph_def, str(path))
    out = {"session": attribution.Explainer(session=session, inputs=x, outputs=logits),
           "pb": attribution.Explainer(str(path), inputs="x:0", outputs="logits:0"),
           "keras": attribution.Explainer(nets.cnn_keras_model(cnn)),
           "tf2 function": attribution.Explainer(
               tf.function(lambda t: nets.cnn(cnn, t)))}
    session.close()  # the Explainer froze the weights: the session is no longer needed
    return out


# The options each method runs with across the forms: one entry per method
# record (a record without one fails test_every_method_has_a_numpy_reference_
# and_cases, in test_method_records.py).
CASES = {"saliency": {}, "gradient_input": {}, "smoothgrad": {"samples": 3, "seed": 1},
         "integrated_gradients": {"steps": 8}, "grad_cam": {}, "guided_backprop": {},
         "deconvnet": {}, "eps_lrp": {"epsilon": 0.01}, "deeplift": {"baseline": 0.1}}


@pytest.mark.parametrize("method", list(method_table.METHODS))
def test_the_forms_give_the_same_maps(forms, method):
    options = CASES[method]  # KeyError: a method record without its case here
    x = nets.images(4, seed=1)
    results = {form: e.attribute(method, x, **options) for form, e in forms.items()}
    reference = results.pop("session")
    assert np.abs(reference.maps).max() > 0
    for form, result in results.items():
        np.testing.assert_allclose(result.maps, reference.maps, rtol=RTOL, atol=ATOL,
                                   err_msg=form)
        np.testing.assert_array_equal(result.targets, reference.targets)
        np.testing.assert_allclose(result.outputs, reference.outputs, rtol=RTOL, atol=ATOL)


def test_the_session_form_matches_tf_gradients_in_the_session(cnn):
    session, x, logits = nets.cnn_session(cnn)
    images = nets.images(3, seed=2)
    with session.graph.as_default():
        grads, = tf.compat.v1.gradients(logits[:, 2], x)
    expected = session.run(grads, {x: images})
    result = attribution.saliency(None, images, 2, session=session, inputs=x,
                                  outputs=logits, abs=False)
    np.testing.assert_allclose(result.maps, expected, rtol=RTOL, atol=ATOL)
    session.close()


@pytest.mark.parametrize("method,options", [("saliency", {}), ("guided_backprop", {}),
                                            ("deeplift", {}), ("grad_cam", {})])
def test_the_session_form_runs_inside_the_users_graph(cnn, forms, method, options):
    """How TF1 code calls it: inside ``with graph.as_default():``, where
    TensorFlow builds symbolic tensors; the maps are those made outside."""
    session, x, logits = nets.cnn_session(cnn)
    images = nets.images(3, seed=4)
    expected = forms["session"].attribute(method, images, 1, **options)
    with session.graph.as_default():
        explainer = attribution.Explainer(session=session, inputs=x, outputs=logits)
        in_graph = explainer.attribute(method, images, 1, **options)
        one_call = getattr(attribution, method)(None, images, 1, session=session, inputs=x,
                                                outputs=logits, **options)
        assert not tf.executing_eagerly()  # the caller's graph mode is left as it was
        assert tf.compat.v1.get_default_graph() is session.graph
    for result in (in_graph, one_call):
        np.testing.assert_array_equal(result.maps, expected.maps)
        np.testing.assert_array_equal(result.outputs, expected.outputs)
    session.close()


def test_an_explainer_compiles_once_per_rule_set(forms):
    explainer = forms["pb"]
    x = nets.images(2, seed=3)
    first = explainer.function(x)
    explainer.attribute("saliency", x)
    explainer.attribute("gradient_input", x)
    assert explainer.function(x) is first
    with pytest.warns(UserWarning, match=r"the rules Relu=remove change no node of .*cnn\.pb"):
        assert explainer.function(x, ("Relu=remove",)) is not first


def test_a_callable_is_traced_once_per_input_spec():
    calls = []

    def model(t):
        calls.append(t.shape)
        return tf.reduce_sum(t * t, axis=1, keepdims=True)

    explainer = attribution.Explainer(model)
    for n in (1, 3, 5):
        result = explainer.attribute("saliency", np.ones((n, 2), "float32"), abs=False)
        np.testing.assert_array_equal(result.maps, np.full((n, 2), 2.0))
    assert [s.as_list() for s in calls] == [[None, 2]]
    explainer.attribute("saliency", np.ones((1, 3), "float32"))
    assert len(calls) == 2


def test_a_keras_model_refuses_x_that_does_not_fit_its_input_before_tracing(forms):
    keras_form = forms["keras"]
    image = nets.images(1, seed=7)[0]  # one example without its batch axis
    with pytest.raises(AttributionError, match=re.escape(
            "x has shape (8, 8, 1); the input of model %s takes (None, 8, 8, 1) (first "
            "dimension the examples): for one example, pass x[None] (shape (1, 8, 8, 1))"
            % keras_form.model.name)):
        attribution.saliency(keras_form, image, 0)
    with pytest.raises(AttributionError, match=re.escape(
            "x has shape (2, 7, 7, 1); the input of model %s takes (None, 8, 8, 1) (first "
            "dimension the examples)" % keras_form.model.name) + "$"):
        attribution.saliency(keras_form, np.zeros((2, 7, 7, 1), "float32"), 0)
    one = attribution.saliency(keras_form, image[None], 0, abs=False).maps
    np.testing.assert_allclose(
        one, forms["tf2 function"].attribute("saliency", image[None], 0, abs=False).maps,
        rtol=RTOL, atol=ATOL)
    assert np.abs(one).max() > 0


def test_grad_cam_picks_the_last_4d_tensor_and_equals_its_definition(cnn):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        tf.identity(nets.cnn(cnn, x), name="logits")
    graph_def = g.as_graph_def()
    from graph_override.attribution import gradcam  # pylint: disable=import-outside-toplevel
    assert gradcam.last_4d_tensor(graph_def, "x:0", "logits:0") == "features:0"
    images = nets.images(3, seed=4)
    result = attribution.grad_cam(graph_def, images, [0, 1, 2], inputs="x", outputs="logits")
    # the definition, in TF2, on the same weights
    xt = tf.constant(images)
    k2 = tf.constant(cnn["k2"])
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.bias_add(
        tf.nn.conv2d(xt, tf.constant(cnn["k1"]), 1, "SAME"), cnn["c1"])), 2, 2, "VALID")
    features = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, k2, 1, "SAME"), cnn["c2"]))
    with tf.GradientTape() as tape:
        tape.watch(features)
        logits = tf.nn.bias_add(tf.matmul(tf.reshape(features, [-1, 96]), cnn["w"]), cnn["b"])
        picked = tf.gather(logits, [0, 1, 2], axis=1, batch_dims=1)
    weights = tf.reduce_mean(tape.gradient(picked, features), axis=[1, 2], keepdims=True)
    expected = tf.nn.relu(tf.reduce_sum(weights * features, axis=-1)).numpy()
    assert result.maps.shape == (3, 4, 4)
    np.testing.assert_allclose(result.maps, expected, rtol=RTOL, atol=ATOL)
    assert (result.maps == 0).any() and (result.maps > 0).any()  # the ReLU cuts
    resized = attribution.grad_cam(graph_def, images, [0, 1, 2], inputs="x",
                                   outputs="logits", layer="features", resize=True)
    assert resized.maps.shape == (3, 8, 8)


def test_grad_cam_refuses_a_layer_it_cannot_use(cnn):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        tf.identity(nets.cnn(cnn, x), name="logits")
    images = nets.images(1, seed=5)
    with pytest.raises(AttributionError, match=r"grad_cam\(layer='feature'\): <GraphDef> has no "
                       r"node 'feature' \(did you mean 'features'\?\)"):
        attribution.grad_cam(g.as_graph_def(), images, inputs="x", outputs="logits",
                             layer="feature")
    with pytest.raises(AttributionError, match="needs a 4-D"):
        attribution.grad_cam(g.as_graph_def(), images, inputs="x", outputs="logits",
                             layer="Reshape:0")
    # a 4-D weight (the first convolution's kernel, a Const): not activations
    kernel = next(n.name for n in g.as_graph_def().node if n.op == "Const"
                  and len(n.attr["value"].tensor.tensor_shape.dim) == 4)
    with pytest.raises(AttributionError, match=r"grad_cam\(layer='%s'\): %s:0 is not computed "
                       r"from the input x:0" % (re.escape(kernel), re.escape(kernel))):
        attribution.grad_cam(g.as_graph_def(), images, inputs="x", outputs="logits",
                             layer=kernel)
    dense = nets.dense_graph_def(nets.dense_params([3, 2], 0), None)
    with pytest.raises(AttributionError, match="has no 4-D tensor"):
        attribution.grad_cam(dense, np.ones((1, 3), "float32"), inputs="x", outputs="logits")


def test_grad_cam_takes_a_keras_layer_or_its_name(cnn):
    model = nets.cnn_keras_model(cnn)
    conv2 = model.layers[2]  # Conv2D(6) with its ReLU, after the MaxPool
    explainer = attribution.Explainer(model)
    images = nets.images(3, seed=8)
    graph = explainer.model_graph(images)
    from graph_override.attribution import gradcam  # pylint: disable=import-outside-toplevel
    tensor = gradcam.last_4d_tensor(graph.graph_def, graph.input, graph.output)
    by_tensor = explainer.attribute("grad_cam", images, [0, 1, 2], layer=tensor).maps
    by_name = explainer.attribute("grad_cam", images, [0, 1, 2], layer=conv2.name).maps
    by_layer = attribution.grad_cam(model, images, [0, 1, 2], layer=conv2).maps
    np.testing.assert_array_equal(by_name, by_tensor)
    np.testing.assert_array_equal(by_layer, by_tensor)
    # by hand on the Keras model: its layers called in turn, the gradient of
    # the targets with respect to conv2's output
    xt = tf.constant(images)
    features = conv2(model.layers[1](model.layers[0](xt)))
    with tf.GradientTape() as tape:
        tape.watch(features)
        logits = model.layers[4](model.layers[3](features))
        picked = tf.gather(logits, [0, 1, 2], axis=1, batch_dims=1)
    weights = tf.reduce_mean(tape.gradient(picked, features), axis=[1, 2], keepdims=True)
    expected = tf.nn.relu(tf.reduce_sum(weights * features, axis=-1)).numpy()
    assert by_name.shape == (3, 4, 4)
    np.testing.assert_allclose(by_name, expected, rtol=RTOL, atol=ATOL)
    assert (by_name == 0).any() and (by_name > 0).any()
    # the first convolution: 8x8 maps, not the default layer's
    first = attribution.grad_cam(model, images, 0, layer=model.layers[0].name).maps
    assert first.shape == (3, 8, 8)


@pytest.mark.parametrize("rebuild", ["from_config", "load_model"])
def test_grad_cam_takes_a_layer_of_a_sequential_model_rebuilt_from_its_config(
        cnn, rebuild, tmp_path):
    """Keras 3 builds a Sequential model rebuilt from its config (load_model
    of a .keras file, Sequential.from_config) by calling its layers more than
    once, and ``layer.output``, the first call's, is then off the path to the
    model's output (Keras 2 calls them once). The layer by name and by object
    gives the maps of the model it was rebuilt from, bit for bit."""
    keras = nets.keras_module()
    model = nets.cnn_keras_model(cnn)
    if rebuild == "from_config":
        again = keras.Sequential.from_config(model.get_config())
        again.set_weights(model.get_weights())
    else:
        path = str(tmp_path / "cnn.keras")
        model.save(path)
        again = keras.models.load_model(path)
    images = nets.images(3, seed=10)
    name = model.layers[2].name
    expected = attribution.grad_cam(model, images, [0, 1, 2], layer=name).maps
    assert expected.shape == (3, 4, 4) and (expected > 0).any()
    np.testing.assert_array_equal(
        attribution.grad_cam(again, images, [0, 1, 2], layer=name).maps, expected)
    np.testing.assert_array_equal(attribution.grad_cam(
        again, images, [0, 1, 2], layer=again.get_layer(name)).maps, expected)


def test_grad_cam_refuses_a_keras_layer_it_cannot_find(cnn):
    model = nets.cnn_keras_model(cnn)
    images = nets.images(1, seed=9)
    name = model.layers[2].name
    with pytest.raises(AttributionError, match=r"grad_cam\(layer='%sx'\): model %s has no "
                       r"layer '%sx' \(did you mean '%s'.*\)" % (
                           name, model.name, name, name)):
        attribution.grad_cam(model, images, layer=name + "x")
    dense = model.layers[4].name
    with pytest.raises(AttributionError, match=r"grad_cam\(layer='%s'\): the layer has shape "
                       r"\(1, 3\) \(tensor .*%s.* of the frozen graph\); Grad-CAM needs a 4-D"
                       % (dense, dense)):
        attribution.grad_cam(model, images, layer=dense)
    other = nets.cnn_keras_model(cnn)
    with pytest.raises(AttributionError, match="is not one of the layers of model %s"
                       % model.name):
        attribution.grad_cam(model, images, layer=other.layers[2])
    keras = nets.keras_module()

    class Subclassed(keras.Model):  # pylint: disable=too-few-public-methods
        def __init__(self):
            super().__init__()
            self.conv = keras.layers.Conv2D(2, 3, activation="relu", name="conv")
            self.flat = keras.layers.Flatten()

        def call(self, inputs):  # pylint: disable=arguments-differ
            return self.flat(self.conv(inputs))

    sub = Subclassed()
    with pytest.raises(AttributionError, match=r"grad_cam\(layer='conv'\): model .* is a "
                       r"subclassed Keras model.*pass a tensor name of the frozen graph"):
        attribution.grad_cam(sub, images, 0, layer="conv")
    assert attribution.grad_cam(sub, images, 0).maps.shape == (1, 6, 6)  # the default


def test_grad_cam_applies_the_callers_rules(cnn):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        logits = nets.cnn(cnn, x)
        tf.identity(tf.round(logits * 100.0), name="rounded")
    images = nets.images(2, seed=6)
    with pytest.raises(AttributionError, match="does not depend on the layer features:0"):
        attribution.grad_cam(g.as_graph_def(), images, 0, inputs="x", outputs="rounded")
    rounded = attribution.Explainer(g.as_graph_def(), inputs="x", outputs="rounded",
                                    rules=["Round=ste_round"])
    plain = attribution.Explainer(g.as_graph_def(), inputs="x", outputs=logits.name)
    np.testing.assert_allclose(rounded.attribute("grad_cam", images, 0).maps,
                               100.0 * plain.attribute("grad_cam", images, 0).maps,
                               rtol=1e-5, atol=1e-5)


def _v1_loop_session():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.compat.v1.Variable([[0.5, -1.0], [1.0, 0.25]])
        _, h = tf.compat.v1.while_loop(
            lambda i, h: i < 2, lambda i, h: (i + 1, tf.nn.relu(tf.matmul(h, w))),
            (tf.constant(0), x))
        session = tf.compat.v1.Session(graph=graph)
        session.run(tf.compat.v1.global_variables_initializer())
    return session, x, h


def test_a_tf1_while_loop_is_refused_with_the_reason():
    from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
    enabled = control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf.compat.v1.disable_control_flow_v2()
    try:
        session, x, h = _v1_loop_session()
    finally:
        if enabled:
            tf.compat.v1.enable_control_flow_v2()
    assert "Enter" in {op.type for op in session.graph.get_operations()}
    with pytest.raises(ConversionError, match=r"^<Session graph>: .*TF1 while loop.*control "
                       r"flow v2"):
        attribution.saliency(None, np.ones((1, 2), "float32"), session=session,
                             inputs=x, outputs=h)
    session.close()


def test_a_tf1_cond_works():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        flag = tf.compat.v1.placeholder_with_default(True, [], name="flag")
        y = tf.compat.v1.cond(flag, lambda: tf.tanh(x) * 3.0, lambda: x)
        session = tf.compat.v1.Session(graph=graph)
    values = np.array([[0.0, 0.5]], "float32")
    result = attribution.gradient_input(None, values, 1, session=session, inputs=x, outputs=y)
    np.testing.assert_allclose(result.maps, [[0.0, 0.5 * 3.0 * (1 - np.tanh(0.5) ** 2)]],
                               rtol=1e-6)
    session.close()


def test_rules_reach_ops_in_keras_layers_and_in_the_function_library():
    """A nested tf.function is inlined by freezing; a functional While and
    If keep their bodies in the library, where the rules reach them: guided
    backprop stops the negative gradient at the Relu inside the loop body."""
    w = tf.Variable(np.array([[1.0, -1.0], [-0.5, 2.0]], "float32"))

    @tf.function
    def inner(t):
        return tf.nn.relu(tf.matmul(t, w))

    def model(t):
        _, h = tf.while_loop(lambda i, h: i < 1, lambda i, h: (i + 1, inner(h)),
                             (tf.constant(0), t))
        return tf.cond(tf.reduce_sum(h) > -1e9, lambda: -h, lambda: h)

    explainer = attribution.Explainer(model)
    x = np.array([[1.0, 0.25]], "float32")  # x @ w = [0.875, -0.5]: the first unit lives
    function = explainer.function(x, tuple(method_table.rule_strings("guided_backprop")))
    where = {c.node.split("/")[0] for c in function.patch_report.changes}
    assert any(name.startswith("while_body") for name in where), where
    plain = explainer.attribute("saliency", x, target=0, abs=False).maps
    guided = explainer.attribute("guided_backprop", x, target=0).maps
    np.testing.assert_allclose(plain, [[-1.0, 0.5]])  # d(-relu(x @ w)[0]) / dx = -w[:, 0]
    np.testing.assert_array_equal(guided, [[0.0, 0.0]])  # dy = -1 < 0 at the Relu


def test_a_keras_model_with_two_inputs_takes_a_list_and_refuses_one_array():
    """One array for a model of two inputs is refused before tracing; a list
    gives a map per input (tests/attribution/test_several_inputs.py), the
    first the map of a function of that input with the other fixed."""
    keras = nets.keras_module()
    a, b = keras.Input((3,), name="a"), keras.Input((3,), name="b")
    model = keras.Model([a, b], keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(AttributionError, match=r"the model has 2 inputs \(a, b\): give x as "
                       r"a list of 2 arrays in that order, or a dict keyed by their names"):
        attribution.saliency(model, x, 0)
    other = tf.constant(np.full((2, 3), 0.5, np.float32))
    got = attribution.saliency(lambda t: model([t, other]), x, 0, abs=False).maps
    both = attribution.saliency(model, [x, other.numpy()], 0, abs=False).maps
    np.testing.assert_array_equal(both[0], got)
    with tf.GradientTape() as tape:
        xt = tf.constant(x)
        tape.watch(xt)
        picked = model([xt, other])[:, 0]
    np.testing.assert_array_equal(got, tape.gradient(picked, xt).numpy())
