"""Federated learning and differential privacy as their reference code writes them: Flower's
NumPy-parameter FedAvg, FedML's sampled clients and key-by-key state_dict average, FedBN's
local BatchNorm, FedProx's perturbed gradient descent, SCAFFOLD's control variates, FedAdam and
FedYogi server optimisers, DP-FedAvg's clipped client updates; DP-SGD with per-sample gradients
from a microbatch loop, from ``torch.func.vmap(grad(...))`` and from Opacus-style layer hooks,
clipping and Gaussian noise drawn by NumPy; privacy bookkeeping (Gaussian mechanism, advanced
composition, RDP of the subsampled Gaussian); secure aggregation's pairwise masks in fixed point;
top-k sparsification with error feedback, QSGD, TernGrad and signSGD; and client-drift metrics.
Every random draw (data, client sampling, noise, quantisation uniforms) comes from NumPy."""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from functools import reduce

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _normal(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _mlp(torch, sizes, bn=False):
    nn = torch.nn
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            if bn:
                layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _client_data(torch, seed, sizes, d, classes, shift=0.4):
    """Non-IID shards: each client's features shifted and its labels skewed."""
    out = []
    for k, n in enumerate(sizes):
        x = arr(seed + k, n, d) + shift * k
        y = (ints(seed + 50 + k, classes, n) + k) % classes
        out.append((torch.tensor(x), torch.tensor(y)))
    return out


@program(rtol=5e-4, atol=5e-5)  # several clients' local SGD averaged: float32 order
def fedp_flower_numpy_parameters_weighted_fedavg(torch):
    """Flower's PyTorch quickstart: ``get_parameters`` as ``[val.cpu().numpy() for _, val in
    net.state_dict().items()]``, ``set_parameters`` through ``OrderedDict({k: torch.tensor(v)})``
    and ``load_state_dict(strict=True)`` (BatchNorm's running stats and integer counter
    included), ``train``/``test`` loops with ``torch.max(outputs.data, 1)[1]``, and the
    strategy's ``aggregate``: a ``reduce(np.add, ...)`` of the layers weighted by
    ``num_examples``, plus the weighted average of the clients' reported accuracy."""
    nn, F = torch.nn, torch.nn.functional
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(6, 12)
            self.bn1 = nn.BatchNorm1d(12)
            self.fc2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.fc2(F.relu(self.bn1(self.fc1(x))))

    def get_parameters(net):
        return [val.cpu().numpy() for _, val in net.state_dict().items()]

    def set_parameters(net, parameters):
        params_dict = zip(net.state_dict().keys(), parameters)
        state_dict = OrderedDict({k: torch.tensor(v) for k, v in params_dict})
        net.load_state_dict(state_dict, strict=True)

    def train(net, trainloader, epochs):
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        net.train()
        for _ in range(epochs):
            correct, total, epoch_loss = 0, 0, 0.0
            for images, labels in trainloader:
                optimizer.zero_grad()
                outputs = net(images)
                loss = criterion(outputs, labels)
                loss.backward()
                optimizer.step()
                epoch_loss += loss
                total += labels.size(0)
                correct += (torch.max(outputs.data, 1)[1] == labels).sum().item()
            epoch_loss /= len(trainloader.dataset)
        return float(epoch_loss), correct / total

    def test(net, testloader):
        criterion = nn.CrossEntropyLoss()
        correct, total, loss = 0, 0, 0.0
        net.eval()
        with torch.no_grad():
            for images, labels in testloader:
                outputs = net(images)
                loss += criterion(outputs, labels).item()
                _, predicted = torch.max(outputs.data, 1)
                total += labels.size(0)
                correct += (predicted == labels).sum().item()
        return loss / len(testloader.dataset), correct / total

    def aggregate(results):
        num_examples_total = sum(num_examples for (_, num_examples) in results)
        weighted_weights = [[layer * num_examples for layer in weights]
                            for weights, num_examples in results]  # fmt: skip
        return [reduce(np.add, layer_updates) / num_examples_total
                for layer_updates in zip(*weighted_weights)]  # fmt: skip

    shards = _client_data(torch, 200, (12, 20, 16), 6, 3)
    trainloaders = [DataLoader(TensorDataset(x, y), batch_size=8) for x, y in shards]
    valloader = DataLoader(TensorDataset(torch.tensor(arr(210, 10, 6)),
                                         torch.tensor(ints(211, 3, 10))), batch_size=5)  # fmt: skip
    net = set_weights(torch, Net(), seed=201)
    global_parameters = get_parameters(net)
    history = []
    for server_round in range(1, 3):
        results, metrics = [], []
        for trainloader in trainloaders:
            client_net = Net()
            set_parameters(client_net, global_parameters)
            loss, acc = train(client_net, trainloader, epochs=1)
            results.append((get_parameters(client_net), len(trainloader.dataset)))
            metrics.append((len(trainloader.dataset), {"accuracy": acc, "loss": loss}))
        global_parameters = aggregate(results)
        examples = [n for n, _ in metrics]
        accuracy = sum(n * m["accuracy"] for n, m in metrics) / sum(examples)
        set_parameters(net, global_parameters)
        val_loss, val_acc = test(net, valloader)
        history.append(f"round {server_round}: fit accuracy {accuracy:.4f}, val acc {val_acc:.2f}")
        history.append(val_loss)
    return {"history": history, "state": net.state_dict(),
            "dtypes": [str(p.dtype) for p in global_parameters],
            "client_losses": [m["loss"] for _, m in metrics]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # several clients' local SGD averaged: float32 order
def fedp_fedml_sampled_clients_key_by_key_average(torch):
    """FedML's FedAvg API: clients sampled each round with ``np.random.seed(round_idx)`` and
    ``np.random.choice(range(total), num, replace=False)``, each trained on a deep copy of the
    global weights (SGD with weight decay), ``copy.deepcopy(model.cpu().state_dict())`` kept with
    its sample number, and ``_aggregate``'s key-by-key ``averaged_params[k] = local[k] * w`` /
    ``+= local[k] * w``; then a global test of loss and accuracy per round."""
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

    class LogisticRegression(nn.Module):
        def __init__(self, input_dim, output_dim):
            super().__init__()
            self.linear = nn.Linear(input_dim, output_dim)

        def forward(self, x):
            return self.linear(x)

    shards = _client_data(torch, 220, (6, 10, 8, 12, 5), 5, 4, shift=0.3)
    model = set_weights(torch, LogisticRegression(5, 4), seed=221)
    criterion = nn.CrossEntropyLoss()

    def client_sampling(round_idx, client_num_in_total, client_num_per_round):
        np.random.seed(round_idx)
        return np.random.choice(range(client_num_in_total), client_num_per_round, replace=False)

    def local_train(w_global, dataset):
        local = copy.deepcopy(model)
        local.load_state_dict(w_global)
        local.train()
        optimizer = torch.optim.SGD(local.parameters(), lr=0.1, weight_decay=1e-3)
        epoch_loss = []
        for _ in range(2):
            batch_loss = []
            for x, labels in DataLoader(dataset, batch_size=4):
                local.zero_grad()
                loss = criterion(local(x), labels)
                loss.backward()
                optimizer.step()
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss) / len(batch_loss))
        return copy.deepcopy(local.cpu().state_dict()), sum(epoch_loss) / len(epoch_loss)

    def _aggregate(w_locals):
        training_num = sum(sample_num for sample_num, _ in w_locals)
        (sample_num, averaged_params) = w_locals[0]
        for k in averaged_params.keys():
            for i in range(0, len(w_locals)):
                local_sample_number, local_model_params = w_locals[i]
                w = local_sample_number / training_num
                if i == 0:
                    averaged_params[k] = local_model_params[k] * w
                else:
                    averaged_params[k] += local_model_params[k] * w
        return averaged_params

    x_all = torch.cat([x for x, _ in shards])
    y_all = torch.cat([y for _, y in shards])
    sampled, train_losses, test_metrics = [], [], []
    w_global = model.state_dict()
    for round_idx in range(3):
        client_indexes = client_sampling(round_idx, len(shards), 3)
        sampled.append([int(i) for i in client_indexes])
        w_locals = []
        for idx in client_indexes:
            x, y = shards[idx]
            w, loss = local_train(w_global, TensorDataset(x, y))
            w_locals.append((len(x), w))
            train_losses.append(loss)
        w_global = _aggregate(w_locals)
        model.load_state_dict(w_global)
        with torch.no_grad():
            pred = model(x_all)
            test_loss = criterion(pred, y_all).item()
            _, predicted = torch.max(pred, -1)
            correct = predicted.eq(y_all).sum()
        test_metrics.append({"loss": test_loss, "correct": correct, "acc": correct / len(y_all)})
    return {"sampled": sampled, "train_losses": train_losses, "test": test_metrics,
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # several clients' local SGD averaged: float32 order
def fedp_fedbn_local_batchnorm_state_dict_copy(torch):
    """FedBN's ``communication``: for every key without ``'bn'`` a ``torch.zeros_like(...,
    dtype=torch.float32)`` accumulator of ``client_weights[i] * models[i].state_dict()[key]``,
    copied into ``server_model.state_dict()[key].data`` and back into every client (the
    state_dict's tensors share the parameters' storage), BatchNorm kept local; and FedAvg mode,
    where ``num_batches_tracked`` is copied from the first client instead of averaged."""
    nn, F = torch.nn, torch.nn.functional

    class DigitModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(5, 10)
            self.bn1 = nn.BatchNorm1d(10)
            self.fc2 = nn.Linear(10, 8)
            self.bn2 = nn.BatchNorm1d(8)
            self.fc3 = nn.Linear(8, 3)

        def forward(self, x):
            x = F.relu(self.bn1(self.fc1(x)))
            x = F.relu(self.bn2(self.fc2(x)))
            return self.fc3(x)

    def communication(mode, server_model, models, client_weights):
        with torch.no_grad():
            if mode.lower() == "fedbn":
                for key in server_model.state_dict().keys():
                    if "bn" not in key:
                        temp = torch.zeros_like(server_model.state_dict()[key], dtype=torch.float32)
                        for client_idx in range(len(client_weights)):
                            temp += (
                                client_weights[client_idx] * models[client_idx].state_dict()[key]
                            )
                        server_model.state_dict()[key].data.copy_(temp)
                        for client_idx in range(len(client_weights)):
                            models[client_idx].state_dict()[key].data.copy_(
                                server_model.state_dict()[key])  # fmt: skip
            else:
                for key in server_model.state_dict().keys():
                    if "num_batches_tracked" in key:
                        server_model.state_dict()[key].data.copy_(models[0].state_dict()[key])
                    else:
                        temp = torch.zeros_like(server_model.state_dict()[key])
                        for client_idx in range(len(client_weights)):
                            temp += (
                                client_weights[client_idx] * models[client_idx].state_dict()[key]
                            )
                        server_model.state_dict()[key].data.copy_(temp)
                        for client_idx in range(len(client_weights)):
                            models[client_idx].state_dict()[key].data.copy_(
                                server_model.state_dict()[key])  # fmt: skip
        return server_model, models

    shards = _client_data(torch, 240, (8, 12, 10), 5, 3, shift=0.8)
    out = {}
    for mode in ("fedbn", "fedavg"):
        server_model = set_weights(torch, DigitModel(), seed=241)
        models = [copy.deepcopy(server_model) for _ in shards]
        client_weights = [1 / len(shards) for _ in shards]
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
        losses = []
        for _ in range(2):
            for model, optimizer, (x, y) in zip(models, optimizers, shards):
                model.train()
                for i in range(0, len(x), 4):
                    optimizer.zero_grad()
                    loss = F.cross_entropy(model(x[i : i + 4]), y[i : i + 4])
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
            server_model, models = communication(mode, server_model, models, client_weights)
        evals = []
        for model, (x, y) in zip(models, shards):
            model.eval()
            with torch.no_grad():
                evals.append(F.cross_entropy(model(x), y).item())
        out[mode] = {"losses": losses, "evals": evals, "server": server_model.state_dict(),
                     "client0_bn": models[0].bn1.running_mean,
                     "client2_bn": models[2].bn2.weight,
                     "shared": models[1].fc1.weight.data_ptr() != models[2].fc1.weight.data_ptr()}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)  # several clients' local SGD averaged: float32 order
def fedp_fedprox_perturbed_gradient_descent_variable_work(torch):
    """FedProx's reference optimizer, ``PerturbedGradientDescent(Optimizer)``, whose ``step``
    takes the global parameters and applies ``p.data.add_(d_p + mu * (p.data - g.data),
    alpha=-lr)``, with clients doing different numbers of local steps (stragglers); checked
    against the proximal term added to the loss (``mu / 2 * (w - w_t).norm(2) ** 2``)."""
    nn, F = torch.nn, torch.nn.functional
    Optimizer = torch.optim.Optimizer

    class PerturbedGradientDescent(Optimizer):
        def __init__(self, params, lr=0.01, mu=0.0):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, mu=mu)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, global_params):
            for group in self.param_groups:
                for p, g in zip(group["params"], global_params):
                    if p.grad is None:
                        continue
                    d_p = p.grad.data + group["mu"] * (p.data - g.data)
                    p.data.add_(d_p, alpha=-group["lr"])

    shards = _client_data(torch, 260, (10, 14, 8), 4, 2, shift=0.5)
    local_epochs = [3, 1, 2]  # stragglers do less work
    global_model = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)),
                               seed=261)  # fmt: skip
    mu = 0.5
    rounds, prox_losses, params_a, params_b = [], [], None, None
    for _ in range(2):
        global_params = [p.detach().clone() for p in global_model.parameters()]
        states_a, states_b, sizes = [], [], []
        for (x, y), epochs in zip(shards, local_epochs):
            model_a = copy.deepcopy(global_model)
            opt_a = PerturbedGradientDescent(model_a.parameters(), lr=0.1, mu=mu)
            model_b = copy.deepcopy(global_model)
            opt_b = torch.optim.SGD(model_b.parameters(), lr=0.1)
            for _ in range(epochs):
                for i in range(0, len(x), 5):
                    xb, yb = x[i : i + 5], y[i : i + 5]
                    opt_a.zero_grad()
                    F.cross_entropy(model_a(xb), yb).backward()
                    opt_a.step(global_params)
                    opt_b.zero_grad()
                    loss = F.cross_entropy(model_b(xb), yb)
                    proximal_term = 0.0
                    for w, w_t in zip(model_b.parameters(), global_params):
                        proximal_term += (w - w_t).norm(2) ** 2
                    loss = loss + (mu / 2) * proximal_term
                    loss.backward()
                    opt_b.step()
                    prox_losses.append(loss.item())
            states_a.append(model_a.state_dict())
            states_b.append(model_b.state_dict())
            sizes.append(len(x))
        total = sum(sizes)
        new_state = {k: sum(s[k] * n / total for s, n in zip(states_a, sizes)) for k in states_a[0]}
        params_b = {k: sum(s[k] * n / total for s, n in zip(states_b, sizes)) for k in states_b[0]}
        global_model.load_state_dict(new_state)
        with torch.no_grad():
            rounds.append([F.cross_entropy(global_model(x), y).item() for x, y in shards])
        params_a = params(global_model)
    return {"rounds": rounds, "prox_losses": prox_losses, "optimizer_version": params_a,
            "loss_version": params_b,
            "max_gap": max((params_a[k] - params_b[k]).abs().max().item() for k in params_b) < 1e-4}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # control variates accumulate clients' float32 updates
def fedp_scaffold_control_variates_option_two(torch):
    """SCAFFOLD (Karimireddy et al.): local steps with the gradient corrected in place
    (``p.grad.add_(c - c_i)``) before ``optimizer.step()``, option II's control update
    ``c_i+ = c_i - c + (x - y_i) / (K * lr)``, the server moving ``x += lr_g * mean(dy)`` and
    ``c += |S| / N * mean(dc)``; clients sampled each round from NumPy."""
    nn = torch.nn
    N, K, lr, lr_g = 4, 3, 0.05, 1.0
    shards = []
    for k in range(N):
        x = arr(280 + k, 9, 5)
        w_true = arr(290 + k, 5, 1) + 0.5 * k  # heterogeneous objectives
        shards.append((torch.tensor(x), torch.tensor(x @ w_true + 0.1 * arr(295 + k, 9, 1))))
    server = set_weights(torch, nn.Linear(5, 1), seed=281)
    c_global = [torch.zeros_like(p) for p in server.parameters()]
    c_locals = [[torch.zeros_like(p) for p in server.parameters()] for _ in range(N)]
    criterion = nn.MSELoss()
    sampler = _rng(282)
    history, sampled = [], []
    for _ in range(3):
        clients = sorted(sampler.choice(N, 3, replace=False).tolist())
        sampled.append(clients)
        delta_ys, delta_cs = [], []
        for k in clients:
            x, y = shards[k]
            model = copy.deepcopy(server)
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            for step in range(K):
                idx = slice(3 * step, 3 * step + 3)
                optimizer.zero_grad()
                loss = criterion(model(x[idx]), y[idx])
                loss.backward()
                for p, c, c_i in zip(model.parameters(), c_global, c_locals[k]):
                    p.grad.add_(c - c_i)
                optimizer.step()
            with torch.no_grad():
                new_c = [c_i - c + (xp - yp) / (K * lr)
                         for c_i, c, xp, yp in zip(c_locals[k], c_global, server.parameters(),
                                                   model.parameters())]  # fmt: skip
                delta_ys.append(
                    [yp - xp for yp, xp in zip(model.parameters(), server.parameters())]
                )
                delta_cs.append([nc - c_i for nc, c_i in zip(new_c, c_locals[k])])
                c_locals[k] = new_c
        with torch.no_grad():
            for i, p in enumerate(server.parameters()):
                p.add_(lr_g * torch.stack([d[i] for d in delta_ys]).mean(0))
                c_global[i] += len(clients) / N * torch.stack([d[i] for d in delta_cs]).mean(0)
            history.append(sum(criterion(server(x), y) for x, y in shards).item() / N)
    return {"history": history, "sampled": sampled, "server": params(server),
            "c_global": c_global, "c_locals": [torch.cat([c.flatten() for c in cl])
                                               for cl in c_locals]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # server optimisers on averaged float32 client updates
def fedp_fedopt_fedadam_fedyogi_pseudo_gradients(torch):
    """Adaptive federated optimisation (Reddi et al.): the averaged client delta as the server's
    pseudo-gradient ``p.grad = p.data - avg`` stepped by ``torch.optim.Adam(betas=(0.9, 0.99),
    eps=tau)``; FedYogi's second moment ``v - (1 - b2) * d**2 * torch.sign(v - d**2)`` written
    by hand on flat vectors (``parameters_to_vector`` / ``vector_to_parameters``); FedAvgM as
    ``SGD(momentum=0.9)``."""
    nn, F = torch.nn, torch.nn.functional
    p2v, v2p = torch.nn.utils.parameters_to_vector, torch.nn.utils.vector_to_parameters
    shards = _client_data(torch, 300, (8, 8, 12), 4, 3, shift=0.6)

    def client_update(server, x, y):
        model = copy.deepcopy(server)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(0, len(x), 4):
            opt.zero_grad()
            F.cross_entropy(model(x[i : i + 4]), y[i : i + 4]).backward()
            opt.step()
        return p2v(model.parameters()).detach(), len(x)

    def averaged(server):
        results = [client_update(server, x, y) for x, y in shards]
        total = sum(n for _, n in results)
        return sum(w * (n / total) for w, n in results)

    def evaluate(model):
        with torch.no_grad():
            return sum(F.cross_entropy(model(x), y) for x, y in shards).item() / len(shards)

    out = {}
    for name in ("fedadam", "fedavgm", "fedyogi"):
        server = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)),
                             seed=301)  # fmt: skip
        if name == "fedadam":
            server_opt = torch.optim.Adam(server.parameters(), lr=0.05, betas=(0.9, 0.99), eps=1e-3)
        elif name == "fedavgm":
            server_opt = torch.optim.SGD(server.parameters(), lr=1.0, momentum=0.9)
        m = torch.zeros_like(p2v(server.parameters()))
        v = torch.full_like(m, 1e-6)
        losses = []
        for _ in range(3):
            avg = averaged(server)
            if name == "fedyogi":
                x = p2v(server.parameters()).detach()
                delta = avg - x
                m = 0.9 * m + 0.1 * delta
                v = v - (1 - 0.99) * delta**2 * torch.sign(v - delta**2)
                v2p(x + 0.05 * m / (v.sqrt() + 1e-3), server.parameters())
            else:
                server_opt.zero_grad()
                offset = 0
                for p in server.parameters():
                    n = p.numel()
                    p.grad = p.data - avg[offset : offset + n].view_as(p)
                    offset += n
                server_opt.step()
            losses.append(evaluate(server))
        out[name] = {"losses": losses, "params": p2v(server.parameters())}
        if name == "fedadam":
            out[name]["exp_avg_sq"] = [
                server_opt.state[p]["exp_avg_sq"] for p in server.parameters()
            ]
            out[name]["step"] = server_opt.state[server[0].weight]["step"]
        if name == "fedyogi":
            out[name]["v"] = v
    return out


@program(rtol=5e-4, atol=5e-5)  # noise-dominated updates; float32 order in clip norms
def fedp_dpsgd_microbatch_loop_clip_grad_norm(torch):
    """Naive DP-SGD with microbatches of one: per example ``model.zero_grad()``, ``backward``,
    ``torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)`` (its returned total norm
    logged), the clipped gradients summed into buffers; then Gaussian noise ``sigma * C`` from
    NumPy added to the sum, ``p.grad = (summed + noise) / batch_size`` and ``optimizer.step()``."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)), seed=321)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    X, Y = torch.tensor(arr(322, 16, 5, scale=2.0)), torch.tensor(ints(323, 3, 16))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4)
    max_grad_norm, noise_multiplier = 1.0, 0.8
    noise_rng = _rng(324)
    norms, losses, clipped = [], [], 0
    for x_batch, y_batch in loader:
        summed = [torch.zeros_like(p) for p in model.parameters()]
        batch_loss = 0.0
        for x, y in zip(x_batch, y_batch):
            model.zero_grad()
            loss = criterion(model(x.unsqueeze(0)), y.unsqueeze(0))
            loss.backward()
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_grad_norm)
            norms.append(total_norm)
            clipped += int(total_norm > max_grad_norm)
            for s, p in zip(summed, model.parameters()):
                s.add_(p.grad)
            batch_loss += loss.item()
        for p, s in zip(model.parameters(), summed):
            noise = torch.from_numpy(_normal(noise_rng, tuple(p.shape)))
            p.grad = (s + noise * noise_multiplier * max_grad_norm) / len(x_batch)
        optimizer.step()
        losses.append(batch_loss / len(x_batch))
    return {"norms": torch.stack(norms), "losses": losses, "clipped": clipped,
            "params": params(model),
            "final_loss": criterion(model(X), Y)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # per-sample norms and einsum over the batch: float32 order
def fedp_dpsgd_vmap_grad_functional_call_poisson(torch):
    """Per-sample gradients as the torch.func tutorial and Opacus's functorch path compute them:
    ``vmap(grad(compute_loss), in_dims=(None, None, 0, 0))`` over ``functional_call(model,
    (params, buffers), (batch,))``, checked against a loop of ``torch.autograd.grad``; Opacus's
    clipping (``torch.stack([g.reshape(len(g), -1).norm(2, dim=-1) ...], dim=1).norm(2, dim=1)``,
    ``(C / (norms + 1e-6)).clamp(max=1.0)``, ``torch.einsum("i,i...", factor, g)``), NumPy
    Poisson sampling and the expected batch size as the denominator."""
    nn, F = torch.nn, torch.nn.functional
    functional_call, vmap, grad = torch.func.functional_call, torch.func.vmap, torch.func.grad
    model = set_weights(torch, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)), seed=341)
    data, targets = torch.tensor(arr(342, 24, 4)), torch.tensor(ints(343, 3, 24))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    sample_rate, max_grad_norm, sigma = 0.25, 0.5, 1.1
    expected_batch_size = int(len(data) * sample_rate)
    rng = _rng(344)

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = functional_call(model, (params, buffers), (batch,))
        return F.cross_entropy(predictions, targets)

    ft_compute_grad = grad(compute_loss)
    ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    batch_sizes, all_norms, losses, loop_gap = [], [], [], []
    for step in range(3):
        mask = rng.random(len(data)) < sample_rate
        idx = torch.from_numpy(np.nonzero(mask)[0])
        x, y = data[idx], targets[idx]
        batch_sizes.append(len(idx))
        params_ = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        per_sample_grads = ft_compute_sample_grad(params_, buffers, x, y)
        if step == 0:
            for i in range(len(x)):
                loop = torch.autograd.grad(F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]),
                                           list(model.parameters()))  # fmt: skip
                loop_gap.append(max((a - per_sample_grads[k][i]).abs().max().item()
                                    for a, k in zip(loop, params_)) < 1e-5)  # fmt: skip
        per_param_norms = [g.reshape(len(g), -1).norm(2, dim=-1) for g in per_sample_grads.values()]
        per_sample_norms = torch.stack(per_param_norms, dim=1).norm(2, dim=1)
        per_sample_clip_factor = (max_grad_norm / (per_sample_norms + 1e-6)).clamp(max=1.0)
        all_norms.append(per_sample_norms)
        for name, p in model.named_parameters():
            summed = torch.einsum("i,i...", per_sample_clip_factor, per_sample_grads[name])
            noise = torch.tensor(_normal(rng, tuple(p.shape))) * sigma * max_grad_norm
            p.grad = (summed + noise) / expected_batch_size
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            losses.append(F.cross_entropy(model(data), targets).item())
    return {"batch_sizes": batch_sizes, "norms": torch.cat(all_norms), "losses": losses,
            "loop_matches": loop_gap, "params": params(model),
            "last_grads": {k: v.shape for k, v in per_sample_grads.items()}}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # per-sample einsums summed over batch and time: float32 order
def fedp_opacus_style_grad_sample_hooks(torch):
    """Opacus's GradSampleModule in miniature: forward hooks keep each layer's activations,
    ``register_full_backward_hook`` receives ``grad_output``, scaled by the batch size for
    ``loss_reduction="mean"``; ``nn.Linear``'s per-sample gradient as
    ``torch.einsum("n...i,n...j->nij", backprops, activations)`` (over a sequence dimension),
    the bias's as ``torch.einsum("n...k->nk", backprops)``, ``nn.Embedding``'s by
    ``scatter_add_`` of the backprops at the token indices; then ``DPOptimizer``'s per-layer
    clipping into ``p.summed_grad``, noise, and division by the expected batch size."""
    nn = torch.nn

    class TinyTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 4)
            self.fc1 = nn.Linear(4, 5)
            self.fc2 = nn.Linear(5, 2)

        def forward(self, tokens):
            h = torch.tanh(self.fc1(self.emb(tokens)))
            return self.fc2(h).mean(1)

    model = set_weights(torch, TinyTagger(), seed=361)
    activations, backprops = {}, {}

    def capture_activations(module, inputs, outputs):
        activations[module] = inputs[0].detach()

    def capture_backprops(module, grad_input, grad_output):
        backprops[module] = grad_output[0].detach() * batch_size  # loss_reduction="mean"

    handles = []
    for module in (model.emb, model.fc1, model.fc2):
        handles.append(module.register_forward_hook(capture_activations))
        handles.append(module.register_full_backward_hook(capture_backprops))

    def compute_grad_samples():
        for layer in (model.fc1, model.fc2):
            A, B = activations[layer], backprops[layer]
            layer.weight.grad_sample = torch.einsum("n...i,n...j->nij", B, A)
            layer.bias.grad_sample = torch.einsum("n...k->nk", B)
        layer = model.emb
        A, B = activations[layer], backprops[layer]
        n = A.shape[0]
        index = (
            A.unsqueeze(-1)
            .expand(*A.shape, layer.embedding_dim)
            .reshape(n, -1, layer.embedding_dim)
        )
        grad_sample = torch.zeros(n, *layer.weight.shape, dtype=B.dtype)
        grad_sample.scatter_add_(1, index, B.reshape(n, -1, layer.embedding_dim))
        layer.weight.grad_sample = grad_sample

    tokens = torch.tensor(ints(362, 7, 12, 3))
    labels = torch.tensor(ints(363, 2, 12))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
    max_grad_norm, noise_multiplier, expected_batch_size = 0.7, 0.6, 4
    rng = _rng(364)
    losses, sums_match, norms = [], [], []
    for step in range(3):
        x, y = tokens[4 * step : 4 * step + 4], labels[4 * step : 4 * step + 4]
        batch_size = len(x)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        compute_grad_samples()
        sums_match.append(all(torch.allclose(p.grad_sample.sum(0) / batch_size, p.grad, atol=1e-6)
                              for p in model.parameters()))  # fmt: skip
        per_param_norms = [p.grad_sample.reshape(len(p.grad_sample), -1).norm(2, dim=-1)
                           for p in model.parameters()]  # fmt: skip
        per_sample_norms = torch.stack(per_param_norms, dim=1).norm(2, dim=1)
        norms.append(per_sample_norms)
        per_sample_clip_factor = (max_grad_norm / (per_sample_norms + 1e-6)).clamp(max=1.0)
        for p in model.parameters():
            grad = torch.einsum("i,i...", per_sample_clip_factor, p.grad_sample)
            p.summed_grad = (
                grad if getattr(p, "summed_grad", None) is None else p.summed_grad + grad
            )
            noise = torch.from_numpy(_normal(rng, tuple(p.shape)))
            p.grad = (
                p.summed_grad + noise * noise_multiplier * max_grad_norm
            ) / expected_batch_size
            p.summed_grad = None
            p.grad_sample = None
        optimizer.step()
        losses.append(loss.item())
    for h in handles:
        h.remove()
    return {"losses": losses, "sums_match": sums_match, "norms": torch.stack(norms),
            "params": params(model)}  # fmt: skip


@program(rtol=1e-9, atol=1e-12)
def fedp_privacy_bookkeeping_rdp_subsampled_gaussian(torch):
    """The arithmetic of privacy accounting on float64 tensors, no accountant library: the
    classic Gaussian mechanism's ``sigma = sqrt(2 ln(1.25 / delta)) * sensitivity / eps``, basic
    and advanced composition, amplification by subsampling, the RDP of the sampled Gaussian for
    integer orders (``logsumexp`` of the binomial expansion with ``lgamma``) composed over steps
    and converted to (eps, delta) by the classic and the improved bound over the orders, and a
    bisection for the noise multiplier that meets a target epsilon."""
    f64 = torch.float64
    delta = 1e-5
    eps0, k = 0.5, 100
    sigma_classic = math.sqrt(2 * math.log(1.25 / delta)) * 1.0 / eps0
    basic = (k * eps0, k * delta)
    delta_prime = 1e-6
    advanced = math.sqrt(2 * k * math.log(1 / delta_prime)) * eps0 + k * eps0 * (math.exp(eps0) - 1)
    q = 0.01
    amplified = torch.log1p(q * torch.expm1(torch.tensor([0.1, 0.5, 1.0, 2.0], dtype=f64)))
    orders = torch.arange(2, 65, dtype=f64)

    ks = torch.arange(0, int(orders.max()) + 1, dtype=f64)
    alpha = orders[:, None]
    valid = ks <= alpha
    log_binom = (
        torch.lgamma(alpha + 1) - torch.lgamma(ks + 1) - torch.lgamma((alpha - ks + 1).clamp(min=1))
    )

    def compute_rdp(q, sigma, steps):
        """log A_alpha of the sampled Gaussian, every integer order at once, divided by alpha - 1."""
        terms = (
            log_binom
            + ks * math.log(q)
            + (alpha - ks) * math.log1p(-q)
            + (ks * ks - ks) / (2 * sigma**2)
        )
        log_a = torch.logsumexp(
            torch.where(valid, terms, torch.tensor(-math.inf, dtype=f64)), dim=1
        )
        return log_a / (orders - 1) * steps

    def get_privacy_spent(rdp, delta):
        eps_classic = rdp + math.log(1 / delta) / (orders - 1)
        eps = (
            rdp
            - (math.log(delta) + torch.log(orders)) / (orders - 1)
            + torch.log((orders - 1) / orders)
        )
        idx = torch.nan_to_num(eps, nan=float("inf")).argmin()
        return eps[idx], orders[idx], eps_classic.min()

    steps = 1000
    rdp = compute_rdp(q, 1.1, steps)
    eps, best_alpha, eps_classic = get_privacy_spent(rdp, delta)
    gaussian_rdp = orders / (2 * 1.1**2) * steps  # without subsampling, for comparison
    eps_full, _, _ = get_privacy_spent(gaussian_rdp, delta)

    def get_noise_multiplier(target_epsilon, lo=0.3, hi=10.0, iters=16):
        for _ in range(iters):
            mid = (lo + hi) / 2
            e, _, _ = get_privacy_spent(compute_rdp(q, mid, steps), delta)
            if e.item() > target_epsilon:
                lo = mid
            else:
                hi = mid
        return hi

    sigma_for_3 = get_noise_multiplier(3.0)
    report = (f"(ε = {eps.item():.3f}, δ = {delta}) for α = {best_alpha.item():.0f}; "
              f"noise multiplier for ε=3: {sigma_for_3:.4f}")  # fmt: skip
    return {"sigma_classic": sigma_classic, "basic": list(basic), "advanced": advanced,
            "amplified": amplified, "rdp": rdp, "eps": eps, "best_alpha": best_alpha,
            "eps_classic": eps_classic, "eps_full": eps_full, "sigma_for_3": sigma_for_3,
            "report": report}  # fmt: skip


@program(rtol=1e-6, atol=1e-7)
def fedp_secure_aggregation_pairwise_masks_fixed_point(torch):
    """Secure aggregation (Bonawitz et al.) on int64 tensors: updates encoded in fixed point
    (``torch.round(x * 2**16).long() % M``), pairwise masks from shared seeds added by the lower
    index and subtracted by the higher, self masks removed by the server, a dropped client's
    pairwise masks reconstructed from the survivors' seeds; the sum decoded back to floats with
    the centred representative; additive secret sharing alongside; and float masks, which cancel
    only up to rounding."""
    M = 2**32
    scale = 2**16
    n_clients, d = 4, 10
    updates = [torch.tensor(arr(380 + i, d, scale=0.5)) for i in range(n_clients)]

    def seed_of(i, j):
        return 1000 + 10 * min(i, j) + max(i, j)

    def prg(seed):
        return torch.from_numpy(_rng(seed).integers(0, M, d, dtype=np.int64))

    def encode(x):
        return torch.round(x * scale).long() % M

    def decode(v):
        v = v % M
        return torch.where(v >= M // 2, v - M, v).double() / scale

    self_seeds = [2000 + i for i in range(n_clients)]
    masked = []
    for i in range(n_clients):
        y = encode(updates[i]) + prg(self_seeds[i])
        for j in range(n_clients):
            if j == i:
                continue
            p_ij = prg(seed_of(i, j))
            y = y + p_ij if i < j else y - p_ij
        masked.append(y % M)
    dropped = 3
    survivors = [i for i in range(n_clients) if i != dropped]
    total = torch.stack([masked[i] for i in survivors]).sum(0) % M
    for i in survivors:
        total = total - prg(self_seeds[i])
        p = prg(seed_of(i, dropped))  # survivors' masks with the dropped client do not cancel
        total = total - p if i < dropped else total + p
    aggregate = decode(total)
    plain = torch.stack([updates[i] for i in survivors]).sum(0).double()
    # additive secret sharing of client 0's update among three servers
    share_rng = _rng(390)
    secret = encode(updates[0])
    shares = [torch.from_numpy(share_rng.integers(0, M, d, dtype=np.int64)) for _ in range(2)]
    shares.append((secret - shares[0] - shares[1]) % M)
    reconstructed = decode(sum(shares))
    # float masks: cancel only up to float32 rounding
    fmasks = {}
    for i in range(n_clients):
        for j in range(i + 1, n_clients):
            fmasks[(i, j)] = torch.tensor(arr(seed_of(i, j), d, scale=100.0))
    fmasked = []
    for i in range(n_clients):
        y = updates[i].clone()
        for (a, b), m in fmasks.items():
            if a == i:
                y += m
            elif b == i:
                y -= m
        fmasked.append(y)
    float_error = (torch.stack(fmasked).sum(0) - torch.stack(updates).sum(0)).abs().max()
    return {"masked0": masked[0], "aggregate": aggregate,
            "max_err": (aggregate - plain).abs().max(), "exact": (aggregate - plain).abs().max() <= len(survivors) / scale,
            "reconstructed": reconstructed, "shares_dtype": str(shares[2].dtype),
            "share_range": [int(s.min()) >= 0 and int(s.max()) < M for s in shares],
            "float_error_small": bool(float_error < 1e-3)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # compressed distributed SGD over rounds: float32 order
def fedp_topk_sparsification_error_feedback_dgc(torch):
    """Distributed SGD with top-k sparsification: each worker's flat gradient
    (``parameters_to_vector`` of ``p.grad``) plus its residual, ``torch.topk(acc.abs(), k)``, the
    sent values scattered into ``torch.zeros_like(acc)``, the rest kept as error feedback; and
    Deep Gradient Compression's momentum correction (``u = m * u + g; v += u``, top-k of ``v``,
    both masked with ``mul_(~mask)``); the server averages the sparse vectors and steps by
    ``vector_to_parameters``."""
    nn = torch.nn
    p2v, v2p = torch.nn.utils.parameters_to_vector, torch.nn.utils.vector_to_parameters
    workers = 3
    data = []
    for w in range(workers):
        x = arr(400 + w, 12, 6)
        data.append((torch.tensor(x), torch.tensor(x @ arr(410, 6, 2) + 0.3 * w)))
    out = {}
    for method in ("ef_topk", "dgc"):
        model = set_weights(torch, nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)),
                            seed=401)  # fmt: skip
        dim = p2v(model.parameters()).numel()
        k = max(1, int(0.2 * dim))
        residuals = [torch.zeros(dim) for _ in range(workers)]
        velocities = [torch.zeros(dim) for _ in range(workers)]
        losses, sent_indices, densities = [], [], []
        for step in range(4):
            sparse_updates = []
            for w, (x, y) in enumerate(data):
                model.zero_grad()
                loss = nn.functional.mse_loss(model(x[3 * step : 3 * step + 3]),
                                              y[3 * step : 3 * step + 3])  # fmt: skip
                loss.backward()
                g = p2v([p.grad for p in model.parameters()])
                if method == "ef_topk":
                    acc = residuals[w] + 0.1 * g
                    _, idx = torch.topk(acc.abs(), k)
                    sparse = torch.zeros_like(acc)
                    sparse[idx] = acc[idx]
                    residuals[w] = acc - sparse
                else:
                    velocities[w].mul_(0.9).add_(g)
                    residuals[w].add_(velocities[w])
                    threshold = residuals[w].abs().topk(k).values.min()
                    mask = residuals[w].abs() >= threshold
                    sparse = 0.1 * residuals[w] * mask
                    residuals[w].mul_(~mask)
                    velocities[w].mul_(~mask)
                    idx = mask.nonzero().squeeze(1)
                sparse_updates.append(sparse)
                if w == 0:
                    sent_indices.append(idx.sort().values)
                densities.append((sparse != 0).float().mean())
            update = torch.stack(sparse_updates).mean(0)
            with torch.no_grad():
                v2p(p2v(model.parameters()) - update, model.parameters())
                losses.append(sum(nn.functional.mse_loss(model(x), y) for x, y in data).item())
        out[method] = {"losses": losses, "sent": sent_indices, "density": torch.stack(densities),
                       "residual_norms": torch.stack([r.norm() for r in residuals]),
                       "params": p2v(model.parameters())}  # fmt: skip
    return out


@program(rtol=2e-4, atol=2e-5)
def fedp_qsgd_terngrad_signsgd_quantizers(torch):
    """Stochastic quantisers from fixed NumPy uniforms: QSGD with ``s`` levels (``level =
    |v| / ||v|| * s``, rounded up with probability ``level - floor(level)``), its bit cost and an
    empirical unbiasedness check; TernGrad (``max|g| * sign(g) * bernoulli(|g| / max|g|)``);
    signSGD with majority vote across workers and EF-signSGD's scaled sign with error feedback."""
    d, workers, draws = 12, 5, 400
    grads = torch.tensor(arr(420, workers, d))
    uniforms = torch.tensor(_rng(421).random((draws, d)).astype(np.float32))

    def qsgd(v, s, u):
        norm = v.norm()
        level = v.abs() / norm * s
        lower = level.floor()
        xi = lower + (u < level - lower).float()
        return norm * v.sign() * xi / s, xi

    def qsgd_bits(xi, s):
        nonzero = int((xi != 0).sum())
        return (
            32
            + nonzero * (1 + math.ceil(math.log2(s + 1)))
            + nonzero * math.ceil(math.log2(len(xi)))
        )

    v = grads[0]
    q1, xi1 = qsgd(v, 4, uniforms[0])
    mean_q = torch.stack([qsgd(v, 4, uniforms[i])[0] for i in range(0, draws, 40)]).mean(0)
    batched_level = v.abs() / v.norm() * 4
    batched = v.norm() * v.sign() * (batched_level.floor()
                                     + (uniforms < batched_level - batched_level.floor()).float()) / 4  # fmt: skip
    s_t = grads.abs().max(dim=1, keepdim=True).values
    bern = (uniforms[:workers] < grads.abs() / s_t).to(grads.dtype)
    tern = s_t * grads.sign() * bern
    votes = torch.sign(grads).sum(0)
    majority = torch.sign(votes)
    residual = torch.zeros(d)
    ef_sent = []
    for t in range(3):
        acc = 0.1 * grads[t] + residual
        compressed = acc.abs().sum() / d * acc.sign()
        residual = acc - compressed
        ef_sent.append(compressed)
    return {"q1": q1, "xi1": xi1.to(torch.int8), "bits": qsgd_bits(xi1, 4),
            "mean_q": mean_q, "bias": (batched.mean(0) - v).abs().max() < 0.1,
            "batched_var": batched.var(0, unbiased=True), "tern": tern,
            "tern_mean": tern.mean(0), "majority": majority, "votes": votes.to(torch.int64),
            "ef_sent": torch.stack(ef_sent), "residual": residual}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # client updates after local SGD: float32 order
def fedp_client_drift_divergence_and_dp_fedavg(torch):
    """Client-drift diagnostics on non-IID shards (Dirichlet label proportions from NumPy,
    ``torch.bincount(minlength=)`` label histograms): per-layer weight divergence
    ``||w_k - w_avg|| / ||w_avg||``, the cosine-similarity matrix of flattened client updates
    (``F.normalize(...) @ .T``), pairwise ``torch.cdist``, gradient diversity and FedProx's
    B-dissimilarity; then DP-FedAvg's user-level step: each update clipped to norm ``S``
    (``update * min(1, S / norm)``), averaged, Gaussian noise ``z * S / n`` added."""
    nn, F = torch.nn, torch.nn.functional
    p2v = torch.nn.utils.parameters_to_vector
    rng = _rng(440)
    n_clients, classes = 4, 3
    X = torch.tensor(arr(441, 48, 5))
    labels = ints(442, classes, 48)
    Y = torch.tensor(labels)
    X = X + torch.tensor(np.eye(classes, 5, dtype=np.float32)[labels])  # separable-ish classes
    proportions = rng.dirichlet([0.5] * n_clients, size=classes)
    client_idx = [[] for _ in range(n_clients)]
    for c in range(classes):
        idx_c = np.nonzero(labels == c)[0]
        cuts = (np.cumsum(proportions[c]) * len(idx_c)).astype(int)[:-1]
        for k, part in enumerate(np.split(idx_c, cuts)):
            client_idx[k] += part.tolist()
    hist = torch.stack([torch.bincount(Y[torch.tensor(ix, dtype=torch.long)], minlength=classes)
                        for ix in client_idx])  # fmt: skip
    global_dist = torch.bincount(Y, minlength=classes).float() / len(Y)
    local_dist = hist.float() / hist.sum(1, keepdim=True).clamp(min=1)
    emd = (local_dist - global_dist).abs().sum(1)

    server = set_weights(torch, nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, classes)),
                         seed=443)  # fmt: skip
    start = p2v(server.parameters()).detach()
    full_grads, local_models, sizes = [], [], []
    for ix in client_idx:
        model = copy.deepcopy(server)
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        x, y = X[ix], Y[ix]
        sizes.append(len(ix))
        if len(ix) == 0:
            full_grads.append(torch.zeros_like(start))
            local_models.append(model)
            continue
        g = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
        full_grads.append(torch.cat([t.flatten() for t in g]))
        for _ in range(3):
            for i in range(0, len(x), 4):
                opt.zero_grad()
                F.cross_entropy(model(x[i : i + 4]), y[i : i + 4]).backward()
                opt.step()
        local_models.append(model)
    weights = torch.tensor(sizes, dtype=torch.float32) / sum(sizes)
    avg_state = {k: sum(w * m.state_dict()[k] for w, m in zip(weights, local_models))
                 for k in server.state_dict()}  # fmt: skip
    divergence = {k: torch.stack([(m.state_dict()[k] - avg_state[k]).norm() / avg_state[k].norm()
                                  for m in local_models]) for k in avg_state}  # fmt: skip
    updates = torch.stack([p2v(m.parameters()).detach() - start for m in local_models])
    unit = F.normalize(updates, dim=1)
    cosine = unit @ unit.T
    dists = torch.cdist(updates, updates)
    G = torch.stack(full_grads)
    avg_grad = (weights[:, None] * G).sum(0)
    diversity = (weights * (G**2).sum(1)).sum() / avg_grad.pow(2).sum()
    B = diversity.sqrt()
    S, z = 0.5, 1.0
    norms = updates.norm(dim=1)
    clipped = updates * torch.clamp(S / norms, max=1.0)[:, None]
    noise = torch.tensor(_normal(rng, (updates.shape[1],)))
    dp_update = clipped.mean(0) + noise * z * S / n_clients
    return {"hist": hist, "emd": emd, "divergence": divergence, "cosine": cosine,
            "dists": dists, "diversity": diversity, "B": B, "norms": norms,
            "dp_update": dp_update, "clip_fraction": (norms > S).float().mean(),
            "drift_report": f"mean cosine {cosine[~torch.eye(n_clients, dtype=torch.bool)].mean():.3f}"}  # fmt: skip
