"""Matrix products, reductions and normalizing functions (a :class:`Tensor` mixin).

``sum``, ``max``, ``min``, ``argmax``, ``argmin``, ``matmul`` and ``log_softmax`` are primitives
(``log_softmax`` because composing it costs seven instructions forward and ten backward, and it is
in every classifier's loss); ``mean``, ``var``, ``std``, ``softmax`` and ``logsumexp`` are composed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gt import shapes as S
from gt.autograd import is_grad_enabled
from gt.errors import DtypeError, ShapeError
from gt.grad_graph import label
from gt.ops.arith import where
from gt.ops.base import TensorBase
from gt.ops.conversion import numpy_operand_dtype
from gt.ops.functions import numpy_names
from gt.ops.ordering import evenly_distributed
from gt.runtime.ops import return_types
from gt.runtime.ops.base import real_float

#: Dtypes whose composite reductions (``var``, ``std``, ``softmax``) run in float32 and round once.
_HALF = frozenset(("float16", "bfloat16"))

if TYPE_CHECKING:
    from gt.tensor import Tensor

#: What ``x.max(dim)`` / ``x.min(dim)`` return, as in PyTorch (``gt.return_types.max``, ``.min``).
ValuesIndices = return_types.max


def _no_dims(dim: Any) -> bool:
    """Whether ``dim`` is an empty sequence (``dim=()``)."""
    return isinstance(dim, (tuple, list)) and len(dim) == 0


def _pick(axis: Any, dim: Any) -> Any:
    return dim if dim is not None else axis


def _keep(keepdims: bool, keepdim: bool | None) -> bool:
    return bool(keepdim) if keepdim is not None else bool(keepdims)


#: PyTorch's node of ``a @ b`` with a vector operand, by the operands' ranks (a view of the
#: folded product otherwise: ``UnsafeViewBackward0``).
def centered(x: Tensor, axes: tuple[int, ...] | None) -> Tensor:
    """``x`` less its mean over ``axes`` (all if ``None``), for variances and normalizations.
    The data are summed less their first element along ``axes``
    (not differentiated through: the gradient stays ``1/n`` for each element), so a constant row
    has exactly its value as mean and exactly 0 as deviations, as PyTorch's Welford kernels give
    (``var`` and ``std`` 0, so ``std[std == 0] = 1`` finds it; ``group_norm`` 0); a plain
    ``sum / n`` is an ulp off there. (PyTorch's ``batch_norm`` subtracts its plain mean, and its
    ``layer_norm`` rounds as neither: they keep ``sum / n``.)"""
    dims = tuple(range(x.ndim)) if axes is None else axes
    n = S.prod(x.shape[a] for a in dims)
    if n == 0 or x.ndim == 0:
        return x - x.mean(dims, keepdims=True)
    first = x[tuple(slice(0, 1) if i in dims else slice(None) for i in range(x.ndim))].detach()
    return x - (first + (x - first).sum(dims, keepdims=True) / n)


_MATMUL_NODE = {(1, 1): "DotBackward0", (1, 2): "SqueezeBackward4", (2, 1): "MvBackward0"}
#: PyTorch's node of ``x.norm()`` (and ``linalg.vector_norm``).
_NORM_NODE = "LinalgVectorNormBackward0"


class ReductionOps:
    """Reductions and linear algebra of :class:`gt.Tensor`."""

    __slots__ = ()

    # ------------------------------------------------------------------ matmul
    def __matmul__(self, other: Any) -> Tensor:
        if not isinstance(other, TensorBase):
            if isinstance(other, np.ndarray):  # (NumPy's promotion, as PyTorch's ``@``)
                want = numpy_operand_dtype(self.dtype, other, False) or self.dtype
                return self.to(want) @ self.new_tensor(other, dtype=want)
            return NotImplemented
        shape = S.matmul(self.shape, other.shape)
        if self.dtype != other.dtype:
            raise RuntimeError(
                f"matmul: expected both operands to have the same dtype, but got {self.dtype} and "
                f"{other.dtype} (shapes {list(self.shape)} and {list(other.shape)})"
            )
        if self.dtype == "bool":
            raise TypeError(
                f"matmul: not supported for bool tensors (shapes {list(self.shape)} and {list(other.shape)})"
            )
        a = self.reshape(1, self.shape[0]) if self.ndim == 1 else self
        b = other.reshape(other.shape[0], 1) if other.ndim == 1 else other
        full = S.matmul(a.shape, b.shape)
        out = a._apply("matmul", [a, b], None, shape=full)
        if full == shape:
            return out
        # PyTorch's dot, mv, or a view of what it folds into one mm (the 2-d by 2-d node's name
        # comes from the primitive's)
        rank = (self.ndim, other.ndim)
        return label(out.reshape(shape), _MATMUL_NODE.get(rank, "UnsafeViewBackward0"))

    def __rmatmul__(self, other: Any) -> Tensor:
        if isinstance(other, np.ndarray):
            return self.new_tensor(other) @ self
        return NotImplemented

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product with batch broadcasting (``self @ other``)."""
        return self @ other

    def mm(self, other: Tensor) -> Tensor:
        """Product of two matrices."""
        if self.ndim != 2 or other.ndim != 2:
            raise ShapeError(
                f"mm: both arguments must be matrices, got shapes {list(self.shape)} and {list(other.shape)}"
            )
        return self @ other

    def bmm(self, other: Tensor) -> Tensor:
        """Product of two batches of matrices (3-d tensors)."""
        if self.ndim != 3 or other.ndim != 3:
            raise ShapeError(
                f"bmm: both arguments must be 3-d, got shapes {list(self.shape)} and {list(other.shape)}"
            )
        return label(self @ other, "BmmBackward0")

    # ------------------------------------------------------------------ reductions
    def _reduce(
        self, name: str, axes: tuple[int, ...] | None, keepdims: bool, grad: bool = True
    ) -> Tensor:
        if not self.shape:
            axes = None  # a 0-d tensor accepts dim 0 / -1, as in PyTorch
        shape = S.reduce(self.shape, axes, keepdims)
        attrs = (
            None
            if axes is None and not keepdims
            else {"axis": list(axes) if axes is not None else None, "keepdims": keepdims}
        )
        return self._apply(name, [self], attrs, shape=shape, grad=grad)

    def sum(
        self,
        axis: Any = None,
        keepdims: bool = False,
        *,
        dim: Any = None,
        keepdim: bool | None = None,
        dtype: Any = None,
    ) -> Tensor:
        """Sum over ``axis`` (int, tuple or None for all); ``dim``/``keepdim`` are aliases."""
        x = self if dtype is None else self.to(dtype)
        axes = S.reduction_axes(_pick(axis, dim), x.ndim, "sum")
        keep = _keep(keepdims, keepdim)
        if dtype is not None and x.dtype in S.INT_DTYPES and x.dtype != "int64":
            # sum(dtype=torch.int16) stays int16 (and wraps), where a plain sum widens to int64
            shape = S.reduce(x.shape, axes if x.shape else None, keep)
            attrs = {"axis": list(axes) if axes is not None else None, "keepdims": keep,
                     "dtype": str.__str__(x.dtype)}  # fmt: skip
            return x._apply("sum", [x], attrs, shape=shape)
        out = x._reduce("sum", axes, keep)
        return out.to("bool") if x.dtype == "bool" and dtype is not None else out  # (dtype=bool)

    def mean(
        self,
        axis: Any = None,
        keepdims: bool = False,
        *,
        dim: Any = None,
        keepdim: bool | None = None,
        dtype: Any = None,
    ) -> Tensor:
        """Mean over ``axis``; integer and bool inputs need ``dtype=`` (as in PyTorch)."""
        x = self if dtype is None else self.to(dtype)
        if x.dtype not in S.INEXACT_DTYPES:
            raise DtypeError(
                "mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {x.dtype} (pass dtype= or call .float() first)"
            )
        axes = S.reduction_axes(_pick(axis, dim), x.ndim, "mean")
        n = x.numel() if axes is None else S.prod(x.shape[a] for a in axes)
        name = "MeanBackward0" if axes is None else "MeanBackward1"
        if x.dtype in ("float16", "bfloat16"):  # summed and divided in float32, rounded once
            wide = x.to(S.DEFAULT_FLOAT).sum(axes, _keep(keepdims, keepdim))
            return label((wide / n if n else wide * float("nan")).to(x.dtype), name)
        # divided, not multiplied by 1/n: PyTorch's CPU mean is its sum divided by n, and a
        # product with a rounded 1/n is off by an ulp where the division is exact (0.2 * 6 / 6)
        total = x.sum(axes, _keep(keepdims, keepdim))
        return label(total / n if n else total * float("nan"), name)

    def _check_empty_extreme(self, name: str, axes: tuple[int, ...] | None) -> None:
        """As PyTorch: max/min/argmax of an empty tensor raise when reducing everything
        (RuntimeError; IndexError for argmax/argmin) or along a dimension of size 0 (IndexError);
        along a non-empty dimension they give an empty result."""
        if self.numel() != 0:
            return
        if axes is None or not self.ndim:
            cls = IndexError if name.startswith("arg") else RuntimeError
            raise cls(
                f"{name}: cannot reduce an empty tensor of shape {list(self.shape)} "
                "(specify the reduction dim)"
            )
        for a in axes:
            if self.shape[a] == 0:
                raise IndexError(
                    f"{name}: expected reduction dim {a} to have non-zero size "
                    f"(shape {list(self.shape)})"
                )

    def _extreme(
        self,
        name: str,
        axis: Any,
        dim: Any,
        keepdims: bool,
        keepdim: bool | None,
        whole: bool = False,
    ) -> Any:
        if isinstance(dim, TensorBase):  # (max(other): only by position, see max())
            return self.maximum(dim) if name == "max" else self.minimum(dim)
        dim, axis = S.as_index(dim), S.as_index(axis)  # (NumPy ints, 0-d tensors: dims)
        d = _pick(axis, dim)
        axes = S.reduction_axes(d, self.ndim, name)
        keep = _keep(keepdims, keepdim)
        self._check_empty_extreme(name, axes)
        if dim is not None and isinstance(dim, int) and axis is None:
            arg = self.argmax(dim, True) if name == "max" else self.argmin(dim, True)
            if self._rg and is_grad_enabled():
                # PyTorch sends the gradient to the index it returns (the first of tied values),
                # not evenly to every tie as max() over all elements and amax() do.
                values = self.gather(axes[0], arg) if self.ndim else self
            else:
                values = self._reduce(name, axes, True)
            if not keep and self.ndim:
                values, arg = values.squeeze(axes[0]), arg.squeeze(axes[0])
            if values is not self:
                label(values, "MaxBackward0" if name == "max" else "MinBackward0")
            return return_types.TYPES[name](values, arg)
        if whole and axes is None and not keep and self._rg and is_grad_enabled():
            # max() / min() of every element: PyTorch splits the gradient evenly among the ties,
            # and among the NaNs when the result is NaN (amax() gives NaN gradients there)
            out = evenly_distributed(self, self._reduce(name, None, False, grad=False), name)
            return label(out, "MaxBackward1" if name == "max" else "MinBackward1")
        return self._reduce(name, axes, keep)  # (named amax / amin by the primitive's name)

    def max(
        self,
        *args: Any,
        dim: Any = None,
        keepdim: bool | None = None,
        axis: Any = None,
        keepdims: bool = False,
        other: Any = None,
    ) -> Any:
        """Largest value; ``max(dim)`` returns ``(values, indices)`` as in PyTorch.

        ``max()`` and ``max(axis=(...))`` (a tuple) return the values only, as NumPy does
        (``axis=`` an int is PyTorch's alias of ``dim``); ``max(other_tensor)`` (by position, or
        ``other=``) is :meth:`maximum`, and a tensor given as ``dim=`` is a dim. Ties share the
        gradient evenly.
        """
        return self._max_or_min("max", args, dim, keepdim, axis, keepdims, other)

    def min(
        self,
        *args: Any,
        dim: Any = None,
        keepdim: bool | None = None,
        axis: Any = None,
        keepdims: bool = False,
        other: Any = None,
    ) -> Any:
        """Smallest value; ``min(dim)`` returns ``(values, indices)`` as in PyTorch (see
        :meth:`max`)."""
        return self._max_or_min("min", args, dim, keepdim, axis, keepdims, other)

    def _max_or_min(
        self, name: str, args: tuple, dim: Any, keepdim: Any, axis: Any, keepdims: bool,
        other: Any,
    ) -> Any:  # fmt: skip
        if args:
            if (
                len(args) > 2
                or (dim is not None and args)
                or (keepdim is not None and len(args) > 1)
            ):
                raise TypeError(f"{name}() received an invalid combination of arguments")
            if isinstance(args[0], TensorBase):
                other = args[0]
            else:
                dim = args[0]
                if len(args) == 2:
                    keepdim = args[1]
        if other is not None:
            if dim is not None:
                raise TypeError(f"{name}() received an invalid combination of arguments")
            return self.maximum(other) if name == "max" else self.minimum(other)
        dim = S.as_index(dim)
        if dim is None and isinstance(axis, int) and not isinstance(axis, bool):
            dim, axis = axis, None  # PyTorch's axis= is its dim=: (values, indices)
        return self._extreme(name, axis, dim, keepdims, keepdim, whole=True)

    @numpy_names
    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Largest values over ``dim`` (int, tuple or None), values only."""
        return self._extreme("max", dim, None, keepdim, None)

    @numpy_names
    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Smallest values over ``dim`` (int, tuple or None), values only."""
        return self._extreme("min", dim, None, keepdim, None)

    def _arg(self, name: str, d: Any, keep: bool) -> Tensor:
        d = S.as_index(d)
        if d is not None and not isinstance(d, int):
            raise TypeError(f"{name}: dim must be an int or None, not {type(d).__name__}")
        if d is not None and self.ndim:
            self._check_empty_extreme(name, (S.normalize_axis(d, self.ndim, name),))
        else:
            self._check_empty_extreme(name, None)
        if d is None:
            shape = (1,) * self.ndim if keep else ()
            attrs = {"axis": None, "keepdims": keep}
        else:
            ax = S.normalize_axis(d, self.ndim, name)
            shape = S.reduce(self.shape, (ax,), keep) if self.ndim else ()
            attrs = {"axis": ax if self.ndim else None, "keepdims": keep}
        return self._apply(name, [self], attrs, shape=shape)

    def argmax(
        self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
        keepdims: bool = False,
    ) -> Tensor:  # fmt: skip
        """Index of the largest value (in the flattened tensor when ``dim`` is None)."""
        return self._arg("argmax", _pick(axis, dim), _keep(keepdims, keepdim))

    def argmin(
        self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
        keepdims: bool = False,
    ) -> Tensor:  # fmt: skip
        """Index of the smallest value (in the flattened tensor when ``dim`` is None)."""
        return self._arg("argmin", _pick(axis, dim), _keep(keepdims, keepdim))

    def var(
        self,
        dim: Any = None,
        unbiased: bool | None = None,
        keepdim: bool | None = None,
        *,
        correction: Any = None,
        axis: Any = None,
        keepdims: bool = False,
    ) -> Tensor:
        """Variance over ``dim``; ``correction=1`` (default, or ``unbiased=True``) divides by n-1.
        Of complex values: the mean squared modulus of the deviations (a real tensor). A bool
        first argument is ``unbiased`` (PyTorch's ``var(unbiased)``), not a dimension."""
        if isinstance(dim, bool):
            dim, unbiased = None, dim
        if isinstance(unbiased, int) and not isinstance(unbiased, bool) and dim is not None:
            raise TypeError("var: pass unbiased as a keyword (or use correction=)")
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        if self.dtype not in S.INEXACT_DTYPES:
            raise DtypeError(
                f"std and var only support floating point and complex dtypes, got {self.dtype}"
            )
        if self.dtype in _HALF:  # computed in float32 and rounded once, as PyTorch's kernel
            wide = self.float().var(dim, keepdim=keepdim, correction=correction, axis=axis,
                                    keepdims=keepdims)  # fmt: skip
            return label(wide.to(self.dtype), "VarBackward0")
        x = self
        axes = S.reduction_axes(_pick(axis, dim), x.ndim, "var")
        keep = _keep(keepdims, keepdim)
        n = x.numel() if axes is None else S.prod(x.shape[a] for a in axes)
        d = centered(x, axes)
        denom = n - correction
        sq = (d * d.conj()).real if d.dtype in S.COMPLEX_DTYPES else d * d
        total = sq.sum(axes, keep)
        out = total / max(0, denom)  # (as PyTorch: past n, a sum over 0 is inf, and 0/0 NaN)
        return label(out, "VarBackward0")

    def _sqrt_zero_grad(self) -> Tensor:
        """``sqrt`` whose gradient is 0 (not NaN) where the value is 0, as PyTorch's ``norm`` and
        ``std`` backward are: the square root is taken of 1 there and the result masked."""
        if not (self._rg and is_grad_enabled()):
            return self.sqrt()
        zero = self == 0  # (not ``self > 0``: a NaN variance, past its count, stays NaN)
        return where(zero, 1.0, self).sqrt() * (~zero).to(self.dtype)

    def std(
        self,
        dim: Any = None,
        unbiased: bool | None = None,
        keepdim: bool | None = None,
        *,
        correction: Any = None,
        axis: Any = None,
        keepdims: bool = False,
    ) -> Tensor:
        """Standard deviation over ``dim`` (see :meth:`var`)."""
        if isinstance(dim, bool):  # (``std(unbiased)``)
            dim, unbiased = None, dim
        if self.dtype in _HALF:  # (in float32, rounded once)
            wide = self.float().std(dim, unbiased, keepdim, correction=correction, axis=axis,
                                    keepdims=keepdims)  # fmt: skip
            return label(wide.to(self.dtype), "StdBackward0")
        out = self.var(dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
        return label(out._sqrt_zero_grad(), "StdBackward0")

    def norm(self, p: Any = 2, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """The ``p``-norm (2 by default) over ``dim`` (all elements when None; of the moduli of
        complex values; in ``dtype`` when given)."""
        if dtype is not None:
            return self.to(dtype).norm(p, dim, keepdim)
        if p == "nuc":  # (the matrix norm, over two dims: the last two of a matrix by default)
            from gt.linalg import matrix_norm  # noqa: PLC0415 - linalg builds on the tensor

            return matrix_norm(self, "nuc", (-2, -1) if dim is None else dim, keepdim)
        x = self.abs() if self.dtype in S.COMPLEX_DTYPES else self
        x = x if x.dtype in S.FLOAT_DTYPES else x.to(S.DEFAULT_FLOAT)
        if x.dtype in _HALF and p not in (float("inf"), float("-inf")):
            # PyTorch's kernel squares, sums and takes the root in float32 and rounds once (each
            # step in half precision was an ulp off in 10 % of bfloat16 norms)
            return label(x.float().norm(p, dim, keepdim).to(x.dtype), _NORM_NODE)
        if p is None or p == 2 or p == "fro":
            return label((x * x).sum(dim, keepdim)._sqrt_zero_grad(), _NORM_NODE)
        if p == 1:
            return label(x.abs().sum(dim, keepdim), _NORM_NODE)
        if p == float("inf"):
            return label(x.abs().amax(dim, keepdim), _NORM_NODE)
        if p == float("-inf"):
            return label(x.abs().amin(dim, keepdim), _NORM_NODE)
        if p == 0:  # (a count, in the graph with a zero gradient, as PyTorch's)
            count = (x != 0).to(x.dtype).sum(dim, keepdim)
            if not (x._rg and is_grad_enabled()):
                return count
            return count + (where(x.isfinite(), x, 0.0) * 0.0).sum(dim, keepdim)
        a = x.abs()
        if p < 1 and a._rg and is_grad_enabled():  # |x|^p's slope at 0 is inf: PyTorch's is 0
            nz = a != 0
            s = (where(nz, a, 1.0) ** p * nz.to(a.dtype)).sum(dim, keepdim)
        else:
            s = (a**p).sum(dim, keepdim)
        if not (s._rg and is_grad_enabled()):
            return s ** (1.0 / p)
        pos = s > 0  # a zero norm has a zero gradient, as in PyTorch
        return label((where(pos, s, 1.0) ** (1.0 / p)) * pos.to(s.dtype), _NORM_NODE)

    @numpy_names
    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Whether any element (over ``dim``) is nonzero (uint8 for a uint8 tensor, as in
        PyTorch; an empty ``dim`` reduces nothing, unlike ``sum``'s)."""
        out = (self != 0) if _no_dims(dim) else (self != 0).sum(dim, keepdim) > 0
        return out.to("uint8") if self.dtype == "uint8" else out

    @numpy_names
    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Whether every element (over ``dim``) is nonzero (uint8 for a uint8 tensor; an empty
        ``dim`` reduces nothing)."""
        out = (self != 0) if _no_dims(dim) else (self == 0).sum(dim, keepdim) == 0
        return out.to("uint8") if self.dtype == "uint8" else out

    # ------------------------------------------------------------------ normalizing functions
    @numpy_names
    def softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """``exp(x) / sum(exp(x))`` over ``dim``, computed without overflow (half tensors in
        float32, rounded once, as PyTorch's kernel; in ``dtype`` when given)."""
        if dtype is not None:
            return self.to(dtype).softmax(dim)
        if self.dtype in _HALF:
            return label(self.float().softmax(dim).to(self.dtype), "SoftmaxBackward0")
        x = real_float(self, "softmax")
        ax = S.normalize_axis(dim, len(x.shape), "softmax")
        if not x.shape or x.numel() == 0:  # one element (1, or NaN for a NaN), or nothing
            return label((x - x).exp() if x.shape else (x * 0.0).exp(), "SoftmaxBackward0")
        return label(x._apply("softmax", [x], {"axis": ax}, shape=x.shape), "SoftmaxBackward0")

    @numpy_names
    def log_softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """``log(softmax(x))`` over ``dim``: one primitive, stable (the max is subtracted first;
        in ``dtype`` when given)."""
        x = real_float(self if dtype is None else self.to(dtype), "log_softmax")
        ax = S.normalize_axis(dim, len(x.shape), "log_softmax")
        if not x.shape or x.numel() == 0:
            return x - x if x.shape else x * 0.0  # one element (log 1 = 0), or nothing to do
        return x._apply("log_softmax", [x], {"axis": ax}, shape=x.shape)

    @numpy_names
    def logsumexp(self, dim: Any = -1, keepdim: bool = False) -> Tensor:
        """``log(sum(exp(x)))`` over ``dim``, computed without overflow."""
        x = real_float(self, "logsumexp")
        axes = S.reduction_axes(dim, x.ndim, "logsumexp")
        if x.numel() == 0:  # no shift needed (and no max): the log of an empty sum is -inf
            m = x.new_zeros(S.reduce(x.shape, axes, True))
        else:
            m = x._reduce("max", axes, True, grad=False)  # a constant shift: no gradient through it
            # rows of -inf give -inf (and +inf gives inf), not NaN
            m = m.masked_fill(m.isinf(), 0.0)
        out = (x - m).exp().sum(axes, keepdims=True).log() + m
        out = out if keepdim else out.reshape(S.reduce(x.shape, axes, False))
        return label(out, "LogsumexpBackward0")
