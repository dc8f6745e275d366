"""Registry entry and kernel helpers: where a square matrix is singular, as LAPACK's LU says.

PyTorch's ``linalg.inv``, ``linalg.solve`` and their ``_ex`` forms factor with LAPACK's ``getrf``,
whose ``info`` is 0, or the 1-based column of the first exactly-zero pivot of the partially
pivoted LU. ``linalg_lu_info`` computes that number for each matrix of a batch, without failing:
one ``slogdet`` (an LU) tells the singular matrices (sign 0) from the rest, and only those are
factored again, column by column, to find the pivot. ``inv_ex``/``solve_ex`` return it as
``info``; the plain ``inv``/``solve`` kernels use it for PyTorch's messages, raised as
``LinAlgError`` at the next sync point (``except gt.linalg.LinAlgError`` around that sync
catches it). A matrix holding NaN is not singular to LAPACK (NaN is no zero pivot): info 0 and a
NaN inverse, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, Shape


def lu_info(xp: Any, a: Any) -> Any:
    """``info`` (int32, the batch's shape) of LAPACK's ``getrf`` for each matrix of ``a``."""
    batch, n = a.shape[:-2], a.shape[-1]
    info = xp.zeros(batch, dtype=xp.int32)
    if n == 0 or a.size == 0:
        return info
    sign, _ = xp.linalg.slogdet(a)
    singular = xp.asarray(sign == 0).reshape(-1)
    if not bool(singular.any()):
        return info
    flat, out = a.reshape(-1, n, n), info.reshape(-1)
    for i in [int(j) for j in xp.nonzero(singular)[0]]:
        out[i] = _first_zero_pivot(xp, flat[i])
    return out.reshape(batch)


def _first_zero_pivot(xp: Any, m: Any) -> int:
    """The 1-based column of the first zero pivot of ``m``'s partially pivoted LU (0: none)."""
    w = m.astype(xp.complex128 if m.dtype.kind == "c" else xp.float64)
    n = w.shape[0]
    for j in range(n):
        p = j + int(xp.argmax(xp.abs(w[j:, j])))
        if not bool(w[p, j] != 0):
            return j + 1
        if p != j:
            w[[j, p]] = w[[p, j]]
        w[j + 1 :, j:] -= xp.outer(w[j + 1 :, j] / w[j, j], w[j, j:])
    return 0


def singular_message(op: str, info: Any) -> str:
    """PyTorch's message for the first singular matrix of a batch (``info`` from :func:`lu_info`)."""
    flat = [int(v) for v in info.reshape(-1).tolist()]
    at = next(i for i, v in enumerate(flat) if v > 0)
    where = f"(Batch element {at}): " if info.ndim else ""
    if op.startswith("linalg.inv"):
        return (f"{op}: {where}The diagonal element {flat[at]} is zero, the inversion could "
                "not be completed because the input matrix is singular.")  # fmt: skip
    return f"torch.{op}: {where}The solver failed because the input matrix is singular."


def checked(xp: Any, op: str, run: Any, a: Any, fill_singular: bool) -> Any:
    """``run()``, the kernel of ``inv``/``solve`` on ``a`` (its matrices). Where NumPy refuses a
    singular matrix: with ``fill_singular`` (the ``_ex`` forms), each singular matrix's result is
    NaN and the rest are computed; else ``LinAlgError`` with PyTorch's message."""
    failed = getattr(xp.linalg, "LinAlgError", ArithmeticError)
    try:
        return run(None)
    except failed:
        info = lu_info(xp, a)
        if not fill_singular:
            raise failed(singular_message(op, info)) from None
        return run(info)


def _info_shape(shapes: list, attrs: Any) -> Shape:
    return tuple(shapes[0][:-2])


def _info_dtype(dtypes: list, attrs: Any) -> str:
    return "int32"


def _k_lu_info(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: lu_info(xp, v[0])


ENTRIES: list[Op] = [
    Op(
        "linalg_lu_info",
        164,
        shape=_info_shape,
        dtype=_info_dtype,
        kernel=_k_lu_info,
        doc="LAPACK getrf's info of each square matrix: 0, or the column of the first zero pivot",
    ),
]

__all__ = ["ENTRIES", "checked", "lu_info", "singular_message"]
