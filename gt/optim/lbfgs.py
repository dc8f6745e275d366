"""``LBFGS``: limited-memory BFGS with PyTorch's arguments, state and behaviour, optionally with a
strong-Wolfe line search (Nocedal & Wright, *Numerical Optimization*, 2nd ed., algorithms 7.4
(two-loop recursion), 3.5 and 3.6 (bracketing and zoom), equation 3.59 (cubic interpolation)).

The vectors (gradient, direction, history) stay on the workers: the two-loop recursion is tensor
ops and queues no sync point. What has to reach the host -- the loss, ``g.d``, the largest
``|g|``, the curvature ``y.s`` that decides whether a pair enters the history -- is fetched as one
stacked vector per sync point (see :class:`LBFGS` for the count).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gt.autograd import enable_grad, no_grad
from gt.factories import zeros
from gt.ops.shaping import cat, stack
from gt.optim._options import require
from gt.optim.optimizer import Optimizer
from gt.tensor import Tensor

#: A complex dtype's real counterpart: LBFGS's flat vectors hold complex values as real pairs.
_REAL_OF = {"complex64": "float32", "complex128": "float64"}

_NO_GROUPS = "LBFGS doesn't support per-parameter options (parameter groups)"


def _fetch(values: list[Any]) -> list[float]:
    """Several scalars (0-d tensors of any float dtype, or numbers) in one sync point."""
    tensors = [v.reshape(()).to("float64") for v in values if isinstance(v, Tensor)]
    got = iter(stack(tensors).tolist() if tensors else [])
    return [next(got) if isinstance(v, Tensor) else float(v) for v in values]


@dataclass
class _Pair:
    """A candidate curvature pair ``y = g_new - g_old``, ``s = t*d``; ``ys`` is ``y.s`` on the host
    (it decides whether the pair is kept), ``ys_t``/``yy_t`` the same numbers on the worker."""

    y: Tensor | None
    s: Tensor | None
    ys: float
    ys_t: Tensor | None = None
    yy_t: Tensor | None = None


@dataclass
class _Point:
    """One point ``x0 + t*d`` of the line search and what was measured there."""

    t: float
    f: float
    g: Tensor
    gtd: float
    gmax: float
    pair: _Pair


def cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                      bounds: tuple[float, float] | None = None) -> float:  # fmt: skip
    """The minimizer of the cubic through two points with values ``f`` and slopes ``g``
    (Nocedal & Wright eq. 3.59), clamped to ``bounds`` (default: between the points); the middle of
    the bounds when the cubic has no minimizer."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    if x1 == x2:
        return (lo + hi) / 2.0
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0 or not math.isfinite(d2_square):
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    # The step back from the right-hand point, written for either order of the two points.
    if x1 <= x2:
        num, den, right, width = g2 + d2 - d1, g2 - g1 + 2.0 * d2, x2, x2 - x1
    else:
        num, den, right, width = g1 + d2 - d1, g1 - g2 + 2.0 * d2, x1, x1 - x2
    if den == 0:
        return (lo + hi) / 2.0
    pos = right - width * (num / den)
    return min(max(pos, lo), hi)


def strong_wolfe(probe: Callable[[float], _Point], start: _Point, t: float, d_norm: float,
                 c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_ls: int = 25) -> tuple[_Point, int]:  # fmt: skip
    """A step length satisfying the strong Wolfe conditions (Nocedal & Wright algorithms 3.5/3.6).

    ``start`` is the point ``t = 0``; ``probe(t)`` evaluates the function at ``x0 + t*d``. Returns
    the point chosen and the number of evaluations.
    """
    f0, gtd0 = start.f, start.gtd
    prev, new = start, probe(t)
    evals, ls_iter, done = 1, 0, False

    def armijo_fails(p: _Point) -> bool:
        return p.f > f0 + c1 * p.t * gtd0

    # Bracketing: grow the step until an interval is known to hold an acceptable one.
    bracket: list[_Point] = []
    while ls_iter < max_ls:
        if armijo_fails(new) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if abs(new.gtd) <= -c2 * gtd0:
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        # Extrapolate: at least 1% further than the step from prev, at most ten times t.
        bounds = (new.t + 0.01 * (new.t - prev.t), new.t * 10)
        t = cubic_interpolate(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd, bounds)
        prev, new = new, probe(t)
        evals, ls_iter = evals + 1, ls_iter + 1
    if ls_iter == max_ls:  # no bracket found: choose between not moving and the last step
        bracket = [start, new]

    # Zoom: shrink the bracket; lo is the end with the lower value.
    insufficient = False
    lo, hi = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        a, b = bracket
        t = cubic_interpolate(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            # Too close to an end: accept once, then (or if outside) move 10% inside.
            if insufficient or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        new = probe(t)
        evals, ls_iter = evals + 1, ls_iter + 1
        if armijo_fails(new) or new.f >= bracket[lo].f:
            bracket[hi] = new
            lo, hi = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(new.gtd) <= -c2 * gtd0:
                done = True
            elif new.gtd * (bracket[hi].t - bracket[lo].t) >= 0:
                bracket[hi] = bracket[lo]
            bracket[lo] = new
    return bracket[lo], evals


class LBFGS(Optimizer):
    """L-BFGS (Nocedal & Wright algorithm 7.5), as PyTorch's ``torch.optim.LBFGS``.

    ``step(closure)`` runs up to ``max_iter`` iterations (at most ``max_eval`` evaluations of
    ``closure``, which must clear the gradients, compute the loss, call ``backward()`` and return
    the loss) and returns the loss of the first evaluation. Each iteration builds a direction from
    the last ``history_size`` curvature pairs (pairs with ``y.s <= 1e-10`` are skipped), then steps
    ``lr`` along it (the first iteration ever: ``min(1, 1/sum|g|) * lr``) or, with
    ``line_search_fn="strong_wolfe"``, a step satisfying the strong Wolfe conditions. It stops when
    ``max|g| <= tolerance_grad``, when the step or the change of loss falls under
    ``tolerance_change``, or when ``g.d > -tolerance_change`` (not a descent direction).

    All parameters are seen as one flat vector, so there is one parameter group (as in PyTorch).
    State (``state_dict()["state"][0]``, PyTorch's keys): ``func_evals``, ``n_iter``, ``d``,
    ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``al``, ``prev_flat_grad``,
    ``prev_loss``.

    Sync points: the decisions need host values, each fetch batching every scalar known by then.
    One per ``step()`` call (the first loss, ``max|g|``, and the pending curvature pair), then per
    iteration two: one for ``g.d`` and ``max|d|`` before the step, one after each evaluation of
    ``closure`` (its loss, ``max|g|`` and the next pair's ``y.s``) -- with the line search, one
    per evaluation it makes (usually one). The two-loop recursion itself never waits. (Syncs that
    ``closure`` itself makes come on top.)

    Args:
        params: the tensors to optimize (a single group).
        lr: step length (the initial step of the line search).
        max_iter: iterations per ``step()``.
        max_eval: evaluations of ``closure`` per ``step()`` (default ``max_iter * 5 // 4``).
        tolerance_grad: stop when the largest ``|gradient|`` is at most this.
        tolerance_change: stop when the step or the loss changes by less than this.
        history_size: curvature pairs kept.
        line_search_fn: ``None`` or ``"strong_wolfe"``.

    Raises:
        ValueError: more than one parameter group, or a negative ``lr``.
    """

    def __init__(self, params: Any, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):  # fmt: skip
        require(0.0 <= lr, f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))  # fmt: skip
        if len(self.param_groups) != 1:
            raise ValueError(_NO_GROUPS)

    def add_param_group(self, group: dict[str, Any]) -> None:
        """As PyTorch: only the first group is accepted (LBFGS sees one flat vector)."""
        if self.param_groups:
            raise ValueError(_NO_GROUPS)
        super().add_param_group(group)

    # ------------------------------------------------------------------ flat vector views
    @property
    def _params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        """The gradients as one real vector: a complex parameter's as (real, imaginary) pairs, as
        PyTorch's ``view_as_real`` does."""
        parts = []
        for p in self._params:
            if p.grad is None:
                real = _REAL_OF.get(p.dtype)
                parts.append(zeros(p.numel() * (2 if real else 1), dtype=real or p.dtype))
            elif p.grad.dtype in _REAL_OF:
                parts.append(p.grad._apply("view_as_real", [p.grad]).reshape(-1))
            else:
                parts.append(p.grad.reshape(-1))
        if len(parts) > 1:
            return cat(parts)
        # A 1-d gradient reshapes to itself: copy it, as backward may accumulate into it.
        return parts[0].clone() if parts[0] is self._params[0].grad else parts[0]

    def _add(self, t: float, d: Tensor) -> None:
        """``params += t * d`` (``d`` flat; a complex parameter takes (real, imaginary) pairs)."""
        params = self._params
        offset = 0
        for p in params:
            pairs = p.dtype in _REAL_OF
            n = p.numel() * (2 if pairs else 1)
            seg = d if len(params) == 1 else d[offset : offset + n]
            if pairs:
                seg = seg.reshape(*p.shape, 2)
                seg = seg._apply("view_as_complex", [seg])
            p.add_(seg.reshape(p.shape), alpha=t)
            offset += n

    def _evaluate(self, closure: Callable[[], Any]) -> tuple[Any, Tensor]:
        with enable_grad():
            loss = closure()
        return loss, self._flat_grad()

    @staticmethod
    def _pair(g_new: Tensor, g_old: Tensor, d: Tensor, t: float) -> tuple[Tensor, Tensor, Any, Any]:
        y, s = g_new - g_old, d * t
        return y, s, y.dot(s), y.dot(y)

    # ------------------------------------------------------------------ the algorithm
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` iterations; returns the loss ``closure()`` gave first."""
        if len(self.param_groups) != 1:
            raise ValueError(_NO_GROUPS)
        with no_grad():
            return self._step(closure)

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss, g = self._evaluate(closure)
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_g = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        # Sync: the loss, max|g|, and 1/sum|g| (the first step length) or the pair left pending
        # by the last call (y, s from the stored direction and gradient).
        inv_abs_sum, opt_cond = 1.0, False
        if state["n_iter"] == 0:
            loss, gmax, inv_abs_sum = _fetch([orig_loss, g.abs().max(), g.abs().sum().reciprocal()])
            pair = _Pair(None, None, 0.0)
        else:
            y, s, ys_t, yy_t = self._pair(g, prev_g, d, t)
            loss, gmax, ys = _fetch([orig_loss, g.abs().max(), ys_t])
            pair = _Pair(y, s, ys, ys_t, yy_t)
        state["func_evals"] += 1
        evals = 1
        if gmax <= tol_grad:
            return orig_loss

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -g
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                if pair.ys > 1e-10:  # only positive curvature keeps H positive definite
                    if len(old_dirs) == history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(pair.y)
                    old_stps.append(pair.s)
                    ro.append(pair.ys_t.reciprocal())
                    h_diag = pair.ys_t / pair.yy_t
                al = state.setdefault("al", [None] * history_size)
                d = _two_loop(g, old_dirs, old_stps, ro, h_diag, al)
            prev_g, prev_loss = g, loss
            t = min(1.0, inv_abs_sum) * lr if state["n_iter"] == 1 else lr
            gtd, d_max = _fetch([g.dot(d), d.abs().max()])  # sync
            if gtd > -tol_change:  # not a descent direction
                break

            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                point, ls_evals = self._line_search(closure, t, d, loss, g, gtd, gmax, d_max)
                t, loss, g, gmax, pair = point.t, point.f, point.g, point.gmax, point.pair
                opt_cond = gmax <= tol_grad
            else:
                self._add(t, d)
                ls_evals = 0
                if n_iter != max_iter:  # the last iteration's loss is not needed
                    new_loss, g = self._evaluate(closure)
                    y, s, ys_t, yy_t = self._pair(g, prev_g, d, t)
                    loss, gmax, ys = _fetch([new_loss, g.abs().max(), ys_t])  # sync
                    pair = _Pair(y, s, ys, ys_t, yy_t)
                    opt_cond = gmax <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if d_max * abs(t) <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_g, prev_loss=prev_loss)  # fmt: skip
        return orig_loss

    def _line_search(self, closure: Callable[[], Any], t: float, d: Tensor, loss: float,
                     g: Tensor, gtd: float, gmax: float, d_max: float) -> tuple[_Point, int]:  # fmt: skip
        """Strong-Wolfe search along ``d``; leaves the parameters at the chosen point."""
        x0 = [p.clone() for p in self._params]
        at = [0.0]  # the step the parameters are at now

        def probe(step: float) -> _Point:
            if at[0] != 0.0:
                for p, x in zip(self._params, x0):
                    p.copy_(x)
            self._add(step, d)
            at[0] = step
            new_loss, g_new = self._evaluate(closure)
            y, s, ys_t, yy_t = self._pair(g_new, g, d, step)
            f, gtd_new, gmax_new, ys = _fetch(
                [new_loss, g_new.dot(d), g_new.abs().max(), ys_t]
            )  # one sync per evaluation
            return _Point(step, f, g_new, gtd_new, gmax_new, _Pair(y, s, ys, ys_t, yy_t))

        start = _Point(0.0, loss, g, gtd, gmax, _Pair(None, None, 0.0))
        point, evals = strong_wolfe(probe, start, t, d_max)
        # Back to x0, then x0 + t*d, even when the last probe was at t: a closure may change the
        # parameters in place (style transfer's ``img.clamp_(0, 1)``), and PyTorch's probes
        # leave no trace of that.
        for p, x in zip(self._params, x0):
            p.copy_(x)
        self._add(point.t, d)
        return point, evals


def _two_loop(g: Tensor, old_dirs: list[Tensor], old_stps: list[Tensor], ro: list[Tensor],
              h_diag: Any, al: list[Any]) -> Tensor:  # fmt: skip
    """``-H g`` for the L-BFGS inverse Hessian ``H`` (Nocedal & Wright algorithm 7.4), with
    ``H0 = h_diag * I``. Only tensor ops: the scalars ``al``/``be`` stay on the worker."""
    q = -g
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = old_stps[i].dot(q) * ro[i]
        q.sub_(old_dirs[i] * al[i])
    r = q * h_diag
    for i in range(len(old_dirs)):
        be_i = old_dirs[i].dot(r) * ro[i]
        r.add_(old_stps[i] * (al[i] - be_i))
    return r
