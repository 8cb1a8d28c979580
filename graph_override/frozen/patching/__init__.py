"""`graph_override.frozen.patch`, `make_portable` and `patch_file`: rules,
the checks that a rule fits its nodes, the stop_gradient form, the engine
that rewrites nodes and function bodies, and reports. Imports only
`frozen.graphdef` and `frozen.inspection`."""
