"""``cupy_double``: a strict stand-in for CuPy, with NumPy underneath (a test tool, not a GPU).

GT's worker imports it instead of ``cupy`` when ``GT_CUPY_DOUBLE=1`` (see
``gt/runtime/worker/backend.py``), so the test suite runs the CuPy code paths on machines without
a GPU: host<->device copies must be explicit, host arrays must not leak into device work,
out-of-range index arrays wrap around instead of raising, and asynchronous copies on streams are
deferred until synchronized (see :mod:`._array` and :mod:`._streams` for the exact rules).

It proves nothing about GPUs: no kernel is compiled, timings are host times, numerics are
NumPy's. What it catches are the places where GPU code would call NumPy on device data.

Knobs (environment, read when used): ``CUPY_DOUBLE_DEVICES`` (default 1; 0 makes
``getDeviceCount`` raise CUDA's "no device" error, as real CuPy does) and
``CUPY_DOUBLE_BROKEN=1`` (every kernel raises, like CuPy without its CUDA libraries).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _streams, cuda
from ._array import ndarray, refuse_host, unwrap, wrap, wrap_key
from ._cupyx import make_cupyx

__version__ = "14.0.0+double"
IS_TEST_DOUBLE = True

#: NumPy names CuPy does not have (so code that relies on them fails here as on a GPU).
_MISSING = frozenset({"errstate", "seterr", "geterr", "seterrcall", "geterrcall", "frompyfunc",
                      "set_printoptions", "get_printoptions", "printoptions", "isnat",
                      "busday_count", "datetime_as_string", "ascontiguousarray_host"})  # fmt: skip


def _check_kernel() -> None:
    if os.environ.get("CUPY_DOUBLE_BROKEN", "") not in ("", "0"):
        raise cuda.runtime.CUDARuntimeError(
            35, "cudaErrorInsufficientDriver: CUDA driver version is insufficient (double)"
        )


# ----------------------------------------------------------------------------- ufuncs
class ufunc:  # noqa: N801 - CuPy's name
    """A NumPy ufunc that runs on device arrays only (``add``, ``add.at`` ...)."""

    def __init__(self, f: np.ufunc):
        self._f = f
        self.__name__ = f.__name__
        self.nin, self.nout = f.nin, f.nout

    def _run(self, call: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        _check_kernel()
        _streams.sync_current()
        out = kwargs.get("out")
        if out is not None:
            if type(out) is tuple:
                out = out[0]
            if type(out) is not ndarray:
                refuse_host(out)
            kwargs["out"] = out._a
        r = call(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items() if k != "out"},
                 **({"out": kwargs["out"]} if out is not None else {}))  # fmt: skip
        return out if out is not None else wrap(r)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f, args, kwargs)

    def reduce(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.reduce, args, kwargs)

    def accumulate(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.accumulate, args, kwargs)

    def outer(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.outer, args, kwargs)

    def reduceat(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(self._f.reduceat, args, kwargs)

    def at(self, a: Any, indices: Any, b: Any = None) -> None:
        """Unbuffered in-place ``a[indices] op= b``; out-of-range indices wrap, as in CuPy."""
        _check_kernel()
        _streams.sync_current()
        if type(a) is not ndarray:
            refuse_host(a)
        key = wrap_key(indices, a.shape)
        if b is None:
            self._f.at(a._a, key)
        else:
            self._f.at(a._a, key, unwrap(b))

    def __repr__(self) -> str:
        return f"<ufunc '{self.__name__}' (double)>"


_UFUNCS: dict[Any, ufunc] = {}
_FUNCS: dict[Any, Callable[..., Any]] = {}


def ufunc_of(f: np.ufunc) -> ufunc | None:
    """The double's version of NumPy ufunc ``f``."""
    u = _UFUNCS.get(f)
    if u is None:
        u = _UFUNCS[f] = ufunc(f)
    return u


def _device_function(f: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        _check_kernel()
        _streams.sync_current()
        return wrap(f(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()}))

    run.__name__ = getattr(f, "__name__", "function")
    run.__doc__ = f"{run.__name__} on device arrays (the double; NumPy underneath)."
    return run


def function_of(f: Callable[..., Any]) -> Callable[..., Any] | None:
    """The double's version of NumPy function ``f`` (``None`` where CuPy has none)."""
    name = getattr(f, "__name__", "")
    if name in _MISSING or name.startswith("_"):
        return None
    got = _FUNCS.get(f)
    if got is None:
        got = _FUNCS[f] = _device_function(f)
    return got


def _lookup(namespace: Any, name: str) -> Any:
    if name in _MISSING or name.startswith("_"):
        raise AttributeError(f"module 'cupy' has no attribute {name!r}")
    obj = getattr(namespace, name)  # AttributeError as CuPy's would be
    if isinstance(obj, np.ufunc):
        return ufunc_of(obj)
    if isinstance(obj, type) or not callable(obj):
        return obj  # dtypes, scalar types, constants: CuPy re-exports NumPy's
    return function_of(obj)


# ----------------------------------------------------------------------------- host <-> device
def array(obj: Any, dtype: Any = None, copy: bool = True, order: str = "K", ndmin: int = 0,
          **_: Any) -> ndarray:  # fmt: skip
    """A device array from a host array, a list, a scalar or a device array (a copy)."""
    _check_kernel()
    src = obj._a if type(obj) is ndarray else obj
    a = np.array(src, dtype=dtype, copy=True, order=order, ndmin=ndmin)
    if a.dtype.kind in "OUSMmV":
        raise ValueError(f"Unsupported dtype {a.dtype}")
    return wrap(a)


def asarray(a: Any, dtype: Any = None, order: str | None = None, **_: Any) -> ndarray:
    """``a`` itself when it already is a device array of ``dtype``, else a device copy."""
    if type(a) is ndarray and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    return array(a, dtype=dtype, order=order or "K")


asanyarray = asarray


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None, *,
            blocking: bool = True) -> np.ndarray:  # fmt: skip
    """A host copy of device array ``a`` (host input is returned as it is)."""
    if type(a) is ndarray:
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    temp = np.asarray(a, order=order)
    if out is not None:
        out[...] = temp
        return out
    return temp


def get_array_module(*args: Any) -> types.ModuleType:
    """This module if any argument is a device array, else NumPy."""
    import sys  # noqa: PLC0415

    return sys.modules[__name__] if any(type(a) is ndarray for a in args) else np


def ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    """C-contiguous device array (a device array is required, as in CuPy)."""
    if type(a) is not ndarray:
        refuse_host(a)
    return wrap(np.ascontiguousarray(a._a, dtype=dtype))


def argsort(a: Any, axis: int | None = -1, kind: str | None = None, **_: Any) -> ndarray:
    """Indices that sort ``a``: stable, as CuPy's radix sort is (NumPy's default is not)."""
    if type(a) is not ndarray:
        refuse_host(a)
    _streams.sync_current()
    return wrap(np.argsort(a._a, axis=axis, kind="stable"))


def sort(a: Any, axis: int | None = -1, kind: str | None = None, **_: Any) -> ndarray:
    """A sorted copy of ``a`` (stable, as in CuPy)."""
    if type(a) is not ndarray:
        refuse_host(a)
    _streams.sync_current()
    return wrap(np.sort(a._a, axis=axis, kind="stable"))


# ----------------------------------------------------------------------------- pools, submodules
class _Pool:
    """CuPy's memory pool API; the double counts nothing."""

    def used_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def free_all_blocks(self) -> None:
        return None

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        return None

    def n_free_blocks(self) -> int:
        return 0


_POOL, _PINNED_POOL = _Pool(), _Pool()


def get_default_memory_pool() -> _Pool:
    return _POOL


def get_default_pinned_memory_pool() -> _Pool:
    return _PINNED_POOL


class _Namespace(types.ModuleType):
    """A NumPy submodule (``linalg``, ``fft``) seen through the double."""

    def __init__(self, name: str, np_module: Any):
        super().__init__(name)
        self._np = np_module

    def __getattr__(self, name: str) -> Any:
        return _lookup(self._np, name)


linalg = _Namespace("cupy_double.linalg", np.linalg)
fft = _Namespace("cupy_double.fft", np.fft)


class _Random(types.ModuleType):
    """``cupy.random``: a *different* generator from NumPy's for the same seed, as on a GPU (so
    code that expects the same numbers from both backends must not use it)."""

    def __init__(self) -> None:
        super().__init__("cupy_double.random")

    def default_rng(self, seed: Any = None) -> Any:
        g = np.random.Generator(np.random.Philox(seed))
        return _WrappedGenerator(g)

    def __getattr__(self, name: str) -> Any:
        f = getattr(np.random.default_rng(), name, None) if name != "seed" else None
        if f is None:
            raise AttributeError(name)
        return _device_function(f)


class _WrappedGenerator:
    def __init__(self, g: np.random.Generator):
        self._g = g

    def __getattr__(self, name: str) -> Any:
        return _device_function(getattr(self._g, name))


random = _Random()
cupyx = make_cupyx()


def __getattr__(name: str) -> Any:  # module-level: every other NumPy name, through the wall
    return _lookup(np, name)


__all__ = ["ndarray", "cuda", "cupyx", "asarray", "array", "asnumpy", "get_array_module"]
