"""``gt.quasirandom.SobolEngine``: Sobol low-discrepancy sequences, as ``torch.quasirandom``.

Points are made on the host (30-bit integers, PyTorch's precision) and uploaded. Without
scrambling, point ``n`` is the XOR of the direction numbers picked by the bits of ``n``'s Gray code,
the order PyTorch draws in, so the sequence is PyTorch's point for point. The direction numbers
come from Joe and Kuo's primitive polynomials and initial values ("Constructing Sobol sequences
with better two-dimensional projections", SIAM J. Sci. Comput. 30, 2008), of which GT carries the
first 21 dimensions. Scrambling (random linear matrix scrambling and a digital shift) draws from
GT's own seeded generator, so scrambled points are valid Sobol points but not PyTorch's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.factories import tensor
from gt.ops.functions import write_out

MAXBIT = 30
#: (degree s, coefficients a, initial m_1..m_s) of dimensions 2, 3, ... (Joe and Kuo).
_POLYNOMIALS = [
    (1, 0, [1]), (2, 1, [1, 3]), (3, 1, [1, 3, 1]), (3, 2, [1, 1, 1]), (4, 1, [1, 1, 3, 3]),
    (4, 4, [1, 3, 5, 13]), (5, 2, [1, 1, 5, 5, 17]), (5, 4, [1, 1, 5, 5, 5]),
    (5, 7, [1, 1, 7, 11, 19]), (5, 11, [1, 1, 5, 1, 1]), (5, 13, [1, 1, 1, 3, 11]),
    (5, 14, [1, 3, 5, 5, 31]), (6, 1, [1, 3, 3, 9, 7, 49]), (6, 13, [1, 1, 1, 15, 21, 21]),
    (6, 16, [1, 3, 1, 13, 27, 49]), (6, 19, [1, 1, 1, 15, 7, 5]), (6, 22, [1, 3, 1, 15, 13, 25]),
    (6, 25, [1, 1, 5, 5, 19, 61]), (7, 1, [1, 3, 7, 11, 23, 15, 103]),
    (7, 4, [1, 3, 7, 13, 13, 15, 69]),
]  # fmt: skip
MAX_DIMENSION = len(_POLYNOMIALS) + 1


def _direction_numbers(s: int, a: int, m: list[int]) -> list[int]:
    """The ``MAXBIT`` direction numbers of one dimension (Bratley and Fox's recurrence)."""
    m = list(m)
    for k in range(s, MAXBIT):
        new = m[k - s] ^ (m[k - s] << s)
        for i in range(1, s):
            if (a >> (s - 1 - i)) & 1:
                new ^= m[k - i] << i
        m.append(new)
    return [m[k] << (MAXBIT - 1 - k) for k in range(MAXBIT)]


def direction_numbers(dimension: int) -> np.ndarray:
    """``[dimension, MAXBIT]`` int64: the first dimension's ``2^(29-k)``, then Joe and Kuo's."""
    if not 1 <= dimension <= MAX_DIMENSION:
        raise NotImplementedError(
            f"SobolEngine: dimension {dimension} is not supported in GT (1 to {MAX_DIMENSION}; "
            "PyTorch's table reaches 21201)"
        )
    rows = [[1 << (MAXBIT - 1 - k) for k in range(MAXBIT)]]
    rows += [_direction_numbers(*p) for p in _POLYNOMIALS[: dimension - 1]]
    return np.array(rows, dtype=np.int64)


class SobolEngine:
    """A Sobol sequence of ``dimension`` coordinates in ``[0, 1)`` (PyTorch's engine).

    Args:
        dimension: coordinates per point (1 to 21 in GT).
        scramble: scramble the sequence (linear matrix scrambling and a digital shift).
        seed: the scrambling's seed.
    """

    MAXBIT = MAXBIT
    MAXDIM = MAX_DIMENSION

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None):
        self.dimension, self.scramble, self.seed = int(dimension), bool(scramble), seed
        v = direction_numbers(self.dimension)
        self.shift = np.zeros(self.dimension, dtype=np.int64)
        if scramble:
            rng = np.random.default_rng(seed)
            v = self._scrambled(v, rng)
            self.shift = rng.integers(0, 1 << MAXBIT, self.dimension, dtype=np.int64)
        self._v = v
        self.num_generated = 0

    @staticmethod
    def _scrambled(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each dimension's direction numbers times a random lower-triangular binary matrix
        with a unit diagonal (over GF(2), bits from the most significant down)."""
        out = np.zeros_like(v)
        for d in range(v.shape[0]):
            lower = np.tril(rng.integers(0, 2, (MAXBIT, MAXBIT)), -1) + np.eye(
                MAXBIT, dtype=np.int64
            )
            bits = (v[d][:, None] >> np.arange(MAXBIT - 1, -1, -1)) & 1  # [k, bit from the top]
            mixed = (bits @ lower.T) % 2
            out[d] = (mixed << np.arange(MAXBIT - 1, -1, -1)).sum(1)
        return out

    def _points(self, start: int, n: int) -> np.ndarray:
        index = np.arange(start, start + n, dtype=np.int64)
        gray = index ^ (index >> 1)
        quasi = np.zeros((n, self.dimension), dtype=np.int64)
        for j in range(MAXBIT):
            on = ((gray >> j) & 1).astype(bool)
            quasi[on] ^= self._v[:, j]
        return (quasi ^ self.shift) * (1.0 / (1 << MAXBIT))

    def draw(self, n: int = 1, out: Any = None, dtype: Any = None) -> Any:
        """The next ``n`` points, ``[n, dimension]`` (the default float dtype unless ``dtype``)."""
        from gt.ops.typeinfo import get_default_dtype  # noqa: PLC0415 - follows set_default_dtype

        points = self._points(self.num_generated, int(n))
        self.num_generated += int(n)
        result = tensor(points, dtype=dtype or get_default_dtype())
        return result if out is None else write_out(out, result, "draw")

    def draw_base2(self, m: int, out: Any = None, dtype: Any = None) -> Any:
        """The next ``2**m`` points (keeping the total a power of two, as PyTorch requires)."""
        n = 2**m
        total = self.num_generated + n
        if total & (total - 1):
            raise ValueError(
                "The balance properties of Sobol' points require n to be a power of 2. "
                f"{self.num_generated} points have been previously generated, then: "
                f"n={self.num_generated}+2**{m}={total}. If you still want to do this, please "
                "use 'SobolEngine.draw()' instead."
            )
        return self.draw(n, out, dtype)

    def reset(self) -> SobolEngine:
        """Back to the first point."""
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> SobolEngine:
        """Skip the next ``n`` points."""
        self.num_generated += int(n)
        return self

    def __repr__(self) -> str:
        extra = [f"dimension={self.dimension}"]
        if self.scramble:
            extra.append("scramble=True")
        if self.seed is not None:
            extra.append(f"seed={self.seed}")
        return f"SobolEngine({', '.join(extra)})"


__all__ = ["SobolEngine"]
