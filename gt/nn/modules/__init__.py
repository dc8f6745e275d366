"""``gt.nn.modules``: where code written for PyTorch finds ``torch.nn.modules.<part>``: the hooks
of every module in ``module`` (:mod:`gt.nn.module` itself), and each part PyTorch's layers live in
(``batchnorm``, ``conv``, ``loss``, ``rnn``, ``linear`` ...), with the private bases that freeze-BN,
initialisation and loss code tests against (``isinstance(m, nn.modules.batchnorm._BatchNorm)``,
``from torch.nn.modules.loss import _Loss``). Each part offers every layer of :mod:`gt.nn` (GT does
not split them as PyTorch does) and those bases, looked up when first asked for."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from gt.nn import module
from gt.nn.modules import utils

# `import gt.nn.modules.module` and `from gt.nn.modules.module import ...`, as from torch.nn
sys.modules.setdefault(f"{__name__}.module", module)

#: PyTorch's private bases: ``(GT module, its class)``.
_BASES = {
    "_BatchNorm": ("norm_layers", "_BatchNorm"),
    "_NormBase": ("norm_layers", "_NormBase"),
    "_InstanceNorm": ("norm_layers", "_InstanceNorm"),
    "_ConvNd": ("conv_layers", "_ConvNd"),
    "_ConvTransposeNd": ("conv_layers", "_ConvTransposeNd"),
    "_ConvTransposeMixin": ("conv_layers", "_ConvTransposeNd"),
    "_MaxPoolNd": ("conv_layers", "_MaxPoolNd"),
    "_AvgPoolNd": ("conv_layers", "_AvgPoolNd"),
    "_AdaptiveAvgPoolNd": ("conv_layers", "_AdaptivePool"),
    "_AdaptiveMaxPoolNd": ("conv_layers", "_AdaptivePool"),
    "_Loss": ("loss_layers", "_Loss"),
    "_WeightedLoss": ("loss_layers", "_WeightedLoss"),
    "_DropoutNd": ("layers", "_DropoutNd"),
    "_ConstantPadNd": ("padding_layers", "_ConstantPadNd"),
    "LazyModuleMixin": ("lazy", "LazyModuleMixin"),
    "NonDynamicallyQuantizableLinear": ("attention", "NonDynamicallyQuantizableLinear"),
    "_get_activation_fn": ("transformer", "_get_activation_fn"),
}

#: The parts of ``torch.nn.modules`` that hold layers.
_PARTS = (
    "activation", "adaptive", "batchnorm", "channelshuffle", "container", "conv", "distance",
    "dropout", "flatten", "fold", "instancenorm", "lazy", "linear", "loss", "normalization",
    "padding", "pixelshuffle", "pooling", "rnn", "sparse", "transformer", "upsampling",
)  # fmt: skip


def _layer(name: str) -> Any:
    """A layer of :mod:`gt.nn`, or one of PyTorch's private bases, by name."""
    base = _BASES.get(name)
    if base is not None:
        return getattr(importlib.import_module(f"gt.nn.{base[0]}"), base[1])
    nn = importlib.import_module("gt.nn")
    if not name.startswith("__") and hasattr(nn, name):
        return getattr(nn, name)
    raise AttributeError(f"module 'gt.nn.modules' has no attribute {name!r}")


for _part in _PARTS:
    _m = types.ModuleType(
        f"{__name__}.{_part}", f"PyTorch's torch.nn.modules.{_part}: GT's layers."
    )
    _m.__getattr__ = _layer  # type: ignore[attr-defined]
    sys.modules.setdefault(_m.__name__, _m)
    globals()[_part] = sys.modules[_m.__name__]


def __getattr__(name: str) -> Any:
    """``from torch.nn.modules import Linear, Module``: every layer, as from its part."""
    return module.Module if name == "Module" else _layer(name)


__all__ = ["module", "utils", *_PARTS]
