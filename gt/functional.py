"""``gt.functional``: PyTorch's ``torch.functional`` module (the tensor functions written in
Python there), each name bound to GT's implementation of it (``gt.functional.einsum is
gt.einsum``)."""

from __future__ import annotations

from gt.linalg.toplevel import lu
from gt.ops.compat import unique_consecutive
from gt.ops.compat_functions import cartesian_prod, chain_matmul
from gt.ops.composed import atleast_1d, atleast_2d, atleast_3d, block_diag
from gt.ops.einsum import einsum
from gt.ops.functional import (
    broadcast_shapes,
    broadcast_tensors,
    cdist,
    meshgrid,
    norm,
    split,
    tensordot,
    unique,
)
from gt.spectral import istft, stft
from gt.torch_functions import unravel_index
from gt.torch_native import pca_lowrank, svd_lowrank

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu",
           "norm", "meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot",
           "unique", "unique_consecutive", "unravel_index"]  # fmt: skip
