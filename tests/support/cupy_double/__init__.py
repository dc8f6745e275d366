"""``cupy_double``: a strict stand-in for CuPy, with NumPy underneath (a test tool, not a GPU).

GT's worker imports it instead of ``cupy`` when ``GT_CUPY_DOUBLE=1`` (see
``gt/runtime/worker/backend.py``), so the test suite runs the CuPy code paths on machines without
a GPU: host<->device copies must be explicit, host arrays must not leak into device work,
out-of-range index arrays wrap around instead of raising, asynchronous copies on streams are
deferred until synchronized, device memory comes in blocks counted by a pool that refuses past its
limit (see :mod:`._array`, :mod:`._streams` and :mod:`._memory` for the exact rules), and only what
every supported CuPy offers can be called, with the arguments it takes (:mod:`._api`, from
``scripts/make_cupy_api.py``).

It proves nothing about GPUs: no kernel is compiled, timings are host times, numerics are
NumPy's. What it catches are the places where GPU code would call NumPy on device data.

Knobs (environment, read when used): ``CUPY_DOUBLE_DEVICES`` (default 1; 0 makes
``getDeviceCount`` raise CUDA's "no device" error, as real CuPy does) and
``CUPY_DOUBLE_BROKEN=1`` (every kernel raises, like CuPy without its CUDA libraries) and
``CUPY_DOUBLE_MEMORY`` (each device's size in bytes, default 1 GiB).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _api, _cupyx, _memory, _streams, cuda
from ._array import ndarray, refuse_host, unwrap, wrap, wrap_key
from ._cupyx import make_cupyx
from ._kernel import ElementwiseKernel  # noqa: F401 - CuPy's name, for GT's fused kernels

__version__ = "14.0.0+double"
IS_TEST_DOUBLE = True


def _check_kernel() -> None:
    if os.environ.get("CUPY_DOUBLE_BROKEN", "") not in ("", "0"):
        raise cuda.runtime.CUDARuntimeError(35)
    broken = os.environ.get("CUPY_DOUBLE_BROKEN_DEVICES", "")  # "1,3": these fail every kernel
    if broken and str(cuda.runtime.getDevice()) in broken.split(","):
        raise cuda.runtime.CUDARuntimeError(999)  # (what a failing device may say)


# ----------------------------------------------------------------------------- ufuncs
class ufunc:  # noqa: N801 - CuPy's name
    """A NumPy ufunc that runs on device arrays only (``add``, ``add.at`` ...), taking only the
    arguments CuPy's ufunc of that name takes.

    Args:
        f: the NumPy ufunc.
        space, name: where CuPy has it (``"cupy"``, ``"add"``), for the argument checks.
    """

    def __init__(self, f: np.ufunc, space: str = "cupy", name: str | None = None):
        self._f = f
        self.__name__ = f.__name__
        self._space, self._name = space, name or f.__name__
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
        _api.check_call(self._space, self._name, args, kwargs)
        for a in args[: self.nin]:  # CuPy's ufuncs take arrays and scalars, not sequences
            if type(a) is list or type(a) is tuple:
                refuse_host(a)
        return self._run(self._f, args, kwargs)

    def _method(self, method: str, args: tuple, kwargs: dict) -> Any:
        _api.check_ufunc_method(self._name, self._space, method, args, kwargs)
        return self._run(getattr(self._f, method), args, kwargs)

    def reduce(self, *args: Any, **kwargs: Any) -> Any:
        return self._method("reduce", args, kwargs)

    def accumulate(self, *args: Any, **kwargs: Any) -> Any:
        return self._method("accumulate", args, kwargs)

    def outer(self, *args: Any, **kwargs: Any) -> Any:
        return self._method("outer", args, kwargs)

    def reduceat(self, *args: Any, **kwargs: Any) -> Any:
        return self._method("reduceat", args, kwargs)

    def at(self, a: Any, indices: Any, b: Any = None) -> None:
        """Unbuffered in-place ``a[indices] op= b``; out-of-range indices wrap, as in CuPy."""
        _api.check_ufunc_method(self._name, self._space, "at", (a, indices, b), {})
        _check_kernel()
        _streams.sync_current()
        if type(a) is not ndarray:
            refuse_host(a)
        if self._name == "add":
            _cupyx.check_add_at_dtype(a)
        key = wrap_key(indices, a.shape)
        if b is None:
            self._f.at(a._a, key)
        else:
            self._f.at(a._a, key, unwrap(b))

    def __repr__(self) -> str:
        return f"<ufunc '{self.__name__}' (double)>"


_UFUNCS: dict[Any, ufunc] = {}
_FUNCS: dict[Any, Callable[..., Any]] = {}


def ufunc_of(f: np.ufunc, space: str = "cupy", name: str | None = None) -> ufunc | None:
    """The double's version of NumPy ufunc ``f`` (CuPy's ``space.name``, by default the ufunc's
    own name in ``cupy``)."""
    key = (f, space, name)
    u = _UFUNCS.get(key)
    if u is None:
        u = _UFUNCS[key] = ufunc(f, space, name)
    return u


def _device_function(f: Callable[..., Any], space: str | None = None,
                     name: str | None = None) -> Callable[..., Any]:  # fmt: skip
    """``f`` on device arrays; with ``space``, each call is checked against CuPy's
    ``space.name`` (default: ``f``'s own name)."""
    name = name or getattr(f, "__name__", "function")

    def run(*args: Any, **kwargs: Any) -> Any:
        if space is not None:
            _api.check_call(space, name, args, kwargs)
        _check_kernel()
        _streams.sync_current()
        return wrap(f(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()}))

    run.__name__ = name
    run.__doc__ = f"{name} on device arrays (the double; NumPy underneath)."
    return run


def function_of(f: Callable[..., Any], space: str = "cupy") -> Callable[..., Any] | None:
    """The double's version of NumPy function ``f`` (``None`` where CuPy's ``space`` has none)."""
    name = getattr(f, "__name__", "")
    if name.startswith("_") or not _api.has(space, name):
        return None
    return _named_function(f, space, name)


def _lookup(namespace: Any, name: str, space: str = "cupy") -> Any:
    """NumPy's ``name`` as CuPy's ``space`` offers it; ``AttributeError`` where some supported
    CuPy lacks it (the recorded API, :mod:`._api`), even though NumPy has it."""
    if name.startswith("_") or not _api.has(space, name):
        raise AttributeError(f"module {space!r} has no attribute {name!r}")
    obj = getattr(namespace, name)  # AttributeError as CuPy's would be
    if isinstance(obj, np.ufunc):
        return ufunc_of(obj, space, name)
    if isinstance(obj, type) or not callable(obj):
        return obj  # dtypes, scalar types, constants: CuPy re-exports NumPy's
    return _named_function(obj, space, name)


def _named_function(f: Callable[..., Any], space: str, name: str) -> Callable[..., Any]:
    """The double's ``f`` checked as CuPy's ``space.name`` (made once per name)."""
    got = _FUNCS.get((f, space, name))
    if got is None:
        got = _FUNCS[(f, space, name)] = _device_function(f, space, name)
    return got


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
    """C-contiguous device array (a device array is required, as in CuPy); ``a`` itself when it
    already is one of ``dtype``, as in CuPy."""
    if type(a) is not ndarray:
        refuse_host(a)
    if a._a.flags.c_contiguous and (dtype is None or np.dtype(dtype) == a._a.dtype):
        return a
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
def get_default_memory_pool() -> _memory.MemoryPool:
    """The device memory pool every array of the double is counted in."""
    return _memory.DEFAULT_POOL


def get_default_pinned_memory_pool() -> _memory.PinnedMemoryPool:
    """The pinned host memory pool (counts nothing: the double's pinned memory is plain)."""
    return _memory.DEFAULT_PINNED_POOL


class _Namespace(types.ModuleType):
    """A NumPy submodule (``linalg``, ``fft``) seen through the double."""

    def __init__(self, space: str, np_module: Any):
        super().__init__(space.replace("cupy", "cupy_double", 1))
        self._np = np_module
        self._space = space

    def __getattr__(self, name: str) -> Any:
        return _lookup(self._np, name, self._space)


class _Linalg(_Namespace):
    """``cupy.linalg``: as CuPy's, ``cholesky`` of a matrix that is not positive definite raises
    only under ``cupyx.errstate(linalg="raise")``; by default (``ignore``: no device sync to read
    cuSOLVER's status) it returns what cuSOLVER left, which the double makes finite and with a
    positive diagonal, so only the status can tell it failed."""

    def cholesky(self, a: Any) -> Any:
        f = _lookup(np.linalg, "cholesky", "cupy.linalg")
        try:
            return f(a)
        except np.linalg.LinAlgError:
            if _cupyx.linalg_mode() == "raise":
                raise
            x = np.asarray(unwrap(a))  # (the double's own look at the device memory)
            junk = np.tril(np.abs(x)) + np.eye(x.shape[-1], dtype=x.dtype)
            return wrap(np.nan_to_num(junk, nan=1.0, posinf=1.0, neginf=1.0))


linalg = _Linalg("cupy.linalg", np.linalg)
fft = _Namespace("cupy.fft", np.fft)


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
        if f is None or not _api.has("cupy.random", name):
            raise AttributeError(f"module 'cupy.random' has no attribute {name!r}")
        return _device_function(f, "cupy.random", name)


class _WrappedGenerator:
    def __init__(self, g: np.random.Generator):
        self._g = g

    def __getattr__(self, name: str) -> Any:
        if not _api.has("cupy.random.Generator", name):
            raise AttributeError(f"'cupy.random.Generator' object has no attribute {name!r}")
        return _device_function(getattr(self._g, name), "cupy.random.Generator", name)


random = _Random()
cupyx = make_cupyx()

# The functions defined above take only what CuPy's take (their own signatures are looser).
for _name in ("array", "asarray", "asanyarray", "asnumpy", "get_array_module",
              "ascontiguousarray", "argsort", "sort", "get_default_memory_pool",
              "get_default_pinned_memory_pool"):  # fmt: skip
    globals()[_name] = _api.checked("cupy", _name, globals()[_name])
random.default_rng = _api.checked("cupy.random", "default_rng", random.default_rng)
#: What the double defines that is no CuPy name (its own machinery; ``cupyx`` is CuPy's companion
#: module, which the backend takes from here).
DOUBLE_ONLY = frozenset({"IS_TEST_DOUBLE", "DOUBLE_ONLY", "cupyx", "ufunc_of", "function_of",
                         "refuse_host", "unwrap", "wrap", "wrap_key", "make_cupyx"})  # fmt: skip


def __getattr__(name: str) -> Any:  # module-level: every other NumPy name, through the wall
    return _lookup(np, name)


__all__ = ["ndarray", "cuda", "cupyx", "asarray", "array", "asnumpy", "get_array_module"]
