"""Vision models: residual networks, U-Nets, depthwise and squeeze-excite blocks, resampling, segmentation losses, weight EMA."""

from __future__ import annotations

import copy
import io
from collections import OrderedDict

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def resnet_basic_blocks_downsample_bn_running_stats(torch):
    nn = torch.nn

    def conv3x3(cin, cout, stride=1):
        return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1, self.bn1 = conv3x3(inplanes, planes, stride), nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2, self.bn2 = conv3x3(planes, planes), nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class TinyResNet(nn.Module):
        def __init__(self, num_classes=3):
            super().__init__()
            self.inplanes = 4
            self.stem = nn.Sequential(
                nn.Conv2d(2, 4, 3, 1, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True)
            )
            self.layer1 = self._make_layer(4, 1)
            self.layer2 = self._make_layer(6, 2, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(6 * BasicBlock.expansion, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                    nn.BatchNorm2d(planes, momentum=None),
                )
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.layer2(self.layer1(self.stem(x)))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    model = set_weights(torch, TinyResNet(), seed=1)
    for m in model.modules():
        if isinstance(m, BasicBlock):
            nn.init.constant_(m.bn2.weight, 0.5)
    opt = torch.optim.SGD(
        model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    crit = nn.CrossEntropyLoss()
    losses = []
    for step in range(3):
        x, y = torch.tensor(arr(10 + step, 4, 2, 8, 8)), torch.tensor(ints(20 + step, 3, 4))
        model.train()
        loss = crit(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(arr(30, 2, 2, 8, 8)))
    ds_bn = model.layer2[0].downsample[1]
    return {"losses": losses, "eval_logits": logits, "pred": logits.argmax(dim=1),
            "rm": ds_bn.running_mean, "rv": ds_bn.running_var, "nbt": ds_bn.num_batches_tracked,
            "stem_rv": model.stem[1].running_var, "fc_w": model.fc.weight,
            "conv_grad": model.layer1[0].conv1.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def unet_transposed_convs_skip_concat_dice(torch):
    nn, F = torch.nn, torch.nn.functional

    class DoubleConv(nn.Sequential):
        def __init__(self, cin, cout):
            super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))  # fmt: skip

    class Up(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin, cout)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            diff_y, diff_x = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [diff_x // 2, diff_x - diff_x // 2, diff_y // 2, diff_y - diff_y // 2])
            return self.conv(torch.cat([x2, x1], dim=1))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = DoubleConv(1, 4)
            self.down = nn.Sequential(nn.MaxPool2d(2), DoubleConv(4, 8))
            self.up = Up(8, 4)
            self.outc = nn.Conv2d(4, 1, kernel_size=1)

        def forward(self, x):
            x1 = self.inc(x)
            return self.outc(self.up(self.down(x1), x1))

    def dice_loss(logits, target, smooth=1.0):
        probs = torch.sigmoid(logits).flatten(1)
        target = target.flatten(1)
        inter = (probs * target).sum(-1)
        return 1 - ((2.0 * inter + smooth) / (probs.sum(-1) + target.sum(-1) + smooth)).mean()

    model = set_weights(torch, UNet(), seed=2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.99))
    img = torch.tensor(arr(40, 2, 1, 9, 11))
    mask = torch.tensor((arr(41, 2, 1, 9, 11) > 0.3).astype(np.float32))
    losses = []
    for _ in range(3):
        logits = model(img)
        loss = F.binary_cross_entropy_with_logits(logits, mask) + dice_loss(logits, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    model.eval()
    with torch.no_grad():
        pred = (torch.sigmoid(model(img)) > 0.5).float()
    return {"losses": losses, "logits": logits, "pred_fg": pred.sum((1, 2, 3)),
            "up_w_grad": model.up.up.weight.grad, "up_b": model.up.up.bias}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mobilenet_inverted_residual_se_channels_last(torch):
    nn, F = torch.nn, torch.nn.functional

    def make_divisible(v, divisor=4):
        return max(divisor, int(v + divisor / 2) // divisor * divisor)

    class SqueezeExcite(nn.Module):
        def __init__(self, ch, rd_ratio=0.25):
            super().__init__()
            rd = make_divisible(ch * rd_ratio)
            self.conv_reduce = nn.Conv2d(ch, rd, 1, bias=True)
            self.conv_expand = nn.Conv2d(rd, ch, 1, bias=True)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            s = self.conv_expand(F.relu(self.conv_reduce(s)))
            return x * F.hardsigmoid(s)

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand, act):
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            self.block = nn.Sequential(
                nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), act(),
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), act(),
                SqueezeExcite(hidden),
                nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))  # fmt: skip

        def forward(self, x):
            return x + self.block(x) if self.use_res else self.block(x)

    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, 2, 1, bias=False), nn.BatchNorm2d(4), nn.Hardswish(),
        InvertedResidual(4, 4, 1, 2, nn.ReLU6), InvertedResidual(4, 6, 2, 3, nn.Hardswish),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(6, 5))  # fmt: skip
    set_weights(torch, model, seed=3)
    model = model.to(memory_format=torch.channels_last)
    x = torch.tensor(arr(50, 3, 3, 12, 12)).to(memory_format=torch.channels_last)
    y = torch.tensor(ints(51, 5, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    losses = []
    for _ in range(2):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    dw = model[3].block[3]
    return {"losses": losses, "eval_out": model(x), "x_stride": list(x.stride()),
            "x_cl": x.is_contiguous(memory_format=torch.channels_last), "x_c": x.is_contiguous(),
            "dw_weight_shape": list(dw.weight.shape), "dw_grad": dw.weight.grad,
            "se_grad": model[4].block[6].conv_reduce.weight.grad}  # fmt: skip


@program
def interpolate_modes_align_corners_and_scale_factors(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(60, 1, 2, 4, 5), requires_grad=True)
    outs = {
        "nearest_1_5": F.interpolate(x, scale_factor=1.5, mode="nearest"),
        "nearest_exact": F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
        "nearest_down": F.interpolate(x, size=(3, 2), mode="nearest"),
        "bilinear_sf": F.interpolate(
            x, scale_factor=(1.5, 2.3), mode="bilinear", align_corners=False
        ),
        "bilinear_sf_recompute": F.interpolate(
            x, scale_factor=(1.5, 2.3), mode="bilinear", recompute_scale_factor=True
        ),  # fmt: skip
        "bilinear_ac_down": F.interpolate(x, size=(3, 3), mode="bilinear", align_corners=True),
        "bicubic": F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False),
        "bicubic_ac": F.interpolate(x, size=(7, 6), mode="bicubic", align_corners=True),
        "area": F.interpolate(x, size=(2, 3), mode="area"),
        "bilinear_antialias": F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True),
        "upsample_nearest": torch.nn.UpsamplingNearest2d(scale_factor=2)(x),
        "upsample_bilinear": torch.nn.UpsamplingBilinear2d(size=(5, 7))(x),
    }
    weights = torch.tensor(arr(61, 12))
    total = sum(weights[i] * o.pow(2).sum() for i, o in enumerate(outs.values()))
    total.backward()
    vol = torch.tensor(arr(62, 1, 1, 2, 3, 3))
    sig = torch.tensor(arr(63, 2, 3, 5))
    return {**outs, "dx": x.grad, "shapes": [list(o.shape) for o in outs.values()],
            "trilinear": F.interpolate(vol, scale_factor=(2, 1.5, 1), mode="trilinear"),
            "linear_ac": F.interpolate(sig, size=8, mode="linear", align_corners=True),
            "nearest1d": F.interpolate(sig, scale_factor=1.7)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def pixel_unshuffle_encoder_pixel_shuffle_decoder(torch):
    nn, F = torch.nn, torch.nn.functional

    class SpaceToDepthAE(nn.Module):
        def __init__(self, ch=2, r=2):
            super().__init__()
            self.enc = nn.Sequential(
                nn.PixelUnshuffle(r), nn.Conv2d(ch * r * r, 6, 3, padding=1), nn.PReLU(6)
            )
            self.dec = nn.Sequential(nn.Conv2d(6, ch * r * r, 3, padding=1, padding_mode="reflect"),
                                     nn.PixelShuffle(r))  # fmt: skip

        def forward(self, x):
            return torch.tanh(self.dec(self.enc(x)))

    model = set_weights(torch, SpaceToDepthAE(), seed=4)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, amsgrad=True)
    x = torch.tensor(np.tanh(arr(70, 2, 2, 6, 8)))
    losses = []
    for _ in range(3):
        recon = model(x)
        loss = F.l1_loss(recon, x) + 0.5 * F.smooth_l1_loss(recon, x, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    z = torch.tensor(arr(71, 2, 3, 8, 2, 3))  # extra leading batch dims
    shuffled = F.pixel_shuffle(z, 2)
    return {"losses": losses, "recon": recon, "prelu": model.enc[2].weight,
            "grads": grads(model), "shuffled": shuffled,
            "round_trip": bool(torch.equal(F.pixel_unshuffle(shuffled, 2), z)),
            "shapes": [list(model.enc(x).shape), list(shuffled.shape)]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def segmentation_multiclass_dice_and_focal_losses(torch):
    nn, F = torch.nn, torch.nn.functional

    def multiclass_dice(logits, target, num_classes, eps=1e-6):
        probs = logits.softmax(dim=1)
        one_hot = F.one_hot(target.clamp(min=0), num_classes).permute(0, 3, 1, 2).float()
        valid = (target != -100).unsqueeze(1)
        probs, one_hot = probs * valid, one_hot * valid
        dims = (0, 2, 3)
        inter = torch.sum(probs * one_hot, dims)
        card = torch.sum(probs + one_hot, dims)
        return (1.0 - (2.0 * inter + eps) / (card + eps)).mean()

    def focal_loss(logits, target, alpha, gamma=2.0):
        ce = F.cross_entropy(logits, target, reduction="none", ignore_index=-100)
        pt = torch.exp(-ce)
        at = alpha.gather(0, target.clamp(min=0).flatten()).view_as(target)
        loss = at * (1 - pt) ** gamma * ce
        return loss[target != -100].mean()

    def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0):
        p = torch.sigmoid(inputs)
        ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        p_t = p * targets + (1 - p) * (1 - targets)
        loss = ce_loss * ((1 - p_t) ** gamma)
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        return (alpha_t * loss).sum() / max(1.0, targets.sum().item())

    head = set_weights(
        torch, nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.GELU(), nn.Conv2d(6, 4, 1)), seed=5
    )
    opt = torch.optim.SGD(head.parameters(), lr=0.2, momentum=0.5, dampening=0.1)
    img = torch.tensor(arr(80, 2, 3, 6, 6))
    target = torch.tensor(ints(81, 4, 2, 6, 6))
    target[0, :2, :2] = -100
    alpha = torch.tensor([0.25, 0.75, 0.5, 1.0])
    hist = []
    for _ in range(3):
        logits = head(img)
        parts = {"dice": multiclass_dice(logits, target, 4), "focal": focal_loss(logits, target, alpha),
                 "ce_ls": F.cross_entropy(logits, target, label_smoothing=0.05, weight=alpha),
                 "sfl": sigmoid_focal_loss(logits[:, 1], (target == 1).float())}  # fmt: skip
        loss = sum(parts.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append({k: v.item() for k, v in parts.items()})
    return {"hist": hist, "logits": logits, "grads": grads(head),
            "nll2d": F.nll_loss(F.log_softmax(logits, 1), target, reduction="sum")}  # fmt: skip


@program
def mixup_and_cutmix_fixed_lambda(torch):
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(
        torch,
        nn.Sequential(
            nn.Conv2d(3, 4, 3, stride=2), nn.SiLU(), nn.Flatten(), nn.Linear(4 * 3 * 3, 5)
        ),
        seed=6,
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.tensor(arr(90, 4, 3, 8, 8))
    y = torch.tensor(ints(91, 5, 4))
    perm = torch.tensor([2, 0, 3, 1])

    lam = 0.7
    mixed_x = lam * x + (1 - lam) * x[perm, :]
    y_a, y_b = y, y[perm]
    out = model(mixed_x)
    loss_mix = lam * F.cross_entropy(out, y_a) + (1 - lam) * F.cross_entropy(out, y_b)
    opt.zero_grad()
    loss_mix.backward()
    opt.step()

    lam = 0.64
    H, W = x.size(2), x.size(3)
    cut_rat = np.sqrt(1.0 - lam)
    cut_h, cut_w = int(H * cut_rat), int(W * cut_rat)
    cy, cx = 3, 5
    y1, y2 = np.clip(cy - cut_h // 2, 0, H), np.clip(cy + cut_h // 2, 0, H)
    x1, x2 = np.clip(cx - cut_w // 2, 0, W), np.clip(cx + cut_w // 2, 0, W)
    cut_x = x.clone()
    cut_x[:, :, y1:y2, x1:x2] = x[perm, :, y1:y2, x1:x2]
    lam_adj = 1 - ((x2 - x1) * (y2 - y1) / (W * H))
    soft = lam_adj * F.one_hot(y, 5).float() + (1 - lam_adj) * F.one_hot(y[perm], 5).float()
    out2 = model(cut_x)
    loss_cut = F.cross_entropy(out2, soft)
    opt.zero_grad()
    loss_cut.backward()
    opt.step()
    soft_bce = nn.BCEWithLogitsLoss()(out2.detach(), soft)
    return {"mixed_x": mixed_x, "loss_mix": loss_mix, "cut_x": cut_x, "lam_adj": float(lam_adj),
            "loss_cut": loss_cut, "soft": soft, "soft_bce": soft_bce, "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ema_of_weights_and_buffers_three_styles(torch):
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(torch, nn.Sequential(nn.Conv2d(2, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)), seed=7)  # fmt: skip
    ema_v2 = copy.deepcopy(model).eval()
    ema_lerp = copy.deepcopy(model).eval().requires_grad_(False)
    ema_foreach = copy.deepcopy(model).eval()
    for p in ema_v2.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    decay = 0.9

    @torch.no_grad()
    def update_v2(ema, m):
        for ema_v, model_v in zip(ema.state_dict().values(), m.state_dict().values()):
            ema_v.copy_(ema_v * decay + (1.0 - decay) * model_v)

    @torch.no_grad()
    def update_lerp(ema, m, step):
        d = min(decay, (1 + step) / (10 + step))
        for ep, mp in zip(ema.parameters(), m.parameters()):
            ep.mul_(d).add_(mp.detach(), alpha=1 - d)
        for eb, mb in zip(ema.buffers(), m.buffers()):
            if eb.dtype.is_floating_point:
                eb.lerp_(mb, 1 - d)
            else:
                eb.copy_(mb)

    @torch.no_grad()
    def update_foreach(ema, m):
        ema_params, model_params = list(ema.parameters()), list(m.parameters())
        torch._foreach_lerp_(ema_params, model_params, weight=1.0 - decay)
        for eb, mb in zip(ema.buffers(), m.buffers()):
            eb.copy_(mb)

    losses = []
    for step in range(4):
        x, y = torch.tensor(arr(100 + step, 3, 2, 6, 6)), torch.tensor(arr(110 + step, 3, 2))
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        update_v2(ema_v2, model)
        update_lerp(ema_lerp, model, step)
        update_foreach(ema_foreach, model)
        losses.append(loss.item())
    xe = torch.tensor(arr(120, 2, 2, 6, 6))
    return {"losses": losses, "v2": dict(ema_v2.state_dict()), "lerp": dict(ema_lerp.state_dict()),
            "foreach": params(ema_foreach), "model_eval": model.eval()(xe), "ema_eval": ema_v2(xe),
            "ema_requires_grad": [p.requires_grad for p in ema_lerp.parameters()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def convnext_block_layernorm_channels_permutes(torch):
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm2d(nn.Module):
        def __init__(self, ch, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ch))
            self.bias = nn.Parameter(torch.zeros(ch))
            self.eps = eps

        def forward(self, x):
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    class Block(nn.Module):
        def __init__(self, dim, layer_scale_init=1e-1):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, kernel_size=5, padding=2, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pwconv1 = nn.Linear(dim, 4 * dim)
            self.act = nn.GELU()
            self.pwconv2 = nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(layer_scale_init * torch.ones(dim))

        def forward(self, x):
            shortcut = x
            x = self.dwconv(x).permute(0, 2, 3, 1)
            x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
            x = (self.gamma * x).permute(0, 3, 1, 2)
            return shortcut + x

    model = nn.Sequential(nn.Conv2d(3, 8, kernel_size=2, stride=2), LayerNorm2d(8), Block(8),
                          nn.GroupNorm(2, 8), nn.Conv2d(8, 4, 1))  # fmt: skip
    set_weights(torch, model, seed=8)
    with torch.no_grad():
        model[2].gamma.fill_(0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, betas=(0.9, 0.999), eps=1e-8)
    x = torch.tensor(arr(130, 2, 3, 8, 8))
    target = torch.tensor(arr(131, 2, 4, 4, 4))
    losses = []
    for _ in range(3):
        out = model(x)
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    h = torch.tensor(arr(132, 2, 8, 3, 3))
    ln_fn = F.layer_norm(
        h.permute(0, 2, 3, 1), (8,), model[2].norm.weight, model[2].norm.bias, eps=1e-6
    ).permute(0, 3, 1, 2)
    return {"losses": losses, "out": out, "grads": grads(model), "gamma": model[2].gamma,
            "ln2d_vs_ln": torch.allclose(model[1](h), F.layer_norm(h.permute(0, 2, 3, 1), (8,), model[1].weight,
                                                                   model[1].bias, 1e-6).permute(0, 3, 1, 2), atol=1e-5),
            "ln_fn": ln_fn, "ln_fn_contig": ln_fn.is_contiguous()}  # fmt: skip


@program
def container_models_state_dict_bytesio_and_flat_vectors(torch):
    nn = torch.nn
    utils = torch.nn.utils

    class MultiHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(OrderedDict([
                ("conv", nn.Conv2d(1, 3, 3)), ("bn", nn.BatchNorm2d(3)), ("act", nn.ReLU()),
                ("pool", nn.AdaptiveMaxPool2d(2)), ("flat", nn.Flatten())]))  # fmt: skip
            self.blocks = nn.ModuleList([nn.Linear(12, 12) for _ in range(2)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(12, 3), "reg": nn.Linear(12, 1)})

        def forward(self, x):
            h = self.backbone(x)
            for blk in self.blocks:
                h = h + torch.tanh(blk(h))
            return {k: head(h) for k, head in self.heads.items()}

    a = set_weights(torch, MultiHead(), seed=9)
    a.blocks.append(nn.Linear(12, 12))
    a.blocks.insert(0, nn.Identity())
    set_weights(torch, a, seed=10)
    x = torch.tensor(arr(140, 3, 1, 6, 6))
    a.train()
    out = a(x)
    loss = out["cls"].logsumexp(1).mean() + out["reg"].pow(2).mean()
    loss.backward()

    buf = io.BytesIO()
    torch.save({"model": a.state_dict(), "step": 1}, buf)
    size_ok = buf.tell() > 0
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    b = MultiHead()
    b.blocks.append(nn.Linear(12, 12))
    b.blocks.insert(0, nn.Identity())
    b.load_state_dict(ckpt["model"])
    a.eval(), b.eval()
    with torch.no_grad():
        same = all(torch.equal(a(x)[k], b(x)[k]) for k in ("cls", "reg"))
    vec = utils.parameters_to_vector(a.parameters())
    gvec = utils.parameters_to_vector(p.grad for p in a.parameters())
    c = MultiHead()
    c.blocks.extend([nn.Linear(12, 12)])
    c.blocks.insert(0, nn.Identity())
    utils.vector_to_parameters(vec * 0.5, c.parameters())
    partial = {k: v for k, v in ckpt["model"].items() if k.startswith("backbone.")}
    res = c.load_state_dict(partial, strict=False)
    return {"keys": list(ckpt["model"].keys()), "step": ckpt["step"], "same": same, "size_ok": size_ok,
            "vec": vec, "gvec": gvec, "numel": vec.numel(), "c_heads_cls": c.heads["cls"].weight,
            "missing": list(res.missing_keys), "unexpected": list(res.unexpected_keys),
            "n_blocks": len(a.blocks), "first_two": str(a.backbone[:2]), "names": [n for n, _ in a.named_children()],
            "nbt": a.backbone.bn.num_batches_tracked, "module_names": [n for n, _ in b.named_modules()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def knowledge_distillation_cnn_temperature(torch):
    nn, F = torch.nn, torch.nn.functional

    def make_cnn(width):
        return nn.Sequential(nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.LeakyReLU(0.1),
                             nn.MaxPool2d(2), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 4))  # fmt: skip

    teacher = set_weights(torch, make_cnn(8), seed=11).eval()
    student = set_weights(torch, make_cnn(3), seed=12)
    kd = nn.KLDivLoss(reduction="batchmean")
    T, alpha = 4.0, 0.7
    opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    hist = []
    for step in range(4):
        x, y = torch.tensor(arr(150 + step, 6, 1, 6, 6)), torch.tensor(ints(160 + step, 4, 6))
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        soft_loss = kd(F.log_softmax(s_logits / T, dim=1), F.softmax(t_logits / T, dim=1)) * (T * T)
        hard_loss = F.cross_entropy(s_logits, y)
        loss = alpha * soft_loss + (1.0 - alpha) * hard_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        hist.append([soft_loss.item(), hard_loss.item(), sched.get_last_lr()[0]])
    xt = torch.tensor(arr(170, 5, 1, 6, 6))
    student.eval()
    with torch.inference_mode():
        s, t = student(xt), teacher(xt)
        agree = (s.argmax(-1) == t.argmax(-1)).float().mean()
    kd_log = nn.KLDivLoss(reduction="batchmean", log_target=True)(
        F.log_softmax(s, 1), F.log_softmax(t, 1)
    )
    return {"hist": hist, "student_out": s, "teacher_out": t, "agree": agree, "kd_log": kd_log,
            "student_params": params(student), "teacher_rm": teacher[1].running_mean}  # fmt: skip


@program
def test_time_augmentation_flips_rotations_multiscale(torch):
    nn, F = torch.nn, torch.nn.functional
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    model = set_weights(torch, nn.Sequential(
        nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(), nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        nn.Conv2d(5, 2, 1), nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)), seed=13).eval()  # fmt: skip
    img = torch.tensor(np.random.default_rng(180).random((2, 3, 8, 8)).astype(np.float32))
    x = (img - mean) / std

    @torch.no_grad()
    def tta(inp):
        preds = [model(inp), model(inp.flip(-1)).flip(-1), model(torch.flip(inp, dims=[2])).flip(2)]
        for k in (1, 2, 3):
            preds.append(torch.rot90(model(torch.rot90(inp, k, dims=(2, 3))), -k, dims=(2, 3)))
        return torch.stack(preds).softmax(dim=2).mean(0)

    probs = tta(x)
    scales = []
    for s in (0.75, 1.25):
        xs = F.interpolate(x, scale_factor=s, mode="bilinear", align_corners=False, antialias=False)
        out = model(xs)
        scales.append(F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False))
    ms = torch.stack(scales, 0).mean(0)
    crop = x[..., 1:-1, 2:-2]
    pooled = F.avg_pool2d(x, 3, stride=2, ceil_mode=True)
    return {"probs": probs, "mask": probs.argmax(1), "ms": ms, "crop_out": model(crop),
            "pooled": pooled, "pooled_shape": list(pooled.shape),
            "denorm_ok": torch.allclose(x * std + mean, img, atol=1e-6)}  # fmt: skip
