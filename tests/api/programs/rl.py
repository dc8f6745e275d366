"""Reinforcement-learning updates: DQN with target networks, policy gradients, actor-critic, PPO,
DDPG-style soft updates, GAE."""

from __future__ import annotations

import copy

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

OBS, ACT = 4, 3


def _batch(seed: int, n: int = 16):
    s = arr(seed, n, OBS)
    a = ints(seed + 1, ACT, n)
    r = arr(seed + 2, n)
    s2 = arr(seed + 3, n, OBS)
    done = (np.random.default_rng(seed + 4).random(n) < 0.2).astype(np.float32)
    return s, a, r, s2, done


def _qnet(torch):
    nn = torch.nn
    return nn.Sequential(nn.Linear(OBS, 16), nn.ReLU(), nn.Linear(16, ACT))


@program
def dqn_update_with_target_network(torch):
    q = set_weights(torch, _qnet(torch), seed=1)
    target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    gamma, tau = 0.99, 0.05
    losses = []
    for step in range(4):
        s, a, r, s2, done = (torch.tensor(v) for v in _batch(10 + step))
        q_sa = q(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q = target(s2).max(1)[0]
            y = r + gamma * next_q * (1 - done)
        loss = torch.nn.SmoothL1Loss()(q_sa, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        for tp, p in zip(target.parameters(), q.parameters()):
            tp.data.copy_(tau * p.data + (1.0 - tau) * tp.data)
        losses.append(loss.item())
    return {"losses": losses, "q": params(q), "target": params(target)}


@program
def double_dqn_hard_target_update(torch):
    q = set_weights(torch, _qnet(torch), seed=2)
    target = set_weights(torch, _qnet(torch), seed=3)
    opt = torch.optim.RMSprop(q.parameters(), lr=1e-3)
    for step in range(3):
        s, a, r, s2, done = (torch.tensor(v) for v in _batch(20 + step))
        with torch.no_grad():
            best = q(s2).argmax(dim=1, keepdim=True)
            y = r + 0.9 * target(s2).gather(1, best).squeeze(1) * (1 - done)
        loss = torch.nn.functional.mse_loss(q(s).gather(1, a.view(-1, 1)).squeeze(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    target.load_state_dict(q.state_dict())
    return {"loss": loss, "target": params(target), "same": all(
        torch.equal(a_, b_) for a_, b_ in zip(q.parameters(), target.parameters()))}  # fmt: skip


@program
def reinforce_policy_gradient(torch):
    nn = torch.nn
    policy = set_weights(torch, nn.Sequential(nn.Linear(OBS, 16), nn.Tanh(), nn.Linear(16, ACT)),
                         seed=4)  # fmt: skip
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    states = torch.tensor(arr(30, 10, OBS))
    actions = torch.tensor(ints(31, ACT, 10))
    rewards = arr(32, 10).tolist()
    returns, G = [], 0.0
    for r in reversed(rewards):
        G = r + 0.95 * G
        returns.insert(0, G)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    logp = torch.log_softmax(policy(states), dim=-1)
    chosen = logp.gather(1, actions.unsqueeze(-1)).squeeze(-1)
    loss = -(chosen * returns).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {"returns": returns, "loss": loss, "params": params(policy)}


@program
def actor_critic_with_entropy(torch):
    nn = torch.nn

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(OBS, 16), nn.ReLU())
            self.pi = nn.Linear(16, ACT)
            self.v = nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return self.pi(h), self.v(h).squeeze(-1)

    model = set_weights(torch, AC(), seed=5)
    s, a, r, s2, done = (torch.tensor(v) for v in _batch(40))
    logits, v = model(s)
    with torch.no_grad():
        _, v2 = model(s2)
        target = r + 0.99 * v2 * (1 - done)
    adv = (target - v).detach()
    probs = torch.softmax(logits, -1)
    logp = torch.log_softmax(logits, -1)
    entropy = -(probs * logp).sum(-1).mean()
    policy_loss = -(logp.gather(1, a[:, None]).squeeze(1) * adv).mean()
    value_loss = torch.nn.functional.mse_loss(v, target)
    loss = policy_loss + 0.5 * value_loss - 0.01 * entropy
    loss.backward()
    return {"loss": loss, "entropy": entropy, "grads": grads(model)}


@program
def ppo_clipped_objective(torch):
    nn = torch.nn
    policy = set_weights(torch, nn.Sequential(nn.Linear(OBS, 8), nn.Tanh(), nn.Linear(8, ACT)),
                         seed=6)  # fmt: skip
    s, a, *_ = _batch(50)
    S, A = torch.tensor(s), torch.tensor(a)
    old_logp = torch.tensor(arr(51, 16, scale=0.3)) - 1.1
    adv = torch.tensor(arr(52, 16))
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3, eps=1e-5)
    losses = []
    for _ in range(4):
        logp = torch.log_softmax(policy(S), -1).gather(1, A.unsqueeze(1)).squeeze(1)
        ratio = torch.exp(logp - old_logp)
        surr1 = ratio * adv
        surr2 = torch.clamp(ratio, 0.8, 1.2) * adv
        loss = -torch.min(surr1, surr2).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(policy)}


@program
def ddpg_actor_critic_soft_update(torch):
    nn = torch.nn
    actor = set_weights(torch, nn.Sequential(nn.Linear(OBS, 8), nn.ReLU(), nn.Linear(8, 2),
                                             nn.Tanh()), seed=7)  # fmt: skip
    critic = set_weights(torch, nn.Sequential(nn.Linear(OBS + 2, 8), nn.ReLU(), nn.Linear(8, 1)),
                         seed=8)  # fmt: skip
    actor_t, critic_t = copy.deepcopy(actor), copy.deepcopy(critic)
    a_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    c_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    s, _, r, s2, done = (torch.tensor(v) for v in _batch(60))
    act = torch.tensor(arr(61, 16, 2, scale=0.5)).clamp(-1, 1)
    with torch.no_grad():
        y = r.unsqueeze(1) + 0.99 * (1 - done.unsqueeze(1)) * critic_t(
            torch.cat([s2, actor_t(s2)], 1)
        )
    c_loss = nn.functional.mse_loss(critic(torch.cat([s, act], 1)), y)
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
    a_loss = -critic(torch.cat([s, actor(s)], dim=1)).mean()
    a_opt.zero_grad()
    a_loss.backward()
    a_opt.step()
    tau = 0.01
    with torch.no_grad():
        for tp, p in zip(actor_t.parameters(), actor.parameters()):
            tp.mul_(1 - tau)
            tp.add_(tau * p)
        for tp, p in zip(critic_t.parameters(), critic.parameters()):
            tp.data.lerp_(p.data, tau)
    return {"c_loss": c_loss, "a_loss": a_loss, "actor_t": params(actor_t),
            "critic_t": params(critic_t)}  # fmt: skip


@program
def generalized_advantage_estimation(torch):
    rewards = torch.tensor(arr(70, 12))
    values = torch.tensor(arr(71, 13))
    dones = torch.tensor((np.arange(12) % 5 == 4).astype(np.float32))
    gamma, lam = 0.99, 0.95
    adv = torch.zeros(12)
    last = 0.0
    for t in reversed(range(12)):
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * values[t + 1] * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    returns = adv + values[:-1]
    return {"adv": adv, "returns": returns, "normalized": (adv - adv.mean()) / (adv.std() + 1e-8)}


@program
def epsilon_greedy_action_selection(torch):
    q = set_weights(torch, _qnet(torch), seed=9)
    s = torch.tensor(arr(80, 8, OBS))
    coins = np.random.default_rng(81).random(8)
    random_actions = ints(82, ACT, 8)
    with torch.no_grad():
        greedy = q(s).argmax(-1)
    chosen = torch.where(torch.tensor(coins < 0.3), torch.tensor(random_actions), greedy)
    return {"greedy": greedy, "chosen": chosen, "values": q(s).max(dim=-1).values}
