"""Hypernetworks and neural architecture search as the DARTS, PC-DARTS, P-DARTS, GDAS, ENAS,
HyperNetworks (Ha et al.), SMASH, hypernetworks-for-continual-learning and zero-cost-proxy
reference code writes them: mixed operations weighted by ``softmax`` of architecture parameters,
first-order bilevel search alternating two optimizers, DARTS' unrolled second-order step with the
finite-difference Hessian-vector product (weights perturbed in place under ``no_grad`` and
restored), genotype derivation with ``topk`` over edges, hypernetworks generating conv and linear
weights applied through ``F.conv2d`` / ``F.linear`` / ``torch.func.functional_call``, Gumbel-softmax
relaxations with fixed NumPy noise, ENAS' controller over child models that share weights, and
parameter/FLOP counting and pruning of candidate operations. Every random draw (Gumbel noise,
controller samples, candidate architectures) comes from NumPy."""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights

PRIMITIVES = ["none", "skip_connect", "avg_pool_3x3", "max_pool_3x3", "conv_3x3", "dil_conv_3x3"]
Genotype = namedtuple("Genotype", "normal normal_concat")


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _darts(torch, C=4, steps=2, n_classes=3, seed=0):
    """The DARTS search network (one normal cell) with its operation set, small."""
    nn, F = torch.nn, torch.nn.functional

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    class ReLUConvBN(nn.Module):
        def __init__(self, C_in, C_out, kernel_size, padding, dilation=1, groups=1):
            super().__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_out, kernel_size, padding=padding, dilation=dilation,
                          groups=groups, bias=False),
                nn.BatchNorm2d(C_out, affine=False),
            )  # fmt: skip

        def forward(self, x):
            return self.op(x)

    class DilConv(nn.Module):
        def __init__(self, C_in, C_out):
            super().__init__()
            self.op = nn.Sequential(
                nn.ReLU(inplace=False),
                nn.Conv2d(C_in, C_in, 3, padding=2, dilation=2, groups=C_in, bias=False),
                nn.Conv2d(C_in, C_out, 1, bias=False),
                nn.BatchNorm2d(C_out, affine=False),
            )

        def forward(self, x):
            return self.op(x)

    OPS = {
        "none": lambda C: Zero(),
        "skip_connect": lambda C: nn.Identity(),
        "avg_pool_3x3": lambda C: nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
        "max_pool_3x3": lambda C: nn.MaxPool2d(3, stride=1, padding=1),
        "conv_3x3": lambda C: ReLUConvBN(C, C, 3, 1),
        "dil_conv_3x3": lambda C: DilConv(C, C),
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
        def __init__(self, steps, multiplier, C):
            super().__init__()
            self._steps, self._multiplier = steps, multiplier
            self._ops = nn.ModuleList()
            for i in range(steps):
                for _ in range(2 + i):
                    self._ops.append(MixedOp(C))

        def forward(self, s0, s1, weights):
            states = [s0, s1]
            offset = 0
            for _ in range(self._steps):
                s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
                offset += len(states)
                states.append(s)
            return torch.cat(states[-self._multiplier :], dim=1)

    class Network(nn.Module):
        def __init__(self, C, num_classes, steps, multiplier=2):
            super().__init__()
            self._C, self._num_classes, self._steps = C, num_classes, steps
            self.stem = nn.Sequential(nn.Conv2d(3, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
            self.cell = Cell(steps, multiplier, C)
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(C * multiplier, num_classes)
            self._initialize_alphas()

        def _initialize_alphas(self):
            k = sum(1 for i in range(self._steps) for n in range(2 + i))
            a = torch.from_numpy(arr(seed + 100, k, len(PRIMITIVES), scale=1e-3))
            self.alphas_normal = a.clone().requires_grad_(True)
            self._arch_parameters = [self.alphas_normal]

        def arch_parameters(self):
            return self._arch_parameters

        def new(self):
            model_new = Network(self._C, self._num_classes, self._steps)
            for x, y in zip(model_new.arch_parameters(), self.arch_parameters()):
                x.data.copy_(y.data)
            return model_new

        def forward(self, x):
            s0 = s1 = self.stem(x)
            weights = F.softmax(self.alphas_normal, dim=-1)
            s1 = self.cell(s0, s1, weights)
            out = self.global_pooling(s1)
            return self.classifier(out.view(out.size(0), -1))

        def _loss(self, x, target):
            return F.cross_entropy(self(x), target)

    model = Network(C, n_classes, steps)
    set_weights(torch, model, seed=seed)
    return model


def _batch(torch, seed, n=4, hw=5, n_classes=3):
    return torch.from_numpy(arr(seed, n, 3, hw, hw)), torch.from_numpy(ints(seed + 1, n_classes, n))


@program(rtol=5e-4, atol=5e-5)  # BatchNorm over 4x5x5 maps, conv sums: float32 order differs
def nas_darts_mixed_op_cell_forward_backward(torch):
    """One DARTS cell: every edge a MixedOp summing all candidates weighted by ``softmax(alpha)``;
    the cross-entropy backward reaches both the operation weights and the architecture alphas."""
    model = _darts(torch, seed=1)
    x, y = _batch(torch, 2)
    logits = model(x)
    loss = model._loss(x, y)
    loss.backward()
    alpha = model.arch_parameters()[0]
    named = dict(model.named_parameters())
    n_weights = sum(p.numel() for p in model.parameters())
    return {
        "logits": logits,
        "loss": loss,
        "alpha_grad": alpha.grad,
        "stem_grad": named["stem.0.weight"].grad,
        "conv_edge_grad": named["cell._ops.3._ops.4.op.1.weight"].grad,
        "dil_edge_grad": named["cell._ops.0._ops.5.op.2.weight"].grad,
        "n_weights": n_weights,
        "n_alphas": alpha.numel(),
        "edge_weights": torch.softmax(alpha, dim=-1),
        "n_param_tensors": len(list(model.parameters())),
    }


@program(rtol=1e-3, atol=1e-4)  # BN-normalized conv sums over 4 steps of two optimizers
def nas_darts_first_order_bilevel_search(torch):
    """DARTS' search loop with the first-order approximation: the architect takes an Adam step
    on the alphas with a validation batch, then the weights take an SGD step (momentum, weight
    decay, ``clip_grad_norm_``) on a training batch; the weight learning rate follows a cosine
    schedule."""
    nn = torch.nn
    model = _darts(torch, seed=3)
    w_optim = torch.optim.SGD(model.parameters(), lr=0.025, momentum=0.9, weight_decay=3e-4)
    a_optim = torch.optim.Adam(
        model.arch_parameters(), lr=3e-4 * 100, betas=(0.5, 0.999), weight_decay=1e-3
    )
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(w_optim, T_max=4, eta_min=1e-3)
    out = {"train_loss": [], "val_loss": [], "grad_norm": [], "lr": []}
    for step in range(3):
        x_trn, y_trn = _batch(torch, 10 + step)
        x_val, y_val = _batch(torch, 20 + step)
        a_optim.zero_grad()
        val_loss = model._loss(x_val, y_val)
        val_loss.backward()
        a_optim.step()

        w_optim.zero_grad()
        logits = model(x_trn)
        loss = nn.CrossEntropyLoss()(logits, y_trn)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        w_optim.step()
        sched.step()
        out["train_loss"].append(loss.item())
        out["val_loss"].append(val_loss.item())
        out["grad_norm"].append(gn)
        out["lr"].append(sched.get_last_lr()[0])
    out["alphas"] = model.arch_parameters()[0]
    out["alpha_exp_avg"] = a_optim.state[model.arch_parameters()[0]]["exp_avg"]
    out["classifier"] = model.classifier.weight
    out["weights_softmax_argmax"] = torch.softmax(model.alphas_normal, -1).argmax(-1)
    return out


@program(rtol=2e-3, atol=2e-4)  # finite-difference HVP (difference of two close gradients / 2R)
def nas_darts_second_order_unrolled_hvp(torch):
    """DARTS' Architect with ``unrolled=True``: one virtual SGD step builds w' from a flat
    ``theta`` (weights, momentum buffer, weight decay) loaded into ``model.new()``; the alpha
    gradient of the unrolled validation loss is corrected by the finite-difference
    Hessian-vector product, for which the weights are perturbed by ``±R v`` in place and then
    restored."""
    model = _darts(torch, seed=5)
    momentum, wd, eta = 0.9, 3e-4, 0.025
    w_optim = torch.optim.SGD(model.parameters(), lr=eta, momentum=momentum, weight_decay=wd)
    a_optim = torch.optim.Adam(model.arch_parameters(), lr=0.03, betas=(0.5, 0.999),
                               weight_decay=1e-3)  # fmt: skip

    def _concat(xs):
        return torch.cat([x.view(-1) for x in xs])

    def _construct_model_from_theta(theta):
        model_new = model.new()
        model_dict = model.state_dict()
        params, offset = {}, 0
        for k, v in model.named_parameters():
            v_length = math.prod(v.size())
            params[k] = theta[offset : offset + v_length].view(v.size())
            offset += v_length
        assert offset == len(theta)
        model_dict.update(params)
        model_new.load_state_dict(model_dict)
        return model_new

    def _compute_unrolled_model(x, y):
        loss = model._loss(x, y)
        theta = _concat(model.parameters()).data
        try:
            moment = _concat(w_optim.state[v]["momentum_buffer"] for v in model.parameters())
            moment = moment.mul_(momentum)
        except KeyError:
            moment = torch.zeros_like(theta)
        dtheta = _concat(torch.autograd.grad(loss, list(model.parameters()))).data + wd * theta
        return _construct_model_from_theta(theta.sub(moment + dtheta, alpha=eta))

    def _hessian_vector_product(vector, x, y, r=1e-2):
        R = r / _concat(vector).norm()
        with torch.no_grad():
            for p, v in zip(model.parameters(), vector):
                p.add_(v, alpha=R)
        loss = model._loss(x, y)
        grads_p = torch.autograd.grad(loss, model.arch_parameters())
        with torch.no_grad():
            for p, v in zip(model.parameters(), vector):
                p.sub_(v, alpha=2 * R)
        loss = model._loss(x, y)
        grads_n = torch.autograd.grad(loss, model.arch_parameters())
        with torch.no_grad():
            for p, v in zip(model.parameters(), vector):
                p.add_(v, alpha=R)
        return [(a - b).div_(2 * R) for a, b in zip(grads_p, grads_n)], R

    x0, y0 = _batch(torch, 30)
    before = model.classifier.weight.detach().clone()
    # a first weight step so the momentum buffer exists
    w_optim.zero_grad()
    model._loss(x0, y0).backward()
    w_optim.step()

    x_trn, y_trn = _batch(torch, 31)
    x_val, y_val = _batch(torch, 32)
    a_optim.zero_grad()
    unrolled = _compute_unrolled_model(x_trn, y_trn)
    unrolled_loss = unrolled._loss(x_val, y_val)
    unrolled_loss.backward()
    dalpha = [v.grad for v in unrolled.arch_parameters()]
    vector = [v.grad.data for v in unrolled.parameters()]
    implicit, R = _hessian_vector_product(vector, x_trn, y_trn)
    for g, ig in zip(dalpha, implicit):
        g.data.sub_(ig.data, alpha=eta)
    for v, g in zip(model.arch_parameters(), dalpha):
        if v.grad is None:
            v.grad = g.data.clone()
        else:
            v.grad.data.copy_(g.data)
    weights_after_hvp = model.classifier.weight.detach().clone()
    a_optim.step()
    return {
        "unrolled_loss": unrolled_loss,
        "implicit": implicit[0],
        "alpha_grad": model.alphas_normal.grad,
        "alphas": model.alphas_normal,
        "R": R,
        "unrolled_classifier": unrolled.classifier.weight,
        "restore_error": (weights_after_hvp - model.classifier.weight).abs().max(),
        "moved": (model.classifier.weight - before).abs().sum(),
    }


@program
def nas_darts_genotype_parse_and_pcdarts_edges(torch):
    """Deriving the discrete cell: DARTS' ``_parse`` (two strongest incoming edges per node by
    their best non-``none`` weight, then that op) on ``softmax(alpha).data.cpu().numpy()``, the
    same with tensor ops (``topk`` over edges per node), and PC-DARTS' edge normalization (betas
    softmaxed per node multiply the operation weights)."""
    F = torch.nn.functional
    steps = 3
    k = sum(2 + i for i in range(steps))
    alphas = torch.from_numpy(arr(40, k, len(PRIMITIVES)))
    betas = torch.from_numpy(arr(41, k, scale=0.5))

    def _parse(weights):
        gene, n, start = [], 2, 0
        none = PRIMITIVES.index("none")
        for i in range(steps):
            end = start + n
            W = weights[start:end].copy()
            edges = sorted(
                range(i + 2),
                key=lambda x: -max(W[x][k] for k in range(len(W[x])) if k != none),
            )[:2]
            for j in edges:
                k_best = None
                for k in range(len(W[j])):
                    if k != none and (k_best is None or W[j][k] > W[j][k_best]):
                        k_best = k
                gene.append((PRIMITIVES[k_best], j))
            start = end
            n += 1
        return gene

    weights = F.softmax(alphas, dim=-1)
    gene = _parse(weights.data.cpu().numpy())
    genotype = Genotype(normal=gene, normal_concat=range(2 + steps - 2, steps + 2))

    # the tensor version: mask 'none', best op per edge, topk edges per node
    masked = weights.clone()
    masked[:, PRIMITIVES.index("none")] = 0
    best_w, best_op = masked.max(dim=-1)
    tensor_gene, start = [], 0
    for i in range(steps):
        end = start + i + 2
        top = torch.topk(best_w[start:end], 2)
        for j in top.indices.tolist():
            tensor_gene.append((PRIMITIVES[best_op[start + j].item()], j))
        start = end

    # PC-DARTS: edge betas normalized per node
    n, start = 3, 2
    weights2 = F.softmax(betas[0:2], dim=-1)
    for _ in range(steps - 1):
        end = start + n
        weights2 = torch.cat([weights2, F.softmax(betas[start:end], dim=-1)], dim=0)
        start = end
        n += 1
    edge_scores = weights2[:, None] * weights
    pc_best = edge_scores[:, 1:].max(dim=-1)
    return {
        "genotype": str(genotype),
        "tensor_gene": str(tensor_gene),
        "same": gene == tensor_gene,
        "weights2": weights2,
        "edge_scores": edge_scores,
        "pc_best_values": pc_best.values,
        "pc_best_ops": pc_best.indices + 1,
        "entropy": -(weights * weights.log()).sum(-1),
    }


@program(rtol=5e-4, atol=5e-5)
def nas_hypernetwork_generates_conv_kernels(torch):
    """Ha et al.'s static hypernetwork for a ResNet: each 3x3 kernel block is generated from a
    learned layer embedding ``z`` by a two-layer hypernetwork (``matmul`` + ``view``), blocks
    concatenated into the full kernel and applied with ``F.conv2d``; the embeddings and the
    hypernetwork train end to end."""
    nn, F = torch.nn, torch.nn.functional

    def fmod_param(seed, *shape, scale=1.0):
        return nn.Parameter(torch.fmod(torch.from_numpy(arr(seed, *shape)), 2) * scale)

    class HyperNetwork(nn.Module):
        def __init__(self, f_size=3, z_dim=6, out_size=4, in_size=4):
            super().__init__()
            self.z_dim, self.f_size, self.out_size, self.in_size = z_dim, f_size, out_size, in_size
            self.w1 = fmod_param(50, z_dim, out_size * f_size * f_size, scale=0.2)
            self.b1 = fmod_param(51, out_size * f_size * f_size, scale=0.2)
            self.w2 = fmod_param(52, z_dim, in_size * z_dim, scale=0.2)
            self.b2 = fmod_param(53, in_size * z_dim, scale=0.2)

        def forward(self, z):
            h_in = torch.matmul(z, self.w2) + self.b2
            h_in = h_in.view(self.in_size, self.z_dim)
            h_final = torch.matmul(h_in, self.w1) + self.b1
            return h_final.view(self.out_size, self.in_size, self.f_size, self.f_size)

    class Embedding(nn.Module):
        def __init__(self, z_num, z_dim, seed):
            super().__init__()
            self.z_num = z_num
            h, k = z_num
            self.z_list = nn.ParameterList([fmod_param(seed + i, z_dim) for i in range(h * k)])

        def forward(self, hyper_net):
            ww = []
            h, k = self.z_num
            for i in range(h):
                w = [hyper_net(self.z_list[i * k + j]) for j in range(k)]
                ww.append(torch.cat(w, dim=1))
            return torch.cat(ww, dim=0)

    class PrimaryNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.hope = HyperNetwork()
            self.zs = nn.ModuleList([Embedding((1, 1), 6, 60), Embedding((2, 1), 6, 70)])
            self.bn1 = nn.BatchNorm2d(4)
            self.bn2 = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            x = F.relu(self.stem(x))
            w1 = self.zs[0](self.hope)
            x = F.relu(self.bn1(F.conv2d(x, w1, padding=1))) + x
            w2 = self.zs[1](self.hope)
            x = F.relu(self.bn2(F.conv2d(x, w2, stride=2, padding=1)))
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    net = PrimaryNetwork()
    set_weights(torch, net.stem, seed=54)
    set_weights(torch, net.fc, seed=55)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    losses = []
    for step in range(3):
        x, y = _batch(torch, 56 + step, n=4, hw=6)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        if step == 0:
            first = {
                "z0": net.zs[0].z_list[0].grad.clone(),
                "w1": net.hope.w1.grad.clone(),
                "b2": net.hope.b2.grad.clone(),
            }
        opt.step()
        losses.append(loss.item())
    kernel = net.zs[1](net.hope)
    n_hyper = sum(p.numel() for p in net.hope.parameters())
    n_z = sum(p.numel() for p in net.zs.parameters())
    return {
        "losses": losses,
        "first_grads": first,
        "kernel": kernel,
        "kernel_shape": list(kernel.shape),
        "n_hyper_vs_generated": [n_hyper + n_z, kernel.numel() + 4 * 4 * 9],
        "z_list": [z for z in net.zs[1].z_list],
    }


@program(rtol=5e-4, atol=5e-5)
def nas_task_conditioned_hypernetwork_functional_call(torch):
    """Hypernetworks for continual learning (von Oswald et al.): a task embedding goes through an
    MLP whose flat output is split into the target network's parameters (``split`` + ``view``)
    and used with ``torch.func.functional_call``; after task 0 the hypernetwork's outputs for old
    embeddings are anchored to a detached snapshot by the output regulariser. A per-sample
    dynamic layer (``einsum`` with generated weights) sits beside it."""
    nn, F = torch.nn, torch.nn.functional
    target = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2))
    shapes = [(n, p.shape) for n, p in target.named_parameters()]
    sizes = [math.prod(s) for _, s in shapes]
    total = sum(sizes)

    class HyperNet(nn.Module):
        def __init__(self, n_tasks, emb_dim=4, hidden=16):
            super().__init__()
            self.task_emb = nn.Embedding(n_tasks, emb_dim)
            self.body = nn.Sequential(
                nn.Linear(emb_dim, hidden), nn.ELU(), nn.Linear(hidden, total)
            )

        def forward(self, task_id):
            flat = self.body(self.task_emb(task_id))
            chunks = torch.split(flat, sizes)
            return {n: c.view(s) for (n, s), c in zip(shapes, chunks)}

    hnet = set_weights(torch, HyperNet(2), seed=80)
    opt = torch.optim.Adam(hnet.parameters(), lr=5e-3)
    xs = [torch.from_numpy(arr(81 + t, 8, 3)) for t in range(2)]
    ys = [torch.from_numpy(ints(83 + t, 2, 8)) for t in range(2)]
    out = {"losses": [], "reg": []}
    snapshot = None
    for t in range(2):
        tid = torch.tensor(t)
        for _ in range(2):
            opt.zero_grad()
            weights = hnet(tid)
            loss = F.cross_entropy(torch.func.functional_call(target, weights, (xs[t],)), ys[t])
            if snapshot is not None:
                reg = 0.0
                for old in range(t):
                    now = torch.cat([w.flatten() for w in hnet(torch.tensor(old)).values()])
                    reg = reg + (now - snapshot[old]).pow(2).sum()
                loss = loss + 0.01 * reg
                out["reg"].append(reg.item())
            loss.backward()
            opt.step()
            out["losses"].append(loss.item())
        with torch.no_grad():
            snapshot = [
                torch.cat([w.flatten() for w in hnet(torch.tensor(o)).values()]).detach()
                for o in range(t + 1)
            ]
    with torch.no_grad():
        preds = [
            torch.func.functional_call(target, hnet(torch.tensor(t)), (xs[t],)).argmax(-1)
            for t in range(2)
        ]

    # per-sample dynamic weights: W(x) generated from a context vector, applied with einsum
    gen = set_weights(torch, nn.Linear(2, 3 * 4 + 4), seed=85)
    ctx = torch.from_numpy(arr(86, 5, 2))
    inp = torch.from_numpy(arr(87, 5, 3))
    p = gen(ctx)
    W, b = p[:, :12].view(-1, 4, 3), p[:, 12:]
    dyn = torch.einsum("bi,boi->bo", inp, W) + b
    dyn.pow(2).mean().backward()
    return {
        **out,
        "task0_params": hnet(torch.tensor(0)),
        "preds": preds,
        "emb": hnet.task_emb.weight,
        "dyn": dyn,
        "dyn_row0_linear": F.linear(inp[:1], W[0], b[0]),
        "gen_grad": gen.weight.grad,
        "total": total,
    }


@program(rtol=5e-4, atol=5e-5)
def nas_gdas_gumbel_softmax_hard_weights(torch):
    """GDAS' differentiable sampler on a NAS-Bench-201-style cell: Gumbel noise (from fixed
    NumPy uniforms) added to ``log_softmax(alphas)``, divided by a temperature annealed linearly,
    hard one-hot by ``scatter_`` with the straight-through trick; only the sampled op of each
    edge runs, the others contribute their (zero-valued) weight so the alpha gradient flows."""
    nn, F = torch.nn, torch.nn.functional
    ops_names = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
    C, max_nodes = 3, 3

    def make_op(name):
        if name == "none":
            return Zero()
        if name == "skip_connect":
            return nn.Identity()
        if name == "avg_pool_3x3":
            return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        k = 1 if name == "nor_conv_1x1" else 3
        return nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, k, padding=k // 2, bias=False))

    class Zero(nn.Module):
        def forward(self, x):
            return x.mul(0.0)

    class SearchCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.edges = nn.ModuleDict()
            for i in range(1, max_nodes):
                for j in range(i):
                    node_str = f"{i}<-{j}"
                    self.edges[node_str] = nn.ModuleList([make_op(n) for n in ops_names])
            self.edge_keys = sorted(self.edges.keys())
            self.edge2index = {key: i for i, key in enumerate(self.edge_keys)}

        def forward_gdas(self, inputs, hardwts, index):
            nodes = [inputs]
            for i in range(1, max_nodes):
                inter_nodes = []
                for j in range(i):
                    node_str = f"{i}<-{j}"
                    weights = hardwts[self.edge2index[node_str]]
                    argmaxs = index[self.edge2index[node_str]].item()
                    weigsum = sum(
                        weights[_ie] * edge(nodes[j]) if _ie == argmaxs else weights[_ie]
                        for _ie, edge in enumerate(self.edges[node_str])
                    )
                    inter_nodes.append(weigsum)
                nodes.append(sum(inter_nodes))
            return nodes[-1]

    cell = set_weights(torch, SearchCell(), seed=90)
    head = set_weights(torch, nn.Linear(C, 2), seed=91)
    arch = nn.Parameter(torch.from_numpy(arr(92, len(cell.edge_keys), len(ops_names), scale=1e-1)))
    w_opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.05)
    a_opt = torch.optim.Adam([arch], lr=0.05, betas=(0.5, 0.999), weight_decay=1e-3)
    tau_max, tau_min, epochs = 10.0, 0.1, 3
    out = {"tau": [], "index": [], "loss": [], "hardwts": []}
    for epoch in range(epochs):
        tau = tau_max - (tau_max - tau_min) * epoch / (epochs - 1)
        u = torch.from_numpy(_uniform(93 + epoch, *arch.shape, low=1e-6, high=1.0))
        gumbels = -torch.log(-torch.log(u))
        logits = (arch.log_softmax(dim=1) + gumbels) / tau
        probs = F.softmax(logits, dim=1)
        index = probs.max(-1, keepdim=True)[1]
        one_h = torch.zeros_like(logits).scatter_(-1, index, 1.0)
        hardwts = one_h - probs.detach() + probs
        assert not (torch.isinf(gumbels).any() or torch.isnan(probs).any())
        x, y = torch.from_numpy(arr(96 + epoch, 2, C, 4, 4)), torch.from_numpy(ints(99, 2, 2))
        feat = cell.forward_gdas(x, hardwts, index).mean(dim=(2, 3))
        loss = F.cross_entropy(head(feat), y)
        w_opt.zero_grad()
        a_opt.zero_grad()
        loss.backward()
        w_opt.step()
        a_opt.step()
        out["tau"].append(tau)
        out["index"].append(index.squeeze(-1))
        out["loss"].append(loss.item())
        out["hardwts"].append(hardwts.detach())
    out["arch"] = arch
    out["probs_last"] = probs
    out["genotype"] = "|".join(
        f"{ops_names[arch[cell.edge2index[k]].argmax().item()]}~{k.split('<-')[1]}"
        for k in cell.edge_keys
    )
    return out


@program(rtol=5e-4, atol=5e-5)
def nas_enas_controller_reinforce_shared_child(torch):
    """ENAS: an LSTM controller samples one operation per layer (``tanh`` logit clipping and a
    temperature, inverse-CDF sampling from fixed NumPy uniforms), the child models are paths
    through one pool of shared weights trained by SGD, and the controller is trained by
    REINFORCE with an exponential-moving-average baseline and an entropy bonus."""
    nn, F = torch.nn, torch.nn.functional
    n_layers, n_ops, hidden, d = 3, 4, 12, 5

    class SharedChild(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Identity()])
                for _ in range(n_layers)
            )
            self.acts = [torch.relu, torch.tanh, torch.sigmoid, lambda h: h]
            self.out = nn.Linear(d, 2)

        def forward(self, x, arch):
            for layer, a in zip(self.layers, arch):
                x = x + self.acts[a](layer[a](x))
            return self.out(x)

    class Controller(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(n_ops + 1, hidden)
            self.lstm = nn.LSTMCell(hidden, hidden)
            self.decoders = nn.ModuleList(nn.Linear(hidden, n_ops) for _ in range(n_layers))

        def sample(self, uniforms, tanh_c=2.5, temperature=5.0):
            inputs = torch.tensor([n_ops])
            hx = cx = torch.zeros(1, hidden)
            actions, log_probs, entropies = [], [], []
            for layer in range(n_layers):
                embed = self.encoder(inputs)
                hx, cx = self.lstm(embed, (hx, cx))
                logits = self.decoders[layer](hx) / temperature
                logits = tanh_c * torch.tanh(logits)
                probs = F.softmax(logits, dim=-1)
                log_prob = F.log_softmax(logits, dim=-1)
                entropies.append(-(log_prob * probs).sum(1))
                cdf = probs.cumsum(-1)
                action = (cdf < uniforms[layer]).sum(-1).clamp(max=n_ops - 1)
                log_probs.append(log_prob.gather(1, action.view(-1, 1)).squeeze(1))
                actions.append(action.item())
                inputs = action
            return actions, torch.cat(log_probs).sum(), torch.cat(entropies).sum()

    child = set_weights(torch, SharedChild(), seed=110)
    ctrl = set_weights(torch, Controller(), seed=111, scale=0.1)
    shared_opt = torch.optim.SGD(child.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    ctrl_opt = torch.optim.Adam(ctrl.parameters(), lr=3.5e-4 * 10)
    x_trn, y_trn = torch.from_numpy(arr(112, 8, d)), torch.from_numpy(ints(113, 2, 8))
    x_val, y_val = torch.from_numpy(arr(114, 8, d)), torch.from_numpy(ints(115, 2, 8))
    uniforms = _uniform(116, 4, n_layers)
    baseline, decay = None, 0.9
    out = {"archs": [], "reward": [], "baseline": [], "shared_loss": [], "ctrl_loss": []}
    for it in range(4):
        # 1) train the shared weights on an architecture the controller samples
        with torch.no_grad():
            arch, _, _ = ctrl.sample(uniforms[it])
        shared_opt.zero_grad()
        loss = F.cross_entropy(child(x_trn, arch), y_trn)
        loss.backward()
        nn.utils.clip_grad_norm_(child.parameters(), 0.25)
        shared_opt.step()
        # 2) train the controller with REINFORCE on the validation reward
        arch, log_prob, entropy = ctrl.sample(uniforms[it])
        with torch.no_grad():
            logits = child(x_val, arch)
            reward = (logits.argmax(-1) == y_val).float().mean() + torch.exp(
                -F.cross_entropy(logits, y_val)
            )
        baseline = reward if baseline is None else decay * baseline + (1 - decay) * reward
        adv = reward - baseline
        ctrl_loss = -log_prob * adv - 1e-4 * entropy
        ctrl_opt.zero_grad()
        ctrl_loss.backward()
        ctrl_opt.step()
        out["archs"].append(arch)
        out["reward"].append(reward)
        out["baseline"].append(baseline)
        out["shared_loss"].append(loss.item())
        out["ctrl_loss"].append(ctrl_loss.detach())
    out["decoder0"] = ctrl.decoders[0].weight
    out["shared_out"] = child.out.weight
    out["uses_shared_layer"] = [
        child.layers[i][a].weight.grad is not None for i, a in enumerate(out["archs"][-1]) if a < 3
    ]
    return out


@program
def nas_candidate_ops_param_flop_count_and_pruning(torch):
    """Counting and pruning candidate operations: parameters per DARTS primitive (separable and
    dilated convs, 1x1 convs, pools), ``count_parameters_in_MB``, MACs by forward hooks (the
    thop/ptflops way), a latency-aware expected cost ``sum(softmax(alpha) * latency)`` as FBNet
    and ProxylessNAS add to the loss, and P-DARTS-style progressive shrinking: the weakest ops of
    every edge dropped, the alphas rebuilt from the kept columns."""
    nn, F = torch.nn, torch.nn.functional
    C = 4

    def sep_conv(k):
        return nn.Sequential(
            nn.ReLU(), nn.Conv2d(C, C, k, padding=k // 2, groups=C, bias=False),
            nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C, affine=True),
            nn.ReLU(), nn.Conv2d(C, C, k, padding=k // 2, groups=C, bias=False),
            nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C, affine=True),
        )  # fmt: skip

    candidates = {
        "none": lambda: nn.Identity(),
        "max_pool_3x3": lambda: nn.MaxPool2d(3, 1, 1),
        "avg_pool_3x3": lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False),
        "conv_1x1": lambda: nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False)),
        "sep_conv_3x3": lambda: sep_conv(3),
        "sep_conv_5x5": lambda: sep_conv(5),
        "dil_conv_3x3": lambda: nn.Sequential(
            nn.ReLU(), nn.Conv2d(C, C, 3, padding=2, dilation=2, groups=C, bias=False),
            nn.Conv2d(C, C, 1, bias=False)),
    }  # fmt: skip
    names = list(candidates)
    edges = nn.ModuleList(nn.ModuleList(candidates[n]() for n in names) for _ in range(3))
    set_weights(torch, edges, seed=120)
    n_params = {n: sum(p.numel() for p in edges[0][i].parameters() if p.requires_grad)
                for i, n in enumerate(names)}  # fmt: skip
    mb = np.sum([np.prod(v.size()) for name, v in edges.named_parameters()]) / 1e6

    macs = {}

    def conv_hook(module, inputs, output):
        kh, kw = module.kernel_size
        macs[module] = output.numel() * (module.in_channels // module.groups) * kh * kw

    handles = [m.register_forward_hook(conv_hook) for m in edges[0].modules()
               if isinstance(m, nn.Conv2d)]  # fmt: skip
    x = torch.from_numpy(arr(121, 1, C, 6, 6))
    outs = [op(x) for op in edges[0]]
    for h in handles:
        h.remove()
    per_op_macs = [sum(macs.get(m, 0) for m in op.modules()) for op in edges[0]]

    alphas = torch.from_numpy(arr(122, 3, len(names))).requires_grad_(True)
    latency = torch.tensor([0.0, 0.3, 0.3, 0.5, 1.2, 2.0, 0.9])
    probs = F.softmax(alphas, dim=-1)
    expected_latency = (probs * latency).sum()
    ce_proxy = -(probs[:, 4:]).sum().log()
    loss = ce_proxy * torch.log(expected_latency) ** 0.6
    loss.backward()

    # P-DARTS: keep the 4 strongest (non-none) ops per edge
    num_keep = 4
    with torch.no_grad():
        w = F.softmax(alphas, dim=-1).clone()
        w[:, names.index("none")] = -1.0
        keep_idx = w.topk(num_keep, dim=-1).indices.sort(dim=-1).values
        switches = torch.zeros_like(w, dtype=torch.bool).scatter_(1, keep_idx, True)
    pruned = nn.ModuleList(
        nn.ModuleList(op for op, k in zip(edges[e], switches[e].tolist()) if k) for e in range(3)
    )
    new_alphas = nn.Parameter(alphas.detach()[switches].view(3, num_keep).clone())
    kept_names = [[names[i] for i in row] for row in keep_idx.tolist()]
    n_after = sum(p.numel() for p in pruned.parameters())
    mixed = [sum(wi * op(x) for wi, op in zip(F.softmax(new_alphas[e], -1), pruned[e]))
             for e in range(3)]  # fmt: skip
    return {
        "n_params": str(n_params),
        "param_MB": float(mb),
        "per_op_macs": per_op_macs,
        "op_out_means": torch.stack([o.mean() for o in outs]),
        "expected_latency": expected_latency,
        "alpha_grad": alphas.grad,
        "switches": switches,
        "kept": str(kept_names),
        "n_before_after": [sum(p.numel() for p in edges.parameters()), n_after],
        "new_alphas": new_alphas,
        "mixed": mixed,
    }


@program(rtol=5e-4, atol=5e-5)
def nas_smash_one_shot_hypernet_rank_architectures(torch):
    """SMASH: an architecture is encoded as a binary tensor (op one-hot and a width mask per
    layer); a hypernetwork maps each layer's encoding to that layer's weights, sliced to the
    width the architecture uses; the hypernetwork trains over sampled architectures (fixed
    NumPy draws), then candidate architectures are scored with generated weights under
    ``no_grad`` and ranked with ``argsort``."""
    nn, F = torch.nn, torch.nn.functional
    n_layers, width, n_ops, d_in = 3, 6, 3, 4
    enc_dim = n_ops + width

    def encode(arch):
        ops, widths = arch
        code = np.zeros((n_layers, enc_dim), np.float32)
        for i, (o, w) in enumerate(zip(ops, widths)):
            code[i, o] = 1.0
            code[i, n_ops : n_ops + w] = 1.0
        return torch.from_numpy(code)

    class HyperNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(enc_dim, 16)
            self.to_w = nn.Linear(16, width * width)
            self.to_b = nn.Linear(16, width)
            self.inp = nn.Parameter(torch.from_numpy(arr(130, width, d_in, scale=0.5)))
            self.head = nn.Linear(width, 2)

        def forward(self, x, code, widths, ops):
            h = torch.tanh(self.embed(code))
            Ws = self.to_w(h).view(n_layers, width, width) * 0.5
            bs = self.to_b(h)
            x = F.linear(x, self.inp)
            for i in range(n_layers):
                wd = widths[i]
                mask = torch.zeros(width)
                mask[:wd] = 1.0
                y = F.linear(x, Ws[i] * mask[:, None], bs[i] * mask)
                act = [torch.relu, torch.tanh, F.silu][ops[i]]
                x = x + act(y)
            return self.head(x)

    rng = np.random.default_rng(131)
    archs = [(rng.integers(0, n_ops, n_layers).tolist(), rng.integers(2, width + 1, n_layers).tolist())
             for _ in range(6)]  # fmt: skip
    hnet = set_weights(torch, HyperNet(), seed=132)
    opt = torch.optim.Adam(hnet.parameters(), lr=1e-2)
    x, y = torch.from_numpy(arr(133, 10, d_in)), torch.from_numpy(ints(134, 2, 10))
    xv, yv = torch.from_numpy(arr(135, 10, d_in)), torch.from_numpy(ints(136, 2, 10))
    losses = []
    for step in range(4):
        ops, widths = archs[step % 3]
        opt.zero_grad()
        loss = F.cross_entropy(hnet(x, encode(archs[step % 3]), widths, ops), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    scores = []
    with torch.no_grad():
        for a in archs:
            scores.append(F.cross_entropy(hnet(xv, encode(a), a[1], a[0]), yv))
    scores = torch.stack(scores)
    ranking = torch.argsort(scores)
    return {
        "losses": losses,
        "scores": scores,
        "ranking": ranking,
        "best": str(archs[ranking[0].item()]),
        "encoding": encode(archs[0]),
        "to_w": hnet.to_w.weight,
    }


@program(rtol=5e-4, atol=5e-5)
def nas_zero_cost_proxies_synflow_snip_naswot(torch):
    """Zero-cost proxies for ranking untrained architectures: grad-norm, SNIP (a ``weight_mask``
    of ones multiplied into each layer through a patched ``forward``, score ``|dL/dmask|``),
    SynFlow (``abs_`` of every ``state_dict`` entry in place, all-ones input, ``sum`` backward,
    ``|theta * grad|``, signs restored) and NASWOT (the log-determinant of the Hamming kernel of
    ReLU codes collected with forward hooks)."""
    import types

    nn, F = torch.nn, torch.nn.functional
    d = 6

    def make(arch_seed):
        acts = [nn.ReLU(), nn.ReLU(), nn.ReLU()]
        widths = [[8, 5, 7], [4, 4, 4], [10, 6, 3]][arch_seed]
        layers, prev = [], d
        for w, a in zip(widths, acts):
            layers += [nn.Linear(prev, w), a]
            prev = w
        layers.append(nn.Linear(prev, 3))
        return set_weights(torch, nn.Sequential(*layers), seed=140 + arch_seed)

    x = torch.from_numpy(arr(144, 8, d))
    y = torch.from_numpy(ints(145, 3, 8))

    def grad_norm(net):
        net.zero_grad()
        F.cross_entropy(net(x), y).backward()
        return sum(m.weight.grad.norm() for m in net.modules() if isinstance(m, nn.Linear))

    def snip_forward_linear(self, inp):
        return F.linear(inp, self.weight * self.weight_mask, self.bias)

    def snip(net):
        for layer in net.modules():
            if isinstance(layer, nn.Linear):
                layer.weight_mask = nn.Parameter(torch.ones_like(layer.weight))
                layer.weight.requires_grad = False
                layer.forward = types.MethodType(snip_forward_linear, layer)
        net.zero_grad()
        F.cross_entropy(net(x), y).backward()
        return sum(
            layer.weight_mask.grad.abs().sum()
            for layer in net.modules()
            if isinstance(layer, nn.Linear)
        )

    def synflow(net):
        @torch.no_grad()
        def linearize(net):
            signs = {}
            for name, param in net.state_dict().items():
                signs[name] = torch.sign(param)
                param.abs_()
            return signs

        @torch.no_grad()
        def nonlinearize(net, signs):
            for name, param in net.state_dict().items():
                param.mul_(signs[name])

        signs = linearize(net)
        net.zero_grad()
        out = net(torch.ones(1, d))
        torch.sum(out).backward()
        score = sum((p * p.grad).abs().sum() for p in net.parameters() if p.grad is not None)
        nonlinearize(net, signs)
        return score, out.detach()

    def naswot(net):
        K = torch.zeros(x.shape[0], x.shape[0])

        def counting_hook(module, inp, out):
            c = (inp[0].view(inp[0].size(0), -1) > 0).float()
            nonlocal K
            K = K + c @ c.t() + (1.0 - c) @ (1.0 - c).t()

        hs = [m.register_forward_hook(counting_hook) for m in net.modules()
              if isinstance(m, nn.ReLU)]  # fmt: skip
        with torch.no_grad():
            net(x)
        for h in hs:
            h.remove()
        sign, logdet = torch.linalg.slogdet(K)
        return logdet, K

    out = {"grad_norm": [], "synflow": [], "synflow_out": [], "naswot": [], "snip": []}
    for a in range(3):
        net = make(a)
        before = net[0].weight.detach().clone()
        out["grad_norm"].append(grad_norm(net))
        s, o = synflow(net)
        out["synflow"].append(s)
        out["synflow_out"].append(o)
        out[f"restored_{a}"] = torch.equal(before, net[0].weight.detach())
        logdet, K = naswot(net)
        out["naswot"].append(logdet)
        out["snip"].append(snip(net))
        if a == 0:
            out["K0"] = K
    out["rank_synflow"] = torch.argsort(torch.stack(out["synflow"]), descending=True)
    out["rank_naswot"] = torch.argsort(torch.stack(out["naswot"]), descending=True)
    return out


@program(rtol=5e-4, atol=5e-5)
def nas_ofa_elastic_kernel_width_depth_subnets(torch):
    """Once-for-all's elastic supernet: a depthwise kernel shrunk 5->3 through a learned
    kernel-transform matrix (``F.linear`` over the flattened centre), elastic width by slicing
    ``conv.weight[:out, :in]`` and the BatchNorm's affine and running statistics (``F.batch_norm``
    on sliced buffers in training mode, so the slices are updated in place), channels re-sorted by
    importance (``sort`` + ``index_select`` assigned to ``.data``), elastic depth, and sandwich
    training with the largest subnet's soft targets distilled into the smaller ones."""
    nn, F = torch.nn, torch.nn.functional
    max_c, ks_list = 6, [3, 5]

    def sub_filter_start_end(kernel_size, sub_kernel_size):
        center = kernel_size // 2
        dev = sub_kernel_size // 2
        return center - dev, center + dev + 1

    def bn_forward(x, bn, feature_dim):
        factor = 0.0
        if bn.training and bn.track_running_stats:
            bn.num_batches_tracked += 1
            factor = bn.momentum
        return F.batch_norm(
            x, bn.running_mean[:feature_dim], bn.running_var[:feature_dim],
            bn.weight[:feature_dim], bn.bias[:feature_dim],
            bn.training or not bn.track_running_stats, factor, bn.eps,
        )  # fmt: skip

    class DynamicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.point = nn.Conv2d(max_c, max_c, 1, bias=False)
            self.depth = nn.Conv2d(max_c, max_c, max(ks_list), groups=max_c, bias=False)
            self.bn = nn.BatchNorm2d(max_c)
            eye = np.eye(9, dtype=np.float32) + arr(150, 9, 9, scale=0.05)
            self.register_parameter("5to3_matrix", nn.Parameter(torch.from_numpy(eye)))

        def active_filter(self, channels, ks):
            filters = self.depth.weight[:channels]
            if ks < max(ks_list):
                start, end = sub_filter_start_end(max(ks_list), ks)
                core = filters[:, :, start:end, start:end].contiguous()
                core = core.view(core.size(0), core.size(1), -1).view(-1, ks * ks)
                core = F.linear(core, self.__getattr__("5to3_matrix"))
                filters = core.view(channels, 1, ks, ks)
            return filters

        def forward(self, x, width, ks):
            in_c = x.size(1)
            y = F.conv2d(x, self.point.weight[:width, :in_c].contiguous())
            y = F.conv2d(y, self.active_filter(width, ks).contiguous(), None, 1, ks // 2, 1, width)
            return F.relu(bn_forward(y, self.bn, width))

    class Supernet(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Conv2d(3, max_c, 3, padding=1, bias=False)
            self.blocks = nn.ModuleList(DynamicBlock() for _ in range(3))
            self.head = nn.Linear(max_c, 3)

        def forward(self, x, cfg):
            depth, widths, kss = cfg
            x = F.relu(self.first(x))
            for i in range(depth):
                x = self.blocks[i](x, widths[i], kss[i])
            x = x.mean(dim=(2, 3))
            return F.linear(x, self.head.weight[:, : x.size(1)], self.head.bias)

        @torch.no_grad()
        def re_organize_middle_weights(self, i):
            blk = self.blocks[i]
            importance = torch.sum(torch.abs(blk.depth.weight), dim=(1, 2, 3))
            _, sorted_idx = torch.sort(importance, dim=0, descending=True)
            blk.depth.weight.data = torch.index_select(blk.depth.weight.data, 0, sorted_idx)
            blk.point.weight.data = torch.index_select(blk.point.weight.data, 0, sorted_idx)
            for name in ["weight", "bias", "running_mean", "running_var"]:
                t = getattr(blk.bn, name)
                t.data = torch.index_select(t.data, 0, sorted_idx)
            return sorted_idx

    net = set_weights(torch, Supernet(), seed=151)
    for blk in net.blocks:  # keep the transform matrices as initialised
        getattr(blk, "5to3_matrix").data.copy_(
            torch.from_numpy(np.eye(9, dtype=np.float32) + arr(150, 9, 9, scale=0.05))
        )
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    largest = (3, [max_c] * 3, [5, 5, 5])
    subnets = [(2, [4, 3, 6], [3, 5, 3]), (3, [3, 5, 4], [3, 3, 5])]
    out = {"loss": [], "kd": []}
    for step in range(2):
        x, y = _batch(torch, 152 + step, n=4, hw=5)
        opt.zero_grad()
        big = net(x, largest)
        loss = F.cross_entropy(big, y)
        loss.backward()
        soft = F.softmax(big.detach(), dim=1)
        for cfg in subnets:
            logits = net(x, cfg)
            kd = torch.mean(torch.sum(-soft * F.log_softmax(logits, dim=-1), 1))
            (F.cross_entropy(logits, y) + kd).backward()
            out["kd"].append(kd.item())
        opt.step()
        out["loss"].append(loss.item())
    out["running_mean0"] = net.blocks[0].bn.running_mean.clone()
    out["running_var1"] = net.blocks[1].bn.running_var.clone()
    out["num_batches"] = net.blocks[0].bn.num_batches_tracked.clone()
    out["matrix_grad"] = getattr(net.blocks[0], "5to3_matrix").grad
    out["sorted_idx"] = net.re_organize_middle_weights(0)
    out["depth_after_sort"] = net.blocks[0].depth.weight
    net.eval()
    with torch.no_grad():
        x_eval = _batch(torch, 160, n=2, hw=5)[0]
        out["eval_small"] = net(x_eval, subnets[1])
        out["eval_largest"] = net(x_eval, largest)
    return out


@program(rtol=5e-4, atol=5e-5)
def nas_proxyless_binary_gates_custom_function(torch):
    """ProxylessNAS' path-level binarization: one candidate path per edge is made active from
    fixed NumPy uniforms, the forward runs only that path inside a custom
    ``autograd.Function`` (non-tensor closures as arguments, ``enable_grad`` inside forward), whose
    backward returns the input gradient and ``sum(out_k * grad_output)`` for every path's binary
    gate; the alpha gradient follows ``binary_grad_j * p_j * (delta_ij - p_i)``, plus the
    expected-latency regulariser."""
    nn, F = torch.nn, torch.nn.functional
    d, n_choices = 5, 4

    def detach_variable(x):
        y = x.detach()
        y.requires_grad = x.requires_grad
        return y

    class ArchGradientFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, binary_gates, run_func, backward_func):
            ctx.run_func = run_func
            ctx.backward_func = backward_func
            detached_x = detach_variable(x)
            with torch.enable_grad():
                output = run_func(detached_x)
            ctx.save_for_backward(detached_x, output)
            return output.data

        @staticmethod
        def backward(ctx, grad_output):
            detached_x, output = ctx.saved_tensors
            grad_x = torch.autograd.grad(output, detached_x, grad_output, only_inputs=True)
            binary_grads = ctx.backward_func(detached_x.data, output.data, grad_output.data)
            return grad_x[0], binary_grads, None, None

    class MixedEdge(nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.candidate_ops = nn.ModuleList([
                nn.Sequential(nn.Linear(d, d), nn.ReLU()),
                nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d)),
                nn.Sequential(nn.Linear(d, d), nn.Tanh()),
                nn.Identity(),
            ])  # fmt: skip
            self.AP_path_alpha = nn.Parameter(torch.from_numpy(arr(seed, n_choices, scale=0.3)))
            self.AP_path_wb = nn.Parameter(torch.zeros(n_choices))
            self.active_index = 0

        @property
        def probs_over_ops(self):
            return F.softmax(self.AP_path_alpha, dim=0)

        def binarize(self, u):
            self.AP_path_wb.data.zero_()
            probs = self.probs_over_ops.data
            sample = int((probs.cumsum(0) < u).sum().clamp(max=n_choices - 1).item())
            self.active_index = sample
            self.AP_path_wb.data[sample] = 1.0

        def forward(self, x):
            ops, active = self.candidate_ops, self.active_index

            def run_function(_x):
                return ops[active](_x)

            def backward_function(_x, _output, grad_output):
                binary_grads = torch.zeros_like(self.AP_path_wb.data)
                with torch.no_grad():
                    for k in range(len(ops)):
                        out_k = ops[k](_x.data) if k != active else _output.data
                        binary_grads[k] = torch.sum(out_k * grad_output)
                return binary_grads

            return ArchGradientFunction.apply(x, self.AP_path_wb, run_function, backward_function)

        def set_arch_param_grad(self):
            binary_grads = self.AP_path_wb.grad.data
            if self.AP_path_alpha.grad is None:
                self.AP_path_alpha.grad = torch.zeros_like(self.AP_path_alpha.data)
            probs = self.probs_over_ops.data
            for i in range(n_choices):
                for j in range(n_choices):
                    delta = 1.0 if i == j else 0.0
                    self.AP_path_alpha.grad.data[i] += (
                        binary_grads[j] * probs[j] * (delta - probs[i])
                    )

    edges = nn.ModuleList(MixedEdge(170 + e) for e in range(2))
    for e, edge in enumerate(edges):
        set_weights(torch, edge.candidate_ops, seed=172 + e)
    stem = set_weights(torch, nn.Linear(d, d), seed=178)
    head = set_weights(torch, nn.Linear(d, 2), seed=174)
    weight_params = [p for n, p in edges.named_parameters() if "AP_path" not in n]
    weight_params += list(stem.parameters()) + list(head.parameters())
    alpha_params = [e.AP_path_alpha for e in edges]
    w_opt = torch.optim.SGD(weight_params, lr=0.05, momentum=0.9)
    a_opt = torch.optim.Adam(alpha_params, lr=0.05, betas=(0.0, 0.999), eps=1e-8)
    latency = torch.tensor([1.0, 2.5, 1.2, 0.0])
    uniforms = _uniform(175, 3, 2)
    x, y = torch.from_numpy(arr(176, 6, d)), torch.from_numpy(ints(177, 2, 6))
    out = {"active": [], "loss": [], "alpha_grad": [], "wb_grad": []}
    for step in range(3):
        for e, edge in enumerate(edges):
            edge.binarize(float(uniforms[step, e]))
        h = torch.tanh(stem(x))
        for edge in edges:
            h = h + edge(h)
        loss = F.cross_entropy(head(h), y)
        w_opt.zero_grad()
        a_opt.zero_grad()
        for edge in edges:
            edge.AP_path_wb.grad = None
        loss.backward()
        w_opt.step()
        expected_latency = sum((edge.probs_over_ops * latency).sum() for edge in edges)
        (0.1 * expected_latency).backward()
        for edge in edges:
            edge.set_arch_param_grad()
        out["alpha_grad"].append(torch.stack([edge.AP_path_alpha.grad.clone() for edge in edges]))
        out["wb_grad"].append(torch.stack([edge.AP_path_wb.grad.clone() for edge in edges]))
        a_opt.step()
        out["active"].append([edge.active_index for edge in edges])
        out["loss"].append(loss.item())
    out["alphas"] = torch.stack(alpha_params)
    out["chosen"] = [edge.probs_over_ops.argmax().item() for edge in edges]
    out["stem_grad"] = stem.weight.grad
    return out


@program(rtol=5e-4, atol=5e-5)
def nas_search_logging_checkpoint_and_child_ensembles(torch):
    """The bookkeeping around a search: alphas in a ``ParameterDict`` picked out of
    ``named_parameters`` by name, the softmaxed alphas and a MixedOp printed to the log, a search
    checkpoint (weights, alphas, optimizer state, genotype string) through ``torch.save`` /
    ``torch.load``, ``copy.deepcopy`` for the unrolled model, ``autograd.grad(allow_unused=True)``,
    SNAS' ``RelaxedOneHotCategorical.log_prob`` of fixed relaxed samples, a hypernetwork as a
    ``parametrize`` parametrization of a layer's weight, and child models evaluated together
    with ``stack_module_state`` + ``vmap(functional_call)``."""
    import copy
    import io

    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class TinySearch(nn.Module):
        def __init__(self):
            super().__init__()
            self.ops = nn.ModuleList([nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.Tanh())])
            self.pool = nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False)
            self.norm = nn.BatchNorm1d(4, affine=False)
            self.arch = nn.ParameterDict({
                "normal": nn.Parameter(torch.from_numpy(arr(190, 3, scale=1e-3))),
                "reduce": nn.Parameter(torch.from_numpy(arr(191, 3, scale=1e-3))),
            })  # fmt: skip

        def forward(self, x):
            w = F.softmax(self.arch["normal"], dim=-1)
            outs = [op(x) for op in self.ops] + [self.pool(x.unsqueeze(1)).squeeze(1)]
            return self.norm(sum(wi * o for wi, o in zip(w, outs)))

    model = set_weights(torch, TinySearch(), seed=192)
    with torch.no_grad():
        model.arch["normal"].copy_(torch.from_numpy(arr(190, 3, scale=1e-3)))
        model.arch["reduce"].copy_(torch.from_numpy(arr(191, 3, scale=1e-3)))
    arch_params = [p for n, p in model.named_parameters() if "arch" in n]
    weight_params = [p for n, p in model.named_parameters() if "arch" not in n]
    w_opt = torch.optim.SGD(weight_params, lr=0.1, momentum=0.9)
    x = torch.from_numpy(arr(193, 6, 4))
    loss = model(x).pow(2).mean() + model(x)[:, 0].mean()
    loss.backward()
    w_opt.step()
    logged = str(F.softmax(model.arch["normal"], dim=-1))
    op_repr = str(model.ops[1]) + "\n" + str(model.pool) + "\n" + str(model.norm)

    buf = io.BytesIO()
    torch.save({"state_dict": model.state_dict(), "alpha": [a.detach() for a in arch_params],
                "optimizer": w_opt.state_dict(), "genotype": "Genotype(normal=[('conv', 0)])"},
               buf)  # fmt: skip
    buf.seek(0)
    ckpt = torch.load(buf)
    restored = TinySearch()
    restored.load_state_dict(ckpt["state_dict"])
    unrolled = copy.deepcopy(model)
    with torch.no_grad():
        for p in unrolled.parameters():
            p.sub_(0.1 * p)
    g_unused = torch.autograd.grad(
        model(x).sum(), [model.arch["normal"], model.arch["reduce"]], allow_unused=True
    )

    # SNAS: relaxed one-hot log-density of fixed relaxed samples
    u = torch.from_numpy(_uniform(194, 2, 3, low=1e-4, high=1.0))
    relaxed = F.softmax((model.arch["normal"] - torch.log(-torch.log(u))) / 0.5, dim=-1)
    dist = D.RelaxedOneHotCategorical(torch.tensor(0.5), logits=model.arch["normal"])
    log_prob = dist.log_prob(relaxed.detach())

    # hypernetwork as a parametrization of a Linear layer's weight
    class FromEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.z = nn.Parameter(torch.from_numpy(arr(195, 3, scale=0.5)))
            self.gen = nn.Linear(3, 12)

        def forward(self, w):
            return w + self.gen(self.z).view_as(w)

    layer = set_weights(torch, nn.Linear(4, 3), seed=196)
    hyper = set_weights(torch, FromEmbedding(), seed=197)
    with torch.no_grad():
        hyper.z.copy_(torch.from_numpy(arr(195, 3, scale=0.5)))
    nn.utils.parametrize.register_parametrization(layer, "weight", hyper)
    y_param = layer(x)
    y_param.sum().backward()

    # three child models with one structure, evaluated in one vmapped call
    children = [set_weights(torch, nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)),
                            seed=200 + i) for i in range(3)]  # fmt: skip
    params, buffers = torch.func.stack_module_state(children)
    base = copy.deepcopy(children[0]).to("meta")

    def call(p, b, inp):
        return torch.func.functional_call(base, (p, b), (inp,))

    ens = torch.func.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
    return {
        "loss": loss,
        "logged": logged,
        "op_repr": op_repr,
        "restored_out": restored(x),
        "ckpt_keys": str(sorted(ckpt)),
        "momentum": ckpt["optimizer"]["state"][0]["momentum_buffer"],
        "unrolled_diff": (unrolled.ops[0].weight - model.ops[0].weight).abs().sum(),
        "unrolled_alpha": unrolled.arch["normal"],
        "grad_unused_is_none": g_unused[1] is None,
        "grad_normal": g_unused[0],
        "log_prob": log_prob,
        "param_names": str([n for n, _ in layer.named_parameters()]),
        "y_param": y_param,
        "z_grad": hyper.z.grad,
        "original_grad": layer.parametrizations.weight.original.grad,
        "ensemble": ens,
        "ensemble_check": children[2](x),
    }
