"""Learned compression and equivariant networks as CompressAI, VQ-VAE, e3nn and EGNN code writes
them: GDN and inverse GDN with non-negative reparameterised parameters and a lower bound that
passes gradients through, additive uniform noise (from NumPy) as the training-time quantiser and
rounding at test time, a factorised entropy bottleneck whose likelihoods are differences of
sigmoids, a Gaussian conditional with a scale table, rate-distortion training in bits per pixel,
VQ-VAE vector quantisation with the straight-through estimator and commitment loss, EMA codebook
updates, residual VQ with k-means initialised codebooks, product quantisation with asymmetric
distance tables; an E(n)-equivariant GNN layer, rotation-invariant distance features and forces,
a C4 lifting and group convolution with ``rot90`` filters and group pooling, and gated vector
networks whose equivariance is checked by rotating inputs and outputs with fixed rotations."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _uniform(seed: int, *shape: int, lo: float = -0.5, hi: float = 0.5) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def _lower_bound_fn(torch):
    class LowerBoundFunction(torch.autograd.Function):
        """``max(x, bound)`` whose gradient passes where x is above the bound or the gradient
        pushes x up (CompressAI's ``LowerBound``)."""

        @staticmethod
        def forward(ctx, input_, bound):
            ctx.save_for_backward(input_, bound)
            return torch.max(input_, bound)

        @staticmethod
        def backward(ctx, grad_output):
            input_, bound = ctx.saved_tensors
            pass_through_if = (input_ >= bound) | (grad_output < 0)
            return pass_through_if * grad_output, None

    return LowerBoundFunction


def _compression_layers(torch):
    """LowerBound, NonNegativeParametrizer and GDN as CompressAI defines them."""
    nn, F = torch.nn, torch.nn.functional
    LowerBoundFunction = _lower_bound_fn(torch)

    class LowerBound(nn.Module):
        def __init__(self, bound):
            super().__init__()
            self.register_buffer("bound", torch.Tensor([float(bound)]))

        def forward(self, x):
            return LowerBoundFunction.apply(x, self.bound)

    class NonNegativeParametrizer(nn.Module):
        def __init__(self, minimum=0.0, reparam_offset=2**-18):
            super().__init__()
            self.minimum = float(minimum)
            self.reparam_offset = float(reparam_offset)
            pedestal = self.reparam_offset**2
            self.register_buffer("pedestal", torch.Tensor([pedestal]))
            bound = (self.minimum + self.reparam_offset**2) ** 0.5
            self.lower_bound = LowerBound(bound)

        def init(self, x):
            return torch.sqrt(torch.max(x + self.pedestal, self.pedestal))

        def forward(self, x):
            out = self.lower_bound(x)
            return out**2 - self.pedestal

    class GDN(nn.Module):
        def __init__(self, in_channels, inverse=False, beta_min=1e-6, gamma_init=0.1):
            super().__init__()
            self.inverse = bool(inverse)
            self.beta_reparam = NonNegativeParametrizer(minimum=beta_min)
            self.beta = nn.Parameter(self.beta_reparam.init(torch.ones(in_channels)))
            self.gamma_reparam = NonNegativeParametrizer()
            gamma = gamma_init * torch.eye(in_channels)
            self.gamma = nn.Parameter(self.gamma_reparam.init(gamma))

        def forward(self, x):
            _, C, _, _ = x.size()
            beta = self.beta_reparam(self.beta)
            gamma = self.gamma_reparam(self.gamma).reshape(C, C, 1, 1)
            norm = F.conv2d(x**2, gamma, beta)
            norm = torch.sqrt(norm) if self.inverse else torch.rsqrt(norm)
            return x * norm

    return LowerBound, NonNegativeParametrizer, GDN


def _quantize(torch, inputs, mode, means=None, noise=None):
    """CompressAI's ``EntropyModel.quantize`` with the training noise passed in."""
    if mode == "noise":
        return inputs + noise
    outputs = inputs.clone()
    if means is not None:
        outputs -= means
    outputs = torch.round(outputs)
    if mode == "dequantize":
        if means is not None:
            outputs += means
        return outputs
    assert mode == "symbols", mode
    return outputs.int()


def _entropy_bottleneck(torch, channels, filters=(3, 3), init_scale=10.0, seed=0):
    """A factorised prior (Ballé et al. 2018) with CompressAI's parameter names."""
    nn, F = torch.nn, torch.nn.functional
    LowerBound, _, _ = _compression_layers(torch)
    rng = np.random.default_rng(seed)

    class EntropyBottleneck(nn.Module):
        def __init__(self):
            super().__init__()
            self.filters = tuple(int(f) for f in filters)
            self.likelihood_lower_bound = LowerBound(1e-9)
            fs = (1,) + self.filters + (1,)
            scale = init_scale ** (1 / (len(self.filters) + 1))
            self.matrices, self.biases, self.factors = (nn.ParameterList() for _ in range(3))
            for i in range(len(self.filters) + 1):
                init = np.log(np.expm1(1 / scale / fs[i + 1]))
                matrix = torch.Tensor(channels, fs[i + 1], fs[i])
                matrix.data.fill_(init)
                self.matrices.append(nn.Parameter(matrix))
                bias = rng.uniform(-0.5, 0.5, (channels, fs[i + 1], 1)).astype(np.float32)
                self.biases.append(nn.Parameter(torch.from_numpy(bias)))
                if i < len(self.filters):
                    factor = torch.Tensor(channels, fs[i + 1], 1)
                    nn.init.zeros_(factor)
                    self.factors.append(nn.Parameter(factor))
            init = torch.Tensor([-init_scale, 0, init_scale])
            self.quantiles = nn.Parameter(init.repeat(channels, 1, 1))
            target = np.log(2 / 1e-9 - 1)
            self.register_buffer("target", torch.Tensor([-target, 0, target]))

        def _get_medians(self):
            return self.quantiles[:, :, 1:2]

        def _logits_cumulative(self, inputs, stop_gradient):
            logits = inputs
            for i in range(len(self.filters) + 1):
                matrix = self.matrices[i]
                if stop_gradient:
                    matrix = matrix.detach()
                logits = torch.matmul(F.softplus(matrix), logits)
                bias = self.biases[i]
                if stop_gradient:
                    bias = bias.detach()
                logits += bias
                if i < len(self.factors):
                    factor = self.factors[i]
                    if stop_gradient:
                        factor = factor.detach()
                    logits += torch.tanh(factor) * torch.tanh(logits)
            return logits

        def _likelihood(self, inputs):
            half = 0.5
            lower = self._logits_cumulative(inputs - half, stop_gradient=False)
            upper = self._logits_cumulative(inputs + half, stop_gradient=False)
            sign = -torch.sign(lower + upper).detach()
            return torch.abs(torch.sigmoid(sign * upper) - torch.sigmoid(sign * lower))

        def loss(self):
            logits = self._logits_cumulative(self.quantiles, stop_gradient=True)
            return torch.abs(logits - self.target).sum()

        def forward(self, x, noise=None, training=None):
            training = self.training if training is None else training
            perm = torch.cat((torch.tensor([1, 0], dtype=torch.long),
                              torch.arange(2, x.ndim, dtype=torch.long)))  # fmt: skip
            inv_perm = perm
            x = x.permute(*perm).contiguous()
            shape = x.size()
            values = x.reshape(x.size(0), 1, -1)
            if training:
                outputs = _quantize(torch, values, "noise", noise=noise.reshape(values.shape))
            else:
                outputs = _quantize(torch, values, "dequantize", self._get_medians())
            likelihood = self.likelihood_lower_bound(self._likelihood(outputs))
            outputs = outputs.reshape(shape).permute(*inv_perm).contiguous()
            likelihood = likelihood.reshape(shape).permute(*inv_perm).contiguous()
            return outputs, likelihood

    return EntropyBottleneck()


@program
def ceq_gdn_igdn_reparameterised_training(torch):
    """A conv / GDN / conv / IGDN autoencoder: GDN's beta and gamma stored as the square roots
    of their values plus a pedestal, bounded below by an autograd function that lets gradients
    through where they push the parameter up; a few Adam steps on MSE."""
    nn, F = torch.nn, torch.nn.functional
    LowerBound, NonNegativeParametrizer, GDN = _compression_layers(torch)

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.gdn = GDN(4)
            self.dec = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1)
            self.igdn = GDN(4, inverse=True)
            self.out = nn.Conv2d(4, 3, 1)

        def forward(self, x):
            y = self.gdn(self.enc(x))
            return self.out(self.igdn(self.dec(y))), y

    model = AE()
    with torch.no_grad():
        for m in (model.enc, model.dec, model.out):
            set_weights(torch, m, seed=len(m.weight.shape) + m.weight.shape[0])
        # off-diagonal gamma starts exactly at the bound, two entries just below it
        model.gdn.gamma[0, 1] = 0.0
        model.gdn.gamma[2, 3] = 1e-7
    init_gamma = model.gdn.gamma_reparam(model.gdn.gamma).detach().clone()
    x = torch.tensor(arr(1, 2, 3, 8, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        x_hat, y = model(x)
        loss = F.mse_loss(x_hat, x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    gamma_grad = model.gdn.gamma.grad.clone()
    # the bound's backward: pass-through where x >= bound or the gradient is negative
    lb = LowerBound(0.5)
    t = torch.tensor([0.2, 0.5, 0.9, 0.1], requires_grad=True)
    (lb(t) * torch.tensor([1.0, 2.0, 3.0, -4.0])).sum().backward()
    nnp = NonNegativeParametrizer(minimum=1e-6)
    return {"losses": losses, "y": y, "x_hat": x_hat, "init_gamma": init_gamma,
            "beta": model.gdn.beta_reparam(model.gdn.beta),
            "gamma": model.gdn.gamma_reparam(model.gdn.gamma),
            "ibeta": model.igdn.beta_reparam(model.igdn.beta), "gamma_grad": gamma_grad,
            "grads": grads(model), "bound_grad": t.grad,
            "reparam": nnp(nnp.init(torch.tensor([0.0, 1e-8, 0.25, 4.0]))),
            "buffers": {k: v for k, v in model.named_buffers()}}  # fmt: skip


@program
def ceq_noise_quantiser_and_rounding(torch):
    """Training-time additive uniform noise versus rounding at test time (around the medians),
    the straight-through round some codecs use instead, integer symbols and their histogram, and
    the gradients each quantiser lets through."""
    y = torch.tensor(arr(2, 2, 3, 4, 4, scale=3.0), requires_grad=True)
    noise = torch.tensor(_uniform(3, 2, 3, 4, 4))
    medians = torch.tensor([[0.3], [-0.2], [0.05]]).view(1, 3, 1, 1)
    y_noisy = _quantize(torch, y, "noise", noise=noise)
    y_deq = _quantize(torch, y, "dequantize", medians)
    y_ste = (torch.round(y) - y).detach() + y
    symbols = _quantize(torch, y, "symbols", medians)
    w = torch.tensor(arr(4, 2, 3, 4, 4))
    (y_noisy * w).sum().backward()
    g_noise = y.grad.clone()
    y.grad = None
    (y_ste * w).sum().backward()
    g_ste = y.grad.clone()
    y.grad.zero_()
    (y_deq * w).sum().backward()
    g_round = y.grad.clone()
    offset = symbols.min()
    hist = torch.bincount((symbols - offset).flatten().long())
    decoded = symbols.to(torch.float32) + medians
    pmf = hist.float() / hist.sum()
    return {"noisy": y_noisy, "deq": y_deq, "ste": y_ste, "symbols": symbols,
            "symbols_dtype": str(symbols.dtype), "g_noise": g_noise, "g_ste": g_ste,
            "g_round": g_round, "hist": hist, "offset": offset, "decoded": decoded,
            "roundtrip": torch.equal(decoded, y_deq.detach()),
            "noise_err": (y_noisy - y).abs().max(), "round_err": (y_deq - y).abs().max(),
            "entropy_bits": -(pmf[pmf > 0] * torch.log2(pmf[pmf > 0])).sum()}  # fmt: skip


@program
def ceq_factorized_entropy_bottleneck_likelihoods(torch):
    """CompressAI's EntropyBottleneck: per-channel cumulative densities from softplus matrices,
    biases and tanh factors, likelihoods as the difference of sigmoids at y ± 1/2 with the sign
    trick, the 1e-9 likelihood bound, the auxiliary quantile loss, and a few steps of its own
    optimiser on the quantiles."""
    eb = _entropy_bottleneck(torch, 3, filters=(3, 3), seed=5)
    y = torch.tensor(arr(6, 2, 3, 3, 3, scale=2.0), requires_grad=True)
    noise = torch.tensor(_uniform(7, 2, 3, 3, 3))
    y_tilde, lik = eb(y, noise=noise)
    bits = torch.log(lik).sum() / -math.log(2)
    bits.backward()
    eb.eval()
    y_hat, lik_test = eb(y.detach())
    eb.train()
    aux_opt = torch.optim.Adam([eb.quantiles], lr=0.5)
    aux = []
    for _ in range(4):
        aux_opt.zero_grad()
        a = eb.loss()
        a.backward()
        aux_opt.step()
        aux.append(a.item())
    far = eb._likelihood(torch.tensor([[[60.0, -60.0, 0.0]]]).expand(3, 1, 3))
    return {"y_tilde": y_tilde, "lik": lik, "bits": bits, "y_grad": y.grad,
            "y_hat": y_hat, "lik_test": lik_test, "aux": aux, "quantiles": eb.quantiles,
            "medians": eb._get_medians(), "far": far,
            "bounded": eb.likelihood_lower_bound(far).min(),
            "param_grads": {n: p.grad for n, p in eb.named_parameters() if n != "quantiles"}}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ceq_factorized_prior_rate_distortion_training(torch):
    """A tiny FactorizedPrior codec (conv + GDN analysis, transposed conv + IGDN synthesis,
    entropy bottleneck), trained on ``lambda * 255**2 * MSE + bpp`` with the main and auxiliary
    parameters in separate Adam optimisers as CompressAI's examples configure them; then an
    evaluation with rounding: bpp and PSNR. (Looser tolerance: the loss multiplies MSE by 650,
    so float32 summation order in the convolutions shows after a few steps.)"""
    nn, F = torch.nn, torch.nn.functional
    _, _, GDN = _compression_layers(torch)

    class FactorizedPrior(nn.Module):
        def __init__(self, N=4, M=4):
            super().__init__()
            self.entropy_bottleneck = _entropy_bottleneck(torch, M, filters=(3,), seed=8)
            self.g_a = nn.Sequential(nn.Conv2d(3, N, 5, stride=2, padding=2), GDN(N),
                                     nn.Conv2d(N, M, 5, stride=2, padding=2))  # fmt: skip
            self.g_s = nn.Sequential(
                nn.ConvTranspose2d(M, N, 5, stride=2, output_padding=1, padding=2),
                GDN(N, inverse=True),
                nn.ConvTranspose2d(N, 3, 5, stride=2, output_padding=1, padding=2))  # fmt: skip

        def forward(self, x, noise=None):
            y = self.g_a(x)
            y_hat, y_likelihoods = self.entropy_bottleneck(y, noise=noise)
            x_hat = self.g_s(y_hat)
            return {"x_hat": x_hat, "likelihoods": {"y": y_likelihoods}}

    class RateDistortionLoss(nn.Module):
        def __init__(self, lmbda=1e-2):
            super().__init__()
            self.mse = nn.MSELoss()
            self.lmbda = lmbda

        def forward(self, output, target):
            N, _, H, W = target.size()
            out = {}
            num_pixels = N * H * W
            out["bpp_loss"] = sum(torch.log(lik).sum() / (-math.log(2) * num_pixels)
                                  for lik in output["likelihoods"].values())  # fmt: skip
            out["mse_loss"] = self.mse(output["x_hat"], target)
            out["loss"] = self.lmbda * 255**2 * out["mse_loss"] + out["bpp_loss"]
            return out

    net = FactorizedPrior()
    with torch.no_grad():
        for i, m in enumerate([net.g_a[0], net.g_a[2], net.g_s[0], net.g_s[2]]):
            set_weights(torch, m, seed=20 + i)
    parameters = {n for n, p in net.named_parameters() if not n.endswith(".quantiles")}
    aux_parameters = {n for n, p in net.named_parameters() if n.endswith(".quantiles")}
    params_dict = dict(net.named_parameters())
    optimizer = torch.optim.Adam((params_dict[n] for n in sorted(parameters)), lr=1e-3)
    aux_optimizer = torch.optim.Adam((params_dict[n] for n in sorted(aux_parameters)), lr=1e-2)
    criterion = RateDistortionLoss(lmbda=1e-2)
    x = torch.tensor(_uniform(9, 2, 3, 8, 8, lo=0.0, hi=1.0))
    history = {"loss": [], "bpp": [], "mse": [], "aux": []}
    for step in range(3):
        optimizer.zero_grad()
        aux_optimizer.zero_grad()
        noise = torch.tensor(_uniform(30 + step, 2, 4, 2, 2))
        out = net(x, noise=noise)
        out_criterion = criterion(out, x)
        out_criterion["loss"].backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        aux_loss = net.entropy_bottleneck.loss()
        aux_loss.backward()
        aux_optimizer.step()
        history["loss"].append(out_criterion["loss"].item())
        history["bpp"].append(out_criterion["bpp_loss"].item())
        history["mse"].append(out_criterion["mse_loss"].item())
        history["aux"].append(aux_loss.item())
    net.eval()
    with torch.no_grad():
        out = net(x)
        x_hat = out["x_hat"].clamp_(0, 1)
        mse = F.mse_loss(x_hat, x)
        psnr = 10 * torch.log10(1 / mse)
        bpp = criterion(out, x)["bpp_loss"]
    return {"history": history, "x_hat": x_hat, "psnr": psnr, "bpp": bpp,
            "sorted_params": sorted(parameters), "aux_params": sorted(aux_parameters),
            "gdn_beta": net.g_a[1].beta_reparam(net.g_a[1].beta)}  # fmt: skip


@program
def ceq_gaussian_conditional_mean_scale(torch):
    """The mean-scale hyperprior's GaussianConditional: likelihoods from the standard normal CDF
    written with ``erfc``, scales bounded below by 0.11 through LowerBound, the scale table and
    its integer indexes, noise versus rounding around the means, bits and their gradients with
    respect to the hyper-synthesis output, and ``Normal.cdf`` as a cross-check."""
    LowerBound, _, _ = _compression_layers(torch)
    scale_table = torch.exp(torch.linspace(math.log(0.11), math.log(256), 64))
    lower_bound_scale = LowerBound(0.11)

    def standardized_cumulative(inputs):
        half = 0.5
        const = float(-(2**-0.5))
        return half * torch.erfc(const * inputs)

    def likelihood(inputs, scales, means=None):
        half = 0.5
        values = inputs - means if means is not None else inputs
        scales = lower_bound_scale(scales)
        values = torch.abs(values)
        upper = standardized_cumulative((half - values) / scales)
        lower = standardized_cumulative((-half - values) / scales)
        return upper - lower

    def build_indexes(scales):
        scales = lower_bound_scale(scales)
        indexes = scales.new_full(scales.size(), len(scale_table) - 1).int()
        for s in scale_table[:-1]:
            indexes -= (scales <= s).int()
        return indexes

    y = torch.tensor(arr(10, 1, 4, 3, 3, scale=2.0))
    gaussian_params = torch.tensor(arr(11, 1, 8, 3, 3), requires_grad=True)
    scales_hat, means_hat = gaussian_params.chunk(2, 1)
    scales_hat = torch.exp(scales_hat) * 0.5
    noise = torch.tensor(_uniform(12, 1, 4, 3, 3))
    y_tilde = y + noise
    lik_train = likelihood(y_tilde, scales_hat, means_hat).clamp_min(1e-9)
    bits = -torch.log2(lik_train).sum()
    bits.backward()
    y_hat = torch.round(y - means_hat.detach()) + means_hat.detach()
    likelihood_lower_bound = LowerBound(1e-9)
    lik_test = likelihood_lower_bound(likelihood(y_hat, scales_hat.detach(), means_hat.detach()))
    normal = torch.distributions.Normal(means_hat.detach(), lower_bound_scale(scales_hat).detach())
    lik_normal = normal.cdf(y_hat + 0.5) - normal.cdf(y_hat - 0.5)
    return {"lik_train": lik_train, "bits": bits, "params_grad": gaussian_params.grad,
            "lik_test": lik_test, "lik_normal": lik_normal, "indexes": build_indexes(scales_hat),
            "scale_table": scale_table, "bits_test": -torch.log2(lik_test).sum(),
            "symbols": torch.round(y - means_hat).int()}  # fmt: skip


def _vq_modules(torch):
    nn, F = torch.nn, torch.nn.functional

    class VectorQuantizer(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost):
            super().__init__()
            self._embedding_dim = embedding_dim
            self._num_embeddings = num_embeddings
            self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
            self._embedding.weight.data.uniform_(
                -1 / self._num_embeddings, 1 / self._num_embeddings
            )
            self._commitment_cost = commitment_cost

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = (torch.sum(flat_input**2, dim=1, keepdim=True)
                         + torch.sum(self._embedding.weight**2, dim=1)
                         - 2 * torch.matmul(flat_input, self._embedding.weight.t()))  # fmt: skip
            encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
            encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings)
            encodings.scatter_(1, encoding_indices, 1)
            quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            q_latent_loss = F.mse_loss(quantized, inputs.detach())
            loss = q_latent_loss + self._commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()
            avg_probs = torch.mean(encodings, dim=0)
            perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings

    class VectorQuantizerEMA(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, commitment_cost, decay, epsilon=1e-5):
            super().__init__()
            self._embedding_dim = embedding_dim
            self._num_embeddings = num_embeddings
            self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
            self._embedding.weight.data.normal_()
            self._commitment_cost = commitment_cost
            self.register_buffer("_ema_cluster_size", torch.zeros(num_embeddings))
            self._ema_w = nn.Parameter(torch.Tensor(num_embeddings, self._embedding_dim))
            self._ema_w.data.normal_()
            self._decay = decay
            self._epsilon = epsilon

        def forward(self, inputs):
            inputs = inputs.permute(0, 2, 3, 1).contiguous()
            input_shape = inputs.shape
            flat_input = inputs.view(-1, self._embedding_dim)
            distances = (torch.sum(flat_input**2, dim=1, keepdim=True)
                         + torch.sum(self._embedding.weight**2, dim=1)
                         - 2 * torch.matmul(flat_input, self._embedding.weight.t()))  # fmt: skip
            encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
            encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings)
            encodings.scatter_(1, encoding_indices, 1)
            quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
            if self.training:
                self._ema_cluster_size = (self._ema_cluster_size * self._decay
                                          + (1 - self._decay) * torch.sum(encodings, 0))  # fmt: skip
                n = torch.sum(self._ema_cluster_size.data)
                self._ema_cluster_size = ((self._ema_cluster_size + self._epsilon)
                                          / (n + self._num_embeddings * self._epsilon) * n)  # fmt: skip
                dw = torch.matmul(encodings.t(), flat_input)
                self._ema_w = nn.Parameter(self._ema_w * self._decay + (1 - self._decay) * dw)
                self._embedding.weight = nn.Parameter(
                    self._ema_w / self._ema_cluster_size.unsqueeze(1)
                )
            e_latent_loss = F.mse_loss(quantized.detach(), inputs)
            loss = self._commitment_cost * e_latent_loss
            quantized = inputs + (quantized - inputs).detach()
            avg_probs = torch.mean(encodings, dim=0)
            perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
            return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings

    return VectorQuantizer, VectorQuantizerEMA


@program(rtol=5e-4, atol=5e-5)
def ceq_vqvae_straight_through_commitment(torch):
    """VQ-VAE: conv encoder, nearest codebook vectors from expanded squared distances, one-hot
    encodings by ``scatter_``, codebook and commitment losses, the straight-through copy of the
    decoder's gradient to the encoder, perplexity; a few Adam steps. (Looser tolerance: several
    training steps through convolutions whose float32 summation order differs.)"""
    nn, F = torch.nn, torch.nn.functional
    VectorQuantizer, _ = _vq_modules(torch)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self._encoder = nn.Sequential(nn.Conv2d(1, 8, 4, stride=2, padding=1), nn.ReLU(),
                                          nn.Conv2d(8, 4, 3, padding=1))  # fmt: skip
            self._vq_vae = VectorQuantizer(6, 4, commitment_cost=0.25)
            self._decoder = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                                          nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1))  # fmt: skip

        def forward(self, x):
            z = self._encoder(x)
            loss, quantized, perplexity, encodings = self._vq_vae(z)
            return loss, self._decoder(quantized), perplexity, encodings, z

    model = set_weights(torch, Model(), seed=13)
    with torch.no_grad():
        model._vq_vae._embedding.weight.copy_(torch.tensor(arr(14, 6, 4, scale=0.3)))
    x = torch.tensor(arr(15, 4, 1, 6, 6))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, amsgrad=False)
    history = {"recon": [], "vq": [], "perplexity": [], "codes": []}
    for _ in range(4):
        optimizer.zero_grad()
        vq_loss, data_recon, perplexity, encodings, z = model(x)
        recon_error = F.mse_loss(data_recon, x)
        loss = recon_error + vq_loss
        loss.backward()
        optimizer.step()
        history["recon"].append(recon_error.item())
        history["vq"].append(vq_loss.item())
        history["perplexity"].append(perplexity.item())
        history["codes"].append(encodings.argmax(1))
    z.retain_grad()
    vq_loss, data_recon, _, encodings, z = model(x)
    data_recon.sum().backward()
    return {"history": history, "z": z, "recon": data_recon,
            "encoder_grad": model._encoder[2].weight.grad,
            "codebook": model._vq_vae._embedding.weight,
            "codebook_grad": model._vq_vae._embedding.weight.grad,
            "usage": encodings.sum(0)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ceq_vq_ema_codebook_updates(torch):
    """VQ-VAE with exponential-moving-average codebook updates: cluster sizes kept as a buffer
    that is reassigned each step, Laplace smoothing, the embedding rebuilt as a new Parameter from
    the EMA sums; only the commitment loss trains the encoder. Also the in-place EMA form
    (``mul_(decay).add_(new, alpha=1 - decay)``) with dead codes restarted from batch vectors.
    (Looser tolerance: Adam steps through convolutions.)"""
    nn, F = torch.nn, torch.nn.functional
    _, VectorQuantizerEMA = _vq_modules(torch)
    encoder = set_weights(torch, nn.Conv2d(2, 3, 3, padding=1), seed=16)
    vq = VectorQuantizerEMA(5, 3, commitment_cost=0.25, decay=0.9)
    with torch.no_grad():
        vq._embedding.weight.copy_(torch.tensor(arr(17, 5, 3)))
        vq._ema_w.copy_(torch.tensor(arr(17, 5, 3)))
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    history = {"loss": [], "perplexity": [], "sizes": []}
    for step in range(4):
        x = torch.tensor(arr(40 + step, 3, 2, 4, 4))
        opt.zero_grad()
        loss, quantized, perplexity, encodings = vq(encoder(x))
        loss.backward()
        opt.step()
        history["loss"].append(loss.item())
        history["perplexity"].append(perplexity.item())
        history["sizes"].append(vq._ema_cluster_size.clone())
    # the in-place EMA of codebook implementations with dead-code expiry
    decay, eps, K = 0.8, 1e-5, 6
    embed = torch.tensor(arr(18, K, 3))
    cluster_size = torch.ones(K)
    embed_avg = embed.clone()
    data = torch.tensor(arr(19, 24, 3)) + torch.tensor([1.5, 0.0, -0.5])
    expired = []
    for it in range(3):
        dist = -(torch.cdist(data, embed) ** 2)
        embed_ind = dist.argmax(dim=-1)
        embed_onehot = F.one_hot(embed_ind, K).type(data.dtype)
        cluster_size.data.mul_(decay).add_(embed_onehot.sum(0), alpha=1 - decay)
        embed_sum = data.t() @ embed_onehot
        embed_avg.data.mul_(decay).add_(embed_sum.t(), alpha=1 - decay)
        n = cluster_size.sum()
        smoothed = (cluster_size + eps) / (n + K * eps) * n
        embed.data.copy_(embed_avg / smoothed.unsqueeze(1))
        dead = cluster_size < 0.7
        if dead.any():
            picks = torch.arange(int(dead.sum())) * 5 + it
            embed.data[dead] = data[picks]
            cluster_size.data[dead] = 1.0
            embed_avg.data[dead] = data[picks]
        expired.append(dead.nonzero().flatten())
    return {"history": history, "quantized": quantized, "codebook": vq._embedding.weight,
            "ema_w": vq._ema_w, "is_param": isinstance(vq._embedding.weight, nn.Parameter),
            "buffers": sorted(n for n, _ in vq.named_buffers()),
            "params": sorted(n for n, _ in vq.named_parameters()),
            "encoder": params(encoder), "embed": embed, "cluster_size": cluster_size,
            "expired": expired}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ceq_residual_vq_kmeans_codebooks(torch):
    """Residual vector quantisation (SoundStream/EnCodec): codebooks initialised by a few Lloyd
    iterations of k-means on the residuals (``scatter_add_`` sums, empty clusters kept), each
    level quantising what the previous left with ``cdist`` + ``argmin`` + ``F.embedding``, a
    straight-through sum over levels, per-level commitment losses, code usage by ``bincount``;
    a few steps training the encoder through it. (Looser tolerance: k-means sums and training
    steps.)"""
    nn, F = torch.nn, torch.nn.functional

    def kmeans(samples, num_clusters, num_iters=4):
        dim = samples.shape[-1]
        means = samples[torch.arange(num_clusters) * (samples.shape[0] // num_clusters)].clone()
        for _ in range(num_iters):
            dists = torch.cdist(samples, means)
            buckets = dists.argmin(dim=-1)
            bins = torch.bincount(buckets, minlength=num_clusters)
            zero_mask = bins == 0
            bins_min_clamped = bins.masked_fill(zero_mask, 1)
            new_means = buckets.new_zeros(num_clusters, dim, dtype=samples.dtype)
            new_means.scatter_add_(0, buckets.unsqueeze(1).expand(-1, dim), samples)
            new_means = new_means / bins_min_clamped[..., None]
            means = torch.where(zero_mask[..., None], means, new_means)
        return means, bins

    class ResidualVQ(nn.Module):
        def __init__(self, num_quantizers, codebook_size, dim):
            super().__init__()
            self.codebooks = nn.ParameterList(
                [nn.Parameter(torch.zeros(codebook_size, dim)) for _ in range(num_quantizers)]
            )
            self.codebook_size = codebook_size

        @torch.no_grad()
        def init_codebooks(self, x):
            residual = x
            for cb in self.codebooks:
                means, _ = kmeans(residual, self.codebook_size)
                cb.copy_(means)
                idx = torch.cdist(residual, cb).argmin(-1)
                residual = residual - F.embedding(idx, cb)

        def forward(self, x):
            quantized_out = torch.zeros_like(x)
            residual = x
            all_indices, all_losses = [], []
            for cb in self.codebooks:
                indices = torch.cdist(residual.detach(), cb).argmin(dim=-1)
                quantize = F.embedding(indices, cb)
                commit = F.mse_loss(quantize.detach(), residual)
                codebook_loss = F.mse_loss(quantize, residual.detach())
                quantize_st = residual + (quantize - residual).detach()
                residual = residual - quantize.detach()
                quantized_out = quantized_out + quantize_st
                all_indices.append(indices)
                all_losses.append(codebook_loss + 0.25 * commit)
            return quantized_out, torch.stack(all_indices, dim=-1), torch.stack(all_losses)

    enc = set_weights(torch, nn.Linear(5, 4), seed=21)
    dec = set_weights(torch, nn.Linear(4, 5), seed=22)
    rvq = ResidualVQ(3, 4, 4)
    x = torch.tensor(arr(23, 32, 5))
    rvq.init_codebooks(enc(x).detach())
    init_books = [cb.detach().clone() for cb in rvq.codebooks]
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters(), *rvq.parameters()], lr=5e-3)
    history = {"loss": [], "levels": []}
    for _ in range(3):
        opt.zero_grad()
        q, indices, losses = rvq(enc(x))
        loss = F.mse_loss(dec(q), x) + losses.sum()
        loss.backward()
        opt.step()
        history["loss"].append(loss.item())
        history["levels"].append(losses.detach())
    with torch.no_grad():
        z = enc(x)
        q, indices, _ = rvq(z)
        errs = []
        approx = torch.zeros_like(z)
        for level, cb in enumerate(rvq.codebooks):
            approx = approx + cb[indices[:, level]]
            errs.append((z - approx).pow(2).sum(-1).mean())
    usage = torch.stack([torch.bincount(indices[:, i], minlength=4) for i in range(3)])
    return {"history": history, "init_books": init_books, "indices": indices, "q": q,
            "errs": errs, "usage": usage, "codebooks": [cb.detach() for cb in rvq.codebooks],
            "enc": params(enc)}  # fmt: skip


@program
def ceq_product_quantization_adc(torch):
    """Product quantisation as Faiss-style code writes it with tensors: vectors split into M
    subspaces, per-subspace codebooks trained by batched Lloyd iterations (one-hot einsum sums),
    uint8 codes, reconstruction by ``gather``, and asymmetric distance computation from lookup
    tables indexed by the codes; recall@k of the approximate search against exact search."""
    F = torch.nn.functional
    N, D, M, K = 64, 8, 4, 8
    d = D // M
    xb = torch.tensor(arr(24, N, D))
    xq = torch.tensor(arr(25, 3, D))
    sub = xb.view(N, M, d).transpose(0, 1)  # [M, N, d]
    codebooks = sub[:, torch.arange(K) * (N // K)].clone()  # [M, K, d]
    inertia = []
    for _ in range(5):
        dists = torch.cdist(sub, codebooks)  # [M, N, K]
        codes = dists.argmin(-1)
        onehot = F.one_hot(codes, K).to(xb.dtype)
        sums = torch.einsum("mnk,mnd->mkd", onehot, sub)
        counts = onehot.sum(1)
        new = sums / counts.clamp(min=1).unsqueeze(-1)
        codebooks = torch.where((counts > 0).unsqueeze(-1), new, codebooks)
        inertia.append(dists.min(-1).values.pow(2).sum())
    codes = torch.cdist(sub, codebooks).argmin(-1).t().contiguous().to(torch.uint8)  # [N, M]
    idx = codes.long().t().unsqueeze(-1).expand(M, N, d)
    recon = torch.gather(codebooks, 1, idx).transpose(0, 1).reshape(N, D)
    tables = ((xq.view(-1, M, 1, d) - codebooks.unsqueeze(0)) ** 2).sum(-1)  # [Q, M, K]
    adc = tables[:, torch.arange(M).unsqueeze(0), codes.long()].sum(-1)  # [Q, N]
    exact = torch.cdist(xq, xb) ** 2
    k = 5
    approx = adc.topk(k, largest=False)
    # vectors with the same codes tie exactly in ADC distance, and topk orders ties as it likes:
    # the result is the neighbour set (ids sorted) and the sorted distances
    approx_top = approx.indices.sort(dim=-1).values
    exact_top = exact.topk(k, largest=False).indices
    recall = torch.tensor([float(len(set(a.tolist()) & set(e.tolist()))) / k
                           for a, e in zip(approx_top, exact_top)])  # fmt: skip
    return {"codebooks": codebooks, "codes": codes, "codes_dtype": str(codes.dtype),
            "recon_mse": F.mse_loss(recon, xb), "inertia": inertia, "tables": tables,
            "adc": adc, "approx_top": approx_top, "approx_dist": approx.values, "exact_top": exact_top, "recall": recall,
            "adc_vs_recon": (adc - torch.cdist(xq, recon) ** 2).abs().max(),
            "bytes_per_vector": codes.element_size() * codes.shape[1]}  # fmt: skip


def _rotation(torch, alpha, beta, gamma):
    """e3nn's ``angles_to_matrix``: Y(alpha) X(beta) Y(gamma) from stacked cos/sin."""

    def matrix_x(angle):
        c, s = angle.cos(), angle.sin()
        o, z = torch.ones_like(angle), torch.zeros_like(angle)
        return torch.stack([torch.stack([o, z, z], dim=-1), torch.stack([z, c, -s], dim=-1),
                            torch.stack([z, s, c], dim=-1)], dim=-2)  # fmt: skip

    def matrix_y(angle):
        c, s = angle.cos(), angle.sin()
        o, z = torch.ones_like(angle), torch.zeros_like(angle)
        return torch.stack([torch.stack([c, z, s], dim=-1), torch.stack([z, o, z], dim=-1),
                            torch.stack([-s, z, c], dim=-1)], dim=-2)  # fmt: skip

    a, b, g = (torch.tensor(v) for v in (alpha, beta, gamma))
    return matrix_y(a) @ matrix_x(b) @ matrix_y(g)


def _segment(torch, data, segment_ids, num_segments, mean=False):
    result = data.new_full((num_segments, data.size(1)), 0)
    ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, ids, data)
    if not mean:
        return result
    count = data.new_full((num_segments, data.size(1)), 0)
    count.scatter_add_(0, ids, torch.ones_like(data))
    return result / count.clamp(min=1)


@program(rtol=5e-4, atol=5e-5)
def ceq_egnn_layers_equivariance_and_training(torch):
    """Two EGNN layers (Satorras et al.): edge messages from both nodes' features, the squared
    distance and an edge attribute, coordinates moved by relative positions weighted by an MLP
    of the message (mean aggregation), features by summed messages with a residual; outputs
    checked under a fixed rotation plus translation (features invariant, coordinates
    equivariant), and a few Adam steps fitting target positions. (Looser tolerance: Adam steps
    through scatter sums.)"""
    nn = torch.nn

    class E_GCL(nn.Module):
        def __init__(self, input_nf, output_nf, hidden_nf, edges_in_d=1, normalize=False,
                     tanh=False, attention=True):  # fmt: skip
            super().__init__()
            act_fn = nn.SiLU()
            self.normalize, self.attention, self.epsilon = normalize, attention, 1e-8
            self.edge_mlp = nn.Sequential(nn.Linear(input_nf * 2 + 1 + edges_in_d, hidden_nf),
                                          act_fn, nn.Linear(hidden_nf, hidden_nf), act_fn)  # fmt: skip
            self.node_mlp = nn.Sequential(nn.Linear(hidden_nf + input_nf, hidden_nf), act_fn,
                                          nn.Linear(hidden_nf, output_nf))  # fmt: skip
            layer = nn.Linear(hidden_nf, 1, bias=False)
            coord_mlp = [nn.Linear(hidden_nf, hidden_nf), act_fn, layer]
            if tanh:
                coord_mlp.append(nn.Tanh())
            self.coord_mlp = nn.Sequential(*coord_mlp)
            if attention:
                self.att_mlp = nn.Sequential(nn.Linear(hidden_nf, 1), nn.Sigmoid())

        def edge_model(self, source, target, radial, edge_attr):
            out = torch.cat([source, target, radial, edge_attr], dim=1)
            out = self.edge_mlp(out)
            if self.attention:
                out = out * self.att_mlp(out)
            return out

        def node_model(self, x, edge_index, edge_attr):
            row, col = edge_index
            agg = _segment(torch, edge_attr, row, num_segments=x.size(0))
            out = self.node_mlp(torch.cat([x, agg], dim=1))
            return x + out

        def coord_model(self, coord, edge_index, coord_diff, edge_feat):
            row, col = edge_index
            trans = coord_diff * self.coord_mlp(edge_feat)
            return coord + _segment(torch, trans, row, coord.size(0), mean=True)

        def coord2radial(self, edge_index, coord):
            row, col = edge_index
            coord_diff = coord[row] - coord[col]
            radial = torch.sum(coord_diff**2, 1).unsqueeze(1)
            if self.normalize:
                norm = torch.sqrt(radial).detach() + self.epsilon
                coord_diff = coord_diff / norm
            return radial, coord_diff

        def forward(self, h, edge_index, coord, edge_attr):
            row, col = edge_index
            radial, coord_diff = self.coord2radial(edge_index, coord)
            edge_feat = self.edge_model(h[row], h[col], radial, edge_attr)
            coord = self.coord_model(coord, edge_index, coord_diff, edge_feat)
            h = self.node_model(h, edge_index, edge_feat)
            return h, coord

    class EGNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding_in = nn.Linear(3, 8)
            self.gcl_0 = E_GCL(8, 8, 8, normalize=False)
            self.gcl_1 = E_GCL(8, 8, 8, normalize=True, tanh=True)
            self.embedding_out = nn.Linear(8, 2)

        def forward(self, h, x, edges, edge_attr):
            h = self.embedding_in(h)
            h, x = self.gcl_0(h, edges, x, edge_attr)
            h, x = self.gcl_1(h, edges, x, edge_attr)
            return self.embedding_out(h), x

    n = 6
    rows, cols = zip(*[(i, j) for i in range(n) for j in range(n) if i != j])
    edges = [torch.LongTensor(list(rows)), torch.LongTensor(list(cols))]
    model = set_weights(torch, EGNN(), seed=26)
    h0 = torch.tensor(arr(27, n, 3))
    x0 = torch.tensor(arr(28, n, 3))
    edge_attr = torch.tensor(arr(29, len(rows), 1))
    R = _rotation(torch, 0.4, 1.1, -0.7)
    t = torch.tensor([0.5, -1.0, 2.0])
    with torch.no_grad():
        h_out, x_out = model(h0, x0, edges, edge_attr)
        h_rot, x_rot = model(h0, x0 @ R.T + t, edges, edge_attr)
    target = x0 + torch.tensor(arr(30, n, 3, scale=0.3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        _, x_pred = model(h0, x0, edges, edge_attr)
        loss = (x_pred - target).pow(2).sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"h_out": h_out, "x_out": x_out, "R": R, "det": torch.linalg.det(R),
            "h_inv_err": (h_rot - h_out).abs().max() < 1e-4,
            "x_eq_err": (x_rot - (x_out @ R.T + t)).abs().max() < 1e-4,
            "losses": losses, "grads": grads(model), "final": params(model)}  # fmt: skip


@program
def ceq_rotation_invariant_distance_features_and_forces(torch):
    """SchNet-style invariant features: pairwise distances, Gaussian radial basis expansion with
    a cosine cutoff, neighbour lists from a radius mask, bond angles from ``atan2`` of cross and
    dot products; an energy model on them whose forces ``-dE/dx`` (``autograd.grad`` with
    ``create_graph``) rotate with the input under a fixed rotation; a force-matching step."""
    nn = torch.nn
    n, cutoff = 7, 2.5
    pos = torch.tensor(arr(31, n, 3, scale=0.9))
    R = _rotation(torch, -1.2, 0.6, 2.1)
    centers = torch.linspace(0.0, cutoff, 8)
    gamma = 10.0 / cutoff

    ii, jj = torch.triu_indices(n, n, offset=1)

    def features(p):
        dist = (p[ii] - p[jj]).norm(dim=-1)
        mask = dist < cutoff
        rbf = torch.exp(-gamma * (dist.unsqueeze(-1) - centers) ** 2)
        fcut = 0.5 * (torch.cos(dist * math.pi / cutoff) + 1.0) * mask
        return dist, mask, rbf * fcut.unsqueeze(-1)

    net = set_weights(torch, nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 1)),
                      seed=32)  # fmt: skip

    def energy(p):
        _, _, f = features(p)
        return net(f).sum()

    def forces(p):
        p = p.detach().requires_grad_(True)
        e = energy(p)
        (g,) = torch.autograd.grad(e, p, create_graph=True)
        return e, -g

    dist, mask, f = features(pos)
    dist_r, mask_r, f_r = features(pos @ R.T)
    full = torch.cdist(pos, pos)
    row, col = ((full < cutoff) & ~torch.eye(n, dtype=torch.bool)).nonzero(as_tuple=True)
    # angles at atom 0 between its neighbours
    nbrs = col[row == 0]
    v = pos[nbrs] - pos[0]
    vi, vj = v.unsqueeze(1).expand(-1, len(nbrs), -1), v.unsqueeze(0).expand(len(nbrs), -1, -1)
    angles = torch.atan2(torch.linalg.cross(vi, vj).norm(dim=-1), (vi * vj).sum(-1))
    e, frc = forces(pos)
    e_r, frc_r = forces(pos @ R.T)
    target = torch.tensor(arr(33, n, 3, scale=0.1))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        _, fp = forces(pos)
        loss = (fp - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"dist": dist, "full": full, "mask": mask, "same_mask": torch.equal(mask, mask_r),
            "feat": f, "feat_inv": torch.allclose(f, f_r, atol=1e-5), "row": row, "col": col,
            "angles": angles, "energy": e, "energy_r": e_r, "forces": frc,
            "force_eq": torch.allclose(frc_r, frc @ R.T, atol=1e-4),
            "net_sum": frc.sum(0).abs().max() < 1e-4, "losses": losses,
            "grads": grads(net)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ceq_c4_group_convolution_rot90(torch):
    """A C4-equivariant CNN (GrouPy style): a lifting convolution whose four filter copies are
    ``rot90`` rotations, a group convolution whose filters are rotated spatially and cyclically
    shifted along the rotation axis with ``roll``, group max pooling and global pooling; the
    lifted features rotate and shift under a 90° input rotation and the logits are invariant;
    two SGD steps. (Looser tolerance: SGD steps through convolutions.)"""
    nn, F = torch.nn, torch.nn.functional

    class LiftingConv(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cout, cin, k, k))
            self.bias = nn.Parameter(torch.zeros(cout))

        def forward(self, x):
            w = torch.stack([torch.rot90(self.weight, r, dims=(2, 3)) for r in range(4)], dim=1)
            cout = w.shape[0]
            y = F.conv2d(x, w.reshape(cout * 4, *w.shape[2:]), padding=1)
            y = y.view(x.shape[0], cout, 4, *y.shape[-2:])
            return y + self.bias.view(1, -1, 1, 1, 1)

    class GroupConv(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(cout, cin, 4, k, k))

        def forward(self, x):
            w = torch.stack([torch.roll(torch.rot90(self.weight, r, dims=(-2, -1)), r, dims=2)
                             for r in range(4)], dim=1)  # fmt: skip
            cout, _, cin, g, k, _ = w.shape
            n, _, _, hgt, wid = x.shape
            y = F.conv2d(x.reshape(n, cin * g, hgt, wid), w.reshape(cout * 4, cin * g, k, k),
                         padding=1)  # fmt: skip
            return y.view(n, cout, 4, hgt, wid)

    class P4CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = LiftingConv(1, 3, 3)
            self.gconv = GroupConv(3, 4, 3)
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            y1 = F.relu(self.lift(x))
            y2 = F.relu(self.gconv(y1))
            pooled = y2.max(dim=2).values
            return self.fc(pooled.mean(dim=(-2, -1))), y1, y2

    model = set_weights(torch, P4CNN(), seed=34)
    x = torch.tensor(arr(35, 2, 1, 7, 7))
    logits, y1, y2 = model(x)
    x_rot = torch.rot90(x, 1, dims=(2, 3))
    logits_r, y1_r, y2_r = model(x_rot)
    y1_expected = torch.roll(torch.rot90(y1, 1, dims=(3, 4)), 1, dims=2)
    y2_expected = torch.roll(torch.rot90(y2, 1, dims=(3, 4)), 1, dims=2)
    labels = torch.tensor([1, 0])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.cross_entropy(model(x)[0], labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"logits": logits, "logits_r": logits_r, "y1": y1, "y2": y2,
            "lift_err": (y1_r - y1_expected).abs().max() < 1e-5,
            "gconv_err": (y2_r - y2_expected).abs().max() < 1e-5,
            "invariant": torch.allclose(logits, logits_r, atol=1e-5),
            "losses": losses, "grads": grads(model), "final": params(model)}  # fmt: skip


@program
def ceq_gated_vector_network_equivariance_check(torch):
    """e3nn-style irreps by hand: l=1 and l=2 real spherical harmonics of edge vectors (with the
    ``component`` normalisation), messages from scalar radial weights times harmonics, a gated
    nonlinearity (sigmoid of scalars scaling vector channels), a cross-product tensor product,
    and the standard equivariance test: rotate the inputs, rotate the outputs (the l=2 output
    through its Wigner matrix fitted by least squares), compare."""
    nn = torch.nn
    n, C = 5, 3
    pos = torch.tensor(arr(36, n, 3))
    feats = torch.tensor(arr(37, n, 2))
    R = _rotation(torch, 0.9, -0.4, 1.7)
    radial = set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(8, 3 * C)),
                         seed=38)  # fmt: skip
    mix = set_weights(torch, nn.Linear(C, C, bias=False), seed=39)

    def sh(vec):
        x, y, z = vec.unbind(-1)
        l1 = math.sqrt(3) * torch.stack([x, y, z], dim=-1)
        l2 = torch.stack([math.sqrt(15) * x * z, math.sqrt(15) * x * y,
                          math.sqrt(5) * (y**2 - 0.5 * (x**2 + z**2)),
                          math.sqrt(15) * y * z, math.sqrt(15) / 2 * (z**2 - x**2)], dim=-1)  # fmt: skip
        return l1, l2

    def network(p):
        src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        keep = src != dst
        src, dst = src[keep], dst[keep]
        vec = p[dst] - p[src]
        length = vec.norm(dim=-1, keepdim=True)
        unit = vec / length
        y1, y2 = sh(unit)
        w = radial(torch.cat([feats[src], feats[dst], length], dim=-1))
        w0, w1, w2 = w.split(C, dim=-1)
        scal = torch.zeros(n, C).index_add_(0, dst, w0)
        vecs = torch.zeros(n, C, 3).index_add_(0, dst, w1.unsqueeze(-1) * y1.unsqueeze(1))
        l2 = torch.zeros(n, C, 5).index_add_(0, dst, w2.unsqueeze(-1) * y2.unsqueeze(1))
        gate = torch.sigmoid(scal)
        vecs = torch.einsum("ncx,dc->ndx", vecs, mix.weight) * gate.unsqueeze(-1)
        cross = torch.linalg.cross(vecs[:, 0], vecs[:, 1], dim=-1)
        invariants = torch.cat([torch.nn.functional.silu(scal), vecs.norm(dim=-1),
                                l2.norm(dim=-1), (vecs[:, 0] * vecs[:, 2]).sum(-1, keepdim=True)],
                               dim=-1)  # fmt: skip
        return invariants, vecs, cross, l2

    inv, vecs, cross, l2 = network(pos)
    inv_r, vecs_r, cross_r, l2_r = network(pos @ R.T)
    # the l=2 representation of R, fitted from harmonics of a few fixed directions
    dirs = torch.nn.functional.normalize(torch.tensor(arr(40, 12, 3)), dim=-1)
    _, Y = sh(dirs)
    _, Yr = sh(dirs @ R.T)
    D2 = torch.linalg.lstsq(Y, Yr).solution.T
    loss = inv.pow(2).mean() + vecs.pow(2).mean()
    loss.backward()
    return {"inv": inv, "vecs": vecs, "cross": cross, "l2": l2,
            "inv_ok": torch.allclose(inv, inv_r, atol=1e-4),
            "vec_ok": torch.allclose(vecs_r, vecs @ R.T, atol=1e-4),
            "cross_ok": torch.allclose(cross_r, cross @ R.T, atol=1e-4),
            "l2_ok": torch.allclose(l2_r, l2 @ D2.T, atol=1e-3),
            "D2_orthogonal": torch.allclose(D2 @ D2.T, torch.eye(5), atol=1e-4),
            "radial_grads": grads(radial), "mix_grad": mix.weight.grad}  # fmt: skip
