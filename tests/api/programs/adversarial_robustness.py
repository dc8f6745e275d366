"""Adversarial robustness and attribution as foolbox, advertorch, torchattacks and captum write
them: FGSM (untargeted, targeted, momentum-iterative), L-inf and L2 PGD with random starts and
restarts, the TRADES KL objective, Carlini-Wagner in tanh space, Madry-style adversarial
training, saliency with guided backprop hooks, integrated gradients with Riemann sums, SmoothGrad
and VarGrad, occlusion, interval bound propagation with an elided specification, DeepFool, and the
certified radius of randomized smoothing. Random starts and noise come from NumPy."""

# The reference implementations' own spelling: DeepFool's and auto_LiRPA's ``I``, torchattacks'
# ``torch.ones((len(images)))``.
# ruff: noqa: E741, UP034

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _small_cnn(torch, seed: int, num_classes: int = 5, bn: bool = False):
    """The small conv net the attacks are run against (1x6x6 images in ``[0, 1]``, normalised
    inside the model by registered buffers as robustness benchmarks do)."""
    nn, F = torch.nn, torch.nn.functional

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.5]).view(1, 1, 1, 1))
            self.register_buffer("std", torch.tensor([0.25]).view(1, 1, 1, 1))
            self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4) if bn else nn.Identity()
            self.conv2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
            self.fc = nn.Linear(8 * 3 * 3, num_classes)

        def forward(self, x):
            x = (x - self.mean) / self.std
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.conv2(x))
            return self.fc(torch.flatten(x, 1))

    return set_weights(torch, SmallCNN(), seed=seed, scale=0.4)


@program
def fgsm_targeted_untargeted_and_momentum_iterative(torch):
    """advertorch's ``GradientSignAttack`` (``torch.autograd.grad`` of the cross entropy, signed,
    added with ``eps`` and clamped to ``[0, 1]``) swept over epsilons, its targeted variant
    (the loss negated, target ``(y + 1) % K``), and torchattacks' MI-FGSM (the gradient divided by
    its mean absolute value per example, accumulated with ``decay`` into a momentum)."""
    F = torch.nn.functional
    model = _small_cnn(torch, seed=1).eval()
    x = torch.tensor(_uniform(2, 8, 1, 6, 6))
    y = torch.tensor(ints(3, 5, 8))

    def fgsm(model, x, y, eps, targeted=False):
        x_adv = x.clone().detach().requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        if targeted:
            loss = -loss
        (grad,) = torch.autograd.grad(loss, [x_adv])
        x_adv = x_adv + eps * grad.sign()
        return torch.clamp(x_adv, 0.0, 1.0).detach()

    accs, deltas = [], []
    for eps in [0.0, 0.05, 0.1, 0.2]:
        x_adv = fgsm(model, x, y, eps)
        with torch.no_grad():
            accs.append((model(x_adv).argmax(dim=1) == y).float().mean().item())
        deltas.append((x_adv - x).abs().max().item())
    target = (y + 1) % 5
    x_tgt = fgsm(model, x, target, 0.15, targeted=True)
    with torch.no_grad():
        tgt_logits = model(x_tgt)
    success = (tgt_logits.argmax(1) == target).sum().item()

    eps, alpha, steps, decay = 0.1, 0.03, 5, 1.0
    loss_fn = torch.nn.CrossEntropyLoss()
    momentum = torch.zeros_like(x).detach()
    adv = x.clone().detach()
    mi_losses = []
    for _ in range(steps):
        adv.requires_grad = True
        cost = loss_fn(model(adv), y)
        grad = torch.autograd.grad(cost, adv, retain_graph=False, create_graph=False)[0]
        grad = grad / torch.mean(torch.abs(grad), dim=(1, 2, 3), keepdim=True)
        grad = grad + momentum * decay
        momentum = grad
        adv = adv.detach() + alpha * grad.sign()
        delta = torch.clamp(adv - x, min=-eps, max=eps)
        adv = torch.clamp(x + delta, min=0, max=1).detach()
        mi_losses.append(cost.item())
    return {"accs": accs, "deltas": deltas, "x_tgt": x_tgt, "tgt_logits": tgt_logits,
            "success": success, "mi_adv": adv, "mi_momentum": momentum,
            "mi_losses": mi_losses, "requires_grad": adv.requires_grad}  # fmt: skip


@program
def pgd_linf_random_start_with_restarts(torch):
    """advertorch's ``perturb_iterative``: ``delta`` starts uniform in the eps-ball (NumPy noise
    in place of ``delta.data.uniform_``), ``delta.data = batch_clamp(eps, delta.data + alpha *
    grad_sign)`` then clamped so ``x + delta`` stays in ``[0, 1]``; two restarts keep, per
    example, the perturbation with the larger unreduced loss (``reduction='none'``)."""
    nn = torch.nn
    model = _small_cnn(torch, seed=4).eval()
    x = torch.tensor(_uniform(5, 6, 1, 6, 6))
    y = torch.tensor(ints(6, 5, 6))
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    per_example = nn.CrossEntropyLoss(reduction="none")
    eps, alpha, nb_iter = 0.12, 0.04, 6

    def perturb_iterative(x, y, delta):
        delta.requires_grad_()
        losses = []
        for _ in range(nb_iter):
            outputs = model(x + delta)
            loss = loss_fn(outputs, y)
            loss.backward()
            grad_sign = delta.grad.data.sign()
            delta.data = delta.data + alpha * grad_sign
            delta.data = torch.clamp(delta.data, min=-eps, max=eps)
            delta.data = torch.clamp(x.data + delta.data, 0.0, 1.0) - x.data
            delta.grad.data.zero_()
            losses.append(loss.item())
        x_adv = torch.clamp(x + delta, 0.0, 1.0)
        return x_adv.detach(), losses

    best_adv, best_loss, all_losses = x.clone(), torch.full((6,), -float("inf")), []
    for restart in range(2):
        delta = torch.zeros_like(x)
        delta.data = torch.tensor(_uniform(10 + restart, 6, 1, 6, 6, low=-eps, high=eps))
        delta.data = torch.clamp(x + delta.data, min=0.0, max=1.0) - x
        x_adv, losses = perturb_iterative(x, y, delta)
        all_losses.append(losses)
        with torch.no_grad():
            loss = per_example(model(x_adv), y)
        better = loss > best_loss
        best_adv[better] = x_adv[better]
        best_loss = torch.where(better, loss, best_loss)
    with torch.no_grad():
        robust = (model(best_adv).argmax(1) == y).sum().item()
    linf = (best_adv - x).flatten(1).norm(p=float("inf"), dim=1)
    return {"best_adv": best_adv, "best_loss": best_loss, "losses": all_losses,
            "robust": robust, "linf": linf, "in_ball": bool((linf <= eps + 1e-6).all()),
            "in_box": bool(((best_adv >= 0) & (best_adv <= 1)).all())}  # fmt: skip


@program
def pgd_l2_normalized_gradient_and_ball_projection(torch):
    """torchattacks' ``PGDL2``: a random start drawn in the L2 ball (normal direction scaled by
    ``r / ||d|| * eps``, from NumPy), steps along the gradient divided by its per-example norm
    (``+ eps_for_division``), projection by ``factor = min(eps / ||delta||, 1)``, and the
    per-step loss and mean perturbation norm."""
    nn = torch.nn
    model = _small_cnn(torch, seed=7).eval()
    images = torch.tensor(_uniform(8, 5, 1, 6, 6))
    labels = torch.tensor(ints(9, 5, 5))
    eps, alpha, steps, eps_for_division = 0.8, 0.25, 5, 1e-10
    loss = nn.CrossEntropyLoss()
    adv_images = images.clone().detach()
    batch_size = len(images)
    delta = torch.tensor(arr(10, 5, 1, 6, 6))
    d_flat = delta.view(adv_images.size(0), -1)
    n = d_flat.norm(p=2, dim=1).view(adv_images.size(0), 1, 1, 1)
    r = torch.tensor(_uniform(11, 5)).view(delta.size(0), 1, 1, 1)
    delta *= r / n * eps
    adv_images = torch.clamp(adv_images + delta, min=0, max=1).detach()
    costs, norms = [], []
    for _ in range(steps):
        adv_images.requires_grad = True
        outputs = model(adv_images)
        cost = loss(outputs, labels)
        grad = torch.autograd.grad(cost, adv_images, retain_graph=False, create_graph=False)[0]
        grad_norms = torch.norm(grad.view(batch_size, -1), p=2, dim=1) + eps_for_division
        grad = grad / grad_norms.view(batch_size, 1, 1, 1)
        adv_images = adv_images.detach() + alpha * grad
        delta = adv_images - images
        delta_norms = torch.norm(delta.view(batch_size, -1), p=2, dim=1)
        factor = eps / delta_norms
        factor = torch.min(factor, torch.ones_like(delta_norms))
        delta = delta * factor.view(-1, 1, 1, 1)
        adv_images = torch.clamp(images + delta, min=0, max=1).detach()
        costs.append(cost.item())
        norms.append((adv_images - images).flatten(1).norm(dim=1).mean().item())
    with torch.no_grad():
        logits = model(adv_images)
    return {"adv": adv_images, "costs": costs, "norms": norms, "logits": logits,
            "pred": logits.argmax(1), "start_r": r.flatten()}  # fmt: skip


@program
def trades_kl_attack_and_training_steps(torch):
    """TRADES (Zhang et al.): the attack maximises ``KLDivLoss(reduction='sum')`` between
    ``log_softmax(model(x_adv))`` and ``softmax(model(x_natural))`` from ``x_natural + 0.001 *
    noise`` with ``torch.min(torch.max(...))`` projection, in ``eval`` mode; the training step in
    ``train`` mode adds ``beta`` times the batch-averaged KL to the natural cross entropy; SGD with
    momentum and weight decay, a BatchNorm in the net."""
    nn, F = torch.nn, torch.nn.functional
    model = _small_cnn(torch, seed=12, bn=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    step_size, epsilon, perturb_steps, beta = 0.03, 0.1, 4, 6.0
    x_all = torch.tensor(_uniform(13, 16, 1, 6, 6))
    y_all = torch.tensor(ints(14, 5, 16))
    logs = []
    for it in range(2):
        x_natural, y = x_all[it * 8 : (it + 1) * 8], y_all[it * 8 : (it + 1) * 8]
        criterion_kl = nn.KLDivLoss(reduction="sum")
        model.eval()
        batch_size = len(x_natural)
        noise = torch.tensor(arr(15 + it, 8, 1, 6, 6))
        x_adv = x_natural.detach() + 0.001 * noise.detach()
        kls = []
        for _ in range(perturb_steps):
            x_adv.requires_grad_()
            with torch.enable_grad():
                loss_kl = criterion_kl(
                    F.log_softmax(model(x_adv), dim=1), F.softmax(model(x_natural), dim=1)
                )
            grad = torch.autograd.grad(loss_kl, [x_adv])[0]
            x_adv = x_adv.detach() + step_size * torch.sign(grad.detach())
            x_adv = torch.min(torch.max(x_adv, x_natural - epsilon), x_natural + epsilon)
            x_adv = torch.clamp(x_adv, 0.0, 1.0)
            kls.append(loss_kl.item())
        model.train()
        x_adv = torch.clamp(x_adv, 0.0, 1.0).detach().requires_grad_(False)
        optimizer.zero_grad()
        logits = model(x_natural)
        loss_natural = F.cross_entropy(logits, y)
        loss_robust = (1.0 / batch_size) * criterion_kl(
            F.log_softmax(model(x_adv), dim=1), F.softmax(model(x_natural), dim=1)
        )
        loss = loss_natural + beta * loss_robust
        loss.backward()
        optimizer.step()
        logs.append({"kls": kls, "natural": loss_natural.item(), "robust": loss_robust.item(),
                     "loss": loss.item(), "x_adv": x_adv})  # fmt: skip
    return {"logs": logs, "params": params(model), "running_mean": model.bn1.running_mean,
            "running_var": model.bn1.running_var,
            "num_batches": model.bn1.num_batches_tracked}  # fmt: skip


@program
def carlini_wagner_l2_tanh_space_adam(torch):
    """Carlini-Wagner L2 as torchattacks writes it: the image mapped to ``w = atanh`` space
    (``torch.atanh(torch.clamp(x * 2 - 1, -1 + 1e-6, 1 - 1e-6))``), Adam on ``w``, the L2 cost
    ``MSELoss(reduction='none')`` summed per example, the margin ``f`` from a one-hot mask
    (``torch.max((1 - one_hot) * outputs, dim=1)[0]`` against the true logit, clamped at
    ``-kappa``), and the best adversarial kept where the prediction changed and the L2 shrank."""
    nn = torch.nn
    model = _small_cnn(torch, seed=16).eval()
    images = torch.tensor(_uniform(17, 4, 1, 6, 6, low=0.05, high=0.95))
    with torch.no_grad():
        labels = model(images).argmax(1)  # attack the model's own (correct) predictions
    c, kappa, steps, lr = 2.0, 0.0, 10, 0.05

    def tanh_space(x):
        return 1 / 2 * (torch.tanh(x) + 1)

    def inverse_tanh_space(x):
        return torch.atanh(torch.clamp(x * 2 - 1, min=-1 + 1e-6, max=1 - 1e-6))

    def f(outputs, labels):
        one_hot_labels = torch.eye(outputs.shape[1])[labels]
        other = torch.max((1 - one_hot_labels) * outputs - one_hot_labels * 1e4, dim=1)[0]
        real = torch.max(one_hot_labels * outputs, dim=1)[0]
        return torch.clamp((real - other), min=-kappa)

    w = inverse_tanh_space(images).detach()
    w.requires_grad = True
    best_adv_images = images.clone().detach()
    best_L2 = 1e10 * torch.ones((len(images)))
    MSELoss = nn.MSELoss(reduction="none")
    Flatten = nn.Flatten()
    optimizer = torch.optim.Adam([w], lr=lr)
    costs, l2s = [], []
    for _ in range(steps):
        adv_images = tanh_space(w)
        current_L2 = MSELoss(Flatten(adv_images), Flatten(images)).sum(dim=1)
        L2_loss = current_L2.sum()
        outputs = model(adv_images)
        f_loss = f(outputs, labels).sum()
        cost = L2_loss + c * f_loss
        optimizer.zero_grad()
        cost.backward()
        optimizer.step()
        pre = torch.argmax(outputs.detach(), 1)
        condition = (pre != labels).float()
        mask = condition * (best_L2 > current_L2.detach())
        best_L2 = mask * current_L2.detach() + (1 - mask) * best_L2
        mask = mask.view([-1] + [1] * (len(images.shape) - 1))
        best_adv_images = mask * adv_images.detach() + (1 - mask) * best_adv_images
        costs.append(cost.item())
        l2s.append(current_L2.detach())
    return {"w": w, "best_adv": best_adv_images, "best_L2": best_L2, "costs": costs,
            "l2s": torch.stack(l2s), "w0": inverse_tanh_space(images),
            "round_trip": tanh_space(inverse_tanh_space(images)) - images}  # fmt: skip


@program
def madry_adversarial_training_with_multistep_lr(torch):
    """Madry-style adversarial training: each batch attacked with a 3-step L-inf PGD (random
    start from NumPy) in ``eval`` mode, then a ``train``-mode SGD step on the adversarial batch
    with a BatchNorm2d net, ``MultiStepLR`` per epoch; clean and robust accuracy per epoch
    evaluated under ``torch.no_grad()`` on a held-out set."""
    nn, F = torch.nn, torch.nn.functional
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    model = _small_cnn(torch, seed=19, bn=True)
    train = TensorDataset(torch.tensor(_uniform(20, 16, 1, 6, 6)), torch.tensor(ints(21, 5, 16)))
    test_x, test_y = torch.tensor(_uniform(22, 8, 1, 6, 6)), torch.tensor(ints(23, 5, 8))
    loader = DataLoader(train, batch_size=8, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)
    eps, alpha = 0.1, 0.04

    def pgd(model, X, y, seed, steps=3):
        delta = torch.tensor(_uniform(seed, *X.shape, low=-eps, high=eps))
        delta.requires_grad = True
        for _ in range(steps):
            loss = F.cross_entropy(model(X + delta), y)
            loss.backward()
            delta.data = (delta + alpha * delta.grad.detach().sign()).clamp(-eps, eps)
            delta.data = (X + delta.data).clamp(0, 1) - X
            delta.grad.zero_()
        return delta.detach()

    history = []
    for epoch in range(4):
        train_loss, n = 0.0, 0
        for i, (X, y) in enumerate(loader):
            model.eval()
            delta = pgd(model, X, y, seed=100 + 10 * epoch + i)
            model.train()
            yp = model(X + delta)
            loss = nn.CrossEntropyLoss()(yp, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss += loss.item() * X.shape[0]
            n += X.shape[0]
        scheduler.step()
        model.eval()
        delta = pgd(model, test_x, test_y, seed=200 + epoch)
        with torch.no_grad():
            clean = (model(test_x).argmax(1) == test_y).float().mean()
            robust = (model(test_x + delta).argmax(1) == test_y).float().mean()
        history.append({"train_loss": train_loss / n, "clean": clean.item(),
                        "robust": robust.item(), "lr": scheduler.get_last_lr()[0]})  # fmt: skip
    return {"history": history, "params": params(model), "grads": grads(model),
            "running_var": model.bn1.running_var}  # fmt: skip


@program
def saliency_input_x_gradient_and_guided_backprop_hooks(torch):
    """captum's ``Saliency`` (the absolute gradient of the target logit gathered with
    ``torch.gather``), ``InputXGradient``, and ``GuidedBackprop``/``Deconvolution`` done as captum
    does, with ``register_full_backward_hook`` on every ``nn.ReLU`` returning ``F.relu`` of the
    incoming gradient (and a forward hook for deconvolution's swap); hooks removed afterwards."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 3, 3, padding=1)
            self.relu1 = nn.ReLU()
            self.fc1 = nn.Linear(3 * 6 * 6, 16)
            self.relu2 = nn.ReLU()
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            x = self.relu1(self.conv(x))
            x = self.relu2(self.fc1(x.view(x.size(0), -1)))
            return self.fc2(x)

    model = set_weights(torch, Net(), seed=24).eval()
    inputs = torch.tensor(_uniform(25, 3, 1, 6, 6))
    target = torch.tensor([0, 2, 3])

    def gradient_of_target(model, inputs, target):
        inputs = inputs.clone().requires_grad_()
        outputs = model(inputs)
        selected = torch.gather(outputs, 1, target.reshape(len(outputs), 1))
        return torch.autograd.grad(torch.unbind(selected), inputs)[0], outputs

    g, outputs = gradient_of_target(model, inputs, target)
    saliency = g.abs()
    saliency_map = saliency.max(dim=1)[0]
    input_x_grad = inputs * g

    def guided_hook(module, grad_input, grad_output):
        return (F.relu(grad_input[0]),)

    handles = [m.register_full_backward_hook(guided_hook) for m in model.modules()
               if isinstance(m, nn.ReLU)]  # fmt: skip
    guided, _ = gradient_of_target(model, inputs, target)
    for h in handles:
        h.remove()

    def deconv_hook(module, grad_input, grad_output):
        return (F.relu(grad_output[0]),)

    handles = [m.register_full_backward_hook(deconv_hook) for m in model.modules()
               if isinstance(m, nn.ReLU)]  # fmt: skip
    deconv, _ = gradient_of_target(model, inputs, target)
    for h in handles:
        h.remove()
    plain_again, _ = gradient_of_target(model, inputs, target)
    norm = saliency_map / saliency_map.flatten(1).max(dim=1)[0].view(-1, 1, 1)
    return {"saliency": saliency, "saliency_map": saliency_map, "input_x_grad": input_x_grad,
            "guided": guided, "deconv": deconv, "outputs": outputs, "normalized": norm,
            "hooks_removed": bool(torch.equal(plain_again, g)),
            "guided_nonneg_frac": (guided >= 0).float().mean()}  # fmt: skip


@program
def integrated_gradients_riemann_rules_and_convergence_delta(torch):
    """captum's ``IntegratedGradients``: step sizes and alphas for ``riemann_left``, ``_right``,
    ``_middle``, ``_trapezoid`` and Gauss-Legendre (NumPy's ``leggauss``), scaled inputs
    ``baseline + alpha * (input - baseline)`` concatenated into one batch, the target logit's
    gradient reshaped to ``(n_steps, batch, ...)`` and summed with the step sizes, times
    ``input - baseline``; the convergence delta ``attr.sum() - (f(x) - f(baseline))``."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(6, 10), nn.Softplus(), nn.Linear(10, 8),
                                             nn.Tanh(), nn.Linear(8, 3)), seed=26)  # fmt: skip
    model.eval()
    inputs = torch.tensor(arr(27, 4, 6))
    baselines = torch.zeros_like(inputs)
    target = torch.tensor([0, 1, 2, 1])
    n_steps = 16

    def step_sizes_and_alphas(method, n):
        if method == "riemann_trapezoid":
            step_sizes = [1 / (2 * (n - 1))] + [1 / (n - 1)] * (n - 2) + [1 / (2 * (n - 1))]
            alphas = list(np.linspace(0, 1, n))
        elif method == "gausslegendre":
            x, w = np.polynomial.legendre.leggauss(n)
            return list(0.5 * w), list(0.5 * (x + 1))
        else:
            step_sizes = [1 / n] * n
            start = {"riemann_left": 0.0, "riemann_right": 1 / n, "riemann_middle": 0.5 / n}
            alphas = list(np.linspace(start[method], 1 - 1 / n + start[method], n))
        return step_sizes, alphas

    def forward_target(x):
        out = model(x)
        return torch.gather(out, 1, target.repeat(x.shape[0] // len(target)).unsqueeze(1))[:, 0]

    def attribute(method):
        step_sizes, alphas = step_sizes_and_alphas(method, n_steps)
        scaled = torch.cat([baselines + alpha * (inputs - baselines) for alpha in alphas], dim=0)
        scaled.requires_grad_()
        out = forward_target(scaled)
        grads_ = torch.autograd.grad(out.sum(), scaled)[0]
        scaled_grads = grads_.contiguous().view(n_steps, -1) * torch.tensor(
            step_sizes, dtype=torch.float32
        ).view(n_steps, 1)
        total = scaled_grads.reshape((n_steps,) + inputs.shape).sum(dim=0)
        attributions = total * (inputs - baselines)
        with torch.no_grad():
            delta = attributions.sum(dim=1) - (forward_target(inputs) - forward_target(baselines))
        return attributions, delta

    results = {}
    for method in ["riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid",
                   "gausslegendre"]:  # fmt: skip
        attr, delta = attribute(method)
        results[method] = {"attr": attr, "delta": delta}
    return {"results": results,
            "abs_delta": torch.stack([r["delta"].abs().max() for r in results.values()])}  # fmt: skip


@program
def smoothgrad_sq_and_vargrad_fixed_noise(torch):
    """captum's ``NoiseTunnel`` around ``Saliency``: each input repeated ``nt_samples`` times with
    ``repeat_interleave``, Gaussian noise (NumPy, ``stdevs`` scaled by the input range as in
    SmoothGrad's ``noise level``), gradients of the target logit, then the mean (SmoothGrad), the
    mean of squares (SmoothGrad-Sq) and the variance (VarGrad); the noiseless gradient for
    comparison."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.ReLU(),
                                             nn.Linear(12, 4)), seed=28).eval()  # fmt: skip
    inputs = torch.tensor(_uniform(29, 3, 1, 4, 4))
    target = torch.tensor([1, 3, 0])
    nt_samples, noise_level = 10, 0.15
    stdevs = noise_level * (inputs.amax(dim=(1, 2, 3)) - inputs.amin(dim=(1, 2, 3)))
    expanded = inputs.repeat_interleave(nt_samples, dim=0)
    noise = torch.tensor(arr(30, 3 * nt_samples, 1, 4, 4))
    noisy = expanded + noise * stdevs.repeat_interleave(nt_samples).view(-1, 1, 1, 1)
    noisy.requires_grad_()
    out = model(noisy)
    tgt = target.repeat_interleave(nt_samples)
    picked = out[torch.arange(len(tgt)), tgt]
    (g,) = torch.autograd.grad(picked.sum(), noisy)
    g = g.view(3, nt_samples, *inputs.shape[1:])
    smoothgrad = g.mean(dim=1)
    smoothgrad_sq = (g * g).mean(dim=1)
    vargrad = smoothgrad_sq - smoothgrad**2
    plain = inputs.clone().requires_grad_()
    (g0,) = torch.autograd.grad(model(plain).gather(1, target[:, None]).sum(), plain)
    cos = nn.functional.cosine_similarity(smoothgrad.flatten(1), g0.flatten(1), dim=1)
    return {"stdevs": stdevs, "smoothgrad": smoothgrad, "smoothgrad_sq": smoothgrad_sq,
            "vargrad": vargrad, "var_unbiased": g.var(dim=1), "plain": g0, "cos": cos,
            "abs_smooth": smoothgrad.abs()}  # fmt: skip


@program
def occlusion_sliding_window_attribution(torch):
    """captum's ``Occlusion``: a ``sliding_window_shapes=(1, 2, 2)`` patch of the baseline slid
    with ``strides=(1, 1, 1)``, each occluded copy built with a mask and all of them run as one
    batch, the drop of the target logit spread over the patch and divided by how many windows
    covered each pixel."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(),
                                             nn.Linear(3 * 3 * 3, 4)), seed=31).eval()  # fmt: skip
    inputs = torch.tensor(_uniform(32, 2, 1, 5, 5))
    target = torch.tensor([2, 0])
    window, stride, baseline = 2, 1, 0.0
    H = W = 5
    masks = []
    for i in range(0, H - window + 1, stride):
        for j in range(0, W - window + 1, stride):
            m = torch.zeros(1, H, W)
            m[:, i : i + window, j : j + window] = 1.0
            masks.append(m)
    masks = torch.stack(masks)
    with torch.no_grad():
        base_out = model(inputs)[torch.arange(2), target]
        occluded = inputs.unsqueeze(1) * (1 - masks) + baseline * masks
        occ_out = model(occluded.view(-1, 1, H, W)).view(2, len(masks), -1)
        occ_target = occ_out.gather(2, target.view(2, 1, 1).expand(2, len(masks), 1)).squeeze(2)
        drop = base_out.unsqueeze(1) - occ_target
        total = (drop.view(2, -1, 1, 1, 1) * masks).sum(dim=1)
        counts = masks.sum(dim=0)
        attributions = total / counts
    top = attributions.flatten(1).topk(3, dim=1)
    return {"masks_shape": list(masks.shape), "drop": drop, "counts": counts,
            "attributions": attributions, "top_values": top.values,
            "top_indices": top.indices}  # fmt: skip


@program
def interval_bound_propagation_elided_spec_training(torch):
    """IBP (Gowal et al.): bounds pushed through ``nn.Sequential`` as centre and radius
    (``F.linear(mu, W, b)``, ``r @ W.abs().t()``), ReLU applied to both ends, the last layer
    elided into the specification ``C = e_y - e_k`` built with a boolean mask as auto_LiRPA does,
    the robust cross entropy on ``-lower`` padded with a zero column, an epsilon ramp and a
    ``kappa`` mix with the nominal loss under Adam; sampled points checked to lie in the bounds."""
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(torch, nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12),
                                             nn.ReLU(), nn.Linear(12, 4)), seed=33)  # fmt: skip
    x = torch.tensor(_uniform(34, 10, 8))
    y = torch.tensor(ints(35, 4, 10))
    num_class = 4
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def interval_bounds(layers, lower, upper):
        for layer in layers:
            if isinstance(layer, nn.Linear):
                mu, r = (upper + lower) / 2, (upper - lower) / 2
                mu = F.linear(mu, layer.weight, layer.bias)
                r = r @ layer.weight.abs().t()
                lower, upper = mu - r, mu + r
            elif isinstance(layer, nn.ReLU):
                lower, upper = layer(lower), layer(upper)
            else:
                raise NotImplementedError(type(layer))
        return lower, upper

    def elided_margin_lower(model, x, y, eps):
        lower, upper = interval_bounds(
            list(model)[:-1], (x - eps).clamp(0, 1), (x + eps).clamp(0, 1)
        )
        last = model[-1]
        eye = torch.eye(num_class).type_as(x)
        c = eye[y].unsqueeze(1) - eye.unsqueeze(0)
        I = ~(y.data.unsqueeze(1) == torch.arange(num_class).type_as(y.data).unsqueeze(0))
        c = c[I].view(x.size(0), num_class - 1, num_class)
        W = c.matmul(last.weight)
        b = c.matmul(last.bias)
        mu, r = (upper + lower) / 2, (upper - lower) / 2
        return torch.einsum("bkh,bh->bk", W, mu) + b - torch.einsum("bkh,bh->bk", W.abs(), r)

    logs = []
    steps, eps_max = 5, 0.1
    for step in range(steps):
        eps = eps_max * min(1.0, step / (steps - 2))
        kappa = max(0.5, 1.0 - 0.5 * step / (steps - 2))
        lb = elided_margin_lower(model, x, y, eps)
        lb_padded = torch.cat((torch.zeros(size=(lb.size(0), 1), dtype=lb.dtype), lb), dim=1)
        fake_labels = torch.zeros(size=(lb.size(0),), dtype=torch.int64)
        robust_ce = nn.CrossEntropyLoss()(-lb_padded, fake_labels)
        nominal = F.cross_entropy(model(x), y)
        loss = kappa * nominal + (1 - kappa) * robust_ce
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        verified = (lb > 0).all(dim=1).float().mean()
        logs.append({"eps": eps, "robust_ce": robust_ce.item(), "nominal": nominal.item(),
                     "verified": verified.item()})  # fmt: skip
    with torch.no_grad():
        lower, upper = interval_bounds(model, (x - 0.1).clamp(0, 1), (x + 0.1).clamp(0, 1))
        pts = x.unsqueeze(0) + torch.tensor(_uniform(36, 20, 10, 8, low=-0.1, high=0.1))
        out = model(pts.clamp(0, 1))
        inside = bool(((out >= lower - 1e-5) & (out <= upper + 1e-5)).all())
        margin = elided_margin_lower(model, x, y, 0.1)
    return {"logs": logs, "lower": lower, "upper": upper, "inside": inside, "margin": margin,
            "width": (upper - lower).mean(dim=0), "params": params(model)}  # fmt: skip


@program
def deepfool_multiclass_iterations(torch):
    """DeepFool (Moosavi-Dezfooli et al.) as its reference code writes it, one image at a time:
    classes ranked with ``argsort(descending=True)``, ``fs[0, I[k]].backward(retain_graph=True)``
    into ``x.grad`` zeroed between classes, the closest linearised boundary
    ``|f_k| / ||w_k||``, the step ``(pert + 1e-4) * w / ||w||`` accumulated with
    ``(1 + overshoot)`` until the label flips."""
    model = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(),
                                                   torch.nn.Linear(12, 4)), seed=37)  # fmt: skip
    model.eval()
    images = torch.tensor(arr(38, 4, 6))
    num_classes, overshoot, max_iter = 4, 0.02, 10

    def deepfool(image, net):
        f_image = net.forward(image).data.flatten()
        I = f_image.argsort(descending=True)[:num_classes]
        label = I[0].item()
        input_shape = image.shape
        pert_image = image.clone()
        w = torch.zeros(input_shape)
        r_tot = torch.zeros(input_shape)
        loop_i = 0
        x = pert_image.clone().requires_grad_(True)
        fs = net.forward(x)
        k_i = label
        perts = []
        while k_i == label and loop_i < max_iter:
            pert = math.inf
            fs[0, I[0]].backward(retain_graph=True)
            grad_orig = x.grad.data.clone()
            for k in range(1, num_classes):
                x.grad.zero_()
                fs[0, I[k]].backward(retain_graph=True)
                cur_grad = x.grad.data.clone()
                w_k = cur_grad - grad_orig
                f_k = (fs[0, I[k]] - fs[0, I[0]]).data
                pert_k = abs(f_k) / torch.linalg.norm(w_k.flatten())
                if pert_k < pert:
                    pert = pert_k
                    w = w_k
            r_i = (pert + 1e-4) * w / torch.linalg.norm(w)
            r_tot = r_tot + r_i
            pert_image = image + (1 + overshoot) * r_tot
            x = pert_image.clone().requires_grad_(True)
            fs = net.forward(x)
            k_i = fs.data.argmax().item()
            loop_i += 1
            perts.append(float(pert))
        r_tot = (1 + overshoot) * r_tot
        return r_tot, loop_i, label, k_i, pert_image, perts

    out = {}
    for n in range(len(images)):
        r, loops, label, k_i, pert_image, perts = deepfool(images[n : n + 1], model)
        out[f"img{n}"] = {"r": r, "loops": loops, "label": label, "new_label": k_i,
                          "pert_image": pert_image, "perts": perts,
                          "rho": (r.norm() / images[n].norm()).item()}  # fmt: skip
    return out


@program
def randomized_smoothing_predict_and_certify(torch):
    """Randomized smoothing (Cohen et al.): a base classifier evaluated on Gaussian copies of
    each input (NumPy noise scaled by ``sigma``) in batches, class counts from
    ``bincount(minlength=...)``, a selection round (``n0``) and an estimation round (``n``), the
    lower confidence bound on ``pA`` (Hoeffding), the certified radius ``sigma *
    Normal(0, 1).icdf(pA_lower)`` or abstention, the two-class radius ``sigma / 2 * (ndtri(pA) -
    ndtri(pB))``, ``predict``'s two-sided test on the top two counts, and certified accuracy at
    several radii."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)),
                        seed=39, scale=0.8).eval()  # fmt: skip
    xs = torch.tensor(arr(40, 6, 5, scale=1.5))
    with torch.no_grad():  # the clean predictions as labels, two of them wrong
        labels = model(xs).argmax(1)
    labels[torch.tensor([1, 4])] = (labels[torch.tensor([1, 4])] + 1) % 3
    sigma, n0, n, alpha, batch_size, num_classes = 0.5, 16, 96, 0.001, 32, 3
    ABSTAIN = -1
    normal = torch.distributions.Normal(torch.tensor(0.0), torch.tensor(1.0))

    def sample_noise(x, num, seed):
        with torch.no_grad():
            counts = torch.zeros(num_classes, dtype=torch.long)
            noise_all = arr(seed, num, *x.shape, scale=sigma)
            remaining, start = num, 0
            while remaining > 0:
                this_batch_size = min(batch_size, remaining)
                remaining -= this_batch_size
                batch = x.repeat((this_batch_size, 1))
                noise = torch.tensor(noise_all[start : start + this_batch_size])
                start += this_batch_size
                predictions = model(batch + noise).argmax(1)
                counts += torch.bincount(predictions, minlength=num_classes)
            return counts

    def lower_confidence_bound(nA, N, alpha):
        return nA / N - math.sqrt(math.log(1 / alpha) / (2 * N))

    results = []
    for i, x in enumerate(xs):
        counts_selection = sample_noise(x, n0, seed=100 + i)
        cAHat = counts_selection.argmax().item()
        counts_estimation = sample_noise(x, n, seed=200 + i)
        nA = counts_estimation[cAHat].item()
        pABar = lower_confidence_bound(nA, n, alpha)
        if pABar < 0.5:
            prediction, radius = ABSTAIN, 0.0
        else:
            prediction = cAHat
            radius = sigma * normal.icdf(torch.tensor(pABar)).item()
        top2 = counts_estimation.topk(2)
        count1, count2 = top2.values.tolist()
        z = (count1 - (count1 + count2) / 2) / math.sqrt((count1 + count2) / 4)
        p_value = torch.special.erfc(torch.tensor(abs(z) / math.sqrt(2))).item()
        p = counts_estimation.float() / n
        pA, pB = p.clamp(1e-4, 1 - 1e-4).topk(2).values
        two_class = sigma / 2 * (torch.special.ndtri(pA) - torch.special.ndtri(pB))
        results.append({"counts0": counts_selection, "counts": counts_estimation,
                        "prediction": prediction, "radius": radius, "pABar": pABar,
                        "p_value": p_value, "two_class": two_class,
                        "correct": int(prediction == labels[i].item())})  # fmt: skip
    radii = torch.tensor([r["radius"] for r in results])
    correct = torch.tensor([r["correct"] for r in results], dtype=torch.bool)
    cert_acc = [((radii >= r) & correct).float().mean().item() for r in [0.0, 0.25, 0.5, 0.75]]
    line = "\t".join(f"{r['prediction']}\t{r['radius']:.3f}" for r in results)
    return {"results": results, "cert_acc": cert_acc, "line": line}
