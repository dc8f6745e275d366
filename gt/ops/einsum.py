"""``gt.einsum``, composed from permutes, reshapes, sums and batched matmuls.

Operands are contracted left to right, two at a time: indices only one operand has are summed out
first, then the pair becomes one ``[batch, left, contracted] @ [batch, contracted, right]`` matmul.
Repeated indices within one operand (``"ii->i"``) take the diagonal. ``...`` broadcasts as in
PyTorch. Gradients come from the primitives.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Any

from gt import shapes as S
from gt.errors import ShapeError
from gt.grad_graph import label

if TYPE_CHECKING:
    from gt.tensor import Tensor

_FREE = list(string.ascii_letters)


def _parse(equation: str, operands: list) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum(): {len(terms)} operand(s) in the equation but {len(operands)} tensor(s) given"
        )
    used = set(eq) - set(",->.")
    spare = [c for c in _FREE if c not in used]
    ell_dims = max(
        (t.ndim - (len(term) - 3) for term, t in zip(terms, operands) if "..." in term), default=0
    )
    ell = "".join(spare[:ell_dims])
    out_terms = []
    for term, t in zip(terms, operands):
        if "..." in term:
            n = t.ndim - (len(term) - 3)
            term = term.replace("...", ell[ell_dims - n :] if n else "")
        if len(term) != t.ndim:
            raise ShapeError(
                f"einsum(): the equation names {len(term)} dimension(s) for an operand of shape "
                f"{list(t.shape)}"
            )
        out_terms.append(term)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit output: the ellipsis dims, then the indices seen once, in order
        counts: dict[str, int] = {}
        for term in out_terms:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return out_terms, out


def _diagonal(t: Tensor, term: str) -> tuple[Tensor, str]:
    """Take the diagonal over repeated indices of one operand."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        i = term.index(c)
        j = term.index(c, i + 1)
        t = t.diagonal(0, i, j)
        term = "".join(x for k, x in enumerate(term) if k not in (i, j)) + c
    return t, term


def _sum_out(t: Tensor, term: str, keep: set[str]) -> tuple[Tensor, str]:
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if not axes:
        return t, term
    return t.sum(axes), "".join(c for c in term if c in keep)


def _align(t: Tensor, term: str, order: str, sizes: dict[str, int]) -> Tensor:
    """Permute ``t`` to ``order`` (indices it lacks become size-1 dimensions)."""
    perm = [term.index(c) for c in order if c in term]
    shape = [t.shape[term.index(c)] if c in term else 1 for c in order]
    t = t.permute(perm) if perm != sorted(perm) else t
    return t.reshape(shape)


def _contract(a: Tensor, ta: str, b: Tensor, tb: str, keep: set[str]) -> tuple[Tensor, str]:
    sizes: dict[str, int] = {}
    for term, t in ((ta, a), (tb, b)):
        for c, n in zip(term, t.shape):
            have = sizes.get(c, n)
            if have != n and 1 not in (have, n):
                raise ShapeError(f"einsum(): index {c!r} has sizes {have} and {n}")
            sizes[c] = max(have, n)
    batch = "".join(c for c in ta if c in tb and c in keep)
    contracted = "".join(c for c in ta if c in tb and c not in keep)
    left = "".join(c for c in ta if c not in tb)
    right = "".join(c for c in tb if c not in ta)
    if not contracted:  # an outer product over the batch: broadcasting is enough
        order = batch + left + right
        return _align(a, ta, order, sizes) * _align(b, tb, order, sizes), order
    am = _align(a, ta, batch + left + contracted, sizes)
    bm = _align(b, tb, batch + contracted + right, sizes)
    nb = [sizes[c] for c in batch]
    nl, nc, nr = (S.prod(sizes[c] for c in s) for s in (left, contracted, right))
    am = am.expand(nb + [sizes[c] for c in left + contracted]).reshape(nb + [nl, nc])
    bm = bm.expand(nb + [sizes[c] for c in contracted + right]).reshape(nb + [nc, nr])
    out = (am @ bm).reshape(nb + [sizes[c] for c in left + right])
    return out, batch + left + right


def _from_sublists(args: tuple) -> tuple[str, tuple]:
    """The equation and operands of the sublist form ``einsum(op, sublist, ..., [out])``:
    subscripts are ints in ``[0, 52)`` (``a``-``z`` then ``A``-``Z``) or ``...``."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sub: Any) -> str:
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and 0 <= s < len(letters):
                out.append(letters[s])
            else:
                raise ValueError(f"einsum(): subscript {s!r} is not within the valid range [0, 52)")
        return "".join(out)

    operands = args[0::2][: len(args) // 2]
    terms = [term(sub) for sub in args[1::2][: len(args) // 2]]
    equation = ",".join(terms)
    if len(args) % 2:
        equation += "->" + term(args[-1])
    return equation, tuple(operands)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation, as ``torch.einsum`` (``"bij,bjk->bik"``, ``"i,j->ij"``, ``"ii"``, ...).

    Args:
        equation: subscripts of each operand, comma-separated, then optionally ``->`` and the
            output's subscripts.
        *operands: the tensors (or one list of them).
    """
    if not isinstance(equation, str):  # einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _from_sublists((equation, *operands))
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, out = _parse(equation, list(operands))
    tensors = list(operands)
    for i, (t, term) in enumerate(zip(tensors, terms)):
        tensors[i], terms[i] = _diagonal(t, term)
    acc, acc_term = tensors[0], terms[0]
    product = False  # whether the last contraction was a matrix product
    for k in range(1, len(tensors)):
        later = set(out).union(*terms[k + 1 :])
        acc, acc_term = _sum_out(acc, acc_term, later | set(terms[k]))
        t, tt = _sum_out(tensors[k], terms[k], later | set(acc_term))
        product = any(c in tt and c not in later for c in acc_term)
        acc, acc_term = _contract(acc, acc_term, t, tt, later)
    acc, kept = _sum_out(acc, acc_term, set(out))
    summed, acc_term = kept != acc_term, kept
    if acc_term != out:
        acc = acc.permute([acc_term.index(c) for c in out])
    if len(tensors) == 1:  # PyTorch's one operand: its diagonals, a permute, then any sum
        if acc is operands[0]:  # ("ij->ij": a new view all the same, as PyTorch's permute)
            acc = acc.unsqueeze(0).squeeze(0)
        return label(acc, "SumBackward1" if summed else "PermuteBackward0")
    # PyTorch permutes its operands before the product and views the result: ViewBackward0
    return label(acc, "ViewBackward0") if product else acc
