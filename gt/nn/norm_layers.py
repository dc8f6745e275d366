"""Normalization modules: ``BatchNorm1d/2d/3d``, ``GroupNorm``, ``InstanceNorm1d/2d/3d``, ``RMSNorm``,
``LocalResponseNorm`` (``LayerNorm`` is in :mod:`gt.nn.layers`), with PyTorch's buffers, state dict
keys and ``repr``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.errors import ShapeError
from gt.nn import normalization as N
from gt.nn.module import Module, Parameter
from gt.nn.resetting import refill
from gt.tensor import Tensor


class _NormBase:
    """PyTorch's state-dict version 2 of the batch and instance norms: older checkpoints have no
    ``num_batches_tracked`` (the module keeps its own when loading one)."""

    _version = 2

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict,
                              *args: Any) -> None:  # fmt: skip
        version = local_metadata.get("version")
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                own = getattr(self, "num_batches_tracked", None)
                state_dict[key] = own if own is not None else F.zeros((), dtype="int64")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)


class _BatchNorm(_NormBase, Module):
    """Batch normalization over dimension 1, with running statistics for evaluation.

    Args:
        num_features: channels (dimension 1 of the input).
        eps: added to the variance.
        momentum: weight of the newest batch in the running statistics (``None``: a cumulative
            average over the batches seen).
        affine: learn ``weight`` (ones) and ``bias`` (zeros).
        track_running_stats: keep ``running_mean``, ``running_var`` and ``num_batches_tracked``.
    """

    _expected_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True):  # fmt: skip
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(F.ones(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(F.zeros(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", F.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", F.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", F.zeros((), dtype="int64"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean 0, variance 1, no batches seen."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running statistics reset, ``weight`` back to ones and ``bias`` to zeros."""
        self.reset_running_stats()
        refill(self, ones=("weight",), zeros=("bias",))

    def forward(self, input: Tensor) -> Tensor:
        if self._expected_dims and input.ndim not in self._expected_dims:
            raise ValueError(
                f"expected {' or '.join(f'{d}D' for d in self._expected_dims)} input (got {input.ndim}D input)"
            )
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        # (PyTorch's rule: batch statistics in training, or when there are no running ones; a
        # module whose track_running_stats was turned off after it was made keeps its buffers)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        return N.batch_norm(
            input,
            self.running_mean if tracked else None,
            self.running_var if tracked else None,
            self.weight,
            self.bias,
            use_batch,
            momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of ``[N, C]`` or ``[N, C, L]``."""

    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of ``[N, C, H, W]``."""

    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of ``[N, C, D, H, W]``."""

    _expected_dims = (5,)


class GroupNorm(Module):
    """Normalize groups of channels of each sample, then scale and shift per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True):  # fmt: skip
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        if affine:
            self.weight = Parameter(F.ones(num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(F.zeros(num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """``weight`` back to ones, ``bias`` to zeros."""
        refill(self, ones=("weight",), zeros=("bias",))

    def forward(self, input: Tensor) -> Tensor:
        return N.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class _InstanceNorm(_NormBase, Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True):  # fmt: skip
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(F.ones(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(F.zeros(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", F.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", F.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", F.zeros((), dtype="int64"))
        else:  # (the attributes exist, as None, as in PyTorch)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        """Running mean 0, variance 1, no batches seen (with ``track_running_stats``)."""
        refill(self, ones=("running_var",), zeros=("running_mean", "num_batches_tracked"))

    def reset_parameters(self) -> None:
        """The running statistics reset, ``weight`` back to ones and ``bias`` to zeros."""
        self.reset_running_stats()
        refill(self, ones=("weight",), zeros=("bias",))

    def forward(self, input: Tensor) -> Tensor:
        unbatched = input.ndim == self._unbatched_dims
        stats = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        out = N.instance_norm(input.unsqueeze(0) if unbatched else input, *stats, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)  # fmt: skip
        return out.squeeze(0) if unbatched else out

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Normalize each channel of each sample of ``[N, C, L]`` over ``L``."""

    _unbatched_dims = 2


class InstanceNorm2d(_InstanceNorm):
    """Normalize each channel of each sample of ``[N, C, H, W]`` over ``H, W``."""

    _unbatched_dims = 3


class InstanceNorm3d(_InstanceNorm):
    """Normalize each channel of each sample of ``[N, C, D, H, W]`` over ``D, H, W``."""

    _unbatched_dims = 4


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape``."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__()
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(F.ones(shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """``weight`` back to ones."""
        refill(self, ones=("weight",))

    def forward(self, x: Tensor) -> Tensor:
        return N.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class LocalResponseNorm(Module):
    """Normalize by the sum of squares over neighbouring channels."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 3:
            raise ShapeError(f"LocalResponseNorm: expected 3-d or more input, got {input.ndim}-d")
        return N.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
