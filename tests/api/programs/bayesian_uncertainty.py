"""Bayesian deep learning and predictive uncertainty as the papers' reference code and libraries
(laplace-torch, SWAG, Pyro-style BNN layers, torchmetrics, conformal tutorials) write it:
Bayes-by-backprop layers with the local reparameterisation trick, MC dropout with fixed masks,
deep ensembles (looped and ``torch.func``-vmapped), temperature scaling fitted with LBFGS,
expected calibration error with equal-width and equal-mass bins, evidential regression and
classification losses, a diagonal last-layer Laplace approximation (GGN and empirical Fisher),
SWAG moments and sampling, split conformal prediction (absolute residual, LAC, APS, CQR),
heteroscedastic Gaussian NLL (``F.gaussian_nll_loss``, beta-NLL) and Dirichlet prior networks.
Every random draw (reparameterisation noise, dropout masks, SWAG samples) is a fixed NumPy
input: the library's own random numbers are never used."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _unif(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _ece(torch, probs, labels, n_bins=10):
    # Guo et al.'s binning: confidence in (lo, hi], |accuracy - confidence| weighted by bin mass
    confidences, predictions = probs.max(dim=1)
    accuracies = predictions.eq(labels)
    boundaries = torch.linspace(0, 1, n_bins + 1)
    ece = torch.zeros(1)
    for lo, hi in zip(boundaries[:-1], boundaries[1:]):
        in_bin = confidences.gt(lo.item()) * confidences.le(hi.item())
        prop_in_bin = in_bin.float().mean()
        if prop_in_bin.item() > 0:
            acc_in_bin = accuracies[in_bin].float().mean()
            conf_in_bin = confidences[in_bin].mean()
            ece += torch.abs(conf_in_bin - acc_in_bin) * prop_in_bin
    return ece


@program(rtol=5e-4, atol=5e-5)
def bayes_by_backprop_local_reparameterisation_mlp(torch):
    # Blundell et al.'s mean-field Gaussian layers trained with Kingma et al.'s local
    # reparameterisation: the pre-activations are sampled (mean x W_mu^T, variance x^2 sigma^2^T)
    # with fixed noise; sigma = softplus(rho); closed-form KL to N(0, prior_sigma^2); the
    # minibatch ELBO weights the KL by 1/num_batches; prediction averages sampled softmaxes
    nn, F = torch.nn, torch.nn.functional

    class BayesLinear(nn.Module):
        def __init__(self, fan_in, fan_out, prior_sigma=1.0, seed=0):
            super().__init__()
            bound = 1.0 / math.sqrt(fan_in)
            self.weight_mu = nn.Parameter(torch.tensor(_unif(seed, fan_out, fan_in,
                                                             low=-bound, high=bound)))  # fmt: skip
            self.weight_rho = nn.Parameter(torch.full((fan_out, fan_in), -5.0))
            self.bias_mu = nn.Parameter(torch.zeros(fan_out))
            self.bias_rho = nn.Parameter(torch.full((fan_out,), -5.0))
            self.prior_sigma = prior_sigma

        def forward(self, x, noise):
            w_sigma, b_sigma = F.softplus(self.weight_rho), F.softplus(self.bias_rho)
            act_mu = F.linear(x, self.weight_mu, self.bias_mu)
            act_var = F.linear(x.pow(2), w_sigma.pow(2), b_sigma.pow(2))
            return act_mu + torch.sqrt(act_var + 1e-8) * noise

        def kl(self):
            total = 0.0
            for mu, rho in ((self.weight_mu, self.weight_rho), (self.bias_mu, self.bias_rho)):
                sigma = F.softplus(rho)
                p = self.prior_sigma
                total = total + (torch.log(p / sigma) + (sigma**2 + mu**2) / (2 * p**2) - 0.5).sum()
            return total

    class BNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = BayesLinear(5, 16, seed=1)
            self.fc2 = BayesLinear(16, 3, seed=2)

        def forward(self, x, noise):
            h = F.relu(self.fc1(x, noise[0]))
            return self.fc2(h, noise[1])

        def kl(self):
            return sum(m.kl() for m in self.modules() if isinstance(m, BayesLinear))

    model = BNN()
    x, y = torch.tensor(arr(10, 32, 5)), torch.tensor(ints(11, 3, 32))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    num_batches = 2
    elbos, kls, nlls = [], [], []
    for step in range(6):
        xb, yb = x[(step % 2) * 16 : (step % 2 + 1) * 16], y[(step % 2) * 16 : (step % 2 + 1) * 16]
        noise = (torch.tensor(arr(100 + step, 16, 16)), torch.tensor(arr(200 + step, 16, 3)))
        logits = model(xb, noise)
        nll = F.cross_entropy(logits, yb, reduction="sum")
        kl = model.kl()
        loss = nll + kl / num_batches
        opt.zero_grad()
        loss.backward()
        opt.step()
        elbos.append(-loss.item())
        kls.append(kl.item())
        nlls.append(nll.item())
    with torch.no_grad():
        samples = torch.stack([
            F.softmax(model(x, (torch.tensor(arr(300 + s, 32, 16)),
                                torch.tensor(arr(400 + s, 32, 3)))), dim=-1)
            for s in range(5)
        ])  # fmt: skip
        mean_probs = samples.mean(0)
        zero = model(x, (torch.zeros(32, 16), torch.zeros(32, 3)))
    return {"elbos": elbos, "kls": kls, "nlls": nlls, "params": params(model),
            "grads": grads(model), "mean_probs": mean_probs, "std_probs": samples.std(0),
            "zero_noise_logits": zero, "sigma_fc2": F.softplus(model.fc2.weight_rho).detach(),
            "accuracy": (mean_probs.argmax(-1) == y).float().mean()}  # fmt: skip


@program
def mc_dropout_fixed_masks_bald_and_variation_ratio(torch):
    # Gal & Ghahramani's MC dropout: dropout stays on at test time; here each pass uses a fixed
    # Bernoulli mask (scaled by 1/(1-p)) held by a small module, so T forward passes give the
    # predictive mean, predictive entropy, expected entropy, BALD mutual information and the
    # variation ratio used by active-learning acquisition functions (top-k to acquire)
    nn, F = torch.nn, torch.nn.functional
    p_drop, T, N = 0.25, 8, 20

    class FixedMaskDropout(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p
            self.register_buffer("mask", None)

        def forward(self, x):
            if not self.training or self.mask is None:
                return x
            return x * self.mask / (1 - self.p)

    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), FixedMaskDropout(p_drop), nn.Linear(24, 24),
                          nn.Tanh(), FixedMaskDropout(p_drop), nn.Linear(24, 4))  # fmt: skip
    set_weights(torch, model, seed=20)
    drops = [m for m in model.modules() if isinstance(m, FixedMaskDropout)]
    rng = np.random.default_rng(21)
    x = torch.tensor(arr(22, N, 6))
    y = torch.tensor(ints(23, 4, N))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    model.train()
    losses = []
    for _ in range(4):
        for d in drops:
            d.mask = torch.tensor((rng.uniform(size=(N, 24)) > p_drop).astype(np.float32))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    def enable_dropout(m):
        if isinstance(m, FixedMaskDropout):
            m.train()

    model.eval()
    model.apply(enable_dropout)
    probs = []
    with torch.no_grad():
        for _ in range(T):
            for d in drops:
                d.mask = torch.tensor((rng.uniform(size=(N, 24)) > p_drop).astype(np.float32))
            probs.append(F.softmax(model(x), dim=-1))
        probs = torch.stack(probs)  # (T, N, C)
        mean = probs.mean(0)
        predictive_entropy = -(mean * torch.log(mean + 1e-10)).sum(-1)
        expected_entropy = -(probs * torch.log(probs + 1e-10)).sum(-1).mean(0)
        bald = predictive_entropy - expected_entropy
        votes = probs.argmax(-1)  # (T, N)
        mode_counts = F.one_hot(votes, 4).sum(0).max(-1).values
        variation_ratio = 1 - mode_counts.float() / T
        acquire = torch.topk(bald, k=5).indices
        model.eval()
        deterministic = F.softmax(model(x), dim=-1)
    return {"losses": losses, "mean": mean, "predictive_entropy": predictive_entropy,
            "expected_entropy": expected_entropy, "bald": bald, "votes": votes,
            "variation_ratio": variation_ratio, "acquire": acquire,
            "deterministic": deterministic, "training_flags": [m.training for m in model],
            "mask_buffer": str(dict(model.named_buffers()).keys())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def deep_ensemble_gaussian_heads_mixture_and_vmap(torch):
    # Lakshminarayanan et al.: M independently initialised regressors with mean and variance
    # heads, each trained on the Gaussian NLL; the ensemble is a uniform Gaussian mixture whose
    # mean/variance are moment-matched; predictions are also made the torch.func way (stack the
    # members' state and vmap a functional_call over it), as the ensembling tutorial does
    nn, F = torch.nn, torch.nn.functional

    class GaussianMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(1, 16), nn.Tanh())
            self.mean = nn.Linear(16, 1)
            self.var = nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return self.mean(h), F.softplus(self.var(h)) + 1e-6

    xs = np.linspace(-3, 3, 24, dtype=np.float32)[:, None]
    ys = np.sin(xs) + 0.1 * np.abs(xs) * arr(30, 24, 1)
    x, y = torch.tensor(xs), torch.tensor(ys.astype(np.float32))
    members = [set_weights(torch, GaussianMLP(), seed=31 + m) for m in range(4)]
    histories = []
    for model in members:
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        hist = []
        for _ in range(5):
            mu, var = model(x)
            loss = F.gaussian_nll_loss(mu, y, var)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hist.append(loss.item())
        histories.append(hist)
    x_test = torch.linspace(-5, 5, 11).unsqueeze(-1)
    with torch.no_grad():
        mus, vars_ = zip(*(model(x_test) for model in members))
        mus, vars_ = torch.stack(mus), torch.stack(vars_)
        mix_mean = mus.mean(0)
        mix_var = (vars_ + mus.pow(2)).mean(0) - mix_mean.pow(2)
        epistemic = mus.var(0, unbiased=False)
        aleatoric = vars_.mean(0)
    functional_call, stack_module_state = torch.func.functional_call, torch.func.stack_module_state
    vmap = torch.func.vmap
    stacked_params, stacked_buffers = stack_module_state(members)
    base = GaussianMLP().to("meta")

    def f(p, b, xx):
        return functional_call(base, (p, b), (xx,))

    v_mu, v_var = vmap(f, in_dims=(0, 0, None))(stacked_params, stacked_buffers, x_test)
    nll_test = F.gaussian_nll_loss(mix_mean, torch.sin(x_test), mix_var, reduction="none")
    return {"histories": histories, "mix_mean": mix_mean, "mix_var": mix_var,
            "epistemic": epistemic, "aleatoric": aleatoric, "vmap_mu": v_mu.detach(),
            "vmap_var": v_var.detach(), "nll_test": nll_test,
            "stacked_keys": sorted(stacked_params),
            "stacked_shape": list(stacked_params["mean.weight"].shape)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # LBFGS iterates on float32 sums: the fitted T drifts ~1e-4
def temperature_scaling_lbfgs_nll_and_ece(torch):
    # Guo et al.'s post-hoc calibration as the gpleiss reference does it: a single temperature
    # parameter, fitted on held-out logits by LBFGS on the NLL inside a closure, then NLL and
    # ECE before and after; the logits come from an over-confident "network"
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(40)
    n, c = 120, 5
    labels = rng.integers(0, c, n)
    raw = rng.standard_normal((n, c)).astype(np.float32)
    raw[np.arange(n), labels] += 1.2
    flip = rng.uniform(size=n) < 0.3  # mislabelled with high confidence: over-confidence
    raw[flip] = np.roll(raw[flip], 1, axis=1)
    logits = torch.tensor(raw * 3.0)
    labels = torch.tensor(labels)

    class ModelWithTemperature(nn.Module):
        def __init__(self):
            super().__init__()
            self.temperature = nn.Parameter(torch.ones(1) * 1.5)

        def temperature_scale(self, logits):
            temperature = self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))
            return logits / temperature

    scaler = ModelWithTemperature()
    nll_criterion = nn.CrossEntropyLoss()
    before_nll = nll_criterion(logits, labels).item()
    before_ece = _ece(torch, F.softmax(logits, dim=1), labels, n_bins=15).item()
    optimizer = torch.optim.LBFGS([scaler.temperature], lr=0.01, max_iter=50)
    calls = []

    def closure():
        optimizer.zero_grad()
        loss = nll_criterion(scaler.temperature_scale(logits), labels)
        loss.backward()
        calls.append(loss.item())
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        scaled = scaler.temperature_scale(logits)
        after_nll = nll_criterion(scaled, labels).item()
        after_ece = _ece(torch, F.softmax(scaled, dim=1), labels, n_bins=15).item()
    state = optimizer.state[scaler.temperature]
    return {"temperature": scaler.temperature, "before_nll": before_nll,
            "before_ece": before_ece, "after_nll": after_nll, "after_ece": after_ece,
            "first_calls": calls[:5], "n_calls": len(calls), "n_iter": state["n_iter"],
            "func_evals": state["func_evals"]}  # fmt: skip


@program
def calibration_errors_equal_width_equal_mass_and_classwise(torch):
    # the calibration metrics of uncertainty benchmarks: equal-width ECE and MCE with a
    # reliability diagram (bucketize + bincount/scatter_add), equal-mass (adaptive) ECE with
    # sorted confidences split into chunks, static class-wise ECE, the multiclass Brier score
    # and negative log-likelihood
    F = torch.nn.functional
    n, c, n_bins = 200, 4, 10
    logits = torch.tensor(arr(50, n, c, scale=2.0))
    labels = torch.tensor(ints(51, c, n))
    probs = F.softmax(logits, dim=1)
    conf, pred = probs.max(1)
    correct = (pred == labels).float()
    ece = _ece(torch, probs, labels, n_bins)
    edges = torch.linspace(0, 1, n_bins + 1)
    idx = torch.bucketize(conf, edges[1:-1], right=False)  # bin i holds (e_i, e_{i+1}]
    counts = torch.bincount(idx, minlength=n_bins)
    conf_sum = torch.zeros(n_bins).scatter_add_(0, idx, conf)
    acc_sum = torch.zeros(n_bins).index_add_(0, idx, correct)
    nonempty = counts > 0
    bin_conf = torch.where(nonempty, conf_sum / counts.clamp(min=1), torch.zeros(()))
    bin_acc = torch.where(nonempty, acc_sum / counts.clamp(min=1), torch.zeros(()))
    gaps = (bin_acc - bin_conf).abs()
    ece_hist = (gaps * counts / n).sum()
    mce = gaps[nonempty].max()
    order = torch.argsort(conf)
    adaptive = sum((conf[chunk].mean() - correct[chunk].mean()).abs() * len(chunk) / n
                   for chunk in torch.tensor_split(order, n_bins))  # fmt: skip
    classwise = []
    onehot = F.one_hot(labels, c).float()
    for k in range(c):
        pk, yk = probs[:, k], onehot[:, k]
        bins = torch.clamp((pk * n_bins).long(), max=n_bins - 1)
        s_p = torch.zeros(n_bins).scatter_add(0, bins, pk)
        s_y = torch.zeros(n_bins).scatter_add(0, bins, yk)
        classwise.append(((s_p - s_y).abs() / n).sum())
    brier = ((probs - onehot) ** 2).sum(1).mean()
    return {"ece": ece, "ece_hist": ece_hist, "mce": mce, "adaptive_ece": adaptive,
            "classwise_ece": torch.stack(classwise).mean(), "per_class": torch.stack(classwise),
            "counts": counts, "bin_conf": bin_conf, "bin_acc": bin_acc, "brier": brier,
            "nll": F.nll_loss(torch.log(probs), labels), "accuracy": correct.mean()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def deep_evidential_regression_normal_inverse_gamma(torch):
    # Amini et al.'s evidential regression: the head outputs (gamma, nu, alpha, beta) of a
    # Normal-Inverse-Gamma; the loss is the Student-t NLL of the NIG evidence plus lambda times
    # the evidence regulariser |y - gamma| (2 nu + alpha); aleatoric E[sigma^2] = beta/(alpha-1)
    # and epistemic Var[mu] = beta/(nu (alpha-1))
    nn, F = torch.nn, torch.nn.functional

    class DenseNormalGamma(nn.Module):
        def __init__(self, fan_in):
            super().__init__()
            self.linear = nn.Linear(fan_in, 4)

        def forward(self, x):
            gamma, lognu, logalpha, logbeta = torch.split(self.linear(x), 1, dim=-1)
            nu, alpha, beta = F.softplus(lognu), F.softplus(logalpha) + 1.0, F.softplus(logbeta)
            return torch.cat([gamma, nu, alpha, beta], dim=-1)

    def nig_nll(y, gamma, nu, alpha, beta):
        two_blambda = 2 * beta * (1 + nu)
        return (0.5 * torch.log(np.pi / nu) - alpha * torch.log(two_blambda)
                + (alpha + 0.5) * torch.log(nu * (y - gamma) ** 2 + two_blambda)
                + torch.lgamma(alpha) - torch.lgamma(alpha + 0.5))  # fmt: skip

    def nig_reg(y, gamma, nu, alpha):
        return torch.abs(y - gamma) * (2 * nu + alpha)

    model = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          DenseNormalGamma(32))  # fmt: skip
    set_weights(torch, model, seed=60)
    xs = np.linspace(-4, 4, 40, dtype=np.float32)[:, None]
    ys = (xs**3 / 10 + arr(61, 40, 1) * 0.3).astype(np.float32)
    x, y = torch.tensor(xs), torch.tensor(ys)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    lam, losses, nlls, regs = 0.01, [], [], []
    for _ in range(6):
        gamma, nu, alpha, beta = model(x).unbind(-1)
        nll = nig_nll(y.squeeze(-1), gamma, nu, alpha, beta).mean()
        reg = nig_reg(y.squeeze(-1), gamma, nu, alpha).mean()
        loss = nll + lam * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        nlls.append(nll.item())
        regs.append(reg.item())
    with torch.no_grad():
        x_test = torch.linspace(-6, 6, 9)[:, None]
        gamma, nu, alpha, beta = model(x_test).T
        aleatoric = beta / (alpha - 1)
        epistemic = beta / (nu * (alpha - 1))
        student_t = torch.distributions.StudentT(2 * alpha, gamma,
                                                 torch.sqrt(beta * (1 + nu) / (nu * alpha)))  # fmt: skip
        lp = student_t.log_prob(torch.zeros(9))
    return {"losses": losses, "nlls": nlls, "regs": regs, "gamma": gamma, "nu": nu,
            "alpha": alpha, "beta": beta, "aleatoric": aleatoric, "epistemic": epistemic,
            "student_t_log_prob": lp, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def evidential_classification_dirichlet_mse_kl_annealing(torch):
    # Sensoy et al.'s evidential deep learning: non-negative evidence (ReLU), alpha = evidence
    # + 1, the expected-MSE loss under Dir(alpha), plus an annealed KL from the Dirichlet with the
    # true class's evidence removed to the uniform Dir(1) written with lgamma/digamma (checked
    # against torch.distributions.kl_divergence); the uncertainty mass is K / S
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    K = 3
    model = set_weights(torch, nn.Sequential(nn.Linear(4, 20), nn.ReLU(), nn.Linear(20, K)),
                        seed=70)  # fmt: skip
    x = torch.tensor(arr(71, 30, 4))
    y = torch.tensor(ints(72, K, 30))
    y_onehot = F.one_hot(y, K).float()

    def kl_to_uniform(alpha):
        ones = torch.ones([1, K], dtype=torch.float32)
        sum_alpha = torch.sum(alpha, dim=1, keepdim=True)
        first = (torch.lgamma(sum_alpha) - torch.lgamma(alpha).sum(dim=1, keepdim=True)
                 + torch.lgamma(ones).sum(dim=1, keepdim=True)
                 - torch.lgamma(ones.sum(dim=1, keepdim=True)))  # fmt: skip
        second = ((alpha - ones) * (torch.digamma(alpha) - torch.digamma(sum_alpha))).sum(
            dim=1, keepdim=True
        )
        return first + second

    def edl_mse_loss(alpha, target, epoch, annealing_step=10):
        S = alpha.sum(dim=1, keepdim=True)
        loglik_err = ((target - alpha / S) ** 2).sum(dim=1, keepdim=True)
        loglik_var = (alpha * (S - alpha) / (S * S * (S + 1))).sum(dim=1, keepdim=True)
        coef = torch.min(
            torch.tensor(1.0), torch.tensor(epoch / annealing_step, dtype=torch.float32)
        )
        kl_alpha = (alpha - 1) * (1 - target) + 1
        return loglik_err + loglik_var + coef * kl_to_uniform(kl_alpha), kl_alpha

    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.005)
    losses = []
    for epoch in range(6):
        evidence = F.relu(model(x))
        alpha = evidence + 1
        loss, kl_alpha = edl_mse_loss(alpha, y_onehot, epoch)
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        alpha = F.relu(model(x)) + 1
        S = alpha.sum(1, keepdim=True)
        prob = alpha / S
        uncertainty = K / S
        _, kl_alpha = edl_mse_loss(alpha, y_onehot, 10)
        manual_kl = kl_to_uniform(kl_alpha).squeeze(1)
        library_kl = D.kl_divergence(D.Dirichlet(kl_alpha), D.Dirichlet(torch.ones(K)))
        match = (prob.argmax(1) == y).float()
        mean_ev_correct = (S.squeeze(1) * match).sum() / match.sum().clamp(min=1)
    return {"losses": losses, "prob": prob, "uncertainty": uncertainty, "manual_kl": manual_kl,
            "library_kl": library_kl, "mean_evidence_correct": mean_ev_correct,
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def diagonal_last_layer_laplace_ggn_fisher_and_prior_tuning(torch):
    # laplace-torch style last-layer Laplace for a classifier: the diagonal generalised
    # Gauss-Newton of the softmax likelihood for the last Linear layer (closed form from the
    # features and p(1-p)), the empirical Fisher from per-sample gradients (torch.autograd.grad
    # in a loop) for comparison, the prior precision tuned by maximising the Laplace marginal
    # likelihood, and the probit-approximated predictive
    nn, F = torch.nn, torch.nn.functional
    torch_model = nn.Sequential(nn.Linear(3, 12), nn.Tanh(), nn.Linear(12, 3))
    set_weights(torch, torch_model, seed=80)
    x = torch.tensor(arr(81, 40, 3))
    y = torch.tensor(ints(82, 3, 40))
    opt = torch.optim.Adam(torch_model.parameters(), lr=0.05)
    for _ in range(10):
        loss = F.cross_entropy(torch_model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    feature_extractor, last = torch_model[:2], torch_model[2]
    with torch.no_grad():
        phi = feature_extractor(x)  # (N, H)
        p = F.softmax(last(phi), dim=-1)  # (N, C)
        lam = p * (1 - p)  # diagonal of the softmax Hessian diag(p) - pp^T
        H_w = torch.einsum("nc,nh->ch", lam, phi**2)
        H_b = lam.sum(0)
        loss_sum = F.cross_entropy(last(phi), y, reduction="sum")
    fisher_w = torch.zeros_like(last.weight)
    fisher_b = torch.zeros_like(last.bias)
    for i in range(x.shape[0]):
        li = F.cross_entropy(last(phi[i : i + 1]), y[i : i + 1])
        gw, gb = torch.autograd.grad(li, (last.weight, last.bias))
        fisher_w += gw**2
        fisher_b += gb**2
    theta = torch.cat([last.weight.detach().flatten(), last.bias.detach()])
    h_diag = torch.cat([H_w.flatten(), H_b])
    log_prior_prec = torch.zeros(1, requires_grad=True)
    hyper_opt = torch.optim.Adam([log_prior_prec], lr=0.1)
    marglik = []
    for _ in range(8):
        prior_prec = log_prior_prec.exp()
        post_prec = h_diag + prior_prec
        log_det_ratio = torch.log(post_prec).sum() - theta.numel() * torch.log(prior_prec)
        scatter = prior_prec * (theta**2).sum()
        lml = -loss_sum - 0.5 * (log_det_ratio + scatter)
        hyper_opt.zero_grad()
        (-lml).backward()
        hyper_opt.step()
        marglik.append(lml.item())
    with torch.no_grad():
        prior_prec = log_prior_prec.exp()
        post_var_w = 1.0 / (H_w + prior_prec)
        post_var_b = 1.0 / (H_b + prior_prec)
        x_test = torch.tensor(arr(83, 6, 3, scale=3.0))
        phi_t = feature_extractor(x_test)
        f_mu = last(phi_t)
        f_var = phi_t.pow(2) @ post_var_w.T + post_var_b
        kappa = 1 / torch.sqrt(1.0 + math.pi / 8 * f_var)
        probit = torch.softmax(kappa * f_mu, dim=-1)
        map_probs = torch.softmax(f_mu, dim=-1)
    return {"H_w": H_w, "H_b": H_b, "fisher_w": fisher_w, "fisher_b": fisher_b,
            "marglik": marglik, "prior_prec": prior_prec, "post_var_w": post_var_w,
            "f_var": f_var, "probit": probit, "map_probs": map_probs,
            "confidence_drop": (map_probs.max(-1).values - probit.max(-1).values)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def swag_first_second_moments_and_low_rank_sampling(torch):
    # Maddox et al.'s SWAG: SGD with a constant learning rate; after each epoch the flattened
    # weights update the running first and second moments and the deviation matrix (last K
    # columns); samples theta = mean + sqrt(var / 2) z1 + D z2 / sqrt(2 (K - 1)) are written back
    # with vector_to_parameters and the predictive is the average over samples
    nn, F = torch.nn, torch.nn.functional
    parameters_to_vector = torch.nn.utils.parameters_to_vector
    vector_to_parameters = torch.nn.utils.vector_to_parameters

    model = set_weights(torch, nn.Sequential(nn.Linear(4, 10), nn.ReLU(), nn.Linear(10, 3)),
                        seed=90)  # fmt: skip
    x = torch.tensor(arr(91, 48, 4))
    y = torch.tensor(ints(92, 3, 48))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    n_params = sum(p.numel() for p in model.parameters())
    mean = torch.zeros(n_params)
    sq_mean = torch.zeros(n_params)
    max_rank = 4
    cov_mat_sqrt = torch.empty(0, n_params)
    n_models, losses = 0, []
    for epoch in range(8):
        for b in range(3):
            xb, yb = x[b * 16 : (b + 1) * 16], y[b * 16 : (b + 1) * 16]
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if epoch >= 3:
            w = parameters_to_vector(model.parameters()).detach()
            mean = mean * n_models / (n_models + 1.0) + w / (n_models + 1.0)
            sq_mean = sq_mean * n_models / (n_models + 1.0) + w**2 / (n_models + 1.0)
            dev = (w - mean).view(-1, 1)
            cov_mat_sqrt = torch.cat((cov_mat_sqrt, dev.t()), dim=0)
            if cov_mat_sqrt.size(0) > max_rank:
                cov_mat_sqrt = cov_mat_sqrt[1:, :]
            n_models += 1
    var = torch.clamp(sq_mean - mean**2, 1e-30)
    K = cov_mat_sqrt.size(0)
    samples, probs = [], []
    with torch.no_grad():
        for s in range(4):
            z1 = torch.tensor(arr(93 + s, n_params))
            z2 = torch.tensor(arr(193 + s, K))
            theta = (
                mean
                + (0.5 * var).sqrt() * z1
                + cov_mat_sqrt.t().matmul(z2) / math.sqrt(2 * (K - 1))
            )
            vector_to_parameters(theta, model.parameters())
            probs.append(F.softmax(model(x), dim=-1))
            samples.append(theta)
        bma = torch.stack(probs).mean(0)
        vector_to_parameters(mean, model.parameters())
        swa_probs = F.softmax(model(x), dim=-1)
    return {"losses": losses, "mean": mean, "var": var, "cov_mat_sqrt": cov_mat_sqrt,
            "samples": torch.stack(samples), "bma": bma, "swa_probs": swa_probs,
            "bma_nll": F.nll_loss(bma.log(), y), "n_models": n_models,
            "swa_params": params(model)}  # fmt: skip


@program
def split_conformal_regression_lac_aps_and_cqr(torch):
    # split conformal prediction as Angelopoulos & Bates' gentle introduction writes it:
    # absolute-residual scores with the finite-sample quantile level ceil((n+1)(1-a))/n and
    # torch.quantile(..., interpolation="higher"); LAC and APS prediction sets for a classifier
    # (APS with sort/cumsum/gather and the scores scattered back); conformalised quantile
    # regression from pinball-loss-trained lower/upper heads
    nn = torch.nn
    alpha = 0.1
    # regression: a fixed "model" and a calibration set
    rng = np.random.default_rng(100)
    x_cal = torch.tensor(rng.uniform(-2, 2, 60).astype(np.float32))
    y_cal = torch.sin(x_cal) + torch.tensor(arr(101, 60, scale=0.3))
    x_te = torch.tensor(rng.uniform(-2, 2, 40).astype(np.float32))
    y_te = torch.sin(x_te) + torch.tensor(arr(102, 40, scale=0.3))
    predict = lambda t: 0.9 * torch.sin(t) + 0.05  # noqa: E731
    n = x_cal.numel()
    scores = (y_cal - predict(x_cal)).abs()
    q_level = math.ceil((n + 1) * (1 - alpha)) / n
    qhat = torch.quantile(scores, q_level, interpolation="higher")
    lo, hi = predict(x_te) - qhat, predict(x_te) + qhat
    coverage = ((y_te >= lo) & (y_te <= hi)).float().mean()
    # classification: LAC and APS
    logits = torch.tensor(arr(103, 80, 6, scale=1.5))
    labels = torch.tensor(ints(104, 6, 80))
    logits[torch.arange(80), labels] += 1.0
    smx = logits.softmax(dim=1)
    cal, val = smx[:50], smx[50:]
    cal_labels, val_labels = labels[:50], labels[50:]
    n = 50
    cal_scores = 1 - cal[torch.arange(n), cal_labels]
    q_level = math.ceil((n + 1) * (1 - alpha)) / n
    qhat_lac = torch.quantile(cal_scores, q_level, interpolation="higher")
    lac_sets = val >= (1 - qhat_lac)
    cal_pi = cal.argsort(1, descending=True)
    cal_srt = cal.gather(1, cal_pi).cumsum(dim=1)
    aps_scores = cal_srt.gather(1, cal_pi.argsort(1))[torch.arange(n), cal_labels]
    qhat_aps = torch.quantile(aps_scores, q_level, interpolation="higher")
    val_pi = val.argsort(1, descending=True)
    val_srt = val.gather(1, val_pi).cumsum(dim=1)
    aps_sets = torch.zeros_like(val, dtype=torch.bool).scatter(1, val_pi, val_srt <= qhat_aps)
    # CQR: quantile heads trained with the pinball loss, then conformalised
    quantiles = torch.tensor([alpha / 2, 1 - alpha / 2])
    net = set_weights(torch, nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 2)), seed=105)
    opt = torch.optim.Adam(net.parameters(), lr=0.03)
    pinball = []
    x_tr = torch.linspace(-2, 2, 50)[:, None]
    y_tr = torch.sin(x_tr) + torch.tensor(arr(106, 50, 1, scale=0.3))
    for _ in range(8):
        err = y_tr - net(x_tr)
        loss = torch.max((quantiles - 1) * err, quantiles * err).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        pinball.append(loss.item())
    with torch.no_grad():
        q_cal = net(x_cal[:, None])
        cqr_scores = torch.maximum(q_cal[:, 0] - y_cal, y_cal - q_cal[:, 1])
        qhat_cqr = torch.quantile(cqr_scores, math.ceil(61 * (1 - alpha)) / 60,
                                  interpolation="higher")  # fmt: skip
        q_te = net(x_te[:, None])
        cqr_cov = ((y_te >= q_te[:, 0] - qhat_cqr) & (y_te <= q_te[:, 1] + qhat_cqr)).float()
    return {"qhat": qhat, "coverage": coverage, "width": (hi - lo).mean(),
            "qhat_lac": qhat_lac, "lac_sets": lac_sets, "lac_sizes": lac_sets.sum(1),
            "lac_coverage": lac_sets[torch.arange(30), val_labels].float().mean(),
            "qhat_aps": qhat_aps, "aps_sets": aps_sets, "aps_sizes": aps_sets.sum(1),
            "pinball": pinball, "qhat_cqr": qhat_cqr, "cqr_coverage": cqr_cov.mean(),
            "q_level": q_level}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def heteroscedastic_gaussian_nll_variants_and_beta_nll(torch):
    # heteroscedastic regression losses: F.gaussian_nll_loss with full/eps/reductions and a
    # homoscedastic (N, 1) variance broadcast over a multi-output target, nn.GaussianNLLLoss,
    # agreement with Normal.log_prob, and Seitzer et al.'s beta-NLL (per-sample NLL weighted by
    # the detached variance^beta) training a mean/log-variance network
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    mu = torch.tensor(arr(110, 8, 2))
    target = torch.tensor(arr(111, 8, 2))
    var = torch.tensor(_unif(112, 8, 2, low=0.05, high=2.0))
    var_hom = torch.tensor(_unif(113, 8, 1, low=0.5, high=1.5))
    tiny = var.clone()
    tiny[0, 0] = 1e-9
    out = {
        "mean": F.gaussian_nll_loss(mu, target, var),
        "full": F.gaussian_nll_loss(mu, target, var, full=True),
        "sum": F.gaussian_nll_loss(mu, target, var, reduction="sum"),
        "none": F.gaussian_nll_loss(mu, target, var, reduction="none"),
        "homoscedastic": F.gaussian_nll_loss(mu, target, var_hom, reduction="none"),
        "clamped": F.gaussian_nll_loss(mu, target, tiny, eps=1e-4, reduction="none"),
        "module": nn.GaussianNLLLoss(full=True, eps=1e-6)(mu, target, var),
        "normal_log_prob": -D.Normal(mu, var.sqrt()).log_prob(target).mean(),
        # an image model predicting one variance per pixel shared by the channels
        "per_pixel": F.gaussian_nll_loss(
            torch.tensor(arr(116, 2, 3, 4, 4)),
            torch.tensor(arr(117, 2, 3, 4, 4)),
            torch.tensor(_unif(118, 2, 1, 4, 4, low=0.2, high=1.0)),
            reduction="none",
        ),
    }
    xs = np.linspace(-3, 3, 30, dtype=np.float32)[:, None]
    ys = np.sin(xs) * (1 + 0.5 * np.abs(xs)) + 0.2 * np.abs(xs) * arr(114, 30, 1)
    x, y = torch.tensor(xs), torch.tensor(ys.astype(np.float32))
    model = set_weights(torch, nn.Sequential(nn.Linear(1, 24), nn.SiLU(), nn.Linear(24, 2)),
                        seed=115)  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    beta, losses = 0.5, []
    for _ in range(6):
        mean, logvar = model(x).chunk(2, dim=-1)
        variance = logvar.exp()
        nll = F.gaussian_nll_loss(mean, y, variance, reduction="none")
        loss = (nll * variance.detach() ** beta).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    var.requires_grad_(True)
    mu.requires_grad_(True)
    F.gaussian_nll_loss(mu, target, var, full=True).backward()
    out.update({"beta_nll_losses": losses, "params": params(model), "grad_var": var.grad,
                "grad_mu": mu.grad, "repr": repr(nn.GaussianNLLLoss(eps=1e-3))})  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def prior_network_dirichlet_reverse_kl_and_uncertainty_measures(torch):
    # Malinin & Gales' prior networks: exp(logits) are Dirichlet concentrations; in-domain
    # targets are sharp Dirichlets (precision 100, label-smoothed mean), out-of-distribution
    # targets the flat Dir(1); trained with the reverse KL(Dir(pred) || Dir(target)) via
    # torch.distributions; then total/expected/knowledge uncertainty (mutual information),
    # differential entropy and the max-probability confidence for in- vs out-of-domain inputs
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    K = 4
    model = set_weights(torch, nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, K)),
                        seed=120)  # fmt: skip
    centers = np.array([[2, 2], [-2, 2], [-2, -2], [2, -2]], dtype=np.float32)
    y_in = ints(121, K, 32)
    x_in = torch.tensor(centers[y_in] + arr(122, 32, 2, scale=0.5))
    x_ood = torch.tensor(arr(123, 16, 2, scale=6.0))
    y_in = torch.tensor(y_in)
    smoothing, precision = 0.01, 100.0
    target_mean = F.one_hot(y_in, K).float() * (1 - K * smoothing) + smoothing
    target_in = target_mean * precision
    target_ood = torch.ones(16, K)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(6):
        alpha_in = torch.exp(model(x_in).clamp(max=10.0))
        alpha_ood = torch.exp(model(x_ood).clamp(max=10.0))
        loss_in = D.kl_divergence(D.Dirichlet(alpha_in), D.Dirichlet(target_in)).mean()
        loss_ood = D.kl_divergence(D.Dirichlet(alpha_ood), D.Dirichlet(target_ood)).mean()
        loss = loss_in + loss_ood
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([loss_in.item(), loss_ood.item()])

    def measures(alpha):
        alpha0 = alpha.sum(-1, keepdim=True)
        probs = alpha / alpha0
        total = -(probs * torch.log(probs)).sum(-1)
        expected = -(probs * (torch.digamma(alpha + 1) - torch.digamma(alpha0 + 1))).sum(-1)
        return {"total": total, "expected": expected, "mutual_info": total - expected,
                "diff_entropy": D.Dirichlet(alpha).entropy(), "max_prob": probs.max(-1).values,
                "precision": alpha0.squeeze(-1)}  # fmt: skip

    with torch.no_grad():
        a_in, a_ood = torch.exp(model(x_in)), torch.exp(model(x_ood))
        m_in, m_ood = measures(a_in), measures(a_ood)
        dirichlet = D.Dirichlet(a_in[:3])
    return {"losses": losses, "in": m_in, "ood": m_ood, "dir_mean": dirichlet.mean,
            "dir_var": dirichlet.variance, "dir_log_prob": dirichlet.log_prob(dirichlet.mean),
            "grads": grads(model)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # float32 Cholesky/log-det of a 27x27 precision: ~1e-4 drift
def full_ggn_laplace_via_jacrev_kfac_and_linearised_predictive(torch):
    # a full-network Laplace approximation the torch.func way: per-sample Jacobians of the logits
    # w.r.t. all parameters with vmap(jacrev(functional_call)), the full GGN J^T (diag(p) - pp^T) J,
    # the posterior covariance from a Cholesky factor (cholesky_inverse), the log-determinant,
    # a KFAC approximation of the last layer (A = E[a a^T], G = E[Lambda], kron and eigh), and the
    # linearised (GLM) predictive f_mu +- J Sigma J^T with a MultivariateNormal over the logits
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    func = torch.func
    model = set_weights(torch, nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3)), seed=130)
    x, y = torch.tensor(arr(131, 24, 2)), torch.tensor(ints(132, 3, 24))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    for _ in range(5):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    names = [n for n, _ in model.named_parameters()]
    theta = {n: p.detach() for n, p in model.named_parameters()}

    def f(p, xi):
        return func.functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0)

    jac = func.vmap(func.jacrev(f), in_dims=(None, 0))(theta, x)  # name -> (N, C, *shape)
    J = torch.cat([jac[n].flatten(2) for n in names], dim=2)  # (N, C, P)
    with torch.no_grad():
        probs = F.softmax(model(x), dim=-1)
        Lam = torch.diag_embed(probs) - probs.unsqueeze(-1) * probs.unsqueeze(-2)
        ggn = torch.einsum("ncp,ncd,ndq->pq", J, Lam, J)
        prior_prec = 1.0
        P = ggn + prior_prec * torch.eye(ggn.shape[0])
        L = torch.linalg.cholesky(P)
        Sigma = torch.cholesky_inverse(L)
        logdet = 2 * torch.log(torch.diagonal(L)).sum()
        sign, slogdet = torch.linalg.slogdet(P)
        a = torch.cat([torch.tanh(model[0](x)), torch.ones(24, 1)], dim=1)  # (N, H+1)
        A = a.T @ a / 24
        G = Lam.mean(0)
        eig_a, Q_a = torch.linalg.eigh(A)
        eig_g, Q_g = torch.linalg.eigh(G)
        kfac_diag = torch.kron(eig_g, eig_a)  # eigenvalues of G (x) A
        x_test = torch.tensor(arr(133, 4, 2, scale=2.0))
    # the Hessian Laplace needs a positive-definite H + prior: checked with cholesky_ex over a
    # grid of prior precisions, then GPyTorch's psd_safe_cholesky jitter loop on the smallest

    def total_loss(flat):
        chunks = torch.split(flat, [theta[n].numel() for n in names])
        p = {n: c.view(theta[n].shape) for n, c in zip(names, chunks)}
        return F.cross_entropy(func.functional_call(model, p, (x,)), y, reduction="sum")

    flat = torch.cat([theta[n].flatten() for n in names])
    H = func.hessian(total_loss)(flat)
    with torch.no_grad():
        precs = torch.tensor([1e-3, 1e-2, 0.1, 1.0, 10.0])
        eye = torch.eye(H.shape[0])
        _, infos = torch.linalg.cholesky_ex(H + precs[:, None, None] * eye)
        usable = precs[infos == 0]
        L_h, info = torch.linalg.cholesky_ex(H + precs[0] * eye)
        A_h, jitter, prev, tries = H + precs[0] * eye, 1e-2, 0.0, 0
        while torch.any(info) and tries < 6:
            new = jitter * 10**tries
            A_h.diagonal(dim1=-2, dim2=-1).add_(new - prev)
            prev, tries = new, tries + 1
            L_h, info = torch.linalg.cholesky_ex(A_h)
    J_test = func.vmap(func.jacrev(f), in_dims=(None, 0))(theta, x_test)
    with torch.no_grad():
        Jt = torch.cat([J_test[n].flatten(2) for n in names], dim=2)
        f_mu = model(x_test)
        f_var = torch.einsum("ncp,pq,ndq->ncd", Jt, Sigma, Jt)
        f_var = 0.5 * (f_var + f_var.transpose(-1, -2)) + 1e-6 * torch.eye(3)
        mvn = D.MultivariateNormal(f_mu, covariance_matrix=f_var)
        kappa = 1 / torch.sqrt(1 + math.pi / 8 * torch.diagonal(f_var, dim1=-2, dim2=-1))
    return {"J_shape": list(J.shape), "ggn_diag": torch.diagonal(ggn), "ggn_trace": ggn.trace(),
            "Sigma_diag": torch.diagonal(Sigma), "logdet": logdet, "slogdet": slogdet,
            "sign": sign, "A": A, "G": G, "kfac_eigs": kfac_diag, "f_mu": f_mu, "f_var": f_var,
            "mvn_log_prob": mvn.log_prob(f_mu + 0.1), "mvn_entropy": mvn.entropy(),
            "probit": F.softmax(kappa * f_mu, dim=-1), "hessian_min_eig": torch.linalg.eigvalsh(H)[0],
            "failed": infos > 0, "usable_precs": usable, "jitter_tries": tries,
            "jitter_added": prev, "L_h_diag": torch.diagonal(L_h)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bayesian_conv_local_reparam_flipout_and_parametrized_sigma(torch):
    # Bayesian convolutional layers: sigma = softplus(rho) registered as a parametrization
    # (nn.utils.parametrize), the local reparameterisation for conv (mean conv2d plus noise times
    # sqrt(conv2d(x^2, sigma^2))), Flipout's pseudo-independent perturbations with fixed sign
    # tensors for a Linear head, and the KL to the prior from torch.distributions Normals
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    parametrize = torch.nn.utils.parametrize

    class Softplus(nn.Module):
        def forward(self, rho):
            return F.softplus(rho)

        def right_inverse(self, sigma):
            return torch.log(torch.expm1(sigma))

    class BayesConv2d(nn.Module):
        def __init__(self, cin, cout, k, seed):
            super().__init__()
            self.mu = nn.Parameter(torch.tensor(arr(seed, cout, cin, k, k, scale=0.3)))
            self.sigma = nn.Parameter(torch.full((cout, cin, k, k), 0.01))
            parametrize.register_parametrization(self, "sigma", Softplus())

        def forward(self, x, eps):
            mean = F.conv2d(x, self.mu, padding=1)
            var = F.conv2d(x * x, self.sigma**2, padding=1)
            return mean + torch.sqrt(var + 1e-8) * eps

        def kl(self):
            q, prior = D.Normal(self.mu, self.sigma), D.Normal(0.0, 0.1)
            return D.kl_divergence(q, prior).sum()

    class FlipoutLinear(nn.Module):
        def __init__(self, fin, fout, seed):
            super().__init__()
            self.mu = nn.Parameter(torch.tensor(arr(seed, fout, fin, scale=0.2)))
            self.rho = nn.Parameter(torch.full((fout, fin), -4.0))
            self.bias = nn.Parameter(torch.zeros(fout))

        def forward(self, x, eps_w, sign_in, sign_out):
            delta_w = F.softplus(self.rho) * eps_w  # one weight perturbation shared by the batch
            return F.linear(x, self.mu, self.bias) + F.linear(x * sign_in, delta_w) * sign_out

        def kl(self):
            return D.kl_divergence(
                D.Normal(self.mu, F.softplus(self.rho)), D.Normal(0.0, 0.1)
            ).sum()

    conv = BayesConv2d(1, 4, 3, seed=140)
    head = FlipoutLinear(4 * 4 * 4, 2, seed=141)
    model = nn.ModuleList([conv, head])
    x = torch.tensor(arr(142, 8, 1, 8, 8))
    y = torch.tensor(ints(143, 2, 8))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(144)
    losses = []
    for step in range(4):
        eps = torch.tensor(arr(150 + step, 8, 4, 8, 8))
        h = F.max_pool2d(F.relu(conv(x, eps)), 2).flatten(1)
        sign_in = torch.tensor(rng.choice([-1.0, 1.0], (8, 64)).astype(np.float32))
        sign_out = torch.tensor(rng.choice([-1.0, 1.0], (8, 2)).astype(np.float32))
        logits = head(h, torch.tensor(arr(160 + step, 2, 64)), sign_in, sign_out)
        kl = conv.kl() + head.kl()
        loss = F.cross_entropy(logits, y) + kl / 1000
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append([loss.item(), kl.item()])
    return {"losses": losses, "sigma": conv.sigma.detach(),
            "rho_original": conv.parametrizations.sigma.original.detach(),
            "grads_mu": conv.mu.grad, "head_rho_grad": head.rho.grad, "head_mu": head.mu.detach(),
            "param_names": [n for n, _ in model.named_parameters()],
            "is_parametrized": parametrize.is_parametrized(conv, "sigma")}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sngp_random_feature_gp_head_with_laplace_precision(torch):
    # Liu et al.'s SNGP: a residual MLP whose hidden weights are spectrally normalised by power
    # iteration (fixed starting vector), a random-Fourier-feature GP output layer
    # (sqrt(2/D) cos(W h + b) with fixed W, b), the precision matrix accumulated over the final
    # epoch as I + sum p(1-p) phi phi^T, the covariance by inversion, and the mean-field
    # logit adjustment logits / sqrt(1 + pi/8 var) for predictive uncertainty
    nn, F = torch.nn, torch.nn.functional
    num_features, hidden, K = 32, 8, 2

    def spectral_normalize(w, u, n_power_iterations=3, c=0.95):
        with torch.no_grad():
            for _ in range(n_power_iterations):
                v = F.normalize(w.T @ u, dim=0)
                u = F.normalize(w @ v, dim=0)
        sigma = torch.dot(u, w @ v)
        return w * torch.clamp(c / sigma, max=1.0), sigma, u

    class SNGP(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(2, hidden)
            self.res = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(2)])
            self.register_buffer("rff_w", torch.tensor(arr(170, num_features, hidden)))
            self.register_buffer("rff_b", torch.tensor(_unif(171, num_features, high=2 * math.pi)))
            self.register_buffer("u", torch.tensor(arr(172, 2, hidden)))
            self.beta = nn.Linear(num_features, K, bias=False)

        def features(self, x):
            h = self.inp(x)
            sigmas = []
            for i, layer in enumerate(self.res):
                w, s, u = spectral_normalize(layer.weight, self.u[i])
                self.u[i] = u
                sigmas.append(s)
                h = h + F.relu(F.linear(h, w, layer.bias))
            phi = math.sqrt(2.0 / num_features) * torch.cos(F.linear(h, self.rff_w, self.rff_b))
            return phi, torch.stack(sigmas)

        def forward(self, x):
            phi, s = self.features(x)
            return self.beta(phi), phi, s

    model = set_weights(torch, SNGP(), seed=173)
    x = torch.tensor(np.concatenate([arr(174, 20, 2, scale=0.5) + 1.5,
                                     arr(175, 20, 2, scale=0.5) - 1.5]))  # fmt: skip
    y = torch.tensor(np.repeat([0, 1], 20))
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-4)
    losses, spectra = [], []
    for _ in range(5):
        precision = torch.eye(num_features)
        logits, phi, s = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        spectra.append(s.detach())
        with torch.no_grad():
            p = F.softmax(logits, -1).max(-1).values
            precision = precision + (phi * (p * (1 - p)).unsqueeze(-1)).T @ phi
    with torch.no_grad():
        covariance = torch.linalg.inv(precision)
        x_test = torch.tensor([[1.5, 1.5], [-1.5, -1.5], [0.0, 0.0], [6.0, -6.0]])
        logits, phi, _ = model(x_test)
        var = torch.einsum("nf,fg,ng->n", phi, covariance, phi)
        adjusted = logits / torch.sqrt(1.0 + math.pi / 8 * var).unsqueeze(-1)
        probs = F.softmax(adjusted, dim=-1)
    return {"losses": losses, "spectra": spectra, "u": model.u, "precision_diag":
            torch.diagonal(precision), "var": var, "probs": probs,
            "uncertainty": 1 - probs.max(-1).values, "beta": model.beta.weight}  # fmt: skip
