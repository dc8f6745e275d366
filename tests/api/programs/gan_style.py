"""GANs and neural style transfer as their reference code bases write them: Gatys' Gram-matrix
style and content losses optimized with L-BFGS, AdaIN (mean/std statistics, decoder training,
style interpolation and CORAL colour preservation), Johnson's fast style transfer network with a
perceptual loss, the DCGAN training loop with BCE and its printed log, WGAN-GP's gradient penalty
with ``n_critic`` steps, StyleGAN2-ADA's non-saturating loss with R1 and a projection
discriminator, SNGAN hinge losses with parametrization-based spectral norm, StyleGAN2's
modulated/demodulated convolution as a grouped convolution (rosinality's and NVIDIA's forms),
ProGAN's pixel norm, minibatch standard deviation and equalized learning rate, StyleGAN2's path
length penalty with lazy regularization, pix2pix's U-Net and PatchGAN and CycleGAN's cycle and
identity losses with an image pool.

Every random draw (latents, interpolation coefficients, path-length noise, image-pool decisions)
comes from NumPy with a fixed seed, so nothing depends on either library's generator.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _normal_init(torch, model, seed, std=0.02):
    """DCGAN / pix2pix ``init_weights('normal', 0.02)``: conv weights N(0, 0.02), norm-layer
    weights N(1, 0.02), biases 0 (the draws come from NumPy)."""
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for m in model.modules():
            classname = m.__class__.__name__
            if hasattr(m, "weight") and m.weight is not None:
                shape = tuple(m.weight.shape)
                if classname.find("Conv") != -1 or classname.find("Linear") != -1:
                    m.weight.copy_(
                        torch.tensor((g.standard_normal(shape) * std).astype(np.float32))
                    )
                    if getattr(m, "bias", None) is not None:
                        torch.nn.init.constant_(m.bias, 0.0)
                elif classname.find("BatchNorm2d") != -1 or classname.find("InstanceNorm") != -1:
                    w = 1.0 + g.standard_normal(shape) * std
                    m.weight.copy_(torch.tensor(w.astype(np.float32)))
                    torch.nn.init.constant_(m.bias, 0.0)
    return model


def _tiny_vgg(torch):
    """A small VGG-like feature extractor (conv/relu blocks and max pooling)."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
    )  # fmt: skip


@program
def gatys_neural_style_gram_content_losses_lbfgs(torch):
    """The PyTorch neural-style tutorial: ``ContentLoss``/``StyleLoss`` modules that store
    ``self.loss`` as a side effect, ``gram_matrix`` by ``view`` + ``torch.mm(F, F.t())``, a
    ``Normalization`` module with ``view(-1, 1, 1)`` buffers, the model rebuilt from the CNN's
    children with named layers and trimmed after the last loss, and L-BFGS on the input image
    with a closure that clamps the image in place."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    def gram_matrix(input):
        a, b, c, d = input.size()
        features = input.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)

    class ContentLoss(nn.Module):
        def __init__(self, target):
            super().__init__()
            self.target = target.detach()

        def forward(self, input):
            self.loss = F.mse_loss(input, self.target)
            return input

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, input):
            G = gram_matrix(input)
            self.loss = F.mse_loss(G, self.target)
            return input

    class Normalization(nn.Module):
        def __init__(self, mean, std):
            super().__init__()
            self.mean = torch.tensor(mean).view(-1, 1, 1)
            self.std = torch.tensor(std).view(-1, 1, 1)

        def forward(self, img):
            return (img - self.mean) / self.std

    cnn = set_weights(torch, _tiny_vgg(torch), seed=1).eval()
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    content_img = torch.tensor(_uniform(2, 1, 3, 12, 12))
    style_img = torch.tensor(_uniform(3, 1, 3, 12, 12))

    content_layers = ["conv_4"]
    style_layers = ["conv_1", "conv_2", "conv_3", "conv_4"]
    normalization = Normalization(mean, std)
    content_losses, style_losses = [], []
    model = nn.Sequential(normalization)
    i = 0
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = f"conv_{i}"
        elif isinstance(layer, nn.ReLU):
            name = f"relu_{i}"
            layer = nn.ReLU(inplace=False)
        elif isinstance(layer, nn.MaxPool2d):
            name = f"pool_{i}"
        else:
            raise RuntimeError(f"Unrecognized layer: {layer.__class__.__name__}")
        model.add_module(name, layer)
        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module(f"content_loss_{i}", content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module(f"style_loss_{i}", style_loss)
            style_losses.append(style_loss)
    for i in range(len(model) - 1, -1, -1):
        if isinstance(model[i], ContentLoss) or isinstance(model[i], StyleLoss):
            break
    model = model[: (i + 1)]

    input_img = content_img.clone()
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = optim.LBFGS([input_img], max_iter=4)
    style_weight, content_weight = 1e5, 1
    run = [0]
    log = {"style": [], "content": []}
    while run[0] <= 7:

        def closure():
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            model(input_img)
            style_score = 0
            content_score = 0
            for sl in style_losses:
                style_score += sl.loss
            for cl in content_losses:
                content_score += cl.loss
            style_score *= style_weight
            content_score *= content_weight
            loss = style_score + content_score
            loss.backward()
            run[0] += 1
            log["style"].append(style_score.item())
            log["content"].append(content_score.item())
            return style_score + content_score

        optimizer.step(closure)
    with torch.no_grad():
        input_img.clamp_(0, 1)
    return {
        **log,
        "output": input_img,
        "evaluations": run[0],
        "layer_names": [n for n, _ in model.named_children()],
        "style_target0": style_losses[0].target,
        "model_repr": repr(model[1:4]),
    }


@program
def adain_decoder_training_interpolation_and_coral(torch):
    """naoto0804's AdaIN: ``calc_mean_std`` with ``var(dim=2) + eps`` over ``view(N, C, -1)``,
    ``adaptive_instance_normalization`` with ``expand(size)``, a frozen encoder split into
    ``enc_1..enc_3`` slices of ``children()``, a reflection-padded decoder with nearest
    upsampling, content and style losses on intermediate features, the inverse-decay learning
    rate set through ``param_groups``; then content/style trade-off ``alpha``, interpolation of
    several styles and CORAL colour preservation with ``torch.svd`` matrix square roots."""
    nn = torch.nn

    def calc_mean_std(feat, eps=1e-5):
        size = feat.size()
        assert len(size) == 4
        N, C = size[:2]
        feat_var = feat.view(N, C, -1).var(dim=2) + eps
        feat_std = feat_var.sqrt().view(N, C, 1, 1)
        feat_mean = feat.view(N, C, -1).mean(dim=2).view(N, C, 1, 1)
        return feat_mean, feat_std

    def adaptive_instance_normalization(content_feat, style_feat):
        assert content_feat.size()[:2] == style_feat.size()[:2]
        size = content_feat.size()
        style_mean, style_std = calc_mean_std(style_feat)
        content_mean, content_std = calc_mean_std(content_feat)
        normalized_feat = (content_feat - content_mean.expand(size)) / content_std.expand(size)
        return normalized_feat * style_std.expand(size) + style_mean.expand(size)

    def _calc_feat_flatten_mean_std(feat):
        assert feat.size()[0] == 3
        assert isinstance(feat, torch.FloatTensor)
        feat_flatten = feat.view(3, -1)
        mean = feat_flatten.mean(dim=-1, keepdim=True)
        std = feat_flatten.std(dim=-1, keepdim=True)
        return feat_flatten, mean, std

    def _mat_sqrt(x):
        U, D, V = torch.svd(x)
        return torch.mm(torch.mm(U, D.pow(0.5).diag()), V.t())

    def coral(source, target):
        source_f, source_f_mean, source_f_std = _calc_feat_flatten_mean_std(source)
        source_f_norm = (source_f - source_f_mean.expand_as(source_f)) / source_f_std.expand_as(
            source_f
        )
        source_f_cov_eye = torch.mm(source_f_norm, source_f_norm.t()) + torch.eye(3)
        target_f, target_f_mean, target_f_std = _calc_feat_flatten_mean_std(target)
        target_f_norm = (target_f - target_f_mean.expand_as(target_f)) / target_f_std.expand_as(
            target_f
        )
        target_f_cov_eye = torch.mm(target_f_norm, target_f_norm.t()) + torch.eye(3)
        source_f_norm_transfer = torch.mm(
            _mat_sqrt(target_f_cov_eye),
            torch.mm(torch.inverse(_mat_sqrt(source_f_cov_eye)), source_f_norm),
        )
        source_f_transfer = source_f_norm_transfer * target_f_std.expand_as(
            source_f_norm
        ) + target_f_mean.expand_as(source_f_norm)
        return source_f_transfer.view(source.size())

    decoder = nn.Sequential(
        nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(8, 6, (3, 3)), nn.ReLU(),
        nn.Upsample(scale_factor=2, mode="nearest"),
        nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(6, 6, (3, 3)), nn.ReLU(),
        nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(6, 3, (3, 3)),
    )  # fmt: skip
    vgg = set_weights(torch, _tiny_vgg(torch), seed=4)
    set_weights(torch, decoder, seed=5)

    class Net(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            enc_layers = list(encoder.children())
            self.enc_1 = nn.Sequential(*enc_layers[:2])
            self.enc_2 = nn.Sequential(*enc_layers[2:5])
            self.enc_3 = nn.Sequential(*enc_layers[5:8])
            self.decoder = decoder
            self.mse_loss = nn.MSELoss()
            for name in ["enc_1", "enc_2", "enc_3"]:
                for param in getattr(self, name).parameters():
                    param.requires_grad = False

        def encode_with_intermediate(self, input):
            results = [input]
            for i in range(3):
                func = getattr(self, f"enc_{i + 1}")
                results.append(func(results[-1]))
            return results[1:]

        def encode(self, input):
            for i in range(3):
                input = getattr(self, f"enc_{i + 1}")(input)
            return input

        def calc_content_loss(self, input, target):
            assert input.size() == target.size()
            assert target.requires_grad is False
            return self.mse_loss(input, target)

        def calc_style_loss(self, input, target):
            assert input.size() == target.size()
            assert target.requires_grad is False
            input_mean, input_std = calc_mean_std(input)
            target_mean, target_std = calc_mean_std(target)
            return self.mse_loss(input_mean, target_mean) + self.mse_loss(input_std, target_std)

        def forward(self, content, style, alpha=1.0):
            assert 0 <= alpha <= 1
            style_feats = self.encode_with_intermediate(style)
            content_feat = self.encode(content)
            t = adaptive_instance_normalization(content_feat, style_feats[-1])
            t = alpha * t + (1 - alpha) * content_feat
            g_t = self.decoder(t)
            g_t_feats = self.encode_with_intermediate(g_t)
            loss_c = self.calc_content_loss(g_t_feats[-1], t)
            loss_s = self.calc_style_loss(g_t_feats[0], style_feats[0])
            for i in range(1, 3):
                loss_s += self.calc_style_loss(g_t_feats[i], style_feats[i])
            return loss_c, loss_s

    network = Net(vgg, decoder)
    network.train()
    lr, lr_decay = 1e-3, 5e-1
    optimizer = torch.optim.Adam(network.decoder.parameters(), lr=lr)
    content_images = torch.tensor(_uniform(6, 2, 3, 8, 8))
    style_images = torch.tensor(_uniform(7, 2, 3, 8, 8))
    log = {"loss_c": [], "loss_s": [], "lr": []}
    for i in range(3):
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr / (1.0 + lr_decay * i)
        loss_c, loss_s = network(content_images, style_images)
        loss = 1.0 * loss_c + 10.0 * loss_s
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log["loss_c"].append(loss_c.item())
        log["loss_s"].append(loss_s.item())
        log["lr"].append(optimizer.param_groups[0]["lr"])

    def style_transfer(vgg_enc, decoder, content, style, alpha=1.0, interpolation_weights=None):
        assert 0.0 <= alpha <= 1.0
        content_f = vgg_enc(content)
        style_f = vgg_enc(style)
        if interpolation_weights:
            _, C, H, W = content_f.size()
            feat = torch.FloatTensor(1, C, H, W).zero_()
            base_feat = adaptive_instance_normalization(content_f, style_f)
            for i, w in enumerate(interpolation_weights):
                feat = feat + w * base_feat[i : i + 1]
            content_f = content_f[0:1]
        else:
            feat = adaptive_instance_normalization(content_f, style_f)
        feat = feat * alpha + content_f * (1 - alpha)
        return decoder(feat)

    decoder.eval()
    enc = nn.Sequential(*list(vgg.children())[:8])
    with torch.no_grad():
        half = style_transfer(enc, decoder, content_images[:1], style_images[:1], alpha=0.5)
        content = content_images[:1].expand_as(style_images)
        mixed = style_transfer(enc, decoder, content, style_images, 1.0, [0.3, 0.7])
        preserved = coral(style_images[1], content_images[0])
    return {
        **log,
        "decoder": params(decoder),
        "half": half,
        "mixed": mixed,
        "preserved": preserved,
        "frozen": [p.requires_grad for p in network.enc_2.parameters()],
    }


@program
def johnson_fast_style_transfer_perceptual_loss(torch):
    """pytorch/examples' fast neural style: ``TransformerNet`` (reflection-padded convs,
    affine ``InstanceNorm2d``, residual blocks, ``UpsampleConvLayer`` by ``F.interpolate``),
    ``normalize_batch`` with ``new_tensor(...).view(-1, 1, 1)``, batched ``gram_matrix`` by
    ``bmm`` of ``features`` and ``features.transpose(1, 2)``, ``[gram_matrix(y) for y in
    features_style]`` targets repeated over the batch, and the weighted content/style loss."""
    nn, F = torch.nn, torch.nn.functional
    from collections import namedtuple

    class ConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super().__init__()
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = nn.InstanceNorm2d(channels, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            return out + residual

    class UpsampleConvLayer(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = nn.ReflectionPad2d(reflection_padding)
            self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = F.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x_in))

    class TransformerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = ConvLayer(3, 4, kernel_size=5, stride=1)
            self.in1 = nn.InstanceNorm2d(4, affine=True)
            self.conv2 = ConvLayer(4, 6, kernel_size=3, stride=2)
            self.in2 = nn.InstanceNorm2d(6, affine=True)
            self.res1 = ResidualBlock(6)
            self.deconv1 = UpsampleConvLayer(6, 4, kernel_size=3, stride=1, upsample=2)
            self.in4 = nn.InstanceNorm2d(4, affine=True)
            self.deconv3 = ConvLayer(4, 3, kernel_size=5, stride=1)
            self.relu = nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.res1(y)
            y = self.relu(self.in4(self.deconv1(y)))
            return self.deconv3(y)

    class Vgg(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.slice1 = nn.Sequential(*[features[x] for x in range(2)])
            self.slice2 = nn.Sequential(*[features[x] for x in range(2, 7)])
            for param in self.parameters():
                param.requires_grad = False

        def forward(self, X):
            h_relu1_2 = self.slice1(X)
            h_relu2_2 = self.slice2(h_relu1_2)
            vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2"])
            return vgg_outputs(h_relu1_2, h_relu2_2)

    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        features_t = features.transpose(1, 2)
        return features.bmm(features_t) / (ch * h * w)

    def normalize_batch(batch):
        mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
        std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
        batch = batch.div_(255.0)
        return (batch - mean) / std

    transformer = set_weights(torch, TransformerNet(), seed=8)
    vgg = Vgg(set_weights(torch, _tiny_vgg(torch), seed=9))
    optimizer = torch.optim.Adam(transformer.parameters(), 1e-3)
    mse_loss = torch.nn.MSELoss()
    style = torch.tensor(_uniform(10, 1, 3, 8, 8, high=255.0))
    batch_size = 2
    style = style.repeat(batch_size, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]
    content_weight, style_weight = 1e5, 1e10
    log = {"content": [], "style": [], "total": []}
    for batch_id in range(3):
        x = torch.tensor(_uniform(20 + batch_id, batch_size, 3, 8, 8, high=255.0))
        n_batch = len(x)
        optimizer.zero_grad()
        y = transformer(x)
        y = normalize_batch(y)
        x = normalize_batch(x)
        features_y = vgg(y)
        features_x = vgg(x)
        content_loss = content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= style_weight
        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        log["content"].append(content_loss.item())
        log["style"].append(style_loss.item())
        log["total"].append(total_loss.item())
    transformer.eval()
    with torch.no_grad():
        stylized = transformer(torch.tensor(_uniform(30, 1, 3, 8, 8, high=255.0)))
        img = stylized[0].clone().clamp(0, 255).numpy()
    img = img.transpose(1, 2, 0).astype("uint8")
    return {
        **log,
        "gram_style": gram_style,
        "in1": params(transformer.in1),
        "stylized": stylized,
        "uint8_image": img,
        "fields": list(features_style._fields),
    }


@program
def dcgan_bce_alternating_steps_and_printed_log(torch):
    """pytorch/examples' DCGAN: ``weights_init`` applied with ``netG.apply``, ``label =
    torch.full((b,), real_label, dtype=real.dtype)`` refilled in place, ``errD_real.backward()``
    then ``errD_fake.backward()`` before one ``optimizerD.step()``, ``D(G(z))`` statistics by
    ``output.mean().item()``, Adam with ``betas=(0.5, 0.999)`` and the printed training log;
    then ``vutils``-style normalization of the samples to [0, 1]."""
    nn, optim = torch.nn, torch.optim
    nz, ngf, ndf, nc = 4, 4, 4, 1
    g = np.random.default_rng(11)

    def weights_init(m):
        classname = m.__class__.__name__
        with torch.no_grad():
            if classname.find("Conv") != -1:
                m.weight.copy_(torch.from_numpy(g.normal(0.0, 0.02, m.weight.shape)).float())
            elif classname.find("BatchNorm") != -1:
                m.weight.copy_(torch.from_numpy(g.normal(1.0, 0.02, m.weight.shape)).float())
                nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ngf),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
                nn.Tanh(),
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            output = self.main(input)
            return output.view(-1, 1).squeeze(1)

    netG = Generator()
    netG.apply(weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.tensor(arr(12, 4, nz, 1, 1))
    real_label, fake_label = 1, 0
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    niter, batches = 2, 2
    lines, losses = [], []
    for epoch in range(niter):
        for i in range(batches):
            real_cpu = torch.tensor(np.tanh(arr(13 + 10 * epoch + i, 4, nc, 16, 16)))
            netD.zero_grad()
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            noise = torch.tensor(arr(50 + 10 * epoch + i, batch_size, nz, 1, 1))
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            lines.append(
                "[%d/%d][%d/%d] Loss_D: %.3f Loss_G: %.3f D(x): %.3f D(G(z)): %.3f / %.3f"  # noqa: UP031
                % (epoch, niter, i, batches, errD.item(), errG.item(), D_x, D_G_z1, D_G_z2)
            )
            losses.append([errD.item(), errG.item(), D_x, D_G_z1, D_G_z2])
    netG.eval()
    with torch.no_grad():
        fake = netG(fixed_noise).detach()
    low, high = float(fake.min()), float(fake.max())
    grid = fake.clone().clamp_(min=low, max=high).sub_(low).div_(max(high - low, 1e-5))
    return {
        "lines": "\n".join(lines),
        "losses": losses,
        "samples": grid,
        "bn_running": [netG.main[1].running_mean, netG.main[1].running_var],
        "batches_tracked": netD.main[3].num_batches_tracked,
        "D_grads": grads(netD),
    }


@program
def wgan_gp_gradient_penalty_critic_iters(torch):
    """caogang's WGAN-GP: ``alpha.expand(B, real.nelement() // B).contiguous().view(...)``
    interpolates, ``autograd.grad(..., grad_outputs=torch.ones(d.size()), create_graph=True,
    retain_graph=True, only_inputs=True)``, ``((gradients.norm(2, dim=1) - 1) ** 2).mean() *
    LAMBDA``, critic steps with ``D_real.backward(mone)`` / ``D_fake.backward(one)``, toggling
    ``p.requires_grad`` for the generator step, and Adam with ``betas=(0.5, 0.9)``."""
    nn, autograd = torch.nn, torch.autograd
    DIM, BATCH_SIZE, LAMBDA, CRITIC_ITERS = 4, 4, 10, 2

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            preprocess = nn.Sequential(nn.Linear(8, 2 * 4 * 4 * DIM), nn.ReLU(True))
            block1 = nn.Sequential(nn.ConvTranspose2d(2 * DIM, DIM, 2, stride=2), nn.ReLU(True))
            deconv_out = nn.ConvTranspose2d(DIM, 1, 1)
            self.block1 = block1
            self.deconv_out = deconv_out
            self.preprocess = preprocess
            self.tanh = nn.Tanh()

        def forward(self, input):
            output = self.preprocess(input)
            output = output.view(-1, 2 * DIM, 4, 4)
            output = self.block1(output)
            output = self.deconv_out(output)
            output = self.tanh(output)
            return output.view(-1, 1, 8, 8)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(1, DIM, 3, 2, padding=1), nn.LeakyReLU(0.2),
                nn.Conv2d(DIM, 2 * DIM, 3, 2, padding=1), nn.LeakyReLU(0.2),
            )  # fmt: skip
            self.output = nn.Linear(2 * 2 * 2 * DIM, 1)

        def forward(self, input):
            out = self.main(input)
            out = out.view(-1, 2 * 2 * 2 * DIM)
            out = self.output(out)
            return out.view(-1)

    def calc_gradient_penalty(netD, real_data, fake_data, alpha):
        alpha = alpha.expand(BATCH_SIZE, real_data.nelement() // BATCH_SIZE).contiguous()
        alpha = alpha.view(BATCH_SIZE, 1, 8, 8)
        interpolates = alpha * real_data + ((1 - alpha) * fake_data)
        interpolates = autograd.Variable(interpolates, requires_grad=True)
        disc_interpolates = netD(interpolates)
        gradients = autograd.grad(
            outputs=disc_interpolates, inputs=interpolates,
            grad_outputs=torch.ones(disc_interpolates.size()),
            create_graph=True, retain_graph=True, only_inputs=True,
        )[0]  # fmt: skip
        gradients = gradients.view(gradients.size(0), -1)
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA

    netG = set_weights(torch, Generator(), seed=22)
    netD = set_weights(torch, Discriminator(), seed=23)
    optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
    one = torch.tensor(1, dtype=torch.float)
    mone = one * -1
    log = {"D_cost": [], "W_D": [], "GP": [], "G_cost": []}
    for iteration in range(2):
        for p in netD.parameters():
            p.requires_grad = True
        for i in range(CRITIC_ITERS):
            k = 100 * iteration + 10 * i
            real_data = torch.tensor(np.tanh(arr(k, BATCH_SIZE, 1, 8, 8)))
            netD.zero_grad()
            D_real = netD(real_data)
            D_real = D_real.mean()
            D_real.backward(mone)
            noise = torch.tensor(arr(k + 1, BATCH_SIZE, 8))
            with torch.no_grad():
                fake = netG(noise)
            D_fake = netD(fake)
            D_fake = D_fake.mean()
            D_fake.backward(one)
            alpha = torch.tensor(_uniform(k + 2, BATCH_SIZE, 1))
            gradient_penalty = calc_gradient_penalty(netD, real_data, fake, alpha)
            gradient_penalty.backward()
            D_cost = D_fake - D_real + gradient_penalty
            Wasserstein_D = D_real - D_fake
            optimizerD.step()
            log["D_cost"].append(D_cost.item())
            log["W_D"].append(Wasserstein_D.item())
            log["GP"].append(gradient_penalty.item())
        for p in netD.parameters():
            p.requires_grad = False
        netG.zero_grad()
        noise = torch.tensor(arr(1000 + iteration, BATCH_SIZE, 8))
        fake = netG(noise)
        G = netD(fake)
        G = G.mean()
        G.backward(mone)
        G_cost = -G
        optimizerG.step()
        log["G_cost"].append(G_cost.item())
    return {
        **log,
        "D": params(netD),
        "G_grads": grads(netG),
        "D_grad_after_freeze": [p.grad for p in netD.parameters()],
    }


@program
def stylegan2_ada_r1_projection_discriminator(torch):
    """StyleGAN2-ADA's ``StyleGAN2Loss`` phases for a class-conditional model: ``Gmain`` with
    ``softplus(-logits)``, ``Dmain`` and ``Dreg`` sharing ``real_img.detach().requires_grad_(...)``,
    ``r1_grads.square().sum([1, 2, 3])`` times ``r1_gamma / 2``, blocks wrapped in
    ``torch.autograd.profiler.record_function``, a projection head ``(x * cmap).sum(dim=1,
    keepdim=True) * (1 / np.sqrt(cmap_dim))`` on an embedded label, ``nan_to_num(..., out=
    param.grad)`` before each step, and the ADA heuristic ``sign(real_logits)`` statistic."""
    nn, F = torch.nn, torch.nn.functional
    c_dim, cmap_dim, z_dim = 3, 4, 6

    class Mapping(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(c_dim, cmap_dim)
            self.fc0 = nn.Linear(cmap_dim, cmap_dim)

        def forward(self, c):
            x = self.embed(c.to(torch.float32))
            x = x * (x.square().mean(dim=1, keepdim=True) + 1e-8).rsqrt()
            return F.leaky_relu(self.fc0(x), 0.2) * math.sqrt(2)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.b8 = nn.Sequential(
                nn.Conv2d(3, 6, 3, padding=1), nn.LeakyReLU(0.2),
                nn.Conv2d(6, 8, 3, padding=1, stride=2), nn.LeakyReLU(0.2),
            )  # fmt: skip
            self.fc = nn.Linear(8 * 4 * 4, 8)
            self.out = nn.Linear(8, cmap_dim)
            self.mapping = Mapping()

        def forward(self, img, c):
            x = self.b8(img)
            x = F.leaky_relu(self.fc(x.flatten(1)), 0.2)
            x = self.out(x)
            cmap = self.mapping(c)
            return (x * cmap).sum(dim=1, keepdim=True) * (1 / np.sqrt(cmap_dim))

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(c_dim, z_dim)
            self.fc = nn.Linear(z_dim, 3 * 8 * 8)

        def forward(self, z, c):
            w = z * self.embed(c.argmax(dim=1))
            return torch.tanh(self.fc(w)).view(-1, 3, 8, 8)

    G = set_weights(torch, Generator(), seed=24)
    D = set_weights(torch, Discriminator(), seed=25)
    opt_G = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99), eps=1e-8)
    mb_ratio = 16 / (16 + 1)
    opt_D = torch.optim.Adam(
        D.parameters(), lr=2e-3 * mb_ratio, betas=(0**mb_ratio, 0.99**mb_ratio), eps=1e-8
    )
    r1_gamma = 10.0
    batch = 4
    real_img = torch.tensor(np.tanh(arr(26, batch, 3, 8, 8)))
    real_c = F.one_hot(torch.tensor(ints(27, c_dim, batch)), c_dim).float()
    log = {"Gmain": [], "Dgen": [], "Dreal": [], "r1": [], "ada_stat": []}

    def step(module, opt):
        for param in module.parameters():
            if param.grad is not None:
                torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)
        opt.step()

    for it in range(3):
        gen_z = torch.tensor(arr(60 + it, batch, z_dim))
        gen_c = F.one_hot(torch.tensor(ints(70 + it, c_dim, batch)), c_dim).float()
        # Gmain: maximize logits for generated images.
        opt_G.zero_grad(set_to_none=True)
        G.requires_grad_(True)
        D.requires_grad_(False)
        with torch.autograd.profiler.record_function("Gmain_forward"):
            gen_logits = D(G(gen_z, gen_c), gen_c)
            loss_Gmain = F.softplus(-gen_logits)
        with torch.autograd.profiler.record_function("Gmain_backward"):
            loss_Gmain.mean().mul(1).backward()
        step(G, opt_G)
        # Dmain + Dreg ("Dboth" when the lazy interval hits).
        phase = "Dboth" if it % 2 == 0 else "Dmain"
        opt_D.zero_grad(set_to_none=True)
        G.requires_grad_(False)
        D.requires_grad_(True)
        with torch.autograd.profiler.record_function("Dgen_forward"):
            gen_logits = D(G(gen_z, gen_c), gen_c)
            loss_Dgen = F.softplus(gen_logits)
        with torch.autograd.profiler.record_function("Dgen_backward"):
            loss_Dgen.mean().mul(1).backward()
        name = "Dreal_Dr1" if phase == "Dboth" else "Dreal"
        with torch.autograd.profiler.record_function(name + "_forward"):
            real_img_tmp = real_img.detach().requires_grad_(phase in ["Dreg", "Dboth"])
            real_logits = D(real_img_tmp, real_c)
            log["ada_stat"].append(real_logits.sign().mean().item())
            loss_Dreal = F.softplus(-real_logits)
            loss_Dr1 = 0
            if phase in ["Dreg", "Dboth"]:
                with torch.autograd.profiler.record_function("r1_grads"):
                    r1_grads = torch.autograd.grad(
                        outputs=[real_logits.sum()], inputs=[real_img_tmp],
                        create_graph=True, only_inputs=True,
                    )[0]  # fmt: skip
                r1_penalty = r1_grads.square().sum([1, 2, 3])
                loss_Dr1 = r1_penalty * (r1_gamma / 2)
                log["r1"].append(r1_penalty.mean().item())
        with torch.autograd.profiler.record_function(name + "_backward"):
            (real_logits * 0 + loss_Dreal + loss_Dr1).mean().mul(1).backward()
        step(D, opt_D)
        log["Gmain"].append(loss_Gmain.mean().item())
        log["Dgen"].append(loss_Dgen.mean().item())
        log["Dreal"].append(loss_Dreal.mean().item())
    return {**log, "D": params(D), "G": params(G), "D_grads": grads(D)}


@program
def sngan_projection_hinge_parametrized_spectral_norm(torch):
    """SNGAN/BigGAN-style class-conditional discriminator residual blocks
    (``OptimizedDisBlock`` with ``avg_pool2d`` before the shortcut conv, ``DisBlock`` with a
    learnable 1x1 shortcut) built with ``torch.nn.utils.parametrizations.spectral_norm`` (on an
    ``nn.Embedding`` too, for the projection ``torch.sum(self.embedding(y) * h, dim=1,
    keepdim=True)``), hinge losses with ``n_dis`` critic steps, D forwards inside
    ``parametrize.cached()``, a generator whose last conv is spectrally normalized too, Adam
    ``betas=(0.0, 0.9)``; then the power-iteration vectors, the eval-mode normalized weights and
    the state dict keys."""
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.parametrizations.spectral_norm
    parametrize = nn.utils.parametrize

    class OptimizedDisBlock(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.shortcut = nn.Sequential(
                nn.AvgPool2d(2), SN(nn.Conv2d(in_channels, out_channels, 1, 1, 0))
            )
            self.residual = nn.Sequential(
                SN(nn.Conv2d(in_channels, out_channels, 3, 1, 1)), nn.ReLU(),
                SN(nn.Conv2d(out_channels, out_channels, 3, 1, 1)), nn.AvgPool2d(2),
            )  # fmt: skip

        def forward(self, x):
            return self.residual(x) + self.shortcut(x)

    class DisBlock(nn.Module):
        def __init__(self, in_channels, out_channels, down=False):
            super().__init__()
            shortcut = []
            if in_channels != out_channels or down:
                shortcut.append(SN(nn.Conv2d(in_channels, out_channels, 1, 1, 0)))
            if down:
                shortcut.append(nn.AvgPool2d(2))
            self.shortcut = nn.Sequential(*shortcut)
            residual = [
                nn.ReLU(), SN(nn.Conv2d(in_channels, out_channels, 3, 1, 1)),
                nn.ReLU(), SN(nn.Conv2d(out_channels, out_channels, 3, 1, 1)),
            ]  # fmt: skip
            if down:
                residual.append(nn.AvgPool2d(2))
            self.residual = nn.Sequential(*residual)

        def forward(self, x):
            return self.residual(x) + self.shortcut(x)

    class ResDiscriminator(nn.Module):
        def __init__(self, ch=4, n_classes=3):
            super().__init__()
            self.model = nn.Sequential(
                OptimizedDisBlock(3, ch), DisBlock(ch, ch * 2, down=True), nn.ReLU()
            )
            self.linear = SN(nn.Linear(ch * 2, 1))
            self.embedding = SN(nn.Embedding(n_classes, ch * 2))

        def forward(self, x, y):
            h = self.model(x).sum(dim=[2, 3])
            output = self.linear(h)
            output += torch.sum(self.embedding(y) * h, dim=1, keepdim=True)
            return output

    G = nn.Sequential(
        nn.Linear(6 + 3, 4 * 4 * 4), nn.Unflatten(1, (4, 4, 4)), nn.BatchNorm2d(4), nn.ReLU(),
        nn.Upsample(scale_factor=2), SN(nn.Conv2d(4, 3, 3, 1, 1)), nn.Tanh(),
    )  # fmt: skip
    D = ResDiscriminator()
    set_weights(torch, G, seed=28)
    set_weights(torch, D, seed=29)
    seed = 300
    with torch.no_grad():
        for m in list(G.modules()) + list(D.modules()):
            if parametrize.is_parametrized(m, "weight"):
                sn = m.parametrizations.weight[0]
                u = arr(seed, sn._u.numel())
                v = arr(seed + 1, sn._v.numel())
                sn._u.copy_(torch.tensor(u / np.linalg.norm(u)))
                sn._v.copy_(torch.tensor(v / np.linalg.norm(v)))
                seed += 2
    optim_G = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.0, 0.9))
    optim_D = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.9))
    n_dis = 2
    log = {"loss_D": [], "loss_G": [], "real": [], "fake": []}
    for step in range(2):
        for i in range(n_dis):
            z = torch.tensor(arr(400 + 10 * step + i, 4, 6))
            y_fake = torch.tensor(ints(450 + 10 * step + i, 3, 4))
            real = torch.tensor(np.tanh(arr(500 + 10 * step + i, 4, 3, 8, 8)))
            y_real = torch.tensor(ints(550 + 10 * step + i, 3, 4))
            with torch.no_grad():
                fake = G(torch.cat([z, F.one_hot(y_fake, 3).float()], dim=1)).detach()
            x = torch.cat([real, fake], dim=0)
            y = torch.cat([y_real, y_fake], dim=0)
            with parametrize.cached():
                pred = D(x, y)
            pred_real, pred_fake = torch.split(pred, [real.shape[0], fake.shape[0]])
            loss_real = F.relu(1 - pred_real).mean()
            loss_fake = F.relu(1 + pred_fake).mean()
            loss = loss_real + loss_fake
            optim_D.zero_grad()
            loss.backward()
            optim_D.step()
            log["loss_D"].append(loss.item())
            log["real"].append(pred_real.mean().item())
            log["fake"].append(pred_fake.mean().item())
        for p in D.parameters():
            p.requires_grad_(False)
        z = torch.tensor(arr(600 + step, 8, 6))
        y_fake = torch.tensor(ints(650 + step, 3, 8))
        loss_G = -D(G(torch.cat([z, F.one_hot(y_fake, 3).float()], dim=1)), y_fake).mean()
        optim_G.zero_grad()
        loss_G.backward()
        optim_G.step()
        for p in D.parameters():
            p.requires_grad_(True)
        log["loss_G"].append(loss_G.item())
    D.eval()
    with torch.no_grad():
        sigmas = [
            torch.linalg.matrix_norm(m.weight.flatten(1), ord=2)
            for m in D.modules()
            if parametrize.is_parametrized(m, "weight")
        ]
    return {
        **log,
        "sigmas": sigmas,
        "u_vectors": [
            m.parametrizations.weight[0]._u
            for m in D.model[0].residual
            if parametrize.is_parametrized(m)
        ],
        "linear_weight": D.linear.weight,
        "keys": list(D.state_dict().keys()),
        "G_bn": [G[2].running_mean, G[2].running_var],
        "orig_grad": D.linear.parametrizations.weight.original.grad,
    }


@program
def stylegan2_modulated_conv_grouped_demodulation(torch):
    """rosinality's StyleGAN2 layers: ``EqualLinear`` (``lr_mul``, bias initialized to 1 for the
    modulation), ``fused_leaky_relu`` as ``F.leaky_relu(x + bias.view(1, -1, 1, 1), 0.2) *
    sqrt(2)``, ``ModulatedConv2d`` with the style folded into a ``(batch * out, in, k, k)``
    weight, ``torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)`` demodulation, the input viewed
    as ``(1, batch * in, h, w)`` for ``F.conv2d(..., groups=batch)``, the transposed
    ``conv_transpose2d(..., stride=2, groups=batch)`` upsampling path with a [1, 3, 3, 1] blur and
    ``ToRGB``'s upsampled skip both by the native ``upfirdn2d`` (a 6-D ``F.pad`` to zero-stuff,
    negative pads by slicing, ``torch.flip``-ped FIR kernel, ``[:, ::down_y, ::down_x]``),
    ``NoiseInjection`` with fixed noise; checked against
    NVIDIA's non-fused form (scale the input, plain conv, scale the output)."""
    nn, F = torch.nn, torch.nn.functional

    class EqualLinear(nn.Module):
        def __init__(self, in_dim, out_dim, bias=True, bias_init=0, lr_mul=1, activation=None):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(out_dim, in_dim).div_(lr_mul))
            self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init)) if bias else None
            self.activation = activation
            self.scale = (1 / math.sqrt(in_dim)) * lr_mul
            self.lr_mul = lr_mul

        def forward(self, input):
            if self.activation:
                out = F.linear(input, self.weight * self.scale)
                return F.leaky_relu(out + self.bias * self.lr_mul, 0.2) * math.sqrt(2)
            return F.linear(input, self.weight * self.scale, bias=self.bias * self.lr_mul)

    def upfirdn2d_native(input, kernel, up_x, up_y, down_x, down_y, pad_x0, pad_x1, pad_y0,
                         pad_y1):  # fmt: skip
        _, channel, in_h, in_w = input.shape
        input = input.reshape(-1, in_h, in_w, 1)
        _, in_h, in_w, minor = input.shape
        kernel_h, kernel_w = kernel.shape
        out = input.view(-1, in_h, 1, in_w, 1, minor)
        out = F.pad(out, [0, 0, 0, up_x - 1, 0, 0, 0, up_y - 1])
        out = out.view(-1, in_h * up_y, in_w * up_x, minor)
        out = F.pad(out, [0, 0, max(pad_x0, 0), max(pad_x1, 0), max(pad_y0, 0), max(pad_y1, 0)])
        out = out[
            :,
            max(-pad_y0, 0) : out.shape[1] - max(-pad_y1, 0),
            max(-pad_x0, 0) : out.shape[2] - max(-pad_x1, 0),
            :,
        ]
        out = out.permute(0, 3, 1, 2)
        out = out.reshape([-1, 1, in_h * up_y + pad_y0 + pad_y1, in_w * up_x + pad_x0 + pad_x1])
        w = torch.flip(kernel, [0, 1]).view(1, 1, kernel_h, kernel_w)
        out = F.conv2d(out, w)
        out = out.reshape(
            -1, minor,
            in_h * up_y + pad_y0 + pad_y1 - kernel_h + 1,
            in_w * up_x + pad_x0 + pad_x1 - kernel_w + 1,
        )  # fmt: skip
        out = out.permute(0, 2, 3, 1)
        out = out[:, ::down_y, ::down_x, :]
        out_h = (in_h * up_y + pad_y0 + pad_y1 - kernel_h + down_y) // down_y
        out_w = (in_w * up_x + pad_x0 + pad_x1 - kernel_w + down_x) // down_x
        return out.view(-1, channel, out_h, out_w)

    def upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0)):
        return upfirdn2d_native(input, kernel, up, up, down, down, pad[0], pad[1], pad[0], pad[1])

    def make_kernel(k):
        k = torch.tensor(k, dtype=torch.float32)
        if k.ndim == 1:
            k = k[None, :] * k[:, None]
        k /= k.sum()
        return k

    class Upsample(nn.Module):
        def __init__(self, kernel, factor=2):
            super().__init__()
            self.factor = factor
            kernel = make_kernel(kernel) * (factor**2)
            self.register_buffer("kernel", kernel)
            p = kernel.shape[0] - factor
            pad0 = (p + 1) // 2 + factor - 1
            pad1 = p // 2
            self.pad = (pad0, pad1)

        def forward(self, input):
            return upfirdn2d(input, self.kernel, up=self.factor, down=1, pad=self.pad)

    class Blur(nn.Module):
        def __init__(self, kernel, pad, upsample_factor=1):
            super().__init__()
            kernel = make_kernel(kernel)
            if upsample_factor > 1:
                kernel = kernel * (upsample_factor**2)
            self.register_buffer("kernel", kernel)
            self.pad = pad

        def forward(self, input):
            return upfirdn2d(input, self.kernel, pad=self.pad)

    class ModulatedConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True,
                     upsample=False):  # fmt: skip
            super().__init__()
            self.eps = 1e-8
            self.kernel_size = kernel_size
            self.in_channel = in_channel
            self.out_channel = out_channel
            self.upsample = upsample
            if upsample:
                factor = 2
                p = (4 - factor) - (kernel_size - 1)
                pad0 = (p + 1) // 2 + factor - 1
                pad1 = p // 2 + 1
                self.blur = Blur([1, 3, 3, 1], pad=(pad0, pad1), upsample_factor=factor)
            fan_in = in_channel * kernel_size**2
            self.scale = 1 / math.sqrt(fan_in)
            self.padding = kernel_size // 2
            self.weight = nn.Parameter(
                torch.zeros(1, out_channel, in_channel, kernel_size, kernel_size)
            )
            self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)
            self.demodulate = demodulate

        def forward(self, input, style):
            batch, in_channel, height, width = input.shape
            style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
            weight = self.scale * self.weight * style
            if self.demodulate:
                demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
                weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
            weight = weight.view(
                batch * self.out_channel, in_channel, self.kernel_size, self.kernel_size
            )
            if self.upsample:
                input = input.view(1, batch * in_channel, height, width)
                weight = weight.view(
                    batch, self.out_channel, in_channel, self.kernel_size, self.kernel_size
                )
                weight = weight.transpose(1, 2).reshape(
                    batch * in_channel, self.out_channel, self.kernel_size, self.kernel_size
                )
                out = F.conv_transpose2d(input, weight, padding=0, stride=2, groups=batch)
                _, _, height, width = out.shape
                out = out.view(batch, self.out_channel, height, width)
                out = self.blur(out)
            else:
                input = input.view(1, batch * in_channel, height, width)
                out = F.conv2d(input, weight, padding=self.padding, groups=batch)
                _, _, height, width = out.shape
                out = out.view(batch, self.out_channel, height, width)
            return out

    class NoiseInjection(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1))

        def forward(self, image, noise):
            return image + self.weight * noise

    class StyledConv(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, upsample=False):
            super().__init__()
            self.conv = ModulatedConv2d(
                in_channel, out_channel, kernel_size, style_dim, upsample=upsample
            )
            self.noise = NoiseInjection()
            self.bias = nn.Parameter(torch.zeros(out_channel))

        def forward(self, input, style, noise):
            out = self.conv(input, style)
            out = self.noise(out, noise=noise)
            return F.leaky_relu(out + self.bias.view(1, -1, 1, 1), 0.2) * math.sqrt(2)

    class ToRGB(nn.Module):
        def __init__(self, in_channel, style_dim, upsample=True):
            super().__init__()
            if upsample:
                self.upsample = Upsample([1, 3, 3, 1])
            self.conv = ModulatedConv2d(in_channel, 3, 1, style_dim, demodulate=False)
            self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

        def forward(self, input, style, skip=None):
            out = self.conv(input, style) + self.bias
            if skip is not None:
                skip = self.upsample(skip)
                out = out + skip
            return out

    style_dim, batch = 6, 2

    class Synthesis(nn.Module):
        def __init__(self):
            super().__init__()
            self.input = nn.Parameter(torch.zeros(1, 4, 4, 4))
            self.conv1 = StyledConv(4, 4, 3, style_dim)
            self.to_rgb1 = ToRGB(4, style_dim, upsample=False)
            self.up = StyledConv(4, 3, 3, style_dim, upsample=True)
            self.conv2 = StyledConv(3, 3, 3, style_dim)
            self.to_rgb2 = ToRGB(3, style_dim)

        def forward(self, latent, noise):
            out = self.input.repeat(latent.shape[0], 1, 1, 1)
            out = self.conv1(out, latent[:, 0], noise=noise[0])
            skip = self.to_rgb1(out, latent[:, 1])
            out = self.up(out, latent[:, 1], noise=noise[1])
            out = self.conv2(out, latent[:, 2], noise=noise[2])
            return self.to_rgb2(out, latent[:, 3], skip)

    net = set_weights(torch, Synthesis(), seed=31, scale=1.0)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, EqualLinear):
                m.bias.fill_(1.0)
    latent = torch.tensor(arr(32, batch, 4, style_dim))
    noise = [
        torch.tensor(arr(33, batch, 1, 4, 4)),
        torch.tensor(arr(34, batch, 1, 8, 8)),
        torch.tensor(arr(35, batch, 1, 8, 8)),
    ]
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, betas=(0.0, 0.99))
    target = torch.tensor(np.tanh(arr(36, batch, 3, 8, 8)))
    losses = []
    for _ in range(3):
        img = net(latent, noise)
        loss = F.mse_loss(img, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    # NVIDIA's non-fused path gives the same activations as the grouped convolution.
    conv = net.conv1.conv
    x = torch.tensor(arr(37, batch, 4, 4, 4))
    s = latent[:, 0]
    with torch.no_grad():
        fused = conv(x, s)
        styles = conv.modulation(s)
        w = conv.weight[0] * conv.scale
        dcoefs = (w.unsqueeze(0) * styles.reshape(batch, 1, -1, 1, 1)).square().sum(dim=[2, 3, 4])
        dcoefs = (dcoefs + 1e-8).rsqrt()
        y = x * styles.reshape(batch, -1, 1, 1)
        y = F.conv2d(y, w, padding=conv.padding)
        y = y * dcoefs.reshape(batch, -1, 1, 1)
    return {
        "losses": losses,
        "img": img,
        "fused": fused,
        "nonfused": y,
        "grads": grads(net),
        "blur_kernel": net.up.conv.blur.kernel,
        "upsampled": net.to_rgb2.upsample(target),
    }


@program(rtol=5e-4, atol=5e-5)  # WGAN-GP through unscaled N(0, 1) equalized-lr weights: large
# activations, and a second-order gradient whose float32 sums differ in order
def progan_pixel_norm_minibatch_stddev_equalized_lr(torch):
    """Progressive GAN: ``PixelNorm`` by ``x * torch.rsqrt(torch.mean(x ** 2, dim=1,
    keepdim=True) + 1e-8)``, equalized learning rate convs (``N(0, 1)`` weights scaled by
    ``sqrt(2 / fan_in)`` at run time), the minibatch standard deviation layer in StyleGAN2's
    grouped form (``view(G, -1, F, c // F, H, W)``, ``repeat(G, 1, H, W)``), the fade-in of a new
    resolution by ``torch.lerp`` of the upsampled old RGB output, WGAN-GP with the epsilon drift
    term ``d_real ** 2 * 0.001`` and Adam ``betas=(0.0, 0.99)``."""
    nn, F = torch.nn, torch.nn.functional

    class PixelNorm(nn.Module):
        def forward(self, x):
            return x * torch.rsqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-8)

    class WSConv2d(nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, gain=2):
            super().__init__()
            self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)
            self.scale = (gain / (in_channels * (kernel_size**2))) ** 0.5
            self.bias = self.conv.bias
            self.conv.bias = None

        def forward(self, x):
            return self.conv(x * self.scale) + self.bias.view(1, self.bias.shape[0], 1, 1)

    class MinibatchStdLayer(nn.Module):
        def __init__(self, group_size, num_channels=1):
            super().__init__()
            self.group_size = group_size
            self.num_channels = num_channels

        def forward(self, x):
            N, C, H, W = x.shape
            G = min(self.group_size, N)
            F_ = self.num_channels
            c = C // F_
            y = x.reshape(G, -1, F_, c, H, W)
            y = y - y.mean(dim=0)
            y = y.square().mean(dim=0)
            y = (y + 1e-8).sqrt()
            y = y.mean(dim=[2, 3, 4])
            y = y.reshape(-1, F_, 1, 1)
            y = y.repeat(G, 1, H, W)
            return torch.cat([x, y], dim=1)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.initial = nn.Sequential(
                PixelNorm(), nn.ConvTranspose2d(8, 6, 4, 1, 0), nn.LeakyReLU(0.2),
                WSConv2d(6, 6), nn.LeakyReLU(0.2), PixelNorm(),
            )  # fmt: skip
            self.rgb0 = WSConv2d(6, 3, 1, 1, 0, gain=1)
            self.block1 = nn.Sequential(
                WSConv2d(6, 4), nn.LeakyReLU(0.2), PixelNorm(),
                WSConv2d(4, 4), nn.LeakyReLU(0.2), PixelNorm(),
            )  # fmt: skip
            self.rgb1 = WSConv2d(4, 3, 1, 1, 0, gain=1)

        def fade_in(self, alpha, upscaled, generated):
            return torch.tanh(torch.lerp(upscaled, generated, alpha))

        def forward(self, x, alpha):
            out = self.initial(x.view(x.shape[0], -1, 1, 1))
            upscaled = F.interpolate(out, scale_factor=2, mode="nearest")
            out = self.block1(upscaled)
            return self.fade_in(alpha, self.rgb0(upscaled), self.rgb1(out))

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.from_rgb1 = WSConv2d(3, 4, 1, 1, 0)
            self.from_rgb0 = WSConv2d(3, 6, 1, 1, 0)
            self.block1 = nn.Sequential(WSConv2d(4, 6), nn.LeakyReLU(0.2), nn.AvgPool2d(2))
            self.final = nn.Sequential(
                MinibatchStdLayer(group_size=2), WSConv2d(7, 6), nn.LeakyReLU(0.2),
                WSConv2d(6, 6, 4, 1, 0), nn.LeakyReLU(0.2), WSConv2d(6, 1, 1, 1, 0, gain=1),
            )  # fmt: skip
            self.leaky = nn.LeakyReLU(0.2)

        def forward(self, x, alpha):
            out = self.leaky(self.from_rgb1(x))
            downscaled = self.leaky(self.from_rgb0(F.avg_pool2d(x, kernel_size=2, stride=2)))
            out = self.block1(out)
            out = alpha * out + (1 - alpha) * downscaled
            return self.final(out).view(out.shape[0], -1)

    gen = Generator()
    critic = Discriminator()
    for net, seed in ((gen, 38), (critic, 39)):
        g = np.random.default_rng(seed)
        with torch.no_grad():
            for name, p in net.named_parameters():
                if name.endswith("weight"):
                    p.copy_(torch.tensor(g.standard_normal(tuple(p.shape)).astype(np.float32)))
                else:
                    p.zero_()
    opt_gen = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.0, 0.99))
    opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.99))

    def gradient_penalty(critic, real, fake, alpha, beta):
        BATCH_SIZE, C, H, W = real.shape
        beta = beta.repeat(1, C, H, W)
        interpolated_images = real * beta + fake.detach() * (1 - beta)
        interpolated_images.requires_grad_(True)
        mixed_scores = critic(interpolated_images, alpha)
        gradient = torch.autograd.grad(
            inputs=interpolated_images, outputs=mixed_scores,
            grad_outputs=torch.ones_like(mixed_scores), create_graph=True, retain_graph=True,
        )[0]  # fmt: skip
        gradient = gradient.view(gradient.shape[0], -1)
        gradient_norm = gradient.norm(2, dim=1)
        return torch.mean((gradient_norm - 1) ** 2)

    alpha, batch = 0.5, 4
    dataset_size = 8
    log = {"critic": [], "gen": [], "gp": [], "alpha": []}
    for step in range(3):
        real = torch.tensor(np.tanh(arr(40 + step, batch, 3, 8, 8)))
        noise = torch.tensor(arr(45 + step, batch, 8, 1, 1))
        fake = gen(noise, alpha)
        critic_real = critic(real, alpha)
        critic_fake = critic(fake.detach(), alpha)
        beta = torch.tensor(_uniform(48 + step, batch, 1, 1, 1))
        gp = gradient_penalty(critic, real, fake, alpha, beta)
        loss_critic = (
            -(torch.mean(critic_real) - torch.mean(critic_fake))
            + 10 * gp
            + (0.001 * torch.mean(critic_real**2))
        )
        critic.zero_grad()
        loss_critic.backward(retain_graph=True)
        opt_critic.step()
        gen_fake = critic(fake, alpha)
        loss_gen = -torch.mean(gen_fake)
        gen.zero_grad()
        loss_gen.backward()
        opt_gen.step()
        alpha += batch / (dataset_size * 0.5)
        alpha = min(alpha, 1)
        log["critic"].append(loss_critic.item())
        log["gen"].append(loss_gen.item())
        log["gp"].append(gp.item())
        log["alpha"].append(alpha)
    x = torch.tensor(arr(49, 4, 6, 3, 3))
    return {
        **log,
        "mbstd": MinibatchStdLayer(group_size=2)(x),
        "mbstd_all": MinibatchStdLayer(group_size=4, num_channels=2)(x),
        "pixelnorm": PixelNorm()(x),
        "gen": params(gen),
        "critic_grads": grads(critic),
    }


@program
def stylegan2_path_length_penalty_lazy_regularization(torch):
    """rosinality's StyleGAN2 training loop: a mapping network (``PixelNorm`` then ``EqualLinear``
    with ``lr_mul=0.01`` and fused leaky ReLU), latents broadcast to ``n_latent`` with style
    mixing at a fixed crossover, NVIDIA's ``modulated_conv2d`` as a function with the fused
    grouped path, ``g_path_regularize`` with noise scaled by ``1 / sqrt(H * W)`` and
    ``autograd.grad`` with respect to the (non-leaf) latents, the moving ``mean_path_length``,
    ``0 * fake_img[0, 0, 0, 0]`` to keep the graph, lazy regularization's ``g_reg_ratio``
    learning rate and betas, ``accumulate`` (EMA) with ``mul_().add_(alpha=...)``, and the
    truncation trick with a mean latent."""
    nn, F, autograd = torch.nn, torch.nn.functional, torch.autograd

    class PixelNorm(nn.Module):
        def forward(self, input):
            return input * torch.rsqrt(torch.mean(input**2, dim=1, keepdim=True) + 1e-8)

    class EqualLinear(nn.Module):
        def __init__(self, in_dim, out_dim, bias_init=0, lr_mul=1, activation=None):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(out_dim, in_dim))
            self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init))
            self.activation = activation
            self.scale = (1 / math.sqrt(in_dim)) * lr_mul
            self.lr_mul = lr_mul

        def forward(self, input):
            out = F.linear(input, self.weight * self.scale)
            out = out + self.bias * self.lr_mul
            if self.activation:
                out = F.leaky_relu(out, 0.2) * math.sqrt(2)
            return out

    def modulated_conv2d(x, weight, styles, padding=0, demodulate=True):
        batch_size = x.shape[0]
        out_channels, in_channels, kh, kw = weight.shape
        w = weight.unsqueeze(0)
        w = w * styles.reshape(batch_size, 1, -1, 1, 1)
        if demodulate:
            dcoefs = (w.square().sum(dim=[2, 3, 4]) + 1e-8).rsqrt()
            w = w * dcoefs.reshape(batch_size, -1, 1, 1, 1)
        x = x.reshape(1, -1, *x.shape[2:])
        w = w.reshape(-1, in_channels, kh, kw)
        x = F.conv2d(input=x, weight=w, padding=padding, groups=batch_size)
        return x.reshape(batch_size, -1, *x.shape[2:])

    style_dim, n_latent = 6, 3

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [PixelNorm()]
            for _ in range(2):
                layers.append(
                    EqualLinear(style_dim, style_dim, lr_mul=0.01, activation="fused_lrelu")
                )
            self.style = nn.Sequential(*layers)
            self.n_latent = n_latent
            self.input = nn.Parameter(torch.zeros(1, 4, 4, 4))
            self.affine1 = EqualLinear(style_dim, 4, bias_init=1)
            self.weight1 = nn.Parameter(torch.zeros(4, 4, 3, 3))
            self.affine2 = EqualLinear(style_dim, 4, bias_init=1)
            self.weight2 = nn.Parameter(torch.zeros(4, 4, 3, 3))
            self.affine_rgb = EqualLinear(style_dim, 4, bias_init=1)
            self.weight_rgb = nn.Parameter(torch.zeros(3, 4, 1, 1))

        def mean_latent(self, z):
            return self.style(z).mean(0, keepdim=True)

        def forward(self, styles, return_latents=False, inject_index=None, truncation=1,
                    truncation_latent=None):  # fmt: skip
            styles = [self.style(s) for s in styles]
            if truncation < 1:
                styles = [truncation_latent + truncation * (s - truncation_latent) for s in styles]
            if len(styles) < 2:
                latent = styles[0].unsqueeze(1).repeat(1, self.n_latent, 1)
            else:
                latent = styles[0].unsqueeze(1).repeat(1, inject_index, 1)
                latent2 = styles[1].unsqueeze(1).repeat(1, self.n_latent - inject_index, 1)
                latent = torch.cat([latent, latent2], 1)
            out = self.input.repeat(latent.shape[0], 1, 1, 1)
            s = self.affine1(latent[:, 0]) / math.sqrt(4 * 9)
            out = F.leaky_relu(modulated_conv2d(out, self.weight1, s, padding=1), 0.2)
            out = F.interpolate(out, scale_factor=2, mode="nearest")
            s = self.affine2(latent[:, 1]) / math.sqrt(4 * 9)
            out = F.leaky_relu(modulated_conv2d(out, self.weight2, s, padding=1), 0.2)
            s = self.affine_rgb(latent[:, 2]) / math.sqrt(4)
            image = modulated_conv2d(out, self.weight_rgb, s, demodulate=False)
            if return_latents:
                return image, latent
            return image, None

    def g_path_regularize(fake_img, latents, mean_path_length, noise, decay=0.01):
        noise = noise / math.sqrt(fake_img.shape[2] * fake_img.shape[3])
        (grad,) = autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents, create_graph=True)
        path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))
        path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)
        path_penalty = (path_lengths - path_mean).pow(2).mean()
        return path_penalty, path_mean.detach(), path_lengths

    def accumulate(model1, model2, decay=0.999):
        par1 = dict(model1.named_parameters())
        par2 = dict(model2.named_parameters())
        for k in par1.keys():
            par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)

    generator = set_weights(torch, Generator(), seed=51, scale=1.0)
    with torch.no_grad():
        for m in generator.modules():
            if isinstance(m, EqualLinear) and m.lr_mul == 1:
                m.bias.fill_(1.0)
            elif isinstance(m, EqualLinear):
                m.weight.div_(m.lr_mul)  # EqualLinear's ``randn(out, in).div_(lr_mul)``
    g_ema = copy.deepcopy(generator)
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    g_reg_every = 2
    g_reg_ratio = g_reg_every / (g_reg_every + 1)
    g_optim = torch.optim.Adam(
        generator.parameters(), lr=2e-3 * g_reg_ratio, betas=(0**g_reg_ratio, 0.99**g_reg_ratio)
    )
    target = torch.tensor(np.tanh(arr(52, 4, 3, 8, 8)))
    mean_path_length = 0
    path_batch_shrink, path_regularize = 2, 2.0
    log = {"g_loss": [], "path_loss": [], "mean_path": [], "path_lengths": []}
    for i in range(4):
        noises = [torch.tensor(arr(53 + i, 4, style_dim)), torch.tensor(arr(63 + i, 4, style_dim))]
        fake_img, _ = generator(noises, inject_index=1)
        g_loss = F.softplus(-(fake_img * target).mean(dim=[1, 2, 3])).mean()
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        log["g_loss"].append(g_loss.item())
        if i % g_reg_every == 0:
            path_batch_size = max(1, 4 // path_batch_shrink)
            noise = [torch.tensor(arr(73 + i, path_batch_size, style_dim))]
            fake_img, latents = generator(noise, return_latents=True)
            img_noise = torch.tensor(arr(83 + i, *fake_img.shape))
            path_loss, mean_path_length, path_lengths = g_path_regularize(
                fake_img, latents, mean_path_length, img_noise
            )
            generator.zero_grad()
            weighted_path_loss = path_regularize * g_reg_every * path_loss
            if path_batch_shrink:
                weighted_path_loss += 0 * fake_img[0, 0, 0, 0]
            weighted_path_loss.backward()
            g_optim.step()
            log["path_loss"].append(path_loss.item())
            log["mean_path"].append(mean_path_length.item())
            log["path_lengths"].append(path_lengths)
        accumulate(g_ema, generator, 0.5 ** (32 / 10_000))
    with torch.no_grad():
        mean_latent = g_ema.mean_latent(torch.tensor(arr(90, 16, style_dim)))
        sample, _ = g_ema(
            [torch.tensor(arr(91, 2, style_dim))], truncation=0.7, truncation_latent=mean_latent
        )
    return {
        **log,
        "mean_latent": mean_latent,
        "sample": sample,
        "g_ema": params(g_ema),
        "grads": grads(generator),
        "betas": list(g_optim.param_groups[0]["betas"]),
    }


@program
def pix2pix_unet_patchgan_l1_gan_loss(torch):
    """junyanz's pix2pix: ``UnetSkipConnectionBlock`` nesting (``torch.cat([x, self.model(x)],
    1)``), ``NLayerDiscriminator`` (a 70x70-style PatchGAN, here 2 layers) on the concatenated
    pair, ``GANLoss`` with ``register_buffer`` labels ``expand_as(prediction)`` and
    ``BCEWithLogitsLoss``, ``set_requires_grad(self.netD, False)`` for the G step, the fake pair
    detached for D, ``(loss_D_fake + loss_D_real) * 0.5``, ``lambda_L1 = 100`` and Adam with
    ``betas=(0.5, 0.999)``; then the linear-decay ``LambdaLR`` rule."""
    nn = torch.nn
    import functools

    norm_layer = functools.partial(nn.BatchNorm2d, affine=True, track_running_stats=True)

    class UnetSkipConnectionBlock(nn.Module):
        def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False,
                     innermost=False, norm_layer=nn.BatchNorm2d):  # fmt: skip
            super().__init__()
            self.outermost = outermost
            if type(norm_layer) == functools.partial:  # noqa: E721 - as the original writes it
                use_bias = norm_layer.func == nn.InstanceNorm2d
            else:
                use_bias = norm_layer == nn.InstanceNorm2d
            if input_nc is None:
                input_nc = outer_nc
            downconv = nn.Conv2d(input_nc, inner_nc, kernel_size=4, stride=2, padding=1,
                                 bias=use_bias)  # fmt: skip
            downrelu = nn.LeakyReLU(0.2, True)
            downnorm = norm_layer(inner_nc)
            uprelu = nn.ReLU(True)
            upnorm = norm_layer(outer_nc)
            if outermost:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2,
                                            padding=1)  # fmt: skip
                down = [downconv]
                up = [uprelu, upconv, nn.Tanh()]
                model = down + [submodule] + up
            elif innermost:
                upconv = nn.ConvTranspose2d(inner_nc, outer_nc, kernel_size=4, stride=2,
                                            padding=1, bias=use_bias)  # fmt: skip
                down = [downrelu, downconv]
                up = [uprelu, upconv, upnorm]
                model = down + up
            else:
                upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2,
                                            padding=1, bias=use_bias)  # fmt: skip
                down = [downrelu, downconv, downnorm]
                up = [uprelu, upconv, upnorm]
                model = down + [submodule] + up
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if self.outermost:
                return self.model(x)
            return torch.cat([x, self.model(x)], 1)

    class UnetGenerator(nn.Module):
        def __init__(self, input_nc, output_nc, num_downs, ngf=4, norm_layer=nn.BatchNorm2d):
            super().__init__()
            unet_block = UnetSkipConnectionBlock(ngf * 2, ngf * 2, input_nc=None, submodule=None,
                                                 norm_layer=norm_layer, innermost=True)  # fmt: skip
            for _ in range(num_downs - 3):
                unet_block = UnetSkipConnectionBlock(ngf * 2, ngf * 2, input_nc=None,
                                                     submodule=unet_block, norm_layer=norm_layer)  # fmt: skip
            unet_block = UnetSkipConnectionBlock(ngf, ngf * 2, input_nc=None, submodule=unet_block,
                                                 norm_layer=norm_layer)  # fmt: skip
            self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc,
                                                 submodule=unet_block, outermost=True,
                                                 norm_layer=norm_layer)  # fmt: skip

        def forward(self, input):
            return self.model(input)

    class NLayerDiscriminator(nn.Module):
        def __init__(self, input_nc, ndf=4, n_layers=2, norm_layer=nn.BatchNorm2d):
            super().__init__()
            if type(norm_layer) == functools.partial:  # noqa: E721
                use_bias = norm_layer.func == nn.InstanceNorm2d
            else:
                use_bias = norm_layer == nn.InstanceNorm2d
            kw, padw = 4, 1
            sequence = [nn.Conv2d(input_nc, ndf, kernel_size=kw, stride=2, padding=padw),
                        nn.LeakyReLU(0.2, True)]  # fmt: skip
            nf_mult = 1
            for n in range(1, n_layers):
                nf_mult_prev = nf_mult
                nf_mult = min(2**n, 8)
                sequence += [
                    nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kernel_size=kw, stride=2,
                              padding=padw, bias=use_bias),
                    norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True),
                ]  # fmt: skip
            nf_mult_prev = nf_mult
            nf_mult = min(2**n_layers, 8)
            sequence += [
                nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kernel_size=kw, stride=1,
                          padding=padw, bias=use_bias),
                norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True),
            ]  # fmt: skip
            sequence += [nn.Conv2d(ndf * nf_mult, 1, kernel_size=kw, stride=1, padding=padw)]
            self.model = nn.Sequential(*sequence)

        def forward(self, input):
            return self.model(input)

    class GANLoss(nn.Module):
        def __init__(self, gan_mode, target_real_label=1.0, target_fake_label=0.0):
            super().__init__()
            self.register_buffer("real_label", torch.tensor(target_real_label))
            self.register_buffer("fake_label", torch.tensor(target_fake_label))
            self.gan_mode = gan_mode
            if gan_mode == "lsgan":
                self.loss = nn.MSELoss()
            elif gan_mode == "vanilla":
                self.loss = nn.BCEWithLogitsLoss()
            else:
                raise NotImplementedError(f"gan mode {gan_mode} not implemented")

        def get_target_tensor(self, prediction, target_is_real):
            target_tensor = self.real_label if target_is_real else self.fake_label
            return target_tensor.expand_as(prediction)

        def __call__(self, prediction, target_is_real):
            target_tensor = self.get_target_tensor(prediction, target_is_real)
            return self.loss(prediction, target_tensor)

    def set_requires_grad(nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    netG = _normal_init(torch, UnetGenerator(3, 3, 4, ngf=4, norm_layer=norm_layer), seed=100)
    netD = _normal_init(torch, NLayerDiscriminator(6, ndf=4, n_layers=2, norm_layer=norm_layer),
                        seed=101)  # fmt: skip
    criterionGAN = GANLoss("vanilla")
    criterionL1 = torch.nn.L1Loss()
    optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    n_epochs, n_epochs_decay, epoch_count = 2, 2, 1

    def lambda_rule(epoch):
        return 1.0 - max(0, epoch + epoch_count - n_epochs) / float(n_epochs_decay + 1)

    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda_rule)
                  for o in (optimizer_G, optimizer_D)]  # fmt: skip
    lambda_L1 = 100.0
    log = {"G_GAN": [], "G_L1": [], "D_real": [], "D_fake": [], "lr": []}
    for epoch in range(3):
        real_A = torch.tensor(np.tanh(arr(102 + epoch, 2, 3, 16, 16)))
        real_B = torch.tensor(np.tanh(arr(112 + epoch, 2, 3, 16, 16)))
        fake_B = netG(real_A)
        set_requires_grad(netD, True)
        optimizer_D.zero_grad()
        fake_AB = torch.cat((real_A, fake_B), 1)
        pred_fake = netD(fake_AB.detach())
        loss_D_fake = criterionGAN(pred_fake, False)
        real_AB = torch.cat((real_A, real_B), 1)
        pred_real = netD(real_AB)
        loss_D_real = criterionGAN(pred_real, True)
        loss_D = (loss_D_fake + loss_D_real) * 0.5
        loss_D.backward()
        optimizer_D.step()
        set_requires_grad(netD, False)
        optimizer_G.zero_grad()
        fake_AB = torch.cat((real_A, fake_B), 1)
        pred_fake = netD(fake_AB)
        loss_G_GAN = criterionGAN(pred_fake, True)
        loss_G_L1 = criterionL1(fake_B, real_B) * lambda_L1
        loss_G = loss_G_GAN + loss_G_L1
        loss_G.backward()
        optimizer_G.step()
        for scheduler in schedulers:
            scheduler.step()
        log["G_GAN"].append(loss_G_GAN.item())
        log["G_L1"].append(loss_G_L1.item())
        log["D_real"].append(loss_D_real.item())
        log["D_fake"].append(loss_D_fake.item())
        log["lr"].append(optimizer_G.param_groups[0]["lr"])
    netG.eval()
    with torch.no_grad():
        test_fake = netG(torch.tensor(np.tanh(arr(120, 1, 3, 16, 16))))
    return {
        **log,
        "patch_shape": list(pred_real.shape),
        "test_fake": test_fake,
        "G_grads": grads(netG),
        "D_running_var": netD.model[3].running_var,
        "n_params": sum(p.numel() for p in netG.parameters()),
    }


@program(rtol=5e-4, atol=5e-5)  # instance norm over 2x2 and 3x3 patches divides by small
# standard deviations, which magnifies float32 summation-order differences
def cyclegan_resnet_generators_cycle_identity_image_pool(torch):
    """junyanz's CycleGAN: ``ResnetGenerator`` (``ReflectionPad2d(3)`` + 7x7 conv,
    ``InstanceNorm2d``, stride-2 downsampling, a ``ResnetBlock`` with reflection padding,
    ``ConvTranspose2d(..., output_padding=1)``, ``Tanh``), PatchGAN discriminators with instance
    norm, LSGAN (``MSELoss`` against expanded label buffers), the cycle losses ``lambda_A =
    lambda_B = 10`` and identity losses ``* lambda_idt``, one Adam over
    ``itertools.chain(netG_A.parameters(), netG_B.parameters())``, ``ImagePool`` history
    queries with NumPy-drawn decisions, and ``backward_D_basic``'s ``* 0.5``."""
    nn = torch.nn
    import functools

    norm_layer = functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, use_bias):
            super().__init__()
            self.conv_block = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=use_bias),
                norm_layer(dim), nn.ReLU(True),
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=use_bias),
                norm_layer(dim),
            )  # fmt: skip

        def forward(self, x):
            return x + self.conv_block(x)

    class ResnetGenerator(nn.Module):
        def __init__(self, input_nc, output_nc, ngf=4, n_blocks=1):
            super().__init__()
            use_bias = norm_layer.func == nn.InstanceNorm2d
            model = [nn.ReflectionPad2d(3),
                     nn.Conv2d(input_nc, ngf, kernel_size=7, padding=0, bias=use_bias),
                     norm_layer(ngf), nn.ReLU(True)]  # fmt: skip
            n_downsampling = 1
            for i in range(n_downsampling):
                mult = 2**i
                model += [nn.Conv2d(ngf * mult, ngf * mult * 2, kernel_size=3, stride=2,
                                    padding=1, bias=use_bias),
                          norm_layer(ngf * mult * 2), nn.ReLU(True)]  # fmt: skip
            mult = 2**n_downsampling
            for _ in range(n_blocks):
                model += [ResnetBlock(ngf * mult, use_bias=use_bias)]
            for i in range(n_downsampling):
                mult = 2 ** (n_downsampling - i)
                model += [nn.ConvTranspose2d(ngf * mult, int(ngf * mult / 2), kernel_size=3,
                                             stride=2, padding=1, output_padding=1,
                                             bias=use_bias),
                          norm_layer(int(ngf * mult / 2)), nn.ReLU(True)]  # fmt: skip
            model += [nn.ReflectionPad2d(3)]
            model += [nn.Conv2d(ngf, output_nc, kernel_size=7, padding=0)]
            model += [nn.Tanh()]
            self.model = nn.Sequential(*model)

        def forward(self, input):
            return self.model(input)

    def patch_discriminator(input_nc, ndf=4):
        return nn.Sequential(
            nn.Conv2d(input_nc, ndf, kernel_size=4, stride=2, padding=1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, kernel_size=4, stride=1, padding=1, bias=True),
            norm_layer(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, kernel_size=4, stride=1, padding=1),
        )  # fmt: skip

    class GANLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("real_label", torch.tensor(1.0))
            self.register_buffer("fake_label", torch.tensor(0.0))
            self.loss = nn.MSELoss()

        def __call__(self, prediction, target_is_real):
            target_tensor = self.real_label if target_is_real else self.fake_label
            return self.loss(prediction, target_tensor.expand_as(prediction))

    class ImagePool:
        def __init__(self, pool_size, rng):
            self.pool_size = pool_size
            self.rng = rng
            if self.pool_size > 0:
                self.num_imgs = 0
                self.images = []

        def query(self, images):
            if self.pool_size == 0:
                return images
            return_images = []
            for image in images:
                image = torch.unsqueeze(image.data, 0)
                if self.num_imgs < self.pool_size:
                    self.num_imgs = self.num_imgs + 1
                    self.images.append(image)
                    return_images.append(image)
                else:
                    p = self.rng.uniform(0, 1)
                    if p > 0.5:
                        random_id = int(self.rng.integers(0, self.pool_size))
                        tmp = self.images[random_id].clone()
                        self.images[random_id] = image
                        return_images.append(tmp)
                    else:
                        return_images.append(image)
            return torch.cat(return_images, 0)

    def set_requires_grad(nets, requires_grad=False):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    netG_A = _normal_init(torch, ResnetGenerator(3, 3), seed=130)
    netG_B = _normal_init(torch, ResnetGenerator(3, 3), seed=131)
    netD_A = _normal_init(torch, patch_discriminator(3), seed=132)
    netD_B = _normal_init(torch, patch_discriminator(3), seed=133)
    criterionGAN = GANLoss()
    criterionCycle = torch.nn.L1Loss()
    criterionIdt = torch.nn.L1Loss()
    optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))  # fmt: skip
    optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))  # fmt: skip
    fake_A_pool = ImagePool(2, np.random.default_rng(134))
    fake_B_pool = ImagePool(2, np.random.default_rng(135))
    lambda_A = lambda_B = 10.0
    lambda_idt = 0.5

    def backward_D_basic(netD, real, fake):
        pred_real = netD(real)
        loss_D_real = criterionGAN(pred_real, True)
        pred_fake = netD(fake.detach())
        loss_D_fake = criterionGAN(pred_fake, False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    keys = ["G_A", "G_B", "cycle_A", "cycle_B", "idt_A", "idt_B", "D_A", "D_B"]
    log = {k: [] for k in keys}
    for it in range(3):
        real_A = torch.tensor(np.tanh(arr(140 + it, 1, 3, 8, 8)))
        real_B = torch.tensor(np.tanh(arr(150 + it, 1, 3, 8, 8)))
        fake_B = netG_A(real_A)
        rec_A = netG_B(fake_B)
        fake_A = netG_B(real_B)
        rec_B = netG_A(fake_A)
        set_requires_grad([netD_A, netD_B], False)
        optimizer_G.zero_grad()
        idt_A = netG_A(real_B)
        loss_idt_A = criterionIdt(idt_A, real_B) * lambda_B * lambda_idt
        idt_B = netG_B(real_A)
        loss_idt_B = criterionIdt(idt_B, real_A) * lambda_A * lambda_idt
        loss_G_A = criterionGAN(netD_A(fake_B), True)
        loss_G_B = criterionGAN(netD_B(fake_A), True)
        loss_cycle_A = criterionCycle(rec_A, real_A) * lambda_A
        loss_cycle_B = criterionCycle(rec_B, real_B) * lambda_B
        loss_G = loss_G_A + loss_G_B + loss_cycle_A + loss_cycle_B + loss_idt_A + loss_idt_B
        loss_G.backward()
        optimizer_G.step()
        set_requires_grad([netD_A, netD_B], True)
        optimizer_D.zero_grad()
        fake_B_q = fake_B_pool.query(fake_B)
        loss_D_A = backward_D_basic(netD_A, real_B, fake_B_q)
        fake_A_q = fake_A_pool.query(fake_A)
        loss_D_B = backward_D_basic(netD_B, real_A, fake_A_q)
        optimizer_D.step()
        values = [loss_G_A, loss_G_B, loss_cycle_A, loss_cycle_B, loss_idt_A, loss_idt_B,
                  loss_D_A, loss_D_B]  # fmt: skip
        for k, v in zip(keys, values):
            log[k].append(float(v))
    return {
        **log,
        "rec_A": rec_A,
        "fake_B": fake_B,
        "pool": fake_B_pool.images,
        "G_A_grads": grads(netG_A),
        # (not "2.bias": a conv bias followed by InstanceNorm gets a zero gradient up to rounding
        # noise, which Adam then scales to +-lr: its values are noise in either library)
        "D_B": {n: p for n, p in netD_B.named_parameters() if n != "2.bias"},
    }


@program
def spade_adain_stylegan1_noise_and_style_mixing(torch):
    """Conditional normalization as StyleGAN (v1) and SPADE write it: ``AdaptiveInstanceNorm`` by
    ``nn.InstanceNorm2d`` then ``gamma * out + beta`` with ``style.unsqueeze(2).unsqueeze(3)
    .chunk(2, 1)``, per-channel ``NoiseInjection`` weights, a learned constant input
    ``repeat``-ed over the batch, style mixing by a per-layer choice of latent; SPADE's
    parameter-free ``BatchNorm2d(affine=False)`` modulated by ``F.interpolate(segmap,
    size=x.size()[2:], mode='nearest')`` through a shared conv, and a few steps of both with a
    feature-matching loss."""
    nn, F = torch.nn, torch.nn.functional

    class AdaptiveInstanceNorm(nn.Module):
        def __init__(self, in_channel, style_dim):
            super().__init__()
            self.norm = nn.InstanceNorm2d(in_channel)
            self.style = nn.Linear(style_dim, in_channel * 2)
            self.style.bias.data[:in_channel] = 1
            self.style.bias.data[in_channel:] = 0

        def forward(self, input, style):
            style = self.style(style).unsqueeze(2).unsqueeze(3)
            gamma, beta = style.chunk(2, 1)
            out = self.norm(input)
            return gamma * out + beta

    class NoiseInjection(nn.Module):
        def __init__(self, channel):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1, channel, 1, 1))

        def forward(self, image, noise):
            return image + self.weight * noise

    class ConstantInput(nn.Module):
        def __init__(self, channel, size=4):
            super().__init__()
            self.input = nn.Parameter(torch.zeros(1, channel, size, size))

        def forward(self, input):
            batch = input.shape[0]
            return self.input.repeat(batch, 1, 1, 1)

    class StyledBlock(nn.Module):
        def __init__(self, in_ch, out_ch, style_dim, upsample):
            super().__init__()
            self.upsample = upsample
            self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1)
            self.noise = NoiseInjection(out_ch)
            self.adain = AdaIN(out_ch, style_dim)
            self.lrelu = nn.LeakyReLU(0.2)

        def forward(self, x, style, noise):
            if self.upsample:
                x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            out = self.noise(self.conv(x), noise)
            return self.adain(self.lrelu(out), style)

    AdaIN = AdaptiveInstanceNorm
    style_dim = 4

    class StyleGenerator(nn.Module):
        def __init__(self):
            super().__init__()
            self.const = ConstantInput(4)
            self.progression = nn.ModuleList(
                [StyledBlock(4, 4, style_dim, False), StyledBlock(4, 3, style_dim, True)]
            )
            self.style = nn.Sequential(nn.Linear(style_dim, style_dim), nn.LeakyReLU(0.2))

        def forward(self, styles, noise, mixing_layer=None):
            styles = [self.style(s) for s in styles]
            out = self.const(styles[0])
            for i, block in enumerate(self.progression):
                style_step = (
                    styles[1] if (mixing_layer is not None and i >= mixing_layer) else styles[0]
                )
                out = block(out, style_step, noise[i])
            return out

    class SPADE(nn.Module):
        def __init__(self, norm_nc, label_nc, nhidden=4):
            super().__init__()
            self.param_free_norm = nn.BatchNorm2d(norm_nc, affine=False)
            self.mlp_shared = nn.Sequential(
                nn.Conv2d(label_nc, nhidden, kernel_size=3, padding=1), nn.ReLU()
            )
            self.mlp_gamma = nn.Conv2d(nhidden, norm_nc, kernel_size=3, padding=1)
            self.mlp_beta = nn.Conv2d(nhidden, norm_nc, kernel_size=3, padding=1)

        def forward(self, x, segmap):
            normalized = self.param_free_norm(x)
            segmap = F.interpolate(segmap, size=x.size()[2:], mode="nearest")
            actv = self.mlp_shared(segmap)
            gamma = self.mlp_gamma(actv)
            beta = self.mlp_beta(actv)
            return normalized * (1 + gamma) + beta

    gen = StyleGenerator()
    set_weights(torch, gen, seed=160)
    with torch.no_grad():
        for m in gen.modules():
            if isinstance(m, AdaptiveInstanceNorm):
                m.style.bias.data[: m.style.out_features // 2] = 1
                m.style.bias.data[m.style.out_features // 2 :] = 0
    spade = set_weights(torch, SPADE(3, 3), seed=161)
    labels = torch.tensor(ints(162, 3, 2, 4, 4))
    segmap = F.one_hot(labels, 3).permute(0, 3, 1, 2).float()
    noise = [torch.tensor(arr(163, 2, 1, 4, 4)), torch.tensor(arr(164, 2, 1, 8, 8))]
    target = torch.tensor(np.tanh(arr(165, 2, 3, 8, 8)))
    optimizer = torch.optim.Adam(itertools.chain(gen.parameters(), spade.parameters()),
                                 lr=1e-2, betas=(0.5, 0.999))  # fmt: skip
    losses = []
    for step in range(3):
        z = [
            torch.tensor(arr(170 + step, 2, style_dim)),
            torch.tensor(arr(180 + step, 2, style_dim)),
        ]
        img = gen(z, noise, mixing_layer=1)
        out = spade(img, segmap)
        loss = F.l1_loss(out, target) + 0.1 * F.mse_loss(
            out.mean(dim=[2, 3]), target.mean(dim=[2, 3])
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # The loss cannot see a per-channel offset of ``img`` (the parameter-free BatchNorm removes
    # it), so the parameters that only shift it (the last AdaIN's beta) get a zero gradient up to
    # rounding noise, which Adam scales to +-lr: ``running_mean`` and eval-mode outputs are noise
    # in either library. The batch-statistics sample and ``running_var`` are not.
    gen.eval()
    with torch.no_grad():
        z = [torch.tensor(arr(190, 2, style_dim))]
        sample = spade(gen(z, noise), segmap)
    return {
        "losses": losses,
        "sample": sample,
        "noise_weights": [b.noise.weight for b in gen.progression],
        "spade_running_var": spade.param_free_norm.running_var,
        "grads": grads(spade),
        "const_grad": gen.const.input.grad,
    }
