"""Algorithms written with in-place updates through views, as numerical and training code writes
them: LU with row swaps, Gram-Schmidt, Lanczos and power iteration into preallocated bases,
conjugate gradients, Kalman filters, replay buffers, recurrent rollouts with GAE, flat parameter
and gradient buffers, TRPO's flat-vector updates, stencil solvers on interior views, and the
shared-storage idioms of metrics and inference code. Their results depend on views seeing their
base's changes and on changes made through views reaching the base."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@program(rtol=1e-9, atol=1e-10)
def lu_partial_pivoting_row_swaps_and_elimination(torch):
    """Doolittle LU with partial pivoting written in place as textbooks write it (rows swapped
    with ``A[[k, p]] = A[[p, k]]``, multipliers stored below the diagonal, the trailing block
    updated by an outer product), with views of a row, a column, a block and the diagonal taken
    before the loop; then Gaussian elimination of ``[A | B]`` with ``Ab[i+1:] -= f[:, None] *
    Ab[i]`` and back substitution into a preallocated solution through the right-hand side's
    view."""
    n = 5
    rng = _rng(1)
    a0, b0 = rng.standard_normal((n, n)), rng.standard_normal((n, 2))
    A = torch.tensor(a0)
    first_row, first_col, trailing = A[0], A[:, 0], A[2:, 2:]
    diag = A.diagonal()  # U's diagonal once the loop is done
    perm = torch.arange(n)
    sign = 1.0
    for k in range(n - 1):
        p = k + int(A[k:, k].abs().argmax())
        if p != k:
            A[[k, p]] = A[[p, k]]
            perm[[k, p]] = perm[[p, k]]
            sign = -sign
        A[k + 1 :, k] /= A[k, k]
        A[k + 1 :, k + 1 :] -= torch.outer(A[k + 1 :, k], A[k, k + 1 :])
    eye = torch.eye(n, dtype=torch.float64)
    L, U = torch.tril(A, -1) + eye, torch.triu(A)
    P = eye[perm]
    Ab = torch.cat([torch.tensor(a0), torch.tensor(b0)], dim=1)
    rhs = Ab[:, n:]
    for i in range(n):
        p = i + int(Ab[i:, i].abs().argmax())
        Ab[[i, p]] = Ab[[p, i]]
        f = Ab[i + 1 :, i] / Ab[i, i]
        Ab[i + 1 :] -= f[:, None] * Ab[i]
    X = torch.zeros(n, 2, dtype=torch.float64)
    for i in reversed(range(n)):
        X[i] = (rhs[i] - Ab[i, i + 1 : n] @ X[i + 1 :]) / Ab[i, i]
    ref_lu, ref_piv = torch.linalg.lu_factor(torch.tensor(a0))
    return {"LU": A, "perm": perm, "det": sign * diag.prod(), "diag": diag,
            "first_row": first_row, "first_col": first_col, "trailing": trailing,
            "PA_minus_LU": P @ torch.tensor(a0) - L @ U, "X": X, "rhs": rhs,
            "residual": torch.tensor(a0) @ X - torch.tensor(b0), "ref_lu": ref_lu,
            "ref_piv": ref_piv}  # fmt: skip


@program(rtol=1e-9, atol=1e-10)
def modified_gram_schmidt_qr_columns_in_place(torch):
    """Modified Gram-Schmidt QR updating the columns of ``Q`` in place (``Q[:, j] = v /
    v.norm()``, ``Q[:, k] -= R[j, k] * Q[:, j]``) with ``unbind`` column views and a row block
    taken before; a reorthogonalisation pass on the rows of ``Q.t()``; least squares by back
    substitution into a preallocated ``x``."""
    rng = _rng(2)
    m, n = 7, 4
    A = torch.tensor(rng.standard_normal((m, n)))
    Q = A.clone()
    R = torch.zeros(n, n, dtype=torch.float64)
    columns = Q.unbind(1)
    top = Q[:2]
    for j in range(n):
        v = Q[:, j]
        R[j, j] = v.norm()
        Q[:, j] = v / v.norm()
        for k in range(j + 1, n):
            R[j, k] = Q[:, j] @ Q[:, k]
            Q[:, k] -= R[j, k] * Q[:, j]
    Qt = Q.t()
    for k in range(1, n):
        c = Qt[:k] @ Qt[k]
        Qt[k].sub_(c @ Qt[:k])
        Qt[k].div_(Qt[k].norm())
    b = torch.tensor(rng.standard_normal(m))
    qtb = Q.T @ b
    x = torch.zeros(n, dtype=torch.float64)
    for i in reversed(range(n)):
        x[i] = (qtb[i] - R[i, i + 1 :] @ x[i + 1 :]) / R[i, i]
    return {"Q": Q, "R": R, "columns": torch.stack(columns, 1), "top": top, "last_v": v,
            "orth": Q.T @ Q, "recon": Q @ R - A, "x": x,
            "lstsq": torch.linalg.lstsq(A, b[:, None]).solution}  # fmt: skip


@program(rtol=1e-8, atol=1e-9)
def lanczos_and_power_iteration_preallocated_bases(torch):
    """Lanczos with full reorthogonalisation filling a preallocated basis ``V`` column by
    column (rows of ``V`` read back through a view taken before), Ritz values from the
    tridiagonal matrix; then power iteration with deflation, each eigenvector iterated in place
    in a column of a preallocated ``E`` (``x = E[:, i]; x.copy_(y / y.norm())``)."""
    rng = _rng(3)
    n, k = 9, 5
    M = rng.standard_normal((n, n))
    A = torch.tensor(M @ M.T / n + np.diag(np.arange(1.0, n + 1)))
    V = torch.zeros(n, k + 1, dtype=torch.float64)
    alpha = torch.zeros(k, dtype=torch.float64)
    beta = torch.zeros(k, dtype=torch.float64)
    top_rows, q0 = V[:3], V[:, 0]
    start = torch.tensor(rng.standard_normal(n))
    V[:, 0] = start / start.norm()
    for j in range(k):
        w = A @ V[:, j]
        alpha[j] = w @ V[:, j]
        w -= alpha[j] * V[:, j]
        if j > 0:
            w -= beta[j - 1] * V[:, j - 1]
        basis = V[:, : j + 1]
        w -= basis @ (basis.T @ w)
        beta[j] = w.norm()
        V[:, j + 1] = w / beta[j]
    T = torch.diag(alpha) + torch.diag(beta[:-1], 1) + torch.diag(beta[:-1], -1)
    ritz, S = torch.linalg.eigh(T)
    Y = V[:, :k] @ S
    ritz_residuals = (A @ Y - Y * ritz).norm(dim=0)
    B = A.clone()
    E = torch.zeros(n, 3, dtype=torch.float64)
    lams = torch.zeros(3, dtype=torch.float64)
    e0 = E[:, 0]
    for i in range(3):
        x = E[:, i]
        x.fill_(1.0 / math.sqrt(n))
        for _ in range(40):
            y = B @ x
            x.copy_(y / y.norm())
        lams[i] = x @ B @ x
        B -= lams[i] * torch.outer(x, x)
    return {"V": V, "alpha": alpha, "beta": beta, "top_rows": top_rows, "q0": q0,
            "ritz": ritz, "ritz_residuals": ritz_residuals, "E": E, "e0": e0, "lams": lams,
            "deflated": B, "eig": torch.linalg.eigvalsh(A)}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def preconditioned_conjugate_gradient_columns_in_place(torch):
    """Jacobi-preconditioned conjugate gradients for several right-hand sides, each solution a
    column view of a preallocated ``X`` advanced with ``x.add_(p, alpha=a)``; the system
    regularised in place through its diagonal view (``A.diagonal().add_(eps)``)."""
    rng = _rng(4)
    n = 10
    M = rng.standard_normal((n, n))
    A = torch.tensor(M @ M.T / n + 0.5 * np.eye(n))
    A.diagonal().add_(1e-2)
    Bm = torch.tensor(rng.standard_normal((n, 3)))
    X = torch.zeros(n, 3, dtype=torch.float64)
    inv_diag = 1.0 / A.diagonal()
    history = []
    for j in range(3):
        x, b = X[:, j], Bm[:, j]
        r = b - A @ x
        z = inv_diag * r
        p = z.clone()
        rz = r @ z
        for _ in range(7):
            Ap = A @ p
            a = (rz / (p @ Ap)).item()
            x.add_(p, alpha=a)
            r.sub_(Ap, alpha=a)
            z = inv_diag * r
            rz_new = r @ z
            p.mul_(rz_new / rz).add_(z)
            rz = rz_new
            history.append(r.norm().item())
    return {"X": X, "residual": A @ X - Bm, "history": history, "A": A,
            "exact": torch.linalg.solve(A, Bm)}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def kalman_filter_in_place_state_and_covariance(torch):
    """A constant-velocity Kalman filter tracking a 2-d target: state and covariance updated in
    place (``x.copy_(F @ x)``, ``x += K @ y``, ``P -= K @ S @ K.T``), process noise set through
    a diagonal view, views of the position, velocity, position covariance and variances taken
    once and read every step into preallocated histories."""
    rng = _rng(5)
    steps, dt = 12, 0.1
    truth = np.cumsum(np.tile([[0.1, 0.05]], (steps, 1)), axis=0) + np.array([1.0, -1.0])
    meas = truth + 0.3 * rng.standard_normal((steps, 2))
    F = torch.eye(4, dtype=torch.float64)
    F[0, 2] = F[1, 3] = dt
    H = torch.zeros(2, 4, dtype=torch.float64)
    H[0, 0] = H[1, 1] = 1.0
    Q = 0.01 * torch.eye(4, dtype=torch.float64)
    Q.diagonal()[2:] *= 10
    R = 0.09 * torch.eye(2, dtype=torch.float64)
    x = torch.zeros(4, dtype=torch.float64)
    P = 10 * torch.eye(4, dtype=torch.float64)
    pos, vel, P_pos, var = x[:2], x[2:], P[:2, :2], P.diagonal()
    zs = torch.tensor(meas)
    means = torch.zeros(steps, 4, dtype=torch.float64)
    stds = torch.zeros(steps, 4, dtype=torch.float64)
    nis = torch.zeros(steps, dtype=torch.float64)
    for t in range(steps):
        x.copy_(F @ x)
        P.copy_(F @ P @ F.T + Q)
        y = zs[t] - H @ x
        S = H @ P @ H.T + R
        K = torch.linalg.solve(S, H @ P).T
        x += K @ y
        P -= K @ S @ K.T
        P.copy_((P + P.T) / 2)
        means[t] = x
        stds[t] = var.sqrt()
        nis[t] = y @ torch.linalg.solve(S, y)
    return {"pos": pos, "vel": vel, "P_pos": P_pos, "var": var, "means": means,
            "stds": stds, "nis": nis, "Q": Q, "P": P}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def circular_replay_buffer_views_and_n_step_targets(torch):
    """A DQN replay buffer of preallocated tensors written at a circular pointer (``buf.obs[ptr]
    = obs``, batched writes at ``(ptr + arange(n)) % capacity`` that wrap), views of the oldest
    slots taken before they are overwritten, n-step returns accumulated backwards in place, and
    one Q-learning step on a sampled batch."""
    nn, F = torch.nn, torch.nn.functional
    obs_dim, n_act, capacity = 3, 2, 12

    class ReplayBuffer:
        def __init__(self):
            self.obs = torch.zeros(capacity, obs_dim)
            self.next_obs = torch.zeros(capacity, obs_dim)
            self.actions = torch.zeros(capacity, dtype=torch.long)
            self.rewards = torch.zeros(capacity)
            self.dones = torch.zeros(capacity, dtype=torch.bool)
            self.ptr, self.size = 0, 0

        def add(self, obs, action, reward, next_obs, done):
            self.obs[self.ptr] = obs
            self.actions[self.ptr] = action
            self.rewards[self.ptr] = reward
            self.next_obs[self.ptr] = next_obs
            self.dones[self.ptr] = done
            self.ptr = (self.ptr + 1) % capacity
            self.size = min(self.size + 1, capacity)

        def extend(self, obs, actions, rewards, next_obs, dones):
            idx = (self.ptr + torch.arange(len(obs))) % capacity
            self.obs[idx] = obs
            self.actions[idx] = actions
            self.rewards[idx] = rewards
            self.next_obs[idx] = next_obs
            self.dones[idx] = dones
            self.ptr = (self.ptr + len(obs)) % capacity
            self.size = min(self.size + len(obs), capacity)

    traj = arr(60, 21, obs_dim)
    acts, rews = ints(61, n_act, 20), arr(62, 20)
    dones = _rng(63).random(20) < 0.2
    buf = ReplayBuffer()
    for t in range(5):
        buf.add(torch.tensor(traj[t]), int(acts[t]), float(rews[t]), torch.tensor(traj[t + 1]),
                bool(dones[t]))  # fmt: skip
    recent, oldest_reward = buf.obs[:4], buf.rewards[0]
    reward_grid = buf.rewards.view(3, 4)
    for s in range(5, 20, 5):
        buf.extend(torch.tensor(traj[s : s + 5]), torch.tensor(acts[s : s + 5]),
                   torch.tensor(rews[s : s + 5]), torch.tensor(traj[s + 1 : s + 6]),
                   torch.tensor(dones[s : s + 5]))  # fmt: skip
    idx = torch.from_numpy(_rng(64).integers(0, capacity, 6))
    n_step, gamma = 3, 0.9
    returns = torch.zeros(6)
    for k in reversed(range(n_step)):
        j = (idx + k) % capacity
        returns.mul_(gamma * (~buf.dones[j]).float()).add_(buf.rewards[j])
    alive = torch.ones(6)
    for k in range(n_step):
        alive *= gamma * (~buf.dones[(idx + k) % capacity]).float()
    q = set_weights(torch, nn.Sequential(nn.Linear(obs_dim, 8), nn.ReLU(), nn.Linear(8, n_act)),
                    seed=65)  # fmt: skip
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    with torch.no_grad():
        last = (idx + n_step - 1) % capacity
        target = returns + alive * q(buf.next_obs[last]).max(1).values
    q_sa = q(buf.obs[idx]).gather(1, buf.actions[idx, None]).squeeze(1)
    loss = F.smooth_l1_loss(q_sa, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {"obs": buf.obs, "actions": buf.actions, "rewards": buf.rewards, "dones": buf.dones,
            "ptr": buf.ptr, "size": buf.size, "recent": recent, "oldest_reward": oldest_reward,
            "reward_grid": reward_grid, "returns": returns, "alive": alive, "target": target,
            "loss": loss, "q": params(q)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def recurrent_rollout_hidden_buffer_and_gae(torch):
    """A recurrent actor-critic rollout: hidden states written per step into a preallocated
    ``(T + 1, N, H)`` buffer (reset in place at episode starts), GAE computed backwards into a
    preallocated ``advantages`` and normalised in place through ``advantages.view(-1)``; then the
    value loss recomputed with gradients through a ``(N, T, H)`` buffer written with ``h[:, t] =
    ...``, read back whole and through a view of its last step taken before the writes."""
    nn, F = torch.nn, torch.nn.functional
    T, N, obs_dim, hid = 6, 3, 4, 5
    cell = set_weights(torch, nn.GRUCell(obs_dim, hid), seed=70)
    critic = set_weights(torch, nn.Linear(hid, 1), seed=71)
    obs = torch.tensor(arr(72, T, N, obs_dim))
    rewards = torch.tensor(arr(73, T, N))
    dones = torch.tensor((_rng(74).random((T + 1, N)) < 0.25).astype(np.float32))
    gamma, lam = 0.99, 0.95
    hidden = torch.zeros(T + 1, N, hid)
    values = torch.zeros(T + 1, N)
    h_start = hidden[0]
    with torch.no_grad():
        for t in range(T):
            hidden[t] *= (1.0 - dones[t]).unsqueeze(-1)
            values[t] = critic(hidden[t]).squeeze(-1)
            hidden[t + 1] = cell(obs[t], hidden[t])
        values[T] = critic(hidden[T] * (1.0 - dones[T]).unsqueeze(-1)).squeeze(-1)
        advantages = torch.zeros(T, N)
        lastgaelam = torch.zeros(N)
        for t in reversed(range(T)):
            nonterminal = 1.0 - dones[t + 1]
            delta = rewards[t] + gamma * values[t + 1] * nonterminal - values[t]
            lastgaelam = delta + gamma * lam * nonterminal * lastgaelam
            advantages[t] = lastgaelam
        returns = advantages + values[:-1]
        flat = advantages.view(-1)
        flat.sub_(flat.mean()).div_(flat.std() + 1e-8)
    h = torch.zeros(N, T, hid)
    h_last = h[:, -1]
    state = torch.zeros(N, hid)
    for t in range(T):
        state = cell(obs[t], state * (1.0 - dones[t]).unsqueeze(-1))
        h[:, t] = state
    v = critic(h).squeeze(-1)
    loss = F.mse_loss(v, returns.T) + 0.01 * h_last.pow(2).sum()
    loss.backward()
    return {"hidden": hidden, "h_start": h_start, "values": values, "advantages": advantages,
            "returns": returns, "h": h, "h_last": h_last, "loss": loss,
            "grads": {**grads(cell), **grads(critic)}}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def flat_parameter_and_gradient_buckets(torch):
    """Parameters made views of one flat buffer (``p.data = flat[a:b].view_as(p)``, as apex and
    Megatron do), gradients copied into a flat bucket, scaled as an all-reduce would, copied back
    with ``p.grad.copy_(bucket[a:b].view_as(p))``, and an optimizer over the flat buffer; then
    DDP's ``gradient_as_bucket_view``: each ``.grad`` a view of the bucket, zeroed in place and
    accumulated into by backward, with ``torch.optim.SGD`` stepping the parameter views; then a
    hand-written ``p.data.add_(p.grad.data, alpha=-lr)`` that must reach the flat buffer too."""
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)),
                        seed=80)  # fmt: skip
    x, y = torch.tensor(arr(81, 10, 4)), torch.tensor(arr(82, 10, 3))
    ps = list(model.parameters())
    sizes = [p.numel() for p in ps]
    ends = np.cumsum(sizes).tolist()
    bounds = list(zip([0, *ends[:-1]], ends))
    world_size = 4
    flat = torch.zeros(sum(sizes))
    with torch.no_grad():
        for p, (a, b) in zip(ps, bounds):
            flat[a:b].copy_(p.view(-1))
            p.data = flat[a:b].view_as(p)
    first_row = ps[0][0]
    bucket = torch.zeros_like(flat)
    momentum = torch.zeros_like(flat)
    losses = []
    for _ in range(3):
        loss = F.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        for p, (a, b) in zip(ps, bounds):
            bucket[a:b].copy_(p.grad.view(-1))
        bucket.div_(world_size)
        bucket.mul_(world_size)  # the all-reduce: a sum over identical replicas
        for p, (a, b) in zip(ps, bounds):
            p.grad.copy_(bucket[a:b].view_as(p))
        with torch.no_grad():
            momentum.mul_(0.9).add_(bucket)
            flat.add_(momentum, alpha=-0.1)
        losses.append(loss.item())
    after_flat = {"flat": flat.clone(), "params": [p.detach().clone() for p in ps],
                  "first_row": first_row.detach().clone()}  # fmt: skip
    for p, (a, b) in zip(ps, bounds):
        p.grad = bucket[a:b].view_as(p)
    opt = torch.optim.SGD(ps, lr=0.05, momentum=0.9)
    for _ in range(2):
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        bucket.div_(world_size).mul_(world_size)
        opt.step()
        losses.append(loss.item())
    for _ in range(2):  # a hand-written step through ``.data``, as older training loops write it
        model.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        for p in ps:
            p.data.add_(p.grad.data, alpha=-0.05)
        losses.append(loss.item())
    return {"losses": losses, "after_flat": after_flat, "flat": flat, "bucket": bucket,
            "first_row": first_row, "params": params(model), "grads": grads(model)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def trpo_flat_vector_step_and_es_shared_parameters(torch):
    """TRPO as ikostrikov's pytorch-trpo writes it: the flat policy gradient, Fisher-vector
    products by double backward, conjugate gradients in place (``x += alpha * p``), a
    backtracking line search writing ``param.data.copy_(flat[a:b].view(param.size()))``; then an
    evolution strategy whose parameters share a flat ``theta`` after ``vector_to_parameters``, so
    an in-place update of ``theta`` moves the model."""
    nn = torch.nn
    V = nn.utils

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
            self.log_std = nn.Parameter(torch.zeros(1, 2))

        def forward(self, s):
            mean = self.body(s)
            log_std = self.log_std.expand_as(mean)
            return mean, log_std, torch.exp(log_std)

    policy = set_weights(torch, Policy(), seed=90).double()
    states = torch.tensor(_rng(91).standard_normal((16, 3)))
    actions = torch.tensor(_rng(92).standard_normal((16, 2)))
    adv = torch.tensor(_rng(93).standard_normal(16))

    def log_density(a, mean, log_std, std):
        var = std.pow(2)
        return (-(a - mean).pow(2) / (2 * var) - 0.5 * math.log(2 * math.pi) - log_std).sum(1)

    with torch.no_grad():
        fixed_log_prob = log_density(actions, *policy(states))

    def get_loss():
        return -(adv * torch.exp(log_density(actions, *policy(states)) - fixed_log_prob)).mean()

    def get_kl():
        mean1, log_std1, std1 = policy(states)
        mean0, log_std0, std0 = mean1.data, log_std1.data, std1.data
        kl = log_std1 - log_std0 + (std0.pow(2) + (mean0 - mean1).pow(2)) / (2.0 * std1.pow(2))
        return (kl - 0.5).sum(1, keepdim=True)

    def fvp(v):
        g = torch.autograd.grad(get_kl().mean(), policy.parameters(), create_graph=True)
        flat_grad_kl = torch.cat([gi.view(-1) for gi in g])
        g2 = torch.autograd.grad((flat_grad_kl * v).sum(), policy.parameters())
        return torch.cat([gi.contiguous().view(-1) for gi in g2]).data + v * 0.1

    def conjugate_gradients(b, nsteps=6, residual_tol=1e-10):
        x = torch.zeros(b.size(), dtype=b.dtype)
        r, p = b.clone(), b.clone()
        rdotr = torch.dot(r, r)
        for _ in range(nsteps):
            Avp = fvp(p)
            alpha = rdotr / torch.dot(p, Avp)
            x += alpha * p
            r -= alpha * Avp
            new_rdotr = torch.dot(r, r)
            p = r + new_rdotr / rdotr * p
            rdotr = new_rdotr
            if rdotr < residual_tol:
                break
        return x

    def set_flat_params_to(flat_params):
        prev = 0
        for param in policy.parameters():
            size = int(np.prod(list(param.size())))
            param.data.copy_(flat_params[prev : prev + size].view(param.size()))
            prev += size

    loss = get_loss()
    loss_grad = torch.cat([g.view(-1) for g in torch.autograd.grad(loss, policy.parameters())])
    stepdir = conjugate_gradients(-loss_grad)
    shs = 0.5 * (stepdir * fvp(stepdir)).sum(0, keepdim=True)
    fullstep = stepdir / torch.sqrt(shs / 0.01)[0]
    expected_rate = (-loss_grad * stepdir).sum(0, keepdim=True) / torch.sqrt(shs / 0.01)[0]
    prev_params = V.parameters_to_vector(policy.parameters()).detach()
    fval, ratios, accepted = get_loss().data, [], None
    for stepfrac in 0.5 ** np.arange(6):
        xnew = prev_params + float(stepfrac) * fullstep
        set_flat_params_to(xnew)
        newfval = get_loss().data
        ratio = (fval - newfval) / (expected_rate * float(stepfrac))
        ratios.append(ratio.item())
        if ratio.item() > 0.1 and (fval - newfval).item() > 0:
            accepted = float(stepfrac)
            break
    trpo_params = {k: v.detach().clone() for k, v in params(policy).items()}
    target = torch.tensor(_rng(94).standard_normal((16, 2)))

    def score():
        with torch.no_grad():
            return -(policy(states)[0] - target).pow(2).mean()

    theta = V.parameters_to_vector(policy.parameters()).detach().clone()
    V.vector_to_parameters(theta, policy.parameters())
    scores_seen = []
    for it in range(3):
        eps = torch.tensor(_rng(95 + it).standard_normal((4, theta.numel())))
        scores = []
        for e in eps:
            V.vector_to_parameters(theta + 0.05 * e, policy.parameters())
            scores.append(score())
        scores = torch.stack(scores)
        scores_seen.append(scores)
        V.vector_to_parameters(theta, policy.parameters())
        theta.add_((scores - scores.mean()) / (scores.std() + 1e-8) @ eps, alpha=0.02)
    return {"loss_grad": loss_grad, "stepdir": stepdir, "fullstep": fullstep, "ratios": ratios,
            "accepted": str(accepted), "trpo_params": trpo_params, "scores": scores_seen,
            "theta": theta, "final_score": score(), "es_params": params(policy)}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def heat_diffusion_and_jacobi_inpainting_interior_views(torch):
    """Stencil solvers on images updated in place: explicit heat diffusion through a view of
    the interior (``interior += 0.2 * lap``), Jacobi sweeps assigning ``x[:, :, 1:-1, 1:-1]``
    with Neumann borders copied from their neighbours, in-painting a hole by Jacobi updates of
    ``x[..., mask]`` only, and red-black SOR on strided views of the grid."""
    F = torch.nn.functional
    H = W = 12
    yy, xx = np.mgrid[0:H, 0:W] / (H - 1)
    base = np.sin(3 * xx) * np.cos(2 * yy)
    noisy = np.stack([base, base.T]) + 0.1 * _rng(100).standard_normal((2, H, W))
    img = torch.tensor(noisy[None].astype(np.float32))
    u = img.clone()
    interior, corner = u[:, :, 1:-1, 1:-1], u[0, 1, 0, 0]
    for _ in range(8):
        lap = (u[:, :, :-2, 1:-1] + u[:, :, 2:, 1:-1] + u[:, :, 1:-1, :-2] + u[:, :, 1:-1, 2:]
               - 4 * interior)  # fmt: skip
        interior += 0.2 * lap
    v = img.clone()
    for _ in range(8):
        v[:, :, 1:-1, 1:-1] = 0.25 * (v[:, :, :-2, 1:-1] + v[:, :, 2:, 1:-1]
                                      + v[:, :, 1:-1, :-2] + v[:, :, 1:-1, 2:])  # fmt: skip
        v[..., 0, :] = v[..., 1, :]
        v[..., -1, :] = v[..., -2, :]
        v[..., :, 0] = v[..., :, 1]
        v[..., :, -1] = v[..., :, -2]
    hole = np.zeros((H, W), dtype=bool)
    hole[4:8, 3:9] = True
    hole[2, 9] = True
    mask = torch.tensor(hole)
    x = img.clone()
    x[..., mask] = 0.0
    kernel = torch.tensor([[0.0, 0.25, 0.0], [0.25, 0.0, 0.25], [0.0, 0.25, 0.0]])
    kernel = kernel.view(1, 1, 3, 3).repeat(2, 1, 1, 1)
    for _ in range(25):
        avg = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), kernel, groups=2)
        x[..., mask] = avg[..., mask]
    g = img.clone()
    rhs = 0.05 * img
    for _ in range(6):
        for r0, c0 in ((1, 1), (2, 2), (1, 2), (2, 1)):
            rows, cols = slice(r0, H - 1, 2), slice(c0, W - 1, 2)
            cell = g[..., rows, cols]
            avg = 0.25 * (g[..., slice(r0 - 1, H - 2, 2), cols] + g[..., slice(r0 + 1, H, 2), cols]
                          + g[..., rows, slice(c0 - 1, W - 2, 2)]
                          + g[..., rows, slice(c0 + 1, W, 2)] - rhs[..., rows, cols])  # fmt: skip
            cell.mul_(1 - 1.5).add_(avg, alpha=1.5)
    return {"heat": u, "interior": interior, "corner": corner, "jacobi": v, "inpainted": x,
            "hole_values": x[..., mask], "sor": g}  # fmt: skip


@program
def shared_storage_idioms_in_metrics_and_inference(torch):
    """Inference and bookkeeping code that writes through views: a confusion matrix bumped with
    ``cm.view(-1)[k] += 1`` read through its diagonal and row views taken before; rows of a
    count matrix normalised in place through ``unbind``; an input column of a linear layer pruned
    with ``w.t()[i].fill_(0)`` and one weight set with ``w[:, i][j] = v``; LSTM gates from
    ``chunk`` activated in place; the query third of a fused ``qkv`` scaled in place through
    ``split``; an EMA of weights updated through ``.detach()`` aliases."""
    nn = torch.nn
    C = 4
    targets, preds = ints(110, C, 20).tolist(), ints(111, C, 20).tolist()
    cm = torch.zeros(C, C, dtype=torch.long)
    tp, rows = cm.diagonal(), cm.unbind(0)
    for t, p in zip(targets, preds):
        cm.view(-1)[t * C + p] += 1
    recall = tp / torch.stack(rows).sum(1).clamp(min=1)
    trans = cm.float() + 1.0
    for row in trans.unbind(0):
        row /= row.sum()
    lin = set_weights(torch, nn.Linear(5, 3), seed=112)
    col0 = lin.weight[:, 0]
    with torch.no_grad():
        lin.weight.t()[2].fill_(0.0)
        lin.weight[:, 0][1] = 0.5
        lin.bias.view(-1)[0] += 1.0
    xs = torch.tensor(arr(113, 3, 2, 5))
    pruned_out = lin(xs[0])
    cell = set_weights(torch, nn.LSTMCell(5, 4), seed=114)
    with torch.no_grad():
        h, c = torch.zeros(2, 4), torch.zeros(2, 4)
        hs = torch.zeros(3, 2, 4)
        for t in range(3):
            gates = (
                xs[t] @ cell.weight_ih.t() + cell.bias_ih + h @ cell.weight_hh.t() + cell.bias_hh
            )
            i, f, g, o = gates.chunk(4, 1)
            i.sigmoid_()
            f.sigmoid_()
            g.tanh_()
            o.sigmoid_()
            c.mul_(f).add_(i * g)
            h = o * c.tanh()
            hs[t] = h
        ref_h, ref_c = torch.zeros(2, 4), torch.zeros(2, 4)
        for t in range(3):
            ref_h, ref_c = cell(xs[t], (ref_h, ref_c))
    D = 4
    wqkv = torch.tensor(arr(115, 5, 3 * D))
    with torch.no_grad():
        qkv = xs[0] @ wqkv
        q, k, v = qkv.split(D, dim=-1)
        q.mul_(D**-0.5)
        attn = (q @ k.t()).softmax(-1) @ v
    ema = set_weights(torch, nn.Linear(5, 3), seed=116)
    for _ in range(3):
        for e, m in zip(ema.parameters(), lin.parameters()):
            e.detach().mul_(0.9).add_(m.detach(), alpha=0.1)
    return {"cm": cm, "tp": tp, "rows": torch.stack(rows), "recall": recall, "trans": trans,
            "col0": col0, "weight": lin.weight, "bias": lin.bias, "pruned_out": pruned_out,
            "gates": gates, "hs": hs, "c": c, "ref_h": ref_h, "ref_c": ref_c, "qkv": qkv,
            "attn": attn, "ema": params(ema)}  # fmt: skip


@program
def autograd_through_views_of_inplace_updated_tensors(torch):
    """Backward through tensors changed in place while views of them were live: a layer's
    output gated in place on a slice and passed through ``relu_`` with a view of its first
    features taken before; a reshaped product updated through views of a view (``add_``,
    ``mul_``, ``sigmoid_``) and read through a view taken before; a masked copy with a
    column zeroed through ``.t()[i]``; an embedding table changed under ``no_grad`` and read
    through a view of its rows taken before."""
    nn = torch.nn
    lin = set_weights(torch, nn.Linear(4, 6), seed=120)
    gate = torch.tensor(arr(121, 3), requires_grad=True)
    x = torch.tensor(arr(122, 5, 4))
    y = lin(x)
    skip = y[:, :3]
    y[:, 3:] *= gate
    y.relu_()
    loss1 = (skip * torch.tensor(arr(123, 5, 3))).sum() + y.pow(2).sum()
    loss1.backward()
    w = torch.tensor(arr(124, 4, 8), requires_grad=True)
    b = torch.tensor(arr(125, 4), requires_grad=True)
    z = x @ w
    zv = z.view(5, 2, 4)
    head = zv[:, 1]
    zv[:, 0].add_(b)
    z.mul_(2)
    zv[:, 1].sigmoid_()
    loss2 = head.pow(2).sum() + (z * torch.tensor(arr(126, 5, 8))).sum()
    loss2.backward()
    m = torch.tensor(arr(127, 3, 4), requires_grad=True)
    masked = m * 1
    masked.t()[1].zero_()
    masked[:, 2][0] = 5.0
    (masked * torch.tensor(arr(128, 3, 4))).sum().backward()
    emb = set_weights(torch, nn.Embedding(6, 3), seed=129)
    first_rows = emb.weight[:3]
    with torch.no_grad():
        emb.weight[0].zero_()
        emb.weight.mul_(0.5)
    idx = torch.tensor([[0, 2, 5], [1, 1, 4]])
    loss3 = emb(idx).pow(2).sum() + (first_rows * 3).sum()
    loss3.backward()
    return {"y": y, "skip": skip, "loss1": loss1, "lin": grads(lin), "gate": gate.grad,
            "z": z, "head": head, "loss2": loss2, "w": w.grad, "b": b.grad, "masked": masked,
            "m": m.grad, "first_rows": first_rows, "emb": emb.weight, "emb_grad": emb.weight.grad,
            "loss3": loss3}  # fmt: skip
