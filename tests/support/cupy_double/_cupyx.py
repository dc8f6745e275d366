"""``cupyx`` of the CuPy test double: ``scatter_add``/``scatter_max``/``scatter_min`` (wrapping
out-of-range indices, as CuPy's do) and the ``scipy.special`` functions GT calls (``erf``, ``gammaln``, ``digamma``, ``erfinv``:
SciPy's when it is installed, else GT's own NumPy versions), and ``errstate``
whose ``linalg`` setting the double's ``cupy.linalg.cholesky`` follows."""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np

from gt.runtime.ops import error_function

from . import _streams
from ._array import ndarray, refuse_host, unwrap, wrap, wrap_key


def _erf(x: Any) -> Any:
    if type(x) is not ndarray:
        refuse_host(x)
    _streams.sync_current()
    try:
        from scipy.special import erf  # noqa: PLC0415 - optional

        return wrap(np.asarray(erf(x._a)).astype(x.dtype, copy=False))
    except ImportError:
        return wrap(error_function.erf(x._a))


def _special(name: str) -> Any:
    """A ``cupyx.scipy.special`` ufunc of array arguments, computed on the host arrays."""

    def fn(*args: Any) -> Any:
        for x in args:
            if type(x) is not ndarray:
                refuse_host(x)
        _streams.sync_current()
        host = [x._a for x in args]
        try:
            import scipy.special  # noqa: PLC0415 - optional

            v = getattr(scipy.special, name)(*host)
        except ImportError:
            from gt.runtime.worker.special_functions import special_fallback  # noqa: PLC0415

            v = special_fallback(name, error_function.erf)(*host)
        return wrap(np.asarray(v).astype(args[0].dtype, copy=False))

    fn.__name__ = name
    return fn


def _scatter_add(a: Any, slices: Any, value: Any) -> None:
    """``a[slices] += value`` with repeated indices accumulating (indices wrap around)."""
    if type(a) is not ndarray:
        refuse_host(a)
    check_add_at_dtype(a)
    _streams.sync_current()
    np.add.at(a._a, wrap_key(slices, a.shape), unwrap(value))


#: What ``cupy.add.at`` accumulates in (CuPy refuses complex, bool and the narrower integers).
ADD_AT_DTYPES = ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64")


def check_add_at_dtype(a: Any) -> None:
    """CuPy's refusal of an ``add.at`` (so ``scatter_add``) into an array of another dtype."""
    if a.dtype.name not in ADD_AT_DTYPES:
        raise TypeError(f"cupy.add.at only supports {', '.join(ADD_AT_DTYPES)} as data type")


def _scatter_ufunc(ufunc: Any) -> Any:
    def scatter(a: Any, slices: Any, value: Any) -> None:
        """``a[slices] = op(a[slices], value)`` with repeated indices combining (indices wrap).
        CuPy's take int32, uint32, uint64, float32 and float64 only (and round float64 through
        float32 on an H200, which this double does not imitate: GT does not call them)."""
        if type(a) is not ndarray:
            refuse_host(a)
        if a.dtype.char not in "iILQfd":
            raise TypeError(f"cupyx.scatter_{ufunc.__name__[:3]} does not support {a.dtype}")
        _streams.sync_current()
        ufunc.at(a._a, wrap_key(slices, a.shape), unwrap(value))

    return scatter


_config = threading.local()


def linalg_mode() -> str:
    """``cupyx.errstate``'s ``linalg`` setting in this thread: ``ignore`` (CuPy's default) or
    ``raise``."""
    return getattr(_config, "linalg", "ignore")


@contextlib.contextmanager
def errstate(*, divide: Any = None, over: Any = None, under: Any = None, invalid: Any = None,
             linalg: str | None = None) -> Iterator[None]:  # fmt: skip
    """``cupyx.errstate``: of its settings the double keeps ``linalg`` (thread-local, as CuPy's)."""
    old = linalg_mode()
    if linalg is not None:
        if linalg not in ("ignore", "raise"):
            raise ValueError(f"Unknown error mode: {linalg}")
        _config.linalg = linalg
    try:
        yield
    finally:
        _config.linalg = old


def make_cupyx() -> types.ModuleType:
    """The ``cupyx`` namespace the backend uses."""
    cupyx = types.ModuleType("cupy_double.cupyx")
    scipy = types.ModuleType("cupy_double.cupyx.scipy")
    special = types.ModuleType("cupy_double.cupyx.scipy.special")
    special.erf = _erf  # type: ignore[attr-defined]
    for name in ("gammaln", "digamma", "erfinv", "i0", "i0e", "i1", "i1e", "zeta", "gammainc",
                 "gammaincc", "erfcx", "j0", "j1", "y0", "y1", "k0", "k1", "k0e", "k1e"):  # fmt: skip
        setattr(special, name, _special(name))
    scipy.special = special  # type: ignore[attr-defined]
    cupyx.scipy = scipy  # type: ignore[attr-defined]
    cupyx.scatter_add = _scatter_add  # type: ignore[attr-defined]
    cupyx.scatter_max = _scatter_ufunc(np.maximum)  # type: ignore[attr-defined]
    cupyx.scatter_min = _scatter_ufunc(np.minimum)  # type: ignore[attr-defined]
    cupyx.errstate = errstate  # type: ignore[attr-defined]
    return cupyx
