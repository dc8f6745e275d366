"""``torch.lobpcg`` (solved exactly by a dense ``eigh``, LOBPCG's ordering, defaults and
errors) and the control-flow operators ``torch.cond`` and ``torch.while_loop``, run eagerly with
PyTorch's eager checks and messages. Probed against PyTorch 2.13 on the CPU. Imported by
:mod:`gt.torch_level` only."""

from __future__ import annotations

import builtins
from typing import Any

from gt import linalg as _linalg
from gt.ops.views import as_new
from gt.tensor import Tensor


# ----------------------------------------------------------------------------- lobpcg
def lobpcg(A: Any, k: int | None = None, B: Any = None, X: Any = None, n: int | None = None,  # noqa: N803
           iK: Any = None, niter: int | None = None, tol: float | None = None,  # noqa: N803
           largest: bool | None = None, method: str | None = None, tracker: Any = None,
           ortho_iparams: Any = None, ortho_fparams: Any = None,
           ortho_bparams: Any = None) -> tuple[Any, Any]:  # fmt: skip
    """The ``k`` largest (``largest=False``: smallest) eigenpairs of the symmetric ``A``, or of
    the generalised problem ``A x = λ B x`` with ``B`` positive definite, as PyTorch's LOBPCG
    returns them (largest first, or smallest first). GT solves the dense problem exactly
    (``eigh``) rather than iterating, so the eigenvalues are those LOBPCG converges to; the
    eigenvectors are ``B``-orthonormal, up to sign."""
    m = A.shape[-1]
    if k is None:
        k = 1 if X is None else X.shape[-1]
    if n is None:
        n = k if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(
            f"LOBPCG algorithm is not applicable when the number of A rows (={m}) is smaller "
            f"than 3 x the number of requested eigenpairs (={n})"
        )
    largest = True if largest is None else bool(largest)
    if B is None:
        vals, vecs = _linalg.eigh(A)
    else:  # L^-1 A L^-T y = λ y, x = L^-T y
        chol = _linalg.cholesky(B)
        inv = _linalg.inv(chol)
        vals, y = _linalg.eigh(inv @ A @ inv.mT)
        vecs = inv.mT @ y
    if largest:
        vals, vecs = vals.flip(-1), vecs.flip(-1)
    # (tensors of their own, as PyTorch's: contiguous, not slices of the whole decomposition)
    return as_new(vals[..., :k]), as_new(vecs[..., :k])


# ----------------------------------------------------------------------------- control flow
def _leaves(tree: Any) -> list:
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _leaves(t)]
    return [tree]


def cond(pred: Any, true_fn: Any, false_fn: Any, operands: Any = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, run eagerly as PyTorch's
    ``torch.cond`` runs outside ``compile``: a Python ``pred`` just picks the branch; a tensor
    one must have one element, the branches be callable and the operands tensors."""
    if isinstance(pred, (builtins.bool, builtins.int, builtins.float)):
        return true_fn(*operands) if pred else false_fn(*operands)
    if not isinstance(pred, Tensor):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)) or not builtins.all(
        isinstance(t, Tensor) for t in _leaves(operands)
    ):
        raise RuntimeError(
            "Expect operands to be a tuple of possibly nested dict/list/tuple that only "
            f"consists of tensor leaves, but got {operands}."
        )
    return true_fn(*operands) if pred.item() else false_fn(*operands)


def _go_on(pred: Any) -> bool:
    if isinstance(pred, Tensor):
        if pred.ndim != 0:
            raise RuntimeError(
                "torch.while_loop: Expected cond_fn to return a scalar tensor or a bool but got "
                f"{pred.shape}."
            )
        return builtins.bool(pred.item())
    return builtins.bool(pred)


def while_loop(cond_fn: Any, body_fn: Any, carried_inputs: Any) -> Any:
    """``while cond_fn(*carried): carried = body_fn(*carried)``, run eagerly; the result is
    ``body_fn``'s last value (a tuple, or the one value it returns), ``carried_inputs`` (as a
    tuple) when the loop never runs. ``cond_fn`` must give a bool or a 0-d tensor, ``body_fn``
    as many values as are carried, with their shapes and dtypes."""
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("Expect cond_fn and body_fn to be callable.")
    flat = _leaves(carried_inputs)
    bad = tuple(type(t) for t in flat if not isinstance(t, (Tensor, builtins.int)))
    if bad:
        raise AssertionError(f"{flat} can only be of ({Tensor}, {builtins.int}) but got {bad}")
    if not isinstance(carried_inputs, (tuple, list)) or not builtins.all(
        isinstance(t, (Tensor, builtins.int)) for t in _leaves(carried_inputs)
    ):
        raise RuntimeError(
            "Expect carried_inputs to be a tuple of possibly nested dict/list/tuple that only"
            f"consists of tensor or int leaves, but got {carried_inputs}."
        )
    carried = tuple(carried_inputs)
    result: Any = carried
    while _go_on(cond_fn(*carried)):
        out = body_fn(*carried)
        new = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(new) != len(carried):
            raise RuntimeError(
                "Expected body_fn_output and carried_inputs to have same number of outputs but "
                f"got {len(new)} vs {len(carried)}"
            )
        for i, (a, b) in enumerate(zip(new, carried)):
            if isinstance(a, Tensor) and isinstance(b, Tensor):
                for what, x, y in (("dtype", a.dtype, b.dtype), ("size", tuple(a.shape), tuple(b.shape))):  # fmt: skip
                    if x != y:
                        raise RuntimeError(
                            "Expected body_fn_output and carried_inputs to have same metadata "
                            f"but found:\npair[{i}] differ in '{what}: {x} vs {y}'"
                        )
        carried, result = new, (new if isinstance(out, (tuple, list)) else out)
    return result


def _assert(condition: Any, message: str) -> None:
    """``torch._assert``: ``AssertionError(message)`` unless ``condition`` (a bool, or a
    one-element tensor: reading it is a sync point) is true; what torchvision and timm models and
    FX traces call in ``forward``."""
    if not condition:
        raise AssertionError(message)
