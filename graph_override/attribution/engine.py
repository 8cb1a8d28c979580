"""The attribution engine: a model of any form, frozen once, patched once
per rule set, and differentiated as a `FrozenFunction` under a GradientTape.

`Explainer` keeps what is expensive: the frozen GraphDef (for a TF2 callable,
one per input spec), in the fast mode its weights as one set of variables
(`shared_weights`), and one `FrozenFunction` per rule set (saliency,
gradient x input, IG, SmoothGrad and Grad-CAM share the unpatched one), so a
second call of a method, or of another method with the same rules, imports
nothing. The function runs the patched graph with the gradients the rules
name (registered names, which `FrozenFunction` honours under a
GradientTape), in eager mode, in tf.function and in a Session's process
alike: a Session graph, its frozen `.pb` and the TF2 model with the same
weights give the same maps. Construction and every call run eagerly in a
scope of their own, so TF1 code may call them inside its
``with graph.as_default():`` (or with eager execution disabled).
"""

import threading
import warnings

import numpy as np
import tensorflow as tf

from graph_override._tensorflow import compat
from graph_override.attribution import batching, checks, compiled, coverage, function_cache
from graph_override.attribution import methods, models, saved_models, several, several_models
from graph_override.attribution import shared_weights
from graph_override.attribution import targets
from graph_override.attribution import method_table
from graph_override.errors import AttributionError, GraphOverrideError, RuleError
from graph_override.frozen.patching.patch_rules import as_rules
from graph_override.frozen.tf2.function import FrozenFunction

__all__ = ["Explainer", "attribute"]

class Explainer:
    """Attribution maps of one model, compiled once per method's rules.

    Args:
      model: a frozen GraphDef or the path of a ``.pb``/``.pbtxt`` file (give
        `inputs` and `outputs` names), or a TF2 callable / Keras model of one
        tensor or several (no names: it is traced for each input spec it
        meets). None with `session`.
      inputs, outputs: the input and output tensor (name such as "x:0", a
        tensor of the session's graph, or a one-element list of either); a
        list of input tensors for a model of several inputs.
      session: a `tf.compat.v1.Session` whose graph holds `inputs` and
        `outputs`; its variables are frozen with the values they have now.
      rules: patch rules of the caller's own (``frozen.patch`` rule strings
        or `Rule` s, e.g. ``["MyOp=Identity"]`` or a gradient for an op the
        method does not cover), applied before the method's: where both
        select a node, the caller's wins.
      allow_ops: op types a frozen GraphDef (path or message) may run
        although they reach outside the model (``["ReadFile"]``; CLI:
        ``--allow-op ReadFile``). A GraphDef comes from elsewhere: before
        anything of it is imported or run, the Explainer refuses
        (`AttributionError`) any op of `graph_override.frozen.RISKY_OPS`
        (file reads and writes, PyFunc, network, debug dumps) among the
        nodes the output (and a Grad-CAM layer) depends on, function bodies
        included, unless its type is allowed here; it refuses a function
        that calls itself (`ConversionError`: TensorFlow would crash) and a
        damaged Const or colocation attr (`GraphDefError`) whatever this
        says. Session graphs and TF2 callables are the caller's own code
        and are not checked.
      mode: "exact" (forward and backward as two eager calls) or "fast"
        (both in one compiled function: faster, the maps moved by float
        rounding; see `graph_override.attribution.compiled`).
      keep_functions: None (keep every rule set's function) or N: after each
        call keep the functions it used and the most recently used others, N
        in all; the rest go, their memory returned, made again when used
        again, with the same maps bit for bit (`attribution.function_cache`).

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override import attribution
      >>> w = tf.constant([[1.0, -1.0], [2.0, 0.5]])
      >>> explainer = attribution.Explainer(lambda x: tf.nn.relu(tf.matmul(x, w)))
      >>> result = explainer.attribute("gradient_input", np.array([[1.0, 1.0]], "float32"),
      ...                              target=0)
      >>> result.maps
      array([[1., 2.]], dtype=float32)
    """

    def __init__(self, model=None, *, inputs=None, outputs=None, session=None, rules=(),
                 allow_ops=(), mode="exact", keep_functions=None):
        self.mode = compiled.check_mode(mode)
        self._kept = function_cache.KeptFunctions(keep_functions)
        self._lock = threading.RLock()  # the caches, for calls from several threads
        with compat.eager_scope():  # a TF1 caller may be inside its graph.as_default()
            self._init(model, inputs, outputs, session, rules, allow_ops)

    def _init(self, model, inputs, outputs, session, rules, allow_ops):
        self._model = model
        self.rules = tuple(as_rules(rules)) if rules else ()
        self.allow_ops = saved_models.op_names(allow_ops)
        self._untrusted = False
        self._graphs = {}
        self._functions = {}
        if session is not None:
            if model is not None:
                raise AttributionError("give a model or session=, not both (a Session "
                                       "model is its tensors: inputs=, outputs=)")
            self._fixed = (several_models if several_models.is_several_names(inputs)
                           else models).from_session(session, inputs, outputs)
        elif models.is_graph_model(model):
            self._fixed = (several_models.from_graph_def(model, inputs, outputs)
                           if several_models.is_several_names(inputs) else
                           saved_models.model_graph(model, inputs, outputs, self.allow_ops))
            self._untrusted = True
            self.check_runs([self._fixed.output])
        else:
            if inputs is not None or outputs is not None:
                raise AttributionError(
                    "inputs= and outputs= name the tensors of a frozen graph or a "
                    "Session graph; a TF2 callable or Keras model takes none (it is "
                    "traced for x)")
            if not callable(model):
                models.from_callable(model, None)  # raises the error for non-callables
            self._fixed = None

    def check_runs(self, tensors):
        """Refuses, for a GraphDef model, what computing `tensors` (names
        of its graph) would run that the caller did not allow
        (`models.check_untrusted`); nothing for a Session graph or a
        callable."""
        if self._untrusted:
            models.check_untrusted(self._fixed, list(tensors), self.allow_ops)

    @property
    def model(self):
        """The model as given (a GraphDef, a path, a callable or Keras model;
        None for a Session's graph)."""
        return self._model

    def model_graph(self, x, packed=None):
        """The `ModelGraph` that explains inputs like `x` (with `packed`, the
        `several.Packed` of several inputs, x their packed array)."""
        if self._fixed is not None:
            return self._fixed
        key = packed.key() if packed is not None else (tuple(x.shape[1:]), x.dtype.str)
        with self._lock:
            if key not in self._graphs:
                self._graphs[key] = (models.from_callable(self._model, x) if packed is None
                                     else several_models.from_callable(self._model, packed))
            return self._graphs[key]

    def input_names(self, x):
        """The names of the model's inputs: those of the graph, of a Keras
        model of several inputs, the keys of a dict `x`, or input_0, ..."""
        if self._fixed is not None:
            return self._fixed.names
        names = several_models.input_names(self._model)
        if names is None and isinstance(x, dict):
            names = list(x)
        return names or ["input_%d" % i for i in range(len(x) if several.is_several(x)
                                                      else 1)]

    def cached(self, key, make, *, rule_set=False, owner=None):
        """What ``make()`` returns, made once per `key` for this model: a
        `rule_set`'s functions, or what was made for the function `owner`,
        kept as `keep_functions` says."""
        with self._lock:
            if key not in self._functions:
                self._functions[key] = make()
                if owner is not None:
                    self._kept.made_for(key, owner)
            if rule_set:
                self._kept.used(key)
            return self._functions[key]

    def function(self, x, method_rules=(), packed=None):
        """The `FrozenFunction` of the model patched with `method_rules`
        (``frozen.patch`` rule strings), made on first use."""
        graph = self.model_graph(x, packed)
        every = self.rules + tuple(method_rules)
        return self.cached((id(graph),) + tuple(str(r) for r in every),
                           lambda: self._make_function(graph, every), rule_set=True)

    def _make_function(self, graph, method_rules):
        try:  # the fast mode's functions share one copy of the weights
            function = (shared_weights.shared_weights(self, graph).function(
                graph.names, [graph.output], method_rules) if self.mode == "fast" else
                FrozenFunction(graph.graph_def, list(graph.names), [graph.output],
                               rules=list(method_rules), on_no_match="ignore"))
        except GraphOverrideError as e:  # the same class, naming the model as given
            message = str(e)
            if message.startswith("<GraphDef>") and graph.source != "<GraphDef>":
                raise type(e)(graph.source + message[len("<GraphDef>"):]) from e
            raise
        if method_rules and not function.patch_report.changes:
            warnings.warn(
                "the rules %s change no node of %s: the maps are those of the plain "
                "gradient" % (", ".join(map(str, method_rules)), graph.source),
                UserWarning, stacklevel=5)
        return function

    def attribute(self, method, x, target=None, *, batch_size=None, progress=False,
                  **options):
        """The attribution maps of `method` for the examples `x`, computed
        `batch_size` examples at a time (`graph_override.attribution.batching`).

        Args:
          method: a name of `graph_override.attribution.METHODS` (saliency,
            gradient_input, integrated_gradients, smoothgrad, guided_backprop,
            deconvnet, eps_lrp, deeplift, grad_cam).
          x: the inputs, first dimension the examples (float ndarray, memmap,
            tensor), a ``tf.data.Dataset`` or an `attribution.sources` source;
            for a model of several inputs, a list of them (the model's order)
            or a dict keyed by input names (arrays, memory-mapped ``.npy``
            sources), or a ``tf.data.Dataset`` of tuples or dicts, and the
            maps (a baseline too) in the same structure (`several`; every
            input cut at the same rows: `several_sources`).
          target: what to explain per example: None (the argmax of the
            output), an int class for all, an int array with one class per
            example, or a callable of the output tensor returning one scalar
            per example.
          batch_size: examples per model call (None: from the input size);
            progress: a progress bar on stderr (tqdm).
          **options: the method's options (see `graph_override.attribution`:
            abs, baseline, steps, rule, stdev_spread, samples, seed,
            magnitude, internal_batch_size, epsilon, layer, resize).

        Returns:
          An `Attribution`: ``maps`` (x's shape; Grad-CAM: the layer's
          height x width), ``targets``, ``outputs`` and, for
          integrated_gradients and deeplift, the completeness ``delta``.

        Raises:
          AttributionError: an unknown method or option, x of the wrong shape
            or dtype, a target or baseline that does not fit.
        """
        return batching.attribute(self, method, x, target, batch_size, progress, options)

    def run_batch(self, method, x, target, options):
        """`method` on the one batch `x` (an array), in one call per step."""
        try:
            with compat.eager_scope():  # not the caller's graph: the maps are computed eagerly
                return self._attribute(method, x, target, options)
        finally:
            with self._lock:
                self._kept.trim(self._functions)

    def _attribute(self, method, x, target, options):
        spec = method_table.method_spec(method)
        options, rule_params = spec.checked(options)
        packed, x = several_models.arrange(self, x, spec, options)
        if spec.batch == "inputs+references":  # N + 1 rows where one baseline serves all
            # built once: the row count is chosen from it and the method uses it
            options["baseline"] = targets.baseline_for(options.get("baseline"), x)
            rule_params["shared_reference"] = methods.one_reference(options["baseline"], x)
        method_rules = method_table.rule_strings(spec.name, **rule_params)
        if rule_params:
            try:
                as_rules(method_rules[:1])
            except RuleError as e:
                raise AttributionError("%s(%s): %s" % (spec.name, ", ".join(
                    "%s=%r" % kv for kv in rule_params.items()), e)) from e
        context = _Context(self, x, spec, method_rules,
                           rule_params.get("shared_reference", False), packed)
        report = self.coverage(context.graph, spec.name)
        result = None
        try:
            result = spec.run(context, context.x, target, **options)
        finally:  # said also when the run fails: the uncovered op may be why
            if report.uncovered:
                checks.warn(checks.coverage_text(report, result), checks.CoverageWarning)
        baseline = (targets.baseline_for(options.get("baseline"), context.x)
                    if spec.baseline else None)
        message = checks.vanishing_text(spec.name, result, context.x, baseline,
                                        spec.times_input)
        if message is not None:
            checks.warn(message, checks.VanishingMapsWarning)
        return several_models.unpacked(result, context)

    def coverage(self, graph, method):
        """The `coverage.CoverageReport` of `method` on the `ModelGraph`
        `graph`, the op types of the Explainer's own rules counted as
        covered; made once per graph and method."""
        covered = frozenset(r.op_type for r in self.rules if getattr(r, "op_type", None))
        return self.cached((id(graph), "coverage", method), lambda: coverage.coverage_report(
            graph.graph_def, method, inputs=list(graph.names), outputs=[graph.output],
            also_covered=covered, source=graph.source))


class _Context:
    """One call: the input, the method's function, and how to run it."""

    def __init__(self, explainer, x, spec, method_rules, shared_reference=False,
                 packed=None):
        self.explainer = explainer
        self.spec = spec
        self.shared_reference = shared_reference
        self.packed = packed
        self.function = explainer.function(x, method_rules, packed)
        self.graph = explainer.model_graph(x, packed)
        input_spec = (self.function.specs()[0][0] if packed is None else
                      several_models.packed_spec(self.graph, self.function, packed))
        self.input_spec = input_spec
        self.x = models.as_float_input(x, input_spec.dtype)
        shape = input_spec.shape
        if shape.rank is not None and (self.x.ndim != shape.rank or not shape[1:]
                                       .is_compatible_with(self.x.shape[1:])):
            raise AttributionError(
                "x has shape %s; the model's input %s takes %s (first dimension the "
                "examples)" % (self.x.shape, self.graph.input, shape))
        if spec.batch == "inputs+references":
            self.check_doubling(self.x.shape[0])
        elif not shape.is_compatible_with(self.x.shape):
            raise AttributionError(
                "x has %d examples; the model's input %s has a fixed batch dimension of "
                "%d: pass batches of that size, or re-export the model with a batch "
                "dimension of None" % (self.x.shape[0], self.graph.input, shape[0]))

    def resolve(self, target, x):
        """The target for the batch `x` (see `targets.resolve`), checked
        against the output's static shape (or its shape for x, where the graph
        does not say)."""
        shape = self.function.specs()[1][0].shape
        if shape.rank is None or None in shape.as_list()[1:]:
            dims = self.outputs(x).shape
        else:
            dims = (x.shape[0],) + tuple(shape.as_list()[1:])
        return targets.resolve(target, dims, x.shape[0])

    def outputs(self, x):
        """The model's output for the batch `x` (ndarray)."""
        return self.function(*self.feed(x)).numpy()

    def feed(self, x):
        """The model's input tensors for the (packed) batch `x`."""
        return ([tf.constant(x)] if self.packed is None else
                [tf.constant(a) for a in self.packed.unpack(x)])

    def gradient(self, x, target, first=None):
        """(outputs, selected scalars, d scalars / d x) for the batch `x`;
        with `first`, the target selects among the first `first` examples
        only (DeepLIFT's inputs, ahead of their references)."""
        tensors = self.feed(x)
        run = (compiled.compiled_gradient(self.explainer, self.function)
               if self.explainer.mode == "fast" else
               lambda *a: compiled.eager_gradient(self.function, *a))
        y, scalars, grads = run(tensors, target, first)
        if all(g is None for g in grads):
            raise AttributionError("%s: the output %s does not depend on the input %s"
                                   % (self.graph.source, self.graph.output, self.graph.input))
        grads = [np.zeros(t.shape, t.dtype.as_numpy_dtype) if g is None else g
                 for t, g in zip(tensors, grads)]
        return y, scalars, grads[0] if self.packed is None else self.packed.pack(grads)

    def check_doubling(self, n):
        """Refuses a fixed batch dimension that DeepLIFT's batch (the n
        inputs, then one reference row or n) cannot fill."""
        size = self.input_spec.shape[0] if self.input_spec.shape.rank else None
        rows = n + 1 if self.shared_reference else 2 * n
        if size is not None and size != rows:
            if self.shared_reference:
                how, fits = "n + 1 = %d (one baseline for all)" % rows, size - 1
            else:
                how, fits = "2 x %d (a baseline per example)" % n, size // 2
            raise AttributionError(
                "%s: %s runs the inputs and their baselines in one batch of %s, but the "
                "input %s has a fixed batch dimension of %d. Re-export the model with a "
                "batch dimension of None (placeholder shape [None, ...])%s" % (
                    self.graph.source, self.spec.name, how, self.graph.input, size,
                    ", or pass batches of %d examples" % fits
                    if fits >= 1 and (self.shared_reference or size % 2 == 0) else ""))


def attribute(model, method, x, target=None, *, inputs=None, outputs=None, session=None,
              rules=(), allow_ops=(), mode=None, **options):
    """One call: `Explainer(model, inputs=..., outputs=..., session=...,
    rules=..., allow_ops=..., mode=...).attribute(method, x, target,
    **options)` (`mode` None: "exact", or the Explainer's). Keep an
    `Explainer` to explain several batches or methods of one model without
    freezing it again.

    Example:
      >>> import numpy as np, tensorflow as tf
      >>> from graph_override import attribution
      >>> f = lambda x: tf.tanh(x) * 2.0
      >>> r = attribution.attribute(f, "integrated_gradients", np.ones((1, 1), "float32"),
      ...                           steps=200)
      >>> bool(abs(r.delta[0]) < 1e-4)
      True
    """
    if isinstance(model, Explainer):
        if (inputs is not None or outputs is not None or session is not None or rules
                or allow_ops or (mode is not None and mode != model.mode)):
            raise AttributionError("an Explainer already has its model, rules and mode; give "
                                   "no inputs=, outputs=, session=, rules=, allow_ops= or "
                                   "another mode=")
        explainer = model
    else:
        explainer = Explainer(model, inputs=inputs, outputs=outputs, session=session,
                              rules=rules, allow_ops=allow_ops, mode=mode or "exact")
    return explainer.attribute(method, x, target, **options)
