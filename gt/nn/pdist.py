"""``F.pdist``: the distances between every pair of rows of a matrix, in PyTorch's order (the
upper triangle, row by row: ``(0, 1), (0, 2), ..., (1, 2), ...``) and with its gradient (zero
where two rows, or two of their elements, coincide; for ``p = inf`` every tied element gets it).
"""

from __future__ import annotations

import math

import numpy as np

from gt import shapes as S
from gt.grad_graph import label
from gt.ops.arith import where
from gt.ops.autocast import autocast_op
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


@autocast_op("pdist")
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distance between each pair of rows ``i < j`` of ``[N, M]``: ``N(N-1)/2``
    values, ``(0, 1), (0, 2), ..., (N-2, N-1)`` (PyTorch's ``PdistBackward0`` node).

    Args:
        input: a 2-d floating tensor.
        p: ``0`` (how many elements differ), any positive number, or ``inf`` (largest element
            difference).
    """
    out = _pdist(input, p)
    return out if out is input else label(out, "PdistBackward0")


def _pdist(input: Tensor, p: float = 2) -> Tensor:
    """:func:`pdist`'s value."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    x = input if input.dtype in S.FLOAT_DTYPES else input.to(S.DEFAULT_FLOAT)
    n, m = x.shape
    if n < 2:
        return x.sum(1)[:0]
    if m == 0:
        return x.new_zeros((n * (n - 1) // 2,))
    i, j = np.triu_indices(n, 1)
    rows_i = x[x._upload(np.ascontiguousarray(i, dtype=np.int64))]
    rows_j = x[x._upload(np.ascontiguousarray(j, dtype=np.int64))]
    a = (rows_i - rows_j).abs()  # [pairs, M]
    if p == 0:
        return (a != 0).to(x.dtype).sum(1) + a.sum(1) * 0.0
    if p == math.inf:  # the largest difference; each tied element gets the gradient
        top = a.detach().amax(1, keepdim=True)
        tied = (a.detach() == top).to(x.dtype)
        return top.squeeze(1) + ((a - top) * tied).sum(1)
    nonzero = a != 0
    powered = where(nonzero, where(nonzero, a, 1.0).pow(p), 0.0)
    total = powered.sum(1)
    pos = total > 0
    return where(pos, where(pos, total, 1.0).pow(1.0 / p), 0.0)


__all__ = ["pdist"]
