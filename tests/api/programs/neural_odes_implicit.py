"""Neural ODEs and implicit models as torchdiffeq, torchdyn, torchsde and the deep-equilibrium
tutorials write them: torchdiffeq's fixed-grid RK4 (3/8 rule) with linear interpolation and its
adaptive Dormand-Prince solver (initial step selection, RMS error ratio, step-size controller,
dense output), the adjoint method as an ``autograd.Function`` built on ``autograd.grad``
vector-Jacobian products, Hamiltonian networks (Greydanus) and Lagrangian networks (Cranmer) with
Hessians from autograd, augmented neural ODEs and a latent ODE, FFJORD's continuous normalising
flow with a Hutchinson trace (fixed probes), neural SDEs with Euler-Maruyama, Milstein and Heun
on fixed Brownian increments, symplectic leapfrog and Yoshida integrators, and deep equilibrium
models: Anderson acceleration with the implicit backward pass as a fixed point on the VJP, a Newton
solved tanh layer checked with ``gradcheck``, and a monotone operator network."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@program
def rk4_fixed_grid_neural_ode_spiral_demo_rmsprop(torch):
    """torchdiffeq's ``ode_demo.py``: the cubic spiral ``dy/dt = (y**3) @ A`` sampled by a fine
    RK4 solve, ``get_batch`` picking fixed start indices, an ``ODEFunc`` counting its
    evaluations, and ``odeint(func, y0, t, method="rk4", options=dict(step_size=...))`` as
    torchdiffeq's fixed-grid solver does it (the 3/8-rule RK4 step on a grid made from the step
    size, linear interpolation to the requested times), trained with RMSprop on the L1 loss."""
    nn = torch.nn

    def rk4_alt_step_func(func, t0, dt, t1, y0, f0=None):
        k1 = f0 if f0 is not None else func(t0, y0)
        k2 = func(t0 + dt * (1 / 3), y0 + dt * k1 * (1 / 3))
        k3 = func(t0 + dt * (2 / 3), y0 + dt * (k2 - k1 * (1 / 3)))
        k4 = func(t1, y0 + dt * (k1 - k2 + k3))
        return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125

    def linear_interp(t0, t1, y0, y1, t):
        if t == t0:
            return y0
        if t == t1:
            return y1
        slope = (t - t0) / (t1 - t0)
        return y0 + slope * (y1 - y0)

    def odeint(func, y0, t, step_size):
        niters = torch.ceil((t[-1] - t[0]) / step_size + 1).item()
        grid = torch.arange(0, niters, dtype=t.dtype) * step_size + t[0]
        grid[-1] = t[-1]
        solution = torch.empty(len(t), *y0.shape, dtype=y0.dtype)
        solution[0] = y0
        j = 1
        y0_ = y0
        for t0, t1 in zip(grid[:-1], grid[1:]):
            dy = rk4_alt_step_func(func, t0, t1 - t0, t1, y0_)
            y1 = y0_ + dy
            while j < len(t) and t1 >= t[j]:
                solution[j] = linear_interp(t0, t1, y0_, y1, t[j])
                j += 1
            y0_ = y1
        return solution

    true_y0 = torch.tensor([[2.0, 0.0]])
    t = torch.linspace(0.0, 5.0, 40)
    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])

    class Lambda(nn.Module):
        def forward(self, t, y):
            return torch.mm(y**3, true_A)

    with torch.no_grad():
        true_y = odeint(Lambda(), true_y0, t, step_size=0.1)

    batch_time, batch_size = 6, 6
    starts = _rng(1).choice(np.arange(40 - batch_time, dtype=np.int64), batch_size, replace=False)

    def get_batch():
        s = torch.from_numpy(starts)
        batch_y0 = true_y[s]  # (M, D)
        batch_t = t[:batch_time]  # (T)
        batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)  # (T, M, D)
        return batch_y0, batch_t, batch_y

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2))
            self.nfe = 0

        def forward(self, t, y):
            self.nfe += 1
            return self.net(y**3)

    func = set_weights(torch, ODEFunc(), seed=2, scale=0.1)
    for m in func.net.modules():
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.bias, val=0)
    optimizer = torch.optim.RMSprop(func.parameters(), lr=1e-3)
    losses = []
    for _itr in range(1, 4):
        optimizer.zero_grad()
        batch_y0, batch_t, batch_y = get_batch()
        pred_y = odeint(func, batch_y0, batch_t, step_size=0.05)
        loss = torch.mean(torch.abs(pred_y - batch_y))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    nfe_train = func.nfe
    with torch.no_grad():
        pred_y = odeint(func, true_y0, t, step_size=0.2)
        total = torch.mean(torch.abs(pred_y - true_y))
    report = "Iter {:04d} | Total Loss {:.6f}".format(3, total.item())  # noqa: UP032
    return {"true_y": true_y[::5], "losses": losses, "nfe": [nfe_train, func.nfe],
            "pred_y": pred_y[::5], "report": report, "params": params(func),
            "grads": grads(func)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def dopri5_adaptive_step_controller_dense_output(torch):
    """torchdiffeq's adaptive Dormand-Prince solver in float64: Hairer's initial step selection,
    FSAL stages, the RMS error ratio against ``atol + rtol * max(|y0|, |y1|)``, the optimal step
    size controller (safety 0.9, factors 0.2 and 10), accepted/rejected steps decided with
    ``.item()``, and dense output from the fourth-order interpolating polynomial fitted with the
    ``DPS_C_MID`` midpoint weights; checked against ``matrix_exp`` on a linear system, then the
    solve differentiated with respect to the system matrix."""
    dt = torch.float64
    alpha = torch.tensor([1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0], dtype=dt)
    beta = [
        torch.tensor([1 / 5], dtype=dt),
        torch.tensor([3 / 40, 9 / 40], dtype=dt),
        torch.tensor([44 / 45, -56 / 15, 32 / 9], dtype=dt),
        torch.tensor([19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729], dtype=dt),
        torch.tensor([9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656], dtype=dt),
        torch.tensor([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84], dtype=dt),
    ]
    c_sol = torch.tensor([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0], dtype=dt)
    c_error = torch.tensor([35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085,
                            125 / 192 - 451 / 720, -2187 / 6784 + 12231 / 42400,
                            11 / 84 - 649 / 6300, -1.0 / 60.0], dtype=dt)  # fmt: skip
    c_mid = torch.tensor([6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2,
                          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
                          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2], dtype=dt)  # fmt: skip

    def rms_norm(x):
        return x.abs().pow(2).mean().sqrt()

    def select_initial_step(func, t0, y0, order, rtol, atol, f0):
        scale = atol + torch.abs(y0) * rtol
        d0, d1 = rms_norm(y0 / scale), rms_norm(f0 / scale)
        h0 = torch.tensor(1e-6, dtype=dt) if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        y1 = y0 + h0 * f0
        f1 = func(t0 + h0, y1)
        d2 = rms_norm((f1 - f0) / scale) / h0
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = torch.max(torch.tensor(1e-6, dtype=dt), h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** (1.0 / float(order + 1))
        return torch.min(100 * h0, h1)

    def rk_step(func, y0, f0, t0, h):
        k = [f0]
        for a, b in zip(alpha, beta):
            ti = t0 + a * h
            yi = y0 + h * sum(bi * ki for bi, ki in zip(b, k))
            k.append(func(ti, yi))
        K = torch.stack(k, dim=-1)
        y1 = y0 + h * K.matmul(c_sol)
        y1_err = h * K.matmul(c_error)
        y_mid = y0 + h * K.matmul(c_mid)
        return y1, k[-1], y1_err, y_mid  # FSAL: the last stage is f(t1, y1)

    def interp_fit(y0, y1, y_mid, f0, f1, h):
        a = 2 * h * (f1 - f0) - 8 * (y1 + y0) + 16 * y_mid
        b = h * (5 * f0 - 3 * f1) + 18 * y0 + 14 * y1 - 32 * y_mid
        c = h * (f1 - 4 * f0) - 11 * y0 - 5 * y1 + 16 * y_mid
        d = h * f0
        return [y0, d, c, b, a]

    def interp_evaluate(coeffs, t0, t1, t):
        x = (t - t0) / (t1 - t0)
        total = coeffs[0] + x * coeffs[1]
        x_power = x
        for c in coeffs[2:]:
            x_power = x_power * x
            total = total + x_power * c
        return total

    def optimal_step_size(h, error_ratio, order, safety=0.9, ifactor=10.0, dfactor=0.2):
        ifactor, dfactor = torch.tensor(ifactor, dtype=dt), torch.tensor(dfactor, dtype=dt)
        if error_ratio == 0:
            return h * ifactor
        if error_ratio < 1:
            dfactor = torch.ones((), dtype=dt)
        exponent = torch.tensor(1.0 / order, dtype=dt)
        factor = torch.min(ifactor, torch.max(safety / error_ratio**exponent, dfactor))
        return h * factor

    def odeint_dopri5(func, y0, t, rtol=1e-6, atol=1e-8):
        f0 = func(t[0], y0)
        h = select_initial_step(func, t[0], y0, 4, rtol, atol, f0)
        t0, y = t[0], y0
        out, accepted, rejected, hs = [y0], 0, 0, []
        for t_next in t[1:]:
            while t0 < t_next:
                y1, f1, y1_err, y_mid = rk_step(func, y, f0, t0, h)
                tol = atol + rtol * torch.max(y.abs(), y1.abs())
                error_ratio = rms_norm(y1_err / tol)
                if error_ratio <= 1:
                    coeffs = interp_fit(y, y1, y_mid, f0, f1, h)
                    t_prev, t0, y, f0 = t0, t0 + h, y1, f1
                    accepted += 1
                    hs.append(h.item())
                else:
                    rejected += 1
                h = optimal_step_size(h, error_ratio, 5)
            out.append(interp_evaluate(coeffs, t_prev, t0, t_next))
        return torch.stack(out), accepted, rejected, hs

    A = torch.tensor([[-0.5, 2.0, 0.0], [-2.0, -0.3, 0.4], [0.1, 0.0, -1.0]], dtype=dt)
    y0 = torch.tensor([[1.0, 0.0, 0.5], [0.0, -1.0, 2.0]], dtype=dt)
    t = torch.linspace(0.0, 3.0, 7, dtype=dt)
    nfe = [0]

    def linear(t, y):
        nfe[0] += 1
        return y @ A.T

    ys, accepted, rejected, hs = odeint_dopri5(linear, y0, t)
    exact = torch.stack([y0 @ torch.linalg.matrix_exp(A * ti).T for ti in t])
    A_param = A.clone().requires_grad_(True)
    yT, *_ = odeint_dopri5(lambda t, y: y @ A_param.T, y0, t[[0, 3]], rtol=1e-8, atol=1e-10)
    loss = yT[-1].pow(2).sum()
    loss.backward()
    fd = torch.autograd.functional.jacobian(
        lambda a: (y0 @ torch.linalg.matrix_exp(a * t[3]).T).pow(2).sum(), A
    )
    return {"ys": ys, "max_err": (ys - exact).abs().max(), "accepted": accepted,
            "rejected": rejected, "first_steps": hs[:4], "nfe": nfe[0], "grad_A": A_param.grad,
            "grad_A_vs_expm": (A_param.grad - fd).abs().max() < 1e-5}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def adjoint_method_vjp_autograd_function_time_gradients(torch):
    """torchdiffeq's ``OdeintAdjointMethod`` written out (float64): the forward solve under
    ``no_grad``, backward integrating ``[y, adj_y, adj_params]`` back in time with the same RK4
    solver through ``autograd.grad(func_eval, (y, *params), -adj_y, allow_unused=True)``, the
    parameters flattened into one adjoint vector and split back with ``torch.split``, and the
    gradients with respect to the evaluation times (``dL/dt_i = f(t_i, y_i) . grad_y_i``);
    compared with direct backprop and with a ``torch.func.vjp`` of one step, then used by SGD."""
    nn = torch.nn
    dt = torch.float64

    def rk4_step(func, t0, h, y):
        k1 = func(t0, y)
        k2 = func(t0 + h / 2, y + h / 2 * k1)
        k3 = func(t0 + h / 2, y + h / 2 * k2)
        k4 = func(t0 + h, y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    def odeint(func, y0, t, substeps=4):
        ys = [y0]
        for t0, t1 in zip(t[:-1], t[1:]):
            h = (t1 - t0) / substeps
            y = ys[-1]
            for s in range(substeps):
                y = rk4_step(func, t0 + s * h, h, y)
            ys.append(y)
        return torch.stack(ys)

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(3, 16), nn.Linear(16, 2)

        def forward(self, t, y):
            tt = torch.ones_like(y[:, :1]) * t
            return self.fc2(torch.tanh(self.fc1(torch.cat([tt, y], 1))))

    class OdeintAdjointMethod(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y0, t, func, *adjoint_params):
            ctx.func = func
            with torch.no_grad():
                ans = odeint(func, y0, t)
            ctx.save_for_backward(t, ans, *adjoint_params)
            return ans

        @staticmethod
        def backward(ctx, grad_y):
            t, y, *adjoint_params = ctx.saved_tensors
            func = ctx.func
            shapes = [p.shape for p in adjoint_params]
            numels = [p.numel() for p in adjoint_params]

            def augmented_dynamics(tt, y_aug):
                y_, adj_y = y_aug[:, :2], y_aug[:, 2:4]
                with torch.enable_grad():
                    y_ = y_.detach().requires_grad_(True)
                    func_eval = func(tt, y_)
                    vjp_y, *vjp_params = torch.autograd.grad(
                        func_eval, (y_, *adjoint_params), -adj_y, allow_unused=True,
                        retain_graph=True)  # fmt: skip
                vjp_params = [torch.zeros_like(p) if v is None else v
                              for v, p in zip(vjp_params, adjoint_params)]  # fmt: skip
                flat = torch.cat([v.reshape(-1) for v in vjp_params])
                # the parameters' adjoint rides along as extra columns of the first row
                pad = torch.zeros(y_.shape[0], flat.numel(), dtype=dt)
                pad[0] = flat
                return torch.cat([func_eval.detach(), vjp_y, pad], dim=1)

            time_vjps = torch.empty(len(t), dtype=dt)
            adj_y = grad_y[-1]
            adj_p = torch.zeros(y.shape[1], sum(numels), dtype=dt)
            for i in range(len(t) - 1, 0, -1):
                func_eval = func(t[i], y[i])
                time_vjps[i] = torch.dot(func_eval.reshape(-1), grad_y[i].reshape(-1))
                aug = torch.cat([y[i], adj_y, adj_p], dim=1)
                out = odeint(augmented_dynamics, aug, t[[i, i - 1]])[1]
                adj_y = out[:, 2:4] + grad_y[i - 1]
                adj_p = out[:, 4:]
            time_vjps[0] = -time_vjps[1:].sum()
            flat_grads = torch.split(adj_p.sum(0), numels)
            param_grads = [g.reshape(s) for g, s in zip(flat_grads, shapes)]
            return (adj_y, time_vjps, None, *param_grads)

    func = set_weights(torch, ODEFunc(), seed=5)
    func.double()
    y0 = torch.tensor(arr(6, 3, 2), dtype=dt)
    t = torch.linspace(0.0, 1.5, 4, dtype=dt)
    target = torch.tensor(arr(7, 4, 3, 2, scale=0.5), dtype=dt)

    y0_a, t_a = y0.clone().requires_grad_(True), t.clone().requires_grad_(True)
    ys = OdeintAdjointMethod.apply(y0_a, t_a, func, *func.parameters())
    loss = (ys - target).pow(2).sum()
    loss.backward()
    adjoint_grads = {n: p.grad.clone() for n, p in func.named_parameters()}
    func.zero_grad()
    y0_d = y0.clone().requires_grad_(True)
    direct = odeint(func, y0_d, t)
    (direct - target).pow(2).sum().backward()
    diffs = {n: (adjoint_grads[n] - p.grad).abs().max() for n, p in func.named_parameters()}

    def one_step(y):
        return rk4_step(func, t[0], t[1] - t[0], y)

    out, vjp_fn = torch.func.vjp(one_step, y0)
    (vjp_y0,) = vjp_fn(torch.ones_like(out))

    opt = torch.optim.SGD(func.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        ys = OdeintAdjointMethod.apply(y0, t, func, *func.parameters())
        loss = nn.functional.mse_loss(ys, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"adjoint_grads": adjoint_grads, "grad_diffs": diffs, "y0_grad": y0_a.grad,
            "y0_grad_direct": y0_d.grad, "t_grad": t_a.grad, "vjp_y0": vjp_y0, "losses": losses,
            "params": params(func)}  # fmt: skip


@program
def hamiltonian_nn_greydanus_spring_rk4_rollout(torch):
    """The Hamiltonian neural network of Greydanus et al. as its repository writes it: an MLP
    giving ``F1, F2 = y.split(1, 1)``, ``time_derivative`` through ``autograd.grad(F2.sum(), x,
    create_graph=True)`` times the permutation tensor ``M = cat([eye[n//2:], -eye[:n//2]])``,
    trained with Adam on noisy ideal-spring derivatives; then an RK4 rollout of the learned field
    under ``enable_grad``, its energy drift, and the Hessian of the learned Hamiltonian."""
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim):
            super().__init__()
            self.linear1 = nn.Linear(input_dim, hidden_dim)
            self.linear2 = nn.Linear(hidden_dim, hidden_dim)
            self.linear3 = nn.Linear(hidden_dim, output_dim, bias=None)
            self.nonlinearity = torch.tanh

        def forward(self, x):
            h = self.nonlinearity(self.linear1(x))
            h = self.nonlinearity(self.linear2(h))
            return self.linear3(h)

    class HNN(nn.Module):
        def __init__(self, input_dim, differentiable_model, field_type="solenoidal"):
            super().__init__()
            self.differentiable_model = differentiable_model
            self.field_type = field_type
            self.M = self.permutation_tensor(input_dim)

        def forward(self, x):
            y = self.differentiable_model(x)
            assert y.dim() == 2 and y.shape[1] == 2, "Output tensor should have shape [batch_size, 2]"  # fmt: skip
            return y.split(1, 1)

        def time_derivative(self, x, t=None):
            F1, F2 = self.forward(x)
            conservative_field = torch.zeros_like(x)
            solenoidal_field = torch.zeros_like(x)
            if self.field_type != "solenoidal":
                dF1 = torch.autograd.grad(F1.sum(), x, create_graph=True)[0]
                conservative_field = dF1 @ torch.eye(*self.M.shape)
            if self.field_type != "conservative":
                dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
                solenoidal_field = dF2 @ self.M.t()
            return conservative_field + solenoidal_field

        def permutation_tensor(self, n):
            M = torch.eye(n)
            return torch.cat([M[n // 2 :], -M[: n // 2]])

    rng = _rng(8)
    q = rng.uniform(-1.0, 1.0, 48)
    p = rng.uniform(-1.0, 1.0, 48)
    x = torch.tensor(np.stack([q, p], 1).astype(np.float32), requires_grad=True)
    dxdt = torch.tensor((np.stack([p, -q], 1) + 0.05 * rng.standard_normal((48, 2))).astype(np.float32))  # fmt: skip
    model = HNN(2, differentiable_model=set_weights(torch, MLP(2, 32, 2), seed=9))
    optim = torch.optim.Adam(model.parameters(), 1e-2, weight_decay=1e-4)
    L2_loss = lambda u, v: (u - v).pow(2).mean()  # noqa: E731
    stats, grad_norms = [], []
    for step in range(6):
        dxdt_hat = model.time_derivative(x)
        loss = L2_loss(dxdt, dxdt_hat)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()]).clone()
        optim.step()
        optim.zero_grad()
        stats.append("step {}, train_loss {:.4e}".format(step, loss.item()))  # noqa: UP032
        grad_norms.append(grad @ grad)

    def fun(t, np_x):
        with torch.enable_grad():
            xx = np_x.detach().requires_grad_(True)
            return model.time_derivative(xx).detach()

    state = torch.tensor([[1.0, 0.0]])
    h = 0.1
    traj = [state]
    for i in range(30):
        k1 = fun(i * h, state)
        k2 = fun(i * h + h / 2, state + h / 2 * k1)
        k3 = fun(i * h + h / 2, state + h / 2 * k2)
        k4 = fun(i * h + h, state + h * k3)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        traj.append(state)
    traj = torch.cat(traj)
    with torch.no_grad():
        energy = model(traj)[1].squeeze(1)

    def H(z):
        return model.differentiable_model(z.unsqueeze(0))[0, 1]

    hess = torch.autograd.functional.hessian(H, torch.tensor([0.3, -0.2]))
    return {"stats": stats, "grad_norms": grad_norms, "traj": traj, "energy_drift": energy[-1] - energy[0],
            "energy_std": energy.std(), "hessian": hess, "M": model.M,
            "params": params(model)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def lagrangian_nn_autograd_functional_hessian_pendulum(torch):
    """A Lagrangian neural network for a pendulum as PyTorch ports of Cranmer et al. write it
    (float64): per sample, ``H = autograd.functional.hessian(L, x, create_graph=True)`` and ``J =
    autograd.functional.jacobian(L, x, create_graph=True)``, ``q_tt = pinv(H[n:, n:]) @ (J[:n] -
    H[n:, :n] @ q_t)``, stacked over the batch and trained with Adam; the same equation of motion
    applied to the analytic Lagrangian ``q_t**2 / 2 + cos q`` recovers ``-sin q``."""
    nn = torch.nn
    dt = torch.float64

    def lagrangian_eom(lagrangian, state, create_graph=True):
        n = state.shape[0] // 2
        q_t = state[n:]
        H = torch.autograd.functional.hessian(lagrangian, state, create_graph=create_graph)
        J = torch.autograd.functional.jacobian(lagrangian, state, create_graph=create_graph)
        q_tt = torch.linalg.pinv(H[n:, n:]) @ (J[:n] - H[n:, :n] @ q_t)
        return torch.cat([q_t, q_tt])

    class LNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 16),
                                     nn.Softplus(), nn.Linear(16, 1))  # fmt: skip

        def lagrangian(self, state):
            return self.net(state).squeeze(-1)

        def forward(self, states):
            return torch.stack([lagrangian_eom(self.lagrangian, s) for s in states])

    rng = _rng(10)
    states = torch.tensor(np.stack([rng.uniform(-2, 2, 6), rng.uniform(-1, 1, 6)], 1))
    target = torch.stack([states[:, 1], -torch.sin(states[:, 0])], 1)

    def analytic(state):
        return 0.5 * state[1] ** 2 + torch.cos(state[0])

    exact = torch.stack([lagrangian_eom(analytic, s, create_graph=False) for s in states])
    model = set_weights(torch, LNN(), seed=11).to(dt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        pred = model(states)
        loss = (pred - target)[:, 1].pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"exact_minus_target": (exact - target).abs().max(), "pred": pred.detach(),
            "losses": losses, "grads": grads(model)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def deq_anderson_acceleration_implicit_backward_hook(torch):
    """The deep equilibrium model of the "Deep Implicit Layers" tutorial (float64): a ResNet cell
    ``f(z, x)`` with GroupNorm, solved by Anderson acceleration (the bordered ``H`` system with
    ``H[:, 0, 1:] = H[:, 1:, 0] = 1``, solved by ``linalg.solve``; histories in ring buffers
    indexed ``k % m``), then one more ``f`` call to re-engage autograd and a hook on ``z`` that
    solves the backward fixed point ``g = J^T g + grad`` with the same solver through
    ``autograd.grad(f0, z0, y, retain_graph=True)``; trained two Adam steps, and the implicit
    gradient compared with backprop through 20 unrolled iterations."""
    nn = torch.nn
    F = nn.functional
    dt = torch.float64

    def anderson(f, x0, m=5, lam=1e-4, max_iter=50, tol=1e-8, beta=1.0):
        bsz, d, H, W = x0.shape
        X = torch.zeros(bsz, m, d * H * W, dtype=x0.dtype)
        F_ = torch.zeros(bsz, m, d * H * W, dtype=x0.dtype)
        X[:, 0], F_[:, 0] = x0.view(bsz, -1), f(x0).view(bsz, -1)
        X[:, 1], F_[:, 1] = F_[:, 0], f(F_[:, 0].view_as(x0)).view(bsz, -1)
        H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype)
        H[:, 0, 1:] = H[:, 1:, 0] = 1
        y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype)
        y[:, 0] = 1
        res = []
        for k in range(2, max_iter):
            n = min(k, m)
            G = F_[:, :n] - X[:, :n]
            H[:, 1 : n + 1, 1 : n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n, dtype=x0.dtype)[None]  # fmt: skip
            alpha = torch.linalg.solve(H[:, : n + 1, : n + 1], y[:, : n + 1])[:, 1 : n + 1, 0]
            X[:, k % m] = beta * (alpha[:, None] @ F_[:, :n])[:, 0] + (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]  # fmt: skip
            F_[:, k % m] = f(X[:, k % m].view_as(x0)).view(bsz, -1)
            res.append((F_[:, k % m] - X[:, k % m]).norm().item() / (1e-5 + F_[:, k % m].norm().item()))  # fmt: skip
            if res[-1] < tol:
                break
        return X[:, k % m].view_as(x0), res

    class ResNetLayer(nn.Module):
        def __init__(self, n_channels, n_inner_channels, kernel_size=3, num_groups=2):
            super().__init__()
            self.conv1 = nn.Conv2d(n_channels, n_inner_channels, kernel_size, padding=kernel_size // 2, bias=False)  # fmt: skip
            self.conv2 = nn.Conv2d(n_inner_channels, n_channels, kernel_size, padding=kernel_size // 2, bias=False)  # fmt: skip
            self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
            self.norm2 = nn.GroupNorm(num_groups, n_channels)
            self.norm3 = nn.GroupNorm(num_groups, n_channels)

        def forward(self, z, x):
            y = self.norm1(F.relu(self.conv1(z)))
            return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver, **kwargs):
            super().__init__()
            self.f = f
            self.solver = solver
            self.kwargs = kwargs

        def forward(self, x):
            with torch.no_grad():
                z, self.forward_res = self.solver(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)  # fmt: skip
            z = self.f(z, x)
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)

            def backward_hook(grad):
                g, self.backward_res = self.solver(
                    lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad,
                    grad, **self.kwargs)  # fmt: skip
                return g

            if z.requires_grad:
                z.register_hook(backward_hook)
            return z

    f = ResNetLayer(4, 8, kernel_size=3)
    deq = DEQFixedPoint(f, anderson, tol=1e-3, max_iter=20, m=5)
    model = nn.Sequential(nn.Conv2d(1, 4, kernel_size=3, bias=True, padding=1), nn.BatchNorm2d(4),
                          deq, nn.BatchNorm2d(4), nn.AvgPool2d(2, 2), nn.Flatten(),
                          nn.Linear(4 * 2 * 2, 3))  # fmt: skip
    set_weights(torch, model, seed=12)
    set_weights(torch, f, seed=15, scale=0.03)  # the tutorial's conv init: normal(0, 0.01)
    for m in model.modules():
        if isinstance(m, (nn.GroupNorm, nn.BatchNorm2d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    model.double()
    X = torch.tensor(arr(13, 4, 1, 4, 4), dtype=dt)
    y = torch.tensor(ints(14, 3, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, fwd_iters, bwd_final = [], [], []  # (forward and backward residuals)
    for _ in range(2):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(X), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        fwd_iters.append(len(deq.forward_res))
        bwd_final.append(deq.backward_res[-1])
    implicit = {n: p.grad.clone() for n, p in f.named_parameters()}

    # the same gradient by backprop through a long unrolled forward iteration
    model.eval()
    opt.zero_grad()
    h = model[1](model[0](X)).detach()
    z = torch.zeros_like(h)
    for _ in range(20):
        z = f(z, h)
    z_star = deq(h)
    model.zero_grad()
    out_unrolled = model[6](model[5](model[4](model[3](z))))
    nn.CrossEntropyLoss()(out_unrolled, y).backward()
    unrolled = {n: p.grad.clone() for n, p in f.named_parameters()}
    model.zero_grad()
    out_implicit = model[6](model[5](model[4](model[3](z_star))))
    nn.CrossEntropyLoss()(out_implicit, y).backward()
    implicit_eval = {n: p.grad for n, p in f.named_parameters()}
    gap = max((unrolled[n] - implicit_eval[n]).abs().max() for n in unrolled)
    return {"losses": losses, "fwd_iters": fwd_iters, "bwd_residuals": bwd_final,
            "fwd_residuals": deq.forward_res, "train_grads": implicit, "eval_grads": implicit_eval,
            "unrolled_gap": gap, "z_star": z_star.detach()[0, 0],
            "fixed_point_residual": (f(z_star, h) - z_star).norm()}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def deq_tanh_fixed_point_newton_layer_gradcheck(torch):
    """Chapter 1 of the implicit layers tutorial (float64): ``z = tanh(Wz + x)`` solved by plain
    fixed-point iteration and by Newton's method (``J = I - sech^2(Wz + x) W``, ``linalg.solve``
    on the batch), the implicit gradient as a hook ``grad -> J^-T grad`` on a re-engaged ``tanh``
    call; ``autograd.gradcheck`` of the Newton layer, then a small classifier trained with it."""
    nn = torch.nn
    dt = torch.float64

    class TanhFixedPointLayer(nn.Module):
        def __init__(self, out_features, tol=1e-10, max_iter=100):
            super().__init__()
            self.linear = nn.Linear(out_features, out_features, bias=False)
            self.tol = tol
            self.max_iter = max_iter

        def forward(self, x):
            z = torch.zeros_like(x)
            self.iterations = 0
            while self.iterations < self.max_iter:
                z_next = torch.tanh(self.linear(z) + x)
                self.err = torch.norm(z - z_next)
                z = z_next
                self.iterations += 1
                if self.err < self.tol:
                    break
            return z

    class TanhNewtonLayer(nn.Module):
        def __init__(self, out_features, tol=1e-10, max_iter=50):
            super().__init__()
            self.linear = nn.Linear(out_features, out_features, bias=False)
            self.tol = tol
            self.max_iter = max_iter

        def forward(self, x):
            with torch.no_grad():
                z = torch.tanh(x)
                self.iterations = 0
                while self.iterations < self.max_iter:
                    z_linear = self.linear(z) + x
                    g = z - torch.tanh(z_linear)
                    self.err = torch.norm(g)
                    if self.err < self.tol:
                        break
                    J = torch.eye(z.shape[1], dtype=x.dtype)[None, :, :] - (1 / torch.cosh(z_linear) ** 2)[:, :, None] * self.linear.weight[None, :, :]  # fmt: skip
                    z = z - torch.linalg.solve(J, g[:, :, None])[:, :, 0]
                    self.iterations += 1
            z = torch.tanh(self.linear(z) + x)
            if z.requires_grad:
                J = torch.eye(z.shape[1], dtype=x.dtype)[None, :, :] - (1 / torch.cosh(self.linear(z) + x) ** 2)[:, :, None] * self.linear.weight[None, :, :]  # fmt: skip
                J = J.detach()
                z.register_hook(lambda grad: torch.linalg.solve(J.transpose(1, 2), grad[:, :, None])[:, :, 0])  # fmt: skip
            return z

    X = torch.tensor(arr(15, 5, 6), dtype=dt)
    plain = set_weights(torch, TanhFixedPointLayer(6), seed=16, scale=0.3).double()
    newton = set_weights(torch, TanhNewtonLayer(6), seed=16, scale=0.3).double()
    z_plain = plain(X)
    z_newton = newton(X)
    gc = torch.autograd.gradcheck(newton, X.clone().requires_grad_(), eps=1e-6, atol=1e-5,
                                  check_undefined_grad=False)  # fmt: skip

    torch_model = nn.Sequential(nn.Linear(4, 6), newton, nn.Linear(6, 3)).double()
    set_weights(torch, torch_model[0], seed=17)
    set_weights(torch, torch_model[2], seed=18)
    data = torch.tensor(arr(19, 12, 4), dtype=dt)
    labels = torch.tensor(ints(20, 3, 12))
    opt = torch.optim.SGD(torch_model.parameters(), lr=0.5)
    losses, iters = [], []
    for _ in range(4):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(torch_model(data), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        iters.append(newton.iterations)
    # the unrolled plain iteration gives the same gradients as the implicit hook
    plain.linear.weight.data.copy_(newton.linear.weight.data)
    xr = X.clone().requires_grad_(True)
    plain(xr).sum().backward()
    xi = X.clone().requires_grad_(True)
    newton(xi).sum().backward()
    return {"z_plain": z_plain, "z_newton": z_newton.detach(), "plain_iters": plain.iterations,
            "gradcheck": gc, "losses": losses, "newton_iters": iters, "grads": grads(torch_model),
            "x_grad_unrolled": xr.grad, "x_grad_implicit": xi.grad}  # fmt: skip


@program
def cnf_ffjord_hutchinson_trace_concat_squash_rk4(torch):
    """FFJORD's continuous normalising flow on 2-D data (float32): ``ConcatSquashLinear`` layers
    (``layer(x) * sigmoid(hyper_gate(t)) + hyper_bias(t)``), the ODE on ``(z, -logp)`` with the
    divergence from the Hutchinson estimator ``(autograd.grad(dx, y, e, create_graph=True)[0] *
    e).sum(1)`` with a fixed Rademacher probe, the brute-force trace for comparison, fixed RK4
    steps, and ``log p(x) = log N(z(1)) - delta_logp`` maximised with Adam."""
    nn = torch.nn

    class ConcatSquashLinear(nn.Module):
        def __init__(self, dim_in, dim_out):
            super().__init__()
            self._layer = nn.Linear(dim_in, dim_out)
            self._hyper_bias = nn.Linear(1, dim_out, bias=False)
            self._hyper_gate = nn.Linear(1, dim_out)

        def forward(self, t, x):
            return self._layer(x) * torch.sigmoid(self._hyper_gate(t.view(1, 1))) + self._hyper_bias(t.view(1, 1))  # fmt: skip

    def divergence_bf(dx, y):
        sum_diag = 0.0
        for i in range(y.shape[1]):
            sum_diag += torch.autograd.grad(dx[:, i].sum(), y, create_graph=True)[0].contiguous()[:, i].contiguous()  # fmt: skip
        return sum_diag.contiguous()

    def divergence_approx(f, y, e=None):
        e_dzdx = torch.autograd.grad(f, y, e, create_graph=True)[0]
        e_dzdx_e = e_dzdx * e
        approx_tr_dzdx = e_dzdx_e.view(y.shape[0], -1).sum(dim=1)
        return approx_tr_dzdx

    class ODEnet(nn.Module):
        def __init__(self, dims=(2, 16, 16, 2)):
            super().__init__()
            self.layers = nn.ModuleList([ConcatSquashLinear(a, b) for a, b in zip(dims[:-1], dims[1:])])  # fmt: skip
            self.act = nn.Softplus()

        def forward(self, t, y):
            dx = y
            for i, layer in enumerate(self.layers):
                dx = layer(t, dx)
                if i < len(self.layers) - 1:
                    dx = self.act(dx)
            return dx

    class ODEfunc(nn.Module):
        def __init__(self, diffeq, divergence_fn="approximate"):
            super().__init__()
            self.diffeq = diffeq
            self.divergence_fn = divergence_fn
            self._e = None
            self.register_buffer("_num_evals", torch.tensor(0.0))

        def before_odeint(self, e=None):
            self._e = e
            self._num_evals.fill_(0)

        def forward(self, t, states):
            y = states[0]
            self._num_evals += 1
            with torch.set_grad_enabled(True):
                y.requires_grad_(True)
                t.requires_grad_(True)
                dy = self.diffeq(t, y)
                if self.divergence_fn == "brute_force" or not self.training:
                    divergence = divergence_bf(dy, y).view(-1, 1)
                else:
                    divergence = divergence_approx(dy, y, e=self._e).view(-1, 1)
            return dy, -divergence

    def odeint_rk4(func, state, t0, t1, steps):
        h = (t1 - t0) / steps
        t = t0.clone()
        for _ in range(steps):
            k1 = func(t, state)
            k2 = func(t + h / 2, tuple(s + h / 2 * k for s, k in zip(state, k1)))
            k3 = func(t + h / 2, tuple(s + h / 2 * k for s, k in zip(state, k2)))
            k4 = func(t + h, tuple(s + h * k for s, k in zip(state, k3)))
            state = tuple(s + h / 6 * (a + 2 * b + 2 * c + d) for s, a, b, c, d in zip(state, k1, k2, k3, k4))  # fmt: skip
            t = t + h
        return state

    def standard_normal_logprob(z):
        logZ = -0.5 * math.log(2 * math.pi)
        return logZ - z.pow(2) / 2

    rng = _rng(21)
    theta = rng.uniform(0, 2 * np.pi, 32)
    x = torch.tensor((np.stack([np.cos(theta), np.sin(theta)], 1) * 1.5 + 0.1 * rng.standard_normal((32, 2))).astype(np.float32))  # fmt: skip
    e = torch.tensor(rng.choice([-1.0, 1.0], size=(32, 2)).astype(np.float32))
    odefunc = ODEfunc(set_weights(torch, ODEnet(), seed=22))
    opt = torch.optim.Adam(odefunc.parameters(), lr=5e-3)
    t0, t1 = torch.tensor(0.0), torch.tensor(1.0)
    losses, nfes = [], []
    for _ in range(3):
        opt.zero_grad()
        odefunc.before_odeint(e=e)
        zero = torch.zeros(x.shape[0], 1)
        z, delta_logp = odeint_rk4(odefunc, (x, zero), t0, t1, steps=4)
        logpz = standard_normal_logprob(z).sum(1, keepdim=True)
        logpx = logpz - delta_logp
        loss = -torch.mean(logpx)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        nfes.append(odefunc._num_evals.item())
    odefunc.eval()
    xe = x[:8]
    z_bf, dlogp_bf = odeint_rk4(odefunc, (xe, torch.zeros(8, 1)), t0, t1, steps=4)
    odefunc.train()
    odefunc.before_odeint(e=e[:8])
    z_h, dlogp_h = odeint_rk4(odefunc, (xe, torch.zeros(8, 1)), t0, t1, steps=4)
    return {"losses": losses, "nfes": nfes, "z_bf": z_bf.detach(), "dlogp_bf": dlogp_bf.detach(),
            "z_same": (z_bf - z_h).abs().max() < 1e-6, "dlogp_h": dlogp_h.detach(),
            "grads": grads(odefunc)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def neural_sde_euler_maruyama_milstein_fixed_brownian(torch):
    """torchsde-style SDEs (``noise_type = "diagonal"``, ``sde_type = "ito"``, methods ``f`` and
    ``g``) on fixed Brownian increments ``dW = sqrt(dt) * N(0, 1)`` (float64): Euler-Maruyama,
    Milstein with the diagonal correction ``0.5 g g' (dW^2 - dt)`` (``g'`` by ``autograd.grad``)
    and the Stratonovich Heun scheme, checked against geometric Brownian motion's exact solution
    (strong error), then a neural SDE with a sigmoid diffusion fitted to terminal moments and a
    latent-SDE ``logqp`` path penalty, with Adam."""
    nn = torch.nn
    dt_ = torch.float64

    class GBM(nn.Module):
        noise_type, sde_type = "diagonal", "ito"

        def __init__(self, mu, sigma):
            super().__init__()
            self.mu, self.sigma = mu, sigma

        def f(self, t, y):
            return self.mu * y

        def g(self, t, y):
            return self.sigma * y

    def sdeint(sde, y0, ts, dWs, method="euler", logqp=False):
        y, ys, log_ratio = y0, [y0], 0.0
        for i, (t0, t1) in enumerate(zip(ts[:-1], ts[1:])):
            dt = t1 - t0
            dW = dWs[i]
            f, g = sde.f(t0, y), sde.g(t0, y)
            if method == "euler":
                y_next = y + f * dt + g * dW
            elif method == "milstein":
                with torch.enable_grad():
                    y_ = y if y.requires_grad else y.detach().requires_grad_(True)
                    g_ = sde.g(t0, y_)
                    g_prime = torch.autograd.grad(g_, y_, torch.ones_like(g_), create_graph=True)[0]  # fmt: skip
                y_next = y + f * dt + g * dW + 0.5 * g * g_prime * (dW**2 - dt)
            elif method == "heun":  # Stratonovich
                y_pred = y + f * dt + g * dW
                f1, g1 = sde.f(t1, y_pred), sde.g(t1, y_pred)
                y_next = y + 0.5 * (f + f1) * dt + 0.5 * (g + g1) * dW
            if logqp:
                u = (f - sde.h(t0, y)) / g
                log_ratio = log_ratio + 0.5 * (u**2).sum(dim=1) * dt
            y = y_next
            ys.append(y)
        return (torch.stack(ys), log_ratio) if logqp else torch.stack(ys)

    n_paths, n_steps, T = 64, 20, 1.0
    ts = torch.linspace(0, T, n_steps + 1, dtype=dt_)
    dWs = torch.tensor(_rng(23).standard_normal((n_steps, n_paths, 1)) * math.sqrt(T / n_steps))
    W_T = dWs.sum(0)
    gbm = GBM(0.5, 0.8)
    y0 = torch.full((n_paths, 1), 1.0, dtype=dt_)
    exact = y0 * torch.exp((gbm.mu - 0.5 * gbm.sigma**2) * T + gbm.sigma * W_T)
    errs = {}
    for method in ("euler", "milstein"):
        ys = sdeint(gbm, y0, ts, dWs, method=method)
        errs[method] = (ys[-1] - exact).abs().mean()
    heun = sdeint(gbm, y0, ts, dWs, method="heun")

    class NeuralSDE(nn.Module):
        noise_type, sde_type = "diagonal", "ito"

        def __init__(self, dim=2, hidden=16):
            super().__init__()
            self.drift = nn.Sequential(nn.Linear(dim + 1, hidden), nn.Tanh(), nn.Linear(hidden, dim))  # fmt: skip
            self.prior = nn.Linear(dim, dim)
            self.diffusion = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, dim), nn.Sigmoid())  # fmt: skip

        def f(self, t, y):
            t = torch.full_like(y[:, :1], float(t))
            return self.drift(torch.cat([t, y], dim=1))

        def h(self, t, y):
            return self.prior(y)

        def g(self, t, y):
            return self.diffusion(y)

    sde = set_weights(torch, NeuralSDE(), seed=24).double()
    dW2 = torch.tensor(_rng(25).standard_normal((10, 32, 2)) * math.sqrt(0.1))
    ts2 = torch.linspace(0, 1, 11, dtype=dt_)
    y0_2 = torch.tensor(arr(26, 32, 2, scale=0.3), dtype=dt_)
    target_mean = torch.tensor([1.0, -0.5], dtype=dt_)
    target_std = torch.tensor([0.6, 0.4], dtype=dt_)
    opt = torch.optim.Adam(sde.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        ys, log_ratio = sdeint(sde, y0_2, ts2, dW2, method="euler", logqp=True)
        yT = ys[-1]
        loss = (yT.mean(0) - target_mean).pow(2).sum() + (yT.std(0) - target_std).pow(2).sum() + 0.01 * log_ratio.mean()  # fmt: skip
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"strong_errors": errs, "heun_T": heun[-1, :6], "exact_T": exact[:6],
            "losses": losses, "log_ratio": log_ratio.detach()[:6], "grads": grads(sde),
            "paths": ys.detach()[::5, :3]}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def symplectic_leapfrog_yoshida_kepler_energy_drift_vs_rk4(torch):
    """Symplectic integration of a Kepler orbit in float64: kick-drift-kick leapfrog with forces
    from ``autograd.grad(V(q).sum(), q)``, Yoshida's fourth-order composition (``w1 = 1 / (2 -
    2**(1/3))``), and classic RK4 for comparison: energy drift and angular momentum over many
    orbits, time reversibility (flip the momentum and integrate back), and the symplectic
    condition ``J^T Omega J = Omega`` of one step's Jacobian from ``autograd.functional.jacobian``
    (with ``det J = 1``), batched over initial conditions."""
    dt = torch.float64

    def potential(q):
        return -1.0 / torch.linalg.vector_norm(q, dim=-1)

    def force(q, create_graph=False):
        with torch.enable_grad():
            q = q if q.requires_grad else q.detach().requires_grad_(True)
            return -torch.autograd.grad(potential(q).sum(), q, create_graph=create_graph)[0]

    def energy(q, p):
        return 0.5 * (p**2).sum(-1) + potential(q)

    def leapfrog(q, p, h, create_graph=False):
        p = p + 0.5 * h * force(q, create_graph)
        q = q + h * p
        p = p + 0.5 * h * force(q, create_graph)
        return q, p

    w1 = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
    w0 = -(2.0 ** (1.0 / 3.0)) * w1

    def yoshida(q, p, h):
        for w in (w1, w0, w1):
            q, p = leapfrog(q, p, w * h)
        return q, p

    def rk4(q, p, h):
        def f(q, p):
            return p, force(q)

        k1 = f(q, p)
        k2 = f(q + h / 2 * k1[0], p + h / 2 * k1[1])
        k3 = f(q + h / 2 * k2[0], p + h / 2 * k2[1])
        k4 = f(q + h * k3[0], p + h * k3[1])
        q = q + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        p = p + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        return q, p

    e = torch.tensor([0.0, 0.3, 0.6], dtype=dt)
    q0 = torch.stack([1 - e, torch.zeros_like(e)], dim=1)
    p0 = torch.stack([torch.zeros_like(e), torch.sqrt((1 + e) / (1 - e))], dim=1)
    E0 = energy(q0, p0)
    h, steps = 0.1, 120
    results = {}
    for name, step in (("leapfrog", leapfrog), ("yoshida", yoshida), ("rk4", rk4)):
        q, p = q0, p0
        drift = []
        for i in range(steps):
            q, p = step(q, p, h)
            if (i + 1) % 40 == 0:
                drift.append((energy(q, p) - E0).abs())
        L = q[:, 0] * p[:, 1] - q[:, 1] * p[:, 0]
        results[name] = {"q": q, "drift": torch.stack(drift), "L_err": (L - (q0[:, 0] * p0[:, 1])).abs().max()}  # fmt: skip
    q, p = q0, p0
    for _ in range(20):
        q, p = leapfrog(q, p, h)
    p = -p
    for _ in range(20):
        q, p = leapfrog(q, p, h)
    reversibility = (q - q0).abs().max()

    def one_step(state):
        q, p = leapfrog(state[:2], state[2:], h, create_graph=True)
        return torch.cat([q, p])

    state = torch.cat([q0[1], p0[1]])
    J = torch.autograd.functional.jacobian(one_step, state)
    Omega = torch.zeros(4, 4, dtype=dt)
    Omega[:2, 2:] = torch.eye(2, dtype=dt)
    Omega[2:, :2] = -torch.eye(2, dtype=dt)
    return {"results": results, "reversibility_small": reversibility < 1e-10, "J": J,
            "symplectic_defect": (J.T @ Omega @ J - Omega).abs().max() < 1e-12,
            "det_J": torch.linalg.det(J)}  # fmt: skip


@program
def neural_ode_augmented_torchdyn_classifier_nfe_hooks(torch):
    """An augmented neural ODE classifier as torchdyn writes it (float32): ``Augmenter`` padding
    the input with zeros, a vector field with a ``DepthCat`` layer concatenating ``t``, a
    ``NeuralODE(f, solver="rk4")`` module returning ``(t_eval, trajectory)`` over ``t_span``, the
    function evaluations counted by a forward pre-hook, trained with Adam and cross-entropy on
    concentric circles; then accuracy and the trajectory norm under ``no_grad``."""
    nn = torch.nn

    class Augmenter(nn.Module):
        def __init__(self, augment_idx=1, augment_dims=2):
            super().__init__()
            self.augment_dims, self.augment_idx = augment_dims, augment_idx

        def forward(self, x):
            shape = list(x.shape)
            shape[self.augment_idx] = self.augment_dims
            return torch.cat([x, torch.zeros(shape, dtype=x.dtype)], self.augment_idx)

    class DepthCat(nn.Module):
        def __init__(self, idx_cat=1):
            super().__init__()
            self.idx_cat = idx_cat
            self.t = None

        def forward(self, x):
            t_shape = list(x.shape)
            t_shape[self.idx_cat] = 1
            t = self.t * torch.ones(t_shape, dtype=x.dtype)
            return torch.cat([x, t], self.idx_cat)

    class VectorField(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net
            self.depth = [m for m in net.modules() if isinstance(m, DepthCat)]

        def forward(self, t, x):
            for m in self.depth:
                m.t = t
            return self.net(x)

    class NeuralODE(nn.Module):
        def __init__(self, vector_field, solver="rk4", t_span=None):
            super().__init__()
            self.vf = VectorField(vector_field)
            self.solver = solver
            self.t_span = t_span

        def forward(self, x, t_span=None):
            t_span = self.t_span if t_span is None else t_span
            xs = [x]
            for t0, t1 in zip(t_span[:-1], t_span[1:]):
                h = t1 - t0
                k1 = self.vf(t0, x)
                k2 = self.vf(t0 + h / 2, x + h / 2 * k1)
                k3 = self.vf(t0 + h / 2, x + h / 2 * k2)
                k4 = self.vf(t1, x + h * k3)
                x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
                xs.append(x)
            return t_span, torch.stack(xs)

    rng = _rng(27)
    r = np.concatenate([rng.uniform(0.0, 0.5, 32), rng.uniform(1.0, 1.5, 32)])
    ang = rng.uniform(0, 2 * np.pi, 64)
    X = torch.tensor(np.stack([r * np.cos(ang), r * np.sin(ang)], 1).astype(np.float32))
    y = torch.cat([torch.zeros(32, dtype=torch.long), torch.ones(32, dtype=torch.long)])

    f = nn.Sequential(DepthCat(1), nn.Linear(4 + 1, 32), nn.Tanh(), DepthCat(1), nn.Linear(32 + 1, 4))  # fmt: skip
    set_weights(torch, f, seed=28)
    nfe = [0]
    f.register_forward_pre_hook(lambda module, inputs: nfe.__setitem__(0, nfe[0] + 1))
    node = NeuralODE(f, solver="rk4", t_span=torch.linspace(0, 1, 6))
    model = nn.Sequential(Augmenter(1, 2), node)
    head = set_weights(torch, nn.Linear(4, 2), seed=29)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        t_eval, traj = model(X)
        logits = head(traj[-1])
        loss = nn.CrossEntropyLoss()(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    nfe_train = nfe[0]
    with torch.no_grad():
        t_eval, traj = model(X)
        acc = (head(traj[-1]).argmax(dim=1) == y).float().mean()
        norms = traj.norm(dim=-1).mean(dim=1)
    return {"losses": losses, "nfe_train": nfe_train, "acc": acc, "traj_norms": norms,
            "t_eval": t_eval, "traj_end": traj[-1, :5], "head_grad": head.weight.grad}  # fmt: skip


@program
def neural_ode_latent_ode_recognition_rnn_elbo(torch):
    """torchdiffeq's ``latent_ode.py`` example (float32): a ``RecognitionRNN`` run backwards over
    the observed spiral, ``qz0_mean, qz0_logvar = out[:, :latent_dim], out[:, latent_dim:]``, the
    reparameterised ``z0 = epsilon * exp(.5 * logvar) + mean`` with fixed ``epsilon``, the latent
    ODE solved with RK4 at the observation times, a decoder, and the ELBO from the example's
    ``log_normal_pdf`` and ``normal_kl`` (checked against ``distributions.kl_divergence``)."""
    nn = torch.nn

    class LatentODEfunc(nn.Module):
        def __init__(self, latent_dim=4, nhidden=20):
            super().__init__()
            self.elu = nn.ELU(inplace=True)
            self.fc1 = nn.Linear(latent_dim, nhidden)
            self.fc2 = nn.Linear(nhidden, nhidden)
            self.fc3 = nn.Linear(nhidden, latent_dim)
            self.nfe = 0

        def forward(self, t, x):
            self.nfe += 1
            out = self.fc1(x)
            out = self.elu(out)
            out = self.fc2(out)
            out = self.elu(out)
            return self.fc3(out)

    class RecognitionRNN(nn.Module):
        def __init__(self, latent_dim=4, obs_dim=2, nhidden=25, nbatch=1):
            super().__init__()
            self.nhidden = nhidden
            self.nbatch = nbatch
            self.i2h = nn.Linear(obs_dim + nhidden, nhidden)
            self.h2o = nn.Linear(nhidden, latent_dim * 2)

        def forward(self, x, h):
            combined = torch.cat((x, h), dim=1)
            h = torch.tanh(self.i2h(combined))
            out = self.h2o(h)
            return out, h

        def initHidden(self):
            return torch.zeros(self.nbatch, self.nhidden)

    class Decoder(nn.Module):
        def __init__(self, latent_dim=4, obs_dim=2, nhidden=20):
            super().__init__()
            self.relu = nn.ReLU(inplace=True)
            self.fc1 = nn.Linear(latent_dim, nhidden)
            self.fc2 = nn.Linear(nhidden, obs_dim)

        def forward(self, z):
            out = self.fc1(z)
            out = self.relu(out)
            return self.fc2(out)

    def log_normal_pdf(x, mean, logvar):
        const = torch.from_numpy(np.array([2.0 * np.pi])).float()
        const = torch.log(const)
        return -0.5 * (const + logvar + (x - mean) ** 2.0 / torch.exp(logvar))

    def normal_kl(mu1, lv1, mu2, lv2):
        v1 = torch.exp(lv1)
        v2 = torch.exp(lv2)
        lstd1 = lv1 / 2.0
        lstd2 = lv2 / 2.0
        kl = lstd2 - lstd1 + ((v1 + (mu1 - mu2) ** 2.0) / (2.0 * v2)) - 0.5
        return kl

    def odeint(func, z0, ts):
        zs = [z0]
        for t0, t1 in zip(ts[:-1], ts[1:]):
            h = t1 - t0
            z = zs[-1]
            k1 = func(t0, z)
            k2 = func(t0 + h / 2, z + h / 2 * k1)
            k3 = func(t0 + h / 2, z + h / 2 * k2)
            k4 = func(t1, z + h * k3)
            zs.append(z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        return torch.stack(zs)

    latent_dim, nspiral, ntotal = 4, 6, 12
    rng = _rng(30)
    ts = np.linspace(0, 3, ntotal)
    a, b = rng.uniform(0.3, 0.6, (nspiral, 1)), rng.uniform(0.1, 0.3, (nspiral, 1))
    rr = a + b * ts[None]
    traj = np.stack([rr * np.cos(ts[None] * 1.5), rr * np.sin(ts[None] * 1.5)], -1)
    samp_trajs = torch.from_numpy((traj + 0.05 * rng.standard_normal(traj.shape)).astype(np.float32))  # fmt: skip
    samp_ts = torch.from_numpy(ts).float()
    noise_std = 0.3

    func = set_weights(torch, LatentODEfunc(latent_dim, 20), seed=31)
    rec = set_weights(torch, RecognitionRNN(latent_dim, 2, 25, nspiral), seed=32)
    dec = set_weights(torch, Decoder(latent_dim, 2, 20), seed=33)
    params_ = list(func.parameters()) + list(dec.parameters()) + list(rec.parameters())
    optimizer = torch.optim.Adam(params_, lr=1e-2)
    epsilon = torch.tensor(arr(34, nspiral, latent_dim))
    losses = []
    for _itr in range(3):
        optimizer.zero_grad()
        h = rec.initHidden()
        for t in reversed(range(samp_trajs.size(1))):
            obs = samp_trajs[:, t, :]
            out, h = rec.forward(obs, h)
        qz0_mean, qz0_logvar = out[:, :latent_dim], out[:, latent_dim:]
        z0 = epsilon * torch.exp(0.5 * qz0_logvar) + qz0_mean
        pred_z = odeint(func, z0, samp_ts).permute(1, 0, 2)
        pred_x = dec(pred_z)
        noise_std_ = torch.zeros(pred_x.size()) + noise_std
        noise_logvar = 2.0 * torch.log(noise_std_)
        logpx = log_normal_pdf(samp_trajs, pred_x, noise_logvar).sum(-1).sum(-1)
        pz0_mean = pz0_logvar = torch.zeros(z0.size())
        analytic_kl = normal_kl(qz0_mean, qz0_logvar, pz0_mean, pz0_logvar).sum(-1)
        loss = torch.mean(-logpx + analytic_kl, dim=0)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    D = torch.distributions
    kl_ref = D.kl_divergence(D.Normal(qz0_mean, torch.exp(0.5 * qz0_logvar)), D.Normal(0.0, 1.0)).sum(-1)  # fmt: skip
    return {"losses": losses, "nfe": func.nfe, "kl": analytic_kl.detach(),
            "kl_matches": (kl_ref - analytic_kl).abs().max() < 1e-5, "pred_x": pred_x.detach()[0, ::3],
            "rec_grads": grads(rec), "dec_grads": grads(dec)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def deq_monotone_operator_forward_backward_splitting(torch):
    """A monotone operator equilibrium network (Winston and Kolter) in float64: ``W = (1 - m) I -
    A^T A + B - B^T`` (strongly monotone by construction), the equilibrium ``z = relu(Wz + Ux +
    b)`` found by forward-backward splitting ``z <- relu((1 - alpha) z + alpha (Wz + Ux + b))``,
    an ``autograd.Function`` whose backward solves the transposed system by the same splitting on
    the relu's mask, checked against a dense ``linalg.solve`` of the implicit-function-theorem
    gradient, then trained with SGD."""
    nn = torch.nn
    dt = torch.float64

    class MONSingleFc(nn.Module):
        def __init__(self, in_dim, out_dim, m=1.0):
            super().__init__()
            self.U = nn.Linear(in_dim, out_dim)
            self.A = nn.Linear(out_dim, out_dim, bias=False)
            self.B = nn.Linear(out_dim, out_dim, bias=False)
            self.m = m

        def W(self):
            n = self.A.weight.shape[0]
            I = torch.eye(n, dtype=self.A.weight.dtype)  # noqa: E741
            return (1 - self.m) * I - self.A.weight.T @ self.A.weight + self.B.weight - self.B.weight.T  # fmt: skip

    def fb_solve(W, bias, alpha=0.5, max_iter=100, tol=1e-10):
        z, iters = torch.zeros_like(bias), 0
        while iters < max_iter:
            z_new = torch.relu((1 - alpha) * z + alpha * (z @ W.T + bias))
            err = (z_new - z).norm() / (1e-10 + z_new.norm())
            z, iters = z_new, iters + 1
            if err < tol:
                break
        return z, iters

    solve_iters = []

    class MONFixedPoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, bias, W, alpha):
            z, iters = fb_solve(W, bias, alpha)
            ctx.save_for_backward(z, W)
            ctx.alpha = alpha
            solve_iters.append(iters)
            return z

        @staticmethod
        def backward(ctx, grad_z):
            z, W = ctx.saved_tensors
            d = (z > 0).to(z.dtype)  # relu'
            alpha = ctx.alpha
            # u = (I - D W)^-T D g, i.e. u = D (W^T u + g), by the same damped splitting
            u = torch.zeros_like(grad_z)
            for _ in range(100):
                u_new = (1 - alpha) * u + alpha * d * (u @ W + grad_z)
                if (u_new - u).norm() < 1e-11:
                    u = u_new
                    break
                u = u_new
            grad_bias = u
            grad_W = u.T @ z
            return grad_bias, grad_W, None

    mon = set_weights(torch, MONSingleFc(5, 8), seed=35, scale=0.4).double()
    head = set_weights(torch, nn.Linear(8, 3), seed=36).double()
    x = torch.tensor(arr(37, 6, 5), dtype=dt)
    labels = torch.tensor(ints(38, 3, 6))

    W = mon.W()
    eig_sym = torch.linalg.eigvalsh(torch.eye(8, dtype=dt) - 0.5 * (W + W.T))
    bias = mon.U(x)
    z = MONFixedPoint.apply(bias, W, 0.5)
    loss = nn.functional.cross_entropy(head(z), labels)
    gz = torch.autograd.grad(loss, z, retain_graph=True)[0]
    loss.backward()
    implicit = {n: p.grad.clone() for n, p in mon.named_parameters()}

    # dense implicit function theorem: dz/dbias = (I - D W)^-1 D per sample
    with torch.no_grad():
        dense = []
        for i in range(x.shape[0]):
            D = torch.diag((z[i] > 0).to(dt))
            Jz = torch.linalg.solve(torch.eye(8, dtype=dt) - D @ W, D)
            dense.append(Jz.T @ gz[i])
        dense = torch.stack(dense)
        grad_U_dense = dense.T @ x

    opt = torch.optim.SGD(list(mon.parameters()) + list(head.parameters()), lr=0.2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        z = MONFixedPoint.apply(mon.U(x), mon.W(), 0.5)
        loss = nn.functional.cross_entropy(head(z), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"m_monotone": eig_sym.min() >= 1.0 - 1e-9, "eig_sym": eig_sym, "z": z.detach(),
            "implicit_grads": implicit, "grad_U_dense": grad_U_dense,
            "dense_matches": (grad_U_dense - implicit["U.weight"]).abs().max() < 1e-8,
            "losses": losses, "fb_iters": solve_iters, "params": params(mon)}  # fmt: skip
