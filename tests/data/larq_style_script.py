"""A training script written as larq's documentation writes one (its user
guide's binarized CNN): larq's layers, quantizer and constraint names,
`input_shape` on the first layer, `lq.models.summary`, `model.fit`.
tests/keras/test_keras_larq_script.py runs it after changing only its import
line, and under TensorFlow 2.15 also as it is, with larq."""

import numpy as np
import tensorflow as tf
import larq as lq

rng = np.random.RandomState(0)
train_images = rng.uniform(-1, 1, (256, 8, 8, 1)).astype("float32")
train_labels = (train_images[:, :4].mean(axis=(1, 2, 3)) > 0).astype("int64")
test_images, test_labels = train_images[:64], train_labels[:64]

# All quantized layers except the first use the same options.
kwargs = dict(input_quantizer="ste_sign",
              kernel_quantizer="ste_sign",
              kernel_constraint="weight_clip",
              use_bias=False)

model = tf.keras.models.Sequential()
# The first layer: only the weights are quantized, not the input.
model.add(lq.layers.QuantConv2D(16, (3, 3),
                                kernel_quantizer="ste_sign",
                                kernel_constraint="weight_clip",
                                use_bias=False,
                                input_shape=(8, 8, 1)))
model.add(tf.keras.layers.MaxPooling2D((2, 2)))
model.add(tf.keras.layers.BatchNormalization(scale=False))
model.add(lq.layers.QuantConv2D(32, (3, 3), padding="same", **kwargs))
model.add(tf.keras.layers.BatchNormalization(scale=False))
model.add(tf.keras.layers.Flatten())
model.add(lq.layers.QuantDense(32, **kwargs))
model.add(tf.keras.layers.BatchNormalization(scale=False))
model.add(lq.layers.QuantDense(2, **kwargs))
model.add(tf.keras.layers.BatchNormalization(scale=False))
model.add(tf.keras.layers.Activation("softmax"))

lq.models.summary(model)

model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
model.fit(train_images, train_labels, batch_size=64, epochs=2, verbose=0)
test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=0)
print("trained: loss %s, accuracy in [0, 1]: %s" % (
    "finite" if np.isfinite(test_loss) else "NOT finite", 0.0 <= test_acc <= 1.0))
