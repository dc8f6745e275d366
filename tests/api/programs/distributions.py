"""Programs built on ``torch.distributions``: policy gradients with Categorical log-probabilities
and an entropy bonus, a PPO-style KL between policies, a VAE's reparameterized KL term, and a
diagonal Gaussian policy. Actions and noise are fixed NumPy inputs: samples are never compared
(the two libraries' random streams differ)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

OBS, ACT = 4, 3


def _policy(torch, out: int, seed: int):
    nn = torch.nn
    return set_weights(torch, nn.Sequential(nn.Linear(OBS, 16), nn.Tanh(), nn.Linear(16, out)),
                       seed=seed)  # fmt: skip


@program
def reinforce_with_categorical_entropy_bonus(torch):
    D = torch.distributions
    policy = _policy(torch, ACT, seed=11)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    states = torch.tensor(arr(60, 12, OBS))
    actions = torch.tensor(ints(61, ACT, 12))
    returns = torch.tensor(arr(62, 12))
    losses, entropies = [], []
    for _ in range(3):
        dist = D.Categorical(logits=policy(states))
        logp = dist.log_prob(actions)
        entropy = dist.entropy().mean()
        loss = -(logp * returns).mean() - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        entropies.append(entropy.item())
    with torch.no_grad():
        final = D.Categorical(logits=policy(states))
        support = final.enumerate_support()
    return {"losses": losses, "entropies": entropies, "params": params(policy),
            "probs": final.probs, "logits": final.logits, "mode": final.mode,
            "batch_shape": list(final.batch_shape), "support": support}  # fmt: skip


@program
def ppo_step_with_policy_kl(torch):
    D = torch.distributions
    policy = _policy(torch, ACT, seed=12)
    s = torch.tensor(arr(70, 16, OBS))
    a = torch.tensor(ints(71, ACT, 16))
    adv = torch.tensor(arr(72, 16))
    with torch.no_grad():
        old = D.Categorical(probs=torch.softmax(policy(s), -1))
        old_logp = old.log_prob(a)
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    kls, losses = [], []
    for _ in range(3):
        new = D.Categorical(logits=policy(s))
        ratio = (new.log_prob(a) - old_logp).exp()
        surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        kl = D.kl_divergence(old, new).mean()
        loss = -surrogate.mean() + 0.1 * kl - 0.01 * new.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        kls.append(kl)
        losses.append(loss)
    onehot = D.OneHotCategorical(logits=policy(s).detach())
    eye = torch.eye(ACT)[a]
    coin = D.Bernoulli(logits=adv)
    coin_q = D.Bernoulli(probs=torch.full((16,), 0.3))
    return {"kls": kls, "losses": losses, "grads": grads(policy),
            "onehot_logp": onehot.log_prob(eye), "onehot_entropy": onehot.entropy(),
            "onehot_mean": onehot.mean, "onehot_variance": onehot.variance,
            "coin_logp": coin.log_prob((adv > 0).float()), "coin_entropy": coin.entropy(),
            "coin_kl": D.kl_divergence(coin, coin_q), "coin_mean": coin.mean}  # fmt: skip


@program
def vae_reparameterized_kl_step(torch):
    nn, D = torch.nn, torch.distributions

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(8, 2 * 3)
            self.dec = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, x, eps):
            mu, logvar = self.enc(x).chunk(2, dim=-1)
            q = D.Normal(mu, (0.5 * logvar).exp())
            z = q.loc + q.scale * eps  # the reparameterization, with fixed noise
            prior = D.Normal(torch.zeros_like(mu), torch.ones_like(mu))
            kl = D.kl_divergence(q, prior).sum(-1)
            recon = D.Independent(D.Bernoulli(logits=self.dec(z)), 1).log_prob(x)
            return q, z, kl, recon

    model = set_weights(torch, VAE(), seed=13)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.tensor((np.random.default_rng(80).random((10, 8)) < 0.4).astype(np.float32))
    eps = torch.tensor(arr(81, 10, 3))
    elbos = []
    for _ in range(3):
        q, z, kl, recon = model(x, eps)
        loss = (kl - recon).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        elbos.append(-loss.item())
    q, z, kl, recon = model(x, eps)
    return {"elbos": elbos, "kl": kl, "recon": recon, "z": z, "params": params(model),
            "log_qz": q.log_prob(z).sum(-1), "q_entropy": q.entropy(),
            "q_stddev": q.stddev, "q_variance": q.variance,
            "cdf": q.cdf(torch.zeros_like(z))}  # fmt: skip


@program
def gaussian_policy_log_likelihood(torch):
    nn, D = torch.nn, torch.distributions
    mu_net = _policy(torch, 2, seed=14)
    log_std = nn.Parameter(torch.tensor([-0.5, 0.2]))
    s = torch.tensor(arr(90, 8, OBS))
    actions = torch.tensor(arr(91, 8, 2))
    adv = torch.tensor(arr(92, 8))
    pi = D.Independent(D.Normal(mu_net(s), log_std.exp()), 1)
    logp = pi.log_prob(actions)
    entropy = pi.entropy()
    old = D.Independent(D.Normal(torch.zeros(8, 2), torch.ones(2)), 1)
    kl = D.kl_divergence(pi, old)
    loss = -(logp * adv).mean() - 0.01 * entropy.mean() + 0.1 * kl.mean()
    loss.backward()
    box = D.Uniform(torch.tensor([-2.0, -1.0]), torch.tensor([2.0, 3.0]))
    lap = D.Laplace(torch.zeros(2), torch.tensor([0.5, 1.5]))
    rate = D.Exponential(torch.tensor([0.5, 2.0]))
    inside = actions.clamp(-0.9, 0.9)
    return {"logp": logp, "entropy": entropy, "kl": kl, "loss": loss,
            "grads": grads(mu_net), "log_std_grad": log_std.grad,
            "shapes": [list(pi.batch_shape), list(pi.event_shape)],
            "box_logp": box.log_prob(inside), "box_entropy": box.entropy(),
            "box_kl": D.kl_divergence(box, D.Uniform(-3.0, 4.0)),
            "lap_logp": lap.log_prob(actions), "lap_entropy": lap.entropy(),
            "lap_cdf": lap.cdf(actions), "lap_kl": D.kl_divergence(lap, D.Laplace(0.5, 1.0)),
            "exp_logp": rate.log_prob(actions.abs()), "exp_entropy": rate.entropy(),
            "exp_kl": D.kl_divergence(rate, D.Exponential(1.0)),
            "moments": [box.mean, box.variance, lap.variance, rate.mean, rate.variance]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sac_squashed_gaussian_and_mvn(torch):
    nn, D = torch.nn, torch.distributions
    actor = _policy(torch, 4, seed=15)
    s = torch.tensor(arr(100, 6, OBS))
    eps = torch.tensor(arr(101, 6, 2))
    mu, log_std = actor(s).chunk(2, dim=-1)
    std = log_std.clamp(-5, 2).exp()
    pre_tanh = mu + std * eps  # rsample with fixed noise
    squash = D.TanhTransform(cache_size=1)
    pi = D.TransformedDistribution(D.Independent(D.Normal(mu, std), 1), [squash])
    action = squash(pre_tanh)
    logp = pi.log_prob(action)
    loss = (0.2 * logp - action.sum(-1)).mean()
    loss.backward()
    cov = torch.tensor(np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]], np.float32))
    loc = nn.Parameter(torch.tensor([0.5, -1.0, 0.2]))
    mvn = D.MultivariateNormal(loc, covariance_matrix=cov)
    x = torch.tensor(arr(102, 5, 3))
    mvn_logp = mvn.log_prob(x)
    prior = D.MultivariateNormal(torch.zeros(3), scale_tril=torch.eye(3) * 1.5)
    mvn_kl = D.kl_divergence(mvn, prior)
    (mvn_logp.sum() + mvn_kl).backward()
    ln = D.LogNormal(torch.tensor([0.0, 0.4]), torch.tensor([0.5, 1.0]))
    return {"action": action, "logp": logp, "loss": loss, "grads": grads(actor),
            "mvn_logp": mvn_logp, "mvn_kl": mvn_kl, "mvn_entropy": mvn.entropy(),
            "loc_grad": loc.grad, "scale_tril": mvn.scale_tril, "mvn_var": mvn.variance,
            "precision": mvn.precision_matrix,
            "ln_logp": ln.log_prob(torch.tensor([[0.5, 2.0], [1.0, 3.0]])), "ln_mean": ln.mean,
            "ln_var": ln.variance, "ln_entropy": ln.entropy(), "ln_mode": ln.mode}  # fmt: skip
