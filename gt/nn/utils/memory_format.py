"""``convert_conv2d_weight_memory_format`` and ``convert_conv3d_weight_memory_format``
(``torch.nn.utils.memory_format``): give the weights of a model's convolutions a memory format
(``gt.channels_last`` ...), leaving every other layer as it is. GT's layouts are the strides the
tensors report (see :mod:`gt.ops.layout`); the values do not change."""

from __future__ import annotations

from typing import Any, TypeVar

from gt.nn.module import Module

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]

_M = TypeVar("_M", bound=Module)


def _convert(module: Any, kinds: tuple, memory_format: Any) -> None:
    if isinstance(module, kinds):
        data = module.weight.detach().clone(memory_format=memory_format)  # (PyTorch's rank check)
        module.weight.data = data
        module.weight._st = data._st
    for child in module.children():
        _convert(child, kinds, memory_format)


def convert_conv2d_weight_memory_format(module: _M, memory_format: Any) -> _M:
    """Give the weight of every ``Conv2d`` and ``ConvTranspose2d`` in ``module`` (itself
    included) ``memory_format`` (``gt.channels_last`` or ``gt.contiguous_format``); returns
    ``module``."""
    from gt.nn import Conv2d, ConvTranspose2d  # noqa: PLC0415 - gt.nn imports this package

    _convert(module, (Conv2d, ConvTranspose2d), memory_format)
    return module


def convert_conv3d_weight_memory_format(module: _M, memory_format: Any) -> _M:
    """Give the weight of every ``Conv3d`` and ``ConvTranspose3d`` in ``module`` (itself
    included) ``memory_format`` (``gt.channels_last_3d`` or ``gt.contiguous_format``); returns
    ``module``."""
    from gt.nn import Conv3d, ConvTranspose3d  # noqa: PLC0415 - gt.nn imports this package

    _convert(module, (Conv3d, ConvTranspose3d), memory_format)
    return module
