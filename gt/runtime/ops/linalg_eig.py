"""Registry entry: the eigendecomposition of general (non-symmetric) square matrices.

``linalg_eig`` packs its two complex results into one tensor ``(..., n, n + 1)``, as
``linalg_eigh`` does: column 0 holds the eigenvalues, the rest the eigenvectors (unit columns, as
LAPACK's ``geev`` returns them). It is computed on the host: NumPy's LAPACK on NumPy workers, and
on CuPy workers a copy to the host and back (CuPy 13 has no general eigensolver; PyTorch's CUDA
``eig`` also synchronises with the CPU).

Derivative (PyTorch's, for ``A = V diag(L) V^-1`` and distinct eigenvalues):
``gA = V^-H M V^H`` with ``M_ii = gL_i`` and, off the diagonal,
``M = (V^H gV - V^H V diag(Re diag(V^H gV))) / conj(L_j - L_i)``. A real input gets the real
part. (PyTorch also checks, at a sync point, that the loss does not depend on the eigenvectors'
phases; GT does not.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.runtime.ops.base import Op, Shape
from gt.runtime.ops.linalg import check_square


def _eig_shape(shapes: list, attrs: Any) -> Shape:
    a = tuple(shapes[0])
    check_square("linalg.eig", a)
    return (*a[:-1], a[-1] + 1)


def _eig_dtype(dtypes: list, attrs: Any) -> str:
    return S.complex_of(dtypes[0])


def _k_eig(be: Any) -> Any:
    def h(v: list, at: Any) -> Any:
        a = be.to_host(v[0])
        w, vec = np.linalg.eig(a)
        out = np.concatenate([w[..., None], vec], axis=-1).astype(S.complex_of(a.dtype.name))
        return be.from_host(np.ascontiguousarray(out))

    return h


def unpack_eig(out: Any) -> tuple[Any, Any]:
    """``(eigenvalues, eigenvectors)`` from a packed ``linalg_eig`` result (or its gradient)."""
    return out[..., 0], out[..., 1:]


def _mh(x: Any) -> Any:
    return x.conj().transpose(-2, -1)


def _d_eig(n: Any, g: Any) -> tuple:
    (packed,) = n.saved
    lam, v = unpack_eig(packed)
    g_lam, g_v = unpack_eig(g)
    vh = _mh(v)
    vhgv = vh @ g_v
    diag = vhgv.diagonal(0, -2, -1).real
    m = vhgv - vh @ (v * diag.unsqueeze(-2).to(v.dtype))
    lc = lam.conj()
    gap = lc.unsqueeze(-2) - lc.unsqueeze(-1)  # [i, j] = conj(L_j - L_i)
    eye = v._create("eye", [], {"n": v.shape[-1], "m": v.shape[-1], "dtype": v.dtype})
    m = m / (gap + eye)  # (1 on the diagonal, replaced by gL below)
    m = m * (1 - eye) + g_lam.diag_embed()
    ga = vh._apply("linalg_solve", [vh, m @ vh])
    return (ga,)


ENTRIES: list[Op] = [
    Op("linalg_eig", 145, shape=_eig_shape, dtype=_eig_dtype, kernel=_k_eig, grad=_d_eig,
       saves="output", doc="eigenvalues and eigenvectors of general square matrices, packed"),
]  # fmt: skip
