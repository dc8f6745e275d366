"""Tensor factories: ``gt.tensor``, ``gt.randn``, ``gt.zeros`` ...

Random numbers are made on the worker from a seed the client chooses, so ``gt.manual_seed`` makes a
program reproducible no matter which worker runs it.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Sequence

import numpy as np

from gt import shapes as S
from gt.runtime import protocol as P
from gt.session import get_connection
from gt.tensor import Tensor

_OP = P.OPCODE
_seed_base = random.SystemRandom().getrandbits(40)
_seed_counter = itertools.count()


def manual_seed(seed: int) -> None:
    """Make the random factories reproducible from this point on."""
    global _seed_base, _seed_counter
    _seed_base = int(seed) & ((1 << 40) - 1)
    _seed_counter = itertools.count()


def _next_seed() -> int:
    return (_seed_base << 22) + next(_seed_counter)


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int(d) for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimension in shape {list(out)}")
    return out


def _make(opcode: int, args: list, shape: tuple[int, ...], dtype: str, attrs: Any) -> Tensor:
    conn = get_connection()
    t = Tensor(conn, conn.new_id(), shape, dtype)
    conn.emit(opcode, t.id, args, attrs)
    return t


def from_numpy(array: np.ndarray) -> Tensor:
    """Upload a NumPy array (the array must not be changed until the next sync point)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects an ndarray, got {type(array).__name__}")
    dtype = S.canonical_dtype(array.dtype)
    array = np.ascontiguousarray(array)
    conn = get_connection()
    t = Tensor(conn, conn.new_id(), tuple(array.shape), dtype)
    conn.upload(t.id, array)
    return t


def tensor(data: Any, dtype: Any = None) -> Tensor:
    """A tensor holding a copy of ``data`` (nested lists, a scalar, an ndarray or a tensor).

    Python floats become float32 and Python ints int64, as in PyTorch.
    """
    if isinstance(data, Tensor):
        return data.to(dtype) if dtype is not None else data
    arr = np.array(data)
    if dtype is not None:
        arr = arr.astype(S.canonical_dtype(dtype))
    elif arr.dtype == np.float64 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)
    elif arr.dtype.kind == "i" and arr.dtype != np.int32 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.int64)
    return from_numpy(arr.copy())


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value``."""
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else ("int64" if isinstance(fill_value, int) else S.DEFAULT_FLOAT)
    dtype = S.canonical_dtype(dtype)
    shape = _shape((shape,) if isinstance(shape, int) else tuple(shape))
    value: Any = bool(fill_value) if dtype == "bool" else (float(fill_value) if dtype in S.FLOAT_DTYPES else [int(fill_value)])
    return _make(_OP["full"], [value], shape, dtype, {"shape": list(shape), "dtype": dtype})


def zeros(*shape: Any, dtype: Any = None) -> Tensor:
    """A tensor of zeros."""
    return full(_shape(shape), 0, S.canonical_dtype(dtype))


def ones(*shape: Any, dtype: Any = None) -> Tensor:
    """A tensor of ones."""
    return full(_shape(shape), 1, S.canonical_dtype(dtype))


def randn(*shape: Any, dtype: Any = None) -> Tensor:
    """Standard normal samples."""
    shp, dt = _shape(shape), S.canonical_dtype(dtype)
    return _make(_OP["randn"], [], shp, dt, {"shape": list(shp), "dtype": dt, "seed": _next_seed()})


def rand(*shape: Any, dtype: Any = None) -> Tensor:
    """Uniform samples in [0, 1)."""
    shp, dt = _shape(shape), S.canonical_dtype(dtype)
    return _make(_OP["rand"], [], shp, dt, {"shape": list(shp), "dtype": dt, "seed": _next_seed()})


def randint(low: int, high: int | None = None, size: Sequence[int] = (), dtype: Any = "int64") -> Tensor:
    """Integers uniform in [low, high) (``randint(high, size=...)`` starts at 0)."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    shp, dt = _shape(tuple(size)), S.canonical_dtype(dtype)
    return _make(_OP["randint"], [], shp, dt, {"shape": list(shp), "dtype": dt, "low": int(low), "high": int(high), "seed": _next_seed()})


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None) -> Tensor:
    """Evenly spaced values in [start, end)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        dtype = "int64" if all(isinstance(v, int) for v in (start, end, step)) else S.DEFAULT_FLOAT
    dtype = S.canonical_dtype(dtype)
    n = max(0, int(np.ceil((end - start) / step)))
    return _make(_OP["arange"], [], (n,), dtype, {"start": start, "stop": end, "step": step, "dtype": dtype})


def eye(n: int, m: int | None = None, dtype: Any = None) -> Tensor:
    """An identity matrix of ``n`` rows and ``m`` (default ``n``) columns."""
    m = n if m is None else m
    dt = S.canonical_dtype(dtype)
    return _make(_OP["eye"], [], (int(n), int(m)), dt, {"n": int(n), "m": int(m), "dtype": dt})


def zeros_like(x: Tensor, dtype: Any = None) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``x``."""
    return zeros(x.shape, dtype=dtype or x.dtype)


def ones_like(x: Tensor, dtype: Any = None) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``x``."""
    return ones(x.shape, dtype=dtype or x.dtype)


def full_like(x: Tensor, fill_value: Any, dtype: Any = None) -> Tensor:
    """``fill_value`` with the shape (and dtype, unless given) of ``x``."""
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def randn_like(x: Tensor, dtype: Any = None) -> Tensor:
    """Normal samples with the shape of ``x``."""
    return randn(x.shape, dtype=dtype or x.dtype)


def rand_like(x: Tensor, dtype: Any = None) -> Tensor:
    """Uniform samples with the shape of ``x``."""
    return rand(x.shape, dtype=dtype or x.dtype)


def sync() -> None:
    """Wait until every op issued so far has run; raise the first worker error not yet seen."""
    get_connection().sync()
