"""Registry entries: the checked inputs of sampling ops.

``multinomial_probs(p [..., n])`` is each row of ``p`` over its sum, what ``multinomial`` draws
from. It refuses what PyTorch's ``multinomial`` refuses, with PyTorch's messages: an entry that is
negative, infinite or NaN, and a row whose sum is not positive. The values live on the worker, so
the check runs there and its error reaches the program at its next sync point (as indexing's
bounds check does), with no round trip of its own; on CuPy it reads two flags back in one copy (a
stream synchronisation, as ``nll_loss``'s target check).
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import Op, first_dtype, same_shape

#: PyTorch's message for an entry < 0, inf or NaN.
BAD_ENTRY = "probability tensor contains either `inf`, `nan` or element < 0"
#: PyTorch's message for a row that sums to 0 (or less).
BAD_SUM = "invalid multinomial distribution (sum of probabilities <= 0)"


def _k_multinomial_probs(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        p = v[0]
        total = p.sum(-1, keepdims=True)
        # (``p >= 0`` is False for NaN; both flags in one read, for CuPy's sake)
        bad_entry, bad_sum = xp.stack(
            [(~(p >= 0) | xp.isinf(p)).any(), (total <= 0).any()]
        ).tolist()
        if bad_entry:
            raise ValueError(BAD_ENTRY)
        if bad_sum:
            raise ValueError(BAD_SUM)
        return p / total

    return h


ENTRIES: list[Op] = [
    Op(
        "multinomial_probs",
        165,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_multinomial_probs,
        doc="each row over its sum; refuses entries < 0, inf or NaN and rows summing to <= 0",
    ),
]
