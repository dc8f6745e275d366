"""Regenerate the polynomial coefficients of :mod:`gt.runtime.ops.error_function`.

Run ``python scripts/fit_erf.py`` (needs ``mpmath``, which is not a GT dependency:
``pip install mpmath``). It prints the three coefficient tuples, to paste into that module.

Each polynomial is a least-squares fit at 4x its degree Chebyshev nodes, solved with 60 significant
digits (``mpmath.qr_solve``), so the only error left in the float64 coefficients is their own
rounding. ``--check`` prints each fit's truncation error (the fit against the function, both in
60 digits), which should be far below float64's 1.1e-16:

* ``SMALL``: ``erf(x)/x - 1`` as a polynomial in ``t = x*x`` itself over ``|x| < 1``;
* ``NEAR``: ``x * erfcx(x)`` (``erfcx(x) = exp(x*x) erfc(x)``) in ``u = (x - 1.25) / 0.75`` over
  ``0.5 <= x <= 2``;
* ``FAR``: the same in ``u = (2w - (W0 + W1)) / (W1 - W0)``, ``w = 1/(x + 4)``, over
  ``2 <= x <= 28`` (``erfc`` underflows to 0 just past 27.2). A variable linear in ``x`` would
  need twice the degree out there; near 0.5 the reciprocal's own rounding would cost ulps, hence
  two pieces.
"""

from __future__ import annotations

import argparse
import sys

try:
    import mpmath as mp
except ImportError:  # pragma: no cover - a tool for maintainers
    sys.exit("fit_erf.py needs mpmath: pip install mpmath")

mp.mp.dps = 60
FAR_SHIFT = 4
FAR_FROM, FAR_TO = 2, 28
DEGREES = {"SMALL": 13, "NEAR": 20, "FAR": 18}


def _fit(f, a, b, deg, own=False):
    """Monomial coefficients in ``u`` (``[-1, 1]`` mapped onto ``[a, b]``), lowest first;
    ``own``: in the function's own variable instead."""
    n = 4 * deg
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    design = mp.matrix(n, deg + 1)
    points = [(a + b) / 2 + (b - a) / 2 * u for u in nodes]
    for i, u in enumerate(points if own else nodes):
        p = mp.mpf(1)
        for j in range(deg + 1):
            design[i, j] = p
            p *= u
    values = mp.matrix([f(v) for v in points])
    return list(mp.qr_solve(design, values)[0])


def _x_erfcx(x):
    return x * mp.exp(x * x) * mp.erfc(x)


def _small(t):  # erf(x)/x - 1 in t = x^2
    x = mp.sqrt(t)
    return (mp.erf(x) / x if t else 2 / mp.sqrt(mp.pi)) - 1


def fits() -> dict:
    """``name -> (function, a, b, coefficients)``."""
    w0, w1 = mp.mpf(1) / (FAR_TO + FAR_SHIFT), mp.mpf(1) / (FAR_FROM + FAR_SHIFT)
    specs = {
        "SMALL": (_small, mp.mpf(0), mp.mpf(1)),  # (in t itself: no mapping to compute)
        "NEAR": (_x_erfcx, mp.mpf("0.5"), mp.mpf(2)),
        "FAR": (lambda w: _x_erfcx(1 / w - FAR_SHIFT), w0, w1),
    }
    out = {}
    for name, (f, a, b) in specs.items():
        out[name] = (f, a, b, _fit(f, a, b, DEGREES[name], own=name == "SMALL"))
    return out


def _truncation(f, a, b, coef, own, samples=400):
    worst = mp.mpf(0)
    for k in range(samples + 1):
        v = a + (b - a) * k / samples
        u = v if own else (2 * v - a - b) / (b - a)
        y = mp.mpf(0)
        for c in reversed(coef):
            y = y * u + c
        worst = max(worst, abs(y - f(v)) / abs(f(v)))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print each fit's truncation error")
    args = parser.parse_args(argv)
    for name, (f, a, b, coef) in fits().items():
        if args.check:
            err = _truncation(f, a, b, coef, own=name == "SMALL")
            print(f"# {name}: degree {len(coef) - 1}, truncation error {float(err):.2e}")
        body = ", ".join(repr(float(c)) for c in coef)
        print(f"_{name} = ({body})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
