"""Sanity checks for saliency maps (Adebayo et al., NeurIPS 2018): do a
method's maps depend on the model they explain?

* `randomization`, the cascading model-randomization check: the weights of
  the frozen model are re-drawn layer by layer from the top (the output)
  down, in a copy of the frozen GraphDef (its Const nodes replaced; the
  model, a `.pb` on disk, is never changed), and each method's maps of the
  randomized model are compared with those of the model as given. A method
  whose maps stay similar while the model's outputs change shows the input,
  not what the model learned; Sixt et al. (ICML 2020) show that LRP's z+ and
  alpha-beta rules are such methods past the first layers.
* `random_logit`, the random-logit check (Sixt et al. 2020), for several
  methods at once: `graph_override.attribution.metrics.random_logit` per
  method.
* `class_dependence`, Sixt et al.'s reason for z+ directly: the maps of one
  example for every class, as the rows of a matrix, and how far that matrix
  is from rank 1.

A layer is a MatMul, Conv2D, Conv3D, DepthwiseConv2dNative or
Conv2DBackpropInput whose weights are a Const of the graph (through
Identity, Reshape, Squeeze, ExpandDims or Cast, as Keras freezes them),
with its bias: the Const the BiasAdd (Add, AddV2) after it adds. The new
weights are drawn from a normal distribution with the mean and standard
deviation of the weights they replace (so the activations keep their
scale; a bias whose values are all equal, as zeros, takes its kernel's
standard deviation), from ``numpy.random.default_rng(seed)``, layer after layer from the
top: stage k of the cascade has the top k layers re-drawn, with the same
draws as stage k - 1 for the layers above. Batch normalization's
parameters are kept.

Methods: a name, a list of names, or a mapping label -> name or (name,
options), to check one method under several settings side by side (LRP's
composites: ``{"z+": ("lrp", {"composite": "zplus"}), "epsilon": ("lrp",
{"composite": "epsilon"})}``). Each method's options are `default_options`
updated with those given, and checked against the method's record before
any model is run.

Similarity (per example): "spearman", the rank correlation of the maps
(of their absolute values with ``absolute=True``, the paper's main
measure), "pearson", or a function (a, b) -> one number per example, a and
b the flattened maps (examples x features).

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override import attribution
  >>> from graph_override.attribution import sanity
  >>> tf.keras.utils.set_random_seed(0)
  >>> model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(
  ...     8, activation="relu"), tf.keras.layers.Dense(3)])
  >>> x = np.random.RandomState(0).uniform(-1, 1, (5, 4)).astype("float32")
  >>> report = sanity.randomization(model, x, ["saliency"], target=0, seed=1)
  >>> len(report.layers), report.scores["saliency"].shape
  (2, (2, 5))
"""

import collections.abc
import dataclasses

import numpy as np

from graph_override.attribution import engine, method_table
from graph_override.attribution.metrics import randomization as metrics_randomization
from graph_override.errors import AttributionError

__all__ = ["LAYER_OPS", "Randomization", "class_dependence", "default_options", "layers",
           "random_logit", "randomization", "randomized"]

LAYER_OPS = {"MatMul": 1, "Conv2D": 1, "Conv3D": 1, "DepthwiseConv2dNative": 1,
             "Conv2DBackpropInput": 1}
"""The op types of a layer, and which of their inputs holds the weights."""

_THROUGH = ("Identity", "Reshape", "Squeeze", "ExpandDims", "Cast")
_BIAS_OPS = ("BiasAdd", "Add", "AddV2")


@dataclasses.dataclass
class Randomization:
    """The cascade's result.

    Attributes:
      methods: the methods compared.
      layers: the layers re-drawn, top (output) first: stage k re-drew
        ``layers[:k + 1]``. Each is the layer op's name.
      scores: method -> similarity per stage and example, shape (stages, N):
        1 where the map did not change.
      output_change: per stage, the largest |f(x) change| of the model's
        outputs over the largest |f(x)| (0: the randomization did nothing).
      similarity, absolute, seed: how it was measured.
    """

    methods: tuple
    layers: tuple
    scores: dict
    output_change: np.ndarray
    similarity: str
    absolute: bool
    seed: int
    runs: dict = dataclasses.field(default_factory=dict)

    def mean(self):
        """method -> the mean similarity of each stage (NaN left out)."""
        return {m: [float(np.nanmean(row)) if np.isfinite(row).any() else float("nan")
                    for row in s] for m, s in self.scores.items()}

    def table(self):
        """A markdown table: a row per method, a column per stage."""
        names = [name.rsplit("/", 1)[0] or name for name in self.layers]
        rows = ["| method | " + " | ".join("down to %s" % n for n in names) + " |",
                "|---|" + "---|" * len(names)]
        rows += ["| %s | %s |" % (m, " | ".join("%.2f" % v for v in means))
                 for m, means in self.mean().items()]
        return "\n".join(rows)


def _traced_const(nodes, name):
    """The Const node `name` leads to through `_THROUGH` ops (their first
    input), or None."""
    seen = set()
    while name in nodes and name not in seen:
        seen.add(name)
        node = nodes[name]
        if node.op == "Const":
            return node
        if node.op not in _THROUGH or not node.input:
            return None
        name = node.input[0].lstrip("^").split(":")[0]
    return None


def _path_order(graph_def, output):
    """The nodes the output depends on (data inputs), inputs before users."""
    nodes = {n.name: n for n in graph_def.node}
    order, state = [], {}
    stack = [(output.split(":")[0], False)]
    while stack:
        name, done = stack.pop()
        if done:
            order.append(name)
            continue
        if name in state or name not in nodes:
            continue
        state[name] = True
        stack.append((name, True))
        stack.extend((i.split(":")[0], False) for i in nodes[name].input
                     if not i.startswith("^"))
    return order


def layers(graph_def, output):
    """[(layer op name, weight Const name, bias Const name or None)] of
    the layers the output depends on, top (nearest the output) first."""
    nodes = {n.name: n for n in graph_def.node}
    consumers = {}
    for node in graph_def.node:
        for i in node.input:
            consumers.setdefault(i.split(":")[0], []).append(node)
    found = []
    for name in reversed(_path_order(graph_def, output)):
        node = nodes[name]
        if node.op not in LAYER_OPS or len(node.input) <= LAYER_OPS[node.op]:
            continue
        weight = _traced_const(nodes, node.input[LAYER_OPS[node.op]].split(":")[0])
        if weight is None:
            continue
        bias = None
        for user in consumers.get(name, ()):
            if user.op in _BIAS_OPS:
                other = [i for i in user.input if i.split(":")[0] != name]
                bias = _traced_const(nodes, other[0].split(":")[0]) if other else None
                if bias is not None:
                    break
        found.append((name, weight.name, None if bias is None else bias.name))
    return found


def randomized(graph_def, chosen, seed):
    """[GraphDef], one per stage: `graph_def` (a copy; not changed) with
    the Consts of the top k layers of `chosen` (`layers`' tuples) re-drawn."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    nodes = {n.name: n for n in graph_def.node}
    rng = np.random.default_rng(seed)
    draws = []
    for _, *weights in chosen:  # the draws, layer by layer from the top
        layer, spread = {}, 0.0
        for name in filter(None, weights):  # the kernel, then the bias
            value = tf.make_ndarray(nodes[name].attr["value"].tensor)
            if value.dtype.kind != "f":
                continue
            spread = float(value.std()) or spread  # a constant bias: the kernel's
            layer[name] = rng.normal(float(value.mean()), spread,
                                     value.shape).astype(value.dtype)
        draws.append(layer)
    stages, current = [], tf.compat.v1.GraphDef()
    current.CopyFrom(graph_def)
    for layer in draws:
        stage = tf.compat.v1.GraphDef()
        stage.CopyFrom(current)
        for node in stage.node:
            if node.name in layer:
                node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(layer[node.name]))
        stages.append(stage)
        current = stage
    return stages


def default_options(method, x):
    """The options `randomization` and `random_logit` start a method's from
    (those given update them): few steps and samples, occlusion's patch a
    quarter of each axis but the last (at least 1)."""
    if method == "integrated_gradients":
        return {"steps": 16}
    if method == "smoothgrad":
        return {"samples": 8, "seed": 0}
    if method == "occlusion":
        spatial = x.shape[1:-1] if x.ndim > 2 else x.shape[1:]
        return {"patch": tuple(max(1, s // 4) for s in spatial)}
    return {}


def _runs(methods, options, x):
    """[(label, method, options)]: `methods` (None, a name, names, or a
    mapping label -> name or (name, options)) with each one's options
    (`default_options`, then `options[label]`, then the mapping's), checked
    by the method's record."""
    if methods is None:
        methods = list(method_table.METHODS)
    elif isinstance(methods, str):
        methods = [methods]
    if isinstance(methods, collections.abc.Mapping):
        pairs = list(methods.items())
    elif all(isinstance(m, str) for m in methods):
        pairs = [(m, m) for m in methods]
    else:
        raise AttributionError("methods=%r: give names, or a mapping label -> name or "
                               "(name, options)" % (methods,))
    options = dict(options or {})
    runs = []
    for label, given in pairs:
        if isinstance(given, str):
            given = (given, {})
        if not isinstance(given, (tuple, list)) or len(given) != 2:
            raise AttributionError("methods[%r] = %r: give a method's name or (name, "
                                   "options)" % (label, given))
        name, own = given
        spec = method_table.method_spec(name)  # raises for an unknown one
        chosen = default_options(name, x)
        chosen.update(options.get(label) or {})
        chosen.update(own or {})
        try:
            spec.checked(chosen)
        except AttributionError as e:
            raise AttributionError("%s: %s" % (label, e)) from None
        runs.append((label, name, chosen))
    unknown = sorted(set(options) - {label for label, _, _ in runs})
    if unknown:
        raise AttributionError("options for %s, which are not among the methods checked (%s)"
                               % (", ".join(map(repr, unknown)),
                                  ", ".join(label for label, _, _ in runs)))
    return runs


def _compare(similarity):
    if callable(similarity):
        return similarity
    if similarity in metrics_randomization.SIMILARITIES:
        return metrics_randomization.SIMILARITIES[similarity]
    raise AttributionError("similarity=%r: give one of %s or a function (a, b) -> scores" % (
        similarity, ", ".join(sorted(metrics_randomization.SIMILARITIES))))


def randomization(model, x, methods=None, target=None, *, inputs=None, outputs=None,
                  session=None, allow_ops=(), top=None, seed=0, similarity="spearman",
                  absolute=True, options=None):
    """The cascading model-randomization check (see the module docstring).

    Args:
      model, inputs, outputs, session, allow_ops: as `attribution.attribute`
        takes them (any model form).
      x: the examples (a batch).
      methods: method names (None: every method of the table), or a mapping
        label -> name or (name, options) (see the module docstring).
      target: what to explain (as `attribute` takes it); None: each
        example's top class on the model as given, kept for every stage.
      top: re-draw only the top `top` layers (None: all).
      seed: the draws' seed (the same seed, the same results).
      similarity, absolute: see the module docstring.
      options: label (a method's name) -> its options, updating
        `default_options`.

    Returns:
      A `Randomization`.

    Raises:
      AttributionError: no layer with Const weights on the path, an unknown
        method or similarity.
    """
    compare = _compare(similarity)
    if isinstance(x, (list, tuple, dict)):
        raise AttributionError("randomization takes a model of one input and its batch x; "
                               "for a model of several inputs, check each input's maps "
                               "with the others fixed in a function of one input")
    x = np.asarray(x)
    runs = _runs(methods, options, x)
    methods = [label for label, _, _ in runs]
    given = engine.Explainer(model, inputs=inputs, outputs=outputs, session=session,
                             allow_ops=allow_ops)
    graph = given.model_graph(x)
    chosen = layers(graph.graph_def, graph.output)
    if not chosen:
        raise AttributionError(
            "%s: no layer (%s) with Const weights on the path to %s: nothing to randomize"
            % (graph.source, ", ".join(LAYER_OPS), graph.output))
    chosen = chosen[:top] if top is not None else chosen
    original = engine.Explainer(graph.graph_def, inputs=graph.input, outputs=graph.output,
                                allow_ops=allow_ops)
    outputs_x = original.attribute("saliency", x, target).outputs
    if target is None:
        target = np.argmax(outputs_x, axis=1)

    def maps(explainer):
        return {label: explainer.attribute(name, x, target, **chosen).maps
                for label, name, chosen in runs}

    def flat(a):
        a = a.reshape(len(x), -1).astype(np.float64)
        return np.abs(a) if absolute else a

    reference = maps(original)
    scores = {m: [] for m in methods}
    change = []
    scale = max(float(np.abs(outputs_x).max()), 1e-30)
    for stage in randomized(graph.graph_def, chosen, seed):
        explainer = engine.Explainer(stage, inputs=graph.input, outputs=graph.output,
                                     allow_ops=allow_ops)
        moved = maps(explainer)
        change.append(float(np.abs(explainer.attribute("saliency", x, target).outputs
                                   - outputs_x).max()) / scale)
        for m in methods:
            scores[m].append(np.asarray(compare(flat(reference[m]), flat(moved[m])),
                                        np.float64))
    return Randomization(tuple(methods), tuple(name for name, _, _ in chosen),
                         {m: np.stack(s) for m, s in scores.items()}, np.asarray(change),
                         similarity if isinstance(similarity, str) else "function",
                         absolute, seed, {label: (name, chosen) for label, name, chosen in runs})


def random_logit(model, x, methods=None, target=None, *, seed=42, similarity="spearman",
                 options=None, **model_args):
    """The random-logit check for each of `methods` (None: every method of
    the table; names, or a mapping label -> name or (name, options), as
    `randomization` takes them, with their options): label ->
    `graph_override.attribution.metrics.random_logit`'s `Score` (the
    similarity of each example's map for its target and for another class
    drawn with `seed`; lower: the maps depend on the class). `model_args`:
    inputs, outputs, session, allow_ops."""
    x = np.asarray(x)
    return {label: metrics_randomization.random_logit(
        model, x, name, target, similarity=similarity, seed=seed, explain_options=chosen,
        **model_args) for label, name, chosen in _runs(methods, options, x)}


def class_dependence(model, x, methods=None, *, options=None, **model_args):
    """How much the maps depend on the class explained (Sixt et al. 2020): for
    each example, its maps for every class of the output as the rows of a
    matrix (classes x features), and that matrix's second singular value over
    its first. 0: rank 1, the same map up to a factor whatever the class, as
    z+ relevance becomes through its products of non-negative matrices.

    Args:
      model, model_args: as `attribution.attribute` takes them (inputs,
        outputs, session, allow_ops).
      x: the examples (a batch; each is explained for every class).
      methods, options: as `randomization` takes them.

    Returns:
      label -> the ratio per example, shape (N,) (NaN where every map is 0).
    """
    if isinstance(x, (list, tuple, dict)):
        raise AttributionError("class_dependence takes a model of one input and its batch x")
    x = np.asarray(x)
    runs = _runs(methods, options, x)
    explainer = engine.Explainer(model, **model_args)
    shape = explainer.attribute("saliency", x[:1], 0).outputs.shape
    if len(shape) != 2 or shape[1] < 2:
        raise AttributionError("class_dependence needs an output of shape (examples, "
                               "classes) with 2 classes or more, got %s" % (shape,))
    rows = np.repeat(x, shape[1], axis=0)
    classes = np.tile(np.arange(shape[1]), len(x))
    ratios = {}
    for label, name, chosen in runs:
        maps = explainer.attribute(name, rows, classes, **chosen).maps
        sigma = np.linalg.svd(maps.reshape(len(x), shape[1], -1).astype(np.float64),
                              compute_uv=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios[label] = np.where(sigma[:, 0] > 0, sigma[:, 1] / sigma[:, 0], np.nan)
    return ratios
