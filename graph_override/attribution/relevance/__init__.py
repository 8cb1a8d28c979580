"""Layer-wise Relevance Propagation with rules on layers, canonizers and
composites: the parts of the attribution method ``lrp``
(`graph_override.attribution.lrp(model, x, target, composite=...)`).

`composite`, `COMPOSITES` and `Composite` choose the rule of each layer;
`rule` makes a rule with its parameters (`RULES`; z-box's bounds for a
model of several inputs may be one per input, `PerInput`). The modules:
`structure` (the layers and the other parts of a frozen graph's path),
`canonize` (batch normalizations folded into the layers before them),
`rules` and `layer_math` (the rules as data and as TensorFlow ops),
`gradients` (the gradient functions that carry relevance), `composites`,
`prepare` (a graph made ready) and `explain` (the method). This package's
face imports no TensorFlow (the command line checks a composite before
importing it).

Example:
  >>> import numpy as np, tensorflow as tf
  >>> from graph_override import attribution
  >>> w = tf.constant([[1.0, -1.0], [2.0, 0.5]])
  >>> model = lambda x: tf.matmul(tf.nn.relu(tf.matmul(x, w)), w)
  >>> result = attribution.lrp(model, np.array([[1.0, 2.0]], "float32"), 0, composite="z")
  >>> result.maps, result.outputs
  (array([[1., 4.]], dtype=float32), array([[ 5., -5.]], dtype=float32))
"""

from graph_override.attribution.relevance.composites import (CANONIZERS, COMPOSITES, Composite,
                                                             composite)
from graph_override.attribution.relevance.rules import RULES, LayerRule, PerInput, rule

__all__ = ["CANONIZERS", "COMPOSITES", "Composite", "LayerRule", "PerInput", "RULES",
           "composite", "rule"]
