"""Registry entries: matrix decompositions with several results (``qr``, ``eigh``, ``svd``).

A primitive has one result, so each decomposition packs its factors into one array and the client
slices them out again (:mod:`gt.linalg`); the derivative rule unpacks the packed gradient the same
way (a factor the program did not use gets zeros). Layouts, for a batch of ``m x n`` matrices and
``k = min(m, n)``:

* ``linalg_qr`` (reduced): ``(..., m*k + k*n)``: ``Q`` (m x k) then ``R`` (k x n), row-major.
* ``linalg_eigh``: ``(..., n, n + 1)``: column 0 the ascending eigenvalues, the rest ``V``.
* ``linalg_svd`` (reduced): ``(..., m*k + k + k*n)``: ``U``, ``S`` (descending), ``Vh``; with
  the attr ``full`` (``full_matrices=True``): ``(..., m*m + k + n*n)``, square ``U`` and ``Vh``.
* ``geqrf``: ``(..., m*n + k)``: LAPACK's compact Householder form (``R`` on and above the
  diagonal, the reflectors' vectors below it), row-major, then ``tau``. Not differentiable (as in
  PyTorch: backward raises ``NotImplementedError``).

Derivatives (real matrices, written with ordinary tensor ops so they differentiate again):

* QR, ``m >= n`` (``R`` invertible): with ``N = Q^T gQ - gR R^T`` and
  ``M = gR R^T + tril(N - N^T, -1)``, ``gA = (gQ + Q (M - Q^T gQ)) R^-T``. For ``m < n`` the
  derivative is not implemented (it raises in backward).
* eigh: ``gA = V (diag(gw) + F o skew(V^T gV)) V^T``, ``F_ij = 1 / (w_j - w_i)`` off the
  diagonal; only the antisymmetric part of ``V^T gV`` is seen by eigenvectors of unit length.
* SVD (Townsend 2016): ``gA = U [(F o (U^T gU - gU^T U)) S + diag(gS) + S (F o (V^T gV - gV^T V))]
  V^T + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T)``, ``F_ij = 1 / (s_j^2 - s_i^2)``.
  For the full factorization, PyTorch's: the rule of the reduced one on the first ``k`` columns
  of ``U`` and rows of ``Vh`` (the gradient of the completing columns is ignored).

Both spectral rules divide by gaps between eigen/singular values: repeated values (a degenerate
spectrum) give infinite or NaN gradients, as in PyTorch, unless the loss is invariant to the
choice of basis; zero singular values make the SVD rule's ``S^-1`` terms infinite whenever ``U``
or ``Vh`` carry gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import ShapeError
from gt.runtime.ops.base import Op, Shape, first_dtype
from gt.runtime.ops.elementwise import _where
from gt.runtime.ops.linalg import check_square


def _matrix(op: str, shape: Shape) -> tuple[int, int]:
    if len(shape) < 2:
        raise ShapeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    return shape[-2], shape[-1]


def _qr_complete(attrs: Any) -> bool:
    return type(attrs) is dict and attrs.get("mode") == "complete"


def _qr_shape(shapes: list, attrs: Any) -> Shape:
    m, n = _matrix("linalg.qr", shapes[0])
    k = m if _qr_complete(attrs) else min(m, n)
    return (*shapes[0][:-2], m * k + k * n)


def _geqrf_shape(shapes: list, attrs: Any) -> Shape:
    m, n = _matrix("geqrf", shapes[0])
    return (*shapes[0][:-2], m * n + min(m, n))


def _eigh_shape(shapes: list, attrs: Any) -> Shape:
    check_square("linalg.eigh", tuple(shapes[0]))
    n = shapes[0][-1]
    return (*shapes[0][:-2], n, n + 1)


def _svd_full(attrs: Any) -> bool:
    return type(attrs) is dict and bool(attrs.get("full"))


def _svd_shape(shapes: list, attrs: Any) -> Shape:
    m, n = _matrix("linalg.svd", shapes[0])
    k = min(m, n)
    if _svd_full(attrs):
        return (*shapes[0][:-2], m * m + k + n * n)
    return (*shapes[0][:-2], m * k + k + k * n)


def _parts(xp: Any, result: Any) -> tuple:
    """The arrays of a ``xp.linalg`` result tuple. (``asarray`` is a no-op on NumPy's and CuPy's
    arrays; it is here for the CuPy test double, which hands NumPy 2's named-tuple results back
    unwrapped.)"""
    return tuple(xp.asarray(t) for t in result)


def _flat(xp: Any, *parts: Any) -> Any:
    lead = parts[0].shape[:-2]
    return xp.concatenate([_rows(p, lead) for p in parts], axis=-1)


def _rows(p: Any, lead: tuple) -> Any:
    """``p`` with everything after the batch dims ``lead`` flattened (sizes spelled out: -1 is
    ambiguous in an empty batch)."""
    return p.reshape(*lead, math.prod(p.shape[len(lead) :]))


def _k_qr(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        mode = "complete" if _qr_complete(at) else "reduced"
        q, r = _parts(xp, xp.linalg.qr(v[0], mode=mode))
        return _flat(xp, q, r).astype(v[0].dtype, copy=False)

    return h


def _k_geqrf(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        a = v[0]
        *lead, m, n = a.shape
        k = min(m, n)
        count = int(np.prod(lead, dtype=np.int64))
        flat = a.reshape(count, m, n)
        out = xp.zeros((count, m * n + k), dtype=a.dtype)
        if k:  # (LAPACK's ?geqrf, through qr's "raw" mode: h is the transposed compact form)
            for b in range(flat.shape[0]):  # (one matrix a call: CuPy's raw QR takes no batches)
                hb, tau = _parts(xp, xp.linalg.qr(flat[b], mode="raw"))
                out[b, : m * n] = hb.T.reshape(-1)
                out[b, m * n :] = tau
        return out.reshape(*lead, m * n + k)

    return h


def _k_eigh(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        w, vec = _parts(
            xp, xp.linalg.eigh(v[0], UPLO="L")
        )  # PyTorch's default: the lower triangle is read
        return xp.concatenate([w[..., None], vec], axis=-1).astype(v[0].dtype, copy=False)

    return h


def _k_svd(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        a = v[0]
        u, s, vh = _parts(xp, xp.linalg.svd(a, full_matrices=_svd_full(at)))
        lead = a.shape[:-2]
        return xp.concatenate([_rows(u, lead), s, _rows(vh, lead)], axis=-1).astype(
            a.dtype, copy=False
        )

    return h


# ----------------------------------------------------------------------------- unpacking
def unpack_qr(out: Any, m: int, n: int, complete: bool = False) -> tuple[Any, Any]:
    """``(Q, R)`` from a packed ``linalg_qr`` result (or its gradient); ``complete``: Q is
    ``m x m`` and R ``m x n``."""
    k = m if complete else min(m, n)
    lead = tuple(out.shape[:-1])
    return out[..., : m * k].reshape(*lead, m, k), out[..., m * k :].reshape(*lead, k, n)


def unpack_geqrf(out: Any, m: int, n: int) -> tuple[Any, Any]:
    """``(a, tau)`` from a packed ``geqrf`` result."""
    lead = tuple(out.shape[:-1])
    return out[..., : m * n].reshape(*lead, m, n), out[..., m * n :]


def unpack_eigh(out: Any) -> tuple[Any, Any]:
    """``(eigenvalues, eigenvectors)`` from a packed ``linalg_eigh`` result (or its gradient)."""
    return out[..., 0], out[..., 1:]


def unpack_svd(out: Any, m: int, n: int, full: bool = False) -> tuple[Any, Any, Any]:
    """``(U, S, Vh)`` from a packed ``linalg_svd`` result (or its gradient); ``full``: of the
    full factorization (``U`` is ``m x m``, ``Vh`` ``n x n``)."""
    k = min(m, n)
    ku, kv = (m, n) if full else (k, k)
    lead = tuple(out.shape[:-1])
    u = out[..., : m * ku].reshape(*lead, m, ku)
    s = out[..., m * ku : m * ku + k]
    vh = out[..., m * ku + k :].reshape(*lead, kv, n)
    return u, s, vh


# ----------------------------------------------------------------------------- derivatives
def _eye_like(t: Any, n: int) -> Any:
    return t._create("eye", [], {"n": n, "m": n, "dtype": t.dtype})


def _gap_inverse(w: Any) -> Any:
    """``F_ij = 1 / (w_j - w_i)`` off the diagonal, 0 on it."""
    n = w.shape[-1]
    eye = _eye_like(w, n)
    gap = w.unsqueeze(-2) - w.unsqueeze(-1)
    return (1.0 - eye) / (gap + eye)


def _scaled(f: Any, k: Any) -> Any:
    """``f * k`` with 0 wherever ``k`` is 0, whatever ``f`` is there: ``f`` (inverse gaps or
    singular values) is inf at repeated or zero values, and ``k`` is 0 wherever the output's
    vectors got no gradient -- so a loss of the values alone (``eigvalsh``, ``svdvals``, a
    nuclear norm) has a finite gradient at a repeated value, as PyTorch's has.

    Where ``f`` is finite the product is a plain one, so it stays linear in ``k`` at ``k == 0``:
    forward mode (``jvp``, by double backward) differentiates it there, with respect to a zero
    cotangent, and a mask on ``k`` would give every tangent 0."""
    finite = f.isfinite()
    return _where(finite, f, 0.0) * k + _where(finite, 0.0, _where(k == 0, 0.0, f * k))


def _d_qr(n: Any, g: Any) -> tuple:
    a, out = n.saved
    m, cols = n.shapes[0][-2:]
    if _qr_complete(n.attrs) and m > cols:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    if m < cols:
        raise NotImplementedError(
            "the derivative of linalg.qr is implemented for matrices with at least as many rows "
            f"as columns (got {m} x {cols})"
        )
    q, r = unpack_qr(out, m, cols)
    gq, gr = unpack_qr(g, m, cols)
    # PyTorch's: gA = [gQ + Q syminvadj(triu(gR R^H - Q^H gQ))] R^-H, where syminvadj(X) is
    # X + X^H with the real part of its diagonal halved (``mH`` is ``mT`` for real matrices).
    x = (gr @ r.mH - q.mH @ gq).triu()
    y = x + x.mH
    y = y - 0.5 * y.diagonal(0, -2, -1).real.diag_embed().to(y.dtype)
    b = gq + q @ y
    # B R^-H: solve R Y^H = B^H with R upper triangular.
    return (r._apply("linalg_solve_triangular", [r, b.mH], {"upper": True}).mH,)


def _d_geqrf(n: Any, g: Any) -> tuple:
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


def _d_eigh(n: Any, g: Any) -> tuple:
    out = n.saved[0]
    w, v = unpack_eigh(out)
    gw, gv = unpack_eigh(g)
    s = v.mH @ gv  # (mH: mT for real matrices; the same rule for Hermitian ones, as PyTorch's)
    inner = _scaled(_gap_inverse(w), 0.5 * (s - s.mH))
    inner = inner + gw.unsqueeze(-1) * _eye_like(w, w.shape[-1])
    return (v @ inner @ v.mH,)


def _d_svd(n: Any, g: Any) -> tuple:
    out = n.saved[0]
    m, cols = n.shapes[0][-2:]
    full = _svd_full(n.attrs)
    u, s, vh = unpack_svd(out, m, cols, full)
    gu, gs, gvh = unpack_svd(g, m, cols, full)
    if full:  # (PyTorch's: the reduced rule on the leading k columns of U and rows of Vh)
        k = s.shape[-1]
        u, gu, vh, gvh = u[..., :k], gu[..., :k], vh[..., :k, :], gvh[..., :k, :]
    v, gv = vh.mH, gvh.mH  # (mH: mT for real matrices; one rule for both, as PyTorch's)
    if s.dtype in S.COMPLEX_DTYPES:  # (packed with U and Vh: the singular values are real)
        s, gs = s.real, gs.real
    k = s.shape[-1]
    eye_k = _eye_like(s, k)
    f = _gap_inverse(s * s)
    su, sv = s.unsqueeze(-2), s.unsqueeze(-1)  # (. S): scales columns; (S .): scales rows
    uhgu = u.mH @ gu
    core = _scaled(f, uhgu - uhgu.mH) * su + gs.unsqueeze(-1) * eye_k
    core = core + sv * _scaled(f, v.mH @ gv - gv.mH @ v)
    if uhgu.dtype in S.COMPLEX_DTYPES:  # the phases of U's columns: i Im(diag(U^H gU)) / S
        core = core + (uhgu.diagonal(0, -2, -1).imag / s).diag_embed() * 1j
    ga = u @ core @ vh
    inv_s = 1.0 / s
    if m > k:  # (I - U U^H) gU S^-1 V^H: zero when U is square
        ga = ga + _scaled(inv_s.unsqueeze(-2), gu - u @ uhgu) @ vh
    if cols > k:  # U S^-1 gV^H (I - V V^H): zero when V is square
        ga = ga + u @ _scaled(inv_s.unsqueeze(-1), gvh - (gvh @ v) @ vh)
    return (ga,)


def _input_and_output(inputs: tuple, out: Any) -> tuple:
    return (inputs[0], out._alias())


ENTRIES: list[Op] = [
    Op(
        "linalg_qr",
        97,
        shape=_qr_shape,
        dtype=first_dtype,
        kernel=_k_qr,
        grad=_d_qr,
        saves=_input_and_output,
        doc="reduced QR of each matrix, packed as Q then R (flat); derivative for m >= n",
    ),
    Op(
        "linalg_eigh",
        98,
        shape=_eigh_shape,
        dtype=first_dtype,
        kernel=_k_eigh,
        grad=_d_eigh,
        saves="output",
        doc="eigenvalues (column 0) and eigenvectors of each symmetric matrix (lower triangle)",
    ),
    Op(
        "linalg_svd",
        99,
        shape=_svd_shape,
        dtype=first_dtype,
        kernel=_k_svd,
        grad=_d_svd,
        saves="output",
        doc="SVD of each matrix, packed flat as U, S (descending), Vh; attr full: square U, Vh",
    ),
    Op(
        "geqrf",
        154,
        shape=_geqrf_shape,
        dtype=first_dtype,
        kernel=_k_geqrf,
        grad=_d_geqrf,
        doc="LAPACK's compact Householder QR of each matrix, packed flat as a then tau",
    ),
]
