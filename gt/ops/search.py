"""``gt.searchsorted`` and ``gt.bucketize``: PyTorch's binary search over sorted boundaries.

Both queue the ``searchsorted`` primitive (:mod:`gt.runtime.ops.search`) after checking and
promoting the arguments here, so a mistake raises at the user's line. Neither is differentiable
(the results are indices). As in PyTorch, the sequence is assumed sorted: an unsorted one, or one
that holds NaN, gives unspecified indices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.ops.base import TensorBase

if TYPE_CHECKING:
    from gt.tensor import Tensor


def _side(op: str, right: bool, side: str | None) -> bool:
    """Whether to take the right side, from PyTorch's two spellings of it."""
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise ValueError(f"{op}: side must be 'left' or 'right', not {side!r}")
    if right and side == "left":
        raise ValueError(f"{op}: side='left' and right=True contradict each other")
    return side == "right"


def _as_tensor(like: Tensor, v: Any, op: str) -> Tensor:
    if isinstance(v, TensorBase):
        if v._conn is not like._conn:
            raise ValueError(f"{op}: tensors belong to different GT connections")
        return v
    if isinstance(v, (bool, int, float)):
        # A number is a 0-d tensor of its own type (float64, int64), which then promotes like
        # one: a float32 sequence searched for 0.1 searches float32(0.1), as in PyTorch.
        dtype = "float64" if isinstance(v, float) else ("bool" if isinstance(v, bool) else "int64")
        return like.new_full((), v, dtype=dtype)
    raise TypeError(f"{op}: expected a tensor or a number, got {type(v).__name__}")


def searchsorted(
    sorted_sequence: Tensor,
    values: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """Indices at which ``values`` would be inserted into ``sorted_sequence`` to keep it sorted.

    Args:
        sorted_sequence: a tensor sorted along its last dimension; 1-d (shared by every value) or
            N-d (one sorted row per leading index; ``values`` then has the same leading dims).
        values: a tensor or a number (a 0-d result).
        out_int32: int32 results instead of int64.
        right: return the last suitable index (``seq[i-1] <= v < seq[i]``) instead of the first
            (``seq[i-1] < v <= seq[i]``).
        side: ``"left"`` or ``"right"``, the same choice spelled as NumPy does.
        sorter: int64 indices that sort ``sorted_sequence`` along its last dimension (when it is
            not sorted itself); results index the sorted order, as in PyTorch.

    Raises:
        ShapeError: N-d ``sorted_sequence`` whose leading dims differ from ``values``'.
        ValueError: contradicting ``right`` and ``side``.
        TypeError: an argument is neither a tensor nor a number.
    """
    op = "searchsorted"
    if not isinstance(sorted_sequence, TensorBase):
        raise TypeError(
            f"{op}: sorted_sequence must be a tensor, got {type(sorted_sequence).__name__}"
        )
    seq = sorted_sequence
    vals = _as_tensor(seq, values, op)
    take_right = _side(op, right, side)
    if sorter is not None:
        if not isinstance(sorter, TensorBase) or sorter.shape != seq.shape:
            got = list(sorter.shape) if isinstance(sorter, TensorBase) else type(sorter).__name__
            raise ValueError(
                f"{op}: sorter must be a tensor of the sequence's shape {list(seq.shape)}, got {got}"
            )
        seq = seq.gather(-1, sorter)
    dtype = S.promote_operands(seq.dtype, seq.ndim, vals.dtype, vals.ndim)
    seq, vals = seq.to(dtype), vals.to(dtype)
    attrs: dict = {"right": take_right}
    if out_int32:
        attrs["dtype"] = "int32"
    return seq._apply(op, [seq, vals], attrs, grad=False)


def bucketize(
    input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:  # noqa: A002 - PyTorch's name
    """The bucket of each element of ``input`` among the 1-d sorted ``boundaries``.

    With ``right=False`` the index ``i`` satisfies ``boundaries[i-1] < x <= boundaries[i]``; with
    ``right=True``, ``boundaries[i-1] <= x < boundaries[i]`` (the opposite of NumPy's
    ``digitize``). It is ``searchsorted(boundaries, input, right=right)``.

    Raises:
        ShapeError: ``boundaries`` is not 1-d.
    """
    if not isinstance(boundaries, TensorBase) or boundaries.ndim != 1:
        got = (
            list(boundaries.shape)
            if isinstance(boundaries, TensorBase)
            else type(boundaries).__name__
        )
        raise ShapeError(f"bucketize: boundaries must be a 1-d tensor, got {got}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
