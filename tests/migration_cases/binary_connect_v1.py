"""BinaryConnect (Courbariaux et al.) through the compat.v1 module imported
by its own name, with the deterministic binarization on a hard sigmoid."""
from tensorflow.compat import v1 as tfv1


def hard_sigmoid(x):
    return tfv1.clip_by_value((x + 1.0) / 2.0, 0.0, 1.0)


def binarize_deterministic(w):
    p = hard_sigmoid(w)
    g = tfv1.get_default_graph()
    with g.gradient_override_map({"Round": "Identity"}):
        return 2.0 * tfv1.round(p) - 1.0
