"""Sampling and unpooling layers: a spatial transformer (``affine_grid`` + ``grid_sample``, a
localisation net trained a few steps), ``grid_sample`` in every mode and padding mode with its
gradients to the input and the grid (as optical-flow warping uses it), and a SegNet-style
encoder-decoder whose decoder unpools with the encoder's max-pool indices."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


@program
def spatial_transformer_training_steps(torch):
    nn, F = torch.nn, torch.nn.functional
    loc = set_weights(torch, nn.Sequential(nn.Flatten(), nn.Linear(36, 8), nn.Tanh(),
                                           nn.Linear(8, 6)), seed=41)  # fmt: skip
    head = set_weights(torch, nn.Linear(36, 3), seed=42)
    x = torch.tensor(arr(43, 4, 1, 6, 6))
    y = torch.tensor(np.array([0, 2, 1, 2]))
    opt = torch.optim.SGD(list(loc.parameters()) + list(head.parameters()), lr=0.1)
    losses = []
    for _ in range(3):
        theta = loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        warped = F.grid_sample(x, grid, align_corners=False)
        loss = F.cross_entropy(head(warped.flatten(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "grid": grid, "warped": warped, **grads(loc), **grads(head)}


@program(rtol=1e-4, atol=1e-5)
def grid_sample_modes_and_flow_warping(torch):
    F = torch.nn.functional
    img = torch.tensor(arr(51, 2, 3, 5, 7), requires_grad=True)
    flow = torch.tensor(arr(52, 2, 5, 7, 2, scale=0.3), requires_grad=True)
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, 5), torch.linspace(-1, 1, 7), indexing="ij")
    base = torch.stack([xs, ys], -1).unsqueeze(0)
    out = {}
    total = 0
    for mode in ("bilinear", "nearest"):
        for pad in ("zeros", "border", "reflection"):
            for ac in (False, True):
                warped = F.grid_sample(img, base + flow, mode=mode, padding_mode=pad,
                                       align_corners=ac)  # fmt: skip
                out[f"{mode}_{pad}_{ac}"] = warped
                total = total + (warped * torch.tensor(arr(53, *warped.shape))).sum()
    vol = torch.tensor(arr(54, 1, 2, 3, 4, 5), requires_grad=True)
    theta3 = torch.tensor(arr(55, 1, 3, 4, scale=0.5)) + torch.eye(3, 4)
    grid3 = F.affine_grid(theta3, (1, 2, 3, 4, 5), align_corners=True)
    sampled = F.grid_sample(vol, grid3, align_corners=True, padding_mode="border")
    total = total + sampled.pow(2).sum()
    total.backward()
    return {**out, "img_grad": img.grad, "flow_grad": flow.grad, "vol_grad": vol.grad,
            "sampled3d": sampled, "grid3": grid3}  # fmt: skip


@program
def segnet_style_pool_indices_and_unpool(torch):
    nn = torch.nn
    enc = set_weights(torch, nn.Conv2d(2, 4, 3, padding=1), seed=61)
    dec = set_weights(torch, nn.Conv2d(4, 2, 3, padding=1), seed=62)
    pool = nn.MaxPool2d(2, return_indices=True)
    unpool = nn.MaxUnpool2d(2)
    x = torch.tensor(arr(63, 2, 2, 7, 6))
    h = torch.relu(enc(x))
    p, idx = pool(h)
    up = unpool(p, idx, output_size=h.size())
    y = dec(up)
    loss = (y - x).pow(2).mean()
    loss.backward()
    o1, i1 = torch.nn.functional.max_pool1d(x[:, 0], 3, 2, padding=1, return_indices=True)
    u1 = torch.nn.functional.max_unpool1d(o1, i1, 3, 2, padding=1, output_size=x[:, 0].size())
    v = torch.tensor(arr(64, 1, 1, 4, 4, 4))
    o3, i3 = nn.MaxPool3d(2, stride=1, return_indices=True)(v)
    u3 = nn.MaxUnpool3d(2, stride=1)(o3, i3)
    return {"loss": loss, "indices": idx, "pooled": p, "unpooled": up, **grads(enc),
            **grads(dec), "i1": i1, "u1": u1, "i3": i3, "u3": u3,
            "repr": repr(unpool)}  # fmt: skip


@program
def adaptive_max_pooling_with_indices(torch):
    nn, F = torch.nn, torch.nn.functional
    x = torch.tensor(arr(71, 2, 3, 7, 5), requires_grad=True)
    x2 = x.detach().clone()
    x2[0, 0, :3, :3] = 9.0  # ties: the first maximum in row-major order
    out, idx = nn.AdaptiveMaxPool2d((3, 2), return_indices=True)(x)
    t_out, t_idx = F.adaptive_max_pool2d(x2, 4, return_indices=True)
    o1, i1 = F.adaptive_max_pool1d(x[:, 0], 3, return_indices=True)
    v = torch.tensor(arr(72, 1, 2, 5, 4, 3))
    o3, i3 = F.adaptive_max_pool3d(v, (2, 3, 2), return_indices=True)
    (out.sum() + o1.pow(2).sum()).backward()
    return {"out": out, "idx": idx, "tie_out": t_out, "tie_idx": t_idx, "o1": o1, "i1": i1,
            "o3": o3, "i3": i3, "x_grad": x.grad}  # fmt: skip
