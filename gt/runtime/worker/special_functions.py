"""The special functions a worker's kernels ask for (``Backend.special``): SciPy's on NumPy
workers, ``cupyx.scipy.special`` on CuPy workers, GT's own NumPy versions where SciPy is missing.
SciPy is imported at the first call, not when the worker starts (it takes most of a second)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gt.runtime.ops import error_function


def erf_numpy() -> Callable[[Any], Any]:
    """SciPy's error function, else GT's own (:mod:`gt.runtime.ops.error_function`, within 1 ulp
    as SciPy's); SciPy is imported at the first call, not when the worker starts (importing
    ``scipy.special`` takes most of a second)."""
    found: list[Callable[[Any], Any]] = []

    def erf(x: Any) -> Any:
        if not found:
            try:
                from scipy.special import erf as scipy_erf  # noqa: PLC0415 - optional dependency

                found.append(scipy_erf)
            except ImportError:
                found.append(error_function.erf)
        return found[0](x)

    return erf


#: SciPy's names of the special functions kernels ask for (``Backend.special``).
SPECIAL_FUNCTIONS = ("gammaln", "digamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e",
                     "zeta", "gammainc", "gammaincc", "erfcx", "j0", "j1", "y0", "y1", "k0", "k1",
                     "k0e", "k1e")  # fmt: skip


#: ``erfc`` for GT's own ``erfinv`` and ``erfcx`` (on a worker without SciPy).
_ERFC = error_function.erfc


def special_fallback(name: str, erf: Callable[[Any], Any]) -> Callable[..., Any]:
    """GT's own NumPy version of a special function (for a worker without SciPy)."""
    from gt.runtime.ops import special_math as sm  # noqa: PLC0415 - only without SciPy

    return {
        "gammaln": lambda x: sm.lgamma(np, x),
        "digamma": lambda x: sm.digamma(np, x),
        "polygamma": lambda n, x: sm.polygamma(np, n, x),
        "erfinv": lambda x: sm.erfinv(np, x, erf, _ERFC),
        "i0": lambda x: sm.bessel_i(np, 0, x, False),
        "i0e": lambda x: sm.bessel_i(np, 0, x, True),
        "i1": lambda x: sm.bessel_i(np, 1, x, False),
        "i1e": lambda x: sm.bessel_i(np, 1, x, True),
        "zeta": lambda x, q: sm.zeta(np, x, q),
        "gammainc": lambda a, x: sm.gammainc(np, a, x, False),
        "gammaincc": lambda a, x: sm.gammainc(np, a, x, True),
        "erfcx": lambda x: sm.erfcx(np, x, _ERFC),
        "j0": lambda x: sm.bessel_j(np, 0, x),
        "j1": lambda x: sm.bessel_j(np, 1, x),
        "y0": lambda x: sm.bessel_y(np, 0, x),
        "y1": lambda x: sm.bessel_y(np, 1, x),
        "k0": lambda x: sm.bessel_k(np, 0, x, False),
        "k1": lambda x: sm.bessel_k(np, 1, x, False),
        "k0e": lambda x: sm.bessel_k(np, 0, x, True),
        "k1e": lambda x: sm.bessel_k(np, 1, x, True),
    }[name]


def find_special(be: Any, name: str, cupyx: Callable[[], Any]) -> Callable[..., Any]:
    """SciPy's function (NumPy) or CuPy's (``cupyx.scipy.special``), else GT's own."""
    if name not in SPECIAL_FUNCTIONS:
        raise KeyError(f"no special function {name!r} (known: {', '.join(SPECIAL_FUNCTIONS)})")
    if be.name == "numpy":
        try:
            import scipy.special  # noqa: PLC0415 - optional dependency, imported when first used
        except ImportError:
            return special_fallback(name, be.erf)
        return getattr(scipy.special, name)
    if name == "polygamma":
        # GT's own on CuPy: CuPy's goes through its Hurwitz zeta, which has no negative arguments.
        from gt.runtime.ops import special_math as sm  # noqa: PLC0415

        return lambda n, x: sm.polygamma(be.xp, n, x)
    return getattr(cupyx().scipy.special, name)
