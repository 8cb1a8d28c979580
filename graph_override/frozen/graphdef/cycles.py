"""Finding a cycle in a graph given as arrays of edges (used by
`graph_override.frozen.graphdef.checks` on every input of a GraphDef at once)."""

import numpy as np

__all__ = ["find_cycle"]


def find_cycle(n, src, dst, mask):
    """A list of node indices forming a cycle over the edges src[mask] ->
    dst[mask] (an input edge points from producer to consumer), or []."""
    src, dst = src[mask], dst[mask]
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1))
    succ = dst[order]
    indegree = np.bincount(dst, minlength=n)
    ready = np.flatnonzero(indegree == 0).tolist()
    indegree = indegree.tolist()
    starts, succ = starts.tolist(), succ.tolist()
    done = 0
    while ready:  # Kahn's algorithm: peel nodes nothing waits on
        u = ready.pop()
        done += 1
        for v in succ[starts[u]:starts[u + 1]]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    if done == n:
        return []
    # Every node left has a producer left: walk producers until one repeats.
    left = [i for i in range(n) if indegree[i] > 0]
    preds = {}
    for s, d in zip(src.tolist(), dst.tolist()):
        if indegree[d] > 0 and indegree[s] > 0 and d not in preds:
            preds[d] = s
    seen, u = {}, left[0]
    while u not in seen:
        seen[u] = len(seen)
        u = preds[u]
    walk = sorted(seen, key=seen.get)[seen[u]:][::-1]  # producer first
    first = walk.index(min(walk))  # start at the node that comes first
    return walk[first:] + walk[:first]
