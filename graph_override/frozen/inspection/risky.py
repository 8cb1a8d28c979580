"""Which op types are risky to run from an untrusted graph, and why.

Most such ops say so in their signature: they take a file name, a path, a
pattern of files, a checkpoint prefix or a network address, as a string
input or attr (ReadFile's ``filename``, CacheDataset's ``filename``,
DataServiceDatasetV4's ``address``, FixedUnigramCandidateSampler's
``vocab_file``). `RISKY_OPS` is therefore derived from TensorFlow's op
registry (every registered OpDef, by the names of its string inputs and
attrs: `derived`), so that ops added in a later release are covered, and
completed by a curated table (`CURATED`) for what a signature does not show:
PyFunc runs Python, the queue readers take their file names from a queue,
the summary ops write through a writer resource. The curated reason wins
where both know an op.
"""

import collections.abc

from graph_override._tensorflow import compat
from graph_override._trust.op_signatures import outside_reason
from graph_override.frozen.graphdef.functions import reached_functions
from graph_override.frozen.graphdef.views import ancestors

__all__ = ["CURATED", "RISKY_OPS", "derived", "nodes_run", "risky_nodes"]

# Op types worth a look before running an untrusted graph, with why.
CURATED = {
    **dict.fromkeys(("ReadFile", "MatchingFiles", "ImmutableConst"),
                    "reads files"),
    **dict.fromkeys(("WriteFile", "Save", "SaveV2", "SaveSlices",
                     "MergeV2Checkpoints", "DeleteFile"), "writes files"),
    **dict.fromkeys(("Restore", "RestoreV2", "RestoreSlice"),
                    "reads checkpoint files"),
    **dict.fromkeys(("PyFunc", "PyFuncStateless", "EagerPyFunc"),
                    "runs Python code of the process that made the graph"),
    **dict.fromkeys(("TFRecordReader", "TFRecordReaderV2", "TextLineReader",
                     "TextLineReaderV2", "WholeFileReader", "WholeFileReaderV2",
                     "FixedLengthRecordReader", "FixedLengthRecordReaderV2",
                     "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset",
                     "FixedLengthRecordDataset", "CSVDataset", "CSVDatasetV2",
                     "LoadDataset", "MatchingFilesDataset",
                     "ExperimentalMatchingFilesDataset"), "reads files"),
    **dict.fromkeys(("SaveDataset", "SaveDatasetV2", "SnapshotDataset",
                     "SnapshotDatasetV2", "CreateSummaryFileWriter",
                     "WriteSummary", "WriteScalarSummary", "WriteImageSummary",
                     "WriteHistogramSummary", "WriteAudioSummary",
                     "WriteGraphSummary", "WriteRawProtoSummary"), "writes files"),
    **dict.fromkeys(("PrintV2",), "can write to a file (output_stream)"),
    **dict.fromkeys(("DebugIdentity", "DebugIdentityV2", "DebugIdentityV3",
                     "DebugNumericSummary", "DebugNumericSummaryV2"),
                    "can dump tensors to files or network addresses"),
    **dict.fromkeys(("RpcCall", "Rpc", "TryRpc", "RemoteCall"),
                    "calls remote processes"),
    **dict.fromkeys(("SqlDataset", "ExperimentalSqlDataset"), "queries a database"),
    **dict.fromkeys(("DecodeProtoV2", "EncodeProto"),
                    "can read a descriptor file (descriptor_source)"),
    **dict.fromkeys(("DataServiceDataset", "DataServiceDatasetV2", "DataServiceDatasetV3",
                     "DataServiceDatasetV4", "RegisterDataset", "RegisterDatasetV2"),
                    "reaches a tf.data service over the network"),
    **dict.fromkeys(("DistributedSave",),
                    "writes files through a tf.data service over the network"),
    **dict.fromkeys(("CreateSummaryDbWriter",), "writes a database file"),
}


def derived():
    """{op type: why} for every registered op whose signature names a file,
    a path or a network address (see the module docstring)."""
    found = {}
    for name in compat.all_op_types():
        op_def = compat.op_def(name)
        reason = outside_reason(op_def) if op_def is not None else None
        if reason is not None:
            found[name] = reason
    return found


class _RiskyOps(collections.abc.Mapping):
    """`derived()` and `CURATED`, read from the registry on first use (a
    pass over some 1,500 OpDefs that `import graph_override.frozen` need
    not pay)."""

    def __init__(self):
        self._table = None

    def _ops(self):
        if self._table is None:
            self._table = {**derived(), **CURATED}
        return self._table

    def __getitem__(self, op_type):
        return self._ops()[op_type]

    def __iter__(self):
        return iter(self._ops())

    def __len__(self):
        return len(self._ops())

    def __contains__(self, op_type):
        return op_type in self._ops()

    def __repr__(self):
        return "RISKY_OPS(%d op types)" % len(self)


RISKY_OPS = _RiskyOps()


def nodes_run(graph_def, names):
    """[(address, NodeDef)] of every node that computing the nodes `names`
    may run: the top-level nodes they depend on (through data and control
    inputs, fed ones too: a superset of what TensorFlow's pruning keeps),
    then every node of the library functions those call, directly or
    through other functions, addressed ``FUNCTION/NODE``."""
    nodes = {n.name: n for n in graph_def.node}
    needed = [nodes[name] for name in ancestors({n.name: n.input for n in graph_def.node},
                                                list(names)) if name in nodes]
    found = [(n.name, n) for n in needed]
    bodies = reached_functions(graph_def, needed)
    for function in graph_def.library.function:
        if function.signature.name in bodies:
            found.extend(("%s/%s" % (function.signature.name, n.name), n)
                         for n in function.node_def)
    return found


def risky_nodes(graph_def, names, allow=()):
    """The risky ops (`RISKY_OPS`) among `nodes_run(graph_def, names)`
    whose op type is not in `allow`: dicts ``node`` (address), ``op``,
    ``reason``, in the order found.

    Example:
      >>> import tensorflow as tf
      >>> with tf.Graph().as_default() as g:
      ...     x = tf.compat.v1.placeholder(tf.float32, name="x")
      ...     read = tf.io.read_file("/etc/hostname", name="read")
      ...     with tf.control_dependencies([read]):
      ...         y = tf.identity(x, name="y")
      >>> [(r["node"], r["op"]) for r in risky_nodes(g.as_graph_def(), ["y"])]
      [('read', 'ReadFile')]
      >>> risky_nodes(g.as_graph_def(), ["y"], allow=["ReadFile"])
      []
    """
    allow = frozenset(allow)
    return [{"node": address, "op": node.op, "reason": RISKY_OPS[node.op]}
            for address, node in nodes_run(graph_def, names)
            if node.op in RISKY_OPS and node.op not in allow]
