"""Offline and model-based reinforcement learning as their reference implementations write it:
CQL's conservative penalty (a ``logsumexp`` over random, current-policy and next-policy actions
with importance corrections, and its Lagrange-tuned weight), discrete CQL on a double-DQN, IQL's
expectile value regression and advantage-weighted actor, TD3+BC's normalised states and
Q-scaled lambda, AWAC's batch-softmax advantage weights, a Decision Transformer with timestep
embeddings, interleaved (return, state, action) tokens, a causal mask and left padding, Dreamer's
Gaussian RSSM with free nats and its discrete-latent successor with straight-through one-hot
samples, KL balancing and unimix, MuZero's value transform ``h(x)`` with two-hot categorical
supports and its unrolled training with gradient scaling, TD(lambda)/GAE and Retrace targets
computed backwards, a probabilistic dynamics ensemble with MOPO's uncertainty penalty, and the
target-network (polyak / EMA / hard copy) idioms of the usual libraries. Every name starts with
``orl_``; every random draw comes from NumPy."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

OBS, ACT = 6, 3


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _uniform(seed: int, *shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return _rng(seed).uniform(low, high, shape).astype(np.float32)


def _offline_batch(torch, seed: int, n: int = 16, obs: int = OBS, act: int = ACT):
    """A fixed D4RL-like minibatch: observations, tanh-squashed actions, rewards, next
    observations and terminal flags."""
    rng = _rng(seed)
    o = rng.standard_normal((n, obs)).astype(np.float32)
    a = np.tanh(rng.standard_normal((n, act))).astype(np.float32)
    r = rng.standard_normal(n).astype(np.float32)
    o2 = (o + 0.1 * rng.standard_normal((n, obs))).astype(np.float32)
    d = (rng.random(n) < 0.2).astype(np.float32)
    return tuple(torch.tensor(x) for x in (o, a, r, o2, d))


def _mlp(torch, din, dout, hidden=32, n_hidden=2, act=None):
    nn = torch.nn
    layers, d = [], din
    for _ in range(n_hidden):
        layers += [nn.Linear(d, hidden), act() if act else nn.ReLU()]
        d = hidden
    layers.append(nn.Linear(d, dout))
    return nn.Sequential(*layers)


def _soft_update(target, source, tau):
    """CleanRL / TD3's target update."""
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


# ----------------------------------------------------------------------------------------------
# CQL
# ----------------------------------------------------------------------------------------------


@program
def orl_cql_sac_logsumexp_over_sampled_actions_lagrange(torch):
    """Continuous CQL on SAC as the reference code writes it: twin critics evaluated on random
    uniform actions, current-policy and next-policy actions for every state (observations
    repeated with ``unsqueeze(1).repeat``), importance-corrected by the uniform density and the
    policy's log-probabilities, a temperature-scaled ``logsumexp`` minus the data Q-values, a
    Lagrange multiplier on the action gap (``log_alpha_prime.exp().clamp``), the entropy
    temperature update and polyak-averaged target critics."""
    nn, F = torch.nn, torch.nn.functional
    Normal = torch.distributions.Normal
    B, N = 12, 5

    class TanhGaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(OBS, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            self.mu = nn.Linear(32, ACT)
            self.log_std = nn.Linear(32, ACT)

        def forward(self, obs, eps):
            h = self.trunk(obs)
            mu = self.mu(h)
            log_std = self.log_std(h).clamp(-20.0, 2.0)
            std = log_std.exp()
            pre_tanh = mu + std * eps  # rsample with a fixed noise draw
            action = torch.tanh(pre_tanh)
            log_prob = Normal(mu, std).log_prob(pre_tanh).sum(-1)
            log_prob = log_prob - (
                2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
            ).sum(-1)
            return action, log_prob

    class FullyConnectedQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _mlp(torch, OBS + ACT, 1)

        def forward(self, obs, actions):
            return self.net(torch.cat([obs, actions], dim=-1)).squeeze(-1)

    policy = set_weights(torch, TanhGaussianPolicy(), seed=1)
    qf1, qf2 = (
        set_weights(torch, FullyConnectedQ(), seed=2),
        set_weights(torch, FullyConnectedQ(), seed=3),
    )
    target_qf1, target_qf2 = copy.deepcopy(qf1), copy.deepcopy(qf2)
    log_alpha = torch.zeros(1, requires_grad=True)
    log_alpha_prime = torch.zeros(1, requires_grad=True)
    policy_opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
    qf_opt = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=3e-4)
    alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)
    alpha_prime_opt = torch.optim.Adam([log_alpha_prime], lr=3e-4)
    gamma, tau, cql_alpha, temp, target_action_gap = 0.99, 5e-3, 5.0, 1.0, 2.0
    target_entropy = -float(ACT)
    log = {
        k: [] for k in ("qf1", "policy", "alpha", "alpha_prime", "cql_diff1", "cql_diff2", "ood1")
    }
    for step in range(3):
        obs, actions, rewards, next_obs, dones = _offline_batch(torch, 10 + step, B)
        eps = torch.tensor(arr(20 + step, B, ACT))
        new_actions, log_pi = policy(obs, eps)
        alpha_loss = -(log_alpha * (log_pi + target_entropy).detach()).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()
        alpha = log_alpha.exp()
        q_new = torch.min(qf1(obs, new_actions), qf2(obs, new_actions))
        policy_loss = (alpha.detach() * log_pi - q_new).mean()
        policy_opt.zero_grad()
        policy_loss.backward()
        policy_opt.step()

        q1_pred, q2_pred = qf1(obs, actions), qf2(obs, actions)
        with torch.no_grad():
            next_eps = torch.tensor(arr(30 + step, B, ACT))
            next_a, next_log_pi = policy(next_obs, next_eps)
            target_q = torch.min(target_qf1(next_obs, next_a), target_qf2(next_obs, next_a))
            target_q = target_q - alpha * next_log_pi
            td_target = rewards + (1.0 - dones) * gamma * target_q
        qf1_loss = F.mse_loss(q1_pred, td_target)
        qf2_loss = F.mse_loss(q2_pred, td_target)

        random_actions = torch.tensor(_uniform(40 + step, B, N, ACT))
        rep_obs = obs.unsqueeze(1).repeat(1, N, 1)
        rep_next = next_obs.unsqueeze(1).repeat(1, N, 1)
        cur_eps = torch.tensor(arr(50 + step, B, N, ACT))
        nxt_eps = torch.tensor(arr(60 + step, B, N, ACT))
        cql_cur_a, cql_cur_logp = policy(rep_obs, cur_eps)
        cql_next_a, cql_next_logp = policy(rep_next, nxt_eps)
        cql_cur_a, cql_cur_logp = cql_cur_a.detach(), cql_cur_logp.detach()
        cql_next_a, cql_next_logp = cql_next_a.detach(), cql_next_logp.detach()
        random_density = math.log(0.5**ACT)
        ood = []
        for qf in (qf1, qf2):
            cat_q = torch.cat(
                [qf(rep_obs, random_actions) - random_density,
                 qf(rep_obs, cql_next_a) - cql_next_logp,
                 qf(rep_obs, cql_cur_a) - cql_cur_logp], dim=1)  # fmt: skip
            ood.append(torch.logsumexp(cat_q / temp, dim=1) * temp)
        cql_diff1 = (ood[0] - q1_pred).mean()
        cql_diff2 = (ood[1] - q2_pred).mean()
        alpha_prime = torch.clamp(torch.exp(log_alpha_prime), min=0.0, max=1e6)
        cql_min_qf1 = alpha_prime * cql_alpha * (cql_diff1 - target_action_gap)
        cql_min_qf2 = alpha_prime * cql_alpha * (cql_diff2 - target_action_gap)
        alpha_prime_opt.zero_grad()
        alpha_prime_loss = (-cql_min_qf1 - cql_min_qf2) * 0.5
        alpha_prime_loss.backward(retain_graph=True)
        alpha_prime_opt.step()

        qf_loss = qf1_loss + qf2_loss + cql_min_qf1 + cql_min_qf2
        qf_opt.zero_grad()
        qf_loss.backward()
        qf_opt.step()
        _soft_update(target_qf1, qf1, tau)
        _soft_update(target_qf2, qf2, tau)
        for k, v in (("qf1", qf1_loss), ("policy", policy_loss), ("alpha", alpha_loss),
                     ("alpha_prime", alpha_prime_loss), ("cql_diff1", cql_diff1),
                     ("cql_diff2", cql_diff2), ("ood1", ood[0])):  # fmt: skip
            log[k].append(v.detach().clone())
    return {**log, "log_alpha": log_alpha, "log_alpha_prime": log_alpha_prime,
            "qf1": params(qf1), "target_qf2": params(target_qf2),
            "policy_mu_weight": policy.mu.weight}  # fmt: skip


@program
def orl_cql_discrete_double_dqn_logsumexp_penalty(torch):
    """Discrete CQL (the Atari variant): a double-DQN Huber TD loss on the logged actions plus
    ``alpha * (logsumexp(Q(s, .)) - Q(s, a))``; the data Q-values taken both with ``gather`` and
    with a one-hot product, hard target syncs through ``load_state_dict`` every other step, and
    gradient-norm clipping."""
    nn, F = torch.nn, torch.nn.functional
    n_actions, B = 4, 16
    q_net = set_weights(torch, _mlp(torch, OBS, n_actions, hidden=24), seed=4)
    target_net = _mlp(torch, OBS, n_actions, hidden=24)
    target_net.load_state_dict(q_net.state_dict())
    target_net.requires_grad_(False)
    opt = torch.optim.Adam(q_net.parameters(), lr=1e-3, eps=1e-2 / 32)
    gamma, alpha = 0.99, 1.0
    out = {"td": [], "cql": [], "loss": [], "grad_norm": [], "q_gather_vs_onehot": []}
    for step in range(4):
        obs, _, rewards, next_obs, dones = _offline_batch(torch, 70 + step, B)
        actions = torch.tensor(ints(80 + step, n_actions, B))
        q = q_net(obs)
        q_data = q.gather(1, actions.unsqueeze(1)).squeeze(1)
        one_hot = F.one_hot(actions, num_classes=n_actions).float()
        q_data_onehot = (q * one_hot).sum(dim=1)
        with torch.no_grad():
            next_actions = q_net(next_obs).argmax(dim=1, keepdim=True)
            next_q = target_net(next_obs).gather(1, next_actions).squeeze(1)
            target = rewards + gamma * (1.0 - dones) * next_q
        td_loss = F.smooth_l1_loss(q_data, target)
        cql_loss = (torch.logsumexp(q, dim=1) - q_data_onehot).mean()
        loss = td_loss + alpha * cql_loss
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(q_net.parameters(), max_norm=10.0)
        opt.step()
        if step % 2 == 1:
            target_net.load_state_dict(q_net.state_dict())
        out["td"].append(td_loss.item())
        out["cql"].append(cql_loss.item())
        out["loss"].append(loss.detach())
        out["grad_norm"].append(gn)
        out["q_gather_vs_onehot"].append((q_data - q_data_onehot).abs().max())
    with torch.no_grad():
        greedy = q_net(_offline_batch(torch, 99, B)[0]).argmax(dim=1)
    return {**out, "params": params(q_net), "target": params(target_net), "greedy": greedy}


# ----------------------------------------------------------------------------------------------
# IQL, TD3+BC, AWAC
# ----------------------------------------------------------------------------------------------


@program
def orl_iql_expectile_value_and_advantage_weighted_actor(torch):
    """IQL: the value network regressed on the target twin-Q minimum with the asymmetric
    expectile loss ``|tau - 1(u < 0)| * u**2``, Q regressed on ``r + gamma * V(s')``, the actor
    trained by advantage-weighted log-likelihood (``exp(beta * adv).clamp(max=100)``) under a
    ``MultivariateNormal`` with a state-independent diagonal scale, a cosine-annealed actor
    learning rate and polyak targets."""
    nn, F = torch.nn, torch.nn.functional
    MultivariateNormal = torch.distributions.MultivariateNormal
    expectile, beta, gamma, tau, EXP_ADV_MAX = 0.7, 3.0, 0.99, 5e-3, 100.0

    def asymmetric_l2_loss(u, tau):
        return torch.mean(torch.abs(tau - (u < 0).float()) * u**2)

    class TwinQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.q1, self.q2 = _mlp(torch, OBS + ACT, 1), _mlp(torch, OBS + ACT, 1)

        def both(self, s, a):
            sa = torch.cat([s, a], 1)
            return self.q1(sa).squeeze(-1), self.q2(sa).squeeze(-1)

        def forward(self, s, a):
            return torch.min(*self.both(s, a))

    class ValueFunction(nn.Module):
        def __init__(self):
            super().__init__()
            self.v = _mlp(torch, OBS, 1)

        def forward(self, s):
            return self.v(s).squeeze(-1)

    class GaussianPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _mlp(torch, OBS, ACT, act=nn.ReLU)
            self.log_std = nn.Parameter(torch.zeros(ACT, dtype=torch.float32))

        def forward(self, obs):
            mean = torch.tanh(self.net(obs))
            scale_tril = torch.diag(torch.exp(self.log_std.clamp(-5.0, 2.0)))
            return MultivariateNormal(mean, scale_tril=scale_tril)

    qf = set_weights(torch, TwinQ(), seed=5)
    q_target = copy.deepcopy(qf).requires_grad_(False)
    vf = set_weights(torch, ValueFunction(), seed=6)
    actor = set_weights(torch, GaussianPolicy(), seed=7)
    v_opt = torch.optim.Adam(vf.parameters(), lr=3e-4)
    q_opt = torch.optim.Adam(qf.parameters(), lr=3e-4)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    actor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(actor_opt, T_max=4)
    log = {k: [] for k in ("v", "q", "actor", "adv_mean", "exp_adv_max", "lr")}
    for step in range(4):
        obs, actions, rewards, next_obs, dones = _offline_batch(torch, 100 + step, 16)
        with torch.no_grad():
            target_q = q_target(obs, actions)
            next_v = vf(next_obs)
        v = vf(obs)
        adv = target_q - v
        v_loss = asymmetric_l2_loss(adv, expectile)
        v_opt.zero_grad(set_to_none=True)
        v_loss.backward()
        v_opt.step()
        targets = rewards + (1.0 - dones) * gamma * next_v.detach()
        qs = qf.both(obs, actions)
        q_loss = sum(F.mse_loss(q, targets) for q in qs) / len(qs)
        q_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        q_opt.step()
        _soft_update(q_target, qf, tau)
        exp_adv = torch.exp(beta * adv.detach()).clamp(max=EXP_ADV_MAX)
        dist = actor(obs)
        bc_losses = -dist.log_prob(actions)
        policy_loss = torch.mean(exp_adv * bc_losses)
        actor_opt.zero_grad(set_to_none=True)
        policy_loss.backward()
        actor_opt.step()
        actor_sched.step()
        for k, val in (("v", v_loss), ("q", q_loss), ("actor", policy_loss),
                       ("adv_mean", adv.mean()), ("exp_adv_max", exp_adv.max())):  # fmt: skip
            log[k].append(val.item())
        log["lr"].append(actor_sched.get_last_lr()[0])
    with torch.no_grad():
        eval_actions = actor(_offline_batch(torch, 120, 4)[0]).mean
    return {**log, "vf": params(vf), "actor": params(actor), "q_target_q1_last": q_target.q1[-1].weight,
            "eval_actions": eval_actions}  # fmt: skip


@program
def orl_td3_bc_normalized_states_q_scaled_lambda(torch):
    """TD3+BC: states normalised by the dataset's mean and ``std + 1e-3``, target policy
    smoothing with clipped (fixed) noise, a twin critic with a ``Q1`` method, delayed actor
    updates whose loss is ``-lambda * Q.mean() + mse(pi, a)`` with ``lambda = alpha /
    Q.abs().mean().detach()``, and ``copy_``-based polyak targets for actor and critic."""
    nn, F = torch.nn, torch.nn.functional
    max_action, discount, tau, alpha = 1.0, 0.99, 5e-3, 2.5
    policy_noise, noise_clip, policy_freq = 0.2, 0.5, 2

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(OBS, 32), nn.Linear(32, 32), nn.Linear(32, ACT)

        def forward(self, state):
            a = F.relu(self.l1(state))
            a = F.relu(self.l2(a))
            return max_action * torch.tanh(self.l3(a))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = (
                nn.Linear(OBS + ACT, 32),
                nn.Linear(32, 32),
                nn.Linear(32, 1),
            )
            self.l4, self.l5, self.l6 = (
                nn.Linear(OBS + ACT, 32),
                nn.Linear(32, 32),
                nn.Linear(32, 1),
            )

        def forward(self, state, action):
            sa = torch.cat([state, action], 1)
            q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
            q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
            return q1, q2

        def Q1(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))

    rng = _rng(130)
    dataset_states = (
        rng.standard_normal((64, OBS)) * [1, 2, 5, 0.5, 1, 3] + [0, 1, -2, 0, 4, 0]
    ).astype(np.float32)
    ds = torch.tensor(dataset_states)
    mean, std = ds.mean(0, keepdim=True), ds.std(0, keepdim=True) + 1e-3
    actor = set_weights(torch, Actor(), seed=8)
    actor_target = copy.deepcopy(actor)
    critic = set_weights(torch, Critic(), seed=9)
    critic_target = copy.deepcopy(critic)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
    log = {"critic": [], "actor": [], "lmbda": [], "bc": []}
    for total_it in range(1, 5):
        idx = torch.tensor(ints(140 + total_it, 64, 16))
        state = (ds[idx] - mean) / std
        next_state = (ds[(idx + 1) % 64] - mean) / std
        _, action, reward, _, done = _offline_batch(torch, 150 + total_it, 16)
        reward, not_done = reward.unsqueeze(1), (1.0 - done).unsqueeze(1)
        with torch.no_grad():
            noise = (torch.tensor(arr(160 + total_it, 16, ACT)) * policy_noise).clamp(
                -noise_clip, noise_clip
            )
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * discount * target_Q
        current_Q1, current_Q2 = critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        log["critic"].append(critic_loss.item())
        if total_it % policy_freq == 0:
            pi = actor(state)
            Q = critic.Q1(state, pi)
            lmbda = alpha / Q.abs().mean().detach()
            bc = F.mse_loss(pi, action)
            actor_loss = -lmbda * Q.mean() + bc
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
            log["actor"].append(actor_loss.item())
            log["lmbda"].append(lmbda)
            log["bc"].append(bc.item())
    return {**log, "mean": mean, "std": std, "actor": params(actor),
            "critic_target_l3": critic_target.l3.weight, "critic_grads": grads(critic)}  # fmt: skip


@program
def orl_awac_batch_softmax_advantage_weights(torch):
    """AWAC: a SAC-style twin critic on data transitions, ``V(s)`` estimated from several policy
    samples (fixed noise), advantages turned into weights by a softmax over the batch scaled by
    the batch size (and, for comparison, clipped exponentiated advantages), and the policy
    trained on the weighted log-likelihood of the logged actions under an ``Independent(Normal)``
    with a learned log-std."""
    nn, F = torch.nn, torch.nn.functional
    Normal, Independent = torch.distributions.Normal, torch.distributions.Independent
    beta, gamma, tau, K, B = 0.3, 0.99, 5e-3, 4, 16

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _mlp(torch, OBS, 2 * ACT)

        def forward(self, obs):
            mean, log_std = self.net(obs).chunk(2, dim=-1)
            log_std = torch.clamp(log_std, -6.0, 0.0)
            return Independent(Normal(mean, log_std.exp()), 1)

    q1, q2 = (
        set_weights(torch, _mlp(torch, OBS + ACT, 1), seed=10),
        set_weights(torch, _mlp(torch, OBS + ACT, 1), seed=11),
    )
    t1, t2 = copy.deepcopy(q1), copy.deepcopy(q2)
    policy = set_weights(torch, Policy(), seed=12)
    q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-4)
    pi_opt = torch.optim.Adam(policy.parameters(), lr=3e-4, weight_decay=1e-4)

    def Q(net, s, a):
        return net(torch.cat([s, a], dim=-1)).squeeze(-1)

    log = {k: [] for k in ("q", "policy", "weights", "exp_weights", "adv")}
    for step in range(3):
        obs, actions, rewards, next_obs, dones = _offline_batch(torch, 170 + step, B)
        with torch.no_grad():
            next_dist = policy(next_obs)
            next_a = next_dist.mean + next_dist.base_dist.scale * torch.tensor(
                arr(180 + step, B, ACT)
            )
            target = rewards + gamma * (1.0 - dones) * torch.min(
                Q(t1, next_obs, next_a), Q(t2, next_obs, next_a)
            )
        q_loss = F.mse_loss(Q(q1, obs, actions), target) + F.mse_loss(Q(q2, obs, actions), target)
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()

        dist = policy(obs)
        logp = dist.log_prob(actions)
        with torch.no_grad():
            eps = torch.tensor(arr(190 + step, K, B, ACT))
            samples = dist.mean + dist.base_dist.scale * eps  # (K, B, ACT)
            rep = obs.expand(K, B, OBS)
            v_pi = torch.min(Q(q1, rep, samples), Q(q2, rep, samples)).mean(0)
            q_adv = torch.min(Q(q1, obs, actions), Q(q2, obs, actions))
            adv = q_adv - v_pi
            weights = F.softmax(adv / beta, dim=0) * adv.numel()
            exp_weights = torch.exp(adv / beta).clamp(max=20.0)
        policy_loss = (-logp * weights).mean()
        pi_opt.zero_grad()
        policy_loss.backward()
        pi_opt.step()
        with torch.no_grad():
            for tn, n in ((t1, q1), (t2, q2)):
                for tp, p in zip(tn.parameters(), n.parameters()):
                    tp.mul_(1 - tau).add_(p, alpha=tau)
        for k, val in (("q", q_loss), ("policy", policy_loss), ("weights", weights),
                       ("exp_weights", exp_weights), ("adv", adv)):  # fmt: skip
            log[k].append(val.detach().clone())
    return {**log, "policy": params(policy), "t1": params(t1), "policy_grads": grads(policy)}


# ----------------------------------------------------------------------------------------------
# Decision Transformer
# ----------------------------------------------------------------------------------------------


@program
def orl_decision_transformer_timesteps_causal_left_padding(torch):
    """A Decision Transformer as the gym code writes it: return-to-go, state and action embeddings
    plus a timestep ``nn.Embedding``, tokens interleaved with ``stack(...).permute(0, 2, 1, 3)
    .reshape(B, 3T, H)``, a GPT block with a registered ``tril`` causal buffer and the additive
    ``(1 - mask) * -10000`` padding mask for left-padded sequences, action predictions read from
    the state tokens, a masked MSE on valid steps, AdamW with a linear warm-up ``LambdaLR`` and
    ``clip_grad_norm_(0.25)``, and ``get_action``'s left padding to the context length."""
    nn, F = torch.nn, torch.nn.functional
    S, A, H, T, max_ep_len, n_head = 5, 2, 16, 4, 20, 2

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_positions):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(n_positions, n_positions)).view(
                    1, 1, n_positions, n_positions
                ),
            )

        def forward(self, x, attention_mask):
            Bq, L, C = x.shape
            q, k, v = self.c_attn(x).split(H, dim=2)
            q, k, v = (t.view(Bq, L, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
            att = att + attention_mask
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(Bq, L, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self, n_positions):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(H), nn.LayerNorm(H)
            self.attn = CausalSelfAttention(n_positions)
            self.mlp = nn.Sequential(
                nn.Linear(H, 4 * H), nn.GELU(approximate="tanh"), nn.Linear(4 * H, H)
            )

        def forward(self, x, attention_mask):
            x = x + self.attn(self.ln_1(x), attention_mask)
            return x + self.mlp(self.ln_2(x))

    class DecisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_timestep = nn.Embedding(max_ep_len, H)
            self.embed_return = nn.Linear(1, H)
            self.embed_state = nn.Linear(S, H)
            self.embed_action = nn.Linear(A, H)
            self.embed_ln = nn.LayerNorm(H)
            self.blocks = nn.ModuleList([Block(3 * T) for _ in range(2)])
            self.ln_f = nn.LayerNorm(H)
            self.predict_state = nn.Linear(H, S)
            self.predict_action = nn.Sequential(nn.Linear(H, A), nn.Tanh())
            self.predict_return = nn.Linear(H, 1)

        def forward(self, states, actions, returns_to_go, timesteps, attention_mask=None):
            batch_size, seq_length = states.shape[0], states.shape[1]
            if attention_mask is None:
                attention_mask = torch.ones((batch_size, seq_length), dtype=torch.long)
            time_embeddings = self.embed_timestep(timesteps)
            state_embeddings = self.embed_state(states) + time_embeddings
            action_embeddings = self.embed_action(actions) + time_embeddings
            returns_embeddings = self.embed_return(returns_to_go) + time_embeddings
            stacked_inputs = torch.stack(
                (returns_embeddings, state_embeddings, action_embeddings), dim=1
            )
            stacked_inputs = stacked_inputs.permute(0, 2, 1, 3).reshape(
                batch_size, 3 * seq_length, H
            )
            stacked_inputs = self.embed_ln(stacked_inputs)
            stacked_mask = torch.stack((attention_mask, attention_mask, attention_mask), dim=1)
            stacked_mask = stacked_mask.permute(0, 2, 1).reshape(batch_size, 3 * seq_length)
            extended = (1.0 - stacked_mask[:, None, None, :].to(torch.float32)) * -10000.0
            x = stacked_inputs
            for block in self.blocks:
                x = block(x, extended)
            x = self.ln_f(x)
            x = x.reshape(batch_size, seq_length, 3, H).permute(0, 2, 1, 3)
            return_preds = self.predict_return(x[:, 2])
            state_preds = self.predict_state(x[:, 2])
            action_preds = self.predict_action(x[:, 1])
            return state_preds, action_preds, return_preds

        def get_action(self, states, actions, returns_to_go, timesteps):
            states, actions = states.reshape(1, -1, S)[:, -T:], actions.reshape(1, -1, A)[:, -T:]
            returns_to_go, timesteps = (
                returns_to_go.reshape(1, -1, 1)[:, -T:],
                timesteps.reshape(1, -1)[:, -T:],
            )
            pad = T - states.shape[1]
            attention_mask = (
                torch.cat([torch.zeros(pad), torch.ones(states.shape[1])])
                .to(dtype=torch.long)
                .reshape(1, -1)
            )
            states = torch.cat([torch.zeros((1, pad, S)), states], dim=1).to(dtype=torch.float32)
            actions = torch.cat([torch.zeros((1, pad, A)), actions], dim=1).to(dtype=torch.float32)
            returns_to_go = torch.cat([torch.zeros((1, pad, 1)), returns_to_go], dim=1).to(
                dtype=torch.float32
            )
            timesteps = torch.cat([torch.zeros((1, pad), dtype=torch.long), timesteps], dim=1).to(
                dtype=torch.long
            )
            _, action_preds, _ = self.forward(
                states, actions, returns_to_go, timesteps, attention_mask=attention_mask
            )
            return action_preds[0, -1]

    model = set_weights(torch, DecisionTransformer(), seed=13)
    warmup = 3
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda steps: min((steps + 1) / warmup, 1))
    Bn = 3
    rewards = arr(201, Bn, T, scale=0.5)
    rtg = np.flip(np.cumsum(np.flip(rewards, 1), 1), 1).copy()[..., None] / 5.0  # scale
    states = torch.tensor(arr(202, Bn, T, S))
    actions = torch.tensor(np.tanh(arr(203, Bn, T, A)))
    returns_to_go = torch.tensor(rtg)
    timesteps = torch.tensor(
        np.stack([np.arange(3, 3 + T), np.arange(0, T), np.arange(10, 10 + T)])
    )
    attention_mask = torch.tensor(
        np.array([[1, 1, 1, 1], [0, 0, 1, 1], [0, 1, 1, 1]], dtype=np.int64)
    )
    for t in (states, actions, returns_to_go):  # DT zero-pads on the left
        t.mul_(attention_mask.reshape(Bn, T, 1).to(t.dtype))
    losses, lrs, gnorms = [], [], []
    for _ in range(3):
        state_preds, action_preds, return_preds = model(
            states, actions, returns_to_go, timesteps, attention_mask=attention_mask
        )
        act_dim = action_preds.shape[2]
        action_preds_v = action_preds.reshape(-1, act_dim)[attention_mask.reshape(-1) > 0]
        action_target = actions.reshape(-1, act_dim)[attention_mask.reshape(-1) > 0]
        loss = torch.mean((action_preds_v - action_target) ** 2)
        opt.zero_grad()
        loss.backward()
        gnorms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25))
        opt.step()
        sched.step()
        losses.append(loss.detach().cpu().item())
        lrs.append(opt.param_groups[0]["lr"])
    model.eval()
    with torch.no_grad():
        a_eval = model.get_action(
            states[1, 2:], actions[1, 2:], returns_to_go[1, 2:], timesteps[1, 2:]
        )
        _, full_preds, rpreds = model(
            states, actions, returns_to_go, timesteps, attention_mask=attention_mask
        )
    return {"losses": losses, "lrs": lrs, "grad_norms": gnorms, "action_eval": a_eval,
            "valid_action_preds": full_preds[attention_mask > 0], "return_preds_last": rpreds[:, -1],
            "embed_timestep": model.embed_timestep.weight, "c_attn": model.blocks[0].attn.c_attn.weight}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Dreamer
# ----------------------------------------------------------------------------------------------


@program
def orl_dreamer_gaussian_rssm_free_nats_lambda_returns(torch):
    """PlaNet / DreamerV1's recurrent state-space model: a ``GRUCell`` deterministic path, prior and
    posterior Gaussians with ``softplus(std) + 0.1`` (samples from fixed noise), reconstruction and
    reward losses summed over features and averaged over ``(T, B)``, the KL clamped below by free
    nats with ``torch.max(kl, free_nats)``; then imagination from the posterior states with a tanh
    actor, Dreamer's backward ``lambda_return`` with a bootstrap, discount weights from a
    ``cumprod`` and the actor/value losses."""
    nn, F = torch.nn, torch.nn.functional
    Normal, kl_divergence = torch.distributions.Normal, torch.distributions.kl_divergence
    T, B, obs_dim, act_dim, embed, stoch, deter, hidden = 5, 3, 6, 2, 8, 4, 8, 16
    min_std = 0.1

    class RSSM(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc_embed_state_action = nn.Linear(stoch + act_dim, deter)
            self.rnn = nn.GRUCell(deter, deter)
            self.fc_embed_belief_prior = nn.Linear(deter, hidden)
            self.fc_state_prior = nn.Linear(hidden, 2 * stoch)
            self.fc_embed_belief_posterior = nn.Linear(deter + embed, hidden)
            self.fc_state_posterior = nn.Linear(hidden, 2 * stoch)

        def img_step(self, state, action, belief, eps):
            h = F.elu(self.fc_embed_state_action(torch.cat([state, action], dim=1)))
            belief = self.rnn(h, belief)
            mean, std = torch.chunk(
                self.fc_state_prior(F.elu(self.fc_embed_belief_prior(belief))), 2, dim=1
            )
            std = F.softplus(std) + min_std
            return belief, mean, std, mean + std * eps

        def obs_step(self, belief, obs_embed, eps):
            x = F.elu(self.fc_embed_belief_posterior(torch.cat([belief, obs_embed], dim=1)))
            mean, std = torch.chunk(self.fc_state_posterior(x), 2, dim=1)
            std = F.softplus(std) + min_std
            return mean, std, mean + std * eps

    rssm = set_weights(torch, RSSM(), seed=14)
    encoder = set_weights(torch, nn.Linear(obs_dim, embed), seed=15)
    decoder = set_weights(
        torch, _mlp(torch, deter + stoch, obs_dim, hidden=16, n_hidden=1, act=nn.ELU), seed=16
    )
    reward_model = set_weights(
        torch, _mlp(torch, deter + stoch, 1, hidden=16, n_hidden=1, act=nn.ELU), seed=17
    )
    actor = set_weights(
        torch, _mlp(torch, deter + stoch, act_dim, hidden=16, n_hidden=1, act=nn.ELU), seed=18
    )
    value = set_weights(
        torch, _mlp(torch, deter + stoch, 1, hidden=16, n_hidden=1, act=nn.ELU), seed=19
    )
    world_params = [
        *rssm.parameters(),
        *encoder.parameters(),
        *decoder.parameters(),
        *reward_model.parameters(),
    ]
    model_opt = torch.optim.Adam(world_params, lr=1e-3, eps=1e-4)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=8e-5, eps=1e-4)
    value_opt = torch.optim.Adam(value.parameters(), lr=8e-5, eps=1e-4)
    free_nats = torch.full((1,), 1.0)
    observations = torch.tensor(arr(210, T, B, obs_dim))
    actions = torch.tensor(np.tanh(arr(211, T, B, act_dim)))
    rewards = torch.tensor(arr(212, T, B))
    horizon, gamma, lam = 4, 0.99, 0.95

    def lambda_return(reward, value_, pcont, bootstrap, lambda_):
        next_values = torch.cat([value_[1:], bootstrap[None]], 0)
        inputs = reward + pcont * next_values * (1 - lambda_)
        outputs, last = [], bootstrap
        for t in reversed(range(reward.shape[0])):
            last = inputs[t] + pcont[t] * lambda_ * last
            outputs.append(last)
        return torch.stack(list(reversed(outputs)), 0)

    log = {k: [] for k in ("obs", "reward", "kl", "kl_raw", "actor", "value")}
    for it in range(2):
        embeds = encoder(observations)
        belief, post = torch.zeros(B, deter), torch.zeros(B, stoch)
        beliefs, prior_m, prior_s, post_m, post_s, post_samples = [], [], [], [], [], []
        noise_prior, noise_post = arr(220 + it, T, B, stoch), arr(230 + it, T, B, stoch)
        for t in range(T):
            a_prev = actions[t - 1] if t > 0 else torch.zeros(B, act_dim)
            belief, pm, ps, _ = rssm.img_step(post, a_prev, belief, torch.tensor(noise_prior[t]))
            qm, qs, post = rssm.obs_step(belief, embeds[t], torch.tensor(noise_post[t]))
            for lst, val in zip(
                (beliefs, prior_m, prior_s, post_m, post_s, post_samples),
                (belief, pm, ps, qm, qs, post),
            ):
                lst.append(val)
        beliefs, post_samples = torch.stack(beliefs), torch.stack(post_samples)
        feat = torch.cat([beliefs, post_samples], dim=-1)
        obs_loss = (
            F.mse_loss(decoder(feat), observations, reduction="none").sum(dim=2).mean(dim=(0, 1))
        )
        reward_loss = F.mse_loss(reward_model(feat).squeeze(-1), rewards, reduction="none").mean(
            dim=(0, 1)
        )
        kl_raw = kl_divergence(Normal(torch.stack(post_m), torch.stack(post_s)),
                               Normal(torch.stack(prior_m), torch.stack(prior_s))).sum(dim=2)  # fmt: skip
        kl_loss = torch.max(kl_raw, free_nats).mean(dim=(0, 1))
        model_loss = obs_loss + reward_loss + kl_loss
        model_opt.zero_grad()
        model_loss.backward()
        nn.utils.clip_grad_norm_(world_params, 100.0, norm_type=2)
        model_opt.step()

        # imagination from every posterior state, world model frozen
        with torch.no_grad():
            start_b = beliefs.detach().reshape(T * B, deter)
            start_s = post_samples.detach().reshape(T * B, stoch)
        for p in world_params:
            p.requires_grad_(False)
        b, s = start_b, start_s
        feats = []
        img_noise = arr(240 + it, horizon, T * B, stoch)
        for h in range(horizon):
            a = torch.tanh(actor(torch.cat([b, s], dim=-1)))
            b, _, _, s = rssm.img_step(s, a, b, torch.tensor(img_noise[h]))
            feats.append(torch.cat([b, s], dim=-1))
        imag_feat = torch.stack(feats)  # (H, T*B, F)
        imag_reward = reward_model(imag_feat).squeeze(-1)
        imag_value = value(imag_feat).squeeze(-1)
        pcont = gamma * torch.ones_like(imag_reward)
        returns = lambda_return(imag_reward[:-1], imag_value[:-1], pcont[:-1], imag_value[-1], lam)
        discount = torch.cumprod(torch.cat([torch.ones_like(pcont[:1]), pcont[:-2]], 0), 0).detach()
        actor_loss = -torch.mean(discount * returns)
        actor_opt.zero_grad()
        actor_loss.backward()
        nn.utils.clip_grad_norm_(actor.parameters(), 100.0)
        actor_opt.step()
        for p in world_params:
            p.requires_grad_(True)
        value_pred = value(imag_feat.detach()[:-1]).squeeze(-1)
        value_loss = torch.mean(discount * 0.5 * (value_pred - returns.detach()) ** 2)
        value_opt.zero_grad()
        value_loss.backward()
        value_opt.step()
        for k, val in (("obs", obs_loss), ("reward", reward_loss), ("kl", kl_loss), ("kl_raw", kl_raw),
                       ("actor", actor_loss), ("value", value_loss)):  # fmt: skip
            log[k].append(val.detach().clone())
    return {**log, "gru_weight_hh": rssm.rnn.weight_hh, "fc_state_posterior": rssm.fc_state_posterior.weight,
            "actor": params(actor), "value_grads": grads(value), "returns": returns.detach()}  # fmt: skip


@program
def orl_dreamer_discrete_latents_kl_balancing_unimix(torch):
    """DreamerV2/V3's discrete latents: 4 categoricals of 5 classes with 1% uniform mixing
    (``log`` of mixed probabilities as logits), straight-through one-hot samples (the index from
    fixed Gumbel noise, ``one_hot + probs - probs.detach()``), ``Independent(
    OneHotCategoricalStraightThrough)`` distributions, KL balancing (``alpha * KL(sg(post) || prior)
    + (1 - alpha) * KL(post || sg(prior))`` with free nats on the averages) and V3's per-sample
    free bits; symlog-squared reconstruction, entropies and log-probabilities of the samples."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    T, B, obs_dim, act_dim, deter, n_cat, n_cls, hidden = 4, 3, 5, 2, 8, 4, 5, 16
    unimix = 0.01

    def symlog(x):
        return torch.sign(x) * torch.log(torch.abs(x) + 1.0)

    class RSSM(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(n_cat * n_cls + act_dim, hidden)
            self.gru = nn.GRUCell(hidden, deter)
            self.prior_head = nn.Sequential(
                nn.Linear(deter, hidden),
                nn.LayerNorm(hidden),
                nn.SiLU(),
                nn.Linear(hidden, n_cat * n_cls),
            )
            self.post_head = nn.Sequential(
                nn.Linear(deter + obs_dim, hidden),
                nn.LayerNorm(hidden),
                nn.SiLU(),
                nn.Linear(hidden, n_cat * n_cls),
            )

        def mixed_logits(self, raw):
            logits = raw.reshape(raw.shape[0], n_cat, n_cls)
            probs = F.softmax(logits, dim=-1)
            probs = (1.0 - unimix) * probs + unimix / n_cls
            return torch.log(probs)

        def sample(self, logits, gumbel):
            probs = F.softmax(logits, dim=-1)
            index = torch.argmax(logits + gumbel, dim=-1)
            sample = F.one_hot(index, n_cls).float()
            return sample + probs - probs.detach()

        def step(self, stoch, action, deter_state, obs, gumbel):
            x = F.silu(self.inp(torch.cat([stoch.flatten(1), action], -1)))
            deter_state = self.gru(x, deter_state)
            prior_logits = self.mixed_logits(self.prior_head(deter_state))
            post_logits = self.mixed_logits(self.post_head(torch.cat([deter_state, obs], -1)))
            return deter_state, prior_logits, post_logits, self.sample(post_logits, gumbel)

    def dist(logits):
        return D.Independent(D.OneHotCategoricalStraightThrough(logits=logits), 1)

    rssm = set_weights(torch, RSSM(), seed=21)
    decoder = set_weights(
        torch,
        _mlp(torch, deter + n_cat * n_cls, obs_dim, hidden=16, n_hidden=1, act=nn.SiLU),
        seed=22,
    )
    opt = torch.optim.Adam([*rssm.parameters(), *decoder.parameters()], lr=1e-3, eps=1e-8)
    obs = torch.tensor(arr(250, T, B, obs_dim, scale=3.0))
    actions = torch.tensor(np.tanh(arr(251, T, B, act_dim)))
    u = _rng(252).uniform(1e-6, 1.0 - 1e-6, (2, T, B, n_cat, n_cls)).astype(np.float32)
    gumbel_noise = -np.log(-np.log(u))
    kl_balance, free, free_bits, dyn_scale, rep_scale = 0.8, 0.05, 0.07, 0.5, 0.1
    log = {k: [] for k in ("recon", "kl_v2", "kl_lhs", "kl_rhs", "dyn", "rep", "entropy", "logp")}
    for it in range(2):
        h, z = torch.zeros(B, deter), torch.zeros(B, n_cat, n_cls)
        priors, posts, feats, samples = [], [], [], []
        for t in range(T):
            h, prior_logits, post_logits, z = rssm.step(
                z, actions[t], h, symlog(obs[t]), torch.tensor(gumbel_noise[it, t])
            )
            priors.append(prior_logits)
            posts.append(post_logits)
            samples.append(z)
            feats.append(torch.cat([h, z.flatten(1)], -1))
        prior, post, feat = torch.stack(priors), torch.stack(posts), torch.stack(feats)
        recon = ((decoder(feat) - symlog(obs)) ** 2).sum(-1).mean()
        kl_lhs = D.kl_divergence(dist(post.detach()), dist(prior))
        kl_rhs = D.kl_divergence(dist(post), dist(prior.detach()))
        kl_v2 = kl_balance * torch.maximum(kl_lhs.mean(), torch.tensor(free)) + (
            1 - kl_balance
        ) * torch.maximum(kl_rhs.mean(), torch.tensor(free))
        dyn = torch.clip(kl_lhs, min=free_bits).mean()
        rep = torch.clip(kl_rhs, min=free_bits).mean()
        post_dist = dist(post)
        entropy = post_dist.entropy().mean()
        logp = post_dist.log_prob(F.one_hot(torch.stack(samples).argmax(-1), n_cls).float())
        loss = recon + kl_v2 + dyn_scale * dyn + rep_scale * rep
        opt.zero_grad()
        loss.backward()
        opt.step()
        for k, val in (("recon", recon), ("kl_v2", kl_v2), ("kl_lhs", kl_lhs), ("kl_rhs", kl_rhs), ("dyn", dyn),
                       ("rep", rep), ("entropy", entropy), ("logp", logp)):  # fmt: skip
            log[k].append(val.detach().clone())
    mode = dist(post).mode
    return {**log, "indices": torch.stack(samples).argmax(-1), "mode": mode, "mean": dist(post).mean,
            "prior_head": rssm.prior_head[-1].weight, "gru_ih": rssm.gru.weight_ih,
            "inp_grad": rssm.inp.weight.grad}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# MuZero
# ----------------------------------------------------------------------------------------------


def _h(torch, x, eps=1e-3):
    """MuZero's invertible value transform (Pohlen et al.)."""
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + eps * x


def _h_inv(torch, x, eps=1e-3):
    return torch.sign(x) * (
        ((torch.sqrt(1 + 4 * eps * (torch.abs(x) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1
    )


def _scalar_to_support(torch, x, support_size):
    """Two-hot projection of transformed scalars onto the integer support ``[-S, S]``."""
    x = _h(torch, x)
    x = torch.clamp(x, -support_size, support_size)
    floor = x.floor()
    prob = x - floor
    logits = torch.zeros(x.shape[0], x.shape[1], 2 * support_size + 1)
    logits.scatter_(2, (floor + support_size).long().unsqueeze(-1), (1 - prob).unsqueeze(-1))
    indexes = floor + support_size + 1
    prob = prob.masked_fill_(2 * support_size < indexes, 0.0)
    indexes = indexes.masked_fill_(2 * support_size < indexes, 0.0)
    logits.scatter_(2, indexes.long().unsqueeze(-1), prob.unsqueeze(-1))
    return logits


def _support_to_scalar(torch, logits, support_size):
    probabilities = torch.softmax(logits, dim=1)
    support = (
        torch.tensor([x for x in range(-support_size, support_size + 1)])
        .expand(probabilities.shape)
        .float()
    )
    x = torch.sum(support * probabilities, dim=1, keepdim=True)
    return _h_inv(torch, x)


@program
def orl_muzero_value_transform_two_hot_supports(torch):
    """MuZero's scalar <-> categorical machinery: ``h(x)`` and its closed-form inverse round-trips,
    two-hot targets built with ``floor`` and two ``scatter_`` calls (the upper bin masked at the
    support's edge), the expectation under a softmax mapped back through ``h^-1``, the
    cross-entropy ``(-target * log_softmax(logits)).sum(1)``; DreamerV3's symlog / symexp two-hot
    on exponentially spaced bins found with ``torch.bucketize`` and its gradient."""
    F = torch.nn.functional
    support_size = 10
    values = torch.tensor(
        np.concatenate([arr(260, 10, scale=20.0), [0.0, 1.0, -1.0, 150.0, -200.0, 3.0]]).astype(
            np.float32
        )
    )
    hx = _h(torch, values)
    roundtrip = _h_inv(torch, hx)
    targets = _scalar_to_support(torch, values.reshape(4, 4), support_size)  # (4, 4, 21)
    flat_t = targets.reshape(-1, 2 * support_size + 1)
    logits = torch.tensor(arr(261, 16, 2 * support_size + 1), requires_grad=True)
    ce = (-flat_t * F.log_softmax(logits, dim=1)).sum(1)
    ce.mean().backward()
    as_scalar = _support_to_scalar(torch, logits.detach(), support_size)
    support = torch.arange(-support_size, support_size + 1, dtype=torch.float32)
    from_target = _h_inv(torch, (flat_t * support).sum(1))  # decoding a target recovers the value

    # DreamerV3: symlog targets on symexp-spaced bins
    def symlog(x):
        return torch.sign(x) * torch.log1p(torch.abs(x))

    def symexp(x):
        return torch.sign(x) * (torch.exp(torch.abs(x)) - 1)

    bins = symexp(torch.linspace(-8.0, 8.0, 17))
    x = values
    below = (torch.bucketize(x, bins, right=True) - 1).clamp(0, len(bins) - 1)
    above = (below + 1).clamp(max=len(bins) - 1)
    equal = below == above
    dist_below = torch.where(equal, torch.ones_like(x), torch.abs(bins[below] - x))
    dist_above = torch.where(equal, torch.ones_like(x), torch.abs(bins[above] - x))
    total = dist_below + dist_above
    two_hot = (
        F.one_hot(below, len(bins)) * (dist_above / total)[:, None]
        + F.one_hot(above, len(bins)) * (dist_below / total)[:, None]
    )
    head = torch.tensor(arr(262, len(values), len(bins)), requires_grad=True)
    v3_loss = -(two_hot * F.log_softmax(head, -1)).sum(-1)
    v3_loss.sum().backward()
    v3_pred = (F.softmax(head, -1) * bins).sum(-1)
    return {"h": hx, "roundtrip": roundtrip, "targets": targets, "target_mass": targets.sum(-1),
            "ce": ce, "logits_grad": logits.grad, "as_scalar": as_scalar, "from_target": from_target,
            "symlog": symlog(values), "symexp_symlog": symexp(symlog(values)), "bins": bins,
            "below": below, "two_hot": two_hot, "v3_loss": v3_loss, "head_grad": head.grad,
            "v3_pred": v3_pred.detach()}  # fmt: skip


@program
def orl_muzero_unrolled_training_gradient_scaling(torch):
    """MuZero's training step: representation, dynamics and prediction networks unrolled over K
    steps of logged actions (one-hot action planes concatenated to the min-max-normalised hidden
    state), the hidden state's gradient halved with a ``register_hook`` at every step, categorical
    value/reward losses against two-hot targets of n-step returns, the policy cross-entropy against
    visit-count distributions, per-step losses scaled by ``1/K`` through hooks, priorities from the
    value error, and SGD with momentum and weight decay."""
    nn = torch.nn
    support_size, hidden_dim, n_actions, K, B, n_step, gamma = 5, 8, 3, 3, 4, 3, 0.997
    full = 2 * support_size + 1

    def normalize(h):
        mn = h.min(1, keepdim=True)[0]
        mx = h.max(1, keepdim=True)[0]
        scale = mx - mn
        scale[scale < 1e-5] += 1e-5
        return (h - mn) / scale

    class MuZeroNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.representation_network = _mlp(
                torch, OBS, hidden_dim, hidden=16, n_hidden=1, act=nn.ELU
            )
            self.dynamics_encoded_state_network = _mlp(
                torch, hidden_dim + n_actions, hidden_dim, hidden=16, n_hidden=1, act=nn.ELU
            )
            self.dynamics_reward_network = _mlp(
                torch, hidden_dim, full, hidden=16, n_hidden=1, act=nn.ELU
            )
            self.prediction_policy_network = _mlp(
                torch, hidden_dim, n_actions, hidden=16, n_hidden=1, act=nn.ELU
            )
            self.prediction_value_network = _mlp(
                torch, hidden_dim, full, hidden=16, n_hidden=1, act=nn.ELU
            )

        def prediction(self, encoded_state):
            return self.prediction_policy_network(encoded_state), self.prediction_value_network(
                encoded_state
            )

        def representation(self, observation):
            return normalize(self.representation_network(observation))

        def dynamics(self, encoded_state, action):
            action_one_hot = torch.zeros((action.shape[0], n_actions)).float()
            action_one_hot.scatter_(1, action.long(), 1.0)
            x = torch.cat((encoded_state, action_one_hot), dim=1)
            next_encoded_state = normalize(self.dynamics_encoded_state_network(x))
            return next_encoded_state, self.dynamics_reward_network(next_encoded_state)

        def initial_inference(self, observation):
            encoded_state = self.representation(observation)
            policy_logits, value = self.prediction(encoded_state)
            reward = torch.log(
                torch.zeros(1, full)
                .scatter(1, torch.tensor([[full // 2]]).long(), 1.0)
                .repeat(len(observation), 1)
            )
            return value, reward, policy_logits, encoded_state

        def recurrent_inference(self, encoded_state, action):
            next_encoded_state, reward = self.dynamics(encoded_state, action)
            policy_logits, value = self.prediction(next_encoded_state)
            return value, reward, policy_logits, next_encoded_state

    model = set_weights(torch, MuZeroNetwork(), seed=23)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    # trajectories: rewards and root values; n-step targets computed backwards in the usual loop
    L = K + n_step + 1
    traj_rewards = arr(270, B, L, scale=2.0)
    root_values = arr(271, B, L, scale=5.0)
    target_value = np.zeros((B, K + 1), dtype=np.float32)
    for b in range(B):
        for i in range(K + 1):
            bootstrap = i + n_step
            value = root_values[b, bootstrap] * gamma**n_step
            for j, r in enumerate(traj_rewards[b, i + 1 : bootstrap + 1]):
                value += r * gamma**j
            target_value[b, i] = value
    target_reward = np.concatenate([np.zeros((B, 1)), traj_rewards[:, 1 : K + 1]], 1).astype(
        np.float32
    )
    visits = _rng(272).integers(1, 20, (B, K + 1, n_actions)).astype(np.float32)
    target_policy = torch.tensor(visits / visits.sum(-1, keepdims=True))
    action_batch = torch.tensor(ints(273, n_actions, B, K, 1))
    observation = torch.tensor(arr(274, B, OBS))
    weight_batch = torch.tensor(_uniform(275, B, low=0.5, high=1.0))
    tv = torch.tensor(target_value)
    tr = torch.tensor(target_reward)
    target_value_s = _scalar_to_support(torch, tv, support_size)
    target_reward_s = _scalar_to_support(torch, tr, support_size)

    def loss_function(value, reward, policy_logits, target_value, target_reward, target_policy):
        value_loss = (-target_value * nn.LogSoftmax(dim=1)(value)).sum(1)
        reward_loss = (-target_reward * nn.LogSoftmax(dim=1)(reward)).sum(1)
        policy_loss = (-target_policy * nn.LogSoftmax(dim=1)(policy_logits)).sum(1)
        return value_loss, reward_loss, policy_loss

    log = {k: [] for k in ("loss", "value", "reward", "policy", "priorities")}
    for _ in range(2):
        value, reward, policy_logits, hidden_state = model.initial_inference(observation)
        predictions = [(value, reward, policy_logits)]
        for i in range(K):
            value, reward, policy_logits, hidden_state = model.recurrent_inference(
                hidden_state, action_batch[:, i]
            )
            hidden_state.register_hook(lambda grad: grad * 0.5)
            predictions.append((value, reward, policy_logits))
        value_loss, reward_loss, policy_loss = (0, 0, 0)
        value, reward, policy_logits = predictions[0]
        current_value_loss, _, current_policy_loss = loss_function(value.squeeze(-1), reward.squeeze(-1), policy_logits,
                                                                   target_value_s[:, 0], target_reward_s[:, 0], target_policy[:, 0])  # fmt: skip
        value_loss += current_value_loss
        policy_loss += current_policy_loss
        pred_value_scalar = _support_to_scalar(torch, value, support_size).detach().squeeze()
        priorities = (np.abs(pred_value_scalar.numpy() - target_value[:, 0]) ** 1.0).tolist()
        for i in range(1, len(predictions)):
            value, reward, policy_logits = predictions[i]
            cv, cr, cp = loss_function(value.squeeze(-1), reward.squeeze(-1), policy_logits,
                                       target_value_s[:, i], target_reward_s[:, i], target_policy[:, i])  # fmt: skip
            cv.register_hook(lambda grad: grad / K)
            cr.register_hook(lambda grad: grad / K)
            cp.register_hook(lambda grad: grad / K)
            value_loss += cv
            reward_loss += cr
            policy_loss += cp
        loss = value_loss * 0.25 + reward_loss + policy_loss
        loss = loss * weight_batch
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log["loss"].append(loss.item())
        log["value"].append(value_loss.mean().item())
        log["reward"].append(reward_loss.mean().item())
        log["policy"].append(policy_loss.mean().item())
        log["priorities"].append(priorities)
    return {**log, "target_value": tv, "target_value_support": target_value_s, "params": params(model),
            "dyn_grad": model.dynamics_encoded_state_network[0].weight.grad}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Returns computed backwards
# ----------------------------------------------------------------------------------------------


@program
def orl_td_lambda_gae_and_nstep_returns_backwards(torch):
    """Return estimators over a (T, N) rollout computed backwards as libraries write them: GAE with
    terminations and time-limit truncations (bootstrapping from the final observation's value),
    TD(lambda) returns by the recursion ``G_t = r_t + gamma * ((1 - lambda) V_{t+1} + lambda
    G_{t+1})`` checked against ``GAE + V``, the same through a discount matrix built with
    ``triu`` and powers, n-step returns with ``unfold``, normalised advantages, and a critic fitted
    to the lambda-returns for a few steps."""
    nn, F = torch.nn, torch.nn.functional
    T, N, gamma, lam = 8, 3, 0.99, 0.9
    rewards = torch.tensor(arr(280, T, N))
    dones = torch.tensor((_rng(281).random((T, N)) < 0.15).astype(np.float32))
    truncated = torch.tensor((_rng(282).random((T, N)) < 0.1).astype(np.float32)) * (1 - dones)
    obs = torch.tensor(arr(283, T + 1, N, OBS))
    critic = set_weights(torch, _mlp(torch, OBS, 1, hidden=16, n_hidden=1, act=nn.Tanh), seed=24)
    opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
    log = {"loss": []}
    for _ in range(3):
        with torch.no_grad():
            values = critic(obs).squeeze(-1)  # (T + 1, N)
            # time-limit truncation: bootstrap the final reward with the value of the final obs
            rew = rewards + gamma * truncated * values[1:]
            not_done = 1.0 - torch.maximum(dones, truncated)
            advantages = torch.zeros_like(rew)
            lastgaelam = torch.zeros(N)
            for t in reversed(range(T)):
                delta = rew[t] + gamma * values[t + 1] * not_done[t] - values[t]
                lastgaelam = delta + gamma * lam * not_done[t] * lastgaelam
                advantages[t] = lastgaelam
            gae_returns = advantages + values[:-1]
            lam_returns = torch.zeros_like(rew)
            next_return = values[T]
            for t in reversed(range(T)):
                next_return = rew[t] + gamma * not_done[t] * (
                    (1 - lam) * values[t + 1] + lam * next_return
                )
                lam_returns[t] = next_return
        pred = critic(obs[:-1]).squeeze(-1)
        loss = F.mse_loss(pred, lam_returns)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log["loss"].append(loss.item())
    norm_adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    # discount-matrix form for an episode without terminations (column 0 with dones cleared)
    idx = torch.arange(T)
    exponents = (idx[None, :] - idx[:, None]).clamp(min=0).to(torch.float32)
    disc = torch.triu((gamma * lam) ** exponents)
    v0 = values[:, 0]
    deltas = rewards[:, 0] + gamma * v0[1:] - v0[:-1]
    gae_matrix = disc @ deltas
    # n-step returns with unfold (no terminations)
    n = 3
    padded = torch.cat([rewards[:, 0], torch.zeros(n - 1)])
    windows = padded.unfold(0, n, 1)  # (T, n)
    gammas = gamma ** torch.arange(n, dtype=torch.float32)
    boot_idx = (idx + n).clamp(max=T)
    nstep = (windows * gammas).sum(-1) + gamma ** (boot_idx - idx).to(torch.float32) * v0[boot_idx]
    return {**log, "advantages": advantages, "gae_returns": gae_returns, "lam_returns": lam_returns,
            "gae_vs_lambda": (gae_returns - lam_returns).abs().max(), "norm_adv": norm_adv,
            "gae_matrix": gae_matrix, "nstep": nstep, "critic": params(critic)}  # fmt: skip


@program
def orl_retrace_targets_and_acer_truncated_importance(torch):
    """Retrace(lambda) Q targets computed backwards from a bootstrap ``V(x_T)`` with truncated
    traces ``c = lambda * min(1, pi/mu)`` (the ACER loop ``Qret = r + gamma * Qret * mask;
    Qret = c * (Qret - Q(x, a)) + V(x)``), checked against tree-backup's ``c = lambda * pi``; the
    ACER policy loss with truncated importance weights and its bias correction over all actions,
    the Q regression on the Retrace targets, and RMSprop updates of a shared actor-critic."""
    nn, F = torch.nn, torch.nn.functional
    T, N, n_actions, gamma, lam, c_bar = 6, 4, 3, 0.99, 1.0, 10.0

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(OBS, 32), nn.ReLU())
            self.pi = nn.Linear(32, n_actions)
            self.q = nn.Linear(32, n_actions)

        def forward(self, x):
            h = self.body(x)
            return F.softmax(self.pi(h), dim=-1).clamp(max=1 - 1e-20), self.q(h)

    model = set_weights(torch, ActorCritic(), seed=25)
    opt = torch.optim.RMSprop(model.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
    obs = torch.tensor(arr(290, T + 1, N, OBS))
    actions = torch.tensor(ints(291, n_actions, T, N))
    rewards = torch.tensor(arr(292, T, N))
    masks = torch.tensor((_rng(293).random((T, N)) > 0.15).astype(np.float32))
    mu_logits = arr(294, T, N, n_actions)
    mu = torch.tensor(np.exp(mu_logits) / np.exp(mu_logits).sum(-1, keepdims=True))

    def backward_targets(c, q_a, v, bootstrap):
        q_ret = bootstrap
        out = []
        for i in reversed(range(T)):
            q_ret = rewards[i] + gamma * q_ret * masks[i]
            out.append(q_ret)
            q_ret = c[i] * (q_ret - q_a[i]) + v[i]
        return torch.stack(out[::-1])

    log = {k: [] for k in ("policy", "bias", "q", "rho")}
    for _ in range(3):
        pi, q = model(obs)
        pi_t, q_t = pi[:-1], q[:-1]
        a = actions.unsqueeze(-1)
        pi_a = pi_t.gather(-1, a).squeeze(-1)
        q_a = q_t.gather(-1, a).squeeze(-1)
        v = (pi_t * q_t).sum(-1).detach()
        rho = pi_t.detach() / mu  # (T, N, A)
        rho_a = rho.gather(-1, a).squeeze(-1)
        with torch.no_grad():
            bootstrap = (pi[-1] * q[-1]).sum(-1)
            retrace = backward_targets(lam * rho_a.clamp(max=1.0), q_a.detach(), v, bootstrap)
            tree_backup = backward_targets(lam * pi_a.detach(), q_a.detach(), v, bootstrap)
        log_pi = torch.log(pi_t)
        log_pi_a = log_pi.gather(-1, a).squeeze(-1)
        adv = retrace - v
        policy_loss = -(rho_a.clamp(max=c_bar) * log_pi_a * adv).mean()
        correction = (
            (1 - c_bar / rho).clamp(min=0)
            * pi_t.detach()
            * log_pi
            * (q_t.detach() - v.unsqueeze(-1))
        )
        bias_loss = -correction.sum(-1).mean()
        q_loss = 0.5 * (retrace - q_a).pow(2).mean()
        loss = policy_loss + bias_loss + 0.5 * q_loss - 1e-3 * -(pi_t * log_pi).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 40.0)
        opt.step()
        for k, val in (("policy", policy_loss), ("bias", bias_loss), ("q", q_loss), ("rho", rho_a)):
            log[k].append(val.detach().clone())
    return {**log, "retrace": retrace, "tree_backup": tree_backup, "params": params(model)}


# ----------------------------------------------------------------------------------------------
# Model-based: probabilistic ensembles
# ----------------------------------------------------------------------------------------------


@program
def orl_mopo_probabilistic_ensemble_uncertainty_penalty(torch):
    """MBPO / MOPO's probabilistic dynamics ensemble: batched ``EnsembleLinear`` layers
    (``torch.baddbmm`` over an ensemble dimension), SiLU activations, inputs standardised by a
    fitted scaler, log-variances soft-bounded between learned ``max_logvar`` / ``min_logvar`` with
    ``softplus``, the Gaussian NLL with ``exp(-logvar)`` weights plus the logvar-bound and weight
    decay terms, elites chosen by ``argsort`` of holdout MSE, and a model rollout step: a random
    elite per sample through advanced indexing, next observations sampled with fixed noise, MOPO's
    penalty ``max_k ||std_k||`` and MOReL-style disagreement through ``cdist``."""
    nn, F = torch.nn, torch.nn.functional
    E, n_elites, in_dim, out_dim, hid = 4, 2, OBS + ACT, OBS + 1, 16

    class EnsembleLinear(nn.Module):
        def __init__(self, d_in, d_out, weight_decay):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(E, d_in, d_out))
            self.bias = nn.Parameter(torch.zeros(E, 1, d_out))
            self.weight_decay = weight_decay

        def forward(self, x):
            return torch.baddbmm(self.bias, x, self.weight)

        def get_decay_loss(self):
            return self.weight_decay * 0.5 * (self.weight**2).sum()

    class EnsembleDynamics(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                [
                    EnsembleLinear(in_dim, hid, 2.5e-5),
                    EnsembleLinear(hid, hid, 5e-5),
                    EnsembleLinear(hid, 2 * out_dim, 1e-4),
                ]
            )
            self.max_logvar = nn.Parameter(torch.ones(1, out_dim) * 0.5)
            self.min_logvar = nn.Parameter(torch.ones(1, out_dim) * -10)

        def forward(self, x):
            for layer in self.layers[:-1]:
                x = F.silu(layer(x))
            mean, logvar = torch.chunk(self.layers[-1](x), 2, dim=-1)
            logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
            logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
            return mean, logvar

    model = EnsembleDynamics()
    g = _rng(26)
    with torch.no_grad():
        for layer in model.layers:
            d_in = layer.weight.shape[1]
            layer.weight.copy_(
                torch.tensor(
                    g.uniform(-1, 1, tuple(layer.weight.shape)).astype(np.float32) / math.sqrt(d_in)
                )
            )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = _rng(300)
    n_data = 48
    inputs_np = (
        rng.standard_normal((n_data, in_dim)) * np.linspace(0.5, 3.0, in_dim) + 1.0
    ).astype(np.float32)
    w_true = rng.standard_normal((in_dim, out_dim)).astype(np.float32) * 0.3
    targets_np = (
        np.tanh(inputs_np @ w_true) + 0.05 * rng.standard_normal((n_data, out_dim))
    ).astype(np.float32)
    inputs, targets = torch.tensor(inputs_np), torch.tensor(targets_np)
    mu = inputs.mean(0, keepdim=True)
    std = inputs.std(0, keepdim=True)
    std[std < 1e-12] = 1.0
    train_x, train_y, hold_x, hold_y = inputs[:40], targets[:40], inputs[40:], targets[40:]
    log = {"train": [], "holdout": []}
    for epoch in range(4):
        idx = torch.tensor(
            np.stack([_rng(310 + epoch * E + k).permutation(40)[:16] for k in range(E)])
        )
        x = (train_x[idx] - mu) / std  # (E, 16, in)
        y = train_y[idx]
        mean, logvar = model(x)
        inv_var = torch.exp(-logvar)
        mse_loss_inv = (torch.pow(mean - y, 2) * inv_var).mean(dim=(1, 2))
        var_loss = logvar.mean(dim=(1, 2))
        loss = mse_loss_inv.sum() + var_loss.sum()
        loss = loss + 0.01 * model.max_logvar.sum() - 0.01 * model.min_logvar.sum()
        loss = loss + sum(layer.get_decay_loss() for layer in model.layers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            hx = ((hold_x - mu) / std).unsqueeze(0).repeat(E, 1, 1)
            hmean, _ = model(hx)
            holdout_losses = ((hmean - hold_y) ** 2).mean(dim=(1, 2))
        log["train"].append(loss.item())
        log["holdout"].append(holdout_losses)
    elites = torch.argsort(holdout_losses)[:n_elites]
    # one MOPO rollout step from a batch of model states
    Bn, penalty_coef = 8, 1.0
    obs = torch.tensor(arr(320, Bn, OBS))
    act = torch.tensor(np.tanh(arr(321, Bn, ACT)))
    with torch.no_grad():
        x = ((torch.cat([obs, act], -1) - mu) / std).unsqueeze(0).repeat(E, 1, 1)
        mean, logvar = model(x)
        mean[..., :-1] += obs
        std_ = torch.sqrt(torch.exp(logvar))
        samples = mean + torch.tensor(arr(322, E, Bn, out_dim)) * std_
        model_idxs = elites[torch.tensor(ints(323, n_elites, Bn))]
        batch_idxs = torch.arange(Bn)
        sample = samples[model_idxs, batch_idxs]
        next_obs, reward = sample[:, :-1], sample[:, -1:]
        terminal = (next_obs[:, 0].abs() > 2.0).unsqueeze(-1)
        penalty = torch.amax(torch.norm(std_, dim=-1), dim=0).unsqueeze(-1)
        penalized_reward = reward - penalty_coef * penalty
        means = mean[..., :-1].permute(1, 0, 2)  # (B, E, obs)
        disagreement = torch.cdist(means, means).amax(dim=(1, 2))
    return {**log, "elites": elites, "next_obs": next_obs, "reward": reward, "terminal": terminal,
            "penalty": penalty, "penalized_reward": penalized_reward, "disagreement": disagreement,
            "max_logvar": model.max_logvar, "min_logvar": model.min_logvar, "model_idxs": model_idxs,
            "last_layer_grad": model.layers[-1].weight.grad}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Target networks
# ----------------------------------------------------------------------------------------------


@program
def orl_target_network_polyak_ema_and_hard_update_idioms(torch):
    """Target networks kept the ways the libraries keep them, all tracking the same online network
    (with BatchNorm running statistics) through a few SGD steps: CleanRL's ``copy_(tau * p + (1 -
    tau) * tp)``, Stable-Baselines3's ``mul(out=)`` / ``add(alpha=, out=)`` under ``no_grad`` with
    buffers copied, ``torch._foreach_mul_`` / ``_foreach_add_``, ``lerp_`` and
    ``_foreach_lerp_``, d3rlpy's ``data.mul_`` / ``add_``, ``AveragedModel`` with an EMA
    ``multi_avg_fn`` and ``use_buffers``, and a frozen hard-copy target via ``load_state_dict``."""
    nn, F = torch.nn, torch.nn.functional
    from_swa = torch.optim.swa_utils
    tau = 0.1

    net = set_weights(
        torch,
        nn.Sequential(nn.Linear(OBS, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 2)),
        seed=27,
    )
    targets = {
        name: copy.deepcopy(net)
        for name in ("cleanrl", "sb3", "foreach", "lerp", "foreach_lerp", "d3rlpy", "hard")
    }
    for t in targets.values():
        t.requires_grad_(False)
        t.eval()
    ema = from_swa.AveragedModel(
        net, multi_avg_fn=from_swa.get_ema_multi_avg_fn(1 - tau), use_buffers=True
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(4):
        x = torch.tensor(arr(330 + step, 10, OBS))
        y = torch.tensor(arr(340 + step, 10, 2))
        loss = F.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        online = list(net.parameters())
        for tp, p in zip(targets["cleanrl"].parameters(), online):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
        with torch.no_grad():
            for tp, p in zip(targets["sb3"].parameters(), online):
                torch.mul(tp.data, 1 - tau, out=tp.data)
                torch.add(tp.data, p.data, alpha=tau, out=tp.data)
            for tb, b in zip(targets["sb3"].buffers(), net.buffers()):
                tb.data.copy_(b.data)
            fparams = list(targets["foreach"].parameters())
            torch._foreach_mul_(fparams, 1 - tau)
            torch._foreach_add_(fparams, online, alpha=tau)
            for tp, p in zip(targets["lerp"].parameters(), online):
                tp.lerp_(p, tau)
            torch._foreach_lerp_(list(targets["foreach_lerp"].parameters()), online, tau)
        for tp, p in zip(targets["d3rlpy"].parameters(), online):
            tp.data.mul_(1 - tau)
            tp.data.add_(tau * p.data)
        ema.update_parameters(net)
        if step % 2 == 1:
            targets["hard"].load_state_dict(net.state_dict())
    x_eval = torch.tensor(arr(350, 5, OBS))
    net.eval()
    ema.eval()
    with torch.no_grad():
        outs = {name: t(x_eval) for name, t in targets.items()}
        outs["ema"] = ema(x_eval)
        outs["online"] = net(x_eval)
    return {"losses": losses, "outs": outs,
            "first_weight": {name: t[0].weight for name, t in targets.items()},
            "ema_weight": ema.module[0].weight, "ema_running_mean": ema.module[1].running_mean,
            "sb3_running_var": targets["sb3"][1].running_var, "hard_num_batches": targets["hard"][1].num_batches_tracked,
            "cleanrl_running_mean": targets["cleanrl"][1].running_mean, "n_averaged": ema.n_averaged,
            "requires_grad": [p.requires_grad for p in targets["lerp"].parameters()]}  # fmt: skip
