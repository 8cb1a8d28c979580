"""What a model may run: the ops whose signature reaches files or the
network (`op_signatures`), and the op functions a saved Keras model may name
(`allowed`: TensorFlow's pure ops and what the user allowed). Private to the
package."""
