"""Instance normalization with running statistics (``track_running_stats=True``), what the lazy
instance norms become by default (PyTorch's ``LazyInstanceNorm*d`` track them).

While training, each sample's channels are normalized by their own statistics and the running
mean and (unbiased) variance move towards the batch averages of those statistics; in evaluation
mode the running statistics normalize, as ``torch.nn.InstanceNorm*d(track_running_stats=True)``
does. ``num_batches_tracked`` is kept (in the state dict) but not counted, as in PyTorch.
"""

from __future__ import annotations

from gt.nn.norm_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from gt.nn.normalization import instance_norm
from gt.tensor import Tensor


def instance_norm_tracked(x: Tensor, running_mean: Tensor, running_var: Tensor,
                          weight: Tensor | None, bias: Tensor | None, use_input_stats: bool,
                          momentum: float, eps: float) -> Tensor:  # fmt: skip
    """``F.instance_norm`` with running statistics, over a batched ``[N, C, *spatial]`` input."""
    return instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum,
                         eps)  # fmt: skip


class _TrackedInstanceNorm:
    """Mixed into an ``InstanceNorm*d`` whose ``track_running_stats`` is on."""

    def forward(self, input: Tensor) -> Tensor:
        if not self.track_running_stats:
            return super().forward(input)  # type: ignore[misc]
        unbatched = input.ndim == self._unbatched_dims
        momentum = 0.0 if self.momentum is None else self.momentum
        out = instance_norm_tracked(input.unsqueeze(0) if unbatched else input, self.running_mean,
                                    self.running_var, self.weight, self.bias,
                                    self.training, momentum, self.eps)  # fmt: skip
        return out.squeeze(0) if unbatched else out

    def _get_name(self) -> str:
        return type(self).__mro__[2].__name__  # the InstanceNorm*d it extends


class InstanceNorm1dWithStats(_TrackedInstanceNorm, InstanceNorm1d):
    """``InstanceNorm1d`` with running statistics (prints as ``InstanceNorm1d``)."""


class InstanceNorm2dWithStats(_TrackedInstanceNorm, InstanceNorm2d):
    """``InstanceNorm2d`` with running statistics (prints as ``InstanceNorm2d``)."""


class InstanceNorm3dWithStats(_TrackedInstanceNorm, InstanceNorm3d):
    """``InstanceNorm3d`` with running statistics (prints as ``InstanceNorm3d``)."""


__all__ = [
    "InstanceNorm1dWithStats",
    "InstanceNorm2dWithStats",
    "InstanceNorm3dWithStats",
    "instance_norm_tracked",
]
