"""``Adadelta`` and ``ASGD`` with PyTorch's arguments, defaults, state names and update formulas.

Every update runs as tensor ops on the workers (no sync point). With ``capturable=True`` the
step count (and ASGD's ``eta`` and ``mu``) live on the worker, so that a step under ``@gt.hot`` is
the same instructions every call; the results are the same as without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gt.optim._options import (
    begin,
    check_lr_eps_wd,
    group_lr,
    like,
    reject_differentiable,
    require,
)
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012): steps scaled by the ratio of running RMS of updates and gradients.

    ``v = rho*v + (1-rho)*g*g``; ``delta = sqrt(u + eps)/sqrt(v + eps) * g``;
    ``u = rho*u + (1-rho)*delta*delta``; ``p -= lr*delta``.
    State: ``step``, ``square_avg`` (``v``), ``acc_delta`` (``u``).

    Args:
        params: tensors or parameter groups.
        lr, rho, eps, weight_decay: as in PyTorch (``weight_decay`` adds ``wd*p`` to ``g``).
        foreach: accepted; GT's steps are already batched into worker instructions.
        capturable: keep the step count on the worker (see the module docstring).
        maximize: ascend instead of descend.
        differentiable: not supported (``NotImplementedError``).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False):  # fmt: skip
        check_lr_eps_wd(lr, eps, weight_decay)
        require(0.0 <= rho <= 1.0, f"Invalid rho value: {rho}")
        reject_differentiable("Adadelta", differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        g, _ = begin(p, g, group, state, ("square_avg", "acc_delta"))
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]
        if wd:
            g = g + p * wd
        v, u = state["square_avg"], state["acc_delta"]
        v.mul_(rho).addcmul_(g, g, value=1.0 - rho)
        delta = (u + eps).sqrt() / (v + eps).sqrt() * g
        u.mul_(rho).addcmul_(delta, delta, value=1.0 - rho)
        lr = group_lr(group, p)
        if lr is not dict.get(group, "lr"):  # the rate on the worker (float64): rounded to p's
            lr = like(lr, p)  # dtype as the Python number would be where it meets p
        p.add_(delta * -lr)


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky, 1992; the schedule of Bottou, 2012).

    ``p *= 1 - lambd*eta``; ``p -= eta*g``; ``ax += mu*(p - ax)`` (``ax = p`` while ``mu == 1``);
    then ``eta = lr / (1 + lambd*lr*t)^alpha`` and ``mu = 1/max(1, t - t0)``. The averaged
    parameters are ``state[p]["ax"]``; averaging starts after ``t0`` steps.
    State: ``step``, ``eta``, ``mu``, ``ax``.

    Args:
        params: tensors or parameter groups.
        lr, lambd, alpha, t0, weight_decay: as in PyTorch (``weight_decay`` adds ``wd*p``).
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
        differentiable: not supported (``NotImplementedError``).
        capturable: keep ``step``, ``eta`` and ``mu`` on the worker (see the module docstring).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):  # fmt: skip
        check_lr_eps_wd(lr, None, weight_decay)
        reject_differentiable("ASGD", differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        # (the rate as a number only where the state is made: its first eta)
        g, t = begin(p, g, group, state, ("ax",), eta=None if state else group["lr"], mu=1.0)
        lambd, alpha, wd = group["lambd"], group["alpha"], group["weight_decay"]
        # the next eta from the rate on the worker when captured (float64, as the number's)
        lr = group_lr(group, p)
        if wd:
            g = g + p * wd
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        p.mul_(like(1.0 - lambd * eta, p))
        p.sub_(g * like(eta, p))
        if isinstance(mu, Tensor):
            ax.add_((p - ax) * like(mu, p))
        elif mu != 1.0:
            ax.add_((p - ax) * mu)
        else:  # no averaging yet: the average is the last iterate
            ax.copy_(p)
        new_eta = lr / (1.0 + lambd * lr * t) ** alpha
        if isinstance(t, Tensor):
            eta.copy_(new_eta)
            mu.copy_(1.0 / (t - group["t0"]).clamp(min=1.0))
        else:
            state["eta"] = new_eta
            state["mu"] = 1.0 / max(1.0, t - group["t0"])
