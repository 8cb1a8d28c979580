"""`graph_override.frozen.inspect`: what in a GraphDef makes gradients fail
or vanish, and its report. Imports only `frozen.graphdef`."""
