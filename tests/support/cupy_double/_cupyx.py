"""``cupyx`` of the CuPy test double: ``scatter_add`` (wrapping out-of-range indices, as CuPy's
does) and ``scipy.special.erf``."""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np

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
        v = np.vectorize(math.erf, otypes=[np.float64])(x._a)
        return wrap(np.asarray(v).astype(x.dtype, copy=False))


def _scatter_add(a: Any, slices: Any, value: Any) -> None:
    """``a[slices] += value`` with repeated indices accumulating (indices wrap around)."""
    if type(a) is not ndarray:
        refuse_host(a)
    _streams.sync_current()
    np.add.at(a._a, wrap_key(slices, a.shape), unwrap(value))


def make_cupyx() -> types.ModuleType:
    """The ``cupyx`` namespace the backend uses."""
    cupyx = types.ModuleType("cupy_double.cupyx")
    scipy = types.ModuleType("cupy_double.cupyx.scipy")
    special = types.ModuleType("cupy_double.cupyx.scipy.special")
    special.erf = _erf  # type: ignore[attr-defined]
    scipy.special = special  # type: ignore[attr-defined]
    cupyx.scipy = scipy  # type: ignore[attr-defined]
    cupyx.scatter_add = _scatter_add  # type: ignore[attr-defined]
    return cupyx
