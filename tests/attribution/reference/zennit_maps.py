"""Zennit's LRP maps of the networks of test_zennit.py (the torch side).

Runs inside the reference venv (compat/reference_venv.sh: torch, zennit
0.5.1, numpy; no TensorFlow), as

    python zennit_maps.py REQUEST.npz RESULT.npz [REQUEST.npz RESULT.npz ...]

(reference_io.py). REQUEST holds `spec` (JSON: "net", one of "mlp", "cnn",
"resnet", "two" (two inputs, `x` and `x_b`), and "methods", a list of
{"key", "composite" or "rule", "params", and "first": module names that get
Flat before the composite's rules}),
the inputs `x` in TensorFlow's layout (NHWC), `target` (a class per
example) and the weights in TensorFlow's layouts (dense [in, out], conv
HWIO; batch normalizations as gamma, beta, mean, var). RESULT holds
`logits` and each method's map under its key (NHWC again), each also in
float64 (``KEY.f64``).

A "rule" method puts that rule on every Linear and Conv2d, with Zennit's base
layer map (activations Pass, Sum and AvgPool Norm, BatchNorm Pass); a
"composite" method is Zennit's composite of that name. Both canonize with
SequentialMergeBatchNorm. The residual add of "resnet" is a zennit.layer.Sum
(what Zennit's ResNet canonizer puts there), so it gets Zennit's Norm rule.
"""

import json
import sys

import numpy as np
import reference_io
import torch
from torch import nn
from zennit import composites, rules
from zennit.attribution import Gradient
from zennit.canonizers import SequentialMergeBatchNorm
from zennit.layer import Sum
from zennit.types import Linear

BN_EPSILON = 1e-9  # see test_zennit.py


class FlattenNHWC(nn.Module):
    def forward(self, x):
        return torch.flatten(x.permute(0, 2, 3, 1), 1)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a, np.float32))


def _dense(arrays, key):
    w = arrays[key + "_w"]
    module = nn.Linear(w.shape[0], w.shape[1])
    module.weight.data, module.bias.data = _t(w.T), _t(arrays[key + "_b"])
    return module


def _conv(arrays, key, padding):
    w = arrays[key + "_w"]
    bias = key + "_b" in arrays
    module = nn.Conv2d(w.shape[2], w.shape[3], w.shape[:2], padding=padding, bias=bias)
    module.weight.data = _t(w.transpose(3, 2, 0, 1))
    if bias:
        module.bias.data = _t(arrays[key + "_b"])
    return module


def _bn(arrays, key):
    module = nn.BatchNorm2d(arrays[key + "_gamma"].shape[0], eps=BN_EPSILON)
    module.weight.data, module.bias.data = _t(arrays[key + "_gamma"]), _t(arrays[key + "_beta"])
    module.running_mean.data, module.running_var.data = (_t(arrays[key + "_mean"]),
                                                        _t(arrays[key + "_var"]))
    return module


class ResNetBlock(nn.Module):
    """conv0-bn0-relu, then conv1-bn1-relu-conv2-bn2 added to it, relu, avgpool,
    flatten, dense: the leaves in forward order, as SequentialMergeBatchNorm needs."""

    def __init__(self, arrays):
        super().__init__()
        self.conv0, self.bn0, self.relu0 = _conv(arrays, "c0", 1), _bn(arrays, "bn0"), nn.ReLU()
        self.conv1, self.bn1, self.relu1 = _conv(arrays, "c1", 1), _bn(arrays, "bn1"), nn.ReLU()
        self.conv2, self.bn2 = _conv(arrays, "c2", 1), _bn(arrays, "bn2")
        self.sum, self.relu2, self.pool = Sum(), nn.ReLU(), nn.AvgPool2d(2)
        self.flatten, self.dense = FlattenNHWC(), _dense(arrays, "d")

    def forward(self, x):
        h = self.relu0(self.bn0(self.conv0(x)))
        branch = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(h)))))
        out = self.relu2(self.sum(torch.stack([h, branch], dim=-1)))
        return self.dense(self.flatten(self.pool(out)))


class TwoInputs(nn.Module):
    """a -> conv a0 (valid) -> relu -> flatten; b -> dense b0 -> relu;
    concatenated -> dense h -> relu -> dense o."""

    def __init__(self, arrays):
        super().__init__()
        self.a0, self.b0 = _conv(arrays, "a0", 0), _dense(arrays, "b0")
        self.h, self.o = _dense(arrays, "h"), _dense(arrays, "o")
        self.relu_a, self.relu_b, self.relu_h = nn.ReLU(), nn.ReLU(), nn.ReLU()
        self.flatten = FlattenNHWC()

    def forward(self, a, b):
        h = torch.cat([self.flatten(self.relu_a(self.a0(a))), self.relu_b(self.b0(b))], 1)
        return self.o(self.relu_h(self.h(h)))


def build(net, arrays):
    if net == "mlp":
        model = nn.Sequential(_dense(arrays, "d0"), nn.ReLU(), _dense(arrays, "d1"), nn.ReLU(),
                              _dense(arrays, "d2"))
    elif net == "cnn":
        model = nn.Sequential(_conv(arrays, "c0", 0), nn.ReLU(), nn.MaxPool2d(2),
                              _conv(arrays, "c1", 1), nn.ReLU(), FlattenNHWC(),
                              _dense(arrays, "d"))
    elif net == "two":
        model = TwoInputs(arrays)
    else:
        model = ResNetBlock(arrays)
    return model.float().eval()


def _rule(name, params):
    if name == "z":
        return rules.Epsilon(epsilon=0.0)
    if name == "epsilon":
        return rules.Epsilon(**params)
    return {"zplus": rules.ZPlus, "alpha_beta": rules.AlphaBeta, "gamma": rules.Gamma,
            "w_square": rules.WSquare, "flat": rules.Flat, "z_box": rules.ZBox}[name](**params)


def _composite(method):
    canonizers = [SequentialMergeBatchNorm()]
    params = dict(method.get("params", {}))
    if "rule" in method:
        layer_map = composites.layer_map_base() + [(Linear, _rule(method["rule"], params))]
        return composites.LayerMapComposite(layer_map=layer_map, canonizers=canonizers)
    named = composites.COMPOSITES[method["composite"]](canonizers=canonizers, **params)
    if method.get("first"):  # Flat on these (a first layer per input), then the composite
        return composites.MixedComposite([
            composites.NameMapComposite([(tuple(method["first"]), rules.Flat())]), named])
    return named


def _relevance(model, composite, inputs, one_hot):
    """The relevance of each input: the gradient under the composite's hooks,
    as Zennit's `Gradient` attributor computes it for one input."""
    inputs = [x.clone().requires_grad_(True) for x in inputs]
    with composite.context(model) as modified:
        output = modified(*inputs)
        return torch.autograd.grad((output,), inputs, grad_outputs=(one_hot,))


def run(request):
    """Each map in float32 (under its key) and in float64 (``KEY.f64``): how
    far apart the two are is how much float32 rounding moves the map."""
    spec = json.loads(str(request["spec"]))
    result = {}
    for dtype, suffix in ((torch.float32, ""), (torch.float64, ".f64")):
        model = build(spec["net"], request).to(dtype)
        x = _t(request["x"]).to(dtype)
        if x.dim() == 4:
            x = x.permute(0, 3, 1, 2).contiguous()
        inputs = [x] + ([_t(request["x_b"]).to(dtype)] if "x_b" in request else [])
        target = torch.from_numpy(request["target"].astype(np.int64))
        with torch.no_grad():
            logits = model(*inputs)
        result["logits" + suffix] = logits.numpy()
        one_hot = torch.eye(logits.shape[1], dtype=dtype)[target]
        for method in spec["methods"]:
            if len(inputs) > 1:
                maps = _relevance(model, _composite(method), inputs, one_hot)
            else:
                with Gradient(model=model, composite=_composite(method)) as attributor:
                    maps = attributor(x.clone().requires_grad_(True), one_hot)[1:]
            for k, relevance in enumerate(maps):
                if relevance.dim() == 4:
                    relevance = relevance.permute(0, 2, 3, 1)
                key = method["key"] + ("_b" if k else "") + suffix
                result[key] = relevance.detach().numpy()
    return result


if __name__ == "__main__":
    sys.exit(reference_io.main(sys.argv, run))
