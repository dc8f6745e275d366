"""Registry entries: the gamma family (``lgamma``, ``digamma``, ``polygamma``), ``erfinv``, and
gamma sampling with its reparameterised derivative (what Gamma, Beta, Dirichlet, Chi2 and StudentT
distributions are built on).

Kernels compute in float32 or float64 (half types go through float32) with SciPy's functions on a
NumPy worker that has SciPy, ``cupyx.scipy.special`` on CuPy, else GT's own
(:mod:`gt.runtime.ops.special_math`); the backend finds them (``env.special``).

``standard_gamma`` draws ``Gamma(alpha, 1)`` samples from the op's seed with Philox (the
generator of :mod:`.creation`), so every backend draws the same numbers (to the last bit or two:
on an H200, CUDA's ``log`` and ``pow`` differed from the C library's in 14 of 200 float64
samples, by at most 6.6e-16 relative; a rejection decided by such a bit would differ more, and
none was seen): Marsaglia and Tsang's
method ("A simple method for generating gamma variables", ACM TOMS 2000) in float64, each
proposal ``r`` of element ``i`` from Philox blocks with counter ``i`` and high words ``(r, 1)`` and
``(r, 2)``, so an element's value does not depend on how many proposals the others needed; below
``alpha = 1`` the sample of ``alpha + 1`` is scaled by ``u ** (1 / alpha)``. As in PyTorch, samples
are clamped to the dtype's smallest normal number. Its derivative is the implicit one
(Figurnov et al., "Implicit reparameterization gradients", NeurIPS 2018):
``dx/dalpha = -(dF/dalpha) / f(x)``, with ``F`` the regularised incomplete gamma function, from its
power series ``F = sum_k x^(alpha+k) e^-x / Gamma(alpha+k+1)`` differentiated term by term (exact
to float64 rounding); past ``alpha = 1000`` from the Wilson–Hilferty approximation.
"""

from __future__ import annotations

import math
from typing import Any

from gt.runtime.ops import special_math as sm
from gt.runtime.ops.base import Op, first_dtype, real_float, same_shape
from gt.runtime.ops.creation import _key, _uniform53, philox4x32

_SQRT_PI_2 = math.sqrt(math.pi) / 2.0
#: Past this concentration the derivative of a sample uses Wilson–Hilferty (the series would need
#: thousands of terms).
WILSON_HILFERTY_FROM = 1000.0
#: The most terms the series of the derivative may take (inputs that would need more, which no
#: sample of a concentration below :data:`WILSON_HILFERTY_FROM` reaches, use the approximation).
MAX_SERIES_TERMS = 4000
#: The highest ``polygamma`` order (``n! `` overflows float64 past 170).
MAX_POLYGAMMA_ORDER = 150
#: Proposal rounds before giving up (each accepts at least 95 % of what is left).
MAX_ROUNDS = 64
_TINY = {"float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38,
         "float32": 1.1754943508222875e-38, "float64": 2.2250738585072014e-308}  # fmt: skip


def _compute_dtype(xp: Any, x: Any) -> Any:
    """float32 or float64 (half types are computed in float32)."""
    return x if x.dtype in (xp.float32, xp.float64) else x.astype(xp.float32)


def _k_special(name: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp
        fn = be.special(name)
        return lambda v, at: fn(_compute_dtype(xp, v[0])).astype(v[0].dtype, copy=False)

    return make


def _k_polygamma(be: Any) -> Any:
    xp = be.xp
    fn = be.special("polygamma")

    def h(v: list, at: Any) -> Any:
        x = v[0]
        return fn(polygamma_order(at["n"]), _compute_dtype(xp, x)).astype(x.dtype, copy=False)

    return h


def polygamma_order(n: Any) -> int:
    """``n`` if it is a valid order of ``polygamma`` (an int in ``0 .. 150``).

    Raises:
        ValueError: anything else (the kernel's loops and ``n!`` grow with it).
    """
    if type(n) is not int or not 0 <= n <= MAX_POLYGAMMA_ORDER:
        raise ValueError(
            f"polygamma(n, x) takes an integer order n in 0..{MAX_POLYGAMMA_ORDER}, not {n!r:.40}"
        )
    return n


# ----------------------------------------------------------------------------- gamma sampling
def draw_standard_gamma(xp: Any, alpha: Any, seed: int) -> Any:
    """``Gamma(alpha, 1)`` samples in float64, one per element of ``alpha`` (NaN where ``alpha``
    is not positive and finite)."""
    a = xp.asarray(alpha, dtype=xp.float64).reshape(-1)
    n = a.shape[0]
    key = _key(seed)
    boost = a < 1.0
    with sm.quiet(xp):
        d = xp.where(boost, a + 1.0, a) - 1.0 / 3.0
        c = 1.0 / xp.sqrt(9.0 * d)
    out = xp.full((n,), math.nan, dtype=xp.float64)
    todo = xp.nonzero((a > 0) & (a < math.inf))[0]
    for r in range(MAX_ROUNDS):
        if todo.shape[0] == 0:
            break
        counters = todo.astype(xp.uint64)
        w = philox4x32(xp, counters, key, high=(r, 1))
        u = philox4x32(xp, counters, key, high=(r, 2))
        u1, u2 = _uniform53(xp, w[0], w[1]), _uniform53(xp, w[2], w[3])
        z = xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos(2.0 * math.pi * u2)  # Box–Muller
        dd, cc = d[todo], c[todo]
        v = 1.0 + cc * z
        v = v * v * v
        with sm.quiet(xp):
            log_v = xp.log(xp.where(v > 0, v, 1.0))
            ok = (v > 0) & (
                xp.log1p(-_uniform53(xp, u[0], u[1])) < 0.5 * z * z + dd - dd * v + dd * log_v
            )
        out[todo[ok]] = (dd * v)[ok]
        todo = todo[~ok]
    if bool(boost.any()):
        idx = xp.nonzero(boost & (a > 0))[0]
        u = philox4x32(xp, idx.astype(xp.uint64), key, high=(0, 2))
        scale = xp.exp(xp.log1p(-_uniform53(xp, u[2], u[3])) / a[idx])  # (1 - u) is in (0, 1]
        out[idx] = out[idx] * scale
    return out.reshape(alpha.shape)


def _k_standard_gamma(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        alpha = v[0]
        out = draw_standard_gamma(xp, alpha, at["seed"])
        name = str(alpha.dtype) if str(alpha.dtype) in _TINY else "bfloat16"
        return xp.maximum(out, _TINY[name]).astype(alpha.dtype, copy=False)

    return h


def standard_gamma_grad(xp: Any, x: Any, alpha: Any) -> Any:
    """``d x / d alpha`` of ``Gamma(alpha, 1)`` samples ``x`` with ``F(x; alpha)`` held fixed."""
    x = xp.asarray(x, dtype=xp.float64)
    a = xp.asarray(alpha, dtype=xp.float64)
    x, a = xp.broadcast_arrays(x, a)
    out = xp.zeros(x.shape, dtype=xp.float64)
    with sm.quiet(xp):
        # terms peak near k = x - alpha and fall off within a few sqrt(x) after it
        terms = xp.maximum(x - a, 0.0) + 10.0 * xp.sqrt(xp.abs(x))
        series = (a < WILSON_HILFERTY_FROM) & (terms < MAX_SERIES_TERMS - 40)
        if bool(series.any()):
            xs, as_ = x[series], a[series]
            top = float(xp.max(terms[series]))
            logx = xp.log(xs)
            psi = sm.digamma(xp, as_ + 1.0)
            ratio = xp.ones(xs.shape, dtype=xp.float64)
            total = logx - psi
            for k in range(1, int(top) + 40):
                ak = as_ + k
                ratio = ratio * (xs / ak)
                psi = psi + 1.0 / ak
                total = total + ratio * (logx - psi)
            out[series] = -(xs / as_) * total
        if not bool(series.all()):
            big = ~series
            xb, ab = x[big], a[big]
            # x = alpha (1 - 1/(9 alpha) + z / (3 sqrt(alpha)))^3 with z held fixed
            w = xp.cbrt(xb / ab)
            z = (w - 1.0 + 1.0 / (9.0 * ab)) * 3.0 * xp.sqrt(ab)
            dw = 1.0 / (9.0 * ab * ab) - z / (6.0 * ab**1.5)
            out[big] = w**3 + 3.0 * ab * w * w * dw
    return out


# ----------------------------------------------------------------------------- Poisson sampling
#: Below this rate, Knuth's multiplication method; above, Hormann's transformed rejection (PTRS).
PTRS_FROM = 10.0


def draw_poisson(xp: Any, rate: Any, seed: int) -> Any:
    """``Poisson(rate)`` counts in float64, one per element (NaN where the rate is negative or
    NaN). Small rates: multiply uniforms until the product drops below ``exp(-rate)``, one
    uniform per round (Philox high words ``(r, 3)``); large rates: W. Hormann's PTRS ("The
    transformed rejection method for generating Poisson random variables", 1993), one proposal
    per round (high words ``(r, 4)``), each element on its own counters."""
    lam = xp.asarray(rate, dtype=xp.float64).reshape(-1)
    n = lam.shape[0]
    key = _key(seed)
    out = xp.full((n,), math.nan, dtype=xp.float64)
    with sm.quiet(xp):
        out[lam == 0] = 0.0
        small = xp.nonzero((lam > 0) & (lam < PTRS_FROM))[0]
        if small.shape[0]:
            limit = xp.exp(-lam[small])
            prod = xp.ones(small.shape, dtype=xp.float64)
            count = xp.zeros(small.shape, dtype=xp.float64)
            todo = xp.ones(small.shape, dtype=bool)
            for r in range(_MAX_POISSON_ROUNDS):
                w = philox4x32(xp, small.astype(xp.uint64), key, high=(r, 3))
                prod = xp.where(todo, prod * _uniform53(xp, w[0], w[1]), prod)
                todo = todo & (prod > limit)
                count = count + todo
                if not bool(todo.any()):
                    break
            out[small] = count
        big = xp.nonzero((lam >= PTRS_FROM) & (lam < math.inf))[0]
        for r in range(_MAX_POISSON_ROUNDS):
            if big.shape[0] == 0:
                break
            lb = lam[big]
            w = philox4x32(xp, big.astype(xp.uint64), key, high=(r, 4))
            u = _uniform53(xp, w[0], w[1]) - 0.5
            v = _uniform53(xp, w[2], w[3])
            slam = xp.sqrt(lb)
            b = 0.931 + 2.53 * slam
            a = -0.059 + 0.02483 * b
            inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
            vr = 0.9277 - 3.6224 / (b - 2.0)
            us = 0.5 - xp.abs(u)
            k = xp.floor((2.0 * a / us + b) * u + lb + 0.43)
            quick = (us >= 0.07) & (v <= vr)
            bad = (k < 0) | ((us < 0.013) & (v > us))
            kk = xp.maximum(k, 0.0)
            log_accept = xp.log(v) + xp.log(inv_alpha) - xp.log(a / (us * us) + b)
            slow = log_accept <= -lb + kk * xp.log(lb) - sm.lgamma(xp, kk + 1.0)
            ok = quick | (~bad & slow)
            out[big[ok]] = k[ok]
            big = big[~ok]
    return out.reshape(rate.shape)


_MAX_POISSON_ROUNDS = 400


def _k_poisson(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: draw_poisson(xp, v[0], at["seed"]).astype(v[0].dtype, copy=False)


def _k_standard_gamma_grad(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: standard_gamma_grad(xp, v[0], v[1]).astype(v[0].dtype, copy=False)


# ----------------------------------------------------------------------------- derivatives, API
def _float(x: Any) -> Any:
    return real_float(x, "gamma functions")


def lgamma_api(x: Any) -> Any:
    """``log|Gamma(x)|`` elementwise (``torch.lgamma``)."""
    x = _float(x)
    return x._apply("lgamma", [x])


def digamma_api(x: Any) -> Any:
    """The logarithmic derivative of the gamma function, ``psi(x)`` (``torch.digamma``)."""
    x = _float(x)
    return x._apply("digamma", [x])


def polygamma_api(x: Any, n: int) -> Any:
    """The ``n``-th derivative of ``digamma`` (``Tensor.polygamma(n)``; ``gt.polygamma(n, x)``)."""
    if isinstance(n, int) and not isinstance(n, bool) and n < 0:
        raise ValueError(f"polygamma(n, x) does not support negative n: {n}")
    polygamma_order(n)
    x = _float(x)
    return x._apply("polygamma", [x], {"n": n})


def erfinv_api(x: Any) -> Any:
    """The inverse error function on ``[-1, 1]`` (``torch.erfinv``)."""
    x = _float(x)
    return x._apply("erfinv", [x])


def standard_gamma_api(alpha: Any, seed: int) -> Any:
    """``Gamma(alpha, 1)`` samples drawn from ``seed``, differentiable with respect to ``alpha``."""
    return alpha._apply("standard_gamma", [alpha], {"seed": int(seed)})


def _d_standard_gamma(n: Any, g: Any) -> tuple:
    alpha, x = n.saved
    return (g * x._apply("standard_gamma_grad", [x, alpha]),)


def _unary(name: str, code: int, doc: str, **kw: Any) -> Op:
    return Op(name, code, shape=same_shape, dtype=first_dtype, shard="elementwise", doc=doc, **kw)


ENTRIES: list[Op] = [
    _unary(
        "lgamma",
        100,
        "log|Gamma(x)|; derivative digamma(x)",
        kernel=_k_special("gammaln"),
        grad=lambda n, g: (g * n.saved[0].digamma(),),
        saves="inputs",
        methods=("lgamma",),
        api=lgamma_api,
    ),
    _unary(
        "digamma",
        101,
        "psi(x), the derivative of lgamma; derivative polygamma(1, x)",
        kernel=_k_special("digamma"),
        grad=lambda n, g: (g * n.saved[0].polygamma(1),),
        saves="inputs",
        methods=("digamma",),
        api=digamma_api,
    ),
    _unary(
        "polygamma",
        102,
        "the attrs.n-th derivative of digamma; derivative polygamma(n + 1, x)",
        kernel=_k_polygamma,
        grad=lambda n, g: (g * n.saved[0].polygamma(int(n.attrs["n"]) + 1),),
        saves="inputs",
        methods=("polygamma",),
        api=polygamma_api,
    ),
    _unary(
        "erfinv",
        103,
        "the inverse of erf on [-1, 1]; derivative sqrt(pi)/2 exp(erfinv(x)^2)",
        kernel=_k_special("erfinv"),
        grad=lambda n, g: (g * ((n.saved[0] * n.saved[0]).exp() * _SQRT_PI_2),),
        saves="output",
        methods=("erfinv",),
        api=erfinv_api,
    ),
    Op(
        "standard_gamma",
        104,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_standard_gamma,
        grad=_d_standard_gamma,
        saves=lambda inputs, out: (inputs[0], out._alias()),
        doc="Gamma(alpha, 1) samples from attrs.seed (Philox); implicit derivative in alpha",
    ),
    Op(
        "poisson",
        128,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_poisson,
        grad=lambda n, g: (g * 0.0,),
        doc="Poisson(rate) counts from attrs.seed (Philox; Knuth below rate 10, PTRS above)",
    ),
    Op(
        "standard_gamma_grad",
        105,
        arity=2,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_standard_gamma_grad,
        shard="elementwise",
        doc="d sample / d alpha of Gamma(alpha, 1) samples (x, alpha), F(x; alpha) held fixed",
    ),
]
