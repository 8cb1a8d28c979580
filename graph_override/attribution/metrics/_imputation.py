"""Noisy linear imputation (Rong et al. 2022, ROAD): removed pixels take the
weighted mean of their 8 neighbours (1/6 for the 4 sides, 1/12 for the
corners; neighbours outside the image left out), all removed pixels solved
jointly as one sparse linear system, then noise added."""

import numpy as np

_NEIGHBOURS = (((1, 1), 1 / 12), ((0, 1), 1 / 6), ((-1, 1), 1 / 12), ((1, -1), 1 / 12),
               ((0, -1), 1 / 6), ((-1, -1), 1 / 12), ((1, 0), 1 / 6), ((-1, 0), 1 / 6))


def impute(image, removed, noise, generator):
    """`image` (height, width, channels) with the pixels `removed` (flat
    indices into height x width) imputed; `noise` x standard normal draws of
    `generator` added to them."""
    from scipy.sparse import csc_matrix, lil_matrix
    from scipy.sparse.linalg import spsolve

    h, w, channels = image.shape
    removed = np.asarray(removed, dtype=np.int64)
    out = image.reshape(h * w, channels).astype(np.float64)
    if removed.size == 0:
        return image.copy()
    known = np.ones(h * w, bool)
    known[removed] = False
    variable = np.zeros(h * w, np.int64)
    variable[removed] = np.arange(removed.size)
    system = lil_matrix((removed.size, removed.size))
    right = np.zeros((removed.size, channels))
    weights = np.ones(removed.size)
    rows, cols = removed // w, removed % w
    for (dr, dc), weight in _NEIGHBOURS:
        r, c = rows + dr, cols + dc
        inside = (r >= 0) & (c >= 0) & (r < h) & (c < w)
        weights[~inside] -= weight
        which = np.flatnonzero(inside)
        neighbour = r[inside] * w + c[inside]
        is_known = known[neighbour]
        right[which[is_known]] -= weight * out[neighbour[is_known]]
        system[which[~is_known], variable[neighbour[~is_known]]] = weight
    system[np.arange(removed.size), np.arange(removed.size)] = -weights
    solved = spsolve(csc_matrix(system), right).reshape(removed.size, channels)
    out[removed] = solved + noise * generator.standard_normal(solved.shape)
    return out.reshape(h, w, channels).astype(image.dtype)
