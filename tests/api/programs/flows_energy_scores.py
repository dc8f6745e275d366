"""Normalizing flows, energy-based models and score matching, as nflows / normflows / Glow /
pytorch-flows / score_sde code writes them: RealNVP image couplings with checkerboard and channel
masks, Glow's ActNorm and LU-decomposed invertible 1x1 convolution with a learned split prior,
pytorch-flows' MADE/MAF with batch-norm flows, amortized planar and radial flows inside a VAE,
rational-quadratic splines with ``searchsorted``, NICE, invertible ResNets with a power-series
log-determinant, energy-based models trained by contrastive divergence (SGLD with a replay buffer,
JEM, an RBM with Gibbs chains), and denoising, sliced and exact score matching.

Every random draw (Langevin noise, Bernoulli and Gibbs sampling, replay-buffer picks, sampling
noise, score-matching projections, power-iteration starts) comes from NumPy with a fixed seed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _unif(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _moons(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    return (np.stack([x, y], 1) + 0.08 * rng.standard_normal((n, 2))).astype(np.float32)


@program
def flow_realnvp_checkerboard_channel_masks_images(torch):
    """Real NVP on images (Dinh et al. 2017, as the chrischute/real-nvp port writes it): the
    logit preprocessing with its log-det, checkerboard couplings with ``tanh``-bounded scales and
    a learned rescale, a ``pixel_unshuffle`` squeeze, channel-wise couplings on ``chunk`` halves,
    bits per dimension, exact inversion and sampling from fixed noise."""
    nn, F = torch.nn, torch.nn.functional

    def checkerboard_mask(height, width, reverse=False):
        mask = ((torch.arange(height).view(-1, 1) + torch.arange(width)) % 2).float()
        mask = 1 - mask if reverse else mask
        return mask.view(1, 1, height, width)

    class Rescale(nn.Module):
        def __init__(self, num_channels):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(num_channels, 1, 1))

        def forward(self, x):
            return self.weight * x

    class STNet(nn.Module):
        def __init__(self, in_ch, mid_ch, out_ch):
            super().__init__()
            self.in_conv = nn.Conv2d(in_ch, mid_ch, 3, padding=1)
            self.block = nn.Sequential(nn.BatchNorm2d(mid_ch), nn.ReLU(),
                                       nn.Conv2d(mid_ch, mid_ch, 3, padding=1))  # fmt: skip
            self.out_conv = nn.Conv2d(mid_ch, 2 * out_ch, 1)

        def forward(self, x):
            h = self.in_conv(x)
            h = h + self.block(h)
            return self.out_conv(F.relu(h))

    class CouplingLayer(nn.Module):
        def __init__(self, in_ch, mid_ch, mask_type, reverse_mask):
            super().__init__()
            self.mask_type, self.reverse_mask = mask_type, reverse_mask
            if mask_type == "channel_wise":
                in_ch //= 2
            self.st_net = STNet(in_ch, mid_ch, in_ch)
            self.rescale = nn.utils.parametrizations.weight_norm(Rescale(in_ch))

        def forward(self, x, sldj, reverse=False):
            if self.mask_type == "checkerboard":
                b = checkerboard_mask(x.size(2), x.size(3), self.reverse_mask)
                x_b = x * b
                s, t = self.st_net(x_b).chunk(2, dim=1)
                s = self.rescale(torch.tanh(s))
                s, t = s * (1 - b), t * (1 - b)
                if reverse:
                    x = x_b + (1 - b) * ((x - t) * s.mul(-1).exp())
                else:
                    x = x_b + (1 - b) * (x * s.exp() + t)
                    sldj = sldj + s.reshape(s.size(0), -1).sum(-1)
                return x, sldj
            if self.reverse_mask:
                x_id, x_change = x.chunk(2, dim=1)
            else:
                x_change, x_id = x.chunk(2, dim=1)
            st = self.st_net(x_id)
            s, t = st[:, 0::2, ...], st[:, 1::2, ...]
            s = self.rescale(torch.tanh(s))
            if reverse:
                x_change = (x_change - t) * s.mul(-1).exp()
            else:
                x_change = x_change * s.exp() + t
                sldj = sldj + s.reshape(s.size(0), -1).sum(-1)
            x = torch.cat((x_id, x_change), dim=1) if self.reverse_mask else torch.cat(
                (x_change, x_id), dim=1)  # fmt: skip
            return x, sldj

    class RealNVP(nn.Module):
        def __init__(self, in_ch=1, mid_ch=8, data_constraint=0.9):
            super().__init__()
            self.register_buffer("data_constraint", torch.tensor([data_constraint]))
            self.in_couplings = nn.ModuleList([
                CouplingLayer(in_ch, mid_ch, "checkerboard", False),
                CouplingLayer(in_ch, mid_ch, "checkerboard", True),
            ])  # fmt: skip
            self.out_couplings = nn.ModuleList([
                CouplingLayer(4 * in_ch, mid_ch, "channel_wise", False),
                CouplingLayer(4 * in_ch, mid_ch, "channel_wise", True),
            ])  # fmt: skip

        def _pre_process(self, x, u):
            y = (x * 255.0 + u) / 256.0
            y = (2 * y - 1) * self.data_constraint
            y = (y + 1) / 2
            y = y.log() - (1.0 - y).log()
            ldj = F.softplus(y) + F.softplus(-y) - F.softplus(
                (1.0 - self.data_constraint).log() - self.data_constraint.log())  # fmt: skip
            return y, ldj.view(ldj.size(0), -1).sum(-1)

        def forward(self, x, sldj, reverse=False):
            if not reverse:
                for c in self.in_couplings:
                    x, sldj = c(x, sldj)
                x = F.pixel_unshuffle(x, 2)
                for c in self.out_couplings:
                    x, sldj = c(x, sldj)
                return x, sldj
            for c in reversed(self.out_couplings):
                x, sldj = c(x, sldj, reverse=True)
            x = F.pixel_shuffle(x, 2)
            for c in reversed(self.in_couplings):
                x, sldj = c(x, sldj, reverse=True)
            return x, sldj

    def nll_loss(z, sldj, k=256):
        prior_ll = -0.5 * (z**2 + np.log(2 * np.pi))
        prior_ll = prior_ll.flatten(1).sum(-1) - np.log(k) * np.prod(z.size()[1:])
        return -(prior_ll + sldj).mean()

    model = set_weights(torch, RealNVP(), seed=1, scale=0.3)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    x = torch.tensor(np.floor(_unif(2, 6, 1, 4, 4) * 4) / 3.0)
    out = {"nll": [], "bpd": []}
    for step in range(3):
        y, sldj = model._pre_process(x, torch.tensor(_unif(10 + step, 6, 1, 4, 4)))
        z, sldj = model(y, sldj)
        loss = nll_loss(z, sldj)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 100.0)
        opt.step()
        out["nll"].append(loss.item())
        out["bpd"].append(loss.item() / (np.log(2) * x[0].numel()))
        out.setdefault("grad_norm", []).append(norm)
    model.eval()
    with torch.no_grad():
        y, ldj = model._pre_process(x, torch.full_like(x, 0.5))
        z, sldj = model(y, ldj)
        y_back, _ = model(z, torch.zeros(6), reverse=True)
        noise = torch.tensor(arr(20, 3, 4, 2, 2))
        samples, _ = model(noise, torch.zeros(3), reverse=True)
        out["z"] = z
        out["sldj"] = sldj
        out["round_trip_err_small"] = (y_back - y).abs().max().item() < 1e-4
        out["samples"] = torch.sigmoid(samples)
        out["masks"] = [checkerboard_mask(2, 3), checkerboard_mask(2, 3, reverse=True)]
    out["rescale"] = [c.rescale.weight.flatten() for c in model.in_couplings]
    out["weight_g"] = model.out_couplings[0].rescale.parametrizations.weight.original0.flatten()
    out["param_names"] = [n for n, _ in model.in_couplings[0].rescale.named_parameters()]
    out["bn_running_var"] = model.in_couplings[0].st_net.block[0].running_var
    return out


@program
def flow_glow_actnorm_lu_invconv_zeroconv_split_prior(torch):
    """A Glow block as rosinality's glow-pytorch writes it: ActNorm with ``loc``/``scale`` and an
    ``initialized`` buffer, the LU-decomposed invertible 1x1 convolution from ``torch.linalg.lu``
    (checked against the plain ``slogdet`` in float64), an affine coupling ending in a zero-init
    ``ZeroConv2d`` padded with ones, a split with a learned Gaussian prior, bits per dimension,
    and sampling in reverse at temperature 0.7 from fixed noise."""
    nn, F = torch.nn, torch.nn.functional
    logabs = lambda x: torch.log(torch.abs(x))  # noqa: E731

    class ActNorm(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, in_channel, 1, 1))
            self.scale = nn.Parameter(torch.ones(1, in_channel, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def initialize(self, input):
            with torch.no_grad():
                flatten = input.permute(1, 0, 2, 3).contiguous().view(input.shape[1], -1)
                mean = flatten.mean(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                std = flatten.std(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
                self.loc.data.copy_(-mean)
                self.scale.data.copy_(1 / (std + 1e-6))

        def forward(self, input):
            _, _, height, width = input.shape
            if self.initialized.item() == 0:
                self.initialize(input)
                self.initialized.fill_(1)
            logdet = height * width * torch.sum(logabs(self.scale))
            return self.scale * (input + self.loc), logdet

        def reverse(self, output):
            return output / self.scale - self.loc

    class InvConv2dLU(nn.Module):
        def __init__(self, in_channel):
            super().__init__()
            q = np.linalg.qr(np.random.default_rng(5).standard_normal((in_channel, in_channel)))[0]
            w_p, w_l, w_u = torch.linalg.lu(torch.tensor(q.astype(np.float32)))
            w_s = torch.diag(w_u)
            w_u = torch.triu(w_u, 1)
            u_mask = torch.triu(torch.ones_like(w_u), 1)
            self.register_buffer("w_p", w_p)
            self.register_buffer("u_mask", u_mask)
            self.register_buffer("l_mask", u_mask.T.contiguous())
            self.register_buffer("s_sign", torch.sign(w_s))
            self.register_buffer("l_eye", torch.eye(u_mask.shape[0]))
            self.w_l = nn.Parameter(w_l)
            self.w_s = nn.Parameter(logabs(w_s))
            self.w_u = nn.Parameter(w_u)

        def calc_weight(self):
            weight = (self.w_p @ (self.w_l * self.l_mask + self.l_eye)
                      @ ((self.w_u * self.u_mask) + torch.diag(self.s_sign * torch.exp(self.w_s))))  # fmt: skip
            return weight.unsqueeze(2).unsqueeze(3)

        def forward(self, input):
            _, _, height, width = input.shape
            out = F.conv2d(input, self.calc_weight())
            return out, height * width * torch.sum(self.w_s)

        def reverse(self, output):
            return F.conv2d(
                output, self.calc_weight().squeeze().inverse().unsqueeze(2).unsqueeze(3)
            )

    class ZeroConv2d(nn.Module):
        def __init__(self, in_channel, out_channel):
            super().__init__()
            self.conv = nn.Conv2d(in_channel, out_channel, 3, padding=0)
            self.conv.weight.data.zero_()
            self.conv.bias.data.zero_()
            self.scale = nn.Parameter(torch.zeros(1, out_channel, 1, 1))

        def forward(self, input):
            out = F.pad(input, [1, 1, 1, 1], value=1)
            return self.conv(out) * torch.exp(self.scale * 3)

    class AffineCoupling(nn.Module):
        def __init__(self, in_channel, filter_size=8):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(in_channel // 2, filter_size, 3, padding=1), nn.ReLU(inplace=True),
                nn.Conv2d(filter_size, filter_size, 1), nn.ReLU(inplace=True),
                ZeroConv2d(filter_size, in_channel),
            )  # fmt: skip
            self.net[0].bias.data.zero_()

        def forward(self, input):
            in_a, in_b = input.chunk(2, 1)
            log_s, t = self.net(in_a).chunk(2, 1)
            s = F.sigmoid(log_s + 2)
            out_b = (in_b + t) * s
            logdet = torch.sum(torch.log(s).view(input.shape[0], -1), 1)
            return torch.cat([in_a, out_b], 1), logdet

        def reverse(self, output):
            out_a, out_b = output.chunk(2, 1)
            log_s, t = self.net(out_a).chunk(2, 1)
            s = F.sigmoid(log_s + 2)
            return torch.cat([out_a, out_b / s - t], 1)

    def gaussian_log_p(x, mean, log_sd):
        return -0.5 * math.log(2 * math.pi) - log_sd - 0.5 * (x - mean) ** 2 / torch.exp(2 * log_sd)

    def gaussian_sample(eps, mean, log_sd):
        return mean + torch.exp(log_sd) * eps

    n_channel = 4
    actnorm, invconv, coupling = (
        ActNorm(n_channel),
        InvConv2dLU(n_channel),
        AffineCoupling(n_channel),
    )
    prior = ZeroConv2d(n_channel // 2, n_channel)
    set_weights(torch, coupling.net[0], seed=6, scale=0.3)
    set_weights(torch, coupling.net[2], seed=7, scale=0.3)
    flow = nn.ModuleDict({"actnorm": actnorm, "invconv": invconv, "coupling": coupling,
                          "prior": prior})  # fmt: skip
    w0 = invconv.calc_weight().squeeze().detach()
    plain_logdet = torch.slogdet(w0.double())[1].float()
    # normflows builds the same factors with lu_factor + lu_unpack from a QR of a fixed matrix
    q, _ = torch.linalg.qr(torch.tensor(arr(5, n_channel, n_channel)))
    lu, pivots = torch.linalg.lu_factor(q)
    p_nf, l_nf, u_nf = torch.lu_unpack(lu, pivots)
    nf_check = {
        "pivots": pivots,
        "recomposed": p_nf @ l_nf @ u_nf - q,
        "log_abs_diag_u": torch.log(torch.abs(torch.diagonal(u_nf))),
        "logdet": torch.logdet(q @ q.T + torch.eye(n_channel)),
        "det_sign": torch.det(q).sign(),
    }
    n_bins = 32.0
    image = np.floor(_unif(8, 8, 1, 8, 8) * n_bins) / n_bins - 0.5
    images = torch.tensor(image)
    images = images.view(8, 1, 4, 2, 4, 2).permute(0, 1, 3, 5, 2, 4).contiguous().view(8, 4, 4, 4)
    first, x = images[:4], images[4:]
    n_pixel = 8 * 8
    with torch.no_grad():  # glow-pytorch's train loop: the first batch only initialises ActNorm
        actnorm(first + torch.tensor(_unif(9, *first.shape)) / n_bins)
    opt = torch.optim.Adam(flow.parameters(), lr=5e-3)
    out = {"loss": [], "log_p": [], "logdet": []}
    for step in range(3):
        h = x + torch.tensor(_unif(10 + step, *x.shape)) / n_bins
        h, logdet = actnorm(h)
        h, det1 = invconv(h)
        h, det2 = coupling(h)
        logdet = logdet + det1 + det2
        kept, z_new = h.chunk(2, 1)
        mean, log_sd = prior(kept).chunk(2, 1)
        log_p = gaussian_log_p(z_new, mean, log_sd).view(4, -1).sum(1)
        log_p = log_p + gaussian_log_p(kept, torch.zeros_like(kept), torch.zeros_like(kept)).view(
            4, -1).sum(1)  # fmt: skip
        loss = -math.log(n_bins) * n_pixel + logdet + log_p
        bpd = (-loss / (math.log(2) * n_pixel)).mean()
        opt.zero_grad()
        bpd.backward()
        opt.step()
        out["loss"].append(bpd.item())
        out["log_p"].append((log_p.mean() / (math.log(2) * n_pixel)).item())
        out["logdet"].append((logdet.mean() / (math.log(2) * n_pixel)).item())
    with torch.no_grad():
        temp = 0.7
        kept = torch.tensor(arr(30, 2, 2, 4, 4)) * temp
        mean, log_sd = prior(kept).chunk(2, 1)
        z_new = gaussian_sample(torch.tensor(arr(31, 2, 2, 4, 4)) * temp, mean, log_sd)
        h = coupling.reverse(torch.cat([kept, z_new], 1))
        h = actnorm.reverse(invconv.reverse(h))
        sample = h.view(2, 1, 2, 2, 4, 4).permute(0, 1, 4, 2, 5, 3).reshape(2, 1, 8, 8)
        w = invconv.calc_weight().squeeze()
        out.update({
            "lu_logdet_at_init": 16 * plain_logdet,
            "slogdet_now": torch.linalg.slogdet(w.double()).logabsdet.float(),
            "w_s_sum": invconv.w_s.sum(),
            "sign_now": torch.linalg.slogdet(w).sign,
            "sample": sample,
            "actnorm_loc": actnorm.loc.flatten(),
            "actnorm_scale": actnorm.scale.flatten(),
            "initialized": actnorm.initialized,
            "w_p": invconv.w_p,
            "normflows_lu": nf_check,
            "prior_scale": prior.scale.flatten(),
            "grads": grads(flow),
        })  # fmt: skip
    return out


@program
def flow_maf_made_batchnorm_reverse_pytorch_flows(torch):
    """MAF as ikostrikov/pytorch-flows writes it: ``get_mask`` degrees, ``MaskedLinear`` with
    ``F.linear(inputs, weight * mask)``, ``MADE`` in direct/inverse mode (the inverse filling one
    column at a time), ``BatchNormFlow`` with running statistics, ``Reverse`` permutations, a
    ``FlowSequential`` with ``log_probs``, training by maximum likelihood and sampling in eval
    mode from fixed noise."""
    nn, F = torch.nn, torch.nn.functional

    def get_mask(in_features, out_features, in_flow_features, mask_type=None):
        if mask_type == "input":
            in_degrees = torch.arange(in_features) % in_flow_features
        else:
            in_degrees = torch.arange(in_features) % (in_flow_features - 1)
        if mask_type == "output":
            out_degrees = torch.arange(out_features) % in_flow_features - 1
        else:
            out_degrees = torch.arange(out_features) % (in_flow_features - 1)
        return (out_degrees.unsqueeze(-1) >= in_degrees.unsqueeze(0)).float()

    class MaskedLinear(nn.Module):
        def __init__(self, in_features, out_features, mask):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features)
            self.register_buffer("mask", mask)

        def forward(self, inputs):
            return F.linear(inputs, self.linear.weight * self.mask, self.linear.bias)

    class MADE(nn.Module):
        def __init__(self, num_inputs, num_hidden):
            super().__init__()
            input_mask = get_mask(num_inputs, num_hidden, num_inputs, mask_type="input")
            hidden_mask = get_mask(num_hidden, num_hidden, num_inputs)
            output_mask = get_mask(num_hidden, num_inputs * 2, num_inputs, mask_type="output")
            self.joiner = MaskedLinear(num_inputs, num_hidden, input_mask)
            self.trunk = nn.Sequential(nn.ReLU(), MaskedLinear(num_hidden, num_hidden, hidden_mask),
                                       nn.ReLU(), MaskedLinear(num_hidden, num_inputs * 2,
                                                               output_mask))  # fmt: skip

        def forward(self, inputs, mode="direct"):
            if mode == "direct":
                m, a = self.trunk(self.joiner(inputs)).chunk(2, 1)
                u = (inputs - m) * torch.exp(-a)
                return u, -a.sum(-1, keepdim=True)
            x = torch.zeros_like(inputs)
            for i_col in range(inputs.shape[1]):
                m, a = self.trunk(self.joiner(x)).chunk(2, 1)
                x[:, i_col] = inputs[:, i_col] * torch.exp(a[:, i_col]) + m[:, i_col]
            return x, -a.sum(-1, keepdim=True)

    class BatchNormFlow(nn.Module):
        def __init__(self, num_inputs, momentum=0.0, eps=1e-5):
            super().__init__()
            self.log_gamma = nn.Parameter(torch.zeros(num_inputs))
            self.beta = nn.Parameter(torch.zeros(num_inputs))
            self.momentum, self.eps = momentum, eps
            self.register_buffer("running_mean", torch.zeros(num_inputs))
            self.register_buffer("running_var", torch.ones(num_inputs))

        def forward(self, inputs, mode="direct"):
            if mode == "direct":
                if self.training:
                    self.batch_mean = inputs.mean(0)
                    self.batch_var = (inputs - self.batch_mean).pow(2).mean(0) + self.eps
                    self.running_mean.mul_(self.momentum)
                    self.running_var.mul_(self.momentum)
                    self.running_mean.add_(self.batch_mean.data * (1 - self.momentum))
                    self.running_var.add_(self.batch_var.data * (1 - self.momentum))
                    mean, var = self.batch_mean, self.batch_var
                else:
                    mean, var = self.running_mean, self.running_var
                x_hat = (inputs - mean) / var.sqrt()
                y = torch.exp(self.log_gamma) * x_hat + self.beta
                return y, (self.log_gamma - 0.5 * torch.log(var)).sum(-1, keepdim=True)
            mean, var = (self.batch_mean, self.batch_var) if self.training else (
                self.running_mean, self.running_var)  # fmt: skip
            x_hat = (inputs - self.beta) / torch.exp(self.log_gamma)
            y = x_hat * var.sqrt() + mean
            return y, (-self.log_gamma + 0.5 * torch.log(var)).sum(-1, keepdim=True)

    class Reverse(nn.Module):
        def __init__(self, num_inputs):
            super().__init__()
            self.perm = np.array(np.arange(0, num_inputs)[::-1])
            self.inv_perm = np.argsort(self.perm)

        def forward(self, inputs, mode="direct"):
            perm = self.perm if mode == "direct" else self.inv_perm
            return inputs[:, perm], torch.zeros(inputs.size(0), 1)

    class FlowSequential(nn.Sequential):
        def forward(self, inputs, mode="direct", logdets=None):
            self.num_inputs = inputs.size(-1)
            if logdets is None:
                logdets = torch.zeros(inputs.size(0), 1)
            modules = (
                self._modules.values() if mode == "direct" else reversed(self._modules.values())
            )
            for module in modules:
                inputs, logdet = module(inputs, mode)
                logdets += logdet
            return inputs, logdets

        def log_probs(self, inputs):
            u, log_jacob = self(inputs)
            log_probs = (-0.5 * u.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
            return (log_probs + log_jacob).sum(-1, keepdim=True)

        def sample(self, noise):
            return self.forward(noise, mode="inverse")[0]

    num_inputs, num_hidden = 3, 12
    # the data are standardised by a leading batch-norm flow (a MADE followed by one would leave
    # its first output's shift and scale with exactly zero gradient, which Adam turns into noise)
    modules = [BatchNormFlow(num_inputs)]
    for _ in range(2):
        modules += [MADE(num_inputs, num_hidden), Reverse(num_inputs)]
    model = FlowSequential(*modules)
    set_weights(torch, model, seed=40, scale=0.3)
    for module in model.modules():
        if isinstance(module, BatchNormFlow):
            module.log_gamma.data.zero_()
            module.beta.data.zero_()
    rng = np.random.default_rng(41)
    x1 = rng.standard_normal(64)
    data = np.stack([x1, 0.5 * x1**2 + 0.3 * rng.standard_normal(64),
                     np.tanh(x1) + 0.2 * rng.standard_normal(64)], 1).astype(np.float32)  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-6)
    losses = []
    for _epoch in range(2):
        for batch in torch.tensor(data).split(32):
            opt.zero_grad()
            loss = -model.log_probs(batch).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    for module in model.modules():
        if isinstance(module, BatchNormFlow):
            module.momentum = 0
    with torch.no_grad():
        model(torch.tensor(data))  # refresh the running statistics on the whole set
    for module in model.modules():
        if isinstance(module, BatchNormFlow):
            module.momentum = 1
    model.eval()
    with torch.no_grad():
        test_ll = model.log_probs(torch.tensor(data[:8]))
        samples = model.sample(torch.tensor(arr(42, 5, num_inputs)))
        u, _ = model(samples)
    return {
        "losses": losses,
        "test_ll": test_ll,
        "samples": samples,
        "noise_back": u,
        "masks": [model[1].joiner.mask, model[1].trunk[1].mask, model[1].trunk[3].mask],
        "running": [model[0].running_mean, model[0].running_var],
        "params": params(model),
    }


@program
def flow_amortized_planar_radial_vae_bmm(torch):
    """A VAE with amortized normalizing flows as the sylvester-flows code (van den Berg et al.)
    writes it: the encoder emits per-sample ``u``, ``w``, ``b`` of K planar flows (``torch.bmm``,
    the ``u_hat`` invertibility fix with ``softplus``) and a radial flow's ``z0``/alpha/beta; the
    ELBO with the flows' log-determinants; one planar step's log-det checked against ``slogdet``
    of its autograd Jacobian."""
    nn, F = torch.nn, torch.nn.functional
    z_size, K, n_in = 2, 2, 10

    class Planar(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = nn.Tanh()
            self.softplus = nn.Softplus()

        def der_h(self, x):
            return 1 - self.h(x) ** 2

        def forward(self, zk, u, w, b):
            zk = zk.unsqueeze(2)
            uw = torch.bmm(w, u)
            m_uw = -1.0 + self.softplus(uw)
            w_norm_sq = torch.sum(w**2, dim=2, keepdim=True)
            u_hat = u + ((m_uw - uw) * w.transpose(2, 1) / w_norm_sq)
            wzb = torch.bmm(w, zk) + b
            z = zk + u_hat * self.h(wzb)
            z = z.squeeze(2)
            psi = w * self.der_h(wzb)
            log_det_jacobian = torch.log(torch.abs(1 + torch.bmm(psi, u_hat)))
            return z, log_det_jacobian.squeeze(2).squeeze(1)

    def radial(z, z0, alpha, beta):
        beta_hat = -alpha + F.softplus(beta)
        diff = z - z0
        r = torch.linalg.vector_norm(diff, dim=-1, keepdim=True)
        h = 1.0 / (alpha + r)
        z_new = z + beta_hat * h * diff
        log_det = (z.size(-1) - 1) * torch.log1p(beta_hat * h) + torch.log1p(
            beta_hat * h - beta_hat * r * h**2)  # fmt: skip
        return z_new, log_det.squeeze(-1)

    class PlanarVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_z_nn = nn.Sequential(nn.Linear(n_in, 16), nn.Softplus())
            self.q_z_mean = nn.Linear(16, z_size)
            self.q_z_var = nn.Sequential(nn.Linear(16, z_size), nn.Softplus())
            self.amor_u = nn.Linear(16, K * z_size)
            self.amor_w = nn.Linear(16, K * z_size)
            self.amor_b = nn.Linear(16, K)
            self.amor_radial = nn.Linear(16, z_size + 2)
            self.flow = Planar()
            self.p_x = nn.Sequential(nn.Linear(z_size, 16), nn.Tanh(), nn.Linear(16, n_in))

        def forward(self, x, eps):
            batch_size = x.size(0)
            h = self.q_z_nn(x)
            z_mu, z_var = self.q_z_mean(h), self.q_z_var(h)
            u = self.amor_u(h).view(batch_size, K, z_size, 1)
            w = self.amor_w(h).view(batch_size, K, 1, z_size)
            b = self.amor_b(h).view(batch_size, K, 1, 1)
            z0 = z_mu + eps * z_var.sqrt()
            z = [z0]
            log_det_j = torch.zeros(batch_size)
            for k in range(K):
                z_k, ldj = self.flow(z[k], u[:, k], w[:, k], b[:, k])
                z.append(z_k)
                log_det_j = log_det_j + ldj
            rad = self.amor_radial(h)
            center, alpha, beta = (
                rad[:, :z_size],
                F.softplus(rad[:, z_size : z_size + 1]),
                rad[:, -1:],
            )
            z_k, ldj = radial(z[-1], center, alpha, beta)
            log_det_j = log_det_j + ldj
            return self.p_x(z_k), z_mu, z_var, log_det_j, z0, z_k, (u, w, b)

    def log_normal_diag(x, mean, log_var, dim):
        return torch.sum(
            -0.5 * (log_var + (x - mean) * (x - mean) * log_var.exp().reciprocal()), dim
        )

    def log_normal_standard(x, dim):
        return torch.sum(-0.5 * x * x, dim)

    model = set_weights(torch, PlanarVAE(), seed=50, scale=0.4)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.tensor((_unif(51, 12, n_in) > 0.5).astype(np.float32))
    out = {"loss": [], "rec": [], "kl": []}
    for step in range(3):
        eps = torch.tensor(arr(52 + step, 12, z_size))
        logits, z_mu, z_var, log_det_j, z0, z_k, _ = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        log_q_z0 = log_normal_diag(z0, z_mu, z_var.log(), dim=1)
        log_p_zk = log_normal_standard(z_k, dim=1)
        kl = torch.sum(log_q_z0 - log_p_zk) - torch.sum(log_det_j)
        loss = (rec + kl) / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["rec"].append(rec.item() / x.size(0))
        out["kl"].append(kl.item() / x.size(0))
    eps = torch.tensor(arr(60, 12, z_size))
    with torch.no_grad():
        _, _, _, log_det_j, z0, z_k, (u, w, b) = model(x, eps)
    flow = model.flow

    def one_step(z):
        return flow(z.view(1, z_size), u[:1, 0], w[:1, 0], b[:1, 0])[0].view(z_size)

    jac = torch.autograd.functional.jacobian(one_step, z0[0])
    _, ldj0 = flow(z0[:1], u[:1, 0], w[:1, 0], b[:1, 0])
    out.update({"log_det_j": log_det_j, "z_k": z_k, "jacobian": jac,
                "slogdet": torch.linalg.slogdet(jac)[1], "planar_ldj": ldj0,
                "grads": grads(model)})  # fmt: skip
    return out


def _rq_spline(torch, inputs, uw, uh, ud, inverse=False, tail_bound=3.0, min_bin_width=1e-3,
               min_bin_height=1e-3, min_derivative=1e-3):  # fmt: skip
    """A rational-quadratic spline (Durkan et al. 2019) on [-B, B] with linear tails, written
    the way nflows' ``unconstrained_rational_quadratic_spline`` is organised."""
    F = torch.nn.functional
    inside = (inputs >= -tail_bound) & (inputs <= tail_bound)
    outside = ~inside
    outputs = torch.zeros_like(inputs)
    logabsdet = torch.zeros_like(inputs)
    ud = F.pad(ud, pad=(1, 1))
    constant = np.log(np.exp(1 - min_derivative) - 1)
    ud[..., 0] = constant
    ud[..., -1] = constant
    outputs[outside] = inputs[outside]
    logabsdet[outside] = 0

    x, uw, uh, ud = inputs[inside], uw[inside, :], uh[inside, :], ud[inside, :]
    num_bins = uw.shape[-1]
    left, right, bottom, top = -tail_bound, tail_bound, -tail_bound, tail_bound

    widths = F.softmax(uw, dim=-1)
    widths = min_bin_width + (1 - min_bin_width * num_bins) * widths
    cumwidths = torch.cumsum(widths, dim=-1)
    cumwidths = F.pad(cumwidths, pad=(1, 0), mode="constant", value=0.0)
    cumwidths = (right - left) * cumwidths + left
    cumwidths[..., 0] = left
    cumwidths[..., -1] = right
    widths = cumwidths[..., 1:] - cumwidths[..., :-1]
    derivatives = min_derivative + F.softplus(ud)
    heights = F.softmax(uh, dim=-1)
    heights = min_bin_height + (1 - min_bin_height * num_bins) * heights
    cumheights = torch.cumsum(heights, dim=-1)
    cumheights = F.pad(cumheights, pad=(1, 0), mode="constant", value=0.0)
    cumheights = (top - bottom) * cumheights + bottom
    cumheights[..., 0] = bottom
    cumheights[..., -1] = top
    heights = cumheights[..., 1:] - cumheights[..., :-1]

    locations = (cumheights if inverse else cumwidths).detach().clone()
    locations[..., -1] += 1e-6
    bin_idx = (torch.searchsorted(locations, x[..., None], right=True) - 1).clamp(0, num_bins - 1)
    nflows_idx = torch.sum(x[..., None] >= locations, dim=-1) - 1

    def pick(t):
        return t.gather(-1, bin_idx)[..., 0]

    in_cumw, in_w, in_cumh, in_h = pick(cumwidths), pick(widths), pick(cumheights), pick(heights)
    delta = heights / widths
    in_delta, in_d, in_d1 = pick(delta), pick(derivatives), pick(derivatives[..., 1:])
    if inverse:
        a = (x - in_cumh) * (in_d + in_d1 - 2 * in_delta) + in_h * (in_delta - in_d)
        b = in_h * in_d - (x - in_cumh) * (in_d + in_d1 - 2 * in_delta)
        c = -in_delta * (x - in_cumh)
        discriminant = b.pow(2) - 4 * a * c
        theta = (2 * c) / (-b - torch.sqrt(discriminant))
        y = theta * in_w + in_cumw
    else:
        theta = (x - in_cumw) / in_w
    t1mt = theta * (1 - theta)
    denominator = in_delta + (in_d + in_d1 - 2 * in_delta) * t1mt
    if not inverse:
        y = in_cumh + in_h * (in_delta * theta.pow(2) + in_d * t1mt) / denominator
    deriv_num = in_delta.pow(2) * (
        in_d1 * theta.pow(2) + 2 * in_delta * t1mt + in_d * (1 - theta).pow(2)
    )
    lad = torch.log(deriv_num) - 2 * torch.log(denominator)
    outputs[inside] = y
    logabsdet[inside] = -lad if inverse else lad
    return outputs, logabsdet, bin_idx[..., 0], nflows_idx


@program
def flow_rational_quadratic_spline_coupling_searchsorted(torch):
    """A neural spline flow coupling (nflows' ``PiecewiseRationalQuadraticCouplingTransform``):
    an MLP on the identity half emits ``3K - 1`` parameters per transformed dimension (widths and
    heights scaled by ``1/sqrt(hidden)``), the spline with linear tails is evaluated inside
    ``[-B, B]`` through boolean-mask assignment, bins found by ``torch.searchsorted`` (and by
    nflows' ``sum(x >= edges) - 1``), inverted by the quadratic formula, trained by likelihood."""
    nn = torch.nn
    num_bins, hidden, dim = 5, 16, 4

    class SplineCoupling(nn.Module):
        def __init__(self, reverse):
            super().__init__()
            self.reverse = reverse
            self.net = nn.Sequential(nn.Linear(dim // 2, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, (dim // 2) * (3 * num_bins - 1)))  # fmt: skip

        def _params(self, identity):
            p = self.net(identity).view(identity.shape[0], dim // 2, 3 * num_bins - 1)
            uw = p[..., :num_bins] / math.sqrt(hidden)
            uh = p[..., num_bins : 2 * num_bins] / math.sqrt(hidden)
            return uw, uh, p[..., 2 * num_bins :]

        def forward(self, x, inverse=False):
            a, b = x.chunk(2, dim=-1)
            identity, change = (b, a) if self.reverse else (a, b)
            uw, uh, ud = self._params(identity)
            y, lad, idx, idx2 = _rq_spline(torch, change, uw, uh, ud, inverse=inverse)
            self.last_bins = (idx, idx2)
            out = torch.cat([y, identity], -1) if self.reverse else torch.cat([identity, y], -1)
            return out, lad.sum(-1)

    layers = nn.ModuleList([SplineCoupling(False), SplineCoupling(True)])
    set_weights(torch, layers, seed=70, scale=0.5)
    base = torch.distributions.Independent(torch.distributions.Normal(torch.zeros(dim),
                                                                      torch.ones(dim)), 1)  # fmt: skip
    data = arr(71, 24, dim) * np.array([1.0, 2.5, 0.7, 1.5], np.float32)
    data[:3, 1] = [4.0, -5.0, 3.5]  # some points in the linear tails
    x = torch.tensor(data)

    def log_prob(v):
        total = torch.zeros(v.shape[0])
        for layer in layers:
            v, lad = layer(v)
            total = total + lad
        return base.log_prob(v) + total, v

    opt = torch.optim.Adam(layers.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        lp, _ = log_prob(x)
        loss = -lp.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    lp, z = log_prob(x)
    opt.zero_grad()
    lp.mean().backward()
    with torch.no_grad():
        idx, idx_nflows = layers[0].last_bins
        v, inv_lad = z, torch.zeros(x.shape[0])
        for layer in reversed(layers):
            v, lad = layer(v, inverse=True)
            inv_lad = inv_lad + lad
        samples = torch.tensor(arr(72, 6, dim))
        for layer in reversed(layers):
            samples, _ = layer(samples, inverse=True)
    return {
        "losses": losses,
        "log_prob": lp,
        "z": z,
        "bins": idx,
        "bins_agree": torch.equal(idx, idx_nflows),
        "round_trip_err_small": (v - x).abs().max().item() < 1e-3,
        "inverse_logdet": inv_lad,
        "samples": samples,
        "grads": grads(layers),
    }


@program
def flow_normflows_maximum_likelihood_moons_sampling_grid(torch):
    """normflows' two-moons tutorial: a ``NormalizingFlow`` with a trainable diagonal Gaussian
    base, ``MaskedAffineFlow`` layers (binary masks, zero-initialised output layers, the
    ``torch.where(torch.isfinite(...))`` guard) interleaved with data-initialised ``ActNorm``,
    the forward KL loss with its NaN/inf guard, fixed-noise sampling with log-densities, and the
    density on a ``meshgrid`` with NaNs zeroed."""
    nn = torch.nn

    class DiagGaussian(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.loc = nn.Parameter(torch.zeros(1, d))
            self.log_scale = nn.Parameter(torch.zeros(1, d))

        def forward(self, eps):
            z = self.loc + torch.exp(self.log_scale) * eps
            log_p = -0.5 * self.d * np.log(2 * np.pi) - torch.sum(
                self.log_scale + 0.5 * torch.pow(eps, 2), 1)  # fmt: skip
            return z, log_p

        def log_prob(self, z):
            return -0.5 * self.d * np.log(2 * np.pi) - torch.sum(
                self.log_scale + 0.5 * torch.pow((z - self.loc) / torch.exp(self.log_scale), 2),
                1)  # fmt: skip

    class MLP(nn.Sequential):
        def __init__(self, sizes, init_zeros=False):
            layers = []
            for k in range(len(sizes) - 2):
                layers += [nn.Linear(sizes[k], sizes[k + 1]), nn.LeakyReLU(0.0)]
            layers.append(nn.Linear(sizes[-2], sizes[-1]))
            super().__init__(*layers)
            self.init_zeros = init_zeros

    class MaskedAffineFlow(nn.Module):
        def __init__(self, b, t, s):
            super().__init__()
            self.register_buffer("b", b.view(1, *b.size()))
            self.s, self.t = s, t

        def forward(self, z):
            z_masked = self.b * z
            scale = self.s(z_masked)
            nan = torch.tensor(np.nan, dtype=z.dtype)
            scale = torch.where(torch.isfinite(scale), scale, nan)
            trans = self.t(z_masked)
            trans = torch.where(torch.isfinite(trans), trans, nan)
            z_ = z_masked + (1 - self.b) * (z * torch.exp(scale) + trans)
            return z_, torch.sum((1 - self.b) * scale, dim=list(range(1, self.b.dim())))

        def inverse(self, z):
            z_masked = self.b * z
            scale, trans = self.s(z_masked), self.t(z_masked)
            z_ = z_masked + (1 - self.b) * (z - trans) * torch.exp(-scale)
            return z_, -torch.sum((1 - self.b) * scale, dim=list(range(1, self.b.dim())))

    class ActNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.s = nn.Parameter(torch.zeros(1, d))
            self.t = nn.Parameter(torch.zeros(1, d))
            self.register_buffer("data_dep_init_done", torch.tensor(0.0))

        def forward(self, z):
            if not self.data_dep_init_done > 0.0:
                s_init = -torch.log(z.std(dim=0, keepdim=True) + 1e-6)
                self.s.data = s_init.data
                self.t.data = (-z.mean(dim=0, keepdim=True) * torch.exp(self.s)).data
                self.data_dep_init_done = torch.tensor(1.0)
            return z * torch.exp(self.s) + self.t, torch.sum(self.s).expand(z.shape[0])

        def inverse(self, z):
            return (z - self.t) * torch.exp(-self.s), -torch.sum(self.s).expand(z.shape[0])

    class NormalizingFlow(nn.Module):
        def __init__(self, q0, flows):
            super().__init__()
            self.q0, self.flows = q0, nn.ModuleList(flows)

        def forward_kld(self, x):
            log_q = torch.zeros(len(x))
            z = x
            for i in range(len(self.flows) - 1, -1, -1):
                z, log_det = self.flows[i].inverse(z)
                log_q += log_det
            log_q += self.q0.log_prob(z)
            return -torch.mean(log_q)

        def sample(self, eps):
            z, log_q = self.q0(eps)
            for flow in self.flows:
                z, log_det = flow(z)
                log_q -= log_det
            return z, log_q

        def log_prob(self, x):
            log_q = torch.zeros(len(x), dtype=x.dtype)
            z = x
            for i in range(len(self.flows) - 1, -1, -1):
                z, log_det = self.flows[i].inverse(z)
                log_q += log_det
            return log_q + self.q0.log_prob(z)

    b = torch.tensor([0, 1])
    flows = []
    for i in range(4):
        s = MLP([2, 16, 16, 2], init_zeros=True)
        t = MLP([2, 16, 16, 2], init_zeros=True)
        set_weights(torch, s, seed=80 + i, scale=0.3)
        set_weights(torch, t, seed=90 + i, scale=0.3)
        with torch.no_grad():
            s[-1].weight.zero_()
            s[-1].bias.zero_()
        mask = b if i % 2 == 0 else 1 - b
        flows += [MaskedAffineFlow(mask.float(), t, s), ActNorm(2)]
    model = NormalizingFlow(DiagGaussian(2), flows)
    data = torch.tensor(_moons(100, 48))
    with torch.no_grad():  # normflows' tutorials push one batch through to initialise ActNorm
        model.sample(torch.tensor(arr(101, 48, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-5)
    losses, skipped = [], 0
    for _ in range(5):
        opt.zero_grad()
        loss = model.forward_kld(data)
        if ~(torch.isnan(loss) | torch.isinf(loss)):
            loss.backward()
            opt.step()
        else:
            skipped += 1
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        samples, log_q = model.sample(torch.tensor(arr(102, 8, 2)))
        log_q_again = model.log_prob(samples)
        grid_size = 6
        xx, yy = torch.meshgrid(torch.linspace(-1.5, 2.5, grid_size),
                                torch.linspace(-1, 1.5, grid_size), indexing="ij")  # fmt: skip
        zz = torch.cat([xx.unsqueeze(2), yy.unsqueeze(2)], 2).view(-1, 2)
        prob = torch.exp(model.log_prob(zz)).view(*xx.shape)
        prob[torch.isnan(prob)] = 0
    return {
        "losses": losses,
        "skipped": skipped,
        "samples": samples,
        "log_q": log_q,
        "log_q_consistent": torch.allclose(log_q, log_q_again, atol=1e-4),
        "prob_grid": prob,
        "actnorm_init": [flows[1].s, flows[1].t, flows[1].data_dep_init_done],
        "params": params(model),
    }


@program
def flow_ebm_contrastive_divergence_sgld_replay_buffer(torch):
    """An image EBM trained by contrastive divergence as the UvA deep-learning tutorial and
    IGEBM write it: a ``Swish`` CNN energy, a replay buffer with 5 % fresh uniform restarts,
    SGLD through ``inp.data.add_`` / ``clamp_`` / clipped ``grad.data`` with parameters frozen
    by ``requires_grad = False`` and ``torch.set_grad_enabled``, the CD loss with a squared-energy
    regularizer, and Adam with beta1 = 0."""
    nn = torch.nn

    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    class CNNModel(nn.Module):
        def __init__(self, hidden=4, out_dim=1):
            super().__init__()
            self.cnn_layers = nn.Sequential(
                nn.Conv2d(1, hidden, 3, stride=2, padding=1), Swish(),
                nn.Conv2d(hidden, 2 * hidden, 3, stride=2, padding=1), Swish(),
                nn.Flatten(), nn.Linear(2 * hidden * 2 * 2, hidden), Swish(),
                nn.Linear(hidden, out_dim),
            )  # fmt: skip

        def forward(self, x):
            return self.cnn_layers(x).squeeze(dim=-1)

    def generate_samples(model, inp_imgs, noises, step_size=10):
        is_training = model.training
        model.eval()
        for p in model.parameters():
            p.requires_grad = False
        inp_imgs.requires_grad = True
        had_gradients_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        for noise in noises:
            inp_imgs.data.add_(noise)
            inp_imgs.data.clamp_(min=-1.0, max=1.0)
            out_imgs = -model(inp_imgs)
            out_imgs.sum().backward()
            inp_imgs.grad.data.clamp_(-0.03, 0.03)
            inp_imgs.data.add_(-step_size * inp_imgs.grad.data)
            inp_imgs.grad.detach_()
            inp_imgs.grad.zero_()
            inp_imgs.data.clamp_(min=-1.0, max=1.0)
        for p in model.parameters():
            p.requires_grad = True
        model.train(is_training)
        torch.set_grad_enabled(had_gradients_enabled)
        return inp_imgs

    model = set_weights(torch, CNNModel(), seed=110, scale=0.4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
    sample_size, shape, alpha = 8, (1, 8, 8), 0.1
    examples = [torch.tensor(_unif(111 + i, 1, *shape, low=-1, high=1)) for i in range(16)]
    real = torch.tensor(np.tanh(2 * arr(130, 8, *shape)))
    out = {"loss": [], "cdiv": [], "reg": []}
    for step in range(3):
        rng = np.random.default_rng(140 + step)
        n_new = int(rng.binomial(sample_size, 0.05)) + 1
        rand_imgs = torch.tensor(_unif(150 + step, n_new, *shape, low=-1, high=1))
        picks = rng.integers(0, len(examples), sample_size - n_new)
        old_imgs = torch.cat([examples[i] for i in picks], dim=0)
        inp_imgs = torch.cat([rand_imgs, old_imgs], dim=0).detach()
        noises = [torch.tensor(arr(160 + 10 * step + k, sample_size, *shape, scale=0.005))
                  for k in range(4)]  # fmt: skip
        fake_imgs = generate_samples(model, inp_imgs, noises)
        examples = list(fake_imgs.detach().chunk(sample_size, dim=0)) + examples
        examples = examples[:24]
        real_imgs = (real + torch.tensor(arr(170 + step, 8, *shape, scale=0.005))).clamp(-1, 1)
        inp = torch.cat([real_imgs, fake_imgs], dim=0)
        real_out, fake_out = model(inp).chunk(2, dim=0)
        reg_loss = alpha * (real_out**2 + fake_out**2).mean()
        cdiv_loss = fake_out.mean() - real_out.mean()
        loss = reg_loss + cdiv_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["cdiv"].append(cdiv_loss.item())
        out["reg"].append(reg_loss.item())
    out["buffer_len"] = len(examples)
    out["last_fake"] = fake_imgs.detach()
    out["requires_grad_restored"] = all(p.requires_grad for p in model.parameters())
    out["grad_enabled"] = torch.is_grad_enabled()
    out["params"] = params(model)
    return out


@program
def flow_jem_logsumexp_energy_sgld_classifier(torch):
    """JEM (Grathwohl et al. 2020): a classifier's logits define ``E(x) = -logsumexp f(x)``;
    persistent SGLD from a replay buffer with fixed reinitialisation draws, ``torch.autograd.grad``
    of ``logsumexp(1).sum()``, the joint loss of cross-entropy and the generative term, and the
    calibration of ``p(y|x)`` (confidence, accuracy, expected calibration error)."""
    nn, F = torch.nn, torch.nn.functional
    n_classes, d = 3, 6

    class F_Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Linear(d, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32),
                                   nn.LeakyReLU(0.2))  # fmt: skip
            self.class_output = nn.Linear(32, n_classes)

        def forward(self, x, y=None):
            logits = self.classify(x)
            if y is None:
                return logits.logsumexp(1)
            return torch.gather(logits, 1, y[:, None])

        def classify(self, x):
            return self.class_output(self.f(x))

    f = set_weights(torch, F_Net(), seed=200)
    centers = np.array([[2, 0, 0, 1, 0, 0], [0, 2, 0, 0, 1, 0], [0, 0, 2, 0, 0, 1]], np.float32)
    y_np = np.arange(30) % n_classes
    x_lab = torch.tensor(centers[y_np] + 0.7 * arr(201, 30, d))
    y_lab = torch.tensor(y_np.astype(np.int64))
    buffer = torch.tensor(_unif(202, 40, d, low=-1, high=1) * 3)
    opt = torch.optim.Adam(f.parameters(), lr=1e-3, betas=(0.9, 0.999))

    def sample_p_0(step, bs):
        rng = np.random.default_rng(210 + step)
        inds = torch.tensor(rng.choice(buffer.size(0), bs, replace=False))
        buffer_samples = buffer[inds]
        random_samples = torch.tensor(_unif(220 + step, bs, d, low=-1, high=1) * 3)
        choose_random = torch.tensor((rng.random(bs) < 0.05).astype(np.float32))[:, None]
        return choose_random * random_samples + (1 - choose_random) * buffer_samples, inds

    def sample_q(step, bs=10, n_steps=5, sgld_lr=1.0, sgld_std=0.01):
        f.eval()
        init_sample, buffer_inds = sample_p_0(step, bs)
        x_k = torch.autograd.Variable(init_sample, requires_grad=True)
        for k in range(n_steps):
            f_prime = torch.autograd.grad(f(x_k).sum(), [x_k], retain_graph=True)[0]
            x_k.data += sgld_lr * f_prime + sgld_std * torch.tensor(arr(230 + 10 * step + k, bs, d))
        f.train()
        final_samples = x_k.detach()
        buffer[buffer_inds] = final_samples
        return final_samples

    history = {"l_p_x": [], "l_p_y_given_x": [], "loss": []}
    for step in range(4):
        x_q = sample_q(step)
        fp_all = f(x_lab)
        fq_all = f(x_q)
        l_p_x = -(fp_all.mean() - fq_all.mean())
        l_p_y_given_x = F.cross_entropy(f.classify(x_lab), y_lab)
        loss = l_p_x + l_p_y_given_x
        opt.zero_grad()
        loss.backward()
        opt.step()
        history["l_p_x"].append(l_p_x.item())
        history["l_p_y_given_x"].append(l_p_y_given_x.item())
        history["loss"].append(loss.item())
    with torch.no_grad():
        probs = F.softmax(f.classify(x_lab), dim=1)
        conf, pred = probs.max(1)
        correct = pred.eq(y_lab).float()
        bins = torch.linspace(0, 1, 6)
        ece = torch.zeros(1)
        for lo, hi in zip(bins[:-1], bins[1:]):
            in_bin = conf.gt(lo.item()) * conf.le(hi.item())
            prop = in_bin.float().mean()
            if prop.item() > 0:
                ece += torch.abs(conf[in_bin].mean() - correct[in_bin].mean()) * prop
        energy_by_class = f(x_lab, y_lab).squeeze(1)
    return {**history, "buffer": buffer, "ece": ece, "conf": conf, "pred": pred,
            "energy_by_class": energy_by_class, "grads": grads(f)}  # fmt: skip


@program
def flow_rbm_cd_k_gibbs_free_energy_exact_partition(torch):
    """A Bernoulli RBM trained by CD-k as the popular odie2630/RBM-pytorch code writes it:
    ``sample_from_p`` by ``F.relu(torch.sign(p - u))`` (fixed uniforms), Gibbs chains ``v -> h ->
    v``, the free energy with ``v.mv(v_bias)`` and ``wx_b.exp().add(1).log()``, SGD on ``F(v) -
    F(v_k)``; then persistent CD and the exact log-likelihood from the partition function over all
    2^6 visible states (``itertools.product``, ``logsumexp``)."""
    nn, F = torch.nn, torch.nn.functional
    n_vis, n_hin, batch = 6, 4, 16

    class RBM(nn.Module):
        def __init__(self, n_vis=6, n_hin=4, k=2):
            super().__init__()
            self.W = nn.Parameter(torch.zeros(n_hin, n_vis))
            self.v_bias = nn.Parameter(torch.zeros(n_vis))
            self.h_bias = nn.Parameter(torch.zeros(n_hin))
            self.k = k

        def sample_from_p(self, p, u):
            return F.relu(torch.sign(p - u))

        def v_to_h(self, v, u):
            p_h = F.sigmoid(F.linear(v, self.W, self.h_bias))
            return p_h, self.sample_from_p(p_h, u)

        def h_to_v(self, h, u):
            p_v = F.sigmoid(F.linear(h, self.W.t(), self.v_bias))
            return p_v, self.sample_from_p(p_v, u)

        def forward(self, v, seed):
            _, h1 = self.v_to_h(v, torch.tensor(_unif(seed, v.size(0), n_hin)))
            h_ = h1
            for i in range(self.k):
                pre_v_, v_ = self.h_to_v(
                    h_, torch.tensor(_unif(seed + 1 + 2 * i, v.size(0), n_vis))
                )
                pre_h_, h_ = self.v_to_h(
                    v_, torch.tensor(_unif(seed + 2 + 2 * i, v.size(0), n_hin))
                )
            return v, v_

        def free_energy(self, v):
            vbias_term = v.mv(self.v_bias)
            wx_b = F.linear(v, self.W, self.h_bias)
            hidden_term = wx_b.exp().add(1).log().sum(1)
            return -hidden_term - vbias_term

    rbm = set_weights(torch, RBM(n_vis, n_hin), seed=300, scale=0.3)
    train_op = torch.optim.SGD(rbm.parameters(), lr=0.1, momentum=0.5)
    rng = np.random.default_rng(301)
    protos = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]], np.float32)
    flips = rng.random((48, n_vis)) < 0.1
    data = torch.tensor(np.abs(protos[rng.integers(0, 2, 48)] - flips).astype(np.float32))
    all_states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n_vis)))

    def exact_ll(v):
        log_z = torch.logsumexp(-rbm.free_energy(all_states), dim=0)
        return (-rbm.free_energy(v) - log_z).mean()

    out = {"cd_loss": [], "recon": [], "ll": []}
    for epoch in range(2):
        for i, sample_data in enumerate(data.split(batch)):
            v, v1 = rbm(sample_data, seed=310 + 20 * epoch + 5 * i)
            loss = rbm.free_energy(v).mean() - rbm.free_energy(v1).mean()
            train_op.zero_grad()
            loss.backward()
            train_op.step()
            out["cd_loss"].append(loss.item())
            out["recon"].append(F.mse_loss(v1, v).item())
        with torch.no_grad():
            out["ll"].append(exact_ll(data).item())
    # persistent CD: the chain continues from where the last update left it
    persistent = data[:batch].clone()
    for step in range(3):
        _, persistent = rbm(persistent, seed=400 + 10 * step)
        persistent = persistent.detach()
        loss = rbm.free_energy(data[:batch]).mean() - rbm.free_energy(persistent).mean()
        train_op.zero_grad()
        loss.backward()
        train_op.step()
        out.setdefault("pcd_loss", []).append(loss.item())
    with torch.no_grad():
        protos_t = torch.tensor(protos)
        p_h, _ = rbm.v_to_h(protos_t, torch.zeros(2, n_hin))
        out.update({"chain": persistent, "p_h_protos": p_h, "final_ll": exact_ll(data),
                    "free_energy_protos": rbm.free_energy(protos_t),
                    "marginal": torch.softmax(-rbm.free_energy(all_states), 0)[:8],
                    "params": params(rbm)})  # fmt: skip
    return out


@program
def flow_denoising_score_matching_vs_exact_mixture_score(torch):
    """Denoising score matching (Vincent 2011) at one noise level on a 2-D Gaussian mixture: the
    target ``-(x_noisy - x) / sigma**2``, the exact score of the noised mixture from
    ``MixtureSameFamily.log_prob`` by ``torch.autograd.grad``, the Fisher divergence of the
    network to it before and after training, Tweedie denoising, and unadjusted Langevin sampling
    with both scores from fixed noise."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    sigma = 0.5
    means = torch.tensor([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    stds = torch.tensor([[0.3, 0.3], [0.3, 0.6], [0.5, 0.3]])
    weights = torch.tensor([0.5, 0.3, 0.2])

    def mixture(extra_var):
        comp = D.Independent(D.Normal(means, torch.sqrt(stds**2 + extra_var)), 1)
        return D.MixtureSameFamily(D.Categorical(probs=weights), comp)

    def exact_score(x, extra_var=sigma**2):
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            log_p = mixture(extra_var).log_prob(x)
            return torch.autograd.grad(log_p.sum(), x)[0]

    class ScoreNet(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                     nn.SiLU(), nn.Linear(hidden, 2))  # fmt: skip

        def forward(self, x):
            return self.net(x)

    score = set_weights(torch, ScoreNet(), seed=500)
    rng = np.random.default_rng(501)
    comp = rng.choice(3, 96, p=[0.5, 0.3, 0.2])
    x_np = means.numpy()[comp] + stds.numpy()[comp] * rng.standard_normal((96, 2))
    x = torch.tensor(x_np.astype(np.float32))
    probe = torch.tensor(arr(502, 32, 2) * 1.5)

    def fisher(net):
        with torch.no_grad():
            return 0.5 * ((net(probe) - exact_score(probe).detach()) ** 2).sum(-1).mean()

    out = {"fisher_before": fisher(score), "dsm": []}
    opt = torch.optim.Adam(score.parameters(), lr=3e-3)
    for step in range(3):
        noise = torch.tensor(arr(510 + step, 96, 2))
        x_noisy = x + sigma * noise
        target = -(x_noisy - x) / sigma**2
        loss = 0.5 * F.mse_loss(score(x_noisy), target, reduction="none").sum(-1).mean() * sigma**2
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["dsm"].append(loss.item())
    out["fisher_after"] = fisher(score)
    with torch.no_grad():
        x_noisy = x[:8] + sigma * torch.tensor(arr(520, 8, 2))
        out["tweedie_net"] = x_noisy + sigma**2 * score(x_noisy)
    out["tweedie_exact"] = (x_noisy + sigma**2 * exact_score(x_noisy)).detach()
    eps = 0.05
    chain_net = torch.tensor(arr(530, 16, 2) * 2)
    chain_exact = chain_net.clone()
    for k in range(4):
        z = torch.tensor(arr(540 + k, 16, 2))
        with torch.no_grad():
            chain_net = chain_net + eps * score(chain_net) + math.sqrt(2 * eps) * z
        chain_exact = chain_exact + eps * exact_score(chain_exact, 0.0) + math.sqrt(2 * eps) * z
    out.update({"chain_net": chain_net, "chain_exact": chain_exact.detach(),
                "exact_score_probe": exact_score(probe[:5]),
                "mixture_mean": mixture(0.0).mean, "mixture_var": mixture(0.0).variance,
                "grads": grads(score)})  # fmt: skip
    return out


@program
def flow_sliced_score_matching_vr_energy_and_exact_trace(torch):
    """Sliced score matching (Song et al. 2019) as the sliced_score_matching code writes it: a
    deep energy model whose score is ``-grad E`` (``create_graph=True``), ``sliced_score_estimation``
    and its variance-reduced form with fixed Gaussian projections duplicated over particles by
    ``unsqueeze/expand/view``, Rademacher projections normalized to ``sqrt(d)``, and Hyvarinen's
    exact score matching with the Jacobian trace from one ``autograd.grad`` per dimension."""
    nn = torch.nn
    autograd = torch.autograd
    d, n_particles = 3, 2

    class DeepEnergy(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d, 16), nn.Softplus(), nn.Linear(16, 16),
                                     nn.Softplus(), nn.Linear(16, 1))  # fmt: skip

        def forward(self, x):
            return self.net(x).squeeze(-1) + 0.5 * (x**2).sum(-1) * 0.1

    energy = set_weights(torch, DeepEnergy(), seed=600)

    def score_fn(x):
        e = energy(x)
        return -autograd.grad(e.sum(), x, create_graph=True)[0]

    def sliced_score_estimation(samples, vectors):
        dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous()
        dup_samples = dup_samples.view(-1, *samples.shape[1:]).requires_grad_(True)
        vectors = vectors.view(-1, *samples.shape[1:])
        grad1 = score_fn(dup_samples)
        gradv = torch.sum(grad1 * vectors)
        loss1 = torch.sum(grad1 * vectors, dim=-1) ** 2 * 0.5
        grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]
        loss2 = torch.sum(vectors * grad2, dim=-1)
        loss1 = loss1.view(n_particles, -1).mean(dim=0)
        loss2 = loss2.view(n_particles, -1).mean(dim=0)
        loss = loss1 + loss2
        return loss.mean(), loss1.mean(), loss2.mean()

    def sliced_score_estimation_vr(samples, vectors):
        dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous()
        dup_samples = dup_samples.view(-1, *samples.shape[1:]).requires_grad_(True)
        vectors = vectors.view(-1, *samples.shape[1:])
        grad1 = score_fn(dup_samples)
        gradv = torch.sum(grad1 * vectors)
        grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]
        grad1 = grad1.view(dup_samples.shape[0], -1)
        loss1 = torch.sum(grad1 * grad1, dim=-1) / 2.0
        loss2 = torch.sum((vectors * grad2).view(dup_samples.shape[0], -1), dim=-1)
        loss1 = loss1.view(n_particles, -1).mean(dim=0)
        loss2 = loss2.view(n_particles, -1).mean(dim=0)
        return (loss1 + loss2).mean(), loss1.mean(), loss2.mean()

    def exact_score_matching(samples):
        samples = samples.detach().requires_grad_(True)
        grad1 = score_fn(samples)
        loss1 = torch.norm(grad1, dim=-1) ** 2 / 2.0
        loss2 = torch.zeros(samples.shape[0])
        for i in range(samples.shape[1]):
            grad = autograd.grad(grad1[:, i].sum(), samples, create_graph=True)[0][:, i]
            loss2 += grad
        return (loss1 + loss2).mean()

    rng = np.random.default_rng(601)
    samples = torch.tensor((rng.standard_normal((20, d)) @ np.array(
        [[1.0, 0.5, 0.0], [0.0, 0.8, 0.3], [0.0, 0.0, 0.6]])).astype(np.float32))  # fmt: skip
    opt = torch.optim.Adam(energy.parameters(), lr=2e-3)
    out = {"ssm": [], "ssm_vr": [], "esm": []}
    for step in range(3):
        gauss = torch.tensor(arr(610 + step, n_particles, 20, d))
        rad = torch.tensor(np.sign(arr(620 + step, n_particles, 20, d)))
        rad = rad / torch.norm(rad, dim=-1, keepdim=True) * np.sqrt(d)
        ssm, _, _ = sliced_score_estimation(samples, rad)
        ssm_vr, l1, l2 = sliced_score_estimation_vr(samples, gauss)
        esm = exact_score_matching(samples)
        opt.zero_grad()
        ssm_vr.backward()
        opt.step()
        out["ssm"].append(ssm.item())
        out["ssm_vr"].append(ssm_vr.item())
        out["esm"].append(esm.item())
        out.setdefault("vr_terms", []).append([l1.item(), l2.item()])
    x = samples[:4].clone().requires_grad_(True)
    out["score"] = score_fn(x).detach()
    out["energy"] = energy(samples[:4]).detach()
    # the same second-order term with torch.func: v^T (d score / dx) v by a jvp of a grad
    from_params = {k: v.detach() for k, v in energy.named_parameters()}

    def energy_single(p, xi):
        return torch.func.functional_call(energy, p, (xi.unsqueeze(0),)).squeeze(0)

    def vjv(p, xi, v):
        score_single = lambda y: -torch.func.grad(energy_single, argnums=1)(p, y)  # noqa: E731
        return torch.dot(torch.func.jvp(score_single, (xi,), (v,))[1], v)

    v = torch.tensor(arr(630, 4, d))
    out["func_vjv"] = torch.func.vmap(vjv, in_dims=(None, 0, 0))(from_params, samples[:4], v)
    x = samples[:4].clone().requires_grad_(True)
    s = score_fn(x)
    out["autograd_vjv"] = (autograd.grad((s * v).sum(), x)[0] * v).sum(-1)
    out["grads"] = grads(energy)
    return out


@program
def flow_nice_additive_coupling_logistic_prior(torch):
    """NICE (Dinh et al. 2014): interleaved partitions by ``reshape(B, D//2, 2)``, additive
    couplings with ReLU MLPs (unit Jacobian), a diagonal scaling layer ``exp(s)`` carrying the
    whole log-determinant, the standard logistic prior ``-(softplus(h) + softplus(-h))``, Adam
    with the paper's ``betas=(0.9, 0.01)`` and ``eps=1e-4``, and sampling through the logistic
    inverse CDF of fixed uniforms."""
    nn, F = torch.nn, torch.nn.functional
    in_out_dim, mid_dim, hidden = 8, 16, 2

    class Coupling(nn.Module):
        def __init__(self, mask_config):
            super().__init__()
            self.mask_config = mask_config
            layers = [nn.Sequential(nn.Linear(in_out_dim // 2, mid_dim), nn.ReLU())]
            layers += [
                nn.Sequential(nn.Linear(mid_dim, mid_dim), nn.ReLU()) for _ in range(hidden - 1)
            ]
            self.mid_block = nn.ModuleList(layers)
            self.out_block = nn.Linear(mid_dim, in_out_dim // 2)

        def forward(self, x, reverse=False):
            B, W = x.size()
            x = x.reshape((B, W // 2, 2))
            if self.mask_config:
                on, off = x[:, :, 0], x[:, :, 1]
            else:
                off, on = x[:, :, 0], x[:, :, 1]
            off_ = off
            for block in self.mid_block:
                off_ = block(off_)
            shift = self.out_block(off_)
            on = on - shift if reverse else on + shift
            x = torch.stack((on, off), dim=2) if self.mask_config else torch.stack((off, on), dim=2)
            return x.reshape((B, W))

    class Scaling(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.scale = nn.Parameter(torch.zeros((1, dim)))

        def forward(self, x, reverse=False):
            log_det_J = torch.sum(self.scale)
            x = x * torch.exp(-self.scale) if reverse else x * torch.exp(self.scale)
            return x, log_det_J

    class NICE(nn.Module):
        def __init__(self, coupling=4):
            super().__init__()
            self.coupling = nn.ModuleList(
                [Coupling(mask_config=(i + 1) % 2) for i in range(coupling)]
            )
            self.scaling = Scaling(in_out_dim)

        def g(self, z):
            x, _ = self.scaling(z, reverse=True)
            for i in reversed(range(len(self.coupling))):
                x = self.coupling[i](x, reverse=True)
            return x

        def f(self, x):
            for i in range(len(self.coupling)):
                x = self.coupling[i](x)
            return self.scaling(x)

        def log_prob(self, x):
            z, log_det_J = self.f(x)
            log_ll = torch.sum(-(F.softplus(z) + F.softplus(-z)), dim=1)
            return log_ll + log_det_J

        def sample(self, u):
            z = torch.log(u) - torch.log(1.0 - u)
            return self.g(z)

    flow = set_weights(torch, NICE(), seed=700)
    rng = np.random.default_rng(701)
    pix = (rng.random((32, in_out_dim)) < np.linspace(0.1, 0.9, in_out_dim)).astype(np.float32)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-3, betas=(0.9, 0.01), eps=1e-4)
    losses = []
    for step in range(4):
        x = torch.tensor((pix * 255.0 + _unif(710 + step, 32, in_out_dim)) / 256.0)
        x = x - 0.5  # the paper's centring; the constant log(256) per dim is left out
        loss = -flow.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        x = torch.tensor(pix[:4] - 0.5)
        z, _ = flow.f(x)
        samples = flow.sample(torch.tensor(_unif(720, 5, in_out_dim, low=0.01, high=0.99)))
        recon = flow.g(z)
        # the logistic prior as NICE ports write it with torch.distributions
        D = torch.distributions
        prior = D.TransformedDistribution(D.Uniform(torch.tensor(0.0), torch.tensor(1.0)),
                                          [D.SigmoidTransform().inv,
                                           D.AffineTransform(loc=0.0, scale=1.0)])  # fmt: skip
        prior_lp = prior.log_prob(z).sum(dim=1)
        manual_lp = torch.sum(-(F.softplus(z) + F.softplus(-z)), dim=1)
        u = torch.tensor(_unif(721, 3, in_out_dim, low=0.01, high=0.99))
        prior_draw = u
        for t in prior.transforms:
            prior_draw = t(prior_draw)
    jac = torch.autograd.functional.jacobian(lambda v: flow.f(v.unsqueeze(0))[0].squeeze(0), x[0])
    return {"losses": losses, "z": z, "samples": samples,
            "recon_err_small": (recon - x).abs().max().item() < 1e-5,
            "log_det_jac": torch.linalg.slogdet(jac)[1], "scale": flow.scaling.scale,
            "scale_sum": flow.scaling.scale.sum(), "params": params(flow), "prior_lp": prior_lp,
            "prior_matches_softplus": torch.allclose(prior_lp, manual_lp, atol=1e-5),
            "prior_draw": prior_draw, "prior_cdf_back": prior.cdf(prior_draw)}  # fmt: skip


@program
def flow_iresnet_spectral_norm_power_series_logdet(torch):
    """An invertible ResNet (Behrmann et al. 2019; residual flows): residual blocks ``x + g(x)``
    whose linear maps are spectrally normalised to ``coeff < 1`` by power iteration from fixed
    unit vectors held in buffers, the log-determinant as a truncated power series of
    ``tr(J_g^k)`` with Hutchinson's estimator through ``autograd.grad`` vector-Jacobian products
    (fixed probes), checked against the exact ``slogdet`` of the ``jacrev`` Jacobian, and the
    inverse by the Banach fixed-point iteration."""
    nn, F = torch.nn, torch.nn.functional
    d, hidden, coeff = 2, 16, 0.9

    class SpectralNormLinear(nn.Module):
        def __init__(self, in_f, out_f, seed, n_power_iterations=3):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(out_f, in_f))
            self.bias = nn.Parameter(torch.zeros(out_f))
            u = arr(seed, out_f)
            self.register_buffer("u", torch.tensor(u / np.linalg.norm(u)))
            self.n_power_iterations = n_power_iterations

        def compute_weight(self, update=True):
            u = self.u
            with torch.no_grad():
                for _ in range(self.n_power_iterations if update else 0):
                    v = F.normalize(torch.mv(self.weight.t(), u), dim=0, eps=1e-12)
                    u = F.normalize(torch.mv(self.weight, v), dim=0, eps=1e-12)
                if update:
                    self.u.copy_(u)
                v = F.normalize(torch.mv(self.weight.t(), u), dim=0, eps=1e-12)
            sigma = torch.dot(u, torch.mv(self.weight, v))
            factor = torch.max(torch.ones(1), sigma / coeff)
            return self.weight / factor

        def forward(self, x, update=False):
            return F.linear(x, self.compute_weight(update), self.bias)

    class InvResBlock(nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.l1 = SpectralNormLinear(d, hidden, seed)
            self.l2 = SpectralNormLinear(hidden, d, seed + 1)

        def g(self, x):
            return self.l2(F.elu(self.l1(x)))

        def update_norms(self):
            self.l1.compute_weight(True)
            self.l2.compute_weight(True)

        def forward(self, x, probes, n_terms=4):
            x = x.requires_grad_(True) if not x.requires_grad else x
            gx = self.g(x)
            logdet = torch.zeros(x.shape[0])
            for v in probes:
                w = v
                for k in range(1, n_terms + 1):
                    w = torch.autograd.grad(gx, x, w, create_graph=True)[0]
                    logdet = logdet + (-1) ** (k + 1) / k * (w * v).sum(-1)
            return x + gx, logdet / len(probes)

        def inverse(self, y, n_iter=30):
            x = y
            for _ in range(n_iter):
                x = y - self.g(x)
            return x

    blocks = nn.ModuleList([InvResBlock(800), InvResBlock(810)])
    set_weights(torch, blocks, seed=801, scale=0.8)
    for block in blocks:
        for _ in range(5):
            block.update_norms()
    data = torch.tensor(_moons(802, 32) - np.array([0.5, 0.25], np.float32))
    opt = torch.optim.Adam(blocks.parameters(), lr=3e-3)
    out = {"nll": []}
    for step in range(2):
        for block in blocks:
            block.update_norms()
        z, total = data.clone(), torch.zeros(32)
        for i, block in enumerate(blocks):
            probes = [torch.tensor(arr(820 + 10 * step + i, 32, d))]
            z, ld = block(z, probes)
            total = total + ld
        log_pz = -0.5 * (z**2).sum(-1) - d / 2 * math.log(2 * math.pi)
        loss = -(log_pz + total).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["nll"].append(loss.item())

    def forward_all(v):
        h = v.unsqueeze(0)
        for block in blocks:
            h = h + block.g(h)
        return h.squeeze(0)

    x = data[:5].detach()
    jac = torch.vmap(torch.func.jacrev(forward_all))(x)
    z, est = x.clone(), torch.zeros(5)
    probes = [torch.tensor(arr(900 + j, 5, d)) for j in range(2)]
    for block in blocks:
        z, ld = block(z, probes, n_terms=8)
        est = est + ld
    with torch.no_grad():
        back = z.detach()
        for block in reversed(blocks):
            back = block.inverse(back)
        sigmas = [torch.linalg.matrix_norm(m.compute_weight(False), ord=2)
                  for b in blocks for m in (b.l1, b.l2)]  # fmt: skip
    return {
        "nll": out["nll"],
        "exact_logdet": torch.linalg.slogdet(jac).logabsdet,
        "series_logdet": est.detach(),
        "z": z.detach(),
        "inverse_err_small": (back - x).abs().max().item() < 1e-4,
        "sigmas": sigmas,
        "u": [b.l1.u for b in blocks],
        "grads": grads(blocks),
    }


@program
def flow_mixed_support_cat_stack_transforms_gaussian_copula(torch):
    """A flow onto a mixed support, as Pyro-style and simulation-based-inference code writes it:
    ``biject_to(constraints.cat([positive, unit_interval, real], dim=-1))`` gives a ``CatTransform``
    that ends a ``TransformedDistribution`` over affine-coupling ``Transform`` subclasses (the
    per-entry log-Jacobians concatenated, then summed by the distribution), the same map as a
    ``StackTransform``, support checks, maximum likelihood, fixed-noise sampling; and a Gaussian
    copula of the latent codes through ``CumulativeDistributionTransform(Normal(0, 1))``."""
    nn, D = torch.nn, torch.distributions
    C = D.constraints

    class Coupling(D.Transform):
        domain = C.real_vector
        codomain = C.real_vector
        bijective = True

        def __init__(self, net, mask):
            super().__init__()
            self.net, self.mask = net, mask

        def _st(self, v):
            s, t = self.net(v * self.mask).chunk(2, dim=-1)
            return torch.tanh(s) * (1 - self.mask), t * (1 - self.mask)

        def _call(self, x):
            s, t = self._st(x)
            return x * torch.exp(s) + t

        def _inverse(self, y):
            s, t = self._st(y)
            return (y - t) * torch.exp(-s)

        def log_abs_det_jacobian(self, x, y):
            return self._st(x)[0].sum(-1)

    nets = nn.ModuleList(
        nn.Sequential(nn.Linear(3, 12), nn.Tanh(), nn.Linear(12, 6)) for _ in range(3)
    )
    set_weights(torch, nets, seed=1000, scale=0.4)
    masks = [torch.tensor(m) for m in ([1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0])]
    support = C.cat([C.positive, C.unit_interval, C.real], dim=-1, lengths=[1, 1, 1])
    to_support = D.biject_to(support)
    base = D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1)

    def flow():
        return D.TransformedDistribution(base, [Coupling(n, m) for n, m in zip(nets, masks)]
                                         + [to_support])  # fmt: skip

    rng = np.random.default_rng(1001)
    rate = np.exp(0.4 * rng.standard_normal(40) + 0.5)
    prob = 1 / (1 + np.exp(-(0.8 * np.log(rate) + 0.5 * rng.standard_normal(40))))
    loc = 2 * prob - 1 + 0.3 * rng.standard_normal(40)
    data = torch.tensor(np.stack([rate, prob, loc], 1).astype(np.float32))
    opt = torch.optim.Adam(nets.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = -flow().log_prob(data).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    dist = flow()
    with torch.no_grad():
        unconstrained = to_support.inv(data[:5])
        ladj = to_support.log_abs_det_jacobian(unconstrained, data[:5])
        stacked = D.StackTransform([D.ExpTransform(), D.SigmoidTransform(), D.identity_transform],
                                   dim=-1)  # fmt: skip
        samples = torch.tensor(arr(1002, 6, 3))
        for t in dist.transforms:
            samples = t(samples)
        # the latent codes of the data and their Gaussian copula
        z = data
        for t in reversed(dist.transforms):
            z = t.inv(z)
        to_unit = D.CumulativeDistributionTransform(D.Normal(0.0, 1.0))
        u = to_unit(z)
        zc = z - z.mean(0)
        cov = zc.T @ zc / (z.shape[0] - 1)
        corr = cov / torch.sqrt(torch.outer(torch.diagonal(cov), torch.diagonal(cov)))
        normal_scores = to_unit.inv(u)
        copula_log_density = (D.MultivariateNormal(torch.zeros(3), corr).log_prob(normal_scores)
                              - to_unit.log_abs_det_jacobian(normal_scores, u).sum(-1))  # fmt: skip
    return {
        "losses": losses,
        "log_prob": dist.log_prob(data[:8]).detach(),
        "unconstrained": unconstrained,
        "cat_ladj": ladj,
        "stack_matches": torch.allclose(stacked(unconstrained), data[:5], atol=1e-6),
        "stack_ladj": stacked.log_abs_det_jacobian(unconstrained, data[:5]),
        "event_dims": [
            to_support.event_dim,
            support.event_dim,
            stacked.event_dim,
            dist.event_shape[0],
        ],  # fmt: skip
        "samples": samples,
        "in_support": support.check(samples),
        "out_of_support": support.check(torch.tensor([[-1.0, 0.5, 0.0], [1.0, 1.5, 0.0]])),
        "transform_to_matches": torch.allclose(
            D.transform_to(support)(unconstrained), data[:5], atol=1e-6
        ),  # fmt: skip
        "uniforms": u[:6],
        "copula_log_density": copula_log_density[:6],
        "corr": corr,
        "normal_scores_round_trip": torch.allclose(normal_scores, z, atol=1e-4),
        "grads": grads(nets),
    }
