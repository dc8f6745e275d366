"""Registry entries: complex numbers (parts, conjugate, argument, the real-pair views) and the
discrete Fourier transforms (``gt.fft``).

Results are always fresh arrays, never views of an input: a worker may later write a result in
place, and a view would change the tensor it came from.

Derivatives follow PyTorch's convention for complex tensors: the gradient of a real loss ``L``
with respect to ``z = x + iy`` is ``dL/dx + i dL/dy``. For an op whose derivative rule is written as
for real numbers and that is holomorphic (or linear with real coefficients) -- ``mul``, ``exp``,
``matmul``, ``sum``, reshaping ... -- the engine runs the rule as ``conj(rule(conj(g)))``, which is
that convention; :data:`COMPLEX_GRAD` says which ops those are. The ops below have rules of their
own that take complex gradients as they are (``native``). Any other op recorded with a complex
input or output raises ``NotImplementedError`` at the user's line.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gt import shapes as S
from gt.runtime.ops.base import Op, Past, first_dtype, same_shape, sum_to
from gt.runtime.ops.elementwise import broadcast_rule, real_dtype

#: The most elements an FFT may make (its ``s`` pads): the workers' per-op bound.
_MAX_ELEMENTS = int(os.environ.get("GT_MAX_ELEMENTS", 1 << 32))

#: How each differentiable op treats complex tensors: ``"conj"`` -- the real rule, conjugated
#: around (holomorphic or real-linear ops); ``"native"`` -- the rule handles complex gradients.
COMPLEX_GRAD: dict[str, str] = {
    **dict.fromkeys(
        """add sub mul div pow neg exp log sqrt sin cos tanh sigmoid copy cast matmul sum reshape
        transpose expand getitem setitem concat where cumsum log1p expm1 prod cumprod cumprod_grad im2col col2im
        scatter_add linalg_inv linalg_solve linalg_det linalg_solve_triangular asin acos atan asinh
        acosh atanh logcumsumexp""".split(),
        "conj",
    ),
    **dict.fromkeys(
        """abs real imag conj angle view_as_real view_as_complex complex fft linalg_eig linalg_eigh
        linalg_cholesky linalg_qr linalg_svd linalg_slogdet""".split(),
        "native",
    ),
}


def complex_grad_mode(op: str) -> str:
    """``"conj"`` or ``"native"`` for ``op`` (see :data:`COMPLEX_GRAD`).

    Raises:
        NotImplementedError: ``op`` has no derivative for complex tensors in GT.
    """
    mode = COMPLEX_GRAD.get(op)
    if mode is None:
        raise NotImplementedError(
            f"the derivative of {op} for complex tensors is not implemented in GT"
        )
    return mode


# ----------------------------------------------------------------------------- the engine's helpers
def conj_if_complex(t: Any) -> Any:
    """``t``'s conjugate (a real tensor, ``None``, or a :class:`Past` of either, as it is): with
    the rule of a holomorphic op written for real numbers, ``conj(rule(conj(g)))`` is PyTorch's
    convention for complex ones."""
    if type(t) is Past:
        return Past(conj_if_complex(t.grad))
    return t.conj() if t is not None and t.dtype in S.COMPLEX_DTYPES else t


def real_where_real(dtypes: tuple, in_grads: tuple) -> tuple:
    """A real input's gradient is real: the real part of what the rule gave it."""
    out = []
    for dtype, pg in zip(dtypes, in_grads):
        if pg is not None and dtype not in S.COMPLEX_DTYPES:
            if type(pg) is Past and pg.grad.dtype in S.COMPLEX_DTYPES:
                pg = Past(pg.grad.real)
            elif type(pg) is not Past and pg.dtype in S.COMPLEX_DTYPES:
                pg = pg.real
        out.append(pg)
    return tuple(out)


# ----------------------------------------------------------------------------- dtype rules
def _complex_dtype(dtypes: list, attrs: Any) -> str:
    return S.complex_of(first_dtype(dtypes, attrs))


# ----------------------------------------------------------------------------- kernels
def _k_part(part: str) -> Any:
    def make(be: Any) -> Any:
        return lambda v, at: getattr(v[0], part).copy()

    return make


def _k_conj(be: Any) -> Any:
    conj = be.xp.conj
    return lambda v, at: conj(v[0])


def _k_angle(be: Any) -> Any:
    xp = be.xp

    def run(v: list, at: Any) -> Any:
        x = v[0]
        return xp.angle(x).astype(S.REAL_OF.get(x.dtype.name, x.dtype.name), copy=False)

    return run


def _join(xp: Any, re: Any, im: Any) -> Any:
    """A fresh complex array from its parts (broadcast together): the pairs, stacked, seen as
    complex numbers (no part setters: only what NumPy and CuPy both do alike)."""
    pairs = xp.stack(xp.broadcast_arrays(re, im), axis=-1)
    return pairs.view(S.complex_of(pairs.dtype.name)).reshape(pairs.shape[:-1])


def _k_view_as_real(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.stack([v[0].real, v[0].imag], axis=-1)


def _k_view_as_complex(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: _join(xp, v[0][..., 0], v[0][..., 1])


def _k_complex(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: _join(xp, v[0], v[1])


#: NumPy's FFTs slow down several-fold once a call holds more than a few hundred 1-d transforms
#: (measured with NumPy 2.4 on this project's CI machine: 1008 rows of 512, 3.5 ms in one call,
#: 0.77 ms in chunks of 128-256 rows); its workers transform in chunks of about this many.
_NUMPY_LINES_PER_CALL = 256


def _chunked(f: Any, x: Any, axes: tuple, **kw: Any) -> Any:
    """``f(x, axes=axes, **kw)`` in chunks along the outermost axis not transformed."""
    free = [a for a in range(x.ndim) if a not in axes]
    if not free:
        return f(x, axes=axes, **kw)
    ax = free[0]
    per_index = 1
    for a in free[1:]:
        per_index *= x.shape[a]
    step = max(1, _NUMPY_LINES_PER_CALL // max(per_index, 1))
    if step >= x.shape[ax]:
        return f(x, axes=axes, **kw)
    lead = (slice(None),) * ax
    first = f(x[(*lead, slice(0, step))], axes=axes, **kw)
    shape = list(first.shape)
    shape[ax] = x.shape[ax]
    out = np.empty(shape, first.dtype)
    out[(*lead, slice(0, step))] = first
    for i in range(step, x.shape[ax], step):
        out[(*lead, slice(i, i + step))] = f(x[(*lead, slice(i, i + step))], axes=axes, **kw)
    return out


def _k_fft(be: Any) -> Any:
    fft = be.xp.fft
    numpy = be.name == "numpy"

    def run(v: list, at: Any) -> Any:
        kind, s, axes = at["kind"], tuple(at["s"]), tuple(at["axes"])
        n = 1
        for i, d in enumerate(v[0].shape):
            n *= s[axes.index(i)] if i in axes else d
        if n > _MAX_ELEMENTS:
            raise MemoryError(
                f"fft to {n:,} elements is over the limit of {_MAX_ELEMENTS:,} elements per op "
                "(GT_MAX_ELEMENTS)"
            )
        if kind == "c2c":
            f = fft.ifftn if at["inverse"] else fft.fftn
        else:
            f = fft.rfftn if kind == "r2c" else fft.irfftn
        if numpy:
            out = _chunked(f, v[0], axes, s=s, norm=at["norm"])
        else:
            out = f(v[0], s=s, axes=axes, norm=at["norm"])
        out = out.astype(at["dtype"], copy=False)
        if kind == "r2c" or (kind == "c2c" and at.get("real")):  # (a real signal's spectrum)
            _real_self_conjugate_bins(out, axes, s)
        return out

    return run


def _real_self_conjugate_bins(out: Any, axes: tuple, s: tuple) -> None:
    """Zero, in place, the imaginary part of the bins of a real signal's spectrum that are their
    own conjugates (index 0 and ``n / 2`` on every transformed axis): they are real, and PyTorch
    (which transforms real input one-sided and fills in the rest by symmetry) gives them exactly
    so, where a complex transform leaves rounding noise whose sign ``angle`` would see."""
    combos: list[tuple] = [()]
    for n in s:
        combos = [(*c, k) for c in combos for k in ((0, n // 2) if n % 2 == 0 and n > 1 else (0,))]
    for combo in combos:
        idx: list = [slice(None)] * out.ndim
        for ax, k in zip(axes, combo):
            idx[ax] = k
        key = tuple(idx)
        out[key] = out[key].real  # (not through ``out.imag``: on some backends that is a copy)


def _fft_shape(shapes: list, attrs: Any) -> S.Shape:
    shape = list(shapes[0])
    axes, s = attrs["axes"], attrs["s"]
    for ax, n in zip(axes, s):
        shape[ax] = int(n)
    if attrs["kind"] == "r2c":
        shape[axes[-1]] = int(s[-1]) // 2 + 1
    return tuple(shape)


# ----------------------------------------------------------------------------- derivatives
def _as_complex(g: Any, dtype: str) -> Any:
    return g.to(dtype)


def _d_real(n: Any, g: Any) -> tuple:
    return (_as_complex(g, n.dtypes[0]),)


def _d_imag(n: Any, g: Any) -> tuple:
    return (_as_complex(g, n.dtypes[0]) * 1j,)


def _d_angle(n: Any, g: Any) -> tuple:
    (z,) = n.saved
    r2 = (z * z.conj()).real
    return (g * (z * 1j) / r2.masked_fill(r2 == 0, 1.0) * (r2 != 0),)


def _d_complex(n: Any, g: Any) -> tuple:
    gr = sum_to(g.real, n.shapes[0]) if n.needs(0) else None
    gi = sum_to(g.imag, n.shapes[1]) if n.needs(1) else None
    return gr, gi


_DUAL_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _resize(g: Any, shape: tuple, axes: list) -> Any:
    """``g`` cut or zero-padded along ``axes`` to ``shape`` (the adjoint of what the transform
    did to its input's lengths)."""
    for ax in axes:
        have, want = g.shape[ax], shape[ax]
        if have > want:
            g = g.narrow(ax, 0, want)
        elif have < want:
            pad = list(g.shape)
            pad[ax] = want - have
            g = g._apply("concat", [g, g.new_zeros(pad)], {"axis": ax})
    return g


def _fft(x: Any, kind: str, axes: list, s: list, norm: str, inverse: bool, dtype: str) -> Any:
    attrs = {"kind": kind, "axes": list(axes), "s": [int(d) for d in s], "norm": norm,
             "inverse": inverse, "dtype": dtype}  # fmt: skip
    return x._apply("fft", [x], attrs)


def _d_fft(n: Any, g: Any) -> tuple:
    at = n.attrs
    kind, axes, norm = at["kind"], at["axes"], _DUAL_NORM[at["norm"]]
    shape, dtype = n.shapes[0], n.dtypes[0]
    if kind == "c2c":
        s = [g.shape[a] for a in axes]
        gi = _fft(g, "c2c", axes, s, norm, not at["inverse"], g.dtype)
        return (_resize(gi, shape, axes),)
    if kind == "r2c":
        # The adjoint of the one-sided transform, Re(F^H [g; 0]), is a complex-to-real inverse
        # of g with its bins that stand for two halved (half the work of the full spectrum's).
        last, n_last = axes[-1], at["s"][-1]
        halve = g.shape[last] - 1 - (1 - n_last % 2)  # bins 1 .. (the Nyquist bin excluded)
        if halve > 0:
            w = [1.0] + [0.5] * halve + [1.0] * (g.shape[last] - 1 - halve)
            shape_w = [1] * g.ndim
            shape_w[last] = len(w)
            g = g * g.new_tensor(w, dtype=S.REAL_OF[g.dtype]).reshape(shape_w)
        gi = _fft(g, "c2r", axes, at["s"], norm, True, S.REAL_OF[g.dtype])
        return (_resize(gi, shape, axes),)
    # c2r: the real gradient's one-sided spectrum; the bins that stand for two count twice
    gi = _fft(g, "r2c", axes, [g.shape[a] for a in axes], norm, False, S.complex_of(g.dtype))
    last = axes[-1]
    double = g.shape[last] - gi.shape[last]
    if double > 0:
        w = [1.0] + [2.0] * double + [1.0] * (gi.shape[last] - 1 - double)
        shape_w = [1] * gi.ndim
        shape_w[last] = len(w)
        gi = gi * g.new_tensor(w).reshape(shape_w)
    return (_resize(gi, shape, axes).to(dtype),)


ENTRIES: list[Op] = [
    Op("real", 137, shape=same_shape, dtype=real_dtype, kernel=_k_part("real"), grad=_d_real,
       shard="elementwise", doc="the real part of a complex tensor"),
    Op("imag", 138, shape=same_shape, dtype=real_dtype, kernel=_k_part("imag"), grad=_d_imag,
       shard="elementwise", doc="the imaginary part of a complex tensor"),
    Op("conj", 139, shape=same_shape, dtype=first_dtype, kernel=_k_conj,
       grad=lambda n, g: (g.conj(),), shard="elementwise", doc="the complex conjugate"),
    Op("angle", 140, shape=same_shape, dtype=real_dtype, kernel=_k_angle, grad=_d_angle,
       saves="inputs", shard="elementwise", doc="the argument of a complex number"),
    Op("view_as_real", 141, shape=lambda sh, at: (*sh[0], 2), dtype=real_dtype,
       kernel=_k_view_as_real, grad=lambda n, g: (g._apply("view_as_complex", [g]),),
       doc="a complex tensor as (real, imaginary) pairs in a last dimension of 2"),
    Op("view_as_complex", 142, shape=lambda sh, at: tuple(sh[0][:-1]), dtype=_complex_dtype,
       kernel=_k_view_as_complex, grad=lambda n, g: (g._apply("view_as_real", [g]),),
       doc="(real, imaginary) pairs in a last dimension of 2 as a complex tensor"),
    Op("complex", 143, arity=2, shape=broadcast_rule("complex"), dtype=_complex_dtype,
       kernel=_k_complex, grad=_d_complex, shard="elementwise",
       doc="a complex tensor from its real and imaginary parts"),
    Op("fft", 144, shape=_fft_shape, dtype=first_dtype, kernel=_k_fft, grad=_d_fft,
       doc="discrete Fourier transforms (complex, real-to-complex, complex-to-real) over axes"),
]  # fmt: skip
