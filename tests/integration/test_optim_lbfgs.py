"""LBFGS against a NumPy re-implementation of the documented algorithm, its convergence with the
strong-Wolfe search, its sync points, its state dict and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import gt

RNG = np.random.default_rng(0)
M = RNG.standard_normal((5, 5))
A = M @ M.T + 0.5 * np.eye(5)  # symmetric positive definite
B = RNG.standard_normal(5)
X0 = RNG.standard_normal(5)


def _quadratic(x):
    return 0.5 * x @ A @ x - B @ x, A @ x - B


def _np_lbfgs(x, lr, max_iter, history_size, tol_grad=1e-7, tol_change=1e-9):
    """One ``step()`` of fixed-step L-BFGS on :func:`_quadratic` (Nocedal & Wright 7.4/7.5 with
    PyTorch's first step ``min(1, 1/sum|g|)*lr`` and stopping rules); ``(x, n_iter, evals)``."""
    loss, g = _quadratic(x)
    dirs, stps, ro, h_diag, evals = [], [], [], 1.0, 1
    d = t = g_prev = None
    for k in range(1, max_iter + 1):
        if k == 1:
            d = -g
        else:
            y, s = g - g_prev, d * t
            if y @ s > 1e-10:
                if len(dirs) == history_size:
                    del dirs[0], stps[0], ro[0]
                dirs.append(y), stps.append(s), ro.append(1 / (y @ s))
                h_diag = (y @ s) / (y @ y)
            q, al = -g, [0.0] * len(dirs)
            for i in reversed(range(len(dirs))):
                al[i] = ro[i] * (stps[i] @ q)
                q = q - al[i] * dirs[i]
            r = h_diag * q
            for i in range(len(dirs)):
                r = r + stps[i] * (al[i] - ro[i] * (dirs[i] @ r))
            d = r
        g_prev, prev_loss = g, loss
        t = min(1.0, 1.0 / np.abs(g).sum()) * lr if k == 1 else lr
        if g @ d > -tol_change:
            return x, k, evals
        x = x + t * d
        if k == max_iter:
            return x, k, evals
        loss, g = _quadratic(x)
        evals += 1
        if np.abs(g).max() <= tol_grad:
            return x, k, evals
        if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
            return x, k, evals
    return x, max_iter, evals


def _problem(line_search_fn=None, **kw):
    x = gt.tensor(X0, requires_grad=True)
    a, b = gt.tensor(A), gt.tensor(B)
    opt = gt.optim.LBFGS([x], line_search_fn=line_search_fn, **kw)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ (a @ x)) - b @ x
        loss.backward()
        return loss

    return x, opt, closure


@pytest.mark.parametrize("history_size", [2, 100])
def test_fixed_step_matches_the_documented_algorithm(conn, history_size):
    x, opt, closure = _problem(lr=0.3, max_iter=12, history_size=history_size)
    opt.step(closure)
    want, n_iter, evals = _np_lbfgs(X0, 0.3, 12, history_size)
    np.testing.assert_allclose(x.detach().numpy(), want, rtol=1e-9, atol=1e-12)
    state = opt.state[x]
    assert (state["n_iter"], state["func_evals"]) == (n_iter, evals)
    assert len(state["old_dirs"]) == min(history_size, n_iter - 1)


def test_strong_wolfe_solves_a_quadratic(conn):
    # tight tolerances: the default stops on a loss change under 1e-9, i.e. |x - x*| ~ 1e-5
    x, opt, closure = _problem("strong_wolfe", max_iter=50, tolerance_change=1e-15,
                               tolerance_grad=1e-10)  # fmt: skip
    first = opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, B), rtol=1e-6, atol=1e-8)
    assert first.item() == pytest.approx(_quadratic(X0)[0])  # the loss of the first evaluation
    assert opt.state[x]["n_iter"] < 50  # stopped by a tolerance, not by max_iter


def test_strong_wolfe_ends_at_x0_plus_t_d_even_when_the_closure_changes_the_parameter(conn):
    # Style transfer's closure clamps the image in place. x0 = 0.5, loss (x - 3)^2: the first
    # step is t = min(1, 1/|g|_1) = 0.2 along d = 5, whose probe (clamped to 1.0) meets both Wolfe
    # conditions; PyTorch undoes every probe and ends at x0 + t*d = 1.5, not at the clamped 1.0.
    x = gt.tensor([0.5], dtype=gt.float64, requires_grad=True)
    opt = gt.optim.LBFGS([x], lr=1, max_iter=1, line_search_fn="strong_wolfe")

    def closure():
        with gt.no_grad():
            x.clamp_(0, 1)
        opt.zero_grad()
        loss = ((x - 3) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    assert x.item() == 1.5


def test_stops_at_once_when_the_gradient_is_already_small(conn):
    x, opt, closure = _problem(tolerance_grad=1e9)
    opt.step(closure)
    assert (opt.state[x]["func_evals"], opt.state[x]["n_iter"]) == (1, 0)
    assert x.tolist() == pytest.approx(X0.tolist())


def _count_fetches(monkeypatch, conn):
    fetches = []
    original = type(conn).fetch

    def counting(self, tid):
        fetches.append(tid)
        return original(self, tid)

    monkeypatch.setattr(type(conn), "fetch", counting)
    return fetches


def test_fixed_step_syncs_twice_per_iteration(conn, monkeypatch):
    x, opt, closure = _problem(lr=0.1, max_iter=6)
    fetches = _count_fetches(monkeypatch, conn)
    opt.step(closure)
    # one at the start, then per iteration one for g.d and one after each evaluation (the
    # last iteration does not evaluate): 1 + 6 + 5
    assert opt.state[x]["n_iter"] == 6 and len(fetches) == 12


def test_strong_wolfe_syncs_once_per_iteration_and_evaluation(conn, monkeypatch):
    x, opt, closure = _problem("strong_wolfe", max_iter=4)
    fetches = _count_fetches(monkeypatch, conn)
    opt.step(closure)
    state = opt.state[x]
    assert len(fetches) == 1 + state["n_iter"] + (state["func_evals"] - 1)


def test_state_dict_round_trip_continues_the_run(conn):
    x, opt, closure = _problem(lr=0.5, max_iter=3, history_size=2)
    for _ in range(2):
        opt.step(closure)
    saved = opt.state_dict()
    assert set(saved["state"]) == {0}
    assert set(saved["state"][0]) == {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps",
                                      "ro", "H_diag", "al", "prev_flat_grad", "prev_loss"}  # fmt: skip
    x2, opt2, closure2 = _problem(lr=9.0, max_iter=3, history_size=2)
    with gt.no_grad():
        x2.copy_(x)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.5
    opt.step(closure)
    opt2.step(closure2)
    np.testing.assert_allclose(x2.detach().numpy(), x.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_several_tensors_are_one_vector(conn):
    a, b = gt.tensor(np.array([3.0, -1.0]), requires_grad=True), gt.tensor(2.0, requires_grad=True)
    opt = gt.optim.LBFGS([a, b], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((a - 1.0) ** 2).sum() + (b + 0.5) ** 2 + a[0] * b
        loss.backward()
        return loss

    opt.step(closure)
    # minimum of the quadratic: grad = 0 -> a0 = 1 - b/2, a1 = 1, b = -0.5 - a0/2
    b_min = (-0.5 - 0.5) / (1 - 0.25)
    np.testing.assert_allclose([*a.tolist(), b.item()], [1 - b_min / 2, 1.0, b_min], atol=1e-6)
    assert opt.state[a]["d"].shape == (3,)


def test_errors_are_pytorchs(conn):
    w, v = gt.zeros(2, requires_grad=True), gt.zeros(1, requires_grad=True)
    msg = "LBFGS doesn't support per-parameter options"
    with pytest.raises(ValueError, match=msg):
        gt.optim.LBFGS([{"params": [w]}, {"params": [v]}])
    opt = gt.optim.LBFGS([w])
    with pytest.raises(ValueError, match=msg):
        opt.add_param_group({"params": [v]})
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        gt.optim.LBFGS([w], lr=-1)
    with pytest.raises(TypeError):
        opt.step()  # a closure is required
    bad = gt.optim.LBFGS([w], line_search_fn="backtracking")

    def closure():
        bad.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(closure)
    assert gt.optim.LBFGS([w]).param_groups[0]["max_eval"] == 25  # max_iter * 5 // 4
