"""What the family modules (`overrides`, `stopgrad`, `tf2`, `legacy`) are
made of: their estimator functions made from the table (`functions`) with
the docstrings rendered from the records (`docstrings`), the scratch-graph
trace that finds an op function's op (`tracing`), and Keras's saving of
their functions and wrappers by name (`keras_saving`). Private to the
package."""
