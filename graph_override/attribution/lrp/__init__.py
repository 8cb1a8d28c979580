"""Layer-wise Relevance Propagation with rules on layers, canonizers and
composites, for every model form the attribution methods take.

`lrp(model, x, composite="epsilon_plus")` is the one call; `Composite`,
`composite` and `COMPOSITES` choose the rule of each layer; `rule` makes a
rule with its parameters. The parts: `structure` (the layers and the other
parts of a frozen graph's path), `canonize` (batch normalizations folded
into the layers before them), `rules` and `layer_math` (the rules as data
and as TensorFlow ops), `gradients` (the gradient functions that carry
relevance), `composites`, `prepare` (a graph made ready) and `explain`.

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override.attribution import lrp
  >>> w = tf.constant([[1.0, -1.0], [2.0, 0.5]])
  >>> model = lambda x: tf.matmul(tf.nn.relu(tf.matmul(x, w)), w)
  >>> result = lrp.lrp(model, np.array([[1.0, 2.0]], "float32"), "z", target=0)
  >>> result.maps, result.outputs[0, 0]
  (array([[1.8, 7.2]], dtype=float32), 9.0)
"""

from graph_override.attribution.lrp.composites import COMPOSITES, Composite, composite
from graph_override.attribution.lrp.explain import lrp
from graph_override.attribution.lrp.rules import RULES, LayerRule, rule

__all__ = ["COMPOSITES", "Composite", "LayerRule", "RULES", "composite", "lrp", "rule"]
