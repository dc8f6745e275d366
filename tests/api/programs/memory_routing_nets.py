"""Architectures with memory, routing and search as their reference implementations write them:
DARTS mixed operations with softmax architecture weights and first-order bilevel updates, capsule
networks with squash and routing-by-agreement, a Neural Turing Machine's addressing (cosine
similarity, interpolation, circular shift, sharpening) and erase/add writes, a DNC's usage-sorted
allocation and temporal links, end-to-end memory networks, pointer networks, slot attention, a
Perceiver latent block, NEC's differentiable neural dictionary, product-key memory, a
stack-augmented RNN and a modern Hopfield layer; each trained a few steps."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _squash(torch, s, dim=-1, eps=1e-8):
    # Sabour et al.: v = |s|^2 / (1 + |s|^2) * s / |s|
    sq = (s**2).sum(dim=dim, keepdim=True)
    return sq / (1.0 + sq) * s / torch.sqrt(sq + eps)


@program(rtol=5e-4, atol=5e-5)
def mem_darts_mixed_op_first_order_search(torch):
    # Liu et al. DARTS search cell: every edge a MixedOp (weighted sum of candidate ops with
    # softmax(alpha)), arch parameters as plain leaf tensors with Adam(betas=(0.5, 0.999),
    # weight_decay=1e-3), first-order bilevel: alpha step on the validation batch, then the
    # weight step on the training batch with clip_grad_norm_; genotype parsed as model_search.py
    nn, F = torch.nn, torch.nn.functional
    PRIMITIVES = [
        "none",
        "max_pool_3x3",
        "avg_pool_3x3",
        "skip_connect",
        "conv_3x3",
        "dil_conv_3x3",
    ]
    C, steps, n_classes = 4, 2, 3

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    class ReLUConvBN(nn.Module):
        def __init__(self, C_in, C_out, k, pad, dil=1):
            super().__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_out, k, padding=pad, dilation=dil, bias=False),
                nn.BatchNorm2d(C_out, affine=False),
            )

        def forward(self, x):
            return self.op(x)

    OPS = {
        "none": lambda C: Zero(),
        "max_pool_3x3": lambda C: nn.MaxPool2d(3, stride=1, padding=1),
        "avg_pool_3x3": lambda C: nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
        "skip_connect": lambda C: nn.Identity(),
        "conv_3x3": lambda C: ReLUConvBN(C, C, 3, 1),
        "dil_conv_3x3": lambda C: ReLUConvBN(C, C, 3, 2, 2),
    }

    class MixedOp(nn.Module):
        def __init__(self, C):
            super().__init__()
            self._ops = nn.ModuleList()
            for primitive in PRIMITIVES:
                op = OPS[primitive](C)
                if "pool" in primitive:
                    op = nn.Sequential(op, nn.BatchNorm2d(C, affine=False))
                self._ops.append(op)

        def forward(self, x, weights):
            return sum(w * op(x) for w, op in zip(weights, self._ops))

    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.preprocess0 = ReLUConvBN(C, C, 1, 0)
            self.preprocess1 = ReLUConvBN(C, C, 1, 0)
            self._ops = nn.ModuleList(MixedOp(C) for i in range(steps) for _ in range(2 + i))

        def forward(self, s0, s1, weights):
            states = [self.preprocess0(s0), self.preprocess1(s1)]
            offset = 0
            for _ in range(steps):
                s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
                offset += len(states)
                states.append(s)
            return torch.cat(states[-steps:], dim=1)

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(2, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
            self.cell = Cell()
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(C * steps, n_classes)
            k = sum(2 + i for i in range(steps))
            self.alphas_normal = torch.tensor(
                arr(1, k, len(PRIMITIVES), scale=1e-3), requires_grad=True
            )
            self._arch_parameters = [self.alphas_normal]

        def arch_parameters(self):
            return self._arch_parameters

        def forward(self, x):
            s0 = s1 = self.stem(x)
            weights = F.softmax(self.alphas_normal, dim=-1)
            out = self.global_pooling(self.cell(s0, s1, weights))
            return self.classifier(out.view(out.size(0), -1))

        def genotype(self):
            W = F.softmax(self.alphas_normal, dim=-1).data.cpu().numpy()
            gene, start, n = [], 0, 2
            for i in range(steps):
                end = start + n
                Wi = W[start:end].copy()
                none = PRIMITIVES.index("none")
                edges = sorted(
                    range(i + 2),
                    key=lambda x: -max(Wi[x][k] for k in range(len(Wi[x])) if k != none),
                )[:2]
                for j in edges:
                    k_best = max(
                        (k for k in range(len(Wi[j])) if k != none), key=lambda k: Wi[j][k]
                    )
                    gene.append((PRIMITIVES[k_best], j))
                start = end
                n += 1
            return gene

    model = set_weights(torch, Network(), seed=2)
    criterion = nn.CrossEntropyLoss()
    w_opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
    a_opt = torch.optim.Adam(
        model.arch_parameters(), lr=0.05, betas=(0.5, 0.999), weight_decay=1e-3
    )
    x_train, y_train = torch.tensor(arr(3, 6, 2, 6, 6)), torch.tensor(ints(4, n_classes, 6))
    x_val, y_val = torch.tensor(arr(5, 6, 2, 6, 6)), torch.tensor(ints(6, n_classes, 6))
    out = {"train_loss": [], "val_loss": [], "grad_norm": []}
    model.train()
    for _ in range(3):
        a_opt.zero_grad()
        val_loss = criterion(model(x_val), y_val)
        val_loss.backward()
        a_opt.step()
        w_opt.zero_grad()
        logits = model(x_train)
        loss = criterion(logits, y_train)
        loss.backward()
        out["grad_norm"].append(nn.utils.clip_grad_norm_(model.parameters(), 5.0))
        w_opt.step()
        out["train_loss"].append(loss.item())
        out["val_loss"].append(val_loss.item())
    out["alphas"] = model.alphas_normal
    out["alpha_grad"] = model.alphas_normal.grad
    out["edge_weights"] = F.softmax(model.alphas_normal, dim=-1)
    out["genotype"] = str(model.genotype())
    out["stem_grad"] = model.stem[0].weight.grad
    out["classifier"] = model.classifier.weight
    model.eval()
    with torch.no_grad():
        out["eval_logits"] = model(x_val)

    # GDAS/SNAS-style discretised forward: the hard one-hot of softmax(alpha / tau) with the
    # straight-through estimator, written as F.gumbel_softmax(hard=True) writes it (no noise here)
    def hard_softmax(logits, tau=0.5, dim=-1):
        y_soft = (logits / tau).softmax(dim)
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = torch.zeros_like(logits, memory_format=torch.legacy_contiguous_format)
        y_hard = y_hard.scatter_(dim, index, 1.0)
        return y_hard - y_soft.detach() + y_soft

    model.alphas_normal.grad = None
    s0 = model.stem(x_val)
    hard = hard_softmax(model.alphas_normal)
    hard_logits = model.classifier(model.global_pooling(model.cell(s0, s0, hard)).flatten(1))
    criterion(hard_logits, y_val).backward()
    out["hard_weights"] = hard
    out["hard_logits"] = hard_logits
    out["st_alpha_grad"] = model.alphas_normal.grad
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_darts_second_order_unrolled_architect(torch):
    # DARTS' second-order Architect as the reference architect.py writes it: the unrolled model
    # w' = w - eta * (momentum + dL_train/dw + wd * w) built from a flat theta through
    # model.new() + load_state_dict, the validation loss backpropagated to alpha, and the
    # finite-difference Hessian-vector product with R = 0.01 / |v| (with its deprecated
    # ``p.data.add_(R, v)`` calls); then the usual weight step
    nn, F = torch.nn, torch.nn.functional
    PRIMITIVES = ["none", "avg_pool_3x3", "skip_connect", "conv_3x3"]
    C, n_classes = 3, 3

    def _concat(xs):
        return torch.cat([x.view(-1) for x in xs])

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    OPS = {
        "none": lambda: Zero(),
        "avg_pool_3x3": lambda: nn.Sequential(
            nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
            nn.BatchNorm2d(C, affine=False),
        ),
        "skip_connect": lambda: nn.Identity(),
        "conv_3x3": lambda: nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(C, C, 3, padding=1, bias=False),
            nn.BatchNorm2d(C, affine=False),
        ),  # fmt: skip
    }

    class MixedOp(nn.Module):
        def __init__(self):
            super().__init__()
            self._ops = nn.ModuleList(OPS[p]() for p in PRIMITIVES)

        def forward(self, x, weights):
            return sum(w * op(x) for w, op in zip(weights, self._ops))

    class Network(nn.Module):
        def __init__(self, criterion):
            super().__init__()
            self._criterion = criterion
            self.stem = nn.Sequential(nn.Conv2d(2, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
            self.edges = nn.ModuleList(MixedOp() for _ in range(3))  # node 2 <- {0, 1}, node 3 <- 2
            self.classifier = nn.Linear(C, n_classes)
            self._initialize_alphas()

        def _initialize_alphas(self):
            self.alphas_normal = torch.tensor(arr(90, 3, len(PRIMITIVES), scale=1e-3))
            self.alphas_normal.requires_grad_(True)
            self._arch_parameters = [self.alphas_normal]

        def arch_parameters(self):
            return self._arch_parameters

        def new(self):
            model_new = Network(self._criterion)
            for x, y in zip(model_new.arch_parameters(), self.arch_parameters()):
                x.data.copy_(y.data)
            return model_new

        def forward(self, x):
            w = F.softmax(self.alphas_normal, dim=-1)
            s0 = self.stem(x)
            s1 = self.edges[0](s0, w[0]) + self.edges[1](F.relu(s0), w[1])
            s2 = self.edges[2](s1, w[2])
            return self.classifier(F.adaptive_avg_pool2d(s2, 1).flatten(1))

        def _loss(self, input, target):
            return self._criterion(self(input), target)

    class Architect:
        def __init__(self, model, momentum=0.9, weight_decay=3e-4):
            self.network_momentum = momentum
            self.network_weight_decay = weight_decay
            self.model = model
            self.optimizer = torch.optim.Adam(
                self.model.arch_parameters(), lr=0.05, betas=(0.5, 0.999), weight_decay=1e-3
            )

        def _compute_unrolled_model(self, input, target, eta, network_optimizer):
            loss = self.model._loss(input, target)
            theta = _concat(self.model.parameters()).data
            try:
                moment = _concat(
                    network_optimizer.state[v]["momentum_buffer"] for v in self.model.parameters()
                ).mul_(self.network_momentum)
            except KeyError:
                moment = torch.zeros_like(theta)
            dtheta = (
                _concat(torch.autograd.grad(loss, self.model.parameters())).data
                + self.network_weight_decay * theta
            )
            return self._construct_model_from_theta(theta.sub(eta, moment + dtheta))

        def _construct_model_from_theta(self, theta):
            model_new = self.model.new()
            model_dict = self.model.state_dict()
            params, offset = {}, 0
            for k, v in self.model.named_parameters():
                v_length = np.prod(v.size())
                params[k] = theta[offset : offset + v_length].view(v.size())
                offset += v_length
            assert offset == len(theta)
            model_dict.update(params)
            model_new.load_state_dict(model_dict)
            return model_new

        def _hessian_vector_product(self, vector, input, target, r=1e-2):
            R = r / _concat(vector).norm()
            for p, v in zip(self.model.parameters(), vector):
                p.data.add_(R, v)
            loss = self.model._loss(input, target)
            grads_p = torch.autograd.grad(loss, self.model.arch_parameters())
            for p, v in zip(self.model.parameters(), vector):
                p.data.sub_(2 * R, v)
            loss = self.model._loss(input, target)
            grads_n = torch.autograd.grad(loss, self.model.arch_parameters())
            for p, v in zip(self.model.parameters(), vector):
                p.data.add_(R, v)
            return [(x - y).div_(2 * R) for x, y in zip(grads_p, grads_n)], R

        def step(
            self, input_train, target_train, input_valid, target_valid, eta, network_optimizer
        ):
            self.optimizer.zero_grad()
            unrolled_model = self._compute_unrolled_model(
                input_train, target_train, eta, network_optimizer
            )
            unrolled_loss = unrolled_model._loss(input_valid, target_valid)
            unrolled_loss.backward()
            dalpha = [v.grad for v in unrolled_model.arch_parameters()]
            vector = [v.grad.data for v in unrolled_model.parameters()]
            implicit_grads, R = self._hessian_vector_product(vector, input_train, target_train)
            for g, ig in zip(dalpha, implicit_grads):
                g.data.sub_(eta, ig.data)
            for v, g in zip(self.model.arch_parameters(), dalpha):
                if v.grad is None:
                    v.grad = g.data
                else:
                    v.grad.data.copy_(g.data)
            self.optimizer.step()
            return unrolled_loss, implicit_grads[0], R

    criterion = nn.CrossEntropyLoss()
    model = set_weights(torch, Network(criterion), seed=91)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 4, eta_min=1e-3)
    architect = Architect(model)
    x_train, y_train = torch.tensor(arr(92, 4, 2, 5, 5)), torch.tensor(ints(93, n_classes, 4))
    x_val, y_val = torch.tensor(arr(94, 4, 2, 5, 5)), torch.tensor(ints(95, n_classes, 4))
    out = {"unrolled_loss": [], "implicit": [], "R": [], "alpha_grad": [], "train_loss": []}
    model.train()
    for _ in range(2):
        lr = scheduler.get_last_lr()[0]
        unrolled_loss, implicit, R = architect.step(x_train, y_train, x_val, y_val, lr, optimizer)
        out["unrolled_loss"].append(unrolled_loss.detach())
        out["implicit"].append(implicit)
        out["R"].append(R)
        out["alpha_grad"].append(model.alphas_normal.grad.clone())
        optimizer.zero_grad()
        loss = criterion(model(x_train), y_train)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        out["train_loss"].append(loss.item())
    out["alphas"] = model.alphas_normal
    out["weights"] = params(model)
    out["stem_running_var"] = model.stem[1].running_var
    out["best_ops"] = [PRIMITIVES[1 + i] for i in model.alphas_normal[:, 1:].argmax(1).tolist()]
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_capsnet_dynamic_routing_margin_loss(torch):
    # Sabour et al. CapsNet: conv -> primary capsules (squashed), prediction vectors u_hat = W u,
    # three iterations of routing-by-agreement (softmax over parent capsules, agreement added to
    # the logits, u_hat detached in the inner iterations), margin loss plus masked reconstruction
    nn, F = torch.nn, torch.nn.functional
    B, n_classes, prim_ch, prim_dim, out_dim = 4, 3, 4, 4, 6

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, kernel_size=5)
            self.primary = nn.Conv2d(8, prim_ch * prim_dim, kernel_size=3, stride=2)
            self.num_routes = prim_ch * 3 * 3
            self.W = nn.Parameter(torch.zeros(1, self.num_routes, n_classes, out_dim, prim_dim))
            self.decoder = nn.Sequential(
                nn.Linear(n_classes * out_dim, 24),
                nn.ReLU(inplace=True),
                nn.Linear(24, 121),
                nn.Sigmoid(),
            )

        def forward(self, x, y=None, iterations=3):
            h = F.relu(self.conv1(x))
            u = self.primary(h)  # (B, ch*dim, 3, 3)
            u = u.view(x.size(0), prim_ch, prim_dim, 3, 3).permute(0, 1, 3, 4, 2)
            u = _squash(torch, u.reshape(x.size(0), self.num_routes, prim_dim))
            u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)  # (B, R, J, D)
            u_hat_detached = u_hat.detach()
            b = torch.zeros(x.size(0), self.num_routes, n_classes)
            for r in range(iterations):
                c = F.softmax(b, dim=2)
                if r == iterations - 1:
                    v = _squash(torch, (c.unsqueeze(-1) * u_hat).sum(dim=1))
                else:
                    v = _squash(torch, (c.unsqueeze(-1) * u_hat_detached).sum(dim=1))
                    b = b + (u_hat_detached * v.unsqueeze(1)).sum(dim=-1)
            lengths = v.norm(dim=-1)
            if y is None:
                y = lengths.argmax(dim=1)
            mask = F.one_hot(y, n_classes).float()
            recon = self.decoder((v * mask.unsqueeze(-1)).flatten(1))
            return lengths, recon, c, v

    def margin_loss(lengths, labels, m_pos=0.9, m_neg=0.1, lam=0.5):
        T = F.one_hot(labels, n_classes).float()
        loss = T * F.relu(m_pos - lengths) ** 2 + lam * (1 - T) * F.relu(lengths - m_neg) ** 2
        return loss.sum(dim=1).mean()

    model = set_weights(torch, CapsNet(), seed=8)
    with torch.no_grad():
        model.W.copy_(torch.tensor(arr(7, *model.W.shape, scale=0.3)))
    images = torch.tensor(np.random.default_rng(9).uniform(0, 1, (B, 1, 11, 11)).astype(np.float32))
    labels = torch.tensor(ints(10, n_classes, B))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    out = {"margin": [], "recon": []}
    for _ in range(3):
        opt.zero_grad()
        lengths, recon, c, v = model(images, labels)
        m = margin_loss(lengths, labels)
        r = F.mse_loss(recon, images.view(B, -1), reduction="sum") / B
        (m + 0.0005 * r).backward()
        opt.step()
        out["margin"].append(m.detach())
        out["recon"].append(r.detach())
    out["W_grad"] = model.W.grad
    out["conv1_grad"] = model.conv1.weight.grad
    lengths, recon, c, v = model(images)
    out["lengths"] = lengths
    out["coupling"] = c
    out["digit_caps"] = v
    out["pred"] = lengths.argmax(1)
    out["recon_eval"] = recon
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_ntm_addressing_copy_task(torch):
    # Graves et al. NTM with an LSTM controller (as in pytorch-ntm): content addressing by cosine
    # similarity and a softplus key strength, interpolation with the previous weighting, circular
    # shift by conv1d over a wrapped weighting, sharpening; erase/add writes; copy task with
    # BCE-with-logits, RMSprop and clip_grad_value_
    nn, F = torch.nn, torch.nn.functional
    N, M, bits, B, seq_len, hidden = 8, 5, 3, 2, 3, 12

    class Head(nn.Module):
        def __init__(self, write):
            super().__init__()
            self.write = write
            lengths = [M, 1, 1, 3, 1] + ([M, M] if write else [])
            self.lengths = lengths
            self.fc = nn.Linear(hidden, sum(lengths))

        def address(self, memory, k, beta, g, s, gamma, w_prev):
            k, beta, g = k.clone(), F.softplus(beta), torch.sigmoid(g)
            s, gamma = F.softmax(s, dim=1), 1 + F.softplus(gamma)
            sim = F.cosine_similarity(memory + 1e-16, k.unsqueeze(1) + 1e-16, dim=-1)
            wc = F.softmax(beta * sim, dim=1)
            wg = g * wc + (1 - g) * w_prev
            w_hat = torch.zeros(wg.size())
            for b in range(B):
                t = torch.cat([wg[b][-1:], wg[b], wg[b][:1]])
                w_hat[b] = F.conv1d(t.view(1, 1, -1), s[b].view(1, 1, -1)).view(-1)
            w = w_hat**gamma
            return torch.div(w, torch.sum(w, dim=1).view(-1, 1) + 1e-16), wc

        def forward(self, h, memory, w_prev):
            o = self.fc(h)
            parts = torch.split(o, self.lengths, dim=1)
            w, wc = self.address(memory, *parts[:5], w_prev)
            return w, wc, parts[5:]

    class NTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.controller = nn.LSTMCell(bits + 1 + M, hidden)
            self.read_head, self.write_head = Head(False), Head(True)
            self.out = nn.Linear(hidden + M, bits)
            self.register_buffer("mem_bias", torch.tensor(arr(11, N, M, scale=0.05)))

        def init_sequence(self):
            memory = self.mem_bias.clone().repeat(B, 1, 1)
            w0 = torch.zeros(B, N)
            w0[:, 0] = 1.0
            return memory, (torch.zeros(B, hidden), torch.zeros(B, hidden)), w0, w0.clone()

        def step(self, x, state):
            memory, (h, c), w_r, w_w, r = state
            h, c = self.controller(torch.cat([x, r], dim=1), (h, c))
            w_r, wc_r, _ = self.read_head(h, memory, w_r)
            r = torch.matmul(w_r.unsqueeze(1), memory).squeeze(1)
            w_w, _, (e, a) = self.write_head(h, memory, w_w)
            e, a = torch.sigmoid(e), torch.tanh(a)
            erase = torch.matmul(w_w.unsqueeze(-1), e.unsqueeze(1))
            add = torch.matmul(w_w.unsqueeze(-1), a.unsqueeze(1))
            memory = memory * (1 - erase) + add
            y = self.out(torch.cat([h, r], dim=1))
            return y, (memory, (h, c), w_r, w_w, r), wc_r

    model = set_weights(torch, NTM(), seed=12)
    seq = torch.tensor(
        np.random.default_rng(13).integers(0, 2, (seq_len, B, bits)).astype(np.float32)
    )
    inp = torch.zeros(seq_len + 1, B, bits + 1)
    inp[:seq_len, :, :bits] = seq
    inp[seq_len, :, bits] = 1.0  # delimiter
    opt = torch.optim.RMSprop(model.parameters(), lr=3e-3, momentum=0.9, alpha=0.95)
    out = {"losses": [], "read_weights": [], "content_weights": []}
    for it in range(3):
        opt.zero_grad()
        memory, hc, w_r, w_w = model.init_sequence()
        state = (memory, hc, w_r, w_w, torch.zeros(B, M))
        for t in range(seq_len + 1):
            _, state, _ = model.step(inp[t], state)
        ys = []
        for _ in range(seq_len):
            y, state, wc = model.step(torch.zeros(B, bits + 1), state)
            ys.append(y)
            if it == 2:
                out["read_weights"].append(state[2])
                out["content_weights"].append(wc)
        logits = torch.stack(ys)
        loss = F.binary_cross_entropy_with_logits(logits, seq)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 10)
        opt.step()
        out["losses"].append(loss.item())
    out["memory"] = state[0]
    out["bit_errors"] = ((torch.sigmoid(logits) > 0.5).float() - seq).abs().sum()
    out["grads"] = grads(model)
    # the same circular shift written with torch.roll, as other implementations do
    w, s = state[2], F.softmax(torch.tensor(arr(14, B, 3)), dim=1)
    rolled = torch.stack([torch.roll(w, shifts=j - 1, dims=1) for j in range(3)], dim=-1)
    out["shift_by_roll"] = (rolled * s.unsqueeze(1)).sum(-1)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_dnc_allocation_and_temporal_links(torch):
    # DeepMind's DNC memory access: usage with free gates, allocation weighting from usage sorted
    # ascending with an exclusive cumprod scattered back, write weighting gated between allocation
    # and content, temporal link matrix with precedence, forward/backward read modes
    nn, F = torch.nn, torch.nn.functional
    B, N, W, R, hidden, T, in_dim = 2, 6, 4, 2, 10, 4, 3
    eps = 1e-6

    def oneplus(x):
        return 1 + F.softplus(x)

    def content(memory, keys, strengths):
        # keys (B, H, W), memory (B, N, W) -> (B, H, N)
        mem_n = memory / (memory.norm(dim=2, keepdim=True) + eps)
        key_n = keys / (keys.norm(dim=2, keepdim=True) + eps)
        sim = torch.bmm(key_n, mem_n.transpose(1, 2))
        return F.softmax(sim * strengths.unsqueeze(-1), dim=-1)

    def allocation(usage):
        usage = eps + (1 - eps) * usage
        sorted_usage, phi = torch.sort(usage, dim=1)
        prod = torch.cumprod(sorted_usage, dim=1)
        exclusive = torch.cat([torch.ones(usage.size(0), 1), prod[:, :-1]], dim=1)
        sorted_alloc = (1 - sorted_usage) * exclusive
        return torch.zeros_like(usage).scatter(1, phi, sorted_alloc)

    sizes = {"read_keys": R * W, "read_str": R, "write_key": W, "write_str": 1, "erase": W,
             "write_vec": W, "free": R, "alloc_gate": 1, "write_gate": 1, "modes": 3 * R}  # fmt: skip

    class DNC(nn.Module):
        def __init__(self):
            super().__init__()
            self.controller = nn.LSTMCell(in_dim + R * W, hidden)
            self.interface = nn.Linear(hidden, sum(sizes.values()))
            self.output = nn.Linear(hidden + R * W, in_dim)

        def forward(self, xs, state):
            memory, usage, link, prec, w_w, w_r, r, (h, c) = state
            ys, trace = [], {"usage": [], "alloc": [], "w_w": [], "w_r": []}
            for x in xs:
                h, c = self.controller(torch.cat([x, r.flatten(1)], dim=1), (h, c))
                p = dict(zip(sizes, torch.split(self.interface(h), list(sizes.values()), dim=1)))
                free = torch.sigmoid(p["free"])
                psi = torch.prod(1 - free.unsqueeze(-1) * w_r, dim=1)
                usage = (usage + w_w - usage * w_w) * psi
                alloc = allocation(usage)
                cw = content(memory, p["write_key"].view(B, 1, W), oneplus(p["write_str"]))
                ga, gw = torch.sigmoid(p["alloc_gate"]), torch.sigmoid(p["write_gate"])
                w_w = gw * (ga * alloc + (1 - ga) * cw.squeeze(1))
                erase = torch.sigmoid(p["erase"])
                memory = memory * (1 - w_w.unsqueeze(-1) * erase.unsqueeze(1))
                memory = memory + w_w.unsqueeze(-1) * p["write_vec"].unsqueeze(1)
                link = (1 - w_w.unsqueeze(2) - w_w.unsqueeze(1)) * link
                link = link + w_w.unsqueeze(2) * prec.unsqueeze(1)
                link = link * (1 - torch.eye(N)).unsqueeze(0)
                prec = (1 - w_w.sum(1, keepdim=True)) * prec + w_w
                fwd = torch.bmm(w_r, link.transpose(1, 2))
                bwd = torch.bmm(w_r, link)
                cr = content(memory, p["read_keys"].view(B, R, W), oneplus(p["read_str"]))
                modes = F.softmax(p["modes"].view(B, R, 3), dim=-1)
                w_r = modes[..., 0:1] * bwd + modes[..., 1:2] * cr + modes[..., 2:3] * fwd
                r = torch.bmm(w_r, memory)
                ys.append(self.output(torch.cat([h, r.flatten(1)], dim=1)))
                for k, v in zip(trace, (usage, alloc, w_w, w_r)):
                    trace[k].append(v)
            return torch.stack(ys), (memory, usage, link, prec), trace

    model = set_weights(torch, DNC(), seed=15)

    def initial_state():
        # a state carried over from an earlier episode (distinct usages, so the sort is unique)
        usage0 = torch.tensor(
            np.random.default_rng(16).uniform(0.05, 0.9, (B, N)).astype(np.float32)
        )
        w_r0 = F.softmax(torch.tensor(arr(17, B, R, N)), dim=-1)
        return (torch.tensor(arr(18, B, N, W, scale=0.3)), usage0, torch.zeros(B, N, N),
                torch.zeros(B, N), torch.zeros(B, N), w_r0, torch.zeros(B, R, W),
                (torch.zeros(B, hidden), torch.zeros(B, hidden)))  # fmt: skip

    xs = torch.tensor(arr(19, T, B, in_dim))
    targets = torch.flip(xs, dims=[0])
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    out = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        ys, final, trace = model(xs, initial_state())
        loss = F.mse_loss(ys, targets)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["usage"] = torch.stack(trace["usage"])
    out["allocation"] = torch.stack(trace["alloc"])
    out["write_weights"] = torch.stack(trace["w_w"])
    out["read_weights"] = torch.stack(trace["w_r"])
    out["link"] = final[2]
    out["precedence"] = final[3]
    out["interface_grad"] = model.interface.weight.grad
    out["alloc_sums"] = out["allocation"].sum(-1)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_memn2n_three_hops_position_encoding(torch):
    # Sukhbaatar et al. end-to-end memory network on bAbI-shaped batches: adjacent weight tying
    # (A_{k+1} = C_k, B = A_1, W^T = C_K), position encoding, temporal encoding, padding_idx 0
    # sentences, SGD with clip_grad_norm_(40), attention over the memories at every hop
    nn, F = torch.nn, torch.nn.functional
    vocab, d, hops, n_mem, J, B = 20, 8, 3, 5, 4, 4

    def position_encoding(J, d):
        enc = np.ones((J, d), dtype=np.float32)
        for k in range(1, d + 1):
            for j in range(1, J + 1):
                enc[j - 1, k - 1] = (1 - j / J) - (k / d) * (1 - 2 * j / J)
        return torch.from_numpy(enc)

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.ModuleList(nn.Embedding(vocab, d, padding_idx=0) for _ in range(hops + 1))
            self.TA = nn.Parameter(torch.zeros(n_mem, d))
            self.TC = nn.Parameter(torch.zeros(n_mem, d))
            self.register_buffer("encoding", position_encoding(J, d))

        def forward(self, story, query):
            u = (self.C[0](query) * self.encoding).sum(1)
            attn = []
            for hop in range(hops):
                m = (self.C[hop](story) * self.encoding).sum(2) + self.TA
                c = (self.C[hop + 1](story) * self.encoding).sum(2) + self.TC
                p = F.softmax(torch.bmm(m, u.unsqueeze(2)).squeeze(2), dim=-1)
                o = torch.bmm(p.unsqueeze(1), c).squeeze(1)
                u = u + o
                attn.append(p)
            return u @ self.C[hops].weight.t(), attn

    model = MemN2N()
    with torch.no_grad():
        for i, emb in enumerate(model.C):
            emb.weight.copy_(torch.tensor(arr(20 + i, vocab, d, scale=0.1)))
            emb.weight[0].zero_()
        model.TA.copy_(torch.tensor(arr(25, n_mem, d, scale=0.1)))
        model.TC.copy_(torch.tensor(arr(26, n_mem, d, scale=0.1)))
    story = ints(27, vocab - 1, B, n_mem, J) + 1
    story[:, :, 3] = 0  # short sentences are padded
    story[0, 3:] = 0  # the first story has only three sentences
    story, query = torch.tensor(story), torch.tensor(ints(28, vocab - 1, B, J) + 1)
    answer = torch.tensor(ints(29, vocab, B))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out = {"losses": [], "grad_norms": []}
    for _ in range(4):
        opt.zero_grad()
        logits, attn = model(story, query)
        loss = F.cross_entropy(logits, answer, reduction="sum")
        loss.backward()
        out["grad_norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 40.0))
        opt.step()
        out["losses"].append(loss.item())
    out["attention"] = attn
    out["pad_row_grad"] = torch.stack([emb.weight.grad[0] for emb in model.C])
    out["emb_grads"] = [emb.weight.grad for emb in model.C]
    out["TA"] = model.TA
    with torch.no_grad():
        logits, _ = model(story, query)
    out["pred"] = logits.argmax(1)
    out["acc"] = (logits.argmax(1) == answer).float().mean()
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_pointer_network_sorting(torch):
    # Vinyals et al. pointer network for sorting: LSTM encoder, LSTMCell decoder with a learned
    # first input, additive attention whose logits are the pointer distribution, already-chosen
    # positions masked with -inf, teacher forcing with gathered encoder inputs; greedy decoding
    nn, F = torch.nn, torch.nn.functional
    B, L, E, H = 3, 5, 8, 8

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W1 = nn.Linear(H, H, bias=False)
            self.W2 = nn.Linear(H, H, bias=False)
            self.v = nn.Linear(H, 1, bias=False)

        def forward(self, enc, dec, mask):
            u = self.v(torch.tanh(self.W1(enc) + self.W2(dec).unsqueeze(1))).squeeze(-1)
            return u.masked_fill(mask, float("-inf"))

    class PointerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(1, E)
            self.encoder = nn.LSTM(E, H, batch_first=True)
            self.decoder = nn.LSTMCell(E, H)
            self.attn = Attention()
            self.decoder_input0 = nn.Parameter(torch.zeros(E))

        def forward(self, x, targets=None):
            emb = self.embed(x.unsqueeze(-1))
            enc, (h, c) = self.encoder(emb)
            h, c = h[-1], c[-1]
            dec_in = self.decoder_input0.unsqueeze(0).expand(x.size(0), -1)
            mask = torch.zeros(x.size(0), L, dtype=torch.bool)
            logps, pointers = [], []
            for i in range(L):
                h, c = self.decoder(dec_in, (h, c))
                logits = self.attn(enc, h, mask)
                logps.append(F.log_softmax(logits, dim=-1))
                idx = targets[:, i] if targets is not None else logits.argmax(dim=-1)
                pointers.append(idx)
                mask = mask.scatter(1, idx.unsqueeze(1), True)
                dec_in = emb[torch.arange(x.size(0)), idx]
            return torch.stack(logps, 1), torch.stack(pointers, 1)

    model = set_weights(torch, PointerNet(), seed=30)
    x = torch.tensor(np.random.default_rng(31).uniform(0, 1, (B, L)).astype(np.float32))
    targets = torch.argsort(x, dim=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    out = {"losses": []}
    for _ in range(4):
        opt.zero_grad()
        logp, _ = model(x, targets)
        loss = F.nll_loss(logp.reshape(-1, L), targets.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        out["losses"].append(loss.item())
    out["grads"] = grads(model)
    with torch.no_grad():
        logp, pointers = model(x)
    out["greedy_pointers"] = pointers
    out["greedy_logp"] = logp.masked_fill(torch.isinf(logp), 0.0)
    out["n_masked"] = torch.isinf(logp).sum()
    out["sorted_by_pointer"] = torch.gather(x, 1, pointers)
    out["exact"] = (pointers == targets).all(dim=1)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_slot_attention_autoencoder(torch):
    # Locatello et al. slot attention: slots sampled from a learned Gaussian (the noise fixed
    # here), softmax over slots (dim=1) plus epsilon, weighted mean over inputs, GRUCell update
    # and residual MLP; spatial-broadcast decoder whose alpha masks are a softmax over slots
    nn, F = torch.nn, torch.nn.functional
    B, side, D, K, iters = 2, 3, 8, 3, 3

    class SlotAttention(nn.Module):
        def __init__(self, num_slots, dim, iters=3, eps=1e-8, hidden_dim=16):
            super().__init__()
            self.num_slots, self.iters, self.eps, self.scale = num_slots, iters, eps, dim**-0.5
            self.slots_mu = nn.Parameter(torch.zeros(1, 1, dim))
            self.slots_logsigma = nn.Parameter(torch.zeros(1, 1, dim))
            self.to_q = nn.Linear(dim, dim, bias=False)
            self.to_k = nn.Linear(dim, dim, bias=False)
            self.to_v = nn.Linear(dim, dim, bias=False)
            self.gru = nn.GRUCell(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(inplace=True),
                                     nn.Linear(hidden_dim, dim))  # fmt: skip
            self.norm_input = nn.LayerNorm(dim)
            self.norm_slots = nn.LayerNorm(dim)
            self.norm_pre_ff = nn.LayerNorm(dim)

        def forward(self, inputs, noise):
            b, n, d = inputs.shape
            slots = self.slots_mu + self.slots_logsigma.exp() * noise
            inputs = self.norm_input(inputs)
            k, v = self.to_k(inputs), self.to_v(inputs)
            for _ in range(self.iters):
                slots_prev = slots
                slots = self.norm_slots(slots)
                q = self.to_q(slots)
                dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
                attn = dots.softmax(dim=1) + self.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = self.gru(updates.reshape(-1, d), slots_prev.reshape(-1, d))
                slots = slots.reshape(b, -1, d)
                slots = slots + self.mlp(self.norm_pre_ff(slots))
            return slots, attn

    def build_grid(side):
        ranges = [np.linspace(0.0, 1.0, num=side) for _ in range(2)]
        grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).reshape(side, side, 2)
        return torch.from_numpy(np.concatenate([grid, 1.0 - grid], -1).astype(np.float32))

    class Autoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Conv2d(3, D, 3, padding=1)
            self.pos = nn.Linear(4, D)
            self.slot_attention = SlotAttention(K, D, iters)
            self.dec_pos = nn.Linear(4, D)
            self.decoder = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, 4))
            self.register_buffer("grid", build_grid(side))

        def forward(self, image, noise):
            x = self.encoder(image).permute(0, 2, 3, 1) + self.pos(self.grid)
            x = x.flatten(1, 2)
            slots, attn = self.slot_attention(x, noise)
            z = slots.reshape(-1, D)[:, None, None, :].repeat(1, side, side, 1)
            y = self.decoder(z + self.dec_pos(self.grid)).view(B, K, side, side, 4)
            recons, masks = y.split([3, 1], dim=-1)
            masks = masks.softmax(dim=1)
            recon = (recons * masks).sum(dim=1).permute(0, 3, 1, 2)
            return recon, masks, slots, attn

    model = set_weights(torch, Autoencoder(), seed=32)
    image = torch.tensor(
        np.random.default_rng(33).uniform(-1, 1, (B, 3, side, side)).astype(np.float32)
    )
    noise = torch.tensor(arr(34, B, K, D))
    opt = torch.optim.Adam(model.parameters(), lr=4e-3)
    out = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        recon, masks, slots, attn = model(image, noise)
        loss = F.mse_loss(recon, image)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["attn"] = attn
    out["attn_slot_sums"] = attn.sum(1)
    out["masks"] = masks.squeeze(-1)
    out["slots"] = slots
    out["gru_grad"] = model.slot_attention.gru.weight_hh.grad
    out["mu_grad"] = model.slot_attention.slots_mu.grad
    out["logsigma"] = model.slot_attention.slots_logsigma
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_perceiver_latent_cross_attention(torch):
    # Jaegle et al. Perceiver: a learned latent array cross-attends (nn.MultiheadAttention with
    # kdim/vdim of the byte array) to inputs with Fourier position features, then a pre-norm
    # latent Transformer layer; the cross-attend/self-attend block repeated with shared weights
    nn, F = torch.nn, torch.nn.functional
    B, M, C_in, N_lat, D, bands, n_classes = 3, 10, 2, 4, 8, 3, 4

    def fourier_encode(pos, max_freq=5.0, num_bands=bands):
        x = pos.unsqueeze(-1)
        scales = torch.linspace(1.0, max_freq / 2, num_bands, dtype=x.dtype)
        x = x * scales * math.pi
        return torch.cat([x.sin(), x.cos(), pos.unsqueeze(-1)], dim=-1)

    class CrossAttention(nn.Module):
        def __init__(self, kv_dim):
            super().__init__()
            self.norm_q, self.norm_kv = nn.LayerNorm(D), nn.LayerNorm(kv_dim)
            self.attn = nn.MultiheadAttention(D, 1, kdim=kv_dim, vdim=kv_dim, batch_first=True)
            self.norm_ff = nn.LayerNorm(D)
            self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, latents, data):
            kv = self.norm_kv(data)
            a, w = self.attn(self.norm_q(latents), kv, kv, need_weights=True)
            latents = latents + a
            return latents + self.ff(self.norm_ff(latents)), w

    class Perceiver(nn.Module):
        def __init__(self):
            super().__init__()
            kv_dim = C_in + 2 * bands + 1
            self.latents = nn.Parameter(torch.zeros(N_lat, D))
            self.cross = CrossAttention(kv_dim)
            self.latent_tf = nn.TransformerEncoderLayer(
                D, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True
            )
            self.head = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, n_classes))

        def forward(self, data, depth=2):
            pos = torch.linspace(-1.0, 1.0, data.size(1))
            enc = fourier_encode(pos).unsqueeze(0).expand(data.size(0), -1, -1)
            data = torch.cat([data, enc], dim=-1)
            x = self.latents.unsqueeze(0).repeat(data.size(0), 1, 1)
            maps = []
            for _ in range(depth):
                x, w = self.cross(x, data)
                x = self.latent_tf(x)
                maps.append(w)
            return self.head(x.mean(dim=1)), maps

    model = set_weights(torch, Perceiver(), seed=35)
    data = torch.tensor(arr(36, B, M, C_in))
    y = torch.tensor(ints(37, n_classes, B))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model.train()
    out = {"losses": []}
    for _ in range(3):
        opt.zero_grad()
        logits, maps = model(data)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["cross_attn_maps"] = maps
    out["latents"] = model.latents
    out["in_proj_q_grad"] = model.cross.attn.q_proj_weight.grad
    out["k_proj_grad"] = model.cross.attn.k_proj_weight.grad
    out["ff_grad"] = model.latent_tf.linear1.weight.grad
    model.eval()
    with torch.no_grad():
        out["eval_logits"], _ = model(data)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_nec_differentiable_neural_dictionary(torch):
    # Pritzel et al. Neural Episodic Control: a DND per action with trainable keys and values,
    # k nearest neighbours by squared distance with topk(largest=False), inverse-distance kernel
    # 1/(d + delta), Q = weighted mean of values; N-step targets with MSE, RMSprop on the embedding
    # and the dictionaries; writes replace the least recently used slots with index_copy_
    nn, F = torch.nn, torch.nn.functional
    obs_dim, key_dim, capacity, k, n_actions, B = 6, 4, 12, 4, 2, 5
    delta = 1e-3

    class DND(nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.keys = nn.Parameter(torch.tensor(arr(seed, capacity, key_dim)))
            self.values = nn.Parameter(torch.tensor(arr(seed + 1, capacity)))
            self.register_buffer("ages", torch.arange(capacity, dtype=torch.float32))

        def lookup(self, h):
            dist = ((h.unsqueeze(1) - self.keys.unsqueeze(0)) ** 2).sum(-1)
            d, idx = torch.topk(dist, k, dim=1, largest=False)
            kernel = 1.0 / (d + delta)
            w = kernel / kernel.sum(dim=1, keepdim=True)
            with torch.no_grad():
                self.ages += 1
                self.ages[idx.flatten()] = 0
            return (w * self.values[idx]).sum(1), idx, w

        @torch.no_grad()
        def write(self, h, v):
            # the least recently used slots, oldest first (ties by slot number)
            slots = torch.sort(self.ages, descending=True, stable=True).indices[: h.size(0)]
            self.keys.index_copy_(0, slots, h)
            self.values.index_copy_(0, slots, v)
            self.ages[slots] = 0
            return slots

    class NEC(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(nn.Linear(obs_dim, 8), nn.ReLU(), nn.Linear(8, key_dim))
            self.dnds = nn.ModuleList(DND(40 + 2 * a) for a in range(n_actions))

        def forward(self, obs):
            h = self.embed(obs)
            looked = [dnd.lookup(h) for dnd in self.dnds]
            return torch.stack([q for q, _, _ in looked], 1), h, looked

    model = NEC()
    set_weights(torch, model.embed, seed=38)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9, eps=1e-5)
    obs = torch.tensor(arr(39, 3, B, obs_dim))
    actions = torch.tensor(ints(50, n_actions, 3, B))
    rewards = torch.tensor(arr(51, 3, B))
    out = {"losses": [], "neighbours": [], "written": []}
    for step in range(3):
        opt.zero_grad()
        q, h, looked = model(obs[step])
        with torch.no_grad():
            target = rewards[step] + 0.9 * model(obs[(step + 1) % 3])[0].max(1).values
        q_a = q.gather(1, actions[step].unsqueeze(1)).squeeze(1)
        loss = F.mse_loss(q_a, target)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
        out["neighbours"].append(looked[0][1])
        for a in range(n_actions):
            chosen = actions[step] == a
            if chosen.any():
                out["written"].append(model.dnds[a].write(h.detach()[chosen], target[chosen]))
    out["kernel_weights"] = looked[1][2]
    out["keys"] = [dnd.keys for dnd in model.dnds]
    out["values"] = [dnd.values for dnd in model.dnds]
    out["ages"] = [dnd.ages for dnd in model.dnds]
    out["embed_grad"] = model.embed[0].weight.grad
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_product_key_memory_layer(torch):
    # Lample et al. product-key memory: a BatchNorm'd query per head split in two halves, top-k
    # over each sub-key set, the k x k Cartesian sums re-ranked with topk, indices combined as
    # i1 * n_sub + i2, softmax scores as per_sample_weights of an EmbeddingBag(mode="sum")
    nn, F = torch.nn, torch.nn.functional
    d_in, heads, k_dim, n_sub, knn, v_dim, B, n_classes = 8, 2, 6, 5, 3, 8, 6, 3

    class HashingMemory(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_proj = nn.Sequential(
                nn.Linear(d_in, heads * k_dim, bias=False),  # no bias before the BatchNorm
                nn.BatchNorm1d(heads * k_dim),
            )
            self.keys = nn.Parameter(torch.tensor(arr(52, heads, 2, n_sub, k_dim // 2, scale=0.5)))
            self.values = nn.EmbeddingBag(n_sub**2, v_dim, mode="sum")

        def get_indices(self, query):
            half = k_dim // 2
            scores, indices = [], []
            for h in range(heads):
                q1, q2 = query[:, h, :half], query[:, h, half:]
                s1, i1 = F.linear(q1, self.keys[h, 0]).topk(knn, dim=1)
                s2, i2 = F.linear(q2, self.keys[h, 1]).topk(knn, dim=1)
                all_scores = (s1.view(-1, knn, 1) + s2.view(-1, 1, knn)).view(-1, knn * knn)
                all_indices = (i1.view(-1, knn, 1) * n_sub + i2.view(-1, 1, knn)).view(
                    -1, knn * knn
                )
                sc, best = all_scores.topk(knn, dim=1)
                scores.append(sc)
                indices.append(all_indices.gather(1, best))
            return torch.stack(scores, 1), torch.stack(indices, 1)

        def forward(self, x):
            bs = x.size(0)
            query = self.query_proj(x).view(bs, heads, k_dim)
            scores, indices = self.get_indices(query)  # (bs, heads, knn)
            scores = F.softmax(scores.float(), dim=-1).type_as(scores)
            out = self.values(indices.view(-1, knn), per_sample_weights=scores.view(-1, knn))
            return out.view(bs, heads, v_dim).sum(1), indices, scores

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4, d_in)
            self.memory = HashingMemory()
            self.norm = nn.LayerNorm(d_in)
            self.out = nn.Linear(d_in, n_classes)

        def forward(self, x):
            h = torch.relu(self.inp(x))
            m, idx, sc = self.memory(h)
            return self.out(self.norm(h + m)), idx, sc

    model = set_weights(torch, Model(), seed=53)
    with torch.no_grad():
        model.memory.keys.copy_(torch.tensor(arr(52, heads, 2, n_sub, k_dim // 2, scale=0.5)))
        model.memory.values.weight.copy_(torch.tensor(arr(54, n_sub**2, v_dim, scale=v_dim**-0.5)))
    x, y = torch.tensor(arr(55, B, 4)), torch.tensor(ints(56, n_classes, B))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    out = {"losses": [], "indices": []}
    for _ in range(3):
        opt.zero_grad()
        logits, idx, sc = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
        out["indices"].append(idx)
    out["scores"] = sc
    out["values_grad"] = model.memory.values.weight.grad
    out["rows_used"] = (model.memory.values.weight.grad.abs().sum(1) > 0).sum()
    out["keys_grad"] = model.memory.keys.grad
    out["bn_running_mean"] = model.memory.query_proj[1].running_mean
    model.eval()
    with torch.no_grad():
        out["eval_logits"] = model(x)[0]
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_stack_augmented_rnn_anbn(torch):
    # Joulin & Mikolov stack-augmented RNN on a^n b^n: a softmax over PUSH/POP/NO-OP, the new top
    # a sigmoid of the hidden state, the continuous stack built from shifted copies with torch.cat;
    # next-symbol prediction with cross-entropy, SGD and clip_grad_norm_
    nn, F = torch.nn, torch.nn.functional
    vocab, hidden, depth, width = 3, 10, 6, 2  # symbols: a, b, end

    class StackRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.cell = nn.RNNCell(hidden + width, hidden, nonlinearity="tanh")
            self.action = nn.Linear(hidden, 3)
            self.push_value = nn.Linear(hidden, width)
            self.out = nn.Linear(hidden + width, vocab)

        def forward(self, tokens):
            b = tokens.size(0)
            h = torch.zeros(b, hidden)
            stack = torch.zeros(b, depth, width)
            logits, actions = [], []
            for t in range(tokens.size(1)):
                h = self.cell(torch.cat([self.embed(tokens[:, t]), stack[:, 0]], 1), h)
                a = F.softmax(self.action(h), dim=-1)
                top = torch.sigmoid(self.push_value(h)).unsqueeze(1)
                push = torch.cat([top, stack[:, :-1]], dim=1)
                pop = torch.cat([stack[:, 1:], torch.zeros(b, 1, width)], dim=1)
                stack = (a[:, 0, None, None] * push + a[:, 1, None, None] * pop
                         + a[:, 2, None, None] * stack)  # fmt: skip
                logits.append(self.out(torch.cat([h, stack[:, 0]], 1)))
                actions.append(a)
            return torch.stack(logits, 1), torch.stack(actions, 1), stack

    seqs = []
    for n in (1, 2, 3, 2):
        s = [0] * n + [1] * n + [2]
        seqs.append(s + [2] * (7 - len(s)))
    tokens = torch.tensor(seqs)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    model = set_weights(torch, StackRNN(), seed=57)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = {"losses": [], "norms": []}
    for _ in range(4):
        opt.zero_grad()
        logits, actions, stack = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        out["norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        out["losses"].append(loss.item())
    out["actions"] = actions
    out["stack"] = stack
    out["pred"] = logits.argmax(-1)
    out["grads"] = grads(model)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_modern_hopfield_retrieval_and_pooling(torch):
    # Ramsauer et al. "Hopfield Networks is All You Need": the update xi <- X softmax(beta X^T xi)
    # retrieving stored patterns from noisy queries with the energy -lse + 1/2 xi^T xi decreasing;
    # then a HopfieldPooling layer (a learned state pattern attending over a bag) trained for
    # multiple-instance learning with Adam
    nn, F = torch.nn, torch.nn.functional
    d, n_pat, beta = 6, 5, 2.0
    X = torch.tensor(arr(60, d, n_pat))
    xi = X[:, [0, 2, 4]] + torch.tensor(arr(61, d, 3, scale=0.4))

    def energy(xi):
        lse = torch.logsumexp(beta * X.t() @ xi, dim=0) / beta
        M = X.norm(dim=0).max()
        return -lse + 0.5 * (xi * xi).sum(0) + math.log(n_pat) / beta + 0.5 * M**2

    out = {"energies": [energy(xi)], "assoc": []}
    for _ in range(3):
        p = torch.softmax(beta * X.t() @ xi, dim=0)
        xi = X @ p
        out["energies"].append(energy(xi))
        out["assoc"].append(p)
    out["retrieved"] = xi
    out["nearest"] = (X.t() @ xi).argmax(0)

    class HopfieldPooling(nn.Module):
        def __init__(self, dim, hidden, scaling):
            super().__init__()
            self.query = nn.Parameter(torch.zeros(1, 1, hidden))
            self.k = nn.Linear(dim, hidden, bias=False)  # a key bias cannot change the softmax
            self.v = nn.Linear(dim, hidden)
            self.scaling = scaling

        def forward(self, bag, mask):
            keys, vals = self.k(bag), self.v(bag)
            logits = self.scaling * self.query @ keys.transpose(1, 2)
            logits = logits.masked_fill(~mask.unsqueeze(1), float("-inf"))
            assoc = logits.softmax(-1)
            return (assoc @ vals).squeeze(1), assoc.squeeze(1)

    class MIL(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
            self.pool = HopfieldPooling(8, 8, scaling=1 / math.sqrt(8))
            self.cls = nn.Linear(8, 1)

        def forward(self, bag, mask):
            z, assoc = self.pool(self.embed(bag), mask)
            return self.cls(z).squeeze(-1), assoc

    model = set_weights(torch, MIL(), seed=62)
    with torch.no_grad():
        model.pool.query.copy_(torch.tensor(arr(63, 1, 1, 8, scale=0.5)))
    bags = torch.tensor(arr(64, 4, 6, 5))
    lengths = torch.tensor([6, 4, 5, 3])
    mask = torch.arange(6).unsqueeze(0) < lengths.unsqueeze(1)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    out["mil_losses"] = []
    for _ in range(3):
        opt.zero_grad()
        logits, assoc = model(bags, mask)
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        loss.backward()
        opt.step()
        out["mil_losses"].append(loss.item())
    out["bag_assoc"] = assoc
    out["query_grad"] = model.pool.query.grad
    out["params"] = params(model)
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_pc_darts_partial_channels_edge_normalization(torch):
    # Xu et al. PC-DARTS on a reduction cell: each MixedOp runs its candidates on 1/k of the
    # channels (the rest bypassed, max-pooled when the edge has stride 2) followed by
    # channel_shuffle; edge normalization with softmax(betas) per node; DARTS's SepConv
    # (depthwise + pointwise) and FactorizedReduce; a cosine-annealed weight optimizer
    nn, F = torch.nn, torch.nn.functional
    PRIMITIVES = ["none", "max_pool_3x3", "skip_connect", "sep_conv_3x3"]
    C, k_part, steps, n_classes = 8, 4, 2, 3

    def channel_shuffle(x, groups):
        batchsize, num_channels, height, width = x.data.size()
        channels_per_group = num_channels // groups
        x = x.view(batchsize, groups, channels_per_group, height, width)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(batchsize, -1, height, width)

    class SepConv(nn.Module):
        def __init__(self, C_in, C_out, stride):
            super().__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, 3, stride=stride, padding=1, groups=C_in, bias=False),
                nn.Conv2d(C_in, C_in, kernel_size=1, padding=0, bias=False),
                nn.BatchNorm2d(C_in, affine=False),
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, 3, stride=1, padding=1, groups=C_in, bias=False),
                nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
                nn.BatchNorm2d(C_out, affine=False),
            )

        def forward(self, x):
            return self.op(x)

    class FactorizedReduce(nn.Module):
        def __init__(self, C_in, C_out):
            super().__init__()
            self.relu = nn.ReLU(inplace=False)
            self.conv_1 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
            self.conv_2 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
            self.bn = nn.BatchNorm2d(C_out, affine=False)

        def forward(self, x):
            x = self.relu(x)
            return self.bn(torch.cat([self.conv_1(x), self.conv_2(x[:, :, 1:, 1:])], dim=1))

    class Zero(nn.Module):
        def __init__(self, stride):
            super().__init__()
            self.stride = stride

        def forward(self, x):
            if self.stride == 1:
                return x.mul(0.0)
            return x[:, :, :: self.stride, :: self.stride].mul(0.0)

    OPS = {
        "none": lambda C, stride: Zero(stride),
        "max_pool_3x3": lambda C, stride: nn.MaxPool2d(3, stride=stride, padding=1),
        "skip_connect": lambda C, stride: nn.Identity() if stride == 1 else FactorizedReduce(C, C),
        "sep_conv_3x3": lambda C, stride: SepConv(C, C, stride),
    }

    class MixedOp(nn.Module):
        def __init__(self, C, stride):
            super().__init__()
            self._ops = nn.ModuleList()
            self.mp = nn.MaxPool2d(2, 2)
            for primitive in PRIMITIVES:
                op = OPS[primitive](C // k_part, stride)
                if "pool" in primitive:
                    op = nn.Sequential(op, nn.BatchNorm2d(C // k_part, affine=False))
                self._ops.append(op)

        def forward(self, x, weights):
            dim_2 = x.shape[1]
            xtemp = x[:, : dim_2 // k_part, :, :]
            xtemp2 = x[:, dim_2 // k_part :, :, :]
            temp1 = sum(w * op(xtemp) for w, op in zip(weights, self._ops))
            if temp1.shape[2] == x.shape[2]:
                ans = torch.cat([temp1, xtemp2], dim=1)
            else:
                ans = torch.cat([temp1, self.mp(xtemp2)], dim=1)
            return channel_shuffle(ans, k_part)

    class ReductionCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.preprocess0 = nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False),
                                             nn.BatchNorm2d(C, affine=False))  # fmt: skip
            self.preprocess1 = nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False),
                                             nn.BatchNorm2d(C, affine=False))  # fmt: skip
            self._ops = nn.ModuleList(
                MixedOp(C, 2 if j < 2 else 1) for i in range(steps) for j in range(2 + i)
            )

        def forward(self, s0, s1, weights, weights2):
            states = [self.preprocess0(s0), self.preprocess1(s1)]
            offset = 0
            for _ in range(steps):
                s = sum(weights2[offset + j] * self._ops[offset + j](h, weights[offset + j])
                        for j, h in enumerate(states))  # fmt: skip
                offset += len(states)
                states.append(s)
            return torch.cat(states[-steps:], dim=1)

    class Network(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
            self.cell = ReductionCell()
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(C * steps, n_classes)
            k = sum(2 + i for i in range(steps))
            self.alphas_reduce = torch.tensor(
                arr(70, k, len(PRIMITIVES), scale=1e-3)
            ).requires_grad_()
            self.betas_reduce = torch.tensor(arr(71, k, scale=1e-3)).requires_grad_()

        def arch_parameters(self):
            return [self.alphas_reduce, self.betas_reduce]

        def edge_weights(self):
            n, start = 3, 2
            weights2 = F.softmax(self.betas_reduce[0:2], dim=-1)
            for _ in range(steps - 1):
                end = start + n
                tw2 = F.softmax(self.betas_reduce[start:end], dim=-1)
                start = end
                n += 1
                weights2 = torch.cat([weights2, tw2], dim=0)
            return weights2

        def forward(self, x):
            s0 = s1 = self.stem(x)
            weights = F.softmax(self.alphas_reduce, dim=-1)
            out = self.global_pooling(self.cell(s0, s1, weights, self.edge_weights()))
            return self.classifier(out.view(out.size(0), -1))

    model = set_weights(torch, Network(), seed=72)
    criterion = nn.CrossEntropyLoss()
    w_opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=3e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(w_opt, T_max=4, eta_min=1e-3)
    a_opt = torch.optim.Adam(
        model.arch_parameters(), lr=6e-2, betas=(0.5, 0.999), weight_decay=1e-3
    )
    x_train, y_train = torch.tensor(arr(73, 4, 3, 6, 6)), torch.tensor(ints(74, n_classes, 4))
    x_val, y_val = torch.tensor(arr(75, 4, 3, 6, 6)), torch.tensor(ints(76, n_classes, 4))
    out = {"losses": [], "lrs": []}
    model.train()
    for _ in range(2):
        a_opt.zero_grad()
        criterion(model(x_val), y_val).backward()
        a_opt.step()
        w_opt.zero_grad()
        loss = criterion(model(x_train), y_train)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        w_opt.step()
        scheduler.step()
        out["losses"].append(loss.item())
        out["lrs"].append(scheduler.get_last_lr()[0])
    with torch.no_grad():
        strength = F.softmax(model.alphas_reduce, dim=-1) * model.edge_weights().unsqueeze(1)
    out["edge_strength"] = strength
    out["betas_grad"] = model.betas_reduce.grad
    out["alphas_grad"] = model.alphas_reduce.grad
    best = strength[:, 1:].argmax(dim=1) + 1  # never "none"
    out["genotype"] = str([(PRIMITIVES[int(b)], int(e)) for e, b in enumerate(best)])
    out["sep_conv_grad"] = model.cell._ops[0]._ops[3].op[1].weight.grad
    out["shuffled"] = channel_shuffle(torch.arange(16.0).view(1, 8, 1, 2), 4).flatten()
    return out


@program(rtol=5e-4, atol=5e-5)
def mem_memorizing_transformer_knn_attention(torch):
    # Wu et al. Memorizing Transformers (as lucidrains writes it): a segment's queries attend
    # causally to local keys and to the top-k of an external memory of (key, value) pairs from
    # earlier segments, with cosine-similarity attention and a learned temperature, mixed per head
    # by a learned sigmoid gate; the memory is a FIFO of detached keys and values. As in the paper
    # the kNN layer sits above an ordinary (causal, pre-norm) layer, so its keys carry context
    nn, F = torch.nn, torch.nn.functional
    vocab, dim, heads, dim_head, topk, max_mem, seg = 11, 12, 2, 4, 3, 8, 4

    class KNNAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.to_q = nn.Linear(dim, heads * dim_head, bias=False)
            self.to_kv = nn.Linear(dim, 2 * dim_head, bias=False)  # one shared kv head
            self.to_out = nn.Linear(heads * dim_head, dim, bias=False)
            self.scale = nn.Parameter(torch.ones(heads, 1, 1) * math.log(10.0))
            self.combine_attn_output_gate = nn.Parameter(torch.zeros(heads, 1, 1))

        def forward(self, x, mem_k, mem_v):
            b, n, _ = x.shape
            q = self.to_q(x).view(b, n, heads, dim_head).transpose(1, 2)
            k, v = self.to_kv(x).chunk(2, dim=-1)
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
            scale = self.scale.exp()
            sim = torch.einsum("b h i d, b j d -> b h i j", q, k) * scale
            causal = torch.ones(n, n, dtype=torch.bool).triu(1)
            sim = sim.masked_fill(causal, -torch.finfo(sim.dtype).max)
            local_out = torch.einsum("b h i j, b j d -> b h i d", sim.softmax(dim=-1), v)
            mem_sim = torch.einsum("b h i d, b j d -> b h i j", q, mem_k) * scale
            top_sim, idx = mem_sim.topk(topk, dim=-1)
            mem_values = mem_v[torch.arange(b)[:, None, None, None], idx]  # (b, h, i, k, d)
            mem_attn = top_sim.softmax(dim=-1)
            mem_out = torch.einsum("b h i k, b h i k d -> b h i d", mem_attn, mem_values)
            gate = self.combine_attn_output_gate.sigmoid()
            out = mem_out * gate + local_out * (1 - gate)
            out = out.transpose(1, 2).reshape(b, n, heads * dim_head)
            return self.to_out(out), k.detach(), v.detach(), idx

    class MemLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.pos_emb = nn.Embedding(seg, dim)
            self.local = nn.TransformerEncoderLayer(
                dim, 2, dim_feedforward=2 * dim, dropout=0.0, batch_first=True, norm_first=True
            )
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = KNNAttention()
            self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
            self.to_logits = nn.Linear(dim, vocab)

        def forward(self, tokens, mem_k, mem_v):
            n = tokens.size(1)
            x = self.emb(tokens) + self.pos_emb(torch.arange(n))
            mask = nn.Transformer.generate_square_subsequent_mask(n)
            x = self.local(x, src_mask=mask, is_causal=True)
            a, k, v, idx = self.attn(self.norm1(x), mem_k, mem_v)
            x = x + a
            x = x + self.ff(self.norm2(x))
            return self.to_logits(x), k, v, idx

    model = set_weights(torch, MemLM(), seed=80)
    with torch.no_grad():
        model.attn.scale.fill_(math.log(10.0))
        model.attn.combine_attn_output_gate.zero_()
    tokens = torch.tensor(ints(81, vocab, 2, 3 * seg + 1))
    mem_k = F.normalize(torch.tensor(arr(82, 2, 6, dim_head)), dim=-1)  # from a previous document
    mem_v = torch.tensor(arr(83, 2, 6, dim_head))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    out = {"losses": [], "retrieved": [], "mem_sizes": []}
    for epoch in range(2):
        mk, mv = mem_k, mem_v
        for s in range(3):
            chunk = tokens[:, s * seg : (s + 1) * seg + 1]
            opt.zero_grad()
            logits, k, v, idx = model(chunk[:, :-1], mk, mv)
            loss = F.cross_entropy(logits.reshape(-1, vocab), chunk[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            mk = torch.cat([mk, k], dim=1)[:, -max_mem:]
            mv = torch.cat([mv, v], dim=1)[:, -max_mem:]
            out["losses"].append(loss.item())
            out["mem_sizes"].append(mk.shape[1])
            if epoch == 1:
                out["retrieved"].append(idx)
    out["gate"] = model.attn.combine_attn_output_gate.sigmoid().flatten()
    out["scale"] = model.attn.scale.flatten()
    out["memory_keys"] = mk
    out["grads"] = grads(model)
    return out
