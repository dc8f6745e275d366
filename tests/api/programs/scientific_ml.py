"""Scientific machine learning as DeepXDE, neuraloperator, PySINDy, PyDMD and the physics-informed
papers' reference code write it: PINNs for Burgers (Adam then L-BFGS), Poisson (hard-constraint
output transforms, learning-rate annealing of the loss weights), heat (causal weights over time
chunks, Fourier-feature embeddings) and wave equations (periodic embeddings, a velocity initial
condition), an inverse problem with trainable physical coefficients, a 1-D Fourier neural operator
with complex parameters, a physics-informed DeepONet, a dissipative Hamiltonian network, a learned
graph-network simulator step, SINDy's sequentially thresholded ridge regression and exact DMD.
Residuals come from ``autograd.grad(create_graph=True)``; every input comes from NumPy with a
fixed seed and every weight from ``set_weights``."""

from __future__ import annotations

import itertools
import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _mlp(nn, sizes, act):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


@program(rtol=1e-6, atol=1e-9)
def sciml_pinn_burgers_adam_then_lbfgs_strong_wolfe(torch):
    """Raissi's Burgers PINN (float64): inputs scaled to ``[-1, 1]`` by the domain's bounds held as
    buffers, the residual ``u_t + u u_x - nu u_xx`` from ``autograd.grad(u, (x, t),
    grad_outputs=ones_like(u), create_graph=True)``, initial and boundary losses, a few Adam steps
    and then ``optim.LBFGS`` with a closure and the strong Wolfe line search, every closure loss
    recorded; the final residual field on a grid."""
    nn = torch.nn
    dt = torch.float64
    nu = 0.01 / math.pi

    class PhysicsInformedNN(nn.Module):
        def __init__(self, layers=(2, 16, 16, 1)):
            super().__init__()
            self.linears = nn.ModuleList([nn.Linear(a, b) for a, b in zip(layers[:-1], layers[1:])])
            self.register_buffer("lb", torch.tensor([-1.0, 0.0]))
            self.register_buffer("ub", torch.tensor([1.0, 1.0]))

        def forward(self, x, t):
            h = torch.cat([x, t], dim=1)
            h = 2.0 * (h - self.lb) / (self.ub - self.lb) - 1.0
            for lin in self.linears[:-1]:
                h = torch.tanh(lin(h))
            return self.linears[-1](h)

    model = set_weights(torch, PhysicsInformedNN(), seed=1).to(dt)
    rng = _rng(2)
    x_f = torch.tensor(rng.uniform(-1, 1, (40, 1)), requires_grad=True)
    t_f = torch.tensor(rng.uniform(0, 1, (40, 1)), requires_grad=True)
    x_0 = torch.linspace(-1, 1, 17, dtype=dt).unsqueeze(-1)
    u_0 = -torch.sin(math.pi * x_0)
    t_b = torch.linspace(0, 1, 9, dtype=dt).unsqueeze(-1)
    x_b = torch.cat([-torch.ones_like(t_b), torch.ones_like(t_b)])
    t_b = torch.cat([t_b, t_b])

    def net_f(x, t):
        u = model(x, t)
        u_x, u_t = torch.autograd.grad(u, (x, t), grad_outputs=torch.ones_like(u), create_graph=True)  # fmt: skip
        u_xx = torch.autograd.grad(u_x, x, grad_outputs=torch.ones_like(u_x), create_graph=True)[0]
        return u_t + u * u_x - nu * u_xx

    def loss_func():
        f = net_f(x_f, t_f)
        loss_u = torch.mean((model(x_0, torch.zeros_like(x_0)) - u_0) ** 2)
        loss_b = torch.mean(model(x_b, t_b) ** 2)
        return torch.mean(f**2) + loss_u + loss_b

    adam = torch.optim.Adam(model.parameters(), lr=5e-3)
    adam_losses = []
    for _ in range(3):
        adam.zero_grad()
        loss = loss_func()
        loss.backward()
        adam.step()
        adam_losses.append(loss.item())
    lbfgs = torch.optim.LBFGS(
        model.parameters(), lr=1.0, max_iter=8, max_eval=12, history_size=10,
        tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe",
    )  # fmt: skip
    history = []

    def closure():
        lbfgs.zero_grad()
        loss = loss_func()
        loss.backward()
        history.append(loss.item())
        return loss

    lbfgs.step(closure)
    xs = torch.linspace(-1, 1, 5, dtype=dt)
    ts = torch.linspace(0, 1, 3, dtype=dt)
    T, X = torch.meshgrid(ts, xs, indexing="ij")
    xg = X.reshape(-1, 1).clone().requires_grad_(True)
    tg = T.reshape(-1, 1).clone().requires_grad_(True)
    f_grid = net_f(xg, tg)
    state = lbfgs.state[next(iter(model.parameters()))]
    return {"adam_losses": adam_losses, "lbfgs_losses": history, "n_iter": state["n_iter"],
            "func_evals": state["func_evals"], "f_grid": f_grid.detach().view(3, 5),
            "params": params(model), "x_f_grad_is_set": x_f.grad is not None}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 matmuls and double backward: summation order differs
def sciml_pinn_poisson_hard_constraint_output_transform(torch):
    """A 1-D Poisson problem ``-u'' = pi^2 sin(pi x)`` with Dirichlet data ``u(0) = a``, ``u(1) =
    b`` solved twice as DeepXDE users compare it: with the boundary conditions imposed exactly by
    an output transform ``a (1 - x) + b x + x (1 - x) N(x)`` and with soft penalty terms; the
    second derivative by two ``autograd.grad`` calls, DeepXDE's ``l2_relative_error`` against the
    exact solution."""
    nn = torch.nn
    ua, ub = 0.5, -1.0

    def exact(x):
        return torch.sin(math.pi * x) + ua * (1 - x) + ub * x

    def output_transform(x, y):
        return ua * (1 - x) + ub * x + x * (1 - x) * y

    def laplacian(u, x):
        du = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        return torch.autograd.grad(du, x, grad_outputs=torch.ones_like(du), create_graph=True)[0]

    def l2_relative_error(y_true, y_pred):
        return torch.linalg.norm(y_true - y_pred) / torch.linalg.norm(y_true)

    x = torch.tensor(_rng(3).uniform(0, 1, (24, 1)).astype(np.float32), requires_grad=True)
    x_test = torch.linspace(0, 1, 11).unsqueeze(1)
    x_bc = torch.tensor([[0.0], [1.0]])
    u_bc = torch.tensor([[ua], [ub]])
    results = {}
    for hard in (True, False):
        net = set_weights(torch, _mlp(nn, (1, 16, 16, 1), nn.Tanh), seed=4)
        if hard:

            def model(z, net=net):
                return output_transform(z, net(z))

        else:
            model = net
        opt = torch.optim.Adam(net.parameters(), lr=5e-3)
        losses = []
        for _ in range(6):
            opt.zero_grad()
            u = model(x)
            residual = -laplacian(u, x) - math.pi**2 * torch.sin(math.pi * x)
            loss = residual.pow(2).mean()
            if not hard:
                loss = loss + 100.0 * nn.functional.mse_loss(model(x_bc), u_bc)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            u_test = model(x_test)
        key = "hard" if hard else "soft"
        results[key] = {"losses": losses, "u_test": u_test, "bc": model(x_bc).detach(),
                        "l2": l2_relative_error(exact(x_test), u_test), "grads": grads(net)}  # fmt: skip
    results["bc_exact"] = bool(torch.allclose(results["hard"]["bc"], u_bc))
    return results


@program(rtol=5e-4, atol=5e-5)  # float32 MLP and second derivatives: summation order differs
def sciml_pinn_heat_causal_weights_fourier_features(torch):
    """The heat equation trained with causal weights (Wang, Sankaran & Perdikaris): collocation
    points on a ``meshgrid`` of time chunks, residual losses per chunk, weights ``exp(-eps * M @
    L)`` with ``M`` strictly lower triangular computed under ``no_grad``; the network sees a
    random Fourier-feature embedding held in a buffer; initial and Dirichlet losses."""
    nn = torch.nn
    kappa, eps = 0.05, 1.0

    class FourierFeatures(nn.Module):
        def __init__(self, B):
            super().__init__()
            self.register_buffer("B", B)

        def forward(self, x):
            proj = 2 * math.pi * x @ self.B
            return torch.cat([torch.cos(proj), torch.sin(proj)], dim=-1)

    class PINN(nn.Module):
        def __init__(self, B, hidden=20):
            super().__init__()
            self.embed = FourierFeatures(B)
            self.mlp = _mlp(nn, (2 * B.shape[1], hidden, hidden, 1), nn.Tanh)

        def forward(self, xt):
            return self.mlp(self.embed(xt))

    model = set_weights(torch, PINN(torch.tensor(arr(5, 2, 6, scale=0.5))), seed=6)
    n_t, n_x = 5, 8
    t = torch.linspace(0, 1, n_t)
    x = torch.tensor(np.sort(_rng(7).uniform(0, 1, n_x)).astype(np.float32))
    T, X = torch.meshgrid(t, x, indexing="ij")
    xt = torch.stack([X.flatten(), T.flatten()], dim=1).requires_grad_(True)
    x_ic = torch.linspace(0, 1, 9).unsqueeze(1)
    xt_ic = torch.cat([x_ic, torch.zeros_like(x_ic)], 1)
    u_ic = torch.sin(math.pi * x_ic)
    t_bc = torch.linspace(0, 1, 5).unsqueeze(1)
    xt_bc = torch.cat([torch.cat([torch.zeros_like(t_bc), t_bc], 1), torch.cat([torch.ones_like(t_bc), t_bc], 1)])  # fmt: skip
    M = torch.triu(torch.ones(n_t, n_t), diagonal=1).T
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, weights = [], []
    for _ in range(5):
        opt.zero_grad()
        u = model(xt)
        du = torch.autograd.grad(u, xt, torch.ones_like(u), create_graph=True)[0]
        u_x, u_t = du[:, 0:1], du[:, 1:2]
        u_xx = torch.autograd.grad(u_x, xt, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
        r = (u_t - kappa * u_xx).reshape(n_t, n_x)
        L_t = r.pow(2).mean(dim=1)
        with torch.no_grad():
            W = torch.exp(-eps * (M @ L_t))
        loss_r = torch.mean(W * L_t)
        loss_ic = (model(xt_ic) - u_ic).pow(2).mean()
        loss_bc = model(xt_bc).pow(2).mean()
        loss = loss_r + 10.0 * loss_ic + loss_bc
        loss.backward()
        opt.step()
        losses.append([loss_r.item(), loss_ic.item(), loss_bc.item()])
        weights.append(W)
    return {"losses": losses, "weights": torch.stack(weights), "W_min": W.min().item(),
            "W_requires_grad": W.requires_grad, "L_t": L_t.detach(), "u_t": u_t.detach()[:6],
            "grads": grads(model), "B": model.embed.B}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 second derivatives; the weights use max |grad|
def sciml_pinn_poisson2d_learning_rate_annealing_weights(torch):
    """A 2-D Poisson PINN on the unit square with the learning-rate-annealing weights of Wang,
    Teng & Perdikaris: per step, the gradients of the residual and boundary losses w.r.t. the
    parameters by ``autograd.grad(retain_graph=True)``, ``lambda_hat = max|g_r| / mean|g_b|``
    and a moving average; the Laplacian summed over input dimensions in a loop of
    ``autograd.grad`` calls."""
    nn = torch.nn
    model = set_weights(torch, _mlp(nn, (2, 20, 20, 1), nn.Tanh), seed=8)
    xy = torch.tensor(_rng(9).uniform(0, 1, (36, 2)).astype(np.float32), requires_grad=True)
    s = torch.linspace(0, 1, 6)
    z, o = torch.zeros_like(s), torch.ones_like(s)
    xy_b = torch.cat([torch.stack([s, z], 1), torch.stack([s, o], 1), torch.stack([z, s], 1), torch.stack([o, s], 1)])  # fmt: skip
    x_, y_ = xy.detach().unbind(1)
    f = 2 * math.pi**2 * torch.sin(math.pi * x_) * torch.sin(math.pi * y_)

    def laplacian(u, x):
        grad = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
        lap = torch.zeros_like(u)
        for i in range(x.shape[1]):
            lap = lap + torch.autograd.grad(grad[:, i], x, torch.ones_like(grad[:, i]), create_graph=True)[0][:, i : i + 1]  # fmt: skip
        return lap

    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    lam, alpha = 1.0, 0.5
    history = []
    for _ in range(4):
        opt.zero_grad()
        u = model(xy)
        loss_r = (-laplacian(u, xy).squeeze(1) - f).pow(2).mean()
        loss_b = model(xy_b).pow(2).mean()
        params_ = [p for p in model.parameters() if p.requires_grad]
        # the output bias drops out of the Laplacian: its residual gradient is None
        g_r = torch.autograd.grad(loss_r, params_, retain_graph=True, allow_unused=True)
        g_b = torch.autograd.grad(loss_b, params_, retain_graph=True)
        max_r = torch.max(torch.stack([g.abs().max() for g in g_r if g is not None]))
        mean_b = torch.cat([g.abs().flatten() for g in g_b]).mean()
        lam = (1 - alpha) * lam + alpha * (max_r / mean_b).item()
        loss = loss_r + lam * loss_b
        loss.backward()
        opt.step()
        history.append([loss_r.item(), loss_b.item(), lam])
    return {"history": history, "grads": grads(model), "params": params(model),
            "g_r0": g_r[0], "g_r_none": [g is None for g in g_r], "xy_grad_shape": list(xy.grad.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 MLPs and second derivatives: summation order differs
def sciml_pinn_activation_study_relu_has_no_curvature(torch):
    """The activation study every PINN tutorial repeats on ``-u'' = pi^2 sin(pi x)``: the same
    network with Tanh, a sine, Softplus, SiLU, GELU, ELU and ReLU, ``u_xx`` from two
    ``autograd.grad(create_graph=True)`` calls, a few Adam steps on the residual plus the
    Dirichlet loss; ReLU's second derivative is identically zero (so its residual loss cannot
    fall), the others' is not."""
    nn = torch.nn

    class Sine(nn.Module):
        def forward(self, x):
            return torch.sin(x)

    acts = {"tanh": nn.Tanh, "sin": Sine, "softplus": nn.Softplus, "silu": nn.SiLU,
            "gelu": nn.GELU, "elu": nn.ELU, "relu": nn.ReLU}  # fmt: skip
    x = torch.tensor(_rng(15).uniform(0, 1, (20, 1)).astype(np.float32), requires_grad=True)
    x_bc = torch.tensor([[0.0], [1.0]])
    f = math.pi**2 * torch.sin(math.pi * x.detach())
    results = {}
    for name, act in acts.items():
        net = set_weights(torch, _mlp(nn, (1, 16, 16, 1), act), seed=16)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            u = net(x)
            u_x = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
            u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0]
            loss_r = (u_xx + f).pow(2).mean()
            loss = loss_r + net(x_bc).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append([loss_r.item(), loss.item()])
        results[name] = {"losses": losses, "u_xx": u_xx.detach()[:5], "u_x": u_x.detach()[:5],
                         "curvature": u_xx.detach().abs().max().item(),
                         "first_weight_grad": net[0].weight.grad}  # fmt: skip
    return results


@program(rtol=5e-4, atol=5e-5)  # float32 second derivatives in t and x: summation order differs
def sciml_pinn_wave_periodic_embedding_velocity_initial_condition(torch):
    """The 1-D wave equation ``u_tt = c^2 u_xx`` on a periodic interval with periodicity imposed
    exactly by a ``cos(k x)``/``sin(k x)`` input embedding, the initial displacement as a loss
    and the initial velocity ``u_t(x, 0) = 0`` from ``autograd.grad``; second derivatives in both
    variables, Adam with ``ExponentialLR``; the periodic gap of the trained net."""
    nn = torch.nn
    c = 1.0

    class PeriodicPINN(nn.Module):
        def __init__(self, n_freq=2, hidden=20):
            super().__init__()
            self.register_buffer("k", torch.arange(1, n_freq + 1, dtype=torch.float32))
            self.net = _mlp(nn, (2 * n_freq + 1, hidden, hidden, 1), nn.Tanh)

        def forward(self, x, t):
            kx = x * self.k
            return self.net(torch.cat([torch.cos(kx), torch.sin(kx), t], dim=-1))

    model = set_weights(torch, PeriodicPINN(), seed=10)
    rng = _rng(11)
    x = torch.tensor(rng.uniform(0, 2 * math.pi, (32, 1)).astype(np.float32), requires_grad=True)
    t = torch.tensor(rng.uniform(0, 1, (32, 1)).astype(np.float32), requires_grad=True)
    x0 = torch.linspace(0, 2 * math.pi, 13)[:-1].unsqueeze(1)
    t0 = torch.zeros_like(x0, requires_grad=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    losses, lrs = [], []
    for _ in range(4):
        opt.zero_grad()
        u = model(x, t)
        u_t = torch.autograd.grad(u, t, torch.ones_like(u), create_graph=True)[0]
        u_tt = torch.autograd.grad(u_t, t, torch.ones_like(u_t), create_graph=True)[0]
        u_x = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0]
        loss_pde = (u_tt - c**2 * u_xx).square().mean()
        u_init = model(x0, t0)
        v_init = torch.autograd.grad(u_init.sum(), t0, create_graph=True)[0]
        loss_u0 = (u_init - torch.sin(x0)).square().mean()
        loss_v0 = v_init.square().mean()
        loss = loss_pde + loss_u0 + loss_v0
        loss.backward()
        opt.step()
        sched.step()
        losses.append([loss_pde.item(), loss_u0.item(), loss_v0.item()])
        lrs.append(sched.get_last_lr()[0])
    ts = torch.linspace(0, 1, 4).unsqueeze(1)
    with torch.no_grad():
        gap = (model(torch.zeros_like(ts), ts) - model(torch.full_like(ts, 2 * math.pi), ts)).abs().max()  # fmt: skip
        u_grid = model(x0[::3], torch.full_like(x0[::3], 0.5))
    return {"losses": losses, "lrs": lrs, "gap": gap, "u_grid": u_grid, "grads": grads(model),
            "t0_grad": t0.grad, "v_init": v_init.detach()[:4]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 MLP and second derivatives: summation order differs
def sciml_pinn_inverse_diffusion_reaction_trainable_coefficients(torch):
    """An inverse problem as DeepXDE's ``dde.Variable`` examples pose it: ``D u_xx - k u + f = 0``
    with unknown ``D`` and ``k`` learned through log-parametrised leaf tensors in their own
    parameter group (a larger learning rate), a data loss on noisy observations, the residual
    from ``autograd.grad``; the coefficients' trajectory over the steps."""
    nn = torch.nn
    D_true, k_true = 0.5, 2.0
    net = set_weights(torch, _mlp(nn, (1, 16, 16, 1), nn.Tanh), seed=12)
    log_D = torch.tensor(math.log(0.2), requires_grad=True)
    log_k = torch.tensor(0.0, requires_grad=True)
    rng = _rng(13)
    x = torch.tensor(rng.uniform(0, 1, (30, 1)).astype(np.float32), requires_grad=True)
    x_obs = torch.linspace(0.05, 0.95, 10).unsqueeze(1)
    u_obs = torch.sin(math.pi * x_obs) + torch.tensor(arr(14, 10, 1, scale=0.01))

    def source(z):
        return (D_true * math.pi**2 + k_true) * torch.sin(math.pi * z)

    opt = torch.optim.Adam([{"params": net.parameters()}, {"params": [log_D, log_k], "lr": 5e-2}], lr=1e-2)  # fmt: skip
    losses, coefs = [], []
    for _ in range(6):
        opt.zero_grad()
        u = net(x)
        u_x = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0]
        res = log_D.exp() * u_xx - log_k.exp() * u + source(x)
        loss_res = res.pow(2).mean()
        loss_data = nn.functional.mse_loss(net(x_obs), u_obs)
        loss_bc = net(torch.tensor([[0.0], [1.0]])).pow(2).sum()
        loss = loss_res + 10.0 * loss_data + loss_bc
        loss.backward()
        opt.step()
        losses.append(loss.item())
        coefs.append([log_D.exp().item(), log_k.exp().item()])
    return {"losses": losses, "coefs": coefs, "log_D_grad": log_D.grad, "log_k_grad": log_k.grad,
            "grads": grads(net), "groups": [g["lr"] for g in opt.param_groups],
            "res": res.detach()[:5]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 FFTs and einsum: summation order differs
def sciml_fno1d_spectral_conv_cfloat_weights_lploss(torch):
    """The 1-D Fourier neural operator of Li et al. as neuraloperator's first release wrote it:
    ``SpectralConv1d`` with ``cfloat`` parameters, ``rfft``, ``einsum("bix,iox->box")`` on the
    lowest modes into a zero ``cfloat`` spectrum, ``irfft(n=...)``; the grid appended as a
    channel, 1x1 ``Conv1d`` bypasses, GELU; ``UnitGaussianNormalizer`` and the relative ``LpLoss``;
    trained a few Adam steps on the heat-equation solution operator."""
    nn = torch.nn
    F = nn.functional
    s, modes, width, n_train = 32, 6, 8, 6

    class SpectralConv1d(nn.Module):
        def __init__(self, in_channels, out_channels, modes1, seed):
            super().__init__()
            self.out_channels, self.modes1 = out_channels, modes1
            self.scale = 1 / (in_channels * out_channels)
            g = _rng(seed)
            w = g.random((in_channels, out_channels, modes1)) + 1j * g.random((in_channels, out_channels, modes1))  # fmt: skip
            self.weights1 = nn.Parameter(self.scale * torch.tensor(w.astype(np.complex64)))

        def compl_mul1d(self, input, weights):
            return torch.einsum("bix,iox->box", input, weights)

        def forward(self, x):
            batchsize = x.shape[0]
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(batchsize, self.out_channels, x.size(-1) // 2 + 1, device=x.device, dtype=torch.cfloat)  # fmt: skip
            out_ft[:, :, : self.modes1] = self.compl_mul1d(x_ft[:, :, : self.modes1], self.weights1)  # fmt: skip
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class FNO1d(nn.Module):
        def __init__(self, modes, width):
            super().__init__()
            self.fc0 = nn.Linear(2, width)
            self.conv0 = SpectralConv1d(width, width, modes, seed=20)
            self.conv1 = SpectralConv1d(width, width, modes, seed=21)
            self.w0 = nn.Conv1d(width, width, 1)
            self.w1 = nn.Conv1d(width, width, 1)
            self.fc1 = nn.Linear(width, 16)
            self.fc2 = nn.Linear(16, 1)

        def get_grid(self, shape, device):
            batchsize, size_x = shape[0], shape[1]
            gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
            return gridx.reshape(1, size_x, 1).repeat([batchsize, 1, 1]).to(device)

        def forward(self, x):
            grid = self.get_grid(x.shape, x.device)
            x = torch.cat((x, grid), dim=-1)
            x = self.fc0(x).permute(0, 2, 1)
            x = F.gelu(self.conv0(x) + self.w0(x))
            x = self.conv1(x) + self.w1(x)
            x = x.permute(0, 2, 1)
            return self.fc2(F.gelu(self.fc1(x)))

    class UnitGaussianNormalizer:
        def __init__(self, x, eps=0.00001):
            self.mean = torch.mean(x, 0)
            self.std = torch.std(x, 0)
            self.eps = eps

        def encode(self, x):
            return (x - self.mean) / (self.std + self.eps)

        def decode(self, x):
            return x * (self.std + self.eps) + self.mean

    class LpLoss:
        def __init__(self, p=2, size_average=True):
            self.p, self.size_average = p, size_average

        def rel(self, x, y):
            num_examples = x.size()[0]
            diff_norms = torch.norm(x.reshape(num_examples, -1) - y.reshape(num_examples, -1), self.p, 1)  # fmt: skip
            y_norms = torch.norm(y.reshape(num_examples, -1), self.p, 1)
            return torch.mean(diff_norms / y_norms) if self.size_average else torch.sum(diff_norms / y_norms)  # fmt: skip

        def __call__(self, x, y):
            return self.rel(x, y)

    # inputs: random smooth periodic functions; targets: the heat equation's solution at T = 0.02
    g = _rng(22)
    grid = np.linspace(0, 1, s, endpoint=False)
    a = sum(g.standard_normal((n_train + 2, 1)) * np.sin(2 * np.pi * k * grid + g.uniform(0, 6.28, (n_train + 2, 1))) / k for k in (1, 2, 3, 5))  # fmt: skip
    k = np.fft.rfftfreq(s, d=1.0 / s)
    u = np.fft.irfft(np.fft.rfft(a, axis=1) * np.exp(-((2 * np.pi * k) ** 2) * 0.002), n=s, axis=1)
    x_train = torch.tensor(a[:n_train, :, None].astype(np.float32))
    y_train = torch.tensor(u[:n_train, :, None].astype(np.float32))
    x_test = torch.tensor(a[n_train:, :, None].astype(np.float32))
    y_test = torch.tensor(u[n_train:, :, None].astype(np.float32))
    x_normalizer = UnitGaussianNormalizer(x_train)
    x_train, x_test = x_normalizer.encode(x_train), x_normalizer.encode(x_test)

    model = FNO1d(modes, width)
    with torch.no_grad():
        real = [p for p in model.parameters() if not p.is_complex()]
        g = _rng(23)
        for p in real:
            bound = 1 / math.sqrt(p.shape[1] if p.dim() > 1 else p.shape[0])
            p.copy_(torch.tensor(g.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    n_params = sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    myloss = LpLoss(size_average=False)
    losses = []
    for _ in range(4):
        model.train()
        opt.zero_grad()
        out = model(x_train)
        loss = myloss(out.view(n_train, -1), y_train.view(n_train, -1))
        loss.backward()
        opt.step()
        scheduler.step()
        losses.append(loss.item() / n_train)
    model.eval()
    with torch.no_grad():
        pred = model(x_test)
        test_l2 = myloss(pred.view(2, -1), y_test.view(2, -1)).item() / 2
    return {"losses": losses, "test_l2": test_l2, "pred": pred[:, ::4, 0], "n_params": n_params,
            "w1": model.conv1.weights1.detach()[:2, :2], "w0_grad": model.conv0.weights1.grad[:2, :2],
            "fc0_grad": model.fc0.weight.grad, "x_mean": x_normalizer.mean[::8, 0],
            "dtype": str(model.conv0.weights1.dtype)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 MLPs and derivative w.r.t. the trunk input
def sciml_deeponet_antiderivative_physics_informed(torch):
    """A DeepONet (Lu et al.) learning the antiderivative operator: a branch net on the input
    function at fixed sensors, a trunk net (activated last layer, as DeepXDE does) on the query
    point, the dot product plus a bias; the cartesian-product format for data
    (``einsum("bi,ni->bn")``) and the pointwise format with ``repeat_interleave`` for the
    physics-informed loss ``dG/dy = u(y)`` from ``autograd.grad``; ``G(u)(0) = 0`` as a loss."""
    nn = torch.nn
    m, p, n_funcs = 12, 16, 8

    class DeepONet(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = _mlp(nn, (m, 32, p), nn.Tanh)
            self.trunk = nn.Sequential(_mlp(nn, (1, 32, p), nn.Tanh), nn.Tanh())
            self.b = nn.Parameter(torch.zeros(1))

        def forward_cartesian(self, u, y):
            return torch.einsum("bi,ni->bn", self.branch(u), self.trunk(y)) + self.b

        def forward(self, u, y):
            return (self.branch(u) * self.trunk(y)).sum(dim=-1, keepdim=True) + self.b

    sensors = np.linspace(0, 1, m)
    coef = _rng(30).standard_normal((n_funcs, 3))

    def u_of(y):
        return sum(coef[:, k : k + 1] * np.cos(k * np.pi * y) for k in range(3))

    def G_of(y):
        return coef[:, :1] * y + sum(coef[:, k : k + 1] * np.sin(k * np.pi * y) / (k * np.pi) for k in (1, 2))  # fmt: skip

    y_data = np.linspace(0, 1, 7)
    u_sensors = torch.tensor(u_of(sensors[None, :]).astype(np.float32))
    G_data = torch.tensor(G_of(y_data[None, :]).astype(np.float32))
    y_q = torch.tensor(y_data.astype(np.float32)).unsqueeze(1)
    # pointwise pairs for the physics loss: every function with every sensor location
    u_rep = u_sensors.repeat_interleave(m, dim=0)
    y_res = torch.tensor(np.tile(sensors, n_funcs).astype(np.float32)).unsqueeze(1).requires_grad_(True)  # fmt: skip
    u_target = u_sensors.reshape(-1, 1)
    model = set_weights(torch, DeepONet(), seed=31)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss_data = nn.functional.mse_loss(model.forward_cartesian(u_sensors, y_q), G_data)
        G = model(u_rep, y_res)
        dG = torch.autograd.grad(G, y_res, torch.ones_like(G), create_graph=True)[0]
        loss_phys = (dG - u_target).pow(2).mean()
        loss_ic = model.forward_cartesian(u_sensors, torch.zeros(1, 1)).pow(2).mean()
        loss = loss_data + loss_phys + loss_ic
        loss.backward()
        opt.step()
        losses.append([loss_data.item(), loss_phys.item(), loss_ic.item()])
    with torch.no_grad():
        pred = model.forward_cartesian(u_sensors[:3], y_q)
    return {"losses": losses, "pred": pred, "G_data": G_data[:3], "grads": grads(model),
            "dG": dG.detach()[:: m + 1], "u_rep_shape": list(u_rep.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 double backward through two MLPs
def sciml_dissipative_hnn_helmholtz_split_rollout(torch):
    """A dissipative Hamiltonian network (Sosanya & Greydanus): two scalar potentials, the
    rotational field ``J grad H`` and the irrotational field ``grad D`` from ``autograd.grad``,
    fitted to a damped oscillator's derivatives; then rollouts under ``no_grad`` with
    ``enable_grad`` inside, by Heun's method for the full field and by symplectic Euler for the
    conservative part alone, ``H`` and ``D`` along the way."""
    nn = torch.nn
    gamma = 0.3

    class DHNN(nn.Module):
        def __init__(self, hidden=24):
            super().__init__()
            self.mlp_h = _mlp(nn, (2, hidden, hidden, 1), nn.Tanh)
            self.mlp_d = _mlp(nn, (2, hidden, hidden, 1), nn.Tanh)

        def forward(self, x, as_separate=False):
            H, D = self.mlp_h(x), self.mlp_d(x)
            irr = torch.autograd.grad(D.sum(), x, create_graph=True)[0]
            rot = torch.autograd.grad(H.sum(), x, create_graph=True)[0]
            dHdq, dHdp = torch.split(rot, 1, dim=1)
            rot = torch.cat([dHdp, -dHdq], dim=1)
            if as_separate:
                return irr, rot
            return irr + rot

    rng = _rng(40)
    x_np = rng.uniform(-1, 1, (48, 2)).astype(np.float32)
    dx_np = np.stack([x_np[:, 1], -x_np[:, 0] - gamma * x_np[:, 1]], 1).astype(np.float32)
    x = torch.tensor(x_np, requires_grad=True)
    dx = torch.tensor(dx_np)
    model = set_weights(torch, DHNN(), seed=41)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = (model(x) - dx).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    def field(state, **kw):
        with torch.enable_grad():
            s = state.detach().requires_grad_(True)
            out = model(s, **kw)
        return out.detach() if isinstance(out, torch.Tensor) else tuple(o.detach() for o in out)

    h = 0.2
    with torch.no_grad():
        state = torch.tensor([[0.8, 0.0]])
        traj, energies = [state], []
        for _ in range(6):
            k1 = field(state)
            k2 = field(state + h * k1)
            state = state + h / 2 * (k1 + k2)
            traj.append(state)
            energies.append([model.mlp_h(state).item(), model.mlp_d(state).item()])
        q, p = torch.tensor([[0.8]]), torch.tensor([[0.0]])
        symp = []
        for _ in range(6):
            _, rot = field(torch.cat([q, p], 1), as_separate=True)
            p = p + h * rot[:, 1:]
            _, rot = field(torch.cat([q, p], 1), as_separate=True)
            q = q + h * rot[:, :1]
            symp.append(torch.cat([q, p], 1))
        irr, rot = field(torch.cat(traj), as_separate=True)
    return {"losses": losses, "traj": torch.cat(traj), "energies": energies,
            "symplectic": torch.cat(symp), "irr": irr, "rot": rot, "grads": grads(model),
            "grad_enabled": torch.is_grad_enabled()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # float32 message passing sums (index_add_) and LayerNorm
def sciml_gns_learned_simulator_radius_graph_step(torch):
    """A learned particle simulator in the style of Sanchez-Gonzalez et al.'s GNS: velocity
    histories normalised by dataset statistics, clipped distances to the walls, a radius graph
    from ``cdist`` and ``nonzero``, encode-process-decode with LayerNorm MLPs and two
    interaction-network steps (``index_add_`` aggregation, residual updates), random-walk noise
    on the input positions, the normalised acceleration loss, and a short rollout with the
    semi-implicit Euler integrator."""
    nn = torch.nn
    N, C, R, latent = 10, 4, 0.3, 16
    lower, upper = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])

    def build_mlp(i, o, layer_norm=True):
        layers = [nn.Linear(i, latent), nn.ReLU(), nn.Linear(latent, o)]
        if layer_norm:
            layers.append(nn.LayerNorm(o))
        return nn.Sequential(*layers)

    class InteractionNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.edge_fn = build_mlp(3 * latent, latent)
            self.node_fn = build_mlp(2 * latent, latent)

        def forward(self, v, e, senders, receivers):
            e_new = self.edge_fn(torch.cat([e, v[senders], v[receivers]], dim=-1))
            agg = torch.zeros_like(v).index_add_(0, receivers, e_new)
            v_new = self.node_fn(torch.cat([v, agg], dim=-1))
            return v + v_new, e + e_new

    class LearnedSimulator(nn.Module):
        def __init__(self, stats):
            super().__init__()
            self.stats = stats
            self.node_encoder = build_mlp(2 * (C - 1) + 4, latent)
            self.edge_encoder = build_mlp(3, latent)
            self.processor = nn.ModuleList([InteractionNetwork() for _ in range(2)])
            self.decoder = build_mlp(latent, 2, layer_norm=False)

        def preprocess(self, pos_seq):
            last = pos_seq[:, -1]
            vel = pos_seq[:, 1:] - pos_seq[:, :-1]
            vel_n = (vel - self.stats["vel_mean"]) / self.stats["vel_std"]
            walls = torch.cat([last - lower, upper - last], dim=-1) / R
            node = torch.cat([vel_n.flatten(1), walls.clamp(-1.0, 1.0)], dim=-1)
            adj = (torch.cdist(last, last) < R) & ~torch.eye(last.shape[0], dtype=torch.bool)
            senders, receivers = adj.nonzero(as_tuple=True)
            rel = (last[senders] - last[receivers]) / R
            edge = torch.cat([rel, rel.norm(dim=-1, keepdim=True)], dim=-1)
            return node, edge, senders, receivers

        def forward(self, pos_seq):
            node, edge, senders, receivers = self.preprocess(pos_seq)
            v, e = self.node_encoder(node), self.edge_encoder(edge)
            for block in self.processor:
                v, e = block(v, e, senders, receivers)
            return self.decoder(v), senders.numel()

        def predict_positions(self, pos_seq):
            acc_n, _ = self(pos_seq)
            acc = acc_n * self.stats["acc_std"] + self.stats["acc_mean"]
            vel = pos_seq[:, -1] - pos_seq[:, -2]
            return pos_seq[:, -1] + vel + acc  # dt = 1: v_{t+1} = v_t + a, x_{t+1} = x_t + v_{t+1}

    rng = _rng(50)
    p0 = rng.uniform(0.1, 0.9, (N, 2))
    v0 = rng.normal(0, 0.01, (N, 2))
    traj = [p0]
    for _ in range(C + 3):
        v0 = v0 + np.array([0.0, -0.002]) + rng.normal(0, 0.001, (N, 2))
        traj.append(traj[-1] + v0)
    traj = torch.tensor(np.stack(traj, 1).astype(np.float32))  # (N, C + 4, 2)
    stats = {"vel_mean": torch.tensor([0.0, -0.002]), "vel_std": torch.tensor([0.01, 0.01]),
             "acc_mean": torch.tensor([0.0, -0.002]), "acc_std": torch.tensor([0.001, 0.001])}  # fmt: skip
    sim = set_weights(torch, LearnedSimulator(stats), seed=51)
    noise_std = 3e-4
    opt = torch.optim.Adam(sim.parameters(), lr=1e-3)
    losses, n_edges = [], []
    for step in range(3):
        pos_seq = traj[:, step : step + C]
        target_next = traj[:, step + C]
        vel_noise = torch.tensor(_rng(60 + step).normal(0, noise_std / math.sqrt(C - 1), (N, C - 1, 2)).astype(np.float32))  # fmt: skip
        pos_noise = torch.cat([torch.zeros(N, 1, 2), torch.cumsum(vel_noise, dim=1)], dim=1)
        noisy = pos_seq + pos_noise
        next_adj = target_next + pos_noise[:, -1]
        acc_target = next_adj - 2 * noisy[:, -1] + noisy[:, -2]
        acc_target_n = (acc_target - stats["acc_mean"]) / stats["acc_std"]
        opt.zero_grad()
        acc_pred_n, ne = sim(noisy)
        loss = (acc_pred_n - acc_target_n).pow(2).sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        n_edges.append(ne)
    with torch.no_grad():
        window = traj[:, :C]
        rollout = []
        for _ in range(3):
            nxt = sim.predict_positions(window)
            rollout.append(nxt)
            window = torch.cat([window[:, 1:], nxt.unsqueeze(1)], dim=1)
        rollout = torch.stack(rollout, 1)
        mse = (rollout - traj[:, C : C + 3]).pow(2).mean()
    return {"losses": losses, "n_edges": n_edges, "rollout": rollout[:4], "rollout_mse": mse,
            "grads": grads(sim), "acc_target_n": acc_target_n[:3]}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def sciml_sindy_stlsq_lorenz_polynomial_library(torch):
    """SINDy on the Lorenz system as PySINDy does it (float64): trajectories integrated by RK4,
    derivatives by ``torch.gradient`` (second-order central differences), a degree-2 polynomial
    library from ``itertools.combinations_with_replacement`` with feature names, sequentially
    thresholded ridge regression (normal equations by ``linalg.solve``, coefficients below the
    threshold zeroed through a boolean mask, the support's stop test by ``torch.equal``); the
    discovered equations printed."""
    dt_ = torch.float64
    sigma, rho, beta = 10.0, 28.0, 8.0 / 3.0

    def lorenz(s):
        x, y, z = s.unbind(-1)
        return torch.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z], dim=-1)

    h = 0.005
    state = torch.tensor([[-8.0, 8.0, 27.0], [2.0, -3.0, 20.0]], dtype=dt_)
    xs = [state]
    for _ in range(160):
        k1 = lorenz(state)
        k2 = lorenz(state + h / 2 * k1)
        k3 = lorenz(state + h / 2 * k2)
        k4 = lorenz(state + h * k3)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        xs.append(state)
    X = torch.stack(xs, dim=1)  # (trajectories, time, 3)
    (dX,) = torch.gradient(X, spacing=h, dim=1)
    X, dX = X.reshape(-1, 3), dX.reshape(-1, 3)

    names, cols = ["1"], [torch.ones(X.shape[0], dtype=dt_)]
    var = ["x", "y", "z"]
    for degree in (1, 2):
        for combo in itertools.combinations_with_replacement(range(3), degree):
            cols.append(torch.prod(X[:, list(combo)], dim=1))
            names.append(" ".join(var[i] for i in combo))
    Theta = torch.stack(cols, dim=1)

    def ridge(A, b, alpha=0.05):
        return torch.linalg.solve(A.T @ A + alpha * torch.eye(A.shape[1], dtype=dt_), A.T @ b)

    threshold = 0.5
    Xi = ridge(Theta, dX)
    support = torch.ones_like(Xi, dtype=torch.bool)
    n_iter = 0
    for _ in range(10):
        n_iter += 1
        small = Xi.abs() < threshold
        Xi[small] = 0.0
        new_support = ~small
        for k in range(3):
            big = new_support[:, k]
            if big.any():
                Xi[big, k] = ridge(Theta[:, big], dX[:, k]).to(dt_)
        if torch.equal(new_support, support):
            break
        support = new_support
    equations = []
    for k, lhs in enumerate(["x'", "y'", "z'"]):
        terms = [f"{Xi[i, k].item():.2f} {names[i]}" for i in range(len(names)) if Xi[i, k] != 0]
        equations.append(f"({lhs}) = " + " + ".join(terms))
    resid = (Theta @ Xi - dX).norm() / dX.norm()
    return {"Xi": Xi, "support": support, "n_iter": n_iter, "equations": "\n".join(equations),
            "names": ",".join(names), "resid": resid, "dX": dX[::40]}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def sciml_exact_dmd_svd_eig_modes_reconstruction(torch):
    """Exact dynamic mode decomposition (Tu et al.; PyDMD's steps) in float64: snapshot matrices
    ``X``, ``Y``, a truncated ``linalg.svd``, the reduced operator ``U^T Y V S^-1``, its complex
    eigenvalues from ``linalg.eig``, exact modes, amplitudes by complex ``lstsq``, continuous-time
    frequencies ``log(lambda) / dt`` and the reconstruction ``Phi diag(b) lambda^k``; eigenvalues
    sorted so that their order is defined."""
    dt_ = torch.float64
    dt, r, n_snap = 0.1, 4, 24
    # two damped rotations in 4-D lifted into 16-D
    blocks = []
    for decay, omega in ((-0.1, 2.0), (-0.4, 5.0)):
        e = math.exp(decay * dt)
        c, s = math.cos(omega * dt), math.sin(omega * dt)
        blocks.append(e * np.array([[c, -s], [s, c]]))
    A = np.zeros((4, 4))
    A[:2, :2], A[2:, 2:] = blocks
    lift = _rng(70).standard_normal((16, 4))
    z = np.array([1.0, 0.0, 0.5, 0.5])
    snaps = []
    for _ in range(n_snap):
        snaps.append(lift @ z)
        z = A @ z
    D = torch.tensor(np.stack(snaps, 1)) + torch.tensor(arr(71, 16, n_snap, scale=1e-6, dtype=np.float64))  # fmt: skip
    X, Y = D[:, :-1], D[:, 1:]
    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    Ur, Sr, Vr = U[:, :r], S[:r], Vh[:r].conj().T
    Atilde = Ur.T @ Y @ Vr / Sr  # divides the columns by the singular values
    lam, W = torch.linalg.eig(Atilde)
    Phi = (Y @ Vr / Sr).to(torch.complex128) @ W
    b = torch.linalg.lstsq(Phi, D[:, 0].to(torch.complex128).unsqueeze(1)).solution.squeeze(1)
    k = torch.arange(n_snap, dtype=dt_)
    dynamics = b.unsqueeze(1) * lam.unsqueeze(1) ** k
    recon = (Phi @ dynamics).real
    omega = torch.log(lam) / dt
    order = torch.argsort(omega.imag)
    err = torch.linalg.norm(recon - D) / torch.linalg.norm(D)
    predicted = (Phi @ (b * lam**n_snap)).real
    truth = torch.tensor(lift @ z)
    return {"S": S[:6], "energy": (S[:r] ** 2).sum() / (S**2).sum(), "lam": lam[order],
            "omega": omega[order], "abs_b": b.abs()[order], "recon_err": err,
            "recon": recon[::5, ::6], "forecast_err": torch.linalg.norm(predicted - truth),
            "lam_dtype": str(lam.dtype)}  # fmt: skip
