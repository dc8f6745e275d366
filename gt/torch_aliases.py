"""More ``torch.<name>`` functions that are other functions under PyTorch's native spelling:
the losses with an integer ``reduction`` (``torch.kl_div(x, y, 1)``: 0 none, 1 mean, 2 sum), the
``*_copy`` forms of the views (a view's values in new storage), ``unsafe_split``/``unsafe_chunk``,
``constant_pad_nd``, ``scalar_tensor``, ``frobenius_norm``/``nuclear_norm`` and the conjugate and
negative bit queries. Imported by :mod:`gt._api` only."""

from __future__ import annotations

from typing import Any

from gt import linalg as _linalg
from gt.factories import tensor as _tensor
from gt.nn import functional as F
from gt.ops.functions import method_function
from gt.settings import contiguous_format as _CONTIGUOUS

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value: Any, name: str) -> str:
    if value in _REDUCTIONS:
        return _REDUCTIONS[value]
    raise ValueError(
        f"torch.{name}: reduction must be 0 (none), 1 (mean) or 2 (sum), not {value!r}"
    )


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None,  # noqa: A002
                                     pos_weight: Any = None, reduction: int = 1) -> Any:  # fmt: skip
    """``F.binary_cross_entropy_with_logits`` with an integer reduction."""
    return F.binary_cross_entropy_with_logits(input, target, weight, pos_weight=pos_weight,
                                              reduction=_reduction(reduction, "binary_cross_entropy_with_logits"))  # fmt: skip


def kl_div(input: Any, target: Any, reduction: int = 1, *, log_target: bool = False) -> Any:  # noqa: A002
    """``F.kl_div`` with an integer reduction (1 is the mean over every element)."""
    red = _reduction(reduction, "kl_div")
    return F.kl_div(input, target, reduction="sum" if red == "mean" else red,
                    log_target=log_target) / (input.numel() if red == "mean" else 1)  # fmt: skip


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                          reduction: int = 1) -> Any:  # fmt: skip
    """``F.cosine_embedding_loss`` with an integer reduction."""
    return F.cosine_embedding_loss(input1, input2, target, margin=margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))  # fmt: skip


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,  # noqa: A002
                         reduction: int = 1) -> Any:  # fmt: skip
    """``F.hinge_embedding_loss`` with an integer reduction."""
    return F.hinge_embedding_loss(input, target, margin=margin,
                                  reduction=_reduction(reduction, "hinge_embedding_loss"))  # fmt: skip


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                        reduction: int = 1) -> Any:  # fmt: skip
    """``F.margin_ranking_loss`` with an integer reduction."""
    return F.margin_ranking_loss(input1, input2, target, margin=margin,
                                 reduction=_reduction(reduction, "margin_ranking_loss"))  # fmt: skip


def poisson_nll_loss(input: Any, target: Any, log_input: bool, full: bool, eps: float,  # noqa: A002
                     reduction: int) -> Any:  # fmt: skip
    """``F.poisson_nll_loss`` with PyTorch's positional native arguments."""
    return F.poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))  # fmt: skip


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        reduction: int = 1) -> Any:  # fmt: skip
    """``F.triplet_margin_loss`` with an integer reduction."""
    return F.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps,
                                 swap=swap, reduction=_reduction(reduction, "triplet_margin_loss"))  # fmt: skip


cosine_similarity = F.cosine_similarity


def constant_pad_nd(input: Any, pad: Any, value: float = 0) -> Any:  # noqa: A002
    """``F.pad(input, pad, value=value)``."""
    return F.pad(input, list(pad), mode="constant", value=value)


def scalar_tensor(s: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
                  **_: Any) -> Any:  # fmt: skip
    """A 0-d tensor of ``s`` (float32 by default, as PyTorch's, even for an int)."""
    from gt.ops.typeinfo import get_default_dtype  # noqa: PLC0415 - the default at call time

    return _tensor(s, dtype=dtype or get_default_dtype(), device=device,
                   requires_grad=requires_grad)  # fmt: skip


def frobenius_norm(input: Any, dim: Any = (-2, -1), keepdim: bool = False) -> Any:  # noqa: A002
    """The square root of the sum of squares over ``dim``."""
    return _linalg.vector_norm(input, 2, dim=dim, keepdim=keepdim)


def nuclear_norm(input: Any, dim: Any = (-2, -1), keepdim: bool = False) -> Any:  # noqa: A002
    """The sum of the singular values of the matrices over ``dim``."""
    if isinstance(dim, bool):  # (torch.nuclear_norm(input, keepdim))
        dim, keepdim = (-2, -1), dim
    return _linalg.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim)


# The method's function form (``gt.is_conj(x)`` is ``x.is_conj()`` ...), made as gt's others are.
is_conj, is_neg, resolve_conj, resolve_neg, unsafe_split, unsafe_split_with_sizes, unsafe_chunk = (
    method_function(name)
    for name in ("is_conj", "is_neg", "resolve_conj", "resolve_neg", "unsafe_split",
                 "unsafe_split_with_sizes", "unsafe_chunk")
)  # fmt: skip


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: int = 1, zero_infinity: bool = False) -> Any:  # fmt: skip
    """``F.ctc_loss`` with an integer reduction."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction=_reduction(reduction, "ctc_loss"), zero_infinity=zero_infinity)  # fmt: skip


def _copy_form(method: str) -> Any:
    def fn(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        out = getattr(input, method)(*args, **kwargs)
        # (contiguous, as PyTorch's copies are: a plain clone keeps a transpose's strides)
        if isinstance(out, (list, tuple)):
            return [t.clone(memory_format=_CONTIGUOUS) for t in out]
        return out.clone(memory_format=_CONTIGUOUS)

    fn.__name__ = fn.__qualname__ = f"{method}_copy"
    fn.__doc__ = f"``input.{method}(...)``'s values in new storage (PyTorch's ``{method}_copy``)."
    return fn


_COPIES = ("view", "t", "permute", "diagonal", "expand", "squeeze", "unsqueeze", "transpose",
           "select", "split", "unbind", "detach", "unfold", "as_strided", "view_as_real",
           "view_as_complex")  # fmt: skip
globals().update({f"{m}_copy": _copy_form(m) for m in _COPIES})


def alias_copy(input: Any) -> Any:  # noqa: A002
    """A contiguous copy of ``input`` (PyTorch's ``alias_copy``)."""
    return input.clone(memory_format=_CONTIGUOUS)


def split_with_sizes_copy(input: Any, split_sizes: Any, dim: int = 0) -> list:  # noqa: A002
    """``input.split(split_sizes, dim)``, each piece in new contiguous storage."""
    return [t.clone(memory_format=_CONTIGUOUS) for t in input.split(list(split_sizes), dim)]


def slice_copy(input: Any, dim: int = 0, start: Any = None, end: Any = None,  # noqa: A002
               step: int = 1) -> Any:  # fmt: skip
    """``input`` sliced ``start:end:step`` along ``dim``, in new contiguous storage."""
    dim = dim % input.ndim if input.ndim else 0
    part = input[(slice(None),) * dim + (slice(start, end, step),)]
    return part.clone(memory_format=_CONTIGUOUS)


__all__ = ["binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "poisson_nll_loss",
           "triplet_margin_loss", "cosine_similarity", "constant_pad_nd", "scalar_tensor",
           "frobenius_norm", "nuclear_norm", "is_conj", "is_neg", "resolve_conj", "resolve_neg",
           "alias_copy", "split_with_sizes_copy", "slice_copy", "unsafe_split",
           "unsafe_split_with_sizes", "unsafe_chunk",
           "ctc_loss", *(f"{m}_copy" for m in _COPIES)]  # fmt: skip
