"""larq-zoo's architectures as model builders on Keras 3 (and Keras 2), with
graph_override.keras's layers: the same layers, configurations, names and
parameter counts as larq-zoo 2.3.2's (`summary` prints the same table), the
same signature (``input_shape``, ``input_tensor``, ``weights``,
``include_top``, ``num_classes``, keywords only). ``weights`` is None or the
path of a weights file (larq-zoo's load: the layers come in the same
order); nothing is downloaded. See docs/guide/keras.md, "larq-zoo".
"""

from graph_override.keras.zoo.alexnets import BinaryAlexNet, DoReFaNet, XNORNet
from graph_override.keras.zoo.densenets import (BinaryDenseNet28, BinaryDenseNet37,
                                                BinaryDenseNet37Dilated, MeliusNet22)
from graph_override.keras.zoo.quicknet import QuickNet, QuickNetLarge, QuickNetSmall
from graph_override.keras.zoo.resnets import BiRealNet, BinaryResNetE18, RealToBinaryNet

__all__ = ["BiRealNet", "BinaryAlexNet", "BinaryDenseNet28", "BinaryDenseNet37",
           "BinaryDenseNet37Dilated", "BinaryResNetE18", "DoReFaNet", "MeliusNet22",
           "QuickNet", "QuickNetLarge", "QuickNetSmall", "RealToBinaryNet", "XNORNet"]
