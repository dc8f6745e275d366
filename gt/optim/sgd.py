"""``SGD``: stochastic gradient descent with momentum, dampening, weight decay and Nesterov."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.optim._options import group_lr, group_momentum, near_p, reject_differentiable
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum, weight decay and Nesterov momentum.

    For each parameter ``p`` with gradient ``g`` (PyTorch's formulation):
    ``g += weight_decay * p``; ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` at the
    first step); ``g = g + momentum * buf`` with Nesterov, else ``g = buf``; ``p -= lr * g``.
    """

    SPARSE_GRADIENTS = "dense"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        reject_differentiable("SGD", differentiable)
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(
                f"SGD: invalid hyperparameters lr={lr}, momentum={momentum}, weight_decay={weight_decay}"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
                foreach=foreach,
                differentiable=differentiable,
                fused=fused,
            ),
        )

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        if group["maximize"]:
            g = -g
        wd, mom = group["weight_decay"], group_momentum(group, p)
        if wd:
            g = g + p * wd
        if dict.get(group, "momentum"):  # (the number's: the group captures again if it turns 0)
            mom = near_p(mom, mom, group, p)  # (on the worker: rounded to p's dtype, as the number)
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = g.clone()
            else:
                damp = 1.0 - group["dampening"]
                buf.mul_(mom).add_(g if damp == 1.0 else g * damp)
            g = g + buf * mom if group["nesterov"] else buf
        lr = group_lr(group, p)
        if type(lr) is float or type(lr) is int:  # one fused pass, bit for bit p - g * lr
            p.add_(g, alpha=-lr)
        elif lr is dict.get(group, "lr"):  # a tensor the program gave
            p.sub_(g * lr)
        else:  # the rate on the worker (float64): rounded to p's dtype as alpha= rounds it
            p.sub_(g * lr.to(p.dtype))
