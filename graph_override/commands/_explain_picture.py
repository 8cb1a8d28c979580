"""`graph-override explain --png`: what it can draw, checked before the
model runs (`check`), the examples it draws (`first_rows`) and the picture,
drawn in memory before anything is written (`picture_bytes`: `_picture`
for a model of one input, `_picture_several` for several)."""

import os

__all__ = ["check", "first_rows", "picture_bytes"]


def check(args, method, names, arrays):
    """None, or why --png cannot draw the maps of `method` for the inputs
    `names` (None: one input) of the examples `arrays` (as read, in the
    order of `names`; None where --data is images): Grad-CAM's map, of a
    layer, for several inputs; examples of more than 3 dimensions."""
    from graph_override.attribution.several import plain_name  # pylint: disable=import-outside-toplevel
    from graph_override.commands._picture import rank_refusal  # pylint: disable=import-outside-toplevel
    if not args.png:
        return None
    if names is not None and method == "grad_cam":
        return ("--png draws a map per input; grad_cam's map is of a layer, not of the "
                "inputs %s: leave out --png (the maps are in OUT)" % ", ".join(names))
    labels = (["--data %s" % args.data] if names is None else
              ["the input %s" % plain_name(n) for n in names])
    return next((m for m in (rank_refusal(label, a.shape[1:]) for label, a in zip(
        labels, arrays) if a is not None) if m), None)


def first_rows(source):
    """The examples the picture draws: the first MAX_ROWS of the source
    `source` of --data (of each input, as --data gives them)."""
    from graph_override.attribution.several_sources import as_source  # pylint: disable=import-outside-toplevel
    from graph_override.commands._picture import MAX_ROWS  # pylint: disable=import-outside-toplevel
    return next(as_source(source).batches(MAX_ROWS, 0, MAX_ROWS))[1]


def picture_bytes(args, x, result, method):
    """The PNG of --png of the examples `x` and the `Attribution` `result`,
    drawn in memory before anything is written; AttributionError (nothing
    written) if matplotlib fails to draw it."""
    from graph_override.commands import _picture, _picture_several  # pylint: disable=import-outside-toplevel
    from graph_override.commands._explain_data import several_names  # pylint: disable=import-outside-toplevel
    from graph_override.errors import AttributionError  # pylint: disable=import-outside-toplevel
    several = isinstance(result.maps, (list, dict))
    try:
        if several:
            return _picture_several.draw(x, result.maps, names=several_names(args.inputs),
                                         method=method, targets=result.targets,
                                         title=os.path.basename(args.model))
        return _picture.draw(x, result.maps, method=method, targets=result.targets,
                             title=os.path.basename(args.model))
    except Exception as e:  # pylint: disable=broad-except  # whatever matplotlib raises
        raise AttributionError("--png %s: matplotlib failed to draw the picture (%s: %s); "
                               "nothing was written. Leave out --png to get the maps "
                               "alone" % (args.png, type(e).__name__, e)) from e
