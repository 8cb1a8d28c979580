"""Reading and checking a GraphDef: its formats and files (`io`), the
structural checks, the node index read from its bytes (by the C reader
`_scan` where built, else in Python), the gradient attribute and views of
a graph, and its function library. Imports nothing else of `frozen`."""
