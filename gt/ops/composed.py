"""PyTorch's smaller math and array functions, composed from GT's primitives (a :class:`Tensor`
mixin, and the ``gt.<name>`` functions).

Elementwise: ``hypot``, ``copysign``, ``sgn``, ``nan_to_num``, ``deg2rad``/``rad2deg``,
``logaddexp2``, ``heaviside``, ``float_power``, ``ldexp``, ``isposinf``/``isneginf``, ``erfc``,
``sinc``. Along a dimension: ``diff``, ``trapezoid`` (``trapz``),
``cumulative_trapezoid``, ``nansum``/``nanmean``. Arrays: ``kron``, ``diag_embed``, ``inner``,
``rot90``, ``tile``, ``movedim``/``moveaxis``, ``block_diag``, ``atleast_1d/2d/3d``, ``cross``.
Statistics: ``cov``, ``corrcoef``, ``dist``, and the sync points ``bincount`` and ``histc`` (their
result's size, or ``histc``'s default range, comes from the data). Dtype helpers:
``promote_types``, ``result_type``, ``can_cast``. Each derivative is what composing gives, which is
PyTorch's away from the points where PyTorch picks a subgradient.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt._dtype import dtype as _as_dtype
from gt.autograd import is_grad_enabled
from gt.errors import ShapeError
from gt.grad_graph import label
from gt.ops import views
from gt.ops.arith import where
from gt.ops.base import TensorBase, as_float
from gt.ops.functions import method_function, numpy_names
from gt.ops.shaping import cat
from gt.ops.typeinfo import finfo
from gt.runtime import ops as O

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: The largest power of two ``ldexp`` applies: past it every float's product is 0 or inf.
_LDEXP_MAX = 3000.0


def _eye(like: Any, n: int, m: int) -> Any:
    return like._create("eye", [], {"n": n, "m": m, "dtype": like.dtype})


class ComposedOps:
    """Small math and array functions of :class:`gt.Tensor`, composed from primitives."""

    __slots__ = ()

    # ------------------------------------------------------------------ elementwise
    def hypot(self, other: Any) -> Tensor:
        """``sqrt(self^2 + other^2)``, elementwise, without overflow or underflow."""
        return self._binary(O.OPCODE["hypot"], other, "hypot", true_div=True)

    def copysign(self, other: Any) -> Tensor:
        """``|self|`` with the sign of ``other`` (``-0.0`` counts as negative); a float result,
        of both operands' dtype (``copysign(int64, float64)`` is float64)."""
        if isinstance(other, TensorBase):
            dtype = S.promote_operands(self.dtype, self.ndim, other.dtype, other.ndim)
            mag = self.to(dtype if dtype in S.FLOAT_DTYPES else S.DEFAULT_FLOAT).abs()
            out = where(other.signbit(), -mag, mag)
            if other.requires_grad and is_grad_enabled():
                # ``other`` in the graph with a zero gradient, as PyTorch's (``out + -0.0``
                # keeps every value, signed zeros included)
                out = out + (where(other.isfinite(), other, 0.0) * 0.0).abs().neg().to(out.dtype)
            return out
        mag = as_float(self).abs()
        return -mag if math.copysign(1.0, float(other)) < 0 else mag

    def sgn(self) -> Tensor:
        """``x / |x|`` (0 at 0) for complex tensors; :meth:`sign` for real ones."""
        if self.dtype not in S.COMPLEX_DTYPES:
            return label(self.sign(), "SgnBackward0")
        r = self.abs()
        zero = r == 0
        return (self / r.masked_fill(zero, 1.0)).masked_fill(zero, 0.0)

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> Tensor:  # fmt: skip
        """NaN, +inf and -inf replaced (by 0 and the dtype's largest and smallest numbers unless
        given); integer tensors come back as they are."""
        if self.dtype not in S.FLOAT_DTYPES:
            return self.clone()
        info = finfo(self.dtype)
        hi = info.max if posinf is None else posinf
        lo = info.min if neginf is None else neginf
        out = where(self != self, float(nan), self)
        out = where(out == math.inf, float(hi), where(out == -math.inf, float(lo), out))
        return label(out, "NanToNumBackward0")

    def deg2rad(self) -> Tensor:
        """Degrees to radians."""
        return label(as_float(self) * (math.pi / 180.0), "Deg2RadBackward0")

    def rad2deg(self) -> Tensor:
        """Radians to degrees."""
        return label(as_float(self) * (180.0 / math.pi), "Rad2DegBackward0")

    def logaddexp2(self, other: Any) -> Tensor:
        """``log2(2^self + 2^other)``, stable: in base 2 throughout, so that equal arguments give
        exactly one more (``logaddexp2(-1e4, -1e4)`` is -9999, as PyTorch's)."""
        x = as_float(self)
        o = as_float(other) if isinstance(other, TensorBase) else other
        m = x.maximum(o).detach()
        m = m.masked_fill(m.isinf(), 0.0)  # two -inf give -inf, an inf gives inf (not NaN)
        return label(m + ((x - m).exp2() + (o - m).exp2()).log2(), "Logaddexp2Backward0")

    def heaviside(self, values: Any) -> Tensor:
        """The step function: 0 below zero, 1 above, ``values`` at zero."""
        if isinstance(values, TensorBase) and values.dtype != self.dtype:
            raise TypeError("heaviside is not yet implemented for tensors with different dtypes")
        return where(self == 0, values, (self > 0).to(self.dtype))

    def float_power(self, exponent: Any) -> Tensor:
        """``self ** exponent`` in float64 (complex128 when either is complex)."""
        wide = "float64"
        if (self.dtype in S.COMPLEX_DTYPES or isinstance(exponent, complex)
                or (isinstance(exponent, TensorBase) and exponent.dtype in S.COMPLEX_DTYPES)):  # fmt: skip
            wide = "complex128"
        base = self.to(wide)
        if isinstance(exponent, TensorBase):
            exponent = exponent.to(wide)
        return base**exponent

    def ldexp(self, other: Any) -> Tensor:
        """``self * 2 ** other``, exact as C's ``ldexp``: computed in float64 with the power split
        in three, so that no factor overflows before the product does (``ldexp(0., 1024)`` is 0,
        ``ldexp(0.5, 1024)`` 2^1023) and the result is rounded once."""
        x = self if self.is_complex() else as_float(self)
        target = x.dtype  # (PyTorch's mul(self, pow(2., other)): a float ``other`` takes part)
        if isinstance(other, TensorBase) and (other.is_floating_point() or other.is_complex()):
            target = S.promote_operands(self.dtype, self.ndim, other.dtype, other.ndim)
        if x.is_complex() or target in S.COMPLEX_DTYPES:
            p = other.to("float64").exp2() if isinstance(other, TensorBase) else 2.0**other
            return label((x * p).to(target), "LdexpBackward0")
        e = other if isinstance(other, TensorBase) else x.new_full((), other, dtype="float64")
        e = e.to("float64").clamp(-_LDEXP_MAX, _LDEXP_MAX)  # (beyond: 0 or inf from any float)
        third = (e / 3).trunc()
        part = third.exp2()
        out = x.to("float64") * part * part * (e - 2 * third).exp2()
        return label(out.to(target), "LdexpBackward0")

    def isposinf(self) -> Tensor:
        """Where the value is +inf."""
        return self == math.inf

    def isneginf(self) -> Tensor:
        """Where the value is -inf."""
        return self == -math.inf

    def erfc(self) -> Tensor:
        """The complementary error function ``1 - erf(self)``, accurate in the upper tail: there
        it is ``erfcx(x) exp(-x^2)`` (``1 - erf`` loses every digit once erf rounds to 1, as in
        the Gaussian likelihoods of learned image codecs); ``1 - erf`` below 0. Each branch is
        computed on its own half, so both stay finite."""
        x = as_float(self)
        if x.dtype in ("float16", "bfloat16"):  # (in float32, rounded once, as PyTorch does)
            return x.float().erfc().to(x.dtype)
        upper = x >= 0
        pos = where(upper, x, 0.0)
        tail = pos._apply("erfcx", [pos]) * (-(pos * pos)).exp()
        return label(where(upper, tail, 1.0 - x.erf()), "ErfcBackward0")

    def sinc(self) -> Tensor:
        """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 (of complex numbers too)."""
        if self.dtype in ("float16", "bfloat16"):  # in float32, rounded once (sinc(1) is -0.0)
            return label(self.float().sinc().to(self.dtype), "SincBackward0")
        x = self if self.dtype in S.COMPLEX_DTYPES else as_float(self)
        one = x * 0 + 1
        nonzero = where(x == 0, one, x * math.pi)  # (no 0/0 in the branch not taken)
        return label(where(x == 0, one, nonzero.sin() / nonzero), "SincBackward0")

    # ------------------------------------------------------------------ along a dimension
    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Tensor:
        """The ``n``-th forward difference along ``dim`` (after ``prepend``/``append``)."""
        dim = S.normalize_axis(dim, self.ndim, "diff")
        x = self
        if prepend is not None or append is not None:
            x = cat([t for t in (prepend, x, append) if t is not None], dim)
        for _ in range(n):
            length = x.shape[dim]
            if length == 0:
                break
            hi, lo = x.narrow(dim, 1, length - 1), x.narrow(dim, 0, length - 1)
            x = hi != lo if x.dtype == "bool" else hi - lo
        return x.clone() if x is self else x  # (n=0: a copy, as PyTorch's, not the input)

    @numpy_names
    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """The sum with NaNs taken as 0."""
        x = self if self.dtype not in S.FLOAT_DTYPES else where(self != self, 0.0, self)
        x = x if dtype is None else x.to(dtype)
        out = x.sum() if dim is None and not keepdim else x.sum(dim, keepdim=keepdim)
        if dtype is not None and out.dtype != x.dtype:  # (in dtype=, as PyTorch's)
            out = out.to(x.dtype)
        return label(out, "NansumBackward0")

    @numpy_names
    def nanmean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """The mean of the values that are not NaN (NaN where all are)."""
        if self.dtype not in S.FLOAT_DTYPES:
            raise TypeError(f"nanmean(): expected a floating point tensor, not {self.dtype}")
        count = (self == self).to(self.dtype if dtype is None else dtype)
        count = count.sum() if dim is None and not keepdim else count.sum(dim, keepdim=keepdim)
        return self.nansum(dim, keepdim, dtype=dtype) / count

    # ------------------------------------------------------------------ arrays
    def kron(self, other: Tensor) -> Tensor:
        """The Kronecker product."""
        n = max(self.ndim, other.ndim)
        a = self.reshape((1,) * (n - self.ndim) + tuple(self.shape))
        b = other.reshape((1,) * (n - other.ndim) + tuple(other.shape))
        a_shape = [d for s in a.shape for d in (s, 1)]
        b_shape = [d for s in b.shape for d in (1, s)]
        out = a.reshape(a_shape) * b.reshape(b_shape)
        return label(
            out.reshape(tuple(x * y for x, y in zip(a.shape, b.shape))), "UnsafeViewBackward0"
        )

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
        """Matrices whose ``offset`` diagonal (in dims ``dim1``, ``dim2``) holds the last dim."""
        n = self.shape[-1]
        m = n + abs(offset)
        out = self.unsqueeze(-1) * _eye(self, n, n)
        if offset:
            # out[r, c] = x[i] where r = i + a, c = i + b: L^T diag(x) R with shifted identities
            a, b = max(-offset, 0), max(offset, 0)
            out = _eye(self, m, m)[a : a + n].mT @ out @ _eye(self, m, m)[b : b + n]
        d1 = S.normalize_axis(dim1, out.ndim, "diag_embed")
        d2 = S.normalize_axis(dim2, out.ndim, "diag_embed")
        if d1 == d2:
            raise ValueError("diag_embed: diagonal dimensions cannot be identical")
        out = views.as_new(out.movedim((out.ndim - 2, out.ndim - 1), (d1, d2)))
        return label(out, "DiagEmbedBackward0")  # (a tensor of its own, as PyTorch's: contiguous)

    def inner(self, other: Tensor) -> Tensor:
        """The sum of products over the last dims (a product with a 0-d tensor)."""
        if self.ndim == 0 or other.ndim == 0:
            return self * other
        k = self.shape[-1]
        out = self.reshape(-1, k) @ other.reshape(-1, other.shape[-1]).mT
        return label(out.reshape(tuple(self.shape[:-1]) + tuple(other.shape[:-1])), "ViewBackward0")

    def rot90(self, k: int = 1, dims: Any = (0, 1)) -> Tensor:
        """Rotate by 90 degrees ``k`` times, from the first of ``dims`` towards the second."""
        if len(dims) != 2:
            raise ValueError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
        d0, d1 = (S.normalize_axis(d, self.ndim, "rot90") for d in dims)
        if d0 == d1:
            raise ValueError(f"expected rotation dims to be different, but got {d0} and {d1}")
        k %= 4
        if k == 1:
            out = self.flip(d1).transpose(d0, d1)
        elif k == 2:
            out = self.flip(d0, d1)
        elif k == 3:
            out = self.flip(d0).transpose(d0, d1)
        else:
            out = views.as_new(self.clone())  # (PyTorch's: contiguous)
        return label(out, "Rot90Backward0")

    def tile(self, *dims: Any) -> Tensor:
        """Repeat the tensor ``dims[i]`` times along each dim (ones fill in the leading dims)."""
        reps = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        reps = (1,) * (self.ndim - len(reps)) + tuple(int(r) for r in reps)
        return self.repeat(*reps)

    def movedim(self, source: Any, destination: Any) -> Tensor:
        """Dims ``source`` moved to positions ``destination``; the others keep their order."""
        source, destination = S.as_index(source), S.as_index(destination)
        src = [source] if isinstance(source, int) else list(source)
        dst = [destination] if isinstance(destination, int) else list(destination)
        if len(src) != len(dst):
            raise ValueError("movedim: Invalid source or destination dims: source and "
                             "destination should have the same number of dims")  # fmt: skip
        src = [S.normalize_axis(d, self.ndim, "movedim") for d in src]
        dst = [S.normalize_axis(d, self.ndim, "movedim") for d in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ValueError("movedim: repeated dim in source or destination")
        rest = iter(d for d in range(self.ndim) if d not in src)
        where_to = dict(zip(dst, src))
        perm = [where_to[i] if i in where_to else next(rest) for i in range(self.ndim)]
        return self.permute(*perm) if perm != list(range(self.ndim)) else self

    moveaxis = movedim

    def cross(self, other: Tensor, dim: int | None = None) -> Tensor:
        """The 3-d cross product along ``dim`` (``None``: the first dim of size 3, as PyTorch)."""
        shape = S.broadcast(self.shape, other.shape, "cross")
        a, b = self.expand(shape), other.expand(shape)
        if dim is None:
            dim = next((i for i, d in enumerate(shape) if d == 3), -1)
        dim = S.normalize_axis(dim, len(shape), "cross")
        if shape[dim] != 3:
            raise ShapeError(
                f"linalg.cross: inputs dimension {dim} must have length 3, not {shape[dim]}"
            )
        x = [a.narrow(dim, i, 1) for i in range(3)]
        y = [b.narrow(dim, i, 1) for i in range(3)]
        parts = [x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]]
        return label(cat(parts, dim), "LinalgCrossBackward0")

    # ------------------------------------------------------------------ statistics
    def cov(self, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Tensor:
        """The covariance matrix of the variables in the rows (observations in the columns)."""
        if self.ndim > 2:
            raise ShapeError(
                f"cov(): expected input to have two or fewer dimensions, not {self.ndim}"
            )
        x = as_float(self if self.ndim == 2 else self.reshape(1, -1))
        w = None
        if fweights is not None:
            w = fweights.to(x.dtype)
        if aweights is not None:
            w = aweights.to(x.dtype) if w is None else w * aweights.to(x.dtype)
        if w is None:
            n = x.shape[1]
            xm = x - x.mean(1, keepdim=True)
            c = (xm @ xm.mT) / max(n - correction, 0)
        else:
            w_sum = w.sum()
            avg = (x * w).sum(1, keepdim=True) / w_sum
            if aweights is None:
                norm = w_sum - correction
            else:
                norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
            xm = x - avg
            c = ((xm * w) @ xm.mT) / norm.clamp(min=0.0)
        return label(c.reshape(()) if self.ndim < 2 else c, "SqueezeBackward0")

    def corrcoef(self) -> Tensor:
        """Pearson correlation coefficients of the rows (clipped to [-1, 1])."""
        c = self.cov()
        if c.ndim == 0:
            return c / c
        sd = c.diagonal().sqrt()
        return (c / sd.unsqueeze(1) / sd.unsqueeze(0)).clamp(-1.0, 1.0)

    def dist(self, other: Tensor, p: float = 2) -> Tensor:
        """The ``p``-norm of ``self - other``."""
        return label((self - other).norm(p), "DistBackward0")

    def bincount(self, weights: Any = None, minlength: int = 0) -> Tensor:
        """How often each value of a 1-d non-negative integer tensor occurs (weighted: the sum of
        its weights). A sync point: the result's length is ``max(self) + 1``."""
        if self.ndim != 1 or self.dtype in S.FLOAT_DTYPES or self.dtype == "bool":
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        if weights is not None and tuple(getattr(weights, "shape", ())) != self.shape:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        n = max(int(self.max().item()) + 1 if self.numel() else 0, int(minlength))
        if self.numel() and int(self.min().item()) < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        vals = self.new_ones(self.shape, dtype="int64") if weights is None else weights
        if weights is not None and vals.dtype not in ("float32", "float64"):
            vals = vals.to("float64")  # (PyTorch's sums of other weights: float64)
        out = self.new_zeros((n,), dtype=vals.dtype)
        return out.scatter_add(0, self.long(), vals) if self.numel() else out

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
        """A histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when both are
        0, a sync point); values outside are not counted."""
        if self.dtype not in S.FLOAT_DTYPES:
            raise TypeError(f"histc: expected a floating point tensor, not {self.dtype}")
        x = self.reshape(-1)
        lo, hi = float(min), float(max)
        if lo == hi and x.numel():
            lo, hi = float(x.min().item()), float(x.max().item())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if lo > hi:
            raise ValueError(f"histc: max must be larger than min (min {min}, max {max})")
        # (a NaN is counted nowhere: its bin index must still be a valid one, not INT64_MIN)
        idx = ((x - lo) * (bins / (hi - lo))).floor().clamp(0, bins - 1).nan_to_num(0.0).long()
        inside = ((x >= lo) & (x <= hi)).to(self.dtype)
        return self.new_zeros((bins,)).scatter_add(0, idx, inside)


# ----------------------------------------------------------------------------- gt.<name> functions
def _as_function(name: str) -> Any:
    return method_function(name, getattr(ComposedOps, name).__doc__)


_METHOD_FUNCTIONS = ("hypot", "copysign", "sgn", "nan_to_num", "deg2rad", "rad2deg",
                     "logaddexp2", "heaviside", "float_power", "ldexp", "isposinf", "isneginf",
                     "erfc", "sinc", "diff", "nansum", "nanmean", "kron", "diag_embed", "inner",
                     "rot90", "tile", "movedim", "moveaxis", "cross", "cov", "corrcoef", "dist",
                     "bincount", "histc")  # fmt: skip
globals().update({name: _as_function(name) for name in _METHOD_FUNCTIONS})


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: samples ``y`` at points ``x`` (1-d, or ``y``'s shape)
    or spaced ``dx`` apart (1 by default)."""
    dim = S.normalize_axis(dim, y.ndim, "trapezoid")
    n = y.shape[dim]
    if n == 0:
        return y.sum(dim)
    mid = y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)
    if x is None:
        return mid.sum(dim) * (0.5 * (1.0 if dx is None else dx))
    if dx is not None:
        raise TypeError("trapezoid: give x or dx, not both")
    steps = x.diff(dim=-1 if x.ndim == 1 else dim)
    if x.ndim == 1 and y.ndim > 1:
        steps = steps.reshape((-1,) + (1,) * (y.ndim - 1 - dim))
    return (mid * steps).sum(dim) * 0.5


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The older name of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one fewer element than ``y`` there)."""
    dim = S.normalize_axis(dim, y.ndim, "cumulative_trapezoid")
    n = y.shape[dim]
    mid = y.narrow(dim, 1, max(n - 1, 0)) + y.narrow(dim, 0, max(n - 1, 0))
    if x is None:
        return (mid * (0.5 * (1.0 if dx is None else dx))).cumsum(dim)
    steps = x.diff(dim=-1 if x.ndim == 1 else dim)
    if x.ndim == 1 and y.ndim > 1:
        steps = steps.reshape((-1,) + (1,) * (y.ndim - 1 - dim))
    return (mid * steps * 0.5).cumsum(dim)


def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the given 0-, 1- or 2-d tensors."""
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ValueError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                             f"Input {i} has {t.ndim} dimensions")  # fmt: skip
        mats.append(t.reshape(1, 1) if t.ndim == 0 else (t.reshape(1, -1) if t.ndim == 1 else t))
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = S.promote(dtype, m.dtype)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        cols = m.shape[1]
        parts = [m.new_zeros((m.shape[0], left), dtype=dtype), m.to(dtype),
                 m.new_zeros((m.shape[0], width - left - cols), dtype=dtype)]  # fmt: skip
        rows.append(cat(parts, 1))
        left += cols
    return cat(rows, 0)


def _atleast(ndim: int, tensors: tuple) -> Any:
    single = len(tensors) == 1 and not isinstance(tensors[0], (tuple, list))
    items = tensors[0] if len(tensors) == 1 and not single else tensors
    out = []
    for t in items:
        shape = tuple(t.shape)
        if len(shape) < ndim:
            if ndim == 3 and len(shape) == 2:
                shape = (*shape, 1)
            elif ndim == 3 and len(shape) == 1:
                shape = (1, *shape, 1)
            else:
                shape = (1,) * (ndim - len(shape)) + shape
        out.append(t.reshape(shape) if shape != tuple(t.shape) else t)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dim (0-d becomes shape ``(1,)``)."""
    return _atleast(1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two dims (a vector becomes one row)."""
    return _atleast(2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three dims (``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes
    ``(m, n, 1)``, as NumPy)."""
    return _atleast(3, tensors)


def promote_types(type1: Any, type2: Any) -> Any:
    """The dtype both promote to (PyTorch's promotion table)."""
    return _as_dtype(S.promote(S.canonical_dtype(type1), S.canonical_dtype(type2)))


def result_type(tensor1: Any, tensor2: Any) -> Any:
    """The dtype of an arithmetic result of the two operands (tensors or numbers)."""
    a, b = (t if isinstance(t, TensorBase) else None for t in (tensor1, tensor2))
    if a is not None and b is not None:
        return _as_dtype(S.promote_operands(a.dtype, a.ndim, b.dtype, b.ndim))
    if a is not None:
        return _as_dtype(S.promote_scalar(a.dtype, tensor2))
    if b is not None:
        return _as_dtype(S.promote_scalar(b.dtype, tensor1))
    return _as_dtype(S.promote_scalar(S.promote_scalar("bool", tensor1), tensor2))


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no complex to real, no float to
    integer, no number to bool)."""
    a, b = S.canonical_dtype(from_), S.canonical_dtype(to)
    return S.category(a) <= S.category(b)


__all__ = [
    *_METHOD_FUNCTIONS,
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "can_cast",
    "cumulative_trapezoid",
    "promote_types",
    "result_type",
    "trapezoid",
    "trapz",
]
