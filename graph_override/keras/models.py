"""larq's model summary: per layer the binarized and 32-bit parameters, the
memory in KiB and the multiply-accumulates (MACs), with totals and the
memory compression ratio against float32.

The numbers and the printed tables are larq 0.13.3's (`larq.models.summary`)
for the same model; the tables are drawn here, without terminaltables.
"""

import itertools

import numpy as np
import tensorflow as tf

from graph_override.keras import layers as quant_layers

__all__ = ["summary"]

_KL = tf.keras.layers
# Keras 2's Conv2DTranspose and Conv1DTranspose subclass Conv2D and Conv1D,
# so larq counts their MACs; Keras 3's do not, hence listed.
_MAC_LAYERS = (_KL.Conv2D, _KL.SeparableConv2D, _KL.DepthwiseConv2D, _KL.Dense,
               _KL.Conv1D, _KL.SeparableConv1D, _KL.Conv2DTranspose, _KL.Conv1DTranspose)
_OP_COUNT_LAYERS = (_KL.Flatten, _KL.BatchNormalization, _KL.MaxPool2D,
                    _KL.AveragePooling2D, _KL.MaxPool1D, _KL.AveragePooling1D) + _MAC_LAYERS


def _memory_str(num_bits):
    """Bits as larq prints them: bytes with binary prefixes, 2 decimals."""
    num_bytes = num_bits / 8
    units = ["B", "KiB", "MiB", "GiB"]
    i = 0
    while i + 1 < len(units) and num_bytes / (1024 ** i) >= 1024:
        i += 1
    return "%s %s" % (format(num_bytes / (1024 ** i), ",.2f"), units[i])


def _number_str(num):
    """A count with 3 significant figures and k/M/B/T, as larq prints it."""
    num = float("%.3g" % num)
    if num < 1000:
        return str(num).rstrip("0").rstrip(".")
    if num >= 1e15:
        return "%.2E" % num
    magnitude = 0
    while abs(num) >= 1000 and magnitude < 4:
        magnitude += 1
        num /= 1000.0
    return ("%.3g" % num).rstrip(".") + ["", " k", " M", " B", " T"][magnitude]


def _entry(x, units=1):
    """A table cell as larq formats it: "?" for an unknown count."""
    try:
        if np.isnan(x):
            return "?"
    except TypeError:
        return "?"
    return x if x == 0 or units == 1 else x / units


def _weight_name(weight):
    return weight.name.split("/")[-1].replace(":0", "")


def _output_shape(layer):
    try:
        shape = layer.output_shape  # Keras 2
    except AttributeError:
        try:
            output = layer.output  # Keras 3
        except (AttributeError, ValueError, RuntimeError):
            return None
        shape = [o.shape for o in output] if isinstance(output, (list, tuple)) else output.shape
    normal = lambda s: tuple(d if d else -1 for d in s)  # noqa: E731
    if isinstance(shape, list):
        return normal(shape[0]) if len(shape) == 1 else [normal(s) for s in shape]
    return normal(shape)


class _Layer:
    """One layer's weights (count, bits, trainable, bias) and MACs."""

    def __init__(self, layer):
        self.name = layer.name
        self.layer = layer
        weights = list(layer.weights)
        if isinstance(layer, _KL.BatchNormalization):
            # Folded into the moving statistics at inference, as larq counts.
            for pair in (("beta", "moving_mean"), ("gamma", "moving_variance")):
                names = [_weight_name(w) for w in weights]
                if pair[0] in names and pair[1] in names:
                    weights.pop(names.index(pair[0]))
        bits = {id(v): getattr(q, "precision", None) or 32
                for _, v, q in quant_layers.quantized_weights(layer)}
        self.weights = [(int(np.prod(w.shape)), bits.get(id(w), 32),
                         any(w is t for t in layer.trainable_weights), "bias" in w.name)
                        for w in weights]
        self.output_shape = _output_shape(layer)
        self.ops = []
        if isinstance(layer, _MAC_LAYERS) and self.output_pixels:
            self.ops = [(count * self.output_pixels, max(self.input_precision or 32, bits))
                        for count, bits, _, bias in self.weights if not bias]

    @property
    def input_precision(self):
        try:
            return self.layer.input_quantizer.precision
        except AttributeError:
            return None

    @property
    def output_pixels(self):
        shape = self.output_shape
        if not shape:
            return None
        if len(shape) == 4:
            return int(np.prod(shape[1:3]))
        if len(shape) == 3:
            return shape[1]
        if len(shape) == 2:
            return 1
        raise NotImplementedError("%s: output of rank %d" % (self.name, len(shape)))

    def memory(self, int8=False):
        return sum(n * (min(b, 8) if int8 else b) for n, b, _, _ in self.weights)

    def fp_memory(self):
        return sum(32 * n for n, _, _, _ in self.weights)

    def weight_count(self, bits=None, trainable=None):
        return sum(n for n, b, t, _ in self.weights
                   if (bits is None or b == bits) and (trainable is None or t == trainable))

    def mac_count(self, precision=None):
        if isinstance(self.layer, _OP_COUNT_LAYERS) and self.output_pixels:
            return sum(n for n, p in self.ops if precision is None or p == precision)
        return None

    def bit_widths(self):
        return sorted({b for _, b, _, _ in self.weights})

    def precisions(self):
        return sorted({p for _, p in self.ops})

    def row(self, config):
        row = [self.name, self.input_precision or "-", str(self.output_shape or "multiple")]
        row += [self.weight_count(b) for b in config["bits"]]
        row.append(_entry(self.memory(), 8 * 1024))
        row += [_entry(self.mac_count(p)) for p in config["macs"]]
        return row


class _Model(_Layer):
    """A model: the sum of its layers (nested models too)."""

    def __init__(self, model):  # pylint: disable=super-init-not-called
        self.name = model.name
        self.layers = [_Model(l) if isinstance(l, tf.keras.Model) else _Layer(l)
                       for l in model.layers]
        self.output_shape = self.layers[-1].output_shape if self.layers else None

    @property
    def input_precision(self):
        return self.layers[0].input_precision

    def memory(self, int8=False):
        return sum(l.memory(int8) for l in self.layers)

    def fp_memory(self):
        return sum(l.fp_memory() for l in self.layers)

    def weight_count(self, bits=None, trainable=None):
        return sum(l.weight_count(bits, trainable) for l in self.layers)

    def mac_count(self, precision=None):
        return sum(l.mac_count(precision) or 0 for l in self.layers)

    def bit_widths(self):
        return sorted(set(itertools.chain.from_iterable(l.bit_widths() for l in self.layers)))

    def precisions(self):
        return sorted(set(itertools.chain.from_iterable(l.precisions() for l in self.layers)))

    def table(self, include_macs):
        config = {"bits": self.bit_widths(),
                  "macs": self.precisions() if include_macs else []}
        header = (["Layer", "Input prec.\n(bit)", "Outputs"]
                  + ["# %d-bit\nx 1" % b for b in config["bits"]] + ["Memory\n(kB)"]
                  + ["%d-bit MACs" % p for p in config["macs"]])
        total = (["Total", "", ""] + [self.weight_count(b) for b in config["bits"]]
                 + [_entry(self.memory(), 8 * 1024)]
                 + [_entry(self.mac_count(p)) for p in config["macs"]])
        return [header] + [l.row(config) for l in self.layers] + [total]

    def totals(self, include_macs):
        rows = [["Total params", _number_str(self.weight_count())],
                ["Trainable params", _number_str(self.weight_count(trainable=True))],
                ["Non-trainable params", _number_str(self.weight_count(trainable=False))],
                ["Model size", _memory_str(self.memory())],
                ["Model size (8-bit FP weights)", _memory_str(self.memory(int8=True))],
                ["Float-32 Equivalent", _memory_str(self.fp_memory())],
                ["Compression Ratio of Memory", self.memory() / max(1e-8, self.fp_memory())]]
        if include_macs:
            macs = self.mac_count()
            rows.append(["Number of MACs", _number_str(macs)])
            for bits, what in ((1, "binarized"), (2, "ternarized")):
                ratio = self.mac_count(bits) / max(1, macs)
                if ratio > 0:
                    rows.append(["Ratio of MACs that are %s" % what, "%.4f" % ratio])
        return rows


def _draw(rows, title, right_align, rules):
    """An ASCII table as terminaltables' AsciiTable draws it without inner
    column borders: `rules` after the heading and before the last row."""
    cells = [["%.2f" % v if type(v) is float else str(v) for v in row]  # noqa: E721
             for row in rows]
    widths = [max([len(line) for row in cells for line in row[i].splitlines()] + [0])
              for i in range(len(cells[0]))]
    inner = sum(w + 2 for w in widths)
    line = "+" + "-" * inner + "+"
    top = line if len(title) > inner else "+" + title + "-" * (inner - len(title)) + "+"
    out = [top]
    for r, row in enumerate(cells):
        split = [c.splitlines() or [""] for c in row]
        for k in range(max(len(s) for s in split)):
            parts = []
            for i, s in enumerate(split):
                text = s[k] if k < len(s) else ""
                parts.append((" " + text.rjust(widths[i]) + " ") if right_align and i
                             else (" " + text.ljust(widths[i]) + " "))
            out.append("|" + "".join(parts) + "|")
        if rules and r in (0, len(cells) - 2) and r != len(cells) - 1:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def summary(model, print_fn=None, include_macs=True):
    """Prints larq's summary of `model`: a table of its layers (input
    precision, output shape, parameters per bit width, memory in kB of 8*1024
    bits, MACs per precision) and a table of totals (parameters, model size,
    size with 8-bit float weights, float32 equivalent, compression ratio, MACs
    and the share of binarized and ternarized MACs). A MAC's precision is the
    larger of its input's and its weight's.

    Example:
      >>> import tensorflow as tf
      >>> import graph_override.keras as lq
      >>> model = tf.keras.Sequential([
      ...     tf.keras.Input((4,)),
      ...     lq.layers.QuantDense(2, kernel_quantizer="ste_sign",
      ...                          kernel_constraint="weight_clip")], name="tiny")
      >>> lines = []
      >>> lq.models.summary(model, print_fn=lines.append)
      >>> print(lines[1].splitlines()[-3])
      | Compression Ratio of Memory    0.23    |

    Args:
      model: a built Keras model.
      print_fn: called with each table's text (default print).
      include_macs: whether the summary counts multiply-accumulates (the
        per-layer table keeps its MAC columns either way, as larq's does).

    Raises:
      ValueError: the model is not built yet.
    """
    if not model.built:
        raise ValueError(
            "summary(%s): the model is not built yet. Build it first with "
            "model.build(input_shape), by calling it on data, or give the first "
            "layer an input (keras.Input)." % model.name)
    print_fn = print_fn or print
    profile = _Model(model)
    print_fn(_draw(profile.table(True), "%s stats" % model.name, True, True))
    print_fn(_draw(profile.totals(include_macs), "%s summary" % model.name, False, False))
