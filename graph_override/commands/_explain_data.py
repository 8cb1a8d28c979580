"""The arrays `graph-override explain` reads: examples (--data) and baselines
(--baseline) from .npy files, checked before anything is loaded (a special
file, a header that claims more bytes than the file holds) and after (one
float array with an examples axis). Every refusal is an AttributionError
naming the option and the file.

A model of several inputs (``--inputs a:0,b:0``) reads one array per input:
``--data a.npy,b.npy`` (one .npy per input, in the order of --inputs) or
``--data x.npz`` (one array per input, keyed by the input's name, with or
without its ":0"); --baseline likewise (or zeros)."""

import os
import zipfile

__all__ = ["baseline_number", "read_array", "read_arrays", "read_baseline", "several_names"]


def baseline_number(text):
    """The number --baseline gives (0.5, -1, 1e-3), or None for zeros or a
    file (a file named like a number: ./0.5)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value - value == 0 else None  # finite


def read_baseline(text, read):
    """--baseline as the methods take it: None for none or zeros, the number
    it gives, or ``read(text, "--baseline")`` (the array or arrays)."""
    if text in (None, "zeros"):
        return None
    number = baseline_number(text)
    return number if number is not None else read(text, "--baseline")


def several_names(inputs):
    """The tensor names of ``--inputs`` (a comma-separated list), or None
    for one name or none (a saved Keras model's, read from it)."""
    if inputs is None:
        return None
    names = [n.strip() for n in inputs.split(",")]
    return names if len(names) > 1 else None


def _npz_short(path):
    """None, or why a member of the .npz file `path` holds fewer bytes than
    its header claims (see `_short_of_claim`)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(f)
                    offset = f.tell()
                claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if not dtype.hasobject and offset + claimed > info.file_size:
                    return ("its array %s claims %s values of shape %s, more than it holds: "
                            "it is truncated or damaged" % (info.filename, dtype, tuple(shape)))
    except (OSError, ValueError, TypeError, EOFError, SyntaxError, zipfile.BadZipFile):
        return None
    return None


def read_arrays(text, names, what):
    """The arrays of ``--data`` or ``--baseline`` for the inputs `names`:
    a list (FILE.npy,FILE.npy, one per input in order) or a dict (FILE.npz,
    keyed by the arrays' names). AttributionError for anything else."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    paths = [p.strip() for p in text.split(",")]
    if len(paths) > 1 or not paths[0].endswith(".npz"):
        if len(paths) != len(names):
            raise AttributionError(
                "%s %s: %d file(s) for %d inputs (%s); give one .npy per input, in the "
                "order of --inputs, or one .npz with an array per input name" % (
                    what, text, len(paths), len(names), ", ".join(names)))
        return [read_array(p, "%s (input %s)" % (what, n)) for p, n in zip(paths, names)]
    path = paths[0]
    if os.path.exists(path) and not os.path.isfile(path):
        from graph_override._files.atomic import file_kind  # pylint: disable=import-outside-toplevel
        raise AttributionError("%s %s: is %s, not a .npz file" % (
            what, path, file_kind(os.stat(path).st_mode)))
    short = _npz_short(path)
    if short:
        raise AttributionError("%s %s: %s" % (what, path, short))
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except MemoryError as e:
        raise AttributionError("%s %s: too large to load into memory (%s)" % (what, path, e)) \
            from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise AttributionError("%s %s: not a .npz file of arrays that loads without pickle "
                               "(%s); save it with numpy.savez(path, NAME=array, ...)" % (
                                   what, path, getattr(e, "strerror", None) or e)) from None
    for key, array in arrays.items():
        if array.dtype.kind != "f" or array.ndim == 0:
            raise AttributionError("%s %s: its array %r holds %s; expected floats, first "
                                   "dimension the examples" % (
                                       what, path, key, "a scalar" if array.ndim == 0
                                       else "%s values" % array.dtype))
    return arrays


def _short_of_claim(path):
    """None, or why the .npy file `path` holds fewer bytes than its header
    claims (a header of a few bytes may claim terabytes, which loading
    would try to allocate); a header that does not read leaves it to
    np.load."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(f)
            offset = f.tell()
        size = os.path.getsize(path)
    except (OSError, ValueError, TypeError, EOFError, SyntaxError):
        return None
    if dtype.hasobject:
        return None
    claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if offset + claimed <= size:
        return None
    return ("its header claims %s values of shape %s (%s bytes), but the file holds %d "
            "bytes of data: it is truncated or damaged; save the array again with "
            "numpy.save(path, array)" % (dtype, tuple(shape), format(claimed, ","),
                                         size - offset))


def read_array(path, what):
    """The array in the .npy file `path`, memory-mapped (its rows are read
    when they are used); AttributionError for anything else."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from graph_override._files.atomic import file_kind  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    try:
        if os.path.exists(path) and not os.path.isfile(path):  # np.load would wait on a FIFO
            raise AttributionError("%s %s: is %s, not a .npy file" % (
                what, path, file_kind(os.stat(path).st_mode)))
        short = _short_of_claim(path)
        array = None if short else np.load(path, mmap_mode="r", allow_pickle=False)
    except MemoryError as e:
        raise AttributionError("%s %s: too large to load into memory (%s); use fewer "
                               "examples per run" % (what, path, e)) from None
    except OSError as e:
        raise AttributionError("%s %s: cannot be read: %s" % (what, path, e.strerror or e)) \
            from None
    except EOFError:
        raise AttributionError("%s %s: is empty; save the array with numpy.save(path, "
                               "array)" % (what, path)) from None
    except ValueError as e:
        raise AttributionError("%s %s: not a .npy array file that loads without pickle "
                               "(%s); save it with numpy.save(path, array)" % (what, path, e)) \
            from None
    if short:
        raise AttributionError("%s %s: %s" % (what, path, short))
    if not isinstance(array, np.ndarray):
        raise AttributionError("%s %s: holds several arrays (.npz); save the one to use "
                               "with numpy.save(path, array)" % (what, path))
    if array.dtype.kind != "f":
        raise AttributionError(
            "%s %s holds %s values; the model needs floats: convert them as the model "
            "expects (e.g. numpy.save(path, x.astype('float32') / 255))"
            % (what, path, array.dtype))
    if array.ndim == 0:
        raise AttributionError("%s %s holds a scalar; expected examples, first "
                               "dimension the examples" % (what, path))
    return array
