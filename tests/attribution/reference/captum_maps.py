"""Captum's attribution maps of a network given as numpy weights (the torch side).

Runs inside the reference venv (compat/reference_venv.sh: torch, captum,
numpy; no TensorFlow, no graph_override), as

    python captum_maps.py REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]

(reference_io.py). REQUEST holds `spec` (JSON: the layers and the methods
to run), the inputs `x` in TensorFlow's layout (NHWC for images),
`baseline`, `target` (a class per example) and each layer's weights in TensorFlow's layouts: `w{i}`/`b{i}`
for layer i, dense kernels [in, out], conv kernels HWIO. RESULT holds
`logits` and, for each method, its map under the method's `key` (in
TensorFlow's layout again) and `{key}.delta` where Captum returns a
convergence delta.

Layers (spec["layers"], in order): {"type": "dense"}, {"type": "conv",
"padding": "valid" | "same"} (stride 1), {"type": "maxpool"} or
{"type": "avgpool"} (2x2, stride 2), {"type": "flatten"} (of NHWC, as
Keras flattens), {"type": "act", "fn": "relu" | "tanh" | "sigmoid" |
"softplus" | "elu"}. A maxpool with "captum_rule": false is a subclass of
nn.MaxPool2d, which Captum's DeepLift does not find in its table of rules
(it looks up type(module) exactly): the pool then keeps its gradient, the
convention of graph_override and DeepExplain.

With spec["split"] = k (vector inputs), the network is a model of two
inputs, x[:, :k] and x[:, k:], concatenated before its first layer; Captum
explains the tuple of both, and RESULT holds its two maps concatenated again.
"""

import json
import sys

import numpy as np
import reference_io
import torch
from captum.attr import (
    DeepLift,
    Deconvolution,
    GuidedBackprop,
    InputXGradient,
    IntegratedGradients,
    Saliency,
)
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
               "softplus": nn.Softplus, "elu": nn.ELU}


class GradientMaxPool2d(nn.MaxPool2d):
    """nn.MaxPool2d under another type: Captum's DeepLift leaves it its gradient."""


class FlattenNHWC(nn.Module):
    """Flattens NCHW activations in NHWC order, as Keras's Flatten does."""

    def forward(self, x):
        if x.dim() == 4:
            x = x.permute(0, 2, 3, 1)
        return torch.flatten(x, 1)


def _layer(i, layer, arrays):
    kind = layer["type"]
    if kind == "dense":
        kernel, bias = arrays[f"w{i}"], arrays[f"b{i}"]
        module = nn.Linear(kernel.shape[0], kernel.shape[1])
        module.weight.data = torch.from_numpy(np.ascontiguousarray(kernel.T))
        module.bias.data = torch.from_numpy(bias)
        return module
    if kind == "conv":
        kernel, bias = arrays[f"w{i}"], arrays[f"b{i}"]  # HWIO
        module = nn.Conv2d(kernel.shape[2], kernel.shape[3], kernel.shape[:2],
                           padding=layer["padding"])
        module.weight.data = torch.from_numpy(
            np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)))
        module.bias.data = torch.from_numpy(bias)
        return module
    if kind == "maxpool":
        return (nn.MaxPool2d if layer.get("captum_rule", True) else GradientMaxPool2d)(2)
    if kind == "avgpool":
        return nn.AvgPool2d(2)
    if kind == "flatten":
        return FlattenNHWC()
    if kind == "act":
        return ACTIVATIONS[layer["fn"]]()
    raise ValueError(f"captum_maps: unknown layer type {kind!r} (layer {i})")


class TwoInputs(nn.Module):
    """The network of two inputs, concatenated before its first layer."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, a, b):
        return self.model(torch.cat([a, b], dim=1))


def build(spec, arrays):
    """The torch twin of the Keras network: same weights, float32."""
    model = nn.Sequential(*[_layer(i, layer, arrays) for i, layer in enumerate(spec["layers"])])
    return model.float().eval()


def _to_torch(x):
    """NHWC (TensorFlow) to NCHW (torch) for images; vectors as they are."""
    x = torch.from_numpy(np.ascontiguousarray(x, np.float32))
    return x.permute(0, 3, 1, 2).contiguous() if x.dim() == 4 else x


def _to_tf(t):
    t = t.detach()
    return (t.permute(0, 2, 3, 1) if t.dim() == 4 else t).numpy()


def attribute(model, method, x, baseline, target):
    """One Captum method's map (and delta, or None) for one request entry;
    "zero_baseline": true replaces the request's baseline by zeros."""
    name = method["method"]
    if method.get("zero_baseline"):
        baseline = (tuple(torch.zeros_like(t) for t in x) if isinstance(x, tuple)
                    else torch.zeros_like(x))
    if name == "saliency":
        return Saliency(model).attribute(x, target=target, abs=method.get("abs", False)), None
    if name == "input_x_gradient":
        return InputXGradient(model).attribute(x, target=target), None
    if name == "guided_backprop":
        return GuidedBackprop(model).attribute(x, target=target), None
    if name == "deconvolution":
        return Deconvolution(model).attribute(x, target=target), None
    if name == "integrated_gradients":
        return IntegratedGradients(model).attribute(
            x, baselines=baseline, target=target, n_steps=method["n_steps"],
            method=method["rule"], return_convergence_delta=True)
    if name == "deeplift":
        return DeepLift(model).attribute(x, baselines=baseline, target=target,
                                         return_convergence_delta=True)
    raise ValueError(f"captum_maps: unknown method {name!r}")


def run(request):
    """All maps of one request, as a dict of numpy arrays."""
    spec = json.loads(str(request["spec"]))
    torch.manual_seed(0)
    model = build(spec, request)
    x, baseline = _to_torch(request["x"]), _to_torch(request["baseline"])
    target = torch.from_numpy(request["target"].astype(np.int64))
    with torch.no_grad():
        result = {"logits": model(x).numpy()}
    if "split" in spec:  # two inputs: Captum explains the tuple
        k = spec["split"]
        model = TwoInputs(model).eval()
        x, baseline = (x[:, :k], x[:, k:]), (baseline[:, :k], baseline[:, k:])
    for method in spec["methods"]:
        attribution, delta = attribute(model, method, x, baseline, target)
        if isinstance(attribution, tuple):
            assert len(attribution) == 2 and attribution[0].shape == x[0].shape
            attribution = torch.cat(attribution, dim=1)
        result[method["key"]] = _to_tf(attribution)
        if delta is not None:
            result[method["key"] + ".delta"] = delta.detach().numpy()
    return result


if __name__ == "__main__":
    sys.exit(reference_io.main(sys.argv, run))
