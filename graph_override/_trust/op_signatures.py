"""What an op's signature says it reaches outside its inputs: files, paths,
network addresses.

Most ops that read or write files or reach the network say so in their
OpDef: a string input or attr named like a file, a path, a pattern of files,
a checkpoint prefix or an address (ReadFile's ``filename``,
GenerateVocabRemapping's ``new_vocab_file``, DataServiceDatasetV4's
``address``). `outside_reason` reads that; `frozen.inspection.risky` (which
op types `inspect` flags) and `allowed` (which raw ops a saved Keras model
may name) both ask it, so the two never disagree.
"""

import re

__all__ = ["outside_reason"]

_STRING = 7  # DataType DT_STRING

# Names of string inputs and attrs that hold a file, a path or an address.
_FILE_ARG = re.compile(
    r"(filenames?|file_?patterns?|patterns|paths?|.+_paths?|.+_files?|.+_dir|dir|"
    r"directory|logdir|(.+_)?prefix(es)?|descriptor_source|memory_region_name)\Z")
_NETWORK_ARG = re.compile(r"(address|target|.+_urls?|.+_uri|data_source_name)\Z")
_NOT_FILES = frozenset(("counter_prefix",))  # a statistics tag, not a path


def outside_reason(op_def):
    """Why the op of `op_def` (an OpDef) reaches outside its inputs, in
    words ("reads or writes files (input 'filename')"), or None.

    Example:
      >>> from graph_override._tensorflow import compat
      >>> outside_reason(compat.op_def("ReadFile"))
      "reads or writes files (input 'filename')"
      >>> outside_reason(compat.op_def("Sign")) is None
      True
    """
    for pattern, what in ((_NETWORK_ARG, "reaches the network or a database (%s %r)"),
                          (_FILE_ARG, "reads or writes files (%s %r)")):
        for arg in op_def.input_arg:
            if arg.type == _STRING and pattern.match(arg.name) and arg.name not in _NOT_FILES:
                return what % ("input", arg.name)
        for attr in op_def.attr:
            if (attr.type in ("string", "list(string)") and pattern.match(attr.name)
                    and attr.name not in _NOT_FILES):
                return what % ("attr", attr.name)
    return None
