"""larq's model profile (``larq.models.ModelProfile``): the numbers behind
`graph_override.keras.models.summary`, per weight, layer and model.

`ModelProfile(model)` has larq's attributes and methods (``layer_profiles``,
``weight_count(bitwidth, trainable)``, ``op_count("mac", precision)``,
``memory``, ``int8_fp_weights_memory``, ``fp_equivalent_memory``,
``unique_param_bidtwidths``, ``unique_op_precisions``, ``generate_table``,
``generate_summary``), read from the same counts as `summary`, so the two
always agree. Memory is in bits, as larq counts it.
"""

import dataclasses

from graph_override.keras import models as _models
from graph_override.keras._missing import module_getattr

__all__ = ["LayerProfile", "ModelProfile", "OperationProfile", "WeightProfile"]


class WeightProfile:
    """One weight: its element ``count``, ``bitwidth`` (its quantizer's
    precision, else 32) and whether it is ``trainable``."""

    def __init__(self, count, bitwidth, trainable, bias):
        self.count, self.bitwidth, self.trainable, self._bias = count, bitwidth, trainable, bias

    @property
    def memory(self):
        return self.bitwidth * self.count

    @property
    def fp_equivalent_memory(self):
        return 32 * self.count

    @property
    def int8_fp_weights_memory(self):
        """Weights of more than 8 bits counted as 8."""
        return min(self.bitwidth, 8) * self.count

    def is_bias(self):
        return self._bias


@dataclasses.dataclass
class OperationProfile:
    """``n`` operations of ``op_type`` ("mac") at ``precision`` bits."""

    n: int
    precision: int
    op_type: str


def _entry(value, units):
    return _models._entry(value, units)  # pylint: disable=protected-access


class LayerProfile:
    """larq's profile of one layer.

    Example:
      >>> import tensorflow as tf
      >>> from graph_override.keras import layers, profile
      >>> model = tf.keras.Sequential([tf.keras.Input((4,)), layers.QuantDense(
      ...     2, kernel_quantizer="ste_sign", kernel_constraint="weight_clip")])
      >>> p = profile.ModelProfile(model).layer_profiles[0]
      >>> p.weight_count(1), p.weight_count(32), p.memory, p.op_count("mac", 32)
      (8, 2, 72, 8)
    """

    def __init__(self, layer, _counts=None):
        self._counts = _counts or _models._Layer(layer)  # pylint: disable=protected-access
        self.name = self._counts.name
        self.weight_profiles = [WeightProfile(*w) for w in self._counts.weights]
        self.op_profiles = [OperationProfile(n, p, "mac") for n, p in self._counts.ops]

    @property
    def memory(self):
        return self._counts.memory()

    @property
    def int8_fp_weights_memory(self):
        return self._counts.memory(int8=True)

    @property
    def fp_equivalent_memory(self):
        return self._counts.fp_memory()

    def weight_count(self, bitwidth=None, trainable=None):
        return self._counts.weight_count(bitwidth, trainable)

    def op_count(self, op_type=None, precision=None):
        """The multiply-accumulates (of `precision` bits, or all); None for a
        layer whose operations larq does not count."""
        if op_type != "mac":
            raise ValueError("Currently only counting of MAC-operations is supported.")
        return self._counts.mac_count(precision)

    @property
    def input_precision(self):
        return self._counts.input_precision

    @property
    def output_shape(self):
        return self._counts.output_shape

    @property
    def output_shape_str(self):
        return str(self.output_shape or "multiple")

    @property
    def output_pixels(self):
        return self._counts.output_pixels

    @property
    def unique_param_bidtwidths(self):
        return self._counts.bit_widths()

    @property
    def unique_op_precisions(self):
        return self._counts.precisions()

    def generate_table_row(self, table_config):
        row = [self.name, self.input_precision or "-", self.output_shape_str]
        row += [_entry(self.weight_count(i), table_config["param_units"])
                for i in table_config["param_bidtwidths"]]
        row.append(_entry(self.memory, table_config["memory_units"]))
        row += [_entry(self.op_count("mac", i), table_config["mac_units"])
                for i in table_config["mac_precisions"]]
        return row


class ModelProfile(LayerProfile):
    """larq's profile of a model: its layers' profiles (a nested model's as
    a `ModelProfile`) and their sums."""

    def __init__(self, model, _counts=None):  # pylint: disable=super-init-not-called
        self._counts = _counts or _models._Model(model)  # pylint: disable=protected-access
        self.name = self._counts.name
        self.layer_profiles = [
            ModelProfile(None, c) if isinstance(c, _models._Model)  # pylint: disable=protected-access
            else LayerProfile(None, c) for c in self._counts.layers]
        self.weight_profiles = [w for p in self.layer_profiles for w in p.weight_profiles]
        self.op_profiles = [o for p in self.layer_profiles for o in p.op_profiles]

    def op_count(self, op_type=None, bitwidth=None):
        if op_type != "mac":
            raise ValueError("Currently only counting of MAC-operations is supported.")
        return self._counts.mac_count(bitwidth)

    def _config(self, include_macs):
        return {"param_bidtwidths": self.unique_param_bidtwidths,
                "mac_precisions": self.unique_op_precisions if include_macs else [],
                "param_units": 1, "memory_units": 8 * 1024, "mac_units": 1}

    def generate_table(self, include_macs=True):
        """larq's rows of the layer table: the header, a row per layer, the total."""
        config = self._config(include_macs)
        header = (["Layer", "Input prec.\n(bit)", "Outputs"]
                  + ["# %d-bit\nx 1" % i for i in config["param_bidtwidths"]]
                  + ["Memory\n(kB)"] + ["%d-bit MACs" % i for i in config["mac_precisions"]])
        total = (["Total", "", ""] + [self.weight_count(i) for i in config["param_bidtwidths"]]
                 + [_entry(self.memory, 8 * 1024)]
                 + [_entry(self.op_count("mac", i), 1) for i in config["mac_precisions"]])
        return [header] + [p.generate_table_row(config) for p in self.layer_profiles] + [total]

    def generate_summary(self, include_macs=True):
        """larq's rows of the totals table."""
        return self._counts.totals(include_macs)


__getattr__ = module_getattr(__name__)
