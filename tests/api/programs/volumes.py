"""Volumetric and video networks: a 3-d CNN clip classifier trained a few steps, a 3-d U-Net
down/up block with ``ConvTranspose3d``, 3-d pooling variants, and ``Conv3d`` options (strides,
dilation, groups, ``"same"`` padding, padding modes, transposed groups) with their errors."""

from __future__ import annotations

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def video_cnn3d_training(torch):
    nn = torch.nn

    class ClipNet(nn.Module):
        """Classifies short clips [N, C, T, H, W]: spatio-temporal then spatial-only kernels."""

        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv3d(2, 4, 3, padding=1, bias=False),
                nn.BatchNorm3d(4),
                nn.ReLU(),
                nn.MaxPool3d((1, 2, 2)),
                nn.Conv3d(4, 8, (1, 3, 3), padding=(0, 1, 1)),
                nn.ReLU(),
                nn.AdaptiveAvgPool3d(1),
            )
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            return self.head(torch.flatten(self.features(x), 1))

    model = set_weights(torch, ClipNet(), seed=60)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    clips = torch.tensor(arr(61, 4, 2, 4, 8, 8))
    labels = torch.tensor(ints(62, 3, 4))
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(clips), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    logits = model(torch.tensor(arr(63, 2, 2, 4, 8, 8)))
    bn = model.features[1]
    return {"losses": losses, "params": params(model), "logits": logits, "rm": bn.running_mean,
            "rv": bn.running_var, "repr": repr(model),
            "shapes": {n: list(p.shape) for n, p in model.named_parameters()}}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def unet3d_down_up_block(torch):
    nn = torch.nn

    class UNet3dBlock(nn.Module):
        """One level of a 3-d U-Net: conv, downsample, conv, learned upsample, skip, conv."""

        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU())
            self.down = nn.MaxPool3d(2)
            self.mid = nn.Sequential(nn.Conv3d(4, 8, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose3d(8, 4, 2, stride=2)
            self.dec = nn.Sequential(nn.Conv3d(8, 4, 3, padding=1), nn.ReLU(),
                                     nn.Conv3d(4, 2, 1))  # fmt: skip

        def forward(self, x):
            skip = self.enc(x)
            # output_size recovers the odd depth that the pooling rounded down.
            up = self.up(self.mid(self.down(skip)), output_size=skip.shape[2:])
            return self.dec(torch.cat([up, skip], 1))

    net = set_weights(torch, UNet3dBlock(), seed=64)
    vol = torch.tensor(arr(65, 2, 1, 5, 6, 6), requires_grad=True)
    seg = net(vol)
    target = torch.tensor(ints(66, 2, 2, 5, 6, 6))
    loss = nn.functional.cross_entropy(seg, target)
    loss.backward()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    opt.step()
    after = nn.functional.cross_entropy(net(vol), target)
    return {"seg": seg, "loss": loss, "after": after, "dvol": vol.grad, "grads": grads(net),
            "repr": repr(net)}  # fmt: skip


@program
def pooling3d_variants(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(67, 2, 3, 5, 7, 6), requires_grad=True)
    outs = {
        "max": F.max_pool3d(x, 2),
        "max_stride_pad": F.max_pool3d(x, 3, stride=2, padding=1),
        "max_ceil_dilated": F.max_pool3d(
            x, (2, 2, 3), stride=(1, 2, 2), dilation=(2, 1, 1), ceil_mode=True
        ),
        "avg": F.avg_pool3d(x, (1, 2, 3)),
        "avg_pad": F.avg_pool3d(x, 3, stride=2, padding=1),
        "avg_pad_excluded_ceil": F.avg_pool3d(
            x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
        ),
        "avg_divisor": F.avg_pool3d(x, 2, stride=1, divisor_override=5),
        "adaptive_avg": F.adaptive_avg_pool3d(x, (3, 4, 4)),
        "adaptive_avg_none": F.adaptive_avg_pool3d(x, (2, None, 3)),
        "adaptive_max": F.adaptive_max_pool3d(x, (2, 3, 4)),
        "global_avg": torch.nn.AdaptiveAvgPool3d(1)(x),
        "global_max": torch.nn.AdaptiveMaxPool3d((1, 1, 1))(x),
        "module_max": torch.nn.MaxPool3d(2, stride=1, padding=1)(x),
        "module_avg": torch.nn.AvgPool3d((2, 3, 2), ceil_mode=True)(x),
        "unbatched": F.max_pool3d(x[0], 2),
    }
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    mods = [torch.nn.MaxPool3d(2), torch.nn.AvgPool3d(3, stride=2, padding=1),
            torch.nn.AdaptiveAvgPool3d((2, None, 3)), torch.nn.AdaptiveMaxPool3d(1)]  # fmt: skip
    return {**outs, "dx": x.grad, "reprs": [repr(m) for m in mods]}


@program
def conv3d_options_and_errors(torch):
    nn, F = torch.nn, torch.nn.functional
    x = torch.tensor(arr(68, 2, 4, 5, 6, 5), requires_grad=True)
    w_g = torch.tensor(arr(69, 6, 2, 2, 3, 2), requires_grad=True)
    w_t = torch.tensor(arr(70, 4, 3, 3, 2, 3), requires_grad=True)
    b = torch.tensor(arr(71, 6), requires_grad=True)
    outs = {
        "strided_groups": F.conv3d(x, w_g, b, stride=(2, 1, 2), padding=(1, 0, 1), groups=2),
        "dilated": F.conv3d(x, w_g, dilation=(2, 1, 2), groups=2),
        "same": F.conv3d(x, w_g, padding="same", groups=2),
        "valid_unbatched": F.conv3d(x[1], w_g, padding="valid", groups=2),
        "transposed": F.conv_transpose3d(x, w_t, stride=2, padding=1, output_padding=(1, 0, 1)),
        "transposed_groups": F.conv_transpose3d(
            x, w_t[:, :2], stride=(1, 2, 1), groups=2, dilation=(1, 1, 2)
        ),
    }
    for i, mode in enumerate(("reflect", "replicate", "circular")):
        conv = set_weights(torch, nn.Conv3d(4, 3, 3, padding=(1, 2, 1), padding_mode=mode),
                           seed=72 + i)  # fmt: skip
        outs[mode] = conv(x)
    same_reflect = set_weights(torch, nn.Conv3d(4, 2, (2, 3, 2), padding="same",
                                                padding_mode="reflect"), seed=75)  # fmt: skip
    outs["same_reflect"] = same_reflect(x)
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    errors = {}
    for name, call in {
        "rank": lambda: F.conv3d(x[0, 0], w_g),
        "channels": lambda: F.conv3d(x, w_t),
        "transposed_channels": lambda: F.conv_transpose3d(x[:, :3], w_t),
    }.items():
        try:
            call()
            errors[name] = "no error"
        except RuntimeError as e:
            errors[name] = str(e).splitlines()[0]
    mods = [nn.Conv3d(4, 8, 3), nn.Conv3d(4, 8, (3, 1, 1), stride=2, padding=1, dilation=2,
                                          groups=2, bias=False, padding_mode="circular"),
            nn.Conv3d(4, 8, 3, padding="same"),
            nn.ConvTranspose3d(4, 8, 2, stride=2, output_padding=1, groups=2)]  # fmt: skip
    return {**outs, "dx": x.grad, "dw_g": w_g.grad, "dw_t": w_t.grad, "db": b.grad,
            "errors": errors, "reprs": [repr(m) for m in mods],
            "shapes": [list(p.shape) for m in mods for p in m.parameters()]}  # fmt: skip
