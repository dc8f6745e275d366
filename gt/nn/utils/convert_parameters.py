"""``parameters_to_vector`` and ``vector_to_parameters``: a model's parameters as one 1-d tensor
and back (PyTorch's ``torch.nn.utils.convert_parameters``)."""

from __future__ import annotations

from collections.abc import Iterable

from gt.ops.shaping import cat
from gt.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and joined into one 1-d tensor (differentiable)."""
    parts = [p.reshape(-1) for p in parameters]
    if not parts:
        raise RuntimeError("parameters_to_vector: no parameters")
    return cat(parts)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give the parameters consecutive slices of the 1-d ``vec`` (not recorded); as in PyTorch
    (``param.data = vec[a:b].view_as(param).data``), they share them: a later in-place change
    of ``vec`` changes the parameters."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.shape[0] != total:
        raise RuntimeError(
            f"vector_to_parameters: a vector of {total} elements was expected, got shape "
            f"{list(vec.shape)}"
        )
    start = 0
    for p in params:  # as PyTorch's: each parameter then shares its slice of ``vec``
        n = p.numel()
        p.data = vec[start : start + n].view_as(p).data
        start += n
