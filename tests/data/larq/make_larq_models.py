"""Writes the larq-saved models that tests/keras/test_keras_loading.py loads.

Run with larq 0.13.3 under TensorFlow 2.15 (Keras 2), from the repository root:

    compat/.venv-2.15/bin/python tests/data/larq/make_larq_models.py

It writes, beside this script: larq_model.h5 (Keras HDF5), larq_savedmodel/
(SavedModel), inputs.npy and outputs.npy (the model's outputs for those
inputs, computed by larq), and summary.txt (larq.models.summary of it). The
model is small and uses every layer kind and quantizer setting whose loading
matters: quantizers by name and as objects with settings, weight_clip,
pad_values, DoReFa and ste_tern.
"""

import os

import larq as lq
import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


def build():
    tf.keras.utils.set_random_seed(18)
    inputs = tf.keras.Input((6, 6, 2), name="image")
    x = lq.layers.QuantConv2D(4, 3, padding="same", pad_values=1.0,
                              kernel_quantizer="ste_sign",
                              kernel_constraint="weight_clip", use_bias=False,
                              name="conv")(inputs)
    x = tf.keras.layers.BatchNormalization(momentum=0.9, name="bn")(x)
    x = lq.layers.QuantDepthwiseConv2D(3, padding="same", input_quantizer="ste_sign",
                                       depthwise_quantizer=lq.quantizers.SteTern(
                                           threshold_value=0.1),
                                       depthwise_constraint="weight_clip",
                                       name="depthwise")(x)
    x = lq.layers.QuantSeparableConv2D(4, 3, strides=2, input_quantizer="approx_sign",
                                       depthwise_quantizer="ste_sign",
                                       pointwise_quantizer="magnitude_aware_sign",
                                       name="separable")(x)
    x = tf.keras.layers.Flatten(name="flat")(x)
    x = lq.layers.QuantDense(5, input_quantizer=lq.quantizers.SteSign(clip_value=0.5),
                             kernel_quantizer="ste_sign", kernel_constraint="weight_clip",
                             name="dense")(x)
    x = lq.layers.QuantDense(3, input_quantizer=lq.quantizers.DoReFa(k_bit=3),
                             kernel_quantizer=lq.quantizers.DoReFa(k_bit=2, mode="weights"),
                             name="head")(x)
    model = tf.keras.Model(inputs, x, name="larq_model")
    # Non-trivial batch statistics and weights on the quantizers' edges.
    model.compile("adam", "mse")
    rng = np.random.RandomState(18)
    data = rng.uniform(-1.5, 1.5, (16, 6, 6, 2)).astype(np.float32)
    model.fit(data, rng.uniform(-1, 1, (16, 3)).astype(np.float32), epochs=2, verbose=0)
    return model


def main():
    model = build()
    inputs = np.random.RandomState(7).uniform(-1.5, 1.5, (4, 6, 6, 2)).astype(np.float32)
    inputs[0, 0, 0, :] = 0.0
    np.save(os.path.join(HERE, "inputs.npy"), inputs)
    np.save(os.path.join(HERE, "outputs.npy"), model(inputs, training=False).numpy())
    model.save(os.path.join(HERE, "larq_model.h5"), include_optimizer=False)
    tf.keras.models.save_model(model, os.path.join(HERE, "larq_savedmodel"),
                               include_optimizer=False, save_format="tf")
    lines = []
    lq.models.summary(model, print_fn=lines.append)
    with open(os.path.join(HERE, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
