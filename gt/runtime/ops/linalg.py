"""Registry entries: dense linear algebra on batches of square matrices (``gt.linalg``).

Every kernel is written once against ``xp.linalg`` (NumPy's and CuPy's share these names and
batch over leading dimensions): ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``. A
triangular solve has no ``xp`` spelling (SciPy and ``cupyx.scipy`` have one), so
``linalg_solve_triangular`` masks the triangle and calls ``xp.linalg.solve``: the same values,
at the cost of an LU factorization instead of a substitution.

Every derivative rule is written with ordinary tensor ops (``matmul``, ``mT``, ``tril`` and these
primitives themselves), so second derivatives work too:

* ``Y = inv(A)``: ``gA = -Y^T g Y^T``.
* ``X = solve(A, B)``: ``gB = solve(A^T, g)``, ``gA = -gB X^T``.
* ``d = det(A)``: ``gA = g d inv(A)^T`` (A must be invertible: PyTorch's SVD-based rule for
  singular ``A`` is not reproduced).
* ``(sign, logabsdet) = slogdet(A)``, packed as one ``(..., 2)`` result: ``gA = g_log inv(A)^T``;
  the sign is piecewise constant.
* ``L = cholesky(A)`` (Murray 2016): ``gA = sym(L^-T Phi(L^T g) L^-1)``, where ``Phi`` keeps the
  lower triangle and halves the diagonal, and ``sym(M) = (M + M^T) / 2``.
* ``X = solve_triangular(T, B)``: ``gB = solve_triangular(T^T, g)``, ``gA = tri(-gB X^T)``.

Errors: the shape rules raise PyTorch's messages for non-square or mismatched operands on the
client; a singular matrix (``inv``, ``solve``) fails on the worker with PyTorch's message, raised
as ``LinAlgError`` at the next sync point (CuPy gives non-finite values instead unless its debug
checks are on); with the attr ``ex`` (``inv_ex``, ``solve_ex``) each singular matrix's result is
NaN and the rest are computed (:mod:`gt.runtime.ops.linalg_info`). ``linalg_cholesky`` with the attr ``ex`` never fails: a matrix that is not
positive definite gets LAPACK's partial factor, from which the client reads ``info``
(``linalg.cholesky_ex``); ``cholesky`` and ``linalg.cholesky`` use it too and, as PyTorch's do,
sync to raise ``LinAlgError`` at the call (GP code catches it and retries with jitter).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt import shapes as S
from gt.errors import LinAlgError, ShapeError
from gt.runtime.ops import return_types
from gt.runtime.ops.base import Op, Shape, first_dtype, sum_to
from gt.runtime.ops.elementwise import _where
from gt.runtime.ops.linalg_info import checked

#: What ``slogdet`` returns (PyTorch's named tuple).
SlogdetResult = return_types.slogdet  # (gt.linalg.slogdet's: return_types.linalg_slogdet)


# ----------------------------------------------------------------------------- shape rules
def check_square(op: str, shape: Shape, name: str = "A") -> None:
    """Raise PyTorch's error unless ``shape`` is a batch of square matrices."""
    if len(shape) < 2:
        raise ShapeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if shape[-1] != shape[-2]:
        raise ShapeError(
            f"{op}: {name} must be batches of square matrices, but they are "
            f"{shape[-2]} by {shape[-1]} matrices"
        )


def broadcast_batch(op: str, a: Shape, b: Shape) -> Shape:
    """The broadcast of two batch shapes (PyTorch's rule), or PyTorch's error."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"{op}: the batch dimensions {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _square_shape(op: str) -> Any:
    def rule(shapes: list, attrs: Any) -> Shape:
        check_square(op, shapes[0])
        return tuple(shapes[0])

    return rule


def _det_shape(op: str) -> Any:
    def rule(shapes: list, attrs: Any) -> Shape:
        check_square(op, shapes[0])
        return tuple(shapes[0][:-2])

    return rule


def _slogdet_shape(shapes: list, attrs: Any) -> Shape:
    check_square("linalg.slogdet", shapes[0])
    return (*shapes[0][:-2], 2)


def _solve_shape(op: str) -> Any:
    """``(A (..., n, n), B (..., n, k)) -> (..., n, k)`` with batch dims broadcast."""

    def rule(shapes: list, attrs: Any) -> Shape:
        a, b = tuple(shapes[0]), tuple(shapes[1])
        check_square(op, a)
        if len(b) < 2:
            raise ShapeError(f"{op}: The input tensor B must have at least 2 dimensions.")
        if b[-2] != a[-1]:
            raise ShapeError(
                f"{op}: Incompatible shapes of A and B for the equation AX = B "
                f"({a[-2]}x{a[-1]} and {b[-2]}x{b[-1]})"
            )
        return (*broadcast_batch(op, a[:-2], b[:-2]), b[-2], b[-1])

    return rule


# ----------------------------------------------------------------------------- kernels
def _k_inv(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        a = v[0]

        def run(info: Any) -> Any:
            if info is None:
                return xp.linalg.inv(a)
            return _each_regular(xp, info, a, None, lambda m, _: xp.linalg.inv(m))

        return checked(xp, "linalg.inv", run, a, bool(at and at.get("ex")))

    return h


def _k_solve(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        a, b = v
        batch = broadcast_batch("linalg.solve", a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
        b = xp.broadcast_to(b, (*batch, *b.shape[-2:]))

        def run(info: Any) -> Any:
            if info is None:
                return xp.linalg.solve(a, b)
            return _each_regular(xp, info, a, b, xp.linalg.solve)

        return checked(xp, "linalg.solve", run, a, bool(at and at.get("ex")))

    return h


def _each_regular(xp: Any, info: Any, a: Any, b: Any, solve: Any) -> Any:
    """``solve(a, b)`` matrix by matrix where ``info`` is 0, NaN for the singular ones."""
    n = a.shape[-1]
    rhs = a if b is None else b
    out = xp.full(rhs.shape, xp.nan, dtype=xp.result_type(a, rhs))
    flat_a, flat_out, ok = a.reshape(-1, n, n), out.reshape(-1, *rhs.shape[-2:]), info.reshape(-1)
    flat_b = None if b is None else b.reshape(-1, *b.shape[-2:])
    for i in range(flat_a.shape[0]):
        if int(ok[i]) == 0:
            flat_out[i] = solve(flat_a[i], None if b is None else flat_b[i])
    return flat_out.reshape(rhs.shape)


def _k_det(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.asarray(xp.linalg.det(v[0])).astype(v[0].dtype, copy=False)


def _k_slogdet(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        sign, logabs = xp.linalg.slogdet(v[0])
        # (asarray: NumPy and CuPy may give 0-d results as scalars)
        return xp.stack([xp.asarray(sign), xp.asarray(logabs)], axis=-1).astype(v[0].dtype)

    return h


def _k_cholesky(be: Any) -> Any:
    xp = be.xp
    failed = getattr(xp.linalg, "LinAlgError", ArithmeticError)

    def h(v: list, at: Any) -> Any:
        if not (at and at.get("ex")):
            with be.linalg_checked():
                return xp.linalg.cholesky(v[0])
        # cholesky_ex: never fail; a matrix that is not positive definite keeps LAPACK's partial
        # factor, whose first non-positive (or NaN) diagonal entry marks the failing minor
        a = v[0]
        try:
            # (CuPy returns cuSOLVER's unspecified output for such a matrix unless told to check)
            with be.linalg_checked():
                el = xp.linalg.cholesky(a)
            if bool(xp.isfinite(el).all()):
                return el
        except failed:
            pass
        n = a.shape[-1]
        flat = a.reshape(-1, n, n)
        out = xp.empty_like(flat)
        for i in range(flat.shape[0]):
            out[i] = partial_cholesky(xp, flat[i])
        return out.reshape(a.shape)

    return h


def partial_cholesky(xp: Any, a: Any) -> Any:
    """LAPACK's unblocked ``potf2`` on the lower triangle of one matrix, column by column,
    stopping (as it does) at the first pivot that is not positive (or is NaN), which is left in
    place unsquared with the entries after it untouched: PyTorch's ``cholesky_ex`` factor of a
    matrix that is not positive definite."""
    w = xp.tril(a).copy()
    for j in range(a.shape[-1]):
        row = w[j, :j]
        pivot = w[j, j] - row @ row.conj()
        if not bool(pivot.real > 0):
            w[j, j] = pivot
            break
        pivot = xp.sqrt(pivot)
        w[j, j] = pivot
        w[j + 1 :, j] = (w[j + 1 :, j] - w[j + 1 :, :j] @ row.conj()) / pivot
    return w


def triangle(xp: Any, a: Any, upper: bool, unit: bool) -> Any:
    """The upper or lower triangle of ``a`` (with ones on the diagonal when ``unit``)."""
    t = xp.triu(a) if upper else xp.tril(a)
    if unit:
        n = a.shape[-1]
        t = t * (1 - xp.eye(n, dtype=a.dtype)) + xp.eye(n, dtype=a.dtype)
    return t


def _k_solve_triangular(be: Any) -> Any:
    xp = be.xp
    solve = _k_solve(be)
    singular = getattr(xp.linalg, "LinAlgError", ArithmeticError)

    def h(v: list, at: Any) -> Any:
        a, b = v
        upper = bool(at["upper"])
        t = triangle(xp, a, upper, bool(at.get("unitriangular")))
        try:
            return solve([t, b], None)
        except singular:  # PyTorch's substitution does not check: inf and NaN, as IEEE gives
            return _substitute(xp, t, b, upper)

    return h


def _substitute(xp: Any, t: Any, b: Any, upper: bool) -> Any:
    """``X`` with ``T X = B`` by back (``upper``) or forward substitution, row by row, in IEEE
    arithmetic: a zero pivot gives inf or NaN where PyTorch's triangular solve gives them."""
    batch = broadcast_batch("linalg.solve_triangular", t.shape[:-2], b.shape[:-2])
    t = xp.broadcast_to(t, (*batch, *t.shape[-2:]))
    x = xp.array(xp.broadcast_to(b, (*batch, *b.shape[-2:])), dtype=xp.result_type(t, b))
    n = t.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(n - 1, -1, -1) if upper else range(n):
            done = slice(i + 1, n) if upper else slice(0, i)  # the rows already solved
            known = (t[..., i, done, None] * x[..., done, :]).sum(-2)
            x[..., i, :] = (x[..., i, :] - known) / t[..., i, i, None]
    return x


# ----------------------------------------------------------------------------- user calls
def check_float_square(op: str, a: Any, complex_ok: bool = False) -> None:
    """PyTorch's errors unless ``a`` is a float32/float64 (or, with ``complex_ok``, complex)
    batch of square matrices."""
    if a.dtype not in ("float32", "float64") and not (complex_ok and a.dtype in S.COMPLEX_DTYPES):
        raise ShapeError(
            f"{op}: Expected a floating point tensor as input. Got {a.dtype} "
            "(GT's linear algebra runs in float32 and float64)"
        )
    check_square(op, tuple(a.shape))


def inverse_api(a: Any) -> Any:
    """The inverse of each square matrix (``torch.inverse``, ``Tensor.inverse``)."""
    check_float_square("linalg.inv", a, complex_ok=True)
    return _named(a._apply("linalg_inv", [a]), "LinalgInvExBackward0")


def det_api(a: Any) -> Any:
    """The determinant of each square matrix (``torch.det``, ``Tensor.det``)."""
    check_float_square("linalg.det", a, complex_ok=True)
    return a._apply("linalg_det", [a])


def slogdet_api(a: Any) -> Any:
    """``(sign, logabsdet)`` of each square matrix (``torch.slogdet``, ``Tensor.slogdet``)."""
    check_float_square("linalg.slogdet", a, complex_ok=True)
    both = a._apply("linalg_slogdet", [a])
    logabs = both[..., 1]
    logabs = logabs.real if logabs.dtype in S.COMPLEX_DTYPES else logabs
    name = "LinalgSlogdetBackward0"
    # (columns of the packed pair: PyTorch's sign and logabsdet are tensors of their own)
    return SlogdetResult(_named(both[..., 0].contiguous(), name), _named(logabs.contiguous(), name))


def cholesky_api(a: Any, upper: bool = False) -> Any:
    """The lower (``upper=True``: upper) Cholesky factor (``torch.cholesky``, ``Tensor.cholesky``).
    Only the lower triangle of ``a`` is read."""
    check_float_square("linalg.cholesky", a, complex_ok=True)
    el = checked_cholesky(a, "cholesky")
    return _named(el.mH if upper else el, "CholeskyBackward0")


def checked_cholesky(a: Any, name: str) -> Any:
    """The lower factor of each matrix, or :class:`~gt.errors.LinAlgError` with PyTorch's message
    at the call when one is not positive definite (``name``: ``"linalg.cholesky"``, ``"cholesky"``).
    Like PyTorch's (on GPUs too) the check syncs: code that catches the error and retries with
    jitter needs it at the call, not at a later sync point. The factor comes from the ``ex``
    kernel, whose first non-positive (or NaN) pivot marks the failing minor."""
    el = a._apply("linalg_cholesky", [a], {"ex": True})
    if a.numel() == 0:
        return el
    d = el.diagonal(dim1=-2, dim2=-1)
    bad = ~((d.real if d.dtype in S.COMPLEX_DTYPES else d) > 0)
    if not bool(bad.any().item()):
        return el
    failed = bad.any(-1).reshape(-1).tolist()
    order = (bad.int().argmax(-1) + 1).reshape(-1).tolist()
    k = failed.index(True)
    batch = f"(Batch element {k}): " if a.ndim > 2 else ""
    raise LinAlgError(
        f"{name}: {batch}The factorization could not be completed because the input is not "
        f"positive-definite (the leading minor of order {order[k]} is not positive-definite)."
    )


def _named(out: Any, name: str) -> Any:
    """``out`` with its node named as PyTorch names the node of the op that made it
    (``LinalgInvExBackward0``: PyTorch's ``inv`` is ``inv_ex``'s first result)."""
    node = out._node
    if node is not None:
        node.label = name
    return out


# ----------------------------------------------------------------------------- derivatives


def _d_inv(n: Any, g: Any) -> tuple:
    y = n.saved[0]
    yt = y.mT
    return (-(yt @ g @ yt),)


def _d_solve(n: Any, g: Any) -> tuple:
    a, _, x = n.saved
    gb = a._apply("linalg_solve", [a.mT, g])
    ga = -(gb @ x.mT) if n.needs(0) else None
    return (
        sum_to(ga, n.shapes[0]) if ga is not None else None,
        sum_to(gb, n.shapes[1]) if n.needs(1) else None,
    )


def _regular_inverse(a: Any, singular: Any) -> Any:
    """The inverse of each matrix of ``a``, the identity's where ``singular`` (a determinant of
    exactly 0: LAPACK's inverse would refuse it, and with it the whole batch)."""
    k = a.shape[-1]
    eye = a._create("eye", [], {"n": k, "m": k, "dtype": a.dtype})
    safe = _where(singular.unsqueeze(-1).unsqueeze(-1), eye, a)
    return safe._apply("linalg_inv", [safe])


def _d_det(n: Any, g: Any) -> tuple:
    a, d = n.saved
    # det * A^-T; 0 for a singular matrix, as PyTorch's (whose solve then has a zero right side)
    return ((g * d).unsqueeze(-1).unsqueeze(-1) * _regular_inverse(a, d == 0).mT,)


def _d_slogdet(n: Any, g: Any) -> tuple:
    a, both = n.saved
    c = g[..., 1]
    if c.dtype in S.COMPLEX_DTYPES:
        # PyTorch's: (g_logabsdet - i Im(conj(g_sign) sign)) A^-H (the sign moves with Im tr(A^-1 dA))
        c = c.real - (g[..., 0].conj() * both[..., 0]).imag * 1j
    singular = both[..., 0] == 0  # (sign 0: log|det| is -inf, its gradient undefined: NaN)
    ga = c.unsqueeze(-1).unsqueeze(-1) * _regular_inverse(a, singular).mH
    return (_where(singular.unsqueeze(-1).unsqueeze(-1), float("nan"), ga),)


def _trisolve(t: Any, b: Any, upper: bool) -> Any:
    return t._apply("linalg_solve_triangular", [t, b], {"upper": upper})


def _d_cholesky(n: Any, g: Any) -> tuple:
    el = n.saved[0]
    # PyTorch's: P = tril(L^H g), made Hermitian but for its diagonal (halved):
    # 0.5 (P + tril(P, -1)^H); then L^-H P L^-1, by two triangular solves (``mH`` is ``mT`` for
    # real matrices, where this is the symmetric gradient).
    p = (el.mH @ g).tril()
    p = 0.5 * (p + p.tril(-1).mH)
    m = _trisolve(el.mH, p, upper=True)
    return (_trisolve(el.mH, m.mH, upper=True).mH,)


def _d_solve_triangular(n: Any, g: Any) -> tuple:
    a, _, x = n.saved
    at = n.attrs
    upper, unit = bool(at["upper"]), bool(at.get("unitriangular"))
    gb = a._apply("linalg_solve_triangular", [a.mT, g], {"upper": not upper, "unitriangular": unit})
    ga = None
    if n.needs(0):
        full = -(gb @ x.mT)
        k = 1 if unit else 0  # a unit diagonal is not read from A
        ga = sum_to(full.triu(k) if upper else full.tril(-k), n.shapes[0])
    return ga, (sum_to(gb, n.shapes[1]) if n.needs(1) else None)


def _inputs_and_output(inputs: tuple, out: Any) -> tuple:
    return (*inputs, out._alias())


def _input_and_output(inputs: tuple, out: Any) -> tuple:
    return (inputs[0], out._alias())


ENTRIES: list[Op] = [
    Op(
        "linalg_inv",
        91,
        shape=_square_shape("linalg.inv"),
        dtype=first_dtype,
        kernel=_k_inv,
        grad=_d_inv,
        saves="output",
        methods=("inverse",),
        api=inverse_api,
        doc="inverse of each square matrix of a batch; derivative -Y^T g Y^T",
    ),
    Op(
        "linalg_solve",
        92,
        arity=2,
        shape=_solve_shape("linalg.solve"),
        dtype=first_dtype,
        kernel=_k_solve,
        grad=_d_solve,
        saves=_inputs_and_output,
        doc="X with A X = B for (..., n, n) A and (..., n, k) B, batch dims broadcast",
    ),
    Op(
        "linalg_det",
        93,
        shape=_det_shape("linalg.det"),
        dtype=first_dtype,
        kernel=_k_det,
        grad=_d_det,
        saves=_input_and_output,
        methods=("det",),
        api=det_api,
        doc="determinant of each square matrix; derivative g det inv(A)^T (A invertible)",
    ),
    Op(
        "linalg_slogdet",
        94,
        shape=_slogdet_shape,
        dtype=first_dtype,
        kernel=_k_slogdet,
        grad=_d_slogdet,
        saves=_input_and_output,
        methods=("slogdet",),
        api=slogdet_api,
        doc="(sign, log|det|) of each square matrix, packed along a last dimension of 2",
    ),
    Op(
        "linalg_cholesky",
        95,
        shape=_square_shape("linalg.cholesky"),
        dtype=first_dtype,
        kernel=_k_cholesky,
        grad=_d_cholesky,
        saves="output",
        methods=("cholesky",),
        api=cholesky_api,
        doc="lower Cholesky factor L (A = L L^T) of each positive-definite matrix",
    ),
    Op(
        "linalg_solve_triangular",
        96,
        arity=2,
        shape=_solve_shape("linalg.solve_triangular"),
        dtype=first_dtype,
        kernel=_k_solve_triangular,
        grad=_d_solve_triangular,
        saves=_inputs_and_output,
        doc="X with tri(A) X = B; attrs: upper, unitriangular (only A's triangle is read)",
    ),
]

__all__ = [
    "ENTRIES",
    "SlogdetResult",
    "broadcast_batch",
    "check_float_square",
    "check_square",
    "partial_cholesky",
    "triangle",
]
