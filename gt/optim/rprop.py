"""``Rprop``: resilient backpropagation, with PyTorch's arguments, defaults, state names (``step``,
``prev``, ``step_size``) and update.

Each element keeps its own step size: multiplied by ``etaplus`` when the gradient keeps its sign,
by ``etaminus`` when it flips (and that element then skips the step and forgets its gradient),
clamped to ``step_sizes``; the parameter moves by ``-sign(g) * step_size``. Every update runs as
tensor ops on the workers (no sync point).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.factories import full_like
from gt.ops.arith import where
from gt.optim._options import begin, reject_differentiable, require
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Rprop(Optimizer):
    """Rprop (Riedmiller & Braun, 1993), PyTorch's variant.

    ``s = sign(g * prev)``; ``step_size *= etaplus`` where ``s > 0``, ``etaminus`` where
    ``s < 0``, then clamped to ``[step_size_min, step_size_max]``; ``g = 0`` where ``s < 0``;
    ``p -= sign(g) * step_size``; ``prev = g``. State: ``step``, ``prev``, ``step_size``
    (starting at ``lr``).

    Args:
        params: tensors or parameter groups.
        lr: the initial step size of every element.
        etas: ``(etaminus, etaplus)``, with ``0 < etaminus < 1 < etaplus``.
        step_sizes: ``(step_size_min, step_size_max)``.
        capturable: keep the step count on the worker (it is not used by the update).
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
        differentiable: not supported (``NotImplementedError``).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):  # fmt: skip
        require(0.0 <= lr, f"Invalid learning rate: {lr}")
        require(0.0 < etas[0] < 1.0 < etas[1], f"Invalid eta values: {etas[0]}, {etas[1]}")
        reject_differentiable("Rprop", differentiable)
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        g, _ = begin(p, g, group, state, ("prev",))
        if "step_size" not in state:
            state["step_size"] = full_like(p, group["lr"])
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        sign = (g * prev).sign()
        flipped = sign < 0
        factor = where(sign > 0, etaplus, sign)
        factor = where(flipped, etaminus, factor)
        factor = where(sign == 0, 1.0, factor)
        step_size.mul_(factor).clamp_(lo, hi)
        g = where(flipped, 0.0, g)
        p.addcmul_(g.sign(), step_size, value=-1)
        prev.copy_(g)
