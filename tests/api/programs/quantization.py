"""Quantisation-aware training as PyTorch code writes it: fake quantisation with observers,
per-channel weights, learned step sizes with a straight-through round."""

from __future__ import annotations

from programs import program
from programs.common import arr, ints, set_weights


def _minmax_qparams(torch, lo, hi, qmin, qmax):
    # MinMaxObserver's asymmetric parameters (the range always holds 0)
    lo, hi = torch.clamp(lo, max=0.0), torch.clamp(hi, min=0.0)
    scale = torch.clamp((hi - lo) / float(qmax - qmin), min=1e-8)
    zero_point = torch.clamp(qmin - torch.round(lo / scale), qmin, qmax).to(torch.int32)
    return scale, zero_point


@program(rtol=1e-4, atol=1e-5)
def qat_mlp_fake_quant_observers(torch):
    # eager-mode QAT by hand: moving-average min/max observers on activations (quint8), symmetric
    # per-channel int8 weights, SGD; then a converted-style int8 forward on the observed ranges
    nn, F = torch.nn, torch.nn.functional

    class QATNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 3)
            self.register_buffer("act_min", torch.zeros(2))
            self.register_buffer("act_max", torch.zeros(2))
            self.register_buffer("seen", torch.zeros((), dtype=torch.long))

        def observe(self, i, x):
            if self.training:
                lo, hi = x.detach().min(), x.detach().max()
                if int(self.seen) == 0:
                    self.act_min[i], self.act_max[i] = lo, hi
                else:
                    self.act_min[i] += 0.1 * (lo - self.act_min[i])
                    self.act_max[i] += 0.1 * (hi - self.act_max[i])
            scale, zp = _minmax_qparams(torch, self.act_min[i], self.act_max[i], 0, 255)
            return torch.fake_quantize_per_tensor_affine(x, scale, zp, 0, 255)

        def qweight(self, w):
            scale = w.detach().abs().amax(dim=1).clamp(min=1e-8) / 127.0
            zp = torch.zeros(w.shape[0], dtype=torch.int32)
            return torch.fake_quantize_per_channel_affine(w, scale, zp, 0, -128, 127)

        def forward(self, x):
            x = self.observe(0, x)
            h = F.relu(F.linear(x, self.qweight(self.fc1.weight), self.fc1.bias))
            h = self.observe(1, h)
            if self.training:
                self.seen += 1
            return F.linear(h, self.qweight(self.fc2.weight), self.fc2.bias)

    net = set_weights(torch, QATNet(), seed=3)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.tensor(arr(1, 32, 8)), torch.tensor(ints(2, 3, 32))
    losses = []
    for step in range(6):
        xb, yb = (
            x[(step % 2) * 16 : (step % 2) * 16 + 16],
            y[(step % 2) * 16 : (step % 2) * 16 + 16],
        )
        loss = F.cross_entropy(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    grad_fc1 = net.fc1.weight.grad.clone()
    net.eval()
    with torch.no_grad():
        logits = net(x)
    return {"losses": torch.tensor(losses), "grad_fc1": grad_fc1, "logits": logits,
            "act_min": net.act_min, "act_max": net.act_max, "seen": net.seen,
            "w2": net.fc2.weight}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def lsq_learned_step_size_quantization(torch):
    # LSQ (Esser et al.): a learnable step per layer, the round passed straight through and the
    # step's gradient scaled by 1 / sqrt(numel * qmax), as the paper's reference code writes it
    nn, F = torch.nn, torch.nn.functional

    def grad_scale(x, scale):
        return (x - x * scale).detach() + x * scale

    def round_pass(x):
        return (x.round() - x).detach() + x

    class LsqQuan(nn.Module):
        def __init__(self, bits, signed):
            super().__init__()
            self.qmin = -(2 ** (bits - 1)) if signed else 0
            self.qmax = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
            self.s = nn.Parameter(torch.tensor(1.0))

        def init_from(self, x):
            self.s.data.copy_(x.detach().abs().mean() * 2 / (self.qmax**0.5))

        def forward(self, x):
            g = 1.0 / ((x.numel() * self.qmax) ** 0.5)
            s = grad_scale(self.s, g)
            return round_pass(torch.clamp(x / s, self.qmin, self.qmax)) * s

    class QConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.head = nn.Linear(4 * 16, 2)

        def forward(self, x):
            h = F.relu(F.conv2d(x, self.wq(self.conv.weight), self.conv.bias, padding=1))
            return self.head(self.aq(h).flatten(1))

    net = set_weights(torch, QConvNet(), seed=5)
    net.wq, net.aq = LsqQuan(4, True), LsqQuan(4, False)  # (their steps start from the data)
    net.wq.init_from(net.conv.weight)
    net.aq.s.data.fill_(0.1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x, y = torch.tensor(arr(6, 8, 2, 4, 4)), torch.tensor(ints(7, 2, 8))
    losses, steps = [], []
    for _ in range(5):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        steps.append(torch.stack([net.wq.s.detach(), net.aq.s.detach()]))
    return {"losses": torch.tensor(losses), "steps": torch.stack(steps),
            "conv_w": net.conv.weight, "head_w": net.head.weight}  # fmt: skip


@program
def fake_quant_grid_and_straight_through_mask(torch):
    # the quantise-dequantise grid at its edges (ties to even, clamping at both ends), the
    # straight-through mask as the gradient, per-tensor with tensor qparams and per-channel on
    # a middle axis
    x = torch.tensor(arr(8, 3, 5, 4, scale=2.0), requires_grad=True)
    edges = torch.tensor([0.05, 0.15, 0.25, -0.05, -0.35, 12.8, -12.9, 0.0])
    t = torch.fake_quantize_per_tensor_affine(edges, 0.1, 0, -128, 127)
    y1 = torch.fake_quantize_per_tensor_affine(x, torch.tensor([0.25]),
                                               torch.tensor([2], dtype=torch.int32), -8, 7)  # fmt: skip
    (g1,) = torch.autograd.grad((y1 * torch.tensor(arr(9, 3, 5, 4))).sum(), x)
    scale = torch.tensor([0.1, 0.3, 0.05, 0.2, 0.5])
    zp = torch.tensor([0, 1, -2, 3, 0], dtype=torch.int32)
    y2 = torch.fake_quantize_per_channel_affine(x, scale, zp, 1, -4, 3)
    (g2,) = torch.autograd.grad(y2.pow(2).sum(), x)
    return {"edges": t, "y1": y1, "g1": g1, "y2": y2, "g2": g2}
