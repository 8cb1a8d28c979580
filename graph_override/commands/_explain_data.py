"""The arrays `graph-override explain` reads: examples (--data) and baselines
(--baseline) from .npy files, checked before anything is loaded (a special
file, a header that claims more bytes than the file holds) and after (one
float array with an examples axis). Every refusal is an AttributionError
naming the option and the file."""

import os

__all__ = ["read_array"]


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
