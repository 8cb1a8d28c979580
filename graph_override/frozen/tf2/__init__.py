"""A frozen GraphDef in TF2: `to_function` (`FrozenFunction`), `FrozenLayer`
and `FrozenFunction.save`. The top layer of `frozen`."""
