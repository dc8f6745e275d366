"""``nn.SyncBatchNorm``: batch normalization whose statistics PyTorch gathers across the
processes of a distributed job. A GT program is one process (the cluster behind it is GT's
business), so it normalizes like ``BatchNorm*d`` over any number of spatial dimensions, with the
same buffers, state dict keys and ``repr``; ``process_group`` is kept and not used.
:meth:`SyncBatchNorm.convert_sync_batchnorm` swaps a model's ``BatchNorm*d`` layers for it.
"""

from __future__ import annotations

from typing import Any

from gt.nn.module import Module
from gt.nn.norm_layers import _BatchNorm
from gt.tensor import Tensor


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over dimension 1 of an input of 2 or more dimensions.

    Args:
        num_features: channels (dimension 1 of the input).
        eps: added to the variance.
        momentum: weight of the newest batch in the running statistics (``None``: a cumulative
            average).
        affine: learn ``weight`` and (unless ``bias=False``) ``bias``.
        track_running_stats: keep ``running_mean``, ``running_var`` and ``num_batches_tracked``.
        process_group: accepted for PyTorch's signature; one process needs no group.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if affine and not bias:
            self.register_parameter("bias", None)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every ``BatchNorm*d`` layer in it replaced by a ``SyncBatchNorm``
        sharing its parameters and buffers (and training mode); a ``BatchNorm*d`` given itself
        comes back as a new ``SyncBatchNorm``."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group,
                      bias=module.bias is not None)  # fmt: skip
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


__all__ = ["SyncBatchNorm"]
