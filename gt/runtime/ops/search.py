"""Registry entries: binary search in sorted sequences (``searchsorted``; ``bucketize`` is it too).

``searchsorted(seq, values)`` gives, for each value, the index where it would be inserted into the
sorted last dimension of ``seq`` to keep it sorted: the first position whose element is ``>=`` the
value (``attrs.right``: ``>``). A 1-d ``seq`` serves values of any shape (NumPy's and CuPy's
``searchsorted``); an N-d ``seq`` has one sorted row per leading index, and ``values`` the same
leading dimensions (a vectorised binary search: ``ceil(log2(n + 1))`` rounds of
``take_along_axis``, so no Python loop over rows). The client has already promoted both to one
dtype, applied any ``sorter`` and turned a number into a 0-d tensor. Not differentiable.

A sequence that ends in NaN (where a sort puts NaN) is searched as PyTorch searches it, with
comparisons that are false for NaN, on NumPy workers; CuPy workers keep ``cupy.searchsorted``,
which orders NaN after every number as NumPy does: asking whether the last element is NaN would
wait for the device, and the step-by-step search takes ``log2(n)`` rounds of kernels.
"""

from __future__ import annotations

from typing import Any

from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape


def searchsorted_shape(shapes: list, attrs: Any) -> Shape:
    """The values' shape; ``seq`` is at least 1-d and, if N-d, shares the values' leading dims."""
    seq, values = shapes[0], shapes[1]
    if len(seq) == 0:
        raise ShapeError("searchsorted: the sorted sequence must have at least one dimension")
    if len(seq) > 1 and tuple(seq[:-1]) != tuple(values[:-1]):
        raise ShapeError(
            "searchsorted: the sorted sequence and the values must have the same leading "
            f"dimensions when the sequence is N-d (shapes {list(seq)} and {list(values)})"
        )
    return tuple(values)


def searchsorted_dtype(dtypes: list, attrs: Any) -> str:
    """int64, or int32 with ``attrs.dtype == "int32"`` (PyTorch's ``out_int32``)."""
    if type(attrs) is dict and attrs.get("dtype") == "int32":
        return "int32"
    return "int64"


def _rows(xp: Any, seq: Any, val: Any, right: bool) -> Any:
    """Insertion points of ``val[..., j]`` in the sorted rows ``seq[..., :]`` (leading dims equal)."""
    n = seq.shape[-1]
    lo = xp.zeros(val.shape, dtype=xp.int64)
    if n == 0:
        return lo
    hi = xp.full(val.shape, n, dtype=xp.int64)
    for _ in range(n.bit_length()):  # enough halvings of [0, n] to close every interval
        mid = (lo + hi) // 2
        probe = xp.take_along_axis(seq, xp.minimum(mid, n - 1), axis=-1)
        # PyTorch's comparisons: step right past elements < value (<= value with right=True).
        step = ~(probe > val) if right else ~(probe >= val)
        step &= lo < hi
        lo = xp.where(step, mid + 1, lo)
        hi = xp.where(step, hi, mid)
    return lo


def _k_searchsorted(be: Any) -> Any:
    xp = be.xp
    ask = be.name != "cupy"  # (looking at an element of a CuPy array waits for the device)

    def h(v: list, at: Any) -> Any:
        seq, val = v
        right = bool(at and at.get("right"))
        dtype = searchsorted_dtype([], at)
        if seq.ndim == 1 and ask and seq.dtype.kind == "f" and seq.size and seq[-1] != seq[-1]:
            # NaN ends the sequence: NumPy treats it as the largest value, PyTorch's comparisons
            # as incomparable, which the binary search of _rows reproduces step by step.
            flat = _rows(xp, seq.reshape(1, -1), val.reshape(1, -1), right)
            return flat.reshape(val.shape).astype(dtype, copy=False)
        if seq.ndim == 1:
            # (CuPy's searchsorted is 1-d in the sequence; the values go flat and come back.)
            flat = xp.searchsorted(seq, val.reshape(-1), side="right" if right else "left")
            return flat.reshape(val.shape).astype(dtype, copy=False)
        return _rows(xp, seq, val, right).astype(dtype, copy=False)

    return h


ENTRIES: list[Op] = [
    Op(
        "searchsorted",
        90,
        arity=2,
        shape=searchsorted_shape,
        dtype=searchsorted_dtype,
        kernel=_k_searchsorted,
        doc="insertion indices of values in sorted seq rows; attrs: right, dtype (int64/int32)",
    ),
]
