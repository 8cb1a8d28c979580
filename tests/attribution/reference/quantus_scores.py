"""Quantus's scores of given attribution maps on the torch twin of a network
(the torch side of test_quantus.py).

Runs inside the reference venv (compat/reference_venv.sh: torch, quantus),
as `python quantus_scores.py REQUEST.npz RESULT.npz [...]` (reference_io.py).
REQUEST holds what captum_maps.py reads (`spec` with the layers, `x` in
TensorFlow's layout, `target`, the weights) plus the maps `a` (x's layout),
and `spec["metrics"]`: a list of {"key", "metric", "options"} (and "maps":
the request's array of maps to score, when not `a`). Where Quantus
draws random numbers, the request brings the draws the graph_override side
made, and they replace Quantus's: `noise.{key}` (samples x examples x
features, added in order, one sample per call of the perturbation) and
`subsets.{key}` (runs x examples x subset size, the features each call of
np.random.choice returns, in order). RESULT holds each metric's scores
under its key.
"""

import json
import sys

import captum_maps
import numpy as np
import quantus
import reference_io
import torch
from captum.attr import Saliency


def _nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2)) if a.ndim == 4 else a


def _saliency(model, inputs, targets, **kwargs):
    """The signed gradient of the target logit (graph_override's
    saliency(abs=False)), for Quantus's explain_func."""
    x = torch.from_numpy(np.ascontiguousarray(inputs, np.float32))
    t = torch.from_numpy(np.asarray(targets).astype(np.int64))
    return Saliency(model).attribute(x, target=t, abs=False).detach().numpy()


def _noise_func(draws):
    it = iter(draws)

    def perturb(arr, indices=None, **kwargs):
        return arr + next(it).reshape(arr.shape)
    return perturb


def _replay_choice(subsets):
    it = iter(subsets.reshape(-1, subsets.shape[-1]))
    return lambda *args, **kwargs: next(it).copy()


METRICS = {
    "pixel_flipping": quantus.PixelFlipping,
    "region_perturbation": quantus.RegionPerturbation,
    "road": quantus.ROAD,
    "faithfulness_correlation": quantus.FaithfulnessCorrelation,
    "max_sensitivity": quantus.MaxSensitivity,
    "local_lipschitz_estimate": quantus.LocalLipschitzEstimate,
    "random_logit": quantus.RandomLogit,
    "sparseness": quantus.Sparseness,
    "complexity": quantus.Complexity,
}


def score(model, entry, request):
    key, name = entry["key"], entry["metric"]
    options = dict(entry.get("options", {}), disable_warnings=True)
    if name == "random_logit":
        options["similarity_func"] = quantus.similarity_func.correlation_spearman
    if "noise." + key in request:
        options["perturb_func"] = _noise_func(request["noise." + key])
    x, a = _nchw(request["x"]), _nchw(request[entry.get("maps", "a")])
    y = request["target"].astype(np.int64)
    choice = np.random.choice
    if "subsets." + key in request:
        np.random.choice = _replay_choice(request["subsets." + key])
    try:
        result = METRICS[name](**options)(
            model=model, x_batch=x, y_batch=y, a_batch=a, channel_first=True,
            explain_func=_saliency, softmax=False, device="cpu")
    finally:
        np.random.choice = choice
    if name == "road":  # {percentage: mean accuracy}; the per-example curve is kept
        return np.asarray(list(result.values()), np.float64)
    return np.asarray(result, np.float64)


def run(request):
    spec = json.loads(str(request["spec"]))
    torch.manual_seed(0)
    model = captum_maps.build(spec, request)
    result = {}
    for entry in spec["metrics"]:
        result[entry["key"]] = score(model, entry, request)
    return result


if __name__ == "__main__":
    sys.exit(reference_io.main(sys.argv, run))
