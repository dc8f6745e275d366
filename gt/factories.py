"""Tensor factories: ``gt.tensor``, ``gt.randn``, ``gt.zeros`` ...

Random numbers are made on the worker from a seed the client chooses, so ``gt.manual_seed`` makes a
program reproducible no matter which worker runs it. As in PyTorch, the factories that make a new
tensor from a shape or a range take ``out=`` (``torch.eye(n, out=grad.new(n, n))``: the result is
written into ``out``, whose dtype it takes), and the ``*_like`` forms keep the strides of a dense
input (``memory_format=torch.preserve_format``, the default) or take ``memory_format``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from gt import shapes as S
from gt.ops import functions as _functions
from gt.ops import random as _random_state
from gt.ops.functions import check_strided, input_keyword, write_out
from gt.ops.layout import cloned_layout, restride
from gt.ops.random import (
    BAD_PROBABILITY,
    check_probability,
    check_std,
    checked_values,
    next_seed,
    random_attrs,
)
from gt.range_ends import as_complex, complex_dtype
from gt.range_values import complex_linspace_values, linspace_values
from gt.session import get_connection
from gt.tensor import Tensor, create, host_array, upload


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimension in shape {list(out)}")
    return out


def _sized(shape: tuple, size: Any, name: str) -> tuple:
    """The positional ``*shape`` of a factory, or its ``size=`` keyword as PyTorch spells it
    (``torch.zeros(size=(n, 1))``)."""
    if size is None:
        return shape
    if shape:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    if not hasattr(size, "__len__"):
        raise TypeError(
            f"{name}(): argument 'size' must be tuple of ints, not {type(size).__name__}"
        )
    return (tuple(size),)


def _make(name: str, args: list, attrs: dict, requires_grad: bool = False) -> Tensor:
    t = create(get_connection(), name, args, attrs)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _into(out: Any, result: Tensor, name: str) -> Tensor:
    """``result``, or, given ``out=``, ``out`` holding it (with ``result``'s shape)."""
    return result if out is None else write_out(out, result, name)


def _dtype_of(dtype: Any, out: Any) -> Any:
    """The dtype a factory makes: the one asked for, else ``out``'s (as PyTorch's ``out=``)."""
    return out.dtype if dtype is None and isinstance(out, Tensor) else dtype


def _like(x: Tensor, made: Tensor, memory_format: Any) -> Tensor:
    """A ``*_like`` result with the strides PyTorch gives it: ``x``'s where they are dense (the
    default ``preserve_format``), or ``memory_format``'s."""
    return cloned_layout(x, made, memory_format)


def _float_dtype(dtype: Any, op: str) -> str:
    dt = S.canonical_dtype(dtype)
    if dt not in S.FLOAT_DTYPES:
        raise TypeError(f"{op}: expected a floating point dtype, got {dt}")
    return dt


def from_numpy(array: np.ndarray, requires_grad: bool = False) -> Tensor:
    """Upload a NumPy array (the array must not be changed until the next sync point)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects an ndarray, got {type(array).__name__}")
    if not array.dtype.isnative:  # (a big-endian array: its values, in this machine's order)
        array = array.astype(array.dtype.newbyteorder("="))
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).reshape(array.shape)  # (it makes 0-d arrays 1-d)
    t = upload(get_connection(), array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(
    data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
    pin_memory: bool = False,
) -> Tensor:  # fmt: skip
    """A tensor holding a copy of ``data`` (nested lists, a scalar, an ndarray or a tensor).

    Python floats become float32 and Python ints int64, as in PyTorch.
    """
    if isinstance(data, Tensor):
        out = data._alias()  # a copy: unlike detach(), changing it leaves ``data`` alone
        out = out.to(dtype) if dtype is not None else out
        return out.requires_grad_(True) if requires_grad else out
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        # Each tensor is a number of its dtype (one element, as PyTorch's item()), promoted with
        # the others as PyTorch does (an int32 tensor and a Python int: int64)
        if dtype is None:
            dtype = functools.reduce(S.promote, (_element_dtype(v) for v in _flat(data)))
        return tensor(_plain(data), dtype, requires_grad)
    return from_numpy(host_array(data, dtype), requires_grad=requires_grad)


def _element_dtype(v: Any) -> str:
    """The dtype an element of ``tensor([...])``'s data brings to the result's."""
    if isinstance(v, Tensor):
        return v.dtype
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return v.dtype.name if isinstance(v, np.integer) else "int64"
    if isinstance(v, (complex, np.complexfloating)):
        return S.complex_of(S.DEFAULT_FLOAT) if isinstance(v, complex) else v.dtype.name
    return v.dtype.name if isinstance(v, np.floating) else S.DEFAULT_FLOAT


_functions.number_tensor = tensor  # gt.div(16, 2): the first number becomes a tensor, as here


def _flat(data: Any) -> Any:
    for v in data:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _plain(v: Any) -> Any:
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def full(
    shape: Sequence[int] | None = None,
    fill_value: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    *,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """A tensor of ``shape`` (or ``size=``, PyTorch's name) filled with ``fill_value``."""
    check_strided(layout, "full")
    if isinstance(fill_value, Tensor):  # (a 0-d tensor is its number: its kind names the dtype)
        fill_value = fill_value.item()
    if size is not None:
        shape = _sized(() if shape is None else (shape,), size, "full")[0]
    if shape is None or fill_value is None:
        raise TypeError("full() missing required argument 'size' or 'fill_value'")
    if out is not None:
        return _into(out, full(shape, fill_value, _dtype_of(dtype, out)), "full")
    if dtype is None:
        dtype = (
            "bool"
            if isinstance(fill_value, bool)
            else ("int64" if isinstance(fill_value, (int, np.integer)) else S.DEFAULT_FLOAT)
        )
        if isinstance(fill_value, complex):
            dtype = "complex64"
    dtype = S.canonical_dtype(dtype)
    shape = _shape((shape,) if isinstance(shape, int) else tuple(shape))
    if dtype in S.COMPLEX_DTYPES:
        v = complex(fill_value)
        if v.imag:  # (no complex immediates on the wire: the two parts, joined)
            real = full(shape, v.real, dtype=S.REAL_OF[dtype])
            out = real._apply("complex", [real, full(shape, v.imag, dtype=S.REAL_OF[dtype])])
            return out.requires_grad_() if requires_grad else out
        fill_value = v.real
    value: Any = (
        bool(fill_value)
        if dtype == "bool"
        else (
            float(fill_value) if dtype in S.INEXACT_DTYPES else S.fill_int(int(fill_value), dtype)
        )
    )
    return _make("full", [value], {"shape": list(shape), "dtype": dtype}, requires_grad)


def zeros(
    *shape: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """A tensor of zeros."""
    shape = _sized(shape, size, "zeros")
    check_strided(layout, "zeros")
    made = full(_shape(shape), 0, S.canonical_dtype(_dtype_of(dtype, out)), requires_grad)
    return _into(out, made, "zeros")


def ones(
    *shape: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """A tensor of ones."""
    shape = _sized(shape, size, "ones")
    check_strided(layout, "ones")
    made = full(_shape(shape), 1, S.canonical_dtype(_dtype_of(dtype, out)), requires_grad)
    return _into(out, made, "ones")


def empty(
    *shape: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """An uninitialized tensor (GT fills it with zeros)."""
    shape = _sized(shape, size, "empty")
    check_strided(layout, "empty")
    made = zeros(*shape, dtype=_dtype_of(dtype, out), requires_grad=requires_grad)
    if memory_format is not None and out is None:
        restride(made, memory_format)  # (channels_last: PyTorch's strides)
    return _into(out, made, "empty")


def randn(
    *shape: Any,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """Standard normal samples (from ``generator``'s stream when given); complex dtypes draw
    both parts with variance 1/2 (the real part first), as PyTorch does."""
    shape = _sized(shape, size, "randn")
    check_strided(layout, "randn")
    if out is not None:
        return _into(out, randn(*shape, generator=generator, dtype=_dtype_of(dtype, out)), "randn")
    shp = _shape(shape)
    if S.canonical_dtype(dtype) in S.COMPLEX_DTYPES:
        return _complex_pair(
            randn, shp, generator, S.canonical_dtype(dtype), requires_grad, 0.5**0.5
        )
    dt = _float_dtype(dtype, "randn")
    return _make("randn", [], random_attrs(shp, dt, generator), requires_grad)


def _complex_pair(draw: Any, shape: tuple, generator: Any, dtype: str, requires_grad: bool,
                  scale: float) -> Tensor:  # fmt: skip
    real = S.REAL_OF[dtype]
    re = draw(*shape, generator=generator, dtype=real)
    im = draw(*shape, generator=generator, dtype=real)
    if scale != 1:
        re, im = re * scale, im * scale
    out = re._apply("complex", [re, im])
    return out.requires_grad_() if requires_grad else out


def rand(
    *shape: Any,
    generator: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    out: Any = None,
    size: Any = None,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1) (from ``generator``'s stream when given; each part of a complex
    dtype's)."""
    shape = _sized(shape, size, "rand")
    check_strided(layout, "rand")
    if out is not None:
        return _into(out, rand(*shape, generator=generator, dtype=_dtype_of(dtype, out)), "rand")
    shp = _shape(shape)
    if S.canonical_dtype(dtype) in S.COMPLEX_DTYPES:
        return _complex_pair(rand, shp, generator, S.canonical_dtype(dtype), requires_grad, 1.0)
    dt = _float_dtype(dtype, "rand")
    return _make("rand", [], random_attrs(shp, dt, generator), requires_grad)


def normal(
    mean: Any, std: Any = 1.0, size: Any = None, *, generator: Any = None, dtype: Any = None
) -> Tensor:
    """Normal samples: ``mean``/``std`` numbers with a ``size``, or tensors (broadcast). A
    negative ``std`` raises (a tensor's at the next sync point), as in PyTorch."""
    if isinstance(std, Tensor):
        std = checked_values(std, "nonnegative", "normal expects all elements of std >= 0.0")
    else:
        check_std(std)
    if size is None:
        shape = tuple(getattr(mean, "shape", ())) or tuple(getattr(std, "shape", ()))
        if hasattr(mean, "shape") and hasattr(std, "shape"):
            shape = S.broadcast(tuple(mean.shape), tuple(std.shape), "normal")
    else:
        shape = _shape(size if isinstance(size, (tuple, list)) else (size,))
    return randn(*shape, generator=generator, dtype=dtype) * std + mean


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:  # noqa: A002
    """1 with probability ``input`` (or ``p``), else 0, elementwise (``input``'s dtype); a
    probability outside [0, 1] raises (``input``'s at the next sync point), as in PyTorch."""
    if p is None:
        checked = checked_values(input, "probability", BAD_PROBABILITY)
        u = rand(
            *input.shape,
            generator=generator,
            dtype=input.dtype if input.is_floating_point() else None,
        )
        return (u < checked).to(input.dtype)
    check_probability("bernoulli_", p)
    u = rand(
        *input.shape, generator=generator, dtype=input.dtype if input.is_floating_point() else None
    )
    return (u < (input if p is None else p)).to(input.dtype)


def randint(
    low: int,
    high: int | None = None,
    size: Sequence[int] = (),
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    out: Any = None,
) -> Tensor:
    """Integers uniform in [low, high) (``randint(high, size)`` starts at 0)."""
    if isinstance(high, (tuple, list)):  # randint(high, size), PyTorch's other overload
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if high <= low:  # (PyTorch's RuntimeError)
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    shp, dt = _shape(tuple(size)), S.canonical_dtype(_dtype_of(dtype, out) or "int64")
    made = _make("randint", [], random_attrs(shp, dt, generator, low=int(low), high=int(high)))
    return _into(out, made, "randint")


def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    out: Any = None,
    **_: Any,
) -> Tensor:
    """A random permutation of ``0..n-1`` (drawn on the client from the GT seed)."""
    if int(n) < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {int(n)}: [{int(n)}]")
    rng = np.random.default_rng(next_seed() if generator is None else generator.next_seed())
    dt = S.canonical_dtype(_dtype_of(dtype, out) or "int64")
    return _into(out, from_numpy(rng.permutation(int(n)).astype(dt)), "randperm")


def arange(
    start: Any = None,
    end: Any = None,
    step: Any = 1,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    *,
    out: Any = None,
) -> Tensor:
    """Evenly spaced values in [start, end) (``arange(end=n)`` starts at 0; a bound may be a
    one-element tensor, read as its number: a sync point, as PyTorch's on a GPU)."""
    if out is not None:
        return _into(out, arange(start, end, step, dtype=_dtype_of(dtype, out)), "arange")
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    if end is None:
        raise TypeError("arange() missing required argument 'end' (pos 1)")
    if step == 0:
        raise RuntimeError("step must be nonzero")  # (PyTorch's message and type)
    if dtype is None:
        dtype = (
            "int64"
            if all(isinstance(v, (int, np.integer)) for v in (start, end, step))
            else S.DEFAULT_FLOAT
        )
    dtype = S.canonical_dtype(dtype)
    return _make("arange", [], {"start": start, "stop": end, "step": step, "dtype": dtype},
                 requires_grad)  # fmt: skip


def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    *,
    out: Any = None,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if out is not None:
        made = linspace(start, end, steps, dtype=_dtype_of(dtype, out))
        return _into(out, made, "linspace")
    if steps < 0:
        raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
    cdt = complex_dtype(start, end, dtype, "linspace")
    if cdt is not None:  # complex ends or dtype: each part as PyTorch's real kernel makes it
        values = complex_linspace_values(as_complex(start), as_complex(end), steps, cdt)
        return from_numpy(values, requires_grad)
    dt = S.canonical_dtype(dtype)
    if dt in S.INT_DTYPES:  # (PyTorch's values in floating point, truncated toward zero)
        values = linspace_values(float(start), float(end), steps, "float64")
        return from_numpy(np.trunc(values).astype(dt), requires_grad)
    dt = _float_dtype(dtype, "linspace")
    if dt in ("float32", "float64"):
        return from_numpy(linspace_values(float(start), float(end), steps, dt), requires_grad)
    t = arange(steps, dtype=dt)
    out = t * ((end - start) / (steps - 1)) + start if steps > 1 else t + start
    return out.requires_grad_(True) if requires_grad else out


def eye(
    n: int,
    m: int | None = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    *,
    out: Any = None,
) -> Tensor:
    """An identity matrix of ``n`` rows and ``m`` (default ``n``) columns."""
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ValueError(f"eye: n and m must be non-negative, got {n} and {m}")
    dt = S.canonical_dtype(_dtype_of(dtype, out))
    made = _make("eye", [], {"n": int(n), "m": int(m), "dtype": dt}, requires_grad)
    return _into(out, made, "eye")


@input_keyword
def zeros_like(
    x: Tensor,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``x``."""
    made = zeros(x.shape, dtype=dtype or x.dtype, requires_grad=requires_grad)
    return _like(x, made, memory_format)


@input_keyword
def ones_like(
    x: Tensor,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``x``."""
    made = ones(x.shape, dtype=dtype or x.dtype, requires_grad=requires_grad)
    return _like(x, made, memory_format)


@input_keyword
def empty_like(
    x: Tensor,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
) -> Tensor:
    """An uninitialized tensor like ``x`` (GT fills it with zeros)."""
    return zeros_like(x, dtype, requires_grad, memory_format=memory_format)


@input_keyword
def full_like(
    x: Tensor,
    fill_value: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
) -> Tensor:
    """``fill_value`` with the shape (and dtype, unless given) of ``x``."""
    made = full(x.shape, fill_value, dtype=dtype or x.dtype, requires_grad=requires_grad)
    return _like(x, made, memory_format)


@input_keyword
def randn_like(
    x: Tensor,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
    *,
    generator: Any = None,
) -> Tensor:
    """Normal samples with the shape of ``x`` (from ``generator``'s stream when given)."""
    made = randn(x.shape, generator=generator, dtype=dtype or x.dtype, requires_grad=requires_grad)
    return _like(x, made, memory_format)


@input_keyword
def rand_like(
    x: Tensor,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    memory_format: Any = None,
    *,
    generator: Any = None,
) -> Tensor:
    """Uniform samples with the shape of ``x`` (from ``generator``'s stream when given)."""
    made = rand(x.shape, generator=generator, dtype=dtype or x.dtype, requires_grad=requires_grad)
    return _like(x, made, memory_format)


@input_keyword
def randint_like(
    x: Tensor,
    low: int,
    high: int | None = None,
    dtype: Any = None,
    device: Any = None,
    memory_format: Any = None,
    *,
    generator: Any = None,
) -> Tensor:
    """Integers in [low, high) with the shape of ``x``, of ``x``'s dtype unless ``dtype`` is
    given (as PyTorch's: ``randint_like`` of a float tensor holds whole floats); from
    ``generator``'s stream when given."""
    made = randint(low, high, x.shape, generator=generator, dtype=dtype or x.dtype)
    return _like(x, made, memory_format)


def sync() -> None:
    """Wait until every op issued so far has run; raise the first worker error not yet seen."""
    get_connection().sync()


_random_state.make_tensor = tensor  # (what ``get_rng_state`` returns: a uint8 tensor)
