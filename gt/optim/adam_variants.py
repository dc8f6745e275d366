"""``Adamax``, ``NAdam`` and ``RAdam``: Adam's relatives, with PyTorch's arguments, defaults, state
names (``step``, ``exp_avg``, ``exp_inf`` / ``exp_avg_sq``, ``mu_product``) and update formulas.

Every update runs as tensor ops on the workers (no sync point). With ``capturable=True`` the step
count lives on the worker and every step-dependent factor is computed there, so that a step under
``@gt.hot`` is the same instructions every call; the results are the same as without it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gt.ops.arith import where
from gt.optim._options import (
    add_ratio,
    begin,
    check_betas,
    check_lr_eps_wd,
    decay_weights,
    group_betas,
    group_lr,
    like,
    near_p,
    reject_differentiable,
    require,
)
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor


class Adamax(Optimizer):
    """Adamax (Kingma & Ba, section 7): Adam with the infinity norm in place of the second moment.

    ``m = lerp(m, g, 1-b1)``; ``u = max(b2*u, |g| + eps)``; ``p -= lr/(1-b1^t) * m/u``.
    State: ``step``, ``exp_avg`` (``m``), ``exp_inf`` (``u``).

    Args:
        params: tensors or parameter groups.
        lr, betas, eps, weight_decay: as in PyTorch (``weight_decay`` adds ``wd*p`` to ``g``).
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
        differentiable: not supported (``NotImplementedError``).
        capturable: keep the step count on the worker (see the module docstring).
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):  # fmt: skip
        check_lr_eps_wd(lr, eps, weight_decay)
        check_betas(betas)
        reject_differentiable("Adamax", differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        g, t = begin(p, g, group, state, ("exp_avg", "exp_inf"))
        (b1, b2), eps = group_betas(group, p), group["eps"]
        g = decay_weights(p, g, group, decoupled=False)
        m, u = state["exp_avg"], state["exp_inf"]
        m.lerp_(g, near_p(1.0 - b1, b1, group, p))
        u.copy_((u * b2).maximum(g.abs() + eps))
        add_ratio(p, m, u, like(-group_lr(group, p) / (1.0 - b1**t), p))


class NAdam(Optimizer):
    """NAdam (Dozat, 2016): Adam with Nesterov momentum and a momentum schedule.

    With ``mu_t = b1*(1 - 0.5*0.96^(t*momentum_decay))`` and ``mu_product = prod(mu_1..mu_t)``:
    ``m = lerp(m, g, 1-b1)``; ``v = b2*v + (1-b2)*g*g``; ``denom = sqrt(v/(1-b2^t)) + eps``;
    ``p -= lr*(1-mu_t)/(1-mu_product) * g/denom + lr*mu_{t+1}/(1-mu_product*mu_{t+1}) * m/denom``.
    ``decoupled_weight_decay=True`` (NAdamW) scales ``p`` by ``1 - lr*wd`` instead of adding
    ``wd*p`` to the gradient. State: ``step``, ``mu_product``, ``exp_avg``, ``exp_avg_sq``.

    Args:
        params: tensors or parameter groups.
        lr, betas, eps, weight_decay, momentum_decay, decoupled_weight_decay: as in PyTorch.
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
        capturable: keep ``step`` and ``mu_product`` on the worker (see the module docstring).
        differentiable: not supported (``NotImplementedError``).
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):  # fmt: skip
        check_lr_eps_wd(lr, eps, weight_decay)
        check_betas(betas)
        require(0.0 <= momentum_decay, f"Invalid momentum_decay value: {momentum_decay}")
        reject_differentiable("NAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        g, t = begin(p, g, group, state, ("exp_avg", "exp_avg_sq"), mu_product=1.0)
        (b1, b2), eps, md = group_betas(group, p), group["eps"], group["momentum_decay"]
        lr = group_lr(group, p)
        g = decay_weights(p, g, group, group["decoupled_weight_decay"])
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * md))
        if isinstance(state["mu_product"], Tensor):
            state["mu_product"].mul_(mu)
        else:
            state["mu_product"] *= mu
        mu_product = state["mu_product"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(g, near_p(1.0 - b1, b1, group, p))
        v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
        denom = (v / like(1.0 - b2**t, p)).sqrt() + eps
        add_ratio(p, g, denom, like(-lr * (1.0 - mu) / (1.0 - mu_product), p))
        add_ratio(p, m, denom, like(-lr * mu_next / (1.0 - mu_product * mu_next), p))


class RAdam(Optimizer):
    """RAdam (Liu et al., 2019): Adam whose adaptive step is switched on only once the variance of
    the adaptive learning rate is tractable, and rectified until then.

    ``m = lerp(m, g, 1-b1)``; ``v = b2*v + (1-b2)*g*g``; ``rho_inf = 2/(1-b2) - 1``;
    ``rho_t = rho_inf - 2*t*b2^t/(1-b2^t)``. If ``rho_t > 5``:
    ``r = sqrt((rho_t-4)(rho_t-2)rho_inf / ((rho_inf-4)(rho_inf-2)rho_t))`` and
    ``p -= lr * m/(1-b1^t) * r * sqrt(1-b2^t)/(sqrt(v) + eps)``; else ``p -= lr * m/(1-b1^t)``.
    ``decoupled_weight_decay=True`` (RAdamW) scales ``p`` by ``1 - lr*wd`` instead of adding
    ``wd*p`` to the gradient. State: ``step``, ``exp_avg``, ``exp_avg_sq``.

    Args:
        params: tensors or parameter groups.
        lr, betas, eps, weight_decay, decoupled_weight_decay: as in PyTorch.
        foreach: accepted; GT's steps are already batched into worker instructions.
        maximize: ascend instead of descend.
        capturable: keep ``step`` on the worker and choose the branch there (see the module
            docstring).
        differentiable: not supported (``NotImplementedError``).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):  # fmt: skip
        check_lr_eps_wd(lr, eps, weight_decay)
        check_betas(betas)
        reject_differentiable("RAdam", differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))  # fmt: skip

    def _update(self, p: Tensor, g: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        g, t = begin(p, g, group, state, ("exp_avg", "exp_avg_sq"))
        (b1, b2), eps = group_betas(group, p), group["eps"]
        lr = group_lr(group, p)
        g = decay_weights(p, g, group, group["decoupled_weight_decay"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(g, near_p(1.0 - b1, b1, group, p))
        v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
        bc1, bc2 = 1.0 - b1**t, 1.0 - b2**t
        step = m / like(bc1, p) * (lr if lr is dict.get(group, "lr") else like(lr, p))
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2**t / bc2
        if isinstance(rho_t, Tensor):
            # Both branches on the worker, chosen there: no sync, the same instructions each step.
            # The clamp keeps the unused branch finite while rho_t <= 4.
            # Each factor is the Python branch's, rounded where it meets p as a Python number
            # would be, so both give the same bits (a step captured by @gt.hot moves the count
            # here: gt.optim._options.on_worker_when_captured).
            tractable = rho_t > 5.0
            r = ((rho_t - 4.0).clamp(min=0.0) * (rho_t - 2.0) * rho_inf
                 / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)).sqrt()  # fmt: skip
            # (PyTorch's ``sqrt(bc2) / denom`` with a Python number: ``denom.reciprocal() * c``)
            adaptive = (v.sqrt() + eps).reciprocal() * like(bc2.sqrt(), p)
            rectified = step * adaptive * like(r, p)
            p.sub_(where(tractable, rectified, step))
        elif rho_t > 5.0:
            r = math.sqrt(
                (rho_t - 4.0)
                * (rho_t - 2.0)
                * rho_inf
                / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)
            )
            p.sub_(step * (math.sqrt(bc2) / (v.sqrt() + eps)) * r)
        else:
            p.sub_(step)
