"""Occlusion (Zeiler and Fergus, ECCV 2014): how much the target's output
falls when a patch of the input is replaced by a baseline, as Captum's
`Occlusion` computes it.

A patch of shape `patch` slides over the example's axes with `stride`,
starting at 0 on each axis; along an axis the positions are 0, s, 2s, ...
up to the first that reaches the end, and a patch that would cross the end
is cut there (Captum's ``ceil((size - patch) / stride) + 1`` positions), so
every element is occluded at least once. For each position the examples are
run with the patch set to the baseline; every element of the patch gets
f(x) - f(x occluded) at the target, and each element's map is the mean over
the patches that covered it (overlapping patches are averaged, as in
Captum). The copies run through the model `internal_batch_size` rows per
call (several positions at once; one position per call where the model's
batch dimension is fixed). A model of several inputs gets the same patch
and stride over each input's own axes, one input occluded at a time.
"""

import itertools

import numpy as np

from graph_override.attribution import methods
from graph_override.attribution import targets as target_lib
from graph_override.errors import AttributionError

__all__ = ["DEFAULT_ROWS", "occlusion", "patch_shape", "windows"]

DEFAULT_ROWS = 256
"""Rows per model call (the examples times the positions run together)."""


def _ints(value, what):
    """`value` as a tuple of ints >= 1 (an int is one)."""
    items = (value,) if isinstance(value, (int, np.integer)) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (items,)
    if not items or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                            and v >= 1 for v in items):
        raise AttributionError("%s=%r: expected an int >= 1 or a tuple of them, one per "
                               "axis of an example" % (what, value))
    return tuple(int(v) for v in items)


def patch_shape(value, example_shape, what="patch"):
    """The patch (or stride) over all of an example's axes. An int p is p
    on every axis but the last, which is taken whole (an image's channels,
    a sequence's features); for examples of one axis, p on it. A tuple
    names the leading axes; the axes it leaves out are taken whole (the
    stride along them is their size)."""
    dims = len(example_shape)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        leading = _ints(value, what) * max(1, dims - 1)
    else:
        leading = _ints(value, what)
    if len(leading) > dims:
        raise AttributionError("%s=%r has %d axes; an example has %d, shape %s" % (
            what, value, len(leading), dims, tuple(example_shape)))
    return leading + tuple(example_shape[len(leading):])


def windows(example_shape, patch, stride):
    """The patches, as tuples of slices over an example's axes, in the order
    Captum counts them (the first axis fastest)."""
    starts = []
    for axis, (size, p, s) in enumerate(zip(example_shape, patch, stride)):
        if p > size:
            raise AttributionError(
                "the patch %s is larger than an example, shape %s (axis %d: %d > %d); "
                "give a patch of at most the example's shape" % (
                    tuple(patch), tuple(example_shape), axis, p, size))
        if s > p and size > p:
            raise AttributionError(
                "stride %s is larger than the patch %s on axis %d (%d > %d): elements "
                "between the patches would never be occluded; give a stride of at most "
                "the patch" % (tuple(stride), tuple(patch), axis, s, p))
        count = -(-(size - p) // s) + 1
        starts.append([k * s for k in range(count)])
    for corner in itertools.product(*reversed(starts)):
        corner = corner[::-1]
        yield tuple(slice(c, min(c + p, size))
                    for c, p, size in zip(corner, patch, example_shape))


def _flat_patches(example_shapes, patch, stride):
    """Each patch as the flat indices it covers in a row of the (packed)
    example: one example shape, or several inputs side by side (the same
    patch and stride over each input's own axes)."""
    offset = 0
    for shape in example_shapes:
        size = int(np.prod(shape, dtype=np.int64))
        where = np.arange(size).reshape(shape)
        for box in windows(shape, patch_shape(patch, shape), patch_shape(stride, shape,
                                                                         "stride")):
            yield offset + where[box].ravel()
        offset += size


def occlusion(context, x, target, *, patch, stride=1, baseline=None,
              internal_batch_size=DEFAULT_ROWS):
    """Occlusion maps of the batch `x` (see the module docstring).

    Args:
      patch: the patch's shape (an int: that size on every axis but the
        last, which is whole; a tuple: the leading axes). A model of several
        inputs gets the same patch over each input's own axes.
      stride: the step between patches, in the same form (Captum's default 1).
      baseline: what an occluded element becomes: None (0), a number, one
        example's array or one per example (x's shape).
      internal_batch_size: rows per model call, at least one position of
        every example.
    """
    packed = getattr(context, "packed", None)
    shapes = [x.shape[1:]] if packed is None else list(packed.shapes)
    boxes = list(_flat_patches(shapes, patch, stride))
    if (not isinstance(internal_batch_size, (int, np.integer))
            or isinstance(internal_batch_size, bool) or internal_batch_size < 1):
        raise AttributionError("internal_batch_size=%r: expected an int >= 1 (rows per "
                               "model call)" % (internal_batch_size,))
    n, size = x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))
    rows = x.reshape(n, size)  # (a batch of no examples too)
    reference = target_lib.baseline_for(baseline, x).reshape(n, size)
    target = context.resolve(target, x)
    outputs = context.outputs(x)
    if isinstance(target, str):
        target = np.argmax(outputs, axis=1)
    plain = target_lib.values(outputs, target).astype(np.float64)
    shape = context.input_spec.shape
    fixed = shape.rank is not None and shape[0] is not None
    per_call = 1 if fixed else max(1, internal_batch_size // max(n, 1))
    total = np.zeros(rows.shape, np.float64)
    counts = np.zeros(rows.shape[1], np.float64)
    for start in range(0, len(boxes), per_call):
        chunk = boxes[start:start + per_call]
        copies = np.repeat(rows[None], len(chunk), axis=0)
        for copy, box in zip(copies, chunk):
            copy[:, box] = reference[:, box]
        occluded = context.outputs(copies.reshape((-1,) + x.shape[1:]))
        tiled = np.tile(target, len(chunk)) if isinstance(target, np.ndarray) else target
        drops = plain[None] - target_lib.values(occluded, tiled).reshape(len(chunk), n)
        for drop, box in zip(drops, chunk):
            total[:, box] += drop[:, None]
            counts[box] += 1.0
    maps = (total / counts).reshape(x.shape).astype(x.dtype)
    return methods.Attribution(maps=maps, method=context.spec.name,
                               targets=target_lib.explained(outputs, target),
                               outputs=outputs)
