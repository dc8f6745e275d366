"""Registry entries: elementwise math that composing would make inexact or unstable.

``log1p`` and ``expm1`` keep their precision for tiny inputs (``log(1 + 1e-10)`` is 0 in float32);
``softplus`` is one op whose derivative is ``sigmoid(beta * x)`` everywhere, kinks included (a
composition of ``relu`` and ``abs`` has two kinks at 0 that each contribute 0); rounding ops have a
zero derivative, as in PyTorch (the result still requires grad); ``binary_cross_entropy`` takes
probabilities and keeps PyTorch's fused derivative ``(p - t) / max(p (1 - p), 1e-12)``, which stays
finite when a sigmoid before it saturates to exactly 0 or 1.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, first_dtype, same_shape, sum_to
from gt.runtime.ops.elementwise import broadcast_rule, zero_grad

#: PyTorch's lower bound on the BCE derivative's denominator.
BCE_EPS = 1e-12
#: PyTorch's clamp of each log in BCE.
BCE_LOG_MIN = -100.0


def _k_unary(fn: str) -> Any:
    def make(be: Any) -> Any:
        f = getattr(be.xp, fn)
        return lambda v, at: f(v[0])

    return make


def _k_softplus(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        beta = at.get("beta", 1.0) if at else 1.0
        threshold = at.get("threshold", 20.0) if at else 20.0
        z = x * beta if beta != 1.0 else x
        out = xp.logaddexp(xp.zeros((), dtype=x.dtype), z)  # log(1 + e^z) without overflow
        if beta != 1.0:
            out = out / beta
        # PyTorch returns x itself above the threshold (the difference is below float precision).
        return xp.where(z > threshold, x, out).astype(x.dtype, copy=False)

    return h


def _d_softplus(n: Any, g: Any) -> tuple:
    # PyTorch's: sigmoid(beta x), and exactly 1 above the threshold (where the result is x).
    x = n.saved[0]
    at = n.attrs or {}
    beta, threshold = at.get("beta", 1.0), at.get("threshold", 20.0)
    z = x * beta if beta != 1.0 else x
    s = z.sigmoid()
    if s.requires_grad:  # recorded (create_graph): PyTorch's second derivative, which stops at
        # the threshold itself too (``sigmoid'(z) * (z < threshold)``), where the first is sigmoid
        s = z._apply("where", [z < threshold, z, z.detach()], {"dtype": z.dtype}).sigmoid()
    inner = g * s
    return (g._apply("where", [z > threshold, g, inner], {"dtype": g.dtype}),)


def _k_round(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        d = at.get("decimals", 0) if at else 0
        return xp.round(v[0], d) if d else xp.rint(v[0])  # half to even, as in PyTorch

    return h


def _k_bce(be: Any) -> Any:
    xp = be.xp

    check = be.name == "numpy"  # (on a GPU the check would wait for the device)

    def h(v: list, at: Any) -> Any:
        p, t = v
        if check and not ((p >= 0) & (p <= 1)).all():  # (NaN too, as PyTorch's check)
            raise ValueError("all elements of input should be between 0 and 1")
        if check and not ((t >= 0) & (t <= 1)).all():
            raise ValueError("all elements of target should be between 0 and 1")
        with _quiet(xp):
            lp = xp.maximum(xp.log(p), BCE_LOG_MIN)
            lq = xp.maximum(xp.log1p(-p), BCE_LOG_MIN)
        out = -(t * lp + (1 - t) * lq)
        return out.astype(p.dtype, copy=False)

    return h


class _quiet:
    """NumPy's divide warnings off for ``log(0)`` (its -inf is clamped right after)."""

    def __init__(self, xp: Any):
        self.errstate = xp.errstate(divide="ignore") if hasattr(xp, "errstate") else None

    def __enter__(self) -> None:
        if self.errstate is not None:
            self.errstate.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.errstate is not None:
            self.errstate.__exit__(*exc)


def _d_bce(n: Any, g: Any) -> tuple:
    p, t = n.saved
    gp = g_target = None
    if n.needs(0):
        gp = sum_to(g * (p - t) / (p * (1.0 - p)).clamp(min=BCE_EPS), n.shapes[0])
    if n.needs(1):
        lp = p.log().clamp(min=BCE_LOG_MIN)
        lq = (-p).log1p().clamp(min=BCE_LOG_MIN)
        g_target = sum_to(g * (lq - lp), n.shapes[1])
    return gp, g_target


def _unary(name: str, code: int, doc: str, **kw: Any) -> Op:
    kw.setdefault("kernel", _k_unary(name))
    return Op(name, code, shape=same_shape, dtype=first_dtype, shard="elementwise", doc=doc, **kw)


ENTRIES: list[Op] = [
    _unary(
        "log1p",
        67,
        "log(1 + x), exact for tiny x",
        grad=lambda n, g: (g / (n.saved[0] + 1.0),),
        saves="inputs",
    ),
    _unary(
        "expm1",
        68,
        "exp(x) - 1, exact for tiny x",
        grad=lambda n, g: (g * (n.saved[0] + 1.0),),
        saves="output",
    ),
    _unary(
        "softplus",
        69,
        "log(1 + exp(beta x)) / beta (attrs: beta, threshold); derivative sigmoid(beta x)",
        kernel=_k_softplus,
        grad=_d_softplus,
        saves="inputs",
    ),
    _unary("floor", 70, "round down (zero derivative)", grad=zero_grad),
    _unary("ceil", 71, "round up (zero derivative)", grad=zero_grad),
    _unary(
        "round",
        72,
        "round half to even, to attrs.decimals (zero derivative)",
        kernel=_k_round,
        grad=zero_grad,
    ),
    _unary("trunc", 73, "round toward zero (zero derivative)", grad=zero_grad),
    Op(
        "binary_cross_entropy",
        74,
        arity=2,
        shape=broadcast_rule("binary_cross_entropy"),
        dtype=first_dtype,
        kernel=_k_bce,
        grad=_d_bce,
        saves="inputs",
        shard="elementwise",
        doc="-(t log p + (1 - t) log(1 - p)), logs clamped at -100; PyTorch's fused derivative",
    ),
]
