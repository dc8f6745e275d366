"""``gt.masked``: reductions and normalisations that skip masked-out elements (``torch.masked``).

Each function takes a dense tensor and a boolean ``mask=`` (broadcast to the input's shape; not
of more dimensions than it; another dtype is converted to bool), replaces the masked-out
elements by the identity of the operation (``0`` for ``sum``/``cumsum``/``norm``, ``1`` for
``prod``/``cumprod``, ``-inf`` or the integer minimum for ``amax``/``argmax``/``logsumexp``/
``softmax``/``log_softmax``, ``+inf`` or the maximum for ``amin``/``argmin``/``softmin``, ``nan``
for ``median``) and runs the ordinary op, as PyTorch's implementation does. So a fully masked
slice gets the identity (``sum`` 0, ``amax`` ``-inf``, ``logsumexp`` ``-inf``, ``norm`` 0), or
``nan`` where there is none (``mean``, ``median``, ``var``, ``std``, and every element of a
fully masked ``softmax``/``log_softmax``/``softmin`` slice); ``normalize`` gives 0 there. The
dtype rules are PyTorch's: ``sum``/``prod`` of bool and of integers narrower than int64 give
int64, ``argmax``/``argmin`` give the *input's* dtype (float indices for float inputs, as
PyTorch's prototype does), ``mean`` refuses an integer dtype, ``var``/``std`` of integers give
float32. Gradients flow through ``where``: masked-out elements get 0 (or ``nan`` from a fully
masked softmax slice, as in PyTorch). ``mask=None`` is the plain reduction. Only the strided
layout; the ``MaskedTensor`` class is not built.
"""

from __future__ import annotations

import math
from typing import Any

from gt._dtype import dtype as _dtype_cls
from gt._dtype import name_of
from gt.factories import full, ones
from gt.linalg import vector_norm
from gt.nn import functional as _nnf
from gt.ops import functional as _f
from gt.ops.mathops import where as _where_op
from gt.ops.typeinfo import iinfo

__all__ = [
    "amax",
    "amin",
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "is_masked_tensor",
    "log_softmax",
    "logaddexp",
    "logsumexp",
    "mean",
    "median",
    "norm",
    "normalize",
    "prod",
    "softmax",
    "softmin",
    "std",
    "sum",
    "var",
]

_NARROW_INTS = frozenset({"uint8", "bool", "int8", "int16", "int32"})


def _is_float(dt: Any) -> bool:
    return bool(dt.is_floating_point)


def _is_float_or_complex(dt: Any) -> bool:
    return bool(dt.is_floating_point or dt.is_complex)


def is_masked_tensor(obj: Any) -> bool:
    """False: GT has no ``MaskedTensor`` (PyTorch's prototype class)."""
    return False


def _reduction_identity(op_name: str, input: Any, *args: Any) -> Any:
    """The value a masked-out element takes for ``op_name`` (PyTorch's ``_reduction_identity``),
    or None where there is none."""
    dt = input.dtype
    if op_name in {"sum", "cumsum"}:
        return full((), 0, dtype=dt)
    if op_name in {"prod", "cumprod"}:
        return full((), 1, dtype=dt)
    if op_name in {"amax", "argmax", "logaddexp", "logsumexp"}:
        if _is_float_or_complex(dt) if op_name == "logsumexp" else _is_float(dt):
            return full((), -math.inf, dtype=dt)
        if dt.is_signed or dt == "uint8":
            return full((), iinfo(dt).min, dtype=dt)
    elif op_name in {"amin", "argmin"}:
        if _is_float(dt):
            return full((), math.inf, dtype=dt)
        if dt.is_signed or dt == "uint8":
            return full((), iinfo(dt).max, dtype=dt)
    elif op_name in {"mean", "var", "std"}:
        return None
    elif op_name == "norm":
        order = args[0] if args else 2
        if order == -math.inf:
            if not _is_float(dt):
                raise AssertionError(f"input must be floating point, got {dt}")
            return full((), math.inf, dtype=dt)
        return full((), 0, dtype=dt)
    elif op_name == "median":
        return full((), math.nan, dtype=dt if _is_float(dt) else "float32")
    raise NotImplementedError(f"identity of {op_name} on {dt} input")


def _canonical_dim(dim: Any, ndim: int) -> tuple[int, ...]:
    """``dim`` as a sorted tuple of non-negative dims (None or ``()``: all of them)."""
    if dim == ():
        dim = None
    if dim is None:
        return tuple(range(ndim))
    ndim = max(ndim, 1)
    dims: list[int] = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                f"but got {d})"
            )
        dims.append(d % ndim)
    return tuple(sorted(dims))


def _input_mask(input: Any, mask: Any) -> Any:
    """The mask broadcast to the input's shape, as bool."""
    if mask is None:
        raise ValueError("_input_mask requires explicit mask")
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError(
                "_input_mask expected broadcastable mask (got mask dimensionality higher than "
                "of the input)"
            )
        mask = _f.broadcast_to(mask, tuple(input.shape))
    return mask.to(dtype="bool")


def _combine(op_name: str, input: Any, mask: Any, *args: Any) -> Any:
    """The input with its masked-out elements replaced by the identity of ``op_name``."""
    if mask is None:
        return input
    return _where_op(_input_mask(input, mask), input, _reduction_identity(op_name, input, *args))


def _sum_dtype(input: Any, dtype: Any) -> Any:
    if dtype is not None:
        return dtype
    return _dtype_cls("int64") if name_of(input.dtype) in _NARROW_INTS else input.dtype


def sum(  # noqa: A001 - torch.masked.sum
    input: Any,
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The sum of the unmasked elements (0 for a fully masked slice)."""
    dtype = _sum_dtype(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    return _f.sum(_combine("sum", input, mask), dim_, bool(keepdim), dtype=dtype)


def prod(
    input: Any,
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The product of the unmasked elements (1 for a fully masked slice)."""
    dtype = _sum_dtype(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    result = _combine("prod", input, mask).to(dtype=dtype)
    for d in reversed(dim_):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Any:
    """The cumulative sum along ``dim``, masked-out elements counting as 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return _f.cumsum(_combine("sum", input, mask), d, dtype=dtype).to(dtype=dtype)


def cumprod(input: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Any:
    """The cumulative product along ``dim``, masked-out elements counting as 1."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return _f.cumprod(_combine("prod", input, mask), d, dtype=dtype).to(dtype=dtype)


def amax(
    input: Any,
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The largest unmasked element (``-inf``, or the integer minimum, for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("amax", input, mask)
    return _f.amax(x, _canonical_dim(dim, x.ndim), bool(keepdim)).to(dtype=dtype)


def amin(
    input: Any,
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The smallest unmasked element (``inf``, or the integer maximum, for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("amin", input, mask)
    return _f.amin(x, _canonical_dim(dim, x.ndim), bool(keepdim)).to(dtype=dtype)


def argmax(
    input: Any,
    dim: int | None = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The index of the largest unmasked element, in the input's dtype (as PyTorch's)."""
    dtype = input.dtype if dtype is None else dtype
    return _f.argmax(_combine("argmax", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def argmin(
    input: Any,
    dim: int | None = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The index of the smallest unmasked element, in the input's dtype (as PyTorch's)."""
    dtype = input.dtype if dtype is None else dtype
    return _f.argmin(_combine("argmin", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def mean(
    input: Any,
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The mean of the unmasked elements (``nan`` for a fully masked slice)."""
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    dt = _dtype_cls(name_of(dtype))
    if not _is_float_or_complex(dt):
        raise ValueError(
            f"mean(): Could not infer output dtype. {source} dtype must be either a floating "
            f"point or complex dtype. Got: {dt}"
        )
    if mask is None:
        count = sum(ones(tuple(input.shape), dtype="int64"), dim, keepdim=keepdim)
        total = sum(input, dim, keepdim=keepdim, dtype=dt)
    else:
        inmask = _input_mask(input, mask)
        count = inmask.sum(dim=dim, keepdim=bool(keepdim))
        total = sum(input, dim, keepdim=keepdim, dtype=dt, mask=inmask)
    return total / count


def median(
    input: Any, dim: int = -1, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Any:
    """The median of the unmasked elements along one dim (``nan`` for a fully masked slice;
    integer inputs must have none)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    is_float = _is_float(input.dtype)
    if not is_float:
        input = input.to(dtype="float32")
    out = _combine("median", input, mask).nanmedian(d, keepdim).values
    if is_float:
        return out
    if not bool(_f.isnan(out).any()):
        return out.to(dtype=dtype)
    raise ValueError(
        "masked median expects no fully masked out rows if dtype is not floating point"
    )


def logsumexp(
    input: Any, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Any:
    """log(sum(exp)) of the unmasked elements (``-inf`` for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)
    return _f.logsumexp(_combine("logsumexp", input, mask), dim_, keepdim=keepdim).to(dtype=dtype)


def logaddexp(
    input: Any,
    other: Any,
    *,
    dtype: Any = None,
    input_mask: Any = None,
    other_mask: Any = None,
) -> Any:
    """``logaddexp`` with each operand's masked-out elements taken as ``-inf``."""
    dtype = input.dtype if dtype is None else dtype
    a = _combine("logaddexp", input, input_mask)
    b = _combine("logaddexp", other, other_mask)
    return _f.logaddexp(a, b).to(dtype=dtype)


def norm(
    input: Any,
    ord: float | None = 2.0,  # noqa: A002 - PyTorch's name
    dim: Any = None,
    *,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The vector ``ord``-norm of the unmasked elements (0 for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("norm", input, mask, ord)
    return vector_norm(x, ord, _canonical_dim(dim, input.ndim), bool(keepdim), dtype=dtype)


def _std_var(
    input: Any,
    dim: Any,
    unbiased: bool | None,
    correction_opt: float | None,
    keepdim: bool | None,
    dtype: Any,
    mask: Any,
    take_sqrt: bool,
) -> Any:
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype
        if not _is_float_or_complex(dtype):
            dtype = "float32"
    dtype = _dtype_cls(name_of(dtype))
    compute = dtype if _is_float_or_complex(dtype) else _dtype_cls("float32")
    if mask is None:
        inmask = None
        count = sum(ones(tuple(input.shape), dtype="int64"), dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype)
    else:
        inmask = _input_mask(input, mask)
        count = inmask.sum(dim=dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    x = input - sample_total / count
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute, mask=inmask)
    if not keepdim:
        count = count.reshape(tuple(total.shape))
    if correction != 0:
        real = compute.to_real()
        count = count.to(dtype=real) - correction
        count = _f.maximum(count, full((), 0, dtype=real))
    out = (total / count).to(dtype=dtype)
    return _f.sqrt(out) if take_sqrt else out


def var(
    input: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    *,
    correction: float | None = None,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The variance of the unmasked elements (``nan`` for a fully masked slice)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=False)


def std(
    input: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    *,
    correction: int | None = None,
    keepdim: bool | None = False,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The standard deviation of the unmasked elements (``nan`` for a fully masked slice)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt=True)


def softmax(input: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Any:
    """Softmax over the unmasked elements (masked-out ones get 0; a fully masked slice nan)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return _nnf.softmax(_combine("amax", input, mask), d, dtype=dtype)


def log_softmax(input: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Any:
    """Log-softmax over the unmasked elements (masked-out ones get ``-inf``; fully masked: nan)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return _nnf.log_softmax(_combine("amax", input, mask), d, dtype=dtype)


def softmin(input: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Any:
    """Softmin over the unmasked elements (masked-out ones get 0; a fully masked slice nan)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return _nnf.softmin(_combine("amin", input, mask), d, dtype=dtype)


def normalize(
    input: Any,
    ord: float,  # noqa: A002 - PyTorch's name
    dim: int,
    *,
    eps: float = 1e-12,
    dtype: Any = None,
    mask: Any = None,
) -> Any:
    """The unmasked elements divided by their ``ord``-norm along ``dim`` (masked-out ones: 0)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return x / _f.maximum(nrm, full((), eps, dtype=nrm.dtype))
