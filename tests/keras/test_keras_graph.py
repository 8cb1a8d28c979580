"""What a traced training step with graph_override.keras holds in memory.

A gradient written as larq writes it, ``tf.where(mask, dy, tf.zeros_like(dy))``,
is folded by Grappler into a constant of dy's full shape, and the
instantiated step keeps that constant allocated for as long as the function
lives: a batch of activations per input quantizer (measured on the network
of tools/bench_keras.py at batch 256, after the step with the allocator
trimmed: 8.7 MB more resident than the float network, 1.6 MB with a scalar
zero). The zero that fills the masked gradient must be a scalar.
"""

import numpy as np
import pytest
import tensorflow as tf

import graph_override.keras as lq

MASKED = [("SteSign", {}), ("SteSign", {"clip_value": 0.5}), ("ApproxSign", {}),
          ("SteHeaviside", {}), ("SteTern", {}), ("MagnitudeAwareSign", {})]


def _selects(graph):
    return [op for op in graph.get_operations() if op.type in ("Select", "SelectV2")]


def _zero_fills(graph, shape):
    """Constant-filled tensors of `shape` that some op reads (the tape's own
    zeros for IdentityN's unused outputs are read by nothing, and pruned)."""
    return [op for op in graph.get_operations()
            if op.type in ("Fill", "ZerosLike", "Const") and op.outputs
            and op.outputs[0].shape.as_list() == list(shape) and op.outputs[0].consumers()]


@pytest.mark.parametrize("cls,params", MASKED, ids=["%s%s" % (c, p or "") for c, p in MASKED])
def test_masked_gradient_fills_with_a_scalar_zero(cls, params):
    quantizer = getattr(lq.quantizers, cls)(**params)
    x = np.linspace(-1.5, 1.5, 64 * 32).reshape(64, 32).astype(np.float32)
    dy = np.where(np.arange(x.size).reshape(x.shape) % 3 == 0, -1.0, 0.5).astype(np.float32)

    @tf.function
    def gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = quantizer(x)
        return tape.gradient(y, x, output_gradients=dy)

    traced = gradient.get_concrete_function(tf.constant(x), tf.constant(dy))
    selects = _selects(traced.graph)
    assert selects, "the masked gradient is a select"
    for op in selects:
        assert [i.shape.rank for i in op.inputs] == [2, 2, 0], op.name
    assert _zero_fills(traced.graph, x.shape) == []
    # The values are unchanged: +0.0 where masked, also for dy < 0.
    got = gradient(tf.constant(x), tf.constant(dy)).numpy()
    assert np.array_equal(np.signbit(got[got == 0]), np.zeros((got == 0).sum(), bool))
    assert (got == 0).any() and (got != 0).any()


def test_training_step_holds_no_batch_sized_zeros():
    model = tf.keras.Sequential([
        tf.keras.Input((16,)),
        lq.layers.QuantDense(32, input_quantizer="ste_sign", kernel_quantizer="ste_sign",
                             kernel_constraint="weight_clip"),
        lq.layers.QuantDense(10, input_quantizer="approx_sign",
                             kernel_quantizer="ste_tern")])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.RandomState(0).uniform(-1, 1, (128, 16)).astype(np.float32)
    y = np.arange(128) % 10

    @tf.function
    def step(x, y):
        return model.train_step((x, y))

    graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
    assert len(_selects(graph)) == 3  # both kernels, the second input (the first needs none)
    for op in _selects(graph):
        assert op.inputs[2].shape.rank == 0, op.name
    for shape in [(128, 16), (128, 32), (16, 32), (32, 10)]:
        assert _zero_fills(graph, shape) == [], shape
