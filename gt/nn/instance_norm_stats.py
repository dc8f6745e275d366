"""Instance normalization with running statistics (``track_running_stats=True``), what the lazy
instance norms become by default (PyTorch's ``LazyInstanceNorm*d`` track them).

While training, each sample's channels are normalized by their own statistics and the running
mean and (unbiased) variance move towards the batch averages of those statistics; in evaluation
mode the running statistics normalize, as ``torch.nn.InstanceNorm*d(track_running_stats=True)``
does. ``num_batches_tracked`` is kept (in the state dict) but not counted, as in PyTorch.
"""

from __future__ import annotations

from gt.autograd import no_grad
from gt.nn.norm_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from gt.tensor import Tensor


def instance_norm_tracked(x: Tensor, running_mean: Tensor, running_var: Tensor,
                          weight: Tensor | None, bias: Tensor | None, use_input_stats: bool,
                          momentum: float, eps: float) -> Tensor:  # fmt: skip
    """``F.instance_norm`` with running statistics, over a batched ``[N, C, *spatial]`` input."""
    dims = tuple(range(2, x.ndim))
    cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if use_input_stats:
        mean = x.mean(dims, keepdim=True)
        d = x - mean
        var = (d * d).mean(dims, keepdim=True)
        out = d * (var + eps).rsqrt()
        n = x.numel() // (x.shape[0] * x.shape[1])
        with no_grad():
            m = momentum
            batch_mean = mean.reshape(x.shape[0], x.shape[1]).mean(0)
            unbiased = var.reshape(x.shape[0], x.shape[1]).mean(0) * (n / max(n - 1, 1))
            running_mean.mul_(1.0 - m).add_(batch_mean.to(running_mean.dtype) * m)
            running_var.mul_(1.0 - m).add_(unbiased.to(running_var.dtype) * m)
    else:
        out = (x - running_mean.reshape(cs)) * (running_var.reshape(cs) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(cs)
    if bias is not None:
        out = out + bias.reshape(cs)
    return out


class _TrackedInstanceNorm:
    """Mixed into an ``InstanceNorm*d`` whose ``track_running_stats`` is on."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.track_running_stats:
            return super().forward(x)  # type: ignore[misc]
        unbatched = x.ndim == self._unbatched_dims
        momentum = 0.0 if self.momentum is None else self.momentum
        out = instance_norm_tracked(x.unsqueeze(0) if unbatched else x, self.running_mean,
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
