"""``torch.special``'s orthogonal polynomials: Chebyshev T, U, V, W (and their shifted forms on
[0, 1]), Hermite H and He, Laguerre L and Legendre P, of degree ``n`` at ``x``.

Each is its three-term recurrence, composed from elementwise ops: with ``n`` a number, ``n`` steps;
with ``n`` a tensor, one sync point reads its largest entry, every degree up to it is computed and
each element picks its own (negative degrees give 0, as in PyTorch). As in PyTorch, the results do
not require grad.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gt import shapes as S
from gt.grad_mode import no_grad
from gt.ops.arith import where
from gt.ops.shaping import stack
from gt.tensor import Tensor

#: ``(p0, p1, step)``: the first two polynomials and ``step(k, x, p_k, p_k-1) = p_k+1``.
Recurrence = tuple[Callable, Callable, Callable]


def _three_term(first: Callable[[Tensor], Tensor], a: float, b: float) -> Recurrence:
    """``p_k+1 = a x p_k - b p_k-1`` (the Chebyshev family, ``b = 1``)."""
    return (lambda x: x * 0 + 1, first, lambda k, x, p, q: a * x * p - b * q)


_RECURRENCES: dict[str, Recurrence] = {
    "chebyshev_polynomial_t": _three_term(lambda x: x, 2.0, 1.0),
    "chebyshev_polynomial_u": _three_term(lambda x: 2 * x, 2.0, 1.0),
    "chebyshev_polynomial_v": _three_term(lambda x: 2 * x - 1, 2.0, 1.0),
    "chebyshev_polynomial_w": _three_term(lambda x: 2 * x + 1, 2.0, 1.0),
    "hermite_polynomial_h": (lambda x: x * 0 + 1, lambda x: 2 * x,
                             lambda k, x, p, q: 2 * x * p - 2 * k * q),
    "hermite_polynomial_he": (lambda x: x * 0 + 1, lambda x: x,
                              lambda k, x, p, q: x * p - k * q),
    "laguerre_polynomial_l": (lambda x: x * 0 + 1, lambda x: 1 - x,
                              lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)),
    "legendre_polynomial_p": (lambda x: x * 0 + 1, lambda x: x,
                              lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)),
}  # fmt: skip


def _as_tensors(x: Any, n: Any) -> tuple[Tensor, Any]:
    if not isinstance(x, Tensor):
        x = n.new_full((), float(x), dtype="float32")
    if not x.is_floating_point():
        x = x.float()
    return x, n


def _evaluate(name: str, x: Any, n: Any, shifted: bool = False) -> Tensor:
    x, n = _as_tensors(x, n)
    p0, p1, step = _RECURRENCES[name]
    with no_grad():
        if shifted:
            x = 2 * x - 1
        if not isinstance(n, Tensor):
            degree = int(n)
            if degree < 0:
                return x * 0
            prev, cur = p0(x), p1(x)
            if degree == 0:
                return prev
            for k in range(1, degree):
                prev, cur = cur, step(k, x, cur, prev)
            return cur
        shape = S.broadcast(tuple(x.shape), tuple(n.shape), name)
        x, n = x.expand(*shape), n.expand(*shape)
        top = max(int(n.max().item()), 0) if n.numel() else 0
        values = [p0(x), p1(x)]
        for k in range(1, top):
            values.append(step(k, x, values[-1], values[-2]))
        table = stack(values[: top + 1], -1)  # [..., degree]
        out = table.gather(-1, n.long().clamp(0, top).unsqueeze(-1)).squeeze(-1)
        return where(n < 0, x * 0, out)


def _make(name: str, shifted_from: str | None = None) -> Callable[[Any, Any], Tensor]:
    base = shifted_from or name

    def fn(input: Any, n: Any) -> Tensor:  # noqa: A002 - PyTorch's name
        return _evaluate(base, input, n, shifted=shifted_from is not None)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(x, n)``: the polynomial of degree ``n`` at ``x`` (no derivative)."
    return fn


chebyshev_polynomial_t = _make("chebyshev_polynomial_t")
chebyshev_polynomial_u = _make("chebyshev_polynomial_u")
chebyshev_polynomial_v = _make("chebyshev_polynomial_v")
chebyshev_polynomial_w = _make("chebyshev_polynomial_w")
shifted_chebyshev_polynomial_t = _make("shifted_chebyshev_polynomial_t", "chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _make("shifted_chebyshev_polynomial_u", "chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _make("shifted_chebyshev_polynomial_v", "chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _make("shifted_chebyshev_polynomial_w", "chebyshev_polynomial_w")
hermite_polynomial_h = _make("hermite_polynomial_h")
hermite_polynomial_he = _make("hermite_polynomial_he")
laguerre_polynomial_l = _make("laguerre_polynomial_l")
legendre_polynomial_p = _make("legendre_polynomial_p")

__all__ = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
]
