"""Convolutional networks: LeNet-style training, strides/dilations/groups, BatchNorm2d, pooling,
1-d text convolutions, transposed convolutions, upsampling, residual blocks, unfold/fold."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program
def conv2d_forward_backward(torch):
    x = torch.tensor(arr(1, 2, 3, 7, 6), requires_grad=True)
    conv = set_weights(torch, torch.nn.Conv2d(3, 4, kernel_size=3, padding=1), seed=2)
    y = conv(x)
    (y * torch.tensor(arr(3, *y.shape))).sum().backward()
    return {"y": y, "dx": x.grad, "grads": grads(conv)}


@program(rtol=5e-4, atol=5e-5)
def lenet_training(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 10))  # fmt: skip
    set_weights(torch, model, seed=4)
    x = torch.tensor(arr(5, 6, 1, 10, 10))
    y = torch.tensor(ints(6, 10, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(4):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}


@program
def conv_stride_dilation_groups(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(7, 2, 4, 9, 8), requires_grad=True)
    w_dw = torch.tensor(arr(8, 4, 1, 3, 3), requires_grad=True)
    w_g = torch.tensor(arr(9, 6, 2, 2, 3), requires_grad=True)
    b = torch.tensor(arr(10, 6), requires_grad=True)
    outs = {
        "depthwise": F.conv2d(x, w_dw, groups=4, padding=1),
        "strided": F.conv2d(x, w_g, b, stride=(2, 1), padding=(1, 0), groups=2),
        "dilated": F.conv2d(x, w_dw[:2].reshape(1, 2, 3, 3).repeat(3, 2, 1, 1)[:, :4], dilation=2),
        "same": F.conv2d(x, w_g, padding="same", groups=2),
    }
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    return {**outs, "dx": x.grad, "dw_dw": w_dw.grad, "dw_g": w_g.grad, "db": b.grad}


@program
def batchnorm2d_convnet_train_eval(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))  # fmt: skip
    set_weights(torch, model, seed=11)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(3):
        x = torch.tensor(arr(12 + i, 4, 2, 6, 6))
        loss = nn.functional.cross_entropy(model(x), torch.tensor(ints(20 + i, 2, 4)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    out = model(torch.tensor(arr(30, 3, 2, 6, 6)))
    bn = model[1]
    return {"out": out, "rm": bn.running_mean, "rv": bn.running_var, "n": bn.num_batches_tracked}


@program
def pooling_variants(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(31, 2, 3, 7, 9), requires_grad=True)
    outs = {
        "max": F.max_pool2d(x, 2),
        "max_stride_pad": F.max_pool2d(x, 3, stride=2, padding=1),
        "max_ceil": F.max_pool2d(x, 2, ceil_mode=True),
        "avg": F.avg_pool2d(x, (2, 3)),
        "avg_pad": F.avg_pool2d(x, 3, stride=2, padding=1),
        "avg_pad_excluded": F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        "adaptive_avg": F.adaptive_avg_pool2d(x, (3, 4)),
        "adaptive_max": F.adaptive_max_pool2d(x, 2),
        "global": torch.nn.AdaptiveAvgPool2d((1, 1))(x),
    }
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    return {**outs, "dx": x.grad}


@program
def text_cnn_conv1d(torch):
    nn = torch.nn

    class TextCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(30, 6)
            self.convs = nn.ModuleList([nn.Conv1d(6, 4, k) for k in (2, 3)])
            self.fc = nn.Linear(8, 2)

        def forward(self, t):
            e = self.emb(t).transpose(1, 2)
            pooled = [torch.relu(c(e)).max(dim=2).values for c in self.convs]
            return self.fc(torch.cat(pooled, 1))

    model = set_weights(torch, TextCNN(), seed=32)
    tokens = torch.tensor(ints(33, 30, 5, 9))
    loss = nn.functional.cross_entropy(model(tokens), torch.tensor(ints(34, 2, 5)))
    loss.backward()
    x = torch.tensor(arr(35, 2, 3, 11))
    extra = {"pool1d": nn.functional.max_pool1d(x, 3, stride=2), "avg1d": nn.AvgPool1d(2)(x),
             "adaptive1d": nn.functional.adaptive_avg_pool1d(x, 4),
             "strided": nn.functional.conv1d(x, torch.tensor(arr(36, 2, 3, 3)), stride=2, padding=1)}  # fmt: skip
    return {"loss": loss, "grads": grads(model), **extra}


@program
def conv_transpose_decoder(torch):
    nn = torch.nn
    dec = nn.Sequential(nn.ConvTranspose2d(4, 3, 2, stride=2), nn.ReLU(),
                        nn.ConvTranspose2d(3, 1, 3, stride=2, padding=1, output_padding=1),
                        nn.Sigmoid())  # fmt: skip
    set_weights(torch, dec, seed=37)
    z = torch.tensor(arr(38, 2, 4, 3, 3), requires_grad=True)
    img = dec(z)
    target = torch.tensor(np.random.default_rng(39).random(img.shape).astype(np.float32))
    loss = nn.functional.binary_cross_entropy(img, target)
    loss.backward()
    x1 = torch.tensor(arr(40, 1, 2, 5))
    t1 = nn.functional.conv_transpose1d(x1, torch.tensor(arr(41, 2, 3, 3)), stride=2)
    return {"img": img, "loss": loss, "dz": z.grad, "grads": grads(dec), "t1": t1}


@program
def upsampling_and_interpolate(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(42, 1, 2, 3, 4), requires_grad=True)
    outs = {
        "nearest2x": F.interpolate(x, scale_factor=2, mode="nearest"),
        "nearest_size": F.interpolate(x, size=(5, 7)),
        "bilinear": F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
        "bilinear_ac": F.interpolate(x, size=(6, 5), mode="bilinear", align_corners=True),
        "upsample_module": torch.nn.Upsample(scale_factor=2, mode="bilinear")(x),
        "linear1d": F.interpolate(x[:, :, 0], size=7, mode="linear"),
    }
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    return {**outs, "dx": x.grad}


@program(rtol=5e-4, atol=5e-5)
def residual_block_training(torch):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))  # fmt: skip

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + self.shortcut(x))

    block = set_weights(torch, BasicBlock(2, 4, 2), seed=43)
    opt = torch.optim.SGD(block.parameters(), lr=0.05, weight_decay=5e-4, momentum=0.9)
    x = torch.tensor(arr(44, 3, 2, 8, 8))
    for _ in range(3):
        loss = block(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"loss": loss, "params": params(block), "rv": block.bn2.running_var}


@program
def groupnorm_instancenorm_convs(torch):
    nn = torch.nn
    x = torch.tensor(arr(45, 2, 6, 5, 5), requires_grad=True)
    gn = set_weights(torch, nn.GroupNorm(3, 6), seed=46)
    inorm = nn.InstanceNorm2d(6, affine=True)
    set_weights(torch, inorm, seed=47)
    y1, y2 = gn(x), inorm(x)
    (y1 * torch.tensor(arr(48, 2, 6, 5, 5)) + y2.pow(3)).sum().backward()
    return {"gn": y1, "in": y2, "dx": x.grad, "gn_grads": grads(gn), "in_grads": grads(inorm)}


@program
def unfold_fold_patches(torch):
    F = torch.nn.functional
    img = torch.tensor(arr(49, 1, 2, 6, 6), requires_grad=True)
    patches = F.unfold(img, kernel_size=2, stride=2)
    tokens = patches.transpose(1, 2)
    rebuilt = F.fold(patches, output_size=(6, 6), kernel_size=2, stride=2)
    overlap = F.fold(F.unfold(img, 3, padding=1), (6, 6), 3, padding=1)
    (tokens.pow(2).sum() + overlap.sum()).backward()
    return {"tokens": tokens, "rebuilt_equal": bool(torch.equal(rebuilt, img)),
            "overlap": overlap, "dimg": img.grad}  # fmt: skip


@program
def padding_modes_then_conv(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(50, 1, 2, 4, 5), requires_grad=True)
    padded = {m: F.pad(x, (1, 2, 2, 1), mode=m) for m in ("reflect", "replicate", "circular")}
    padded["constant"] = F.pad(x, (1, 1, 0, 2), value=0.5)
    padded["crop"] = F.pad(x, (-1, 0, 0, -1))
    w = torch.tensor(arr(51, 3, 2, 3, 3))
    outs = {k: F.conv2d(v, w) for k, v in padded.items()}
    sum(o.sum() for o in outs.values()).backward()
    return {**padded, **{f"conv_{k}": v for k, v in outs.items()}, "dx": x.grad,
            "zeropad": torch.nn.ZeroPad2d((1, 0, 2, 0))(x)}  # fmt: skip
