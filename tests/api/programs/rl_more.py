"""Reinforcement learning updates as libraries write them: PPO with GAE, DQN variants, SAC, A2C, soft target updates."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

OBS, NACT = 5, 4


def _mlp(torch, din, dout, hidden=16, act=None):
    nn = torch.nn
    return nn.Sequential(
        nn.Linear(din, hidden), act() if act else nn.Tanh(), nn.Linear(hidden, dout)
    )


@program(rtol=5e-4, atol=5e-5)
def ppo_gae_minibatch_value_clipping(torch):
    # CleanRL ppo.py: rollout buffers (T, N), GAE backwards, flattened minibatch epochs
    nn, F = torch.nn, torch.nn.functional
    Categorical = torch.distributions.categorical.Categorical  # CleanRL imports it from here

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = _mlp(torch, OBS, 1)
            self.actor = _mlp(torch, OBS, NACT)

        def get_value(self, x):
            return self.critic(x)

        def get_action_and_value(self, x, action):
            probs = Categorical(logits=self.actor(x))
            return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    agent = set_weights(torch, Agent(), seed=1)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-3, eps=1e-5)
    T, N, gamma, lam, clip = 6, 4, 0.99, 0.95, 0.2
    obs = torch.tensor(arr(2, T, N, OBS))
    actions = torch.tensor(ints(3, NACT, T, N))
    rewards = torch.tensor(arr(4, T, N))
    dones = torch.tensor((np.random.default_rng(5).random((T, N)) < 0.15).astype(np.float32))
    next_obs, next_done = torch.tensor(arr(6, N, OBS)), torch.zeros(N)
    with torch.no_grad():
        _, logprobs, _, values = agent.get_action_and_value(obs, actions)
        values = values.squeeze(-1)
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(T)):
            if t == T - 1:
                nextnonterminal, nextvalues = 1.0 - next_done, next_value
            else:
                nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
            delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        returns = advantages + values
    b_obs, b_logprobs = obs.reshape((-1, OBS)), logprobs.reshape(-1)
    b_actions, b_adv = actions.reshape(-1), advantages.reshape(-1)
    b_returns, b_values = returns.reshape(-1), values.reshape(-1)
    rng = np.random.default_rng(7)
    clipfracs, losses, kls, norms = [], [], [], []
    for epoch in range(2):
        optimizer.param_groups[0]["lr"] = (1.0 - epoch / 2) * 2.5e-3
        b_inds = rng.permutation(T * N)
        for start in range(0, T * N, 8):
            mb = torch.from_numpy(b_inds[start : start + 8])
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
            logratio = newlogprob - b_logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs += [((ratio - 1.0).abs() > clip).float().mean().item()]
            mb_adv = b_adv[mb]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(
                -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip, 1 + clip)
            ).mean()
            newvalue = newvalue.view(-1)
            v_unclipped = (newvalue - b_returns[mb]) ** 2
            v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -clip, clip)
            v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
            loss = pg_loss - 0.01 * entropy.mean() + v_loss * 0.5
            optimizer.zero_grad()
            loss.backward()
            norms.append(nn.utils.clip_grad_norm_(agent.parameters(), 0.5))
            optimizer.step()
            losses.append(loss.item())
            kls.append(approx_kl)
    var_y = b_returns.var()
    explained_var = 1 - (b_returns - b_values).var() / var_y
    return {"advantages": advantages, "returns": returns, "losses": losses, "kls": kls,
            "clipfracs": clipfracs, "norms": norms, "explained_var": explained_var,
            "params": params(agent), "vloss_fn": F.mse_loss(b_values, b_returns)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ppo_continuous_independent_normal_logstd(torch):
    # CleanRL ppo_continuous_action.py: state-independent log-std parameter broadcast with expand_as
    nn = torch.nn
    D = torch.distributions
    ADIM = 2

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = _mlp(torch, OBS, 1)
            self.actor_mean = _mlp(torch, OBS, ADIM)
            self.actor_logstd = nn.Parameter(torch.zeros(1, ADIM))

        def dist(self, x):
            mean = self.actor_mean(x)
            logstd = self.actor_logstd.expand_as(mean)
            return D.Normal(mean, torch.exp(logstd))

    agent = set_weights(torch, Agent(), seed=10)
    with torch.no_grad():
        agent.actor_logstd.fill_(-0.3)
    opt = torch.optim.AdamW(agent.parameters(), lr=3e-3, weight_decay=0.0, eps=1e-5)
    x = torch.tensor(arr(11, 12, OBS))
    a = torch.tensor(arr(12, 12, ADIM, scale=0.7))
    adv = torch.tensor(arr(13, 12))
    ret = torch.tensor(arr(14, 12))
    with torch.no_grad():
        old = agent.dist(x)
        old_logp = old.log_prob(a).sum(1)
        old_ind = D.Independent(D.Normal(old.loc.clone(), old.scale.clone()), 1)
    out = {"losses": [], "kl_ind": [], "ent": []}
    for _ in range(3):
        pi = agent.dist(x)
        ind = D.Independent(pi, 1)
        logp = pi.log_prob(a).sum(axis=-1)  # Spinning Up spells it with axis=
        ratio = (logp - old_logp).exp()
        pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        v_loss = 0.5 * ((agent.critic(x).squeeze(-1) - ret) ** 2).mean()
        ent = pi.entropy().sum(1).mean()
        loss = pg + 0.5 * v_loss - 0.001 * ent
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), max_norm=0.5, foreach=True)
        opt.step()
        out["losses"].append(loss.detach())
        out["kl_ind"].append(D.kl_divergence(old_ind, ind).mean().detach())
        out["ent"].append(ind.entropy().mean().item())
    out["same_logp"] = torch.allclose(ind.log_prob(a), logp, atol=1e-5)
    out["shapes"] = [list(ind.batch_shape), list(ind.event_shape), list(pi.batch_shape)]
    out["params"] = params(agent)
    out["mean_std"] = [ind.mean, ind.stddev, ind.variance]
    return out


@program
def dqn_prioritized_replay_importance_weights(torch):
    # PER: P(i) = p_i^alpha / sum p^alpha, w_i = (N P(i))^-beta / max w, priorities updated by |TD|
    nn, F = torch.nn, torch.nn.functional
    capacity, batch, alpha, beta = 32, 8, 0.6, 0.4
    q = set_weights(torch, _mlp(torch, OBS, NACT, act=nn.ReLU), seed=20)
    target = copy.deepcopy(q).requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    S, S2 = torch.tensor(arr(21, capacity, OBS)), torch.tensor(arr(22, capacity, OBS))
    A, R = torch.tensor(ints(23, NACT, capacity)), torch.tensor(arr(24, capacity))
    done = torch.tensor(np.random.default_rng(25).random(capacity) < 0.1)
    priorities = torch.ones(capacity)
    priorities[:16] = torch.tensor(np.random.default_rng(26).random(16).astype(np.float32) + 0.1)
    rng = np.random.default_rng(27)
    out = {"losses": [], "weights": [], "probs": []}
    for step in range(3):
        probs = priorities.pow(alpha)
        probs /= probs.sum()
        idx = torch.from_numpy(rng.choice(capacity, batch, replace=False))
        weights = (capacity * probs[idx]) ** (-beta)
        weights = weights / weights.max()
        q_sa = q(S[idx]).gather(1, A[idx].unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            y = R[idx] + 0.99 * target(S2[idx]).amax(dim=1) * (~done[idx]).float()
        td = y - q_sa
        elementwise = F.smooth_l1_loss(q_sa, y, reduction="none", beta=0.5)
        loss = (weights * elementwise).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(q.parameters(), clip_value=0.1)
        opt.step()
        priorities[idx] = td.abs().detach() + 1e-6
        priorities.index_put_((idx[:2],), torch.tensor([2.0, 3.0]), accumulate=True)
        beta = min(1.0, beta + 0.2)
        out["losses"].append(loss.item())
        out["weights"].append(weights)
        out["probs"].append(probs)
        if step == 1:
            target.load_state_dict(q.state_dict())
    huber = nn.HuberLoss(reduction="sum", delta=0.5)(q_sa, y)
    return {**out, "priorities": priorities, "huber": huber, "q": params(q),
            "target_frozen": all(not p.requires_grad for p in target.parameters())}  # fmt: skip


@program
def double_dqn_nstep_returns_cumsum_flip(torch):
    # n-step targets: discounted sums via gamma ** arange, reward-to-go via flip/cumsum/flip
    nn, F = torch.nn, torch.nn.functional
    B, n, gamma = 6, 4, 0.97
    rewards = torch.tensor(arr(30, B, n))
    dones = torch.tensor(np.random.default_rng(31).random((B, n)) < 0.2)
    alive = torch.cumprod(torch.cat([torch.ones(B, 1), (~dones[:, :-1]).float()], dim=1), dim=1)
    discounts = gamma ** torch.arange(n, dtype=torch.float32)
    disc_r = rewards * alive * discounts
    nstep = disc_r.sum(dim=1)
    rtg = torch.flip(torch.cumsum(torch.flip(disc_r, dims=[1]), dim=1), dims=[1]) / discounts
    bootstrap_mask = alive[:, -1] * (~dones[:, -1]).float()
    online = set_weights(torch, _mlp(torch, OBS, NACT, act=nn.ELU), seed=32)
    target = set_weights(torch, _mlp(torch, OBS, NACT, act=nn.ELU), seed=33)
    opt = torch.optim.SGD(online.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    s = torch.tensor(arr(34, B, OBS))
    s_n = torch.tensor(arr(35, B, OBS))
    a = torch.tensor(ints(36, NACT, B))
    losses = []
    for _ in range(3):
        with torch.no_grad():
            next_a = online(s_n).argmax(dim=1, keepdim=True)
            next_q = target(s_n).gather(1, next_a).squeeze(1)
            y = nstep + (gamma**n) * bootstrap_mask * next_q
        q = online(s)[torch.arange(B), a]
        loss = F.huber_loss(q, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    with torch.no_grad():
        for tp, p in zip(target.parameters(), online.parameters()):
            tp.lerp_(p, 0.1)
    return {"alive": alive, "nstep": nstep, "rtg": rtg, "losses": losses,
            "target": params(target), "online": params(online), "next_a": next_a}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sac_twin_critics_automatic_entropy_tuning(torch):
    # CleanRL sac_continuous_action.py with fixed reparameterization noise
    nn, F = torch.nn, torch.nn.functional
    LOG_STD_MAX, LOG_STD_MIN, ADIM = 2, -5, 2

    class SoftQNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(OBS + ADIM, 16)
            self.fc2 = nn.Linear(16, 16)
            self.fc3 = nn.Linear(16, 1)

        def forward(self, x, a):
            x = torch.cat([x, a], 1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(OBS, 16)
            self.fc_mean = nn.Linear(16, ADIM)
            self.fc_logstd = nn.Linear(16, ADIM)
            self.register_buffer("action_scale", torch.tensor([2.0, 0.5]))
            self.register_buffer("action_bias", torch.tensor([0.0, 0.5]))

        def get_action(self, x, eps):
            x = F.relu(self.fc1(x))
            mean = self.fc_mean(x)
            log_std = torch.tanh(self.fc_logstd(x))
            log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
            normal = torch.distributions.Normal(mean, log_std.exp())
            x_t = mean + log_std.exp() * eps  # rsample with fixed noise
            y_t = torch.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal.log_prob(x_t)
            log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
            return action, log_prob.sum(1, keepdim=True), torch.tanh(mean) * self.action_scale

    actor = set_weights(torch, Actor(), seed=40)
    qf1, qf2 = (
        set_weights(torch, SoftQNetwork(), seed=41),
        set_weights(torch, SoftQNetwork(), seed=42),
    )
    qf1_target, qf2_target = SoftQNetwork(), SoftQNetwork()
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=1e-3)
    actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=3e-4)
    target_entropy = -torch.prod(torch.Tensor((ADIM,))).item()
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha = log_alpha.exp().item()
    a_optimizer = torch.optim.Adam([log_alpha], lr=1e-2)
    out = {"qf_loss": [], "actor_loss": [], "alpha": [], "alpha_loss": []}
    for step in range(3):
        obs, next_obs = torch.tensor(arr(43 + step, 8, OBS)), torch.tensor(arr(53 + step, 8, OBS))
        acts = torch.tensor(arr(63 + step, 8, ADIM, scale=0.5))
        rew, dn = (
            torch.tensor(arr(73 + step, 8)),
            torch.tensor((np.arange(8) % 4 == 3).astype(np.float32)),
        )
        with torch.no_grad():
            next_a, next_logp, _ = actor.get_action(next_obs, torch.tensor(arr(83 + step, 8, ADIM)))
            min_qf_next = torch.min(qf1_target(next_obs, next_a), qf2_target(next_obs, next_a))
            min_qf_next = min_qf_next - alpha * next_logp
            next_q_value = rew.flatten() + (1 - dn.flatten()) * 0.99 * min_qf_next.view(-1)
        qf1_a_values = qf1(obs, acts).view(-1)
        qf2_a_values = qf2(obs, acts).view(-1)
        qf_loss = F.mse_loss(qf1_a_values, next_q_value) + F.mse_loss(qf2_a_values, next_q_value)
        q_optimizer.zero_grad()
        qf_loss.backward()
        q_optimizer.step()
        pi, log_pi, _ = actor.get_action(obs, torch.tensor(arr(93 + step, 8, ADIM)))
        min_qf_pi = torch.min(qf1(obs, pi), qf2(obs, pi))
        actor_loss = ((alpha * log_pi) - min_qf_pi).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        with torch.no_grad():
            _, log_pi, _ = actor.get_action(obs, torch.tensor(arr(93 + step, 8, ADIM)))
        alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
        a_optimizer.zero_grad()
        alpha_loss.backward()
        a_optimizer.step()
        alpha = log_alpha.exp().item()
        for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
            target_param.data.copy_(0.005 * param.data + (1 - 0.005) * target_param.data)
        with torch.no_grad():  # stable-baselines3 polyak_update
            for param, target_param in zip(qf2.parameters(), qf2_target.parameters()):
                target_param.data.mul_(1 - 0.005)
                torch.add(target_param.data, param.data, alpha=0.005, out=target_param.data)
        out["qf_loss"].append(qf_loss.item())
        out["actor_loss"].append(actor_loss.item())
        out["alpha"].append(alpha)
        out["alpha_loss"].append(alpha_loss)
    _, _, det = actor.get_action(obs, torch.zeros(8, ADIM))
    return {**out, "log_alpha": log_alpha, "actor": params(actor), "qf1_target": params(qf1_target),
            "qf2_target": params(qf2_target), "deterministic": det, "target_entropy": target_entropy}  # fmt: skip


@program
def sac_discrete_policy_expectation(torch):
    # Discrete SAC (Christodoulou 2019): expectations over the action distribution instead of samples
    nn, F = torch.nn, torch.nn.functional
    actor = set_weights(torch, _mlp(torch, OBS, NACT), seed=100)
    q1, q2 = (set_weights(torch, _mlp(torch, OBS, NACT, act=nn.ReLU), seed=s) for s in (101, 102))
    q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
    target_entropy = -0.98 * math.log(1.0 / NACT)
    log_alpha = nn.Parameter(torch.tensor(math.log(0.2)))
    opt_q = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=3e-3)
    opt_pi = torch.optim.Adam(actor.parameters(), lr=3e-3)
    opt_a = torch.optim.Adam([log_alpha], lr=3e-3)
    s, s2 = torch.tensor(arr(103, 10, OBS)), torch.tensor(arr(104, 10, OBS))
    a, r = torch.tensor(ints(105, NACT, 10)), torch.tensor(arr(106, 10))
    d = torch.tensor((np.arange(10) % 5 == 0).astype(np.float32))
    hist = []
    for _ in range(2):
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            dist = torch.distributions.Categorical(logits=actor(s2))
            p2, logp2 = dist.probs, F.log_softmax(actor(s2), dim=1)
            v2 = (p2 * (torch.minimum(q1_t(s2), q2_t(s2)) - alpha * logp2)).sum(dim=1)
            y = r + 0.99 * (1 - d) * v2
        q_loss = sum(
            F.mse_loss(qn(s).gather(1, a.long().unsqueeze(1)).squeeze(1), y) for qn in (q1, q2)
        )
        opt_q.zero_grad()
        q_loss.backward()
        opt_q.step()
        logits = actor(s)
        probs, logp = logits.softmax(-1), logits.log_softmax(-1)
        with torch.no_grad():
            min_q = torch.min(q1(s), q2(s))
        pi_loss = (probs * (alpha * logp - min_q)).sum(1).mean()
        opt_pi.zero_grad()
        pi_loss.backward()
        opt_pi.step()
        entropy = -(probs.detach() * logp.detach()).sum(1)
        alpha_loss = (log_alpha * (entropy - target_entropy).detach()).mean()
        opt_a.zero_grad()
        alpha_loss.backward()
        opt_a.step()
        hist.append([q_loss.item(), pi_loss.item(), alpha_loss.item(), log_alpha.item()])
        with torch.no_grad():
            torch._foreach_lerp_(list(q1_t.parameters()), list(q1.parameters()), 0.05)
            torch._foreach_mul_(list(q2_t.parameters()), 0.95)
            torch._foreach_add_(list(q2_t.parameters()), list(q2.parameters()), alpha=0.05)
    return {"hist": hist, "entropy": entropy, "q1_t": params(q1_t), "q2_t": params(q2_t),
            "actor_grads": grads(actor), "log_alpha_grad": log_alpha.grad}  # fmt: skip


@program
def a2c_rollout_returns_rmsprop(torch):
    # ikostrikov pytorch-a2c-ppo-acktr: RolloutStorage with masks (T+1, N, 1), returns computed backwards
    nn = torch.nn

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Sequential(nn.Linear(OBS, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
            self.critic_linear = nn.Linear(16, 1)
            self.dist = nn.Linear(16, NACT)

        def evaluate_actions(self, inputs, action):
            h = self.base(inputs)
            dist = torch.distributions.Categorical(logits=self.dist(h))
            logp = dist.log_prob(action.squeeze(-1)).view(action.size(0), -1).sum(-1).unsqueeze(-1)
            return self.critic_linear(h), logp, dist.entropy().mean()

    policy = set_weights(torch, Policy(), seed=110)
    optimizer = torch.optim.RMSprop(policy.parameters(), lr=7e-4, eps=1e-5, alpha=0.99)
    T, N, gamma = 5, 3, 0.99
    obs = torch.tensor(arr(111, T + 1, N, OBS))
    actions = torch.tensor(ints(112, NACT, T, N, 1))
    rewards = torch.tensor(arr(113, T, N, 1))
    masks = torch.ones(T + 1, N, 1)
    masks[3, 1] = 0.0
    masks[2, 0] = 0.0
    out = {"value_loss": [], "action_loss": [], "entropy": [], "norm": []}
    for _ in range(3):
        with torch.no_grad():
            next_value = policy.critic_linear(policy.base(obs[-1])).detach()
        returns = torch.zeros(T + 1, N, 1)
        returns[-1] = next_value
        for step in reversed(range(rewards.size(0))):
            returns[step] = returns[step + 1] * gamma * masks[step + 1] + rewards[step]
        values, action_log_probs, dist_entropy = policy.evaluate_actions(
            obs[:-1].view(-1, OBS), actions.view(-1, 1)
        )
        values = values.view(T, N, 1)
        action_log_probs = action_log_probs.view(T, N, 1)
        advantages = returns[:-1] - values
        value_loss = advantages.pow(2).mean()
        action_loss = -(advantages.detach() * action_log_probs).mean()
        optimizer.zero_grad()
        (value_loss * 0.5 + action_loss - dist_entropy * 0.01).backward()
        out["norm"].append(nn.utils.clip_grad_norm_(policy.parameters(), 0.5, norm_type=2.0).item())
        optimizer.step()
        out["value_loss"].append(value_loss.item())
        out["action_loss"].append(action_loss.item())
        out["entropy"].append(dist_entropy.item())
    out["returns"] = returns
    out["params"] = params(policy)
    out["rms_state"] = [optimizer.state[p]["square_avg"] for p in policy.parameters()]
    return out


@program
def reinforce_baseline_discount_matrix(torch):
    # PyTorch examples' reinforce.py, with a learned value baseline and returns via a discount matrix
    nn, F = torch.nn, torch.nn.functional

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(OBS, 16)
            self.dropout = nn.Dropout(p=0.6)
            self.action_head = nn.Linear(16, NACT)
            self.value_head = nn.Linear(16, 1)
            self.saved_actions, self.rewards = [], []

        def forward(self, x):
            x = F.relu(self.dropout(self.affine1(x)))
            return F.softmax(self.action_head(x), dim=-1), self.value_head(x)

    model = set_weights(torch, Policy(), seed=120).eval()  # eval: dropout off (fixed results)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    gamma, T = 0.9, 8
    states = torch.from_numpy(arr(121, T, OBS))
    acts = ints(122, NACT, T)
    losses = []
    for episode in range(2):
        for t in range(T):
            probs, value = model(states[t])
            m = torch.distributions.Categorical(probs)
            model.saved_actions.append((m.log_prob(torch.tensor(acts[t])), value))
            model.rewards.append(float(arr(123 + episode, T)[t]))
        rew = torch.tensor(model.rewards)
        i = torch.arange(T).unsqueeze(1)
        j = torch.arange(T).unsqueeze(0)
        disc = torch.where(j >= i, gamma ** (j - i).float(), torch.zeros(()))
        returns = disc @ rew
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_losses, value_losses = [], []
        for (log_prob, value), R in zip(model.saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        del model.rewards[:]
        del model.saved_actions[:]
        losses.append(loss.item())
    return {"disc": disc, "returns": returns, "losses": losses, "params": params(model),
            "cleared": len(model.rewards) + len(model.saved_actions)}  # fmt: skip


@program
def td3_target_smoothing_delayed_actor(torch):
    # Fujimoto's TD3.py: target policy smoothing, clipped double-Q, delayed actor and target updates
    nn, F = torch.nn, torch.nn.functional
    ADIM, max_action = 2, 1.5

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(OBS, 16), nn.Linear(16, 16), nn.Linear(16, ADIM)

        def forward(self, state):
            a = F.relu(self.l2(F.relu(self.l1(state))))
            return max_action * torch.tanh(self.l3(a))

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = (
                nn.Linear(OBS + ADIM, 16),
                nn.Linear(16, 16),
                nn.Linear(16, 1),
            )
            self.l4, self.l5, self.l6 = (
                nn.Linear(OBS + ADIM, 16),
                nn.Linear(16, 16),
                nn.Linear(16, 1),
            )

        def forward(self, state, action):
            sa = torch.cat([state, action], 1)
            q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
            q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
            return q1, q2

        def Q1(self, state, action):
            sa = torch.cat([state, action], 1)
            return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))

    def select_action(state):  # TD3.py, as called by the environment loop with a NumPy state
        state = torch.FloatTensor(state.reshape(1, -1))
        return actor(state).cpu().data.numpy().flatten()

    actor, critic = set_weights(torch, Actor(), seed=130), set_weights(torch, Critic(), seed=131)
    actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)
    tau, out = 0.005, {"critic_loss": [], "actor_loss": []}
    for it in range(1, 5):
        state, next_state = torch.tensor(arr(132 + it, 8, OBS)), torch.tensor(arr(142 + it, 8, OBS))
        action = torch.tensor(arr(152 + it, 8, ADIM)).clamp(-max_action, max_action)
        reward, not_done = torch.tensor(arr(162 + it, 8, 1)), torch.ones(8, 1)
        not_done[it] = 0
        with torch.no_grad():
            noise = (torch.tensor(arr(172 + it, 8, ADIM)) * 0.2).clamp(-0.5, 0.5)
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = critic_target(next_state, next_action)
            target_Q = reward + not_done * 0.99 * torch.min(target_Q1, target_Q2)
        current_Q1, current_Q2 = critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        critic_optimizer.zero_grad()
        critic_loss.backward()
        critic_optimizer.step()
        out["critic_loss"].append(critic_loss.item())
        if it % 2 == 0:
            actor_loss = -critic.Q1(state, actor(state)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            actor_optimizer.step()
            out["actor_loss"].append(actor_loss.item())
            for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
    out["actor_target"] = params(actor_target)
    out["critic_target"] = params(critic_target)
    out["critic_grads"] = grads(critic)
    out["next_action"] = next_action
    expl = select_action(arr(190, OBS)) + np.array([0.1, -0.1], np.float32)
    out["explore_action"] = expl.clip(-max_action, max_action)
    return out


@program
def c51_categorical_projection_index_add(torch):
    # Rainbow / C51 distributional target projection onto a fixed support (Kaixhin-style)
    nn, F = torch.nn, torch.nn.functional
    atoms, v_min, v_max, B, gamma = 11, -5.0, 5.0, 6, 0.9
    support = torch.linspace(v_min, v_max, atoms)
    delta_z = (v_max - v_min) / (atoms - 1)
    net = set_weights(torch, _mlp(torch, OBS, NACT * atoms, act=nn.ReLU), seed=180)
    target_net = set_weights(torch, _mlp(torch, OBS, NACT * atoms, act=nn.ReLU), seed=181)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1.5e-4)
    s, s2 = torch.tensor(arr(182, B, OBS)), torch.tensor(arr(183, B, OBS))
    a = torch.tensor(ints(184, NACT, B))
    r = torch.tensor(np.array([0.37, -1.13, 4.9, 2.0, -6.0, 0.0], np.float32))
    nonterminal = torch.tensor([[1.0], [1.0], [0.0], [1.0], [1.0], [0.0]])
    losses = []
    for _ in range(2):
        log_p = F.log_softmax(net(s).view(B, NACT, atoms), dim=2)
        log_p_a = log_p[range(B), a]
        with torch.no_grad():
            pns = F.softmax(net(s2).view(B, NACT, atoms), 2)
            dns = support.expand_as(pns) * pns
            argmax_a = dns.sum(2).argmax(1)
            pns_a = F.softmax(target_net(s2).view(B, NACT, atoms), 2)[range(B), argmax_a]
            Tz = r.unsqueeze(1) + nonterminal * gamma * support.unsqueeze(0)
            Tz = Tz.clamp(min=v_min, max=v_max)
            b = (Tz - v_min) / delta_z
            lo, u = b.floor().to(torch.int64), b.ceil().to(torch.int64)
            lo[(u > 0) & (lo == u)] -= 1
            u[(lo < (atoms - 1)) & (lo == u)] += 1
            m = s.new_zeros(B, atoms)
            offset = torch.linspace(0, ((B - 1) * atoms), B).unsqueeze(1).expand(B, atoms).to(a)
            m.view(-1).index_add_(0, (lo + offset).view(-1), (pns_a * (u.float() - b)).view(-1))
            m.view(-1).index_add_(0, (u + offset).view(-1), (pns_a * (b - lo.float())).view(-1))
        loss = -torch.sum(m * log_p_a, 1)
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
        losses.append(loss.detach())
    q_values = (F.softmax(net(s).view(B, NACT, atoms), 2) * support).sum(2)
    return {"m": m, "m_sums": m.sum(1), "l": lo, "u": u, "losses": losses, "q": q_values,
            "greedy": q_values.argmax(1), "params": params(net)}  # fmt: skip


@program
def qr_dqn_quantile_huber_and_iqn_embedding(torch):
    # QR-DQN quantile Huber loss over pairwise TD errors, plus IQN's cosine tau embedding
    nn = torch.nn
    Nq, B, kappa = 8, 5, 1.0
    net = set_weights(torch, _mlp(torch, OBS, NACT * Nq, act=nn.ReLU), seed=190)
    opt = torch.optim.Adam(net.parameters(), lr=5e-4, eps=0.01 / 32)
    tau_hat = ((torch.arange(Nq, dtype=torch.float32) + 0.5) / Nq).view(1, Nq, 1)
    s, a = torch.tensor(arr(191, B, OBS)), torch.tensor(ints(192, NACT, B))
    target = torch.tensor(arr(193, B, Nq, scale=2.0)).sort(dim=1).values
    losses = []
    for _ in range(3):
        theta = net(s).view(B, NACT, Nq)
        current = theta.gather(1, a.view(B, 1, 1).expand(B, 1, Nq)).squeeze(1)
        td = target.unsqueeze(1) - current.unsqueeze(2)  # (B, Nq_current, Nq_target)
        huber = torch.where(td.abs() <= kappa, 0.5 * td.pow(2), kappa * (td.abs() - 0.5 * kappa))
        rho = torch.abs(tau_hat - (td.detach() < 0).float()) * huber / kappa
        loss = rho.sum(dim=1).mean(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    taus = torch.tensor(np.random.default_rng(194).random((B, 6, 1)).astype(np.float32))
    i_pi = math.pi * torch.arange(1, 17, dtype=torch.float32).view(1, 1, 16)
    cos_emb = torch.cos(taus * i_pi)
    phi = set_weights(torch, nn.Linear(16, 16), seed=195)
    emb = torch.nn.functional.relu(phi(cos_emb))
    return {"losses": losses, "theta": theta, "rho": rho, "emb": emb, "cos_emb": cos_emb,
            "q_mean": theta.mean(2), "params": params(net)}  # fmt: skip


@program
def impala_vtrace_targets_and_grad_norms(torch):
    # V-trace (Espeholt et al. 2018): truncated importance weights, backwards recursion via
    # torch.unbind, and the per-layer gradient norm logging RL trainers do
    nn, F = torch.nn, torch.nn.functional
    T, N, gamma, rho_bar, c_bar = 6, 3, 0.99, 1.0, 1.0
    net = set_weights(torch, _mlp(torch, OBS, NACT + 1, act=nn.GELU), seed=200)
    opt = torch.optim.RMSprop(net.parameters(), lr=6e-4, momentum=0.0, eps=0.01, alpha=0.99)
    obs = torch.tensor(arr(201, T + 1, N, OBS))
    actions = torch.tensor(ints(202, NACT, T, N))
    behaviour_logits = torch.tensor(arr(203, T, N, NACT))
    rewards = torch.tensor(arr(204, T, N)).clamp(-1, 1)
    discounts = (~torch.tensor(np.random.default_rng(205).random((T, N)) < 0.1)).float() * gamma
    out = {"vs": [], "norms": []}
    for _ in range(2):
        o = net(obs)
        logits, values = o[:-1, :, :NACT], o[..., NACT]
        bootstrap = values[-1]
        values = values[:-1]
        target_logp = -F.cross_entropy(
            logits.flatten(0, 1), actions.flatten(), reduction="none"
        ).view(T, N)
        behav_logp = -F.nll_loss(
            F.log_softmax(behaviour_logits, -1).permute(0, 2, 1), actions, reduction="none"
        )
        with torch.no_grad():
            log_rhos = target_logp - behav_logp
            rhos = torch.exp(log_rhos)
            clipped_rhos = torch.clamp(rhos, max=rho_bar)
            cs = torch.clamp(rhos, max=c_bar)
            values_t1 = torch.cat([values[1:], bootstrap.unsqueeze(0)], dim=0)
            deltas = clipped_rhos * (rewards + discounts * values_t1 - values)
            acc = torch.zeros_like(bootstrap)
            result = []
            for i in range(T - 1, -1, -1):
                acc = deltas[i] + discounts[i] * cs[i] * acc
                result.append(acc)
            vs = torch.stack(result[::-1]) + values
            vs_t1 = torch.cat([vs[1:], bootstrap.unsqueeze(0)], dim=0)
            pg_adv = clipped_rhos * (rewards + discounts * vs_t1 - values)
        pg_loss = -(target_logp * pg_adv).sum()
        baseline_loss = 0.5 * ((vs - values) ** 2).sum()
        policy = F.softmax(logits, dim=-1)
        entropy_loss = (policy * F.log_softmax(logits, dim=-1)).sum()
        total = pg_loss + 0.5 * baseline_loss + 0.0006 * entropy_loss
        opt.zero_grad()
        total.backward()
        layer_norms = {n: p.grad.detach().norm(2).item() for n, p in net.named_parameters()}
        manual = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in net.parameters()]))
        inf_norm = nn.utils.clip_grad_norm_(net.parameters(), 40.0, norm_type=float("inf"))
        l1 = nn.utils.get_total_norm([p.grad for p in net.parameters()], norm_type=1.0)
        nn.utils.clip_grads_with_norm_(net.parameters(), 1.0, manual)
        opt.step()
        out["vs"].append(vs)
        out["norms"].append({"layers": layer_norms, "manual": manual, "inf": inf_norm, "l1": l1})
    out["pg_adv"] = pg_adv
    out["unbind_equal"] = all(torch.equal(x, y) for x, y in zip(torch.unbind(vs, 0), vs))
    out["params"] = params(net)
    return out
