"""larq's small helpers (``larq.utils``), for code written against larq."""

import contextlib

import tensorflow as tf

from graph_override.keras._missing import module_getattr

__all__ = ["memory_as_readable_str", "patch_object", "register_alias",
           "register_keras_custom_object", "set_precision"]


def memory_as_readable_str(num_bits):
    """`num_bits` as bytes with a binary prefix and 2 decimals, as larq
    prints memory (1 KiB = 1024 B).

    Example:
      >>> from graph_override.keras import utils
      >>> utils.memory_as_readable_str(2 ** 13), utils.memory_as_readable_str(2 ** 43)
      ('1.00 KiB', '1,024.00 GiB')
    """
    suffixes = ["B", "KiB", "MiB", "GiB"]
    num_bytes = num_bits / 8
    i = 0
    while i + 1 < len(suffixes) and num_bytes / (1024 ** i) >= 1024:
        i += 1
    return f"{num_bytes / (1024 ** i):,.2f} {suffixes[i]}"


def register_keras_custom_object(cls):
    """Adds `cls` to Keras's custom objects under its own name (larq's
    decorator); returns it."""
    tf.keras.utils.get_custom_objects()[cls.__name__] = cls
    return cls


def register_alias(name):
    """A decorator adding a class or function to Keras's custom objects
    under `name`."""
    def register(cls):
        tf.keras.utils.get_custom_objects()[name] = cls
        return cls
    return register


def set_precision(precision=32):
    """A decorator setting ``function.precision``: the bits a quantizer
    function's output is counted as (by `models.summary`) and, for 1,
    what `optimizers.Bop.is_binary_variable` trains."""
    def decorator(function):
        function.precision = precision
        return function
    return decorator


@contextlib.contextmanager
def patch_object(obj, name, value):
    """Sets ``obj.name = value`` inside the block and restores the old value
    on exit (also on an exception)."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)

__getattr__ = module_getattr(__name__)
