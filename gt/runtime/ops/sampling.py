"""Registry entries: the checked inputs of sampling ops.

``multinomial_probs(p [..., n])`` is each row of ``p`` over its sum, what ``multinomial`` draws
from. It refuses what PyTorch's ``multinomial`` refuses, with PyTorch's messages: an entry that is
negative, infinite or NaN, and a row whose sum is not positive. The values live on the worker, so
the check runs there and its error reaches the program at its next sync point (as indexing's
bounds check does), with no round trip of its own; on CuPy it reads two flags back in one copy (a
stream synchronisation, as ``nll_loss``'s target check).

``checked_values(x)`` is ``x`` once every entry passes ``attrs.test``, else PyTorch's
``attrs.message`` as a ``RuntimeError``: the values PyTorch checks before it samples or computes
(``normal``'s stds, ``bernoulli``'s probabilities, ``poisson``'s rates, ``multi_margin_loss``'s
targets), with one flag read on CuPy. Its gradient passes through.
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


def _k_checked_values(be: Any) -> Any:
    xp = be.xp

    def h(v: list, at: Any) -> Any:
        x = v[0]
        test = at["test"]
        if test == "nonnegative":  # (``x >= 0`` is False for NaN: refused, as PyTorch's)
            bad = ~(x >= 0)
        elif test == "probability":
            bad = ~((x >= 0) & (x <= 1))
        else:  # "below": class indices in [0, bound)
            bad = (x < 0) | (x >= at["bound"])
        if x.size and bool(xp.any(bad)):  # (one flag read on CuPy)
            raise RuntimeError(at["message"])
        return x

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
    Op(
        "checked_values",
        171,
        shape=same_shape,
        dtype=first_dtype,
        kernel=_k_checked_values,
        grad=lambda n, g: (g,),
        shard="elementwise",
        doc="x itself; raises RuntimeError(attrs.message) unless every entry passes attrs.test "
        "(nonnegative, probability: in [0, 1], below: in [0, attrs.bound))",
    ),
]
