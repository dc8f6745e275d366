"""Differentiable simulation and scientific ML as research code writes it: torchdiffeq-style
fixed-grid solvers with Butcher tableaus, Lagrangian networks and leapfrog rollouts, n-body and
mass-spring shooting problems, finite-element assembly, periodic stencils and spectral Poisson
solvers, quaternion and ``matrix_exp`` rotations, a soft ray-sphere renderer, SPH densities, a
particle filter with systematic resampling, and L-BFGS inverse problems."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@program(rtol=1e-7, atol=1e-9)
def fixed_grid_butcher_tableau_solvers_and_dopri5_neural_ode(torch):
    """torchdiffeq's fixed-grid solvers written as one explicit Runge-Kutta step driven by a
    Butcher tableau held in tensors (Euler, midpoint, RK4), a Dormand-Prince step with its
    embedded error estimate and an error ratio as ``_rk_common`` computes it, and a neural ODE
    (float64) trained with Adam by backprop through the DOPRI5 grid."""
    nn = torch.nn
    dt = torch.float64

    def tableau(alpha, beta, c_sol, c_err=None):
        b = torch.zeros(len(beta), len(beta), dtype=dt)
        for i, row in enumerate(beta):
            b[i, : len(row)] = torch.tensor(row, dtype=dt)
        out = {"alpha": torch.tensor(alpha, dtype=dt), "beta": b, "c_sol": torch.tensor(c_sol, dtype=dt)}  # fmt: skip
        if c_err is not None:
            out["c_err"] = torch.tensor(c_err, dtype=dt)
        return out

    euler = tableau([0.0], [[]], [1.0])
    midpoint = tableau([0.0, 0.5], [[], [0.5]], [0.0, 1.0])
    rk4 = tableau([0.0, 0.5, 0.5, 1.0], [[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]], [1 / 6, 1 / 3, 1 / 3, 1 / 6])  # fmt: skip
    c_sol5 = [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0]
    c_sol4 = [5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]
    dopri5 = tableau(
        [0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0],
        [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
         c_sol5[:6]],
        c_sol5, [a - b for a, b in zip(c_sol5, c_sol4)],
    )  # fmt: skip

    def rk_step(func, t0, y0, h, tab):
        s = tab["alpha"].shape[0]
        k = y0.new_empty(s, *y0.shape)
        for i in range(s):
            yi = y0 + h * torch.tensordot(tab["beta"][i, :i], k[:i], dims=1) if i else y0
            k = k.clone()
            k[i] = func(t0 + tab["alpha"][i] * h, yi)
        y1 = y0 + h * torch.tensordot(tab["c_sol"], k, dims=1)
        err = h * torch.tensordot(tab["c_err"], k, dims=1) if "c_err" in tab else None
        return y1, err

    def odeint(func, y0, t, tab):
        ys, errs = [y0], []
        for t0, t1 in zip(t[:-1], t[1:]):
            y1, err = rk_step(func, t0, ys[-1], t1 - t0, tab)
            ys.append(y1)
            if err is not None:
                tol = 1e-6 + 1e-3 * torch.max(ys[-2].abs(), y1.abs())
                errs.append(torch.linalg.vector_norm(err / tol) / math.sqrt(err.numel()))
        return torch.stack(ys), errs

    def lotka(t, y):
        a, b = y[..., 0], y[..., 1]
        return torch.stack([1.5 * a - a * b, -3.0 * b + a * b + 0.1 * torch.sin(t)], dim=-1)

    t = torch.linspace(0.0, 2.0, 11, dtype=dt)
    y0 = torch.tensor([[1.0, 1.0], [2.0, 0.5]], dtype=dt)
    fine, _ = odeint(lotka, y0, torch.linspace(0.0, 2.0, 161, dtype=dt), rk4)
    truth = fine[::16]
    sols, errors = {}, {}
    for name, tab in [("euler", euler), ("midpoint", midpoint), ("rk4", rk4), ("dopri5", dopri5)]:
        ys, errs = odeint(lotka, y0, t, tab)
        sols[name] = ys[-1]
        errors[name] = (ys - truth).abs().max()
    _, dopri_ratios = odeint(lotka, y0, t, dopri5)

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 12), nn.Tanh(), nn.Linear(12, 2)).double()

        def forward(self, t, y):
            return self.net(y)

    func = set_weights(torch, ODEFunc(), seed=3).double()
    opt = torch.optim.Adam(func.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        pred, _ = odeint(func, y0, t, dopri5)
        loss = (pred - truth).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    class OdeintAdjointRK4(torch.autograd.Function):
        """torchdiffeq's adjoint method on a fixed grid: no graph is kept forward; backward
        integrates the state, its adjoint and the parameters' adjoint back in time with RK4."""

        @staticmethod
        def forward(ctx, y0, t, func, *params):
            with torch.no_grad():
                ys, _ = odeint(func, y0, t, rk4)
            ctx.func = func
            ctx.save_for_backward(t, ys, *params)
            return ys

        @staticmethod
        def backward(ctx, grad_ys):
            t, ys, *params = ctx.saved_tensors
            func = ctx.func

            def aug(tt, state):
                y, a = state[0], state[1]
                with torch.enable_grad():
                    y = y.detach().requires_grad_(True)
                    f = func(tt, y)
                    vjps = torch.autograd.grad(f, (y, *params), -a, allow_unused=True)
                vjps = [torch.zeros_like(p) if v is None else v for v, p in zip(vjps, (y, *params))]
                return (f.detach(), *vjps)

            a = grad_ys[-1]
            adj_p = [torch.zeros_like(p) for p in params]
            for i in range(len(t) - 1, 0, -1):
                h = t[i - 1] - t[i]
                state = (ys[i], a, *adj_p)
                k1 = aug(t[i], state)
                k2 = aug(t[i] + h / 2, [s + h / 2 * k for s, k in zip(state, k1)])
                k3 = aug(t[i] + h / 2, [s + h / 2 * k for s, k in zip(state, k2)])
                k4 = aug(t[i - 1], [s + h * k for s, k in zip(state, k3)])
                state = [s + h / 6 * (q1 + 2 * q2 + 2 * q3 + q4)
                         for s, q1, q2, q3, q4 in zip(state, k1, k2, k3, k4)]  # fmt: skip
                a = state[1] + grad_ys[i - 1]
                adj_p = state[2:]
            return (a, None, None, *adj_p)

    func.zero_grad()
    y0_req = y0.clone().requires_grad_(True)
    direct, _ = odeint(func, y0_req, t, rk4)
    (direct - truth).pow(2).mean().backward()
    direct_grads = {n: p.grad.clone() for n, p in func.named_parameters()}
    func.zero_grad()
    y0_adj = y0.clone().requires_grad_(True)
    adjoint = OdeintAdjointRK4.apply(y0_adj, t, func, *func.parameters())
    (adjoint - truth).pow(2).mean().backward()
    return {"sols": sols, "errors": errors, "dopri_ratios": torch.stack(dopri_ratios),
            "losses": losses, "grads": grads(func), "pred": pred.detach(),
            "beta_dopri": dopri5["beta"], "c_err": dopri5["c_err"],
            "direct_grads": direct_grads, "adjoint_minus_direct": (adjoint - direct).abs().max(),
            "y0_grads": [y0_req.grad, y0_adj.grad], "adjoint_requires_grad": adjoint.requires_grad}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def lagrangian_nn_double_pendulum_hessian_solve(torch):
    """A Lagrangian neural network (Cranmer et al.) for a double pendulum in float64: the
    accelerations come from ``q_tt = (d2L/dqt2)^-1 (dL/dq - d2L/dq dqt q_t)``, the Hessian blocks
    built row by row with ``autograd.grad(create_graph=True)``, the batched solve with
    ``linalg.solve``; trained with Adam against the analytic double pendulum."""
    nn = torch.nn
    dt = torch.float64

    def true_accel(state, m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=9.8):
        t1, t2, w1, w2 = state.unbind(-1)
        a1 = (l2 / l1) * (m2 / (m1 + m2)) * torch.cos(t1 - t2)
        a2 = (l1 / l2) * torch.cos(t1 - t2)
        f1 = -(l2 / l1) * (m2 / (m1 + m2)) * (w2**2) * torch.sin(t1 - t2) - (g / l1) * torch.sin(t1)
        f2 = (l1 / l2) * (w1**2) * torch.sin(t1 - t2) - (g / l2) * torch.sin(t2)
        g1 = (f1 - a1 * f2) / (1 - a1 * a2)
        g2 = (f2 - a2 * f1) / (1 - a1 * a2)
        return torch.stack([g1, g2], dim=-1)

    class LNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 24), nn.Softplus(), nn.Linear(24, 24),
                                     nn.Softplus(), nn.Linear(24, 1))  # fmt: skip

        def forward(self, state):
            state = state.detach().requires_grad_(True) if not state.requires_grad else state
            q, qt = state[:, :2], state[:, 2:]
            L = self.net(state).sum()
            dL = torch.autograd.grad(L, state, create_graph=True)[0]
            dL_dq, dL_dqt = dL[:, :2], dL[:, 2:]
            rows = [torch.autograd.grad(dL_dqt[:, i].sum(), state, create_graph=True)[0] for i in range(2)]  # fmt: skip
            H = torch.stack(rows, dim=1)  # (B, 2, 4): d/dstate of dL/dqt_i
            H_qtqt, H_qtq = H[:, :, 2:], H[:, :, :2]
            rhs = dL_dq - torch.einsum("bij,bj->bi", H_qtq, qt)
            H_qtqt = H_qtqt + 1e-3 * torch.eye(2, dtype=dt)
            return torch.linalg.solve(H_qtqt, rhs.unsqueeze(-1)).squeeze(-1), q

    rng = _rng(11)
    states = torch.tensor(np.concatenate([rng.uniform(-1, 1, (24, 2)), rng.uniform(-0.5, 0.5, (24, 2))], 1))  # fmt: skip
    target = true_accel(states)
    model = set_weights(torch, LNN(), seed=12).double()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        qtt, _ = model(states)
        loss = nn.functional.smooth_l1_loss(qtt, target, beta=1.0)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())

    def lagrangian(state):
        return model.net(state).squeeze(-1)

    Hf = torch.func.vmap(torch.func.hessian(lagrangian))(states)
    gf = torch.func.vmap(torch.func.grad(lagrangian))(states)
    qt = states[:, 2:]
    qtt_func = (torch.linalg.pinv(Hf[:, 2:, 2:]) @ (gf[:, :2] - (Hf[:, 2:, :2] @ qt.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)).squeeze(-1)  # fmt: skip
    jac = torch.func.vmap(torch.func.jacrev(torch.func.grad(lagrangian)))(states)
    return {"target": target, "qtt": qtt.detach(), "losses": losses, "grads": grads(model),
            "requires_grad_after": states.requires_grad, "qtt_func": qtt_func.detach(),
            "hessian_sym": (Hf - Hf.transpose(1, 2)).abs().max(), "jac_minus_hess": (jac - Hf).abs().max(),
            "H_qtqt_eig": torch.linalg.eigvalsh(Hf[:, 2:, 2:]).detach()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def hnn_leapfrog_rollout_trained_through_integrator(torch):
    """A separable Hamiltonian network ``H = T(p) + V(q)`` on a pendulum, rolled out with the
    symplectic leapfrog (kick-drift-kick) whose forces are ``autograd.grad(V.sum(), q,
    create_graph=True)``; the rollout loss is backpropagated through every step, and the
    learned energy's drift along a no-grad rollout is compared with explicit Euler's."""
    nn = torch.nn

    class SeparableHNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.V = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
            self.log_m = nn.Parameter(torch.zeros(1))

        def potential(self, q):
            return self.V(q).squeeze(-1)

        def kinetic(self, p):
            return (0.5 * p**2 / self.log_m.exp()).sum(-1)

        def forward(self, q, p):
            return self.kinetic(p) + self.potential(q)

        def dVdq(self, q, create_graph):
            with torch.enable_grad():
                q = q if q.requires_grad else q.requires_grad_(True)
                return torch.autograd.grad(self.potential(q).sum(), q, create_graph=create_graph)[0]  # fmt: skip

    def leapfrog(model, q, p, h, steps, create_graph=True):
        qs = [q]
        for _ in range(steps):
            p = p - 0.5 * h * model.dVdq(q, create_graph)
            q = q + h * p / model.log_m.exp()
            p = p - 0.5 * h * model.dVdq(q, create_graph)
            qs.append(q)
        return torch.stack(qs), q, p

    rng = _rng(21)
    q0 = torch.tensor(rng.uniform(-1.0, 1.0, (8, 1)))
    p0 = torch.tensor(rng.uniform(-0.5, 0.5, (8, 1)))
    h = 0.1
    with torch.no_grad():
        q, p, true_q = q0, p0, [q0]
        for _ in range(10):
            p = p - 0.5 * h * torch.sin(q)
            q = q + h * p
            p = p - 0.5 * h * torch.sin(q)
            true_q.append(q)
        true_q = torch.stack(true_q)
    model = set_weights(torch, SeparableHNN(), seed=22).double()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        qs, _, _ = leapfrog(model, q0.clone().requires_grad_(True), p0, h, 10)
        loss = (qs - true_q).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        _, qT, pT = leapfrog(model, q0, p0, h, 40, create_graph=False)
        E0, ET = model(q0, p0), model(qT, pT)
        q, p = q0, p0
        for _ in range(40):
            q, p = q + h * p / model.log_m.exp(), p - h * model.dVdq(q, False)
        E_euler = model(q, p)
    return {"losses": losses, "grads": grads(model), "drift_leapfrog": (ET - E0).abs().max(),
            "drift_euler": (E_euler - E0).abs().max(), "qT": qT, "true_q": true_q[-1]}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def nbody_gravity_cdist_shooting_initial_velocities(torch):
    """Softened n-body gravity in float64: pairwise displacements by broadcasting, distances by
    ``cdist``, the diagonal masked with ``eye``, semi-implicit Euler; a shooting problem finds the
    initial velocities that put the bodies at target positions, optimised with Adam through the
    whole rollout; energy and momentum diagnostics."""
    dt = torch.float64
    n, eps, G, h, steps = 5, 0.1, 1.0, 0.02, 25
    rng = _rng(31)
    x0 = torch.tensor(rng.uniform(-1, 1, (n, 2)))
    m = torch.tensor(rng.uniform(0.5, 1.5, n))
    target = torch.tensor(rng.uniform(-1, 1, (n, 2)))
    eye = torch.eye(n, dtype=torch.bool)

    def accel(x):
        d = x.unsqueeze(0) - x.unsqueeze(1)  # d[i, j] = x_j - x_i
        r = torch.cdist(x, x)
        inv_r3 = (r.square() + eps**2).pow(-1.5).masked_fill(eye, 0.0)
        return G * (d * (inv_r3 * m.unsqueeze(0)).unsqueeze(-1)).sum(1)

    def energy(x, v):
        r = torch.cdist(x, x) + torch.eye(n, dtype=dt)
        pot = -G * m[:, None] * m[None, :] / torch.sqrt(r.square() + eps**2)
        pot = torch.where(eye, torch.zeros((), dtype=dt), pot).sum() / 2
        return 0.5 * (m[:, None] * v.square()).sum() + pot

    def simulate(v0):
        x, v = x0, v0
        for _ in range(steps):
            v = v + h * accel(x)
            x = x + h * v
        return x, v

    v0 = torch.zeros(n, 2, dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([v0], lr=0.1)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        xT, vT = simulate(v0)
        loss = (xT - target).square().sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    direction = torch.tensor(arr(32, n, 2, dtype=np.float64))
    # cdist has no forward-mode or double-backward rule in PyTorch: sensitivities via the Jacobian
    jac_full = torch.autograd.functional.jacobian(lambda v: simulate(v)[0], v0.detach())
    sens = (jac_full.reshape(2 * n, 2 * n) @ direction.reshape(-1)).view(n, 2)
    jac = jac_full[0]
    with torch.no_grad():
        xT, vT = simulate(v0)
        p0, pT = (m[:, None] * v0).sum(0), (m[:, None] * vT).sum(0)
        fd = (simulate(v0 + 1e-6 * direction)[0] - simulate(v0 - 1e-6 * direction)[0]) / 2e-6
        e0, eT = energy(x0, v0), energy(xT, vT)
    return {"losses": losses, "v0": v0.detach(), "v0_grad": v0.grad, "xT": xT, "p0": p0,
            "pT": pT, "e0": e0, "eT": eT, "a0": accel(x0),
            "sens": sens, "sens_matches_fd": bool((sens - fd).abs().max() < 1e-6),
            "jac": jac}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def mass_spring_cloth_index_add_forces_pinned_corners(torch):
    """A mass-spring cloth on a 5x5 grid (structural and shear springs from index pairs): spring
    forces by ``index_add_`` on both endpoints, damping, gravity, pinned corners by a mask,
    semi-implicit Euler; gradients of the final sag w.r.t. the stiffness, the rest lengths and
    the initial velocities, and a few Adam steps fitting the stiffness to a target sag."""
    dt = torch.float64
    R = 5
    ii, jj = np.meshgrid(np.arange(R), np.arange(R), indexing="ij")
    idx = ii * R + jj
    pairs = [np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
             np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),
             np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], 1),
             np.stack([idx[:-1, 1:].ravel(), idx[1:, :-1].ravel()], 1)]  # fmt: skip
    edges = torch.tensor(np.concatenate(pairs))
    x0 = torch.tensor(np.stack([jj.ravel() * 0.25, np.zeros(R * R), ii.ravel() * 0.25], 1).astype(np.float64))  # fmt: skip
    pinned = torch.zeros(R * R, dtype=torch.bool)
    pinned[[0, R - 1]] = True
    free = (~pinned).to(dt).unsqueeze(-1)
    rest0 = (x0[edges[:, 0]] - x0[edges[:, 1]]).norm(dim=-1)
    gravity = torch.tensor([0.0, 0.0, -9.8], dtype=dt)

    def simulate(k, rest, v0, steps=20, h=0.01, damping=0.5):
        x, v = x0.clone(), v0 * free
        for _ in range(steps):
            d = x[edges[:, 1]] - x[edges[:, 0]]
            length = d.norm(dim=-1, keepdim=True)
            f_edge = k * (length - rest.unsqueeze(-1)) * d / length
            f = torch.zeros_like(x)
            f.index_add_(0, edges[:, 0], f_edge)
            f.index_add_(0, edges[:, 1], -f_edge)
            f = f + gravity - damping * v
            v = (v + h * f) * free
            x = x + h * v
        return x

    k = torch.tensor(50.0, dtype=dt, requires_grad=True)
    rest = rest0.clone().requires_grad_(True)
    v0 = torch.tensor(arr(41, R * R, 3, scale=0.1, dtype=np.float64), requires_grad=True)
    xT = simulate(k, rest, v0)
    sag = -xT[:, 2].min()
    sag.backward()
    out = {"xT": xT.detach(), "sag": sag.detach(), "k_grad": k.grad, "rest_grad": rest.grad,
           "v0_grad": v0.grad}  # fmt: skip
    log_k = torch.tensor(math.log(20.0), dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([log_k], lr=0.1)
    fits = []
    for _ in range(5):
        opt.zero_grad()
        xT = simulate(log_k.exp(), rest0, torch.zeros(R * R, 3, dtype=dt))
        loss = (xT[:, 2].mean() + 0.05).square()
        loss.backward()
        opt.step()
        fits.append([loss.item(), log_k.item()])
    out.update(fits=fits, n_edges=edges.shape[0])
    return out


@program(rtol=1e-7, atol=1e-9)
def fem_p1_triangles_stiffness_assembly_solve_and_inverse(torch):
    """Linear finite elements on a triangulated unit square in float64: element gradients from
    the barycentric matrix, element stiffness ``area * k_e * G G^T``, assembly into a dense
    matrix twice (``index_put_(accumulate=True)`` and ``scatter_add_`` on the flattened matrix),
    load by ``index_add_``, Dirichlet rows replaced by identity rows, ``linalg.solve``; then the
    element conductivities recovered from the solution with Adam through the solve."""
    dt = torch.float64
    n = 4
    xs = np.linspace(0, 1, n + 1)
    X, Y = np.meshgrid(xs, xs, indexing="xy")
    nodes = torch.tensor(np.stack([X.ravel(), Y.ravel()], 1))
    tris = []
    for r in range(n):
        for c in range(n):
            a, b = r * (n + 1) + c, r * (n + 1) + c + 1
            d, e = a + n + 1, b + n + 1
            tris += [[a, b, e], [a, e, d]]
    tris = torch.tensor(tris)
    N, E = nodes.shape[0], tris.shape[0]
    boundary = (nodes[:, 0] == 0) | (nodes[:, 0] == 1) | (nodes[:, 1] == 0) | (nodes[:, 1] == 1)

    P = nodes[tris]  # (E, 3, 2)
    Mb = torch.cat([torch.ones(E, 3, 1, dtype=dt), P], dim=-1)  # rows [1, x, y]
    area = 0.5 * torch.linalg.det(Mb).abs()
    Gr = torch.linalg.inv(Mb)[:, 1:, :].transpose(1, 2)  # (E, 3, 2) basis gradients
    Ke_unit = area[:, None, None] * Gr @ Gr.transpose(1, 2)
    rows = tris[:, :, None].expand(E, 3, 3).reshape(-1)
    cols = tris[:, None, :].expand(E, 3, 3).reshape(-1)

    def assemble(kappa):
        Ke = kappa[:, None, None] * Ke_unit
        K = torch.zeros(N, N, dtype=dt)
        K = K.index_put((rows, cols), Ke.reshape(-1), accumulate=True)
        return K

    def solve(kappa, f_node):
        K = assemble(kappa)
        centroid = P.mean(1)
        fe = area * f_node(centroid) / 3
        F = torch.zeros(N, dtype=dt).index_add_(0, tris.reshape(-1), fe.repeat_interleave(3))
        eye = torch.eye(N, dtype=dt)
        K = torch.where(boundary[:, None], eye, K)
        F = torch.where(boundary, torch.zeros((), dtype=dt), F)
        return torch.linalg.solve(K, F), K

    def src(c):
        return 2 * math.pi**2 * torch.sin(math.pi * c[:, 0]) * torch.sin(math.pi * c[:, 1])

    kappa_true = torch.tensor(1.0 + 0.5 * _rng(51).uniform(size=E))
    u_true, K = solve(kappa_true, src)
    K2 = torch.zeros(N * N, dtype=dt).scatter_add_(0, rows * N + cols, (kappa_true[:, None, None] * Ke_unit).reshape(-1)).view(N, N)  # fmt: skip
    log_kappa = torch.zeros(E, dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([log_kappa], lr=0.05)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        u, _ = solve(log_kappa.exp(), src)
        loss = (u - u_true).square().sum() * 1e3 + 1e-4 * log_kappa.square().sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    interior = ~boundary
    K_ii = assemble(kappa_true)[interior][:, interior]
    F_full = torch.zeros(N, dtype=dt).index_add_(0, tris.reshape(-1), (area * src(P.mean(1)) / 3).repeat_interleave(3))  # fmt: skip
    Lc = torch.linalg.cholesky(K_ii)
    u_i = torch.cholesky_solve(F_full[interior].unsqueeze(-1), Lc).squeeze(-1)
    z = torch.linalg.solve_triangular(Lc, F_full[interior].unsqueeze(-1), upper=False)
    u_tri = torch.linalg.solve_triangular(Lc.mT, z, upper=True).squeeze(-1)
    u_chol = torch.zeros(N, dtype=dt)
    u_chol[interior] = u_i
    u_masked = torch.zeros(N, dtype=dt).masked_scatter_(interior, u_tri)
    exact = torch.sin(math.pi * nodes[:, 0]) * torch.sin(math.pi * nodes[:, 1])
    return {"chol_minus_dense": (u_chol - u_true).abs().max(), "u_masked": u_masked,
            "L_diag": torch.diagonal(Lc), "u_true": u_true, "K": K, "K2_minus_assemble": K2 - assemble(kappa_true),
            "area": area, "row_sums": assemble(kappa_true).sum(1), "losses": losses,
            "log_kappa": log_kappa.detach(), "grad": log_kappa.grad,
            "n_boundary": int(boundary.sum()), "err_vs_exact_kappa1": (solve(torch.ones(E, dtype=dt), src)[0] - exact).abs().max()}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def heat_and_wave_conv2d_laplacian_periodic_roll_fit(torch):
    """2-D periodic PDEs two ways: the heat equation stepped with a 5-point Laplacian as a
    ``conv2d`` on a circularly padded field, and the wave equation by leapfrog with the
    Laplacian from ``torch.roll``; the two Laplacians agree; the diffusivity and wave speed are
    fitted by Adam from final states, gradients flowing through every step (float64)."""
    F = torch.nn.functional
    dt = torch.float64
    n = 16
    x = torch.arange(n, dtype=dt) / n
    X, Y = torch.meshgrid(x, x, indexing="ij")
    u0 = (torch.exp(-((X - 0.5) ** 2 + (Y - 0.4) ** 2) / 0.02) + 0.3 * torch.sin(2 * math.pi * X)).view(1, 1, n, n)  # fmt: skip
    stencil = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], dtype=dt).view(1, 1, 3, 3)  # fmt: skip
    dx = 1.0 / n

    def lap_conv(u):
        return F.conv2d(F.pad(u, (1, 1, 1, 1), mode="circular"), stencil) / dx**2

    def lap_roll(u):
        return (torch.roll(u, 1, -1) + torch.roll(u, -1, -1) + torch.roll(u, 1, -2)
                + torch.roll(u, -1, -2) - 4 * u) / dx**2  # fmt: skip

    def heat(alpha, steps=30, h=2e-4):
        u = u0
        for _ in range(steps):
            u = u + h * alpha * lap_conv(u)
        return u

    def wave(c, steps=30, h=1e-3):
        u_prev, u = u0, u0
        for _ in range(steps):
            u_prev, u = u, 2 * u - u_prev + (c * h) ** 2 * lap_roll(u)
        return u

    heat_target, wave_target = heat(torch.tensor(0.8, dtype=dt)), wave(torch.tensor(1.5, dtype=dt))  # fmt: skip
    alpha = torch.tensor(0.3, dtype=dt, requires_grad=True)
    c = torch.tensor(1.0, dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([alpha, c], lr=0.05)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = F.mse_loss(heat(alpha), heat_target) + F.mse_loss(wave(c), wave_target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    conv = torch.nn.Conv2d(1, 1, 3, padding=1, padding_mode="circular", bias=False).double()
    with torch.no_grad():
        conv.weight.copy_(stencil)
    neumann = F.conv2d(F.pad(u0, (1, 1, 1, 1), mode="reflect"), stencil) / dx**2
    k = torch.fft.fftfreq(n, d=dx, dtype=dt) * 2 * math.pi
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    alpha_i = torch.tensor(0.8, dtype=dt, requires_grad=True)
    u_impl = torch.fft.ifft2(torch.fft.fft2(u0) / (1 + 0.01 * alpha_i * k2)).real
    u_impl.square().sum().backward()
    extra = {"module_diff": (conv(u0) / dx**2 - lap_conv(u0)).abs().max(), "neumann": neumann[0, 0, ::5, ::5],
             "implicit": u_impl[0, 0, ::4, ::4].detach(), "implicit_mass": u_impl.sum().detach(),
             "implicit_grad": alpha_i.grad, "shifted_k": torch.fft.fftshift(k)[:4]}  # fmt: skip
    return {**extra, "lap_diff": (lap_conv(u0) - lap_roll(u0)).abs().max(), "lap": lap_roll(u0)[0, 0, :3],
            "heat_mass": [u0.sum(), heat_target.sum()], "wave_target": wave_target[0, 0, ::4, ::4],
            "losses": losses, "alpha": alpha.detach(), "c": c.detach(),
            "grads": [alpha.grad, c.grad]}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def fft_poisson_solver_rfft2_fftfreq_masked_zero_mode(torch):
    """A spectral Poisson solver on a periodic square in float64: wavenumbers from ``fftfreq`` and
    ``rfftfreq``, ``-|k|^2`` with the zero mode masked before the division and zeroed after,
    ``irfft2`` back; checked against a manufactured solution, spectral gradients with ``1j *
    k``, the energy's gradient w.r.t. the source (a second solve), and an inverse problem that
    recovers the source's amplitude with L-BFGS."""
    dt = torch.float64
    n, Lbox = 32, 2 * math.pi
    x = torch.arange(n, dtype=dt) * Lbox / n
    X, Y = torch.meshgrid(x, x, indexing="ij")
    phi_exact = torch.sin(X) * torch.cos(2 * Y) + 0.5 * torch.cos(3 * X)
    rho = -(5 * torch.sin(X) * torch.cos(2 * Y) + 4.5 * torch.cos(3 * X))
    kx = torch.fft.fftfreq(n, d=Lbox / n, dtype=dt) * 2 * math.pi
    ky = torch.fft.rfftfreq(n, d=Lbox / n, dtype=dt) * 2 * math.pi
    k2 = kx[:, None] ** 2 + ky[None, :] ** 2
    zero = k2 == 0

    def poisson(f):
        f_hat = torch.fft.rfft2(f)
        denom = torch.where(zero, torch.ones_like(k2), -k2)
        phi_hat = torch.where(zero, torch.zeros_like(f_hat), f_hat / denom)
        return torch.fft.irfft2(phi_hat, s=f.shape[-2:])

    phi = poisson(rho)
    phi_hat = torch.fft.rfft2(phi)
    dphidx = torch.fft.irfft2(1j * kx[:, None] * phi_hat, s=(n, n))
    dphidy = torch.fft.irfft2(1j * ky[None, :] * phi_hat, s=(n, n))
    source = (rho + 0.3).clone().requires_grad_(True)
    field = poisson(source)
    energy = 0.5 * (field * source).mean()
    energy.backward()
    amp = torch.tensor([0.2, 0.2], dtype=dt, requires_grad=True)
    opt = torch.optim.LBFGS([amp], lr=1, max_iter=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        f = amp[0] * torch.sin(X) * torch.cos(2 * Y) + amp[1] * torch.cos(3 * X)
        loss = (poisson(f) - 0.2 * phi_exact).square().mean()
        loss.backward()
        return loss

    first = opt.step(closure)
    return {"err": (phi - phi_exact).abs().max(), "phi": phi[::8, ::8], "mean": phi.mean(),
            "dphidx_err": (dphidx - torch.cos(X) * torch.cos(2 * Y) + 1.5 * torch.sin(3 * X)).abs().max(),
            "dphidy": dphidy[::8, ::8], "energy": energy, "source_grad": source.grad[::8, ::8],
            "first_loss": first, "amp": amp.detach(), "kx": kx[:6], "ky_shape": list(ky.shape),
            "n_zero": int(zero.sum())}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def rigid_body_quaternions_and_matrix_exp_rotations(torch):
    """Differentiable rigid-body rotation in float64: Hamilton products and the quaternion
    exponential map integrate a body's angular velocity, ``matrix_exp`` of the skew matrix does
    it again and the two rotation matrices agree; Euler's equations for a torque-free asymmetric
    top are integrated with RK4 and the rotation fitted to a target orientation by Adam on the
    initial angular velocity through ``matrix_exp``'s gradient."""
    dt = torch.float64

    def skew(w):
        z = torch.zeros_like(w[..., 0])
        return torch.stack([torch.stack([z, -w[..., 2], w[..., 1]], -1),
                            torch.stack([w[..., 2], z, -w[..., 0]], -1),
                            torch.stack([-w[..., 1], w[..., 0], z], -1)], -2)  # fmt: skip

    def qmul(a, b):
        aw, ax, ay, az = a.unbind(-1)
        bw, bx, by, bz = b.unbind(-1)
        return torch.stack([aw * bw - ax * bx - ay * by - az * bz,
                            aw * bx + ax * bw + ay * bz - az * by,
                            aw * by - ax * bz + ay * bw + az * bx,
                            aw * bz + ax * by - ay * bx + az * bw], -1)  # fmt: skip

    def qexp(v):
        theta = v.norm(dim=-1, keepdim=True)
        return torch.cat([torch.cos(theta / 2), torch.sinc(theta / (2 * math.pi)) * v / 2], -1)

    def qmat(q):
        q = q / q.norm(dim=-1, keepdim=True)
        w, x, y, z = q.unbind(-1)
        return torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
                           -1).view(*q.shape[:-1], 3, 3)  # fmt: skip

    Idiag = torch.tensor([1.0, 2.0, 3.0], dtype=dt)

    def euler_eq(w):
        return torch.stack([(Idiag[1] - Idiag[2]) * w[..., 1] * w[..., 2] / Idiag[0],
                            (Idiag[2] - Idiag[0]) * w[..., 2] * w[..., 0] / Idiag[1],
                            (Idiag[0] - Idiag[1]) * w[..., 0] * w[..., 1] / Idiag[2]], -1)  # fmt: skip

    def rotate(w0, steps=20, h=0.05):
        Rq = torch.eye(3, dtype=dt).expand(w0.shape[0], 3, 3)
        q = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=dt).expand(w0.shape[0], 4)
        w = w0
        for _ in range(steps):
            q = qmul(q, qexp(h * w))
            Rq = Rq @ torch.linalg.matrix_exp(skew(h * w))
            k1 = euler_eq(w)
            k2 = euler_eq(w + h / 2 * k1)
            k3 = euler_eq(w + h / 2 * k2)
            k4 = euler_eq(w + h * k3)
            w = w + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return q, Rq, w

    w0 = torch.tensor(arr(61, 3, 3, dtype=np.float64))
    q, Rq, w = rotate(w0)
    L0, LT = Idiag * w0, Idiag * w
    target = torch.linalg.matrix_exp(skew(torch.tensor([[0.3, -0.8, 0.5]], dtype=dt)))
    wfit = torch.tensor([[0.1, 0.1, 0.1]], dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([wfit], lr=0.05)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        _, R, _ = rotate(wfit, steps=5, h=0.2)
        loss = (R - target).square().sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    pts = torch.tensor(arr(62, 6, 3, dtype=np.float64))
    pts = pts - pts.mean(0)
    mass = torch.tensor(_rng(63).uniform(0.5, 2.0, 6))
    inertia = (mass[:, None, None] * ((pts * pts).sum(-1)[:, None, None] * torch.eye(3, dtype=dt)
               - pts.unsqueeze(-1) * pts.unsqueeze(-2))).sum(0)  # fmt: skip
    force = torch.tensor(arr(64, 6, 3, dtype=np.float64), requires_grad=True)
    tau = torch.linalg.cross(pts, force).sum(0)
    alpha = torch.linalg.solve(inertia, tau)
    R1 = torch.linalg.matrix_exp(skew(0.5 * alpha))
    angle = torch.atan2(torch.stack([R1[2, 1] - R1[1, 2], R1[0, 2] - R1[2, 0], R1[1, 0] - R1[0, 1]]).norm() / 2,
                        (torch.diagonal(R1).sum() - 1) / 2)  # fmt: skip
    angle.backward()
    tau2 = torch.cross(pts, force.detach(), dim=-1).sum(0)
    out = {"principal": torch.linalg.eigvalsh(inertia), "alpha": alpha.detach(), "angle": angle.detach(),
           "angle_vs_norm": angle.detach() - (0.5 * alpha).norm().detach(), "force_grad": force.grad,
           "tau2_minus_tau": tau2 - tau.detach()}  # fmt: skip
    return {**out, "q": q, "R_matrix_exp": Rq, "R_quat_diff": (qmat(q) - Rq).abs().max(),
            "orth": (Rq @ Rq.transpose(-1, -2) - torch.eye(3, dtype=dt)).abs().max(),
            "det": torch.linalg.det(Rq), "w": w, "energy_drift": ((Idiag * w * w).sum(-1) - (Idiag * w0 * w0).sum(-1)).abs().max(),
            "L_norm": [L0.norm(dim=-1), LT.norm(dim=-1)], "losses": losses,
            "wfit": wfit.detach(), "wfit_grad": wfit.grad}  # fmt: skip


@program(rtol=1e-4, atol=1e-6)
def soft_ray_sphere_renderer_fits_sphere_to_silhouette(torch):
    """A differentiable ray-sphere renderer: pinhole rays from ``meshgrid``, the quadratic's
    discriminant, ``torch.where`` choosing the nearest hit with a safe ``sqrt``, a soft
    silhouette from a sigmoid of the signed distance of each ray to the sphere, Lambertian shading
    from normals; the sphere's center and radius fitted to a target image with Adam."""
    F = torch.nn.functional
    H = W = 16
    fov = math.radians(50)
    js, is_ = torch.meshgrid(torch.arange(W, dtype=torch.float32), torch.arange(H, dtype=torch.float32), indexing="xy")  # fmt: skip
    px = (2 * (js + 0.5) / W - 1) * math.tan(fov / 2)
    py = (1 - 2 * (is_ + 0.5) / H) * math.tan(fov / 2)
    dirs = F.normalize(torch.stack([px, py, -torch.ones_like(px)], -1), dim=-1)
    origin = torch.zeros(3)
    light = F.normalize(torch.tensor([1.0, 1.0, 1.0]), dim=0)

    def render(center, radius, sigma=0.02):
        oc = origin - center
        b = (dirs * oc).sum(-1)
        c = oc.dot(oc) - radius**2
        disc = b * b - c
        hit = disc > 0
        t = -b - torch.sqrt(torch.where(hit, disc, torch.ones_like(disc)))
        t = torch.where(hit & (t > 0), t, torch.full_like(t, 1e3))
        p = origin + t.unsqueeze(-1) * dirs
        normal = F.normalize(p - center, dim=-1)
        shade = (normal @ light).clamp(min=0.0)
        closest = (-(dirs @ oc)).clamp(min=0).unsqueeze(-1) * dirs - (center - origin)
        dist = closest.norm(dim=-1) - radius
        soft = torch.sigmoid(-dist / sigma)
        return soft * (0.2 + 0.8 * torch.where(hit, shade, torch.zeros_like(shade))), soft, hit

    target, target_mask, target_hit = render(torch.tensor([0.3, -0.2, -4.0]), torch.tensor(1.0))
    center = torch.tensor([0.0, 0.0, -4.5], requires_grad=True)
    log_r = torch.tensor(math.log(0.7), requires_grad=True)
    opt = torch.optim.Adam([center, log_r], lr=0.05)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        img, mask, _ = render(center, log_r.exp())
        loss = F.mse_loss(img, target) + 0.5 * F.binary_cross_entropy(mask, target_mask)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"target": target, "coverage": target_mask.mean(), "hits": int(target_hit.sum()),
            "losses": losses, "center": center.detach(), "radius": log_r.exp().detach(),
            "grads": [center.grad, log_r.grad]}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def sph_cubic_spline_density_pressure_forces_autograd(torch):
    """Smoothed particle hydrodynamics in float64: the cubic spline kernel piecewise by
    ``torch.where`` on ``q = r / h``, densities from pairwise distances, a Tait equation of
    state, symmetric pressure forces from the analytic kernel gradient (the diagonal masked) and
    again as ``-autograd.grad`` of an energy; a few steps of symplectic Euler with gradients of
    the final kinetic energy w.r.t. the particle masses."""
    dt = torch.float64
    h, rho0, k_eos, gamma = 0.3, 1.0, 2.0, 7.0
    rng = _rng(71)
    g = np.stack(np.meshgrid(np.arange(4), np.arange(4), indexing="ij"), -1).reshape(-1, 2) * 0.15
    x0 = torch.tensor(g + 0.02 * rng.standard_normal(g.shape))
    n = x0.shape[0]
    sigma = 10 / (7 * math.pi * h**2)

    def W(r):
        q = r / h
        w1 = 1 - 1.5 * q**2 + 0.75 * q**3
        w2 = 0.25 * (2 - q).clamp(min=0) ** 3
        return sigma * torch.where(q < 1, w1, torch.where(q < 2, w2, torch.zeros_like(q)))

    def dW(r):
        q = r / h
        d1 = -3 * q + 2.25 * q**2
        d2 = -0.75 * (2 - q).clamp(min=0) ** 2
        return sigma / h * torch.where(q < 1, d1, torch.where(q < 2, d2, torch.zeros_like(q)))

    def density(x, m):
        r = torch.cdist(x, x)
        return (m[None, :] * W(r)).sum(1)

    def pressure(rho):
        return k_eos * rho0 / gamma * ((rho / rho0) ** gamma - 1)

    def forces(x, m):
        rho = density(x, m)
        p = pressure(rho)
        d = x[:, None, :] - x[None, :, :]
        r = torch.sqrt(d.square().sum(-1) + torch.eye(n, dtype=dt))
        mask = ~torch.eye(n, dtype=torch.bool)
        coef = -(m[None, :] * (p[:, None] / rho[:, None] ** 2 + p[None, :] / rho[None, :] ** 2)) * dW(r)  # fmt: skip
        coef = coef * mask
        return m[:, None] * (coef.unsqueeze(-1) * d / r.unsqueeze(-1)).sum(1), rho

    m = torch.full((n,), 0.03, dtype=dt, requires_grad=True)
    f, rho = forces(x0, m)
    x = x0.clone().requires_grad_(True)
    rho_x = density(x, m.detach())
    Wr = torch.cdist(x0, x0)
    v = torch.zeros(n, 2, dtype=dt)
    xs = x0
    for _ in range(5):
        fi, _ = forces(xs, m)
        v = v + 0.01 * fi / m[:, None]
        xs = xs + 0.01 * v
    ke = 0.5 * (m[:, None] * v.square()).sum()
    ke.backward()
    (drho,) = torch.autograd.grad(rho_x.sum(), x)
    return {"rho": rho.detach(), "f": f.detach(), "f_sum": f.detach().sum(0), "ke": ke.detach(),
            "m_grad": m.grad, "drho_dx": drho, "W0": W(torch.zeros((), dtype=dt)),
            "neighbours": int((Wr < 2 * h).sum()), "xs": xs.detach()}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def bootstrap_particle_filter_systematic_resampling_searchsorted(torch):
    """A bootstrap particle filter for a nonlinear growth model with every random number fixed
    up front (process noise and the resampling uniforms from NumPy): log-weights, ``logsumexp``
    for the log-marginal likelihood, effective sample size, systematic resampling by
    ``searchsorted`` on the normalised ``cumsum``, ``gather`` of the ancestors; the likelihood's
    gradient w.r.t. the model parameters (resampling as a stop-gradient), and a few Adam steps."""
    dt = torch.float64
    T, P = 12, 64
    rng = _rng(81)
    noise = torch.tensor(rng.standard_normal((T, P)))
    x0 = torch.tensor(rng.standard_normal(P) * 2.0)
    u = torch.tensor(rng.uniform(size=T))
    xt, ys = 0.5, []
    for t in range(T):
        xt = 0.5 * xt + 25 * xt / (1 + xt**2) + 8 * math.cos(1.2 * t) + math.sqrt(2.0) * rng.standard_normal()  # fmt: skip
        ys.append(xt**2 / 20 + rng.standard_normal())
    ys = torch.tensor(ys)

    def pf(a, log_q, r_obs=1.0):
        x = x0
        logw = torch.full((P,), -math.log(P), dtype=dt)
        loglik, ess, ancestors, means = torch.zeros((), dtype=dt), [], [], []
        for t in range(T):
            x = a * x + 25 * x / (1 + x**2) + 8 * math.cos(1.2 * t) + log_q.exp().sqrt() * noise[t]
            ll = -0.5 * (ys[t] - x**2 / 20) ** 2 / r_obs - 0.5 * math.log(2 * math.pi * r_obs)
            logw = logw + ll
            lse = torch.logsumexp(logw, 0)
            loglik = loglik + lse
            w = (logw - lse).exp()
            means.append((w * x).sum())
            ess.append(1.0 / w.square().sum())
            positions = (u[t] + torch.arange(P, dtype=dt)) / P
            cdf = torch.cumsum(w.detach(), 0)
            cdf[-1] = 1.0
            idx = torch.searchsorted(cdf, positions).clamp(max=P - 1)
            assert torch.equal(idx, torch.bucketize(positions, cdf).clamp(max=P - 1))
            ancestors.append(idx)
            x = x.gather(0, idx)
            logw = torch.full((P,), -math.log(P), dtype=dt)
        return loglik, torch.stack(ess), torch.stack(ancestors), torch.stack(means)

    a = torch.tensor(0.4, dtype=dt, requires_grad=True)
    log_q = torch.tensor(math.log(3.0), dtype=dt, requires_grad=True)
    loglik, ess, anc, means = pf(a, log_q)
    ga, gq = torch.autograd.grad(loglik, (a, log_q))
    opt = torch.optim.Adam([a, log_q], lr=0.02)
    lls = []
    for _ in range(3):
        opt.zero_grad()
        ll, _, _, _ = pf(a, log_q)
        (-ll).backward()
        opt.step()
        lls.append(ll.item())
    return {"loglik": loglik.detach(), "ess": ess.detach(), "ancestors": anc,
            "means": means.detach(), "grad_a": ga, "grad_log_q": gq, "lls": lls,
            "a": a.detach(), "log_q": log_q.detach(), "anc_dtype": str(anc.dtype)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def lbfgs_inverse_projectile_drag_from_noisy_trajectory(torch):
    """An inverse problem as research code writes it: a projectile with quadratic drag simulated
    by RK4 in float64, its drag coefficient and initial velocity recovered from a noisy observed
    trajectory with ``optim.LBFGS`` and a closure (strong Wolfe line search), then refined with a
    second LBFGS on a log-parametrisation, the history of closure calls recorded."""
    dt = torch.float64
    g = torch.tensor([0.0, -9.81], dtype=dt)

    def rhs(s, k):
        v = s[2:]
        return torch.cat([v, g - k * v.norm() * v])

    def simulate(v0, k, steps=30, h=0.04):
        s = torch.cat([torch.zeros(2, dtype=dt), v0])
        out = []
        for _ in range(steps):
            k1 = rhs(s, k)
            k2 = rhs(s + h / 2 * k1, k)
            k3 = rhs(s + h / 2 * k2, k)
            k4 = rhs(s + h * k3, k)
            s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            out.append(s[:2])
        return torch.stack(out)

    true_v0 = torch.tensor([12.0, 9.0], dtype=dt)
    obs = simulate(true_v0, torch.tensor(0.05, dtype=dt)) + torch.tensor(arr(91, 30, 2, scale=0.02, dtype=np.float64))  # fmt: skip
    v0 = torch.tensor([10.0, 8.0], dtype=dt, requires_grad=True)
    k = torch.tensor(0.03, dtype=dt, requires_grad=True)
    opt = torch.optim.LBFGS([v0, k], lr=1, max_iter=25, history_size=10, line_search_fn="strong_wolfe")  # fmt: skip
    calls = []

    def closure():
        opt.zero_grad()
        loss = (simulate(v0, k.abs()) - obs).square().mean()
        loss.backward()
        calls.append(loss.item())
        return loss

    opt.step(closure)
    log_k = torch.log(k.detach().abs().clamp(min=1e-4)).requires_grad_(True)
    opt2 = torch.optim.LBFGS([log_k], lr=0.5, max_iter=5)

    def closure2():
        opt2.zero_grad()
        loss = (simulate(v0.detach(), log_k.exp()) - obs).square().mean()
        loss.backward()
        return loss

    final = opt2.step(closure2)
    state = opt.state[v0]
    return {"v0": v0.detach(), "k": k.detach(), "first_calls": calls[:5], "n_calls": len(calls),
            "final_loss": calls[-1], "log_k": log_k.detach(), "refined_first": final,
            "n_iter": state["n_iter"], "func_evals": state["func_evals"]}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def stable_fluids_grid_sample_advection_fft_projection(torch):
    """Stam's stable fluids on a periodic grid as differentiable-physics code writes it (float64):
    semi-Lagrangian advection by back-tracing through ``grid_sample`` (bilinear, reflection
    padding, ``align_corners=True``), a pressure projection solved with ``fft2`` (zero mode
    masked), divergence and gradients with ``torch.roll``, each step wrapped in
    ``torch.utils.checkpoint``; the initial velocity is optimised with Adam so that the smoke
    density reaches a target."""
    F = torch.nn.functional
    dt = torch.float64
    n, h = 16, 0.5
    lin = torch.linspace(-1, 1, n, dtype=dt)
    gy, gx = torch.meshgrid(lin, lin, indexing="ij")
    base = torch.stack([gx, gy], -1).unsqueeze(0)  # grid_sample wants (x, y)
    k = torch.fft.fftfreq(n, dtype=dt) * 2 * math.pi
    ky, kx = torch.meshgrid(k, k, indexing="ij")
    k2 = kx**2 + ky**2
    zero = k2 == 0

    def advect(field, vel):
        back = base - h * vel.permute(0, 2, 3, 1) * (2.0 / (n - 1))
        return F.grid_sample(field, back, mode="bilinear", padding_mode="reflection", align_corners=True)  # fmt: skip

    def project(vel):
        u, v = vel[:, 0], vel[:, 1]
        div = 0.5 * (torch.roll(u, -1, -1) - torch.roll(u, 1, -1) + torch.roll(v, -1, -2) - torch.roll(v, 1, -2))  # fmt: skip
        p_hat = torch.fft.fft2(div) / torch.where(zero, torch.ones_like(k2), -k2)
        p = torch.fft.ifft2(torch.where(zero, torch.zeros_like(p_hat), p_hat)).real
        gpx = 0.5 * (torch.roll(p, -1, -1) - torch.roll(p, 1, -1))
        gpy = 0.5 * (torch.roll(p, -1, -2) - torch.roll(p, 1, -2))
        return vel - torch.stack([gpx, gpy], 1), div

    def step(density, vel):
        vel = advect(vel, vel)
        vel, div = project(vel)
        return advect(density, vel), vel, div.abs().max()

    density0 = torch.exp(-((gx + 0.3) ** 2 + gy**2) / 0.05).view(1, 1, n, n)
    target = torch.exp(-((gx - 0.3) ** 2 + (gy - 0.1) ** 2) / 0.05).view(1, 1, n, n)

    def rollout(vel, steps=6, ckpt=True):
        d, divs = density0, []
        for _ in range(steps):
            if ckpt:
                d, vel, div = torch.utils.checkpoint.checkpoint(step, d, vel, use_reentrant=False)
            else:
                d, vel, div = step(d, vel)
            divs.append(div)
        return d, vel, torch.stack(divs)

    vel0 = torch.zeros(1, 2, n, n, dtype=dt)
    vel0[:, 0] = 0.8
    vel0 = vel0.requires_grad_(True)
    opt = torch.optim.Adam([vel0], lr=0.05)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        d, vel, divs = rollout(vel0)
        loss = F.mse_loss(d, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    d_plain, _, _ = rollout(vel0.detach(), ckpt=False)
    d_ck, _, _ = rollout(vel0.detach(), ckpt=True)
    return {"losses": losses, "density": d.detach()[0, 0, ::3, ::3], "mass": [density0.sum(), d.detach().sum()],
            "divs": divs.detach(), "vel0_grad": vel0.grad[0, :, ::4, ::4], "vel0": vel0.detach()[0, :, ::4, ::4],
            "ckpt_same": (d_plain - d_ck).abs().max(), "final_vel": vel.detach()[0, :, ::5, ::5]}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def angular_spectrum_phase_retrieval_complex_autograd(torch):
    """Differentiable wave optics (float64 / complex128): a phase mask as ``torch.polar`` of a
    Gaussian amplitude, free-space propagation by the angular spectrum method (``fft2``, the
    transfer function ``exp(1j * kz * z)`` with evanescent waves masked, ``ifft2``), intensities
    as ``abs()**2``; Gerchberg-Saxton iterations with ``torch.angle`` and ``torch.exp(1j * phi)``,
    then gradient-based phase retrieval with Adam through the complex propagation."""
    dt = torch.float64
    n, dx, wavelength, z = 32, 0.2e-6, 0.5e-6, 4e-6
    x = (torch.arange(n, dtype=dt) - n / 2) * dx
    X, Y = torch.meshgrid(x, x, indexing="ij")
    amplitude = torch.exp(-(X**2 + Y**2) / (2 * (20 * dx) ** 2))
    fx = torch.fft.fftfreq(n, d=dx, dtype=dt)
    FX, FY = torch.meshgrid(fx, fx, indexing="ij")
    arg = 1.0 / wavelength**2 - FX**2 - FY**2
    propagating = arg > 0
    kz = 2 * math.pi * torch.sqrt(torch.clamp(arg, min=0.0))
    H = torch.where(propagating, torch.exp(1j * kz * z), torch.zeros((), dtype=torch.complex128))

    def propagate(field, transfer=H):
        return torch.fft.ifft2(torch.fft.fft2(field) * transfer)

    true_phase = 2.0 * torch.exp(-((X - 10 * dx) ** 2 + Y**2) / (2 * (8 * dx) ** 2)) - 1.0 * torch.exp(-(X**2 + (Y + 12 * dx) ** 2) / (2 * (6 * dx) ** 2))  # fmt: skip
    target = propagate(torch.polar(amplitude, true_phase)).abs() ** 2
    phi = torch.zeros(n, n, dtype=dt)
    gs_err = []
    for _ in range(5):
        far = propagate(torch.polar(amplitude, phi))
        far = torch.sqrt(target) * torch.exp(1j * torch.angle(far))
        back = propagate(far, H.conj())
        phi = torch.angle(back)
        gs_err.append(
            ((propagate(torch.polar(amplitude, phi)).abs() ** 2 - target).square().mean()).item()
        )
    phase = torch.zeros(n, n, dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([phase], lr=0.1)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        field = amplitude * torch.exp(1j * phase)
        intensity = propagate(field).abs().pow(2)
        loss = (intensity - target).square().sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    c = torch.tensor(arr(101, 4, dtype=np.float64)[:2] + 1j * arr(101, 4, dtype=np.float64)[2:], requires_grad=True)  # fmt: skip
    (c.abs() ** 2 + c.angle() + (c * c.conj()).real).sum().backward()
    return {"target": target[::6, ::6], "energy": [amplitude.square().sum(), target.sum()],
            "n_propagating": int(propagating.sum()), "gs_err": gs_err, "phi_gs": phi[::6, ::6],
            "losses": losses, "phase": phase.detach()[::6, ::6], "phase_grad": phase.grad[::6, ::6],
            "complex_grad": c.grad, "H_dtype": str(H.dtype)}  # fmt: skip
