"""Optical flow, stereo and dense correspondence as RAFT, PWC-Net, GMFlow, GwcNet / PSMNet /
RAFT-Stereo and the self-supervised flow and depth papers (UnFlow, DDFlow, UFlow, Monodepth)
compute them: all-pairs correlation volumes by matmul with an ``avg_pool2d`` pyramid and local
lookups by ``grid_sample`` on ``coords_grid + delta`` (``align_corners=True``); backward warping by
flow in normalised coordinates with validity masks; forward-backward occlusion checks and
forward-splatted range maps; RAFT's convex upsampling with ``unfold`` and a softmax over 9
neighbours; PWC-Net's local cost volume (shifted slices and ``unfold``) and coarse-to-fine
refinement; stereo cost volumes built by shifting along the width, 3-D regularisation and
soft-argmin disparity regression; census / ternary and SSIM + L1 photometric losses; edge-aware
first- and second-order smoothness; endpoint-error metrics and RAFT's sequence loss; an iterative
ConvGRU update block trained with AdamW + OneCycleLR; GMFlow's global matching with softmax and
flow propagation, and dual-softmax mutual-nearest-neighbour matching. Inputs are NumPy arrays from
fixed seeds; the losses are differentiated with respect to the flow (or disparity) and weights."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _smooth_image(seed: int, b: int, c: int, h: int, w: int) -> np.ndarray:
    """A smooth random image in [0, 1] (sums of a few sinusoids), so warps see structure."""
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    img = np.zeros((b, c, h, w))
    for _ in range(4):
        fx, fy, ph = rng.uniform(0.2, 0.9), rng.uniform(0.2, 0.9), rng.uniform(0, 2 * np.pi)
        amp = rng.uniform(0.2, 0.5, (b, c, 1, 1))
        img += amp * np.sin(fx * xx + fy * yy + ph)
    img = (img - img.min()) / (img.max() - img.min())
    return img.astype(np.float32)


# ------------------------------------------------------------------------------ shared RAFT bits


def _coords_grid(torch, batch, ht, wd):
    """RAFT's ``coords_grid``: (B, 2, H, W) pixel coordinates, x first."""
    coords = torch.meshgrid(torch.arange(ht), torch.arange(wd), indexing="ij")
    coords = torch.stack(coords[::-1], dim=0).float()
    return coords[None].repeat(batch, 1, 1, 1)


def _bilinear_sampler(torch, img, coords, mask=False):
    """RAFT's ``bilinear_sampler``: pixel coordinates (..., 2) -> ``grid_sample``."""
    F = torch.nn.functional
    H, W = img.shape[-2:]
    xgrid, ygrid = coords.split([1, 1], dim=-1)
    xgrid = 2 * xgrid / (W - 1) - 1
    if H > 1:  # RAFT-Stereo's 1-D volumes have a height of one
        ygrid = 2 * ygrid / (H - 1) - 1
    grid = torch.cat([xgrid, ygrid], dim=-1)
    img = F.grid_sample(img, grid, align_corners=True)
    if mask:
        mask = (xgrid > -1) & (ygrid > -1) & (xgrid < 1) & (ygrid < 1)
        return img, mask.float()
    return img


class _CorrBlock:
    """RAFT's all-pairs correlation with a pooled pyramid and a (2r+1)^2 lookup per level."""

    def __init__(self, torch, fmap1, fmap2, num_levels=2, radius=2):
        F = torch.nn.functional
        self.torch, self.num_levels, self.radius = torch, num_levels, radius
        self.corr_pyramid = []
        corr = self.corr(fmap1, fmap2)
        batch, h1, w1, dim, h2, w2 = corr.shape
        corr = corr.reshape(batch * h1 * w1, dim, h2, w2)
        self.corr_pyramid.append(corr)
        for _ in range(self.num_levels - 1):
            corr = F.avg_pool2d(corr, 2, stride=2)
            self.corr_pyramid.append(corr)

    def __call__(self, coords):
        torch = self.torch
        r = self.radius
        coords = coords.permute(0, 2, 3, 1)
        batch, h1, w1, _ = coords.shape
        out_pyramid = []
        for i in range(self.num_levels):
            corr = self.corr_pyramid[i]
            dx = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
            dy = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
            delta = torch.stack(torch.meshgrid(dy, dx, indexing="ij"), axis=-1)
            centroid_lvl = coords.reshape(batch * h1 * w1, 1, 1, 2) / 2**i
            delta_lvl = delta.view(1, 2 * r + 1, 2 * r + 1, 2)
            coords_lvl = centroid_lvl + delta_lvl
            corr = _bilinear_sampler(torch, corr, coords_lvl)
            corr = corr.view(batch, h1, w1, -1)
            out_pyramid.append(corr)
        out = torch.cat(out_pyramid, dim=-1)
        return out.permute(0, 3, 1, 2).contiguous().float()

    def corr(self, fmap1, fmap2):
        torch = self.torch
        batch, dim, ht, wd = fmap1.shape
        fmap1 = fmap1.view(batch, dim, ht * wd)
        fmap2 = fmap2.view(batch, dim, ht * wd)
        corr = torch.matmul(fmap1.transpose(1, 2), fmap2)
        corr = corr.view(batch, ht, wd, 1, ht, wd)
        return corr / torch.sqrt(torch.tensor(dim).float())


def _flow_warp(torch, x, flo, padding_mode="zeros"):
    """PWC-Net's ``warp``: sample ``x`` at ``grid + flo`` (normalised in place), masked where the
    sample falls (partly) outside the image."""
    F = torch.nn.functional
    B, C, H, W = x.size()
    xx = torch.arange(0, W).view(1, -1).repeat(H, 1)
    yy = torch.arange(0, H).view(-1, 1).repeat(1, W)
    xx = xx.view(1, 1, H, W).repeat(B, 1, 1, 1)
    yy = yy.view(1, 1, H, W).repeat(B, 1, 1, 1)
    grid = torch.cat((xx, yy), 1).float()
    vgrid = grid + flo
    vgrid[:, 0, :, :] = 2.0 * vgrid[:, 0, :, :].clone() / max(W - 1, 1) - 1.0
    vgrid[:, 1, :, :] = 2.0 * vgrid[:, 1, :, :].clone() / max(H - 1, 1) - 1.0
    vgrid = vgrid.permute(0, 2, 3, 1)
    output = F.grid_sample(x, vgrid, align_corners=True, padding_mode=padding_mode)
    mask = torch.ones(x.size(), device=x.device)
    mask = F.grid_sample(mask, vgrid, align_corners=True)
    mask[mask < 0.9999] = 0
    mask[mask > 0] = 1
    return output * mask, mask


# ------------------------------------------------------------------------------------- programs


@program
def raft_all_pairs_correlation_pyramid_and_lookup(torch):
    """RAFT's CorrBlock: the all-pairs volume ``fmap1^T fmap2 / sqrt(C)`` by matmul, a 3-level
    pyramid by ``avg_pool2d`` over the second image's dimensions, and a radius-2 lookup around
    ``coords_grid + flow`` by ``grid_sample`` (``align_corners=True``) at every level, with the
    validity mask of ``bilinear_sampler``; the gradient of a loss on the lookup with respect to
    both feature maps and the flow."""
    b, c, h, w = 1, 6, 8, 8
    fmap1 = torch.tensor(arr(1, b, c, h, w), requires_grad=True)
    fmap2 = torch.tensor(arr(2, b, c, h, w), requires_grad=True)
    flow = torch.tensor(arr(3, b, 2, h, w, scale=1.3), requires_grad=True)
    block = _CorrBlock(torch, fmap1, fmap2, num_levels=3, radius=2)
    coords0 = _coords_grid(torch, b, h, w)
    coords1 = coords0 + flow
    corr = block(coords1)
    weight = torch.tensor(arr(4, *corr.shape, scale=0.1))
    loss = (corr * weight).sum() + corr.pow(2).mean()
    loss.backward()
    sampled, valid = _bilinear_sampler(
        torch, fmap2, coords1.permute(0, 2, 3, 1).detach(), mask=True
    )
    return {"pyramid_shapes": [list(p.shape) for p in block.corr_pyramid],
            "pyramid_sums": torch.stack([p.sum() for p in block.corr_pyramid]),
            "level2": block.corr_pyramid[2][::7], "corr": corr, "loss": loss,
            "grad_fmap1": fmap1.grad, "grad_fmap2": fmap2.grad, "grad_flow": flow.grad,
            "sampled": sampled, "valid": valid, "valid_frac": valid.mean()}  # fmt: skip


@program
def pwcnet_warp_local_cost_volume_coarse_to_fine(torch):
    """PWC-Net: a feature pyramid by strided convolutions, the local cost volume (max
    displacement 2) written two ways (shifted slices of a padded map, and ``unfold``), the
    estimator at the coarse level, the flow upsampled by a ``ConvTranspose2d`` and by
    ``interpolate`` (and the deprecated ``upsample*`` spellings), the second image's features
    warped by it (the original ``warp`` with its ``Variable`` wrappers, in-place normalisation
    of the grid, mask by warping ones), the residual flow at the fine level and the multi-scale EPE
    loss; two Adam steps."""
    F = torch.nn.functional
    nn = torch.nn
    Variable = torch.autograd.Variable

    def warp(x, flo):
        """The original PWC-Net warp, with its ``Variable`` wrappers."""
        B, C, H, W = x.size()
        xx = torch.arange(0, W).view(1, -1).repeat(H, 1)
        yy = torch.arange(0, H).view(-1, 1).repeat(1, W)
        xx = xx.view(1, 1, H, W).repeat(B, 1, 1, 1)
        yy = yy.view(1, 1, H, W).repeat(B, 1, 1, 1)
        grid = torch.cat((xx, yy), 1).float()
        vgrid = Variable(grid) + flo
        vgrid[:, 0, :, :] = 2.0 * vgrid[:, 0, :, :].clone() / max(W - 1, 1) - 1.0
        vgrid[:, 1, :, :] = 2.0 * vgrid[:, 1, :, :].clone() / max(H - 1, 1) - 1.0
        vgrid = vgrid.permute(0, 2, 3, 1)
        output = F.grid_sample(x, vgrid, align_corners=True)
        mask = torch.autograd.Variable(torch.ones(x.size()))
        mask = F.grid_sample(mask, vgrid, align_corners=True)
        mask[mask < 0.9999] = 0
        mask[mask > 0] = 1
        return output * mask, mask

    def local_corr(f1, f2, md):
        B, C, H, W = f1.shape
        f2p = F.pad(f2, [md, md, md, md])
        costs = []
        for dy in range(2 * md + 1):
            for dx in range(2 * md + 1):
                costs.append((f1 * f2p[:, :, dy : dy + H, dx : dx + W]).mean(1, keepdim=True))
        return F.leaky_relu(torch.cat(costs, 1), 0.1)

    def local_corr_unfold(f1, f2, md):
        B, C, H, W = f1.shape
        k = 2 * md + 1
        patches = F.unfold(f2, kernel_size=k, padding=md).view(B, C, k * k, H, W)
        return F.leaky_relu((f1.unsqueeze(2) * patches).mean(1), 0.1)

    class PWCLite(nn.Module):
        def __init__(self, md=2):
            super().__init__()
            self.md = md
            nd = (2 * md + 1) ** 2
            self.conv1 = nn.Conv2d(3, 6, 3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(6, 8, 3, stride=2, padding=1)
            self.est2 = nn.Sequential(nn.Conv2d(nd, 8, 3, padding=1), nn.LeakyReLU(0.1),
                                      nn.Conv2d(8, 2, 3, padding=1))  # fmt: skip
            self.deconv2 = nn.ConvTranspose2d(2, 2, 4, 2, 1)
            self.est1 = nn.Sequential(nn.Conv2d(nd + 6 + 2, 8, 3, padding=1), nn.LeakyReLU(0.1),
                                      nn.Conv2d(8, 2, 3, padding=1))  # fmt: skip

        def forward(self, im1, im2):
            c11, c21 = F.leaky_relu(self.conv1(im1), 0.1), F.leaky_relu(self.conv1(im2), 0.1)
            c12, c22 = F.leaky_relu(self.conv2(c11), 0.1), F.leaky_relu(self.conv2(c21), 0.1)
            corr2 = local_corr(c12, c22, self.md)
            flow2 = self.est2(corr2)
            up_flow2 = self.deconv2(flow2)
            warp1, mask1 = warp(c21, up_flow2 * 2.0)
            corr1 = local_corr(c11, warp1, self.md)
            x = torch.cat((corr1, c11, up_flow2), 1)
            flow1 = up_flow2 + self.est1(x)
            return flow1, flow2, corr2, mask1

    im1 = torch.tensor(_smooth_image(10, 1, 3, 16, 16))
    im2 = torch.tensor(_smooth_image(11, 1, 3, 16, 16))
    target = torch.tensor(arr(12, 1, 2, 16, 16, scale=0.5))
    model = set_weights(torch, PWCLite(), seed=13)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    weights = [0.005, 0.01]
    losses = []
    for _ in range(2):
        opt.zero_grad()
        flow1, flow2, corr2, mask1 = model(im1, im2)
        loss = 0.0
        for wt, flo in zip(weights, (flow1, flow2)):
            tgt = F.interpolate(target, flo.shape[-2:], mode="area") * (flo.shape[-1] / 16)
            loss = loss + wt * torch.norm(flo - tgt, p=2, dim=1).sum()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    with torch.no_grad():
        c12 = F.leaky_relu(model.conv2(F.leaky_relu(model.conv1(im1), 0.1)), 0.1)
        c22 = F.leaky_relu(model.conv2(F.leaky_relu(model.conv1(im2), 0.1)), 0.1)
        slices, unfolded = local_corr(c12, c22, 2), local_corr_unfold(c12, c22, 2)
        up_bilinear = F.interpolate(flow2, scale_factor=2, mode="bilinear", align_corners=False)
        up_legacy = F.upsample_bilinear(flow2, scale_factor=2) * 2.0  # older flow code
        up_spynet = F.upsample(flow2, scale_factor=2, mode="bilinear", align_corners=True) * 2.0
        up_nearest = F.upsample_nearest(flow2, size=(8, 8))
    return {"losses": losses, "flow1": flow1, "flow2": flow2, "corr2": corr2, "mask1": mask1,
            "corr_slices": slices, "corr_unfold_diff": (slices - unfolded).abs().max(),
            "up_bilinear": up_bilinear, "up_legacy": up_legacy, "up_spynet": up_spynet,
            "up_nearest": up_nearest, "is_variable": isinstance(flow1, Variable),
            "grads": grads(model)}  # fmt: skip


@program
def raft_convex_upsampling_unfold_softmax(torch):
    """RAFT's ``upsample_flow``: a (N, 9*f*f, H, W) mask head reshaped to (N, 1, 9, f, f, H, W),
    a softmax over the 9 neighbours, the flow times f unfolded into its 3x3 neighbourhoods and the
    convex combination permuted into (N, 2, f*H, f*W); against ``upflow8`` (bilinear with
    ``align_corners=True``), and the gradients with respect to the flow and the mask head."""
    F = torch.nn.functional
    nn = torch.nn
    f = 4
    N, H, W = 2, 3, 4
    net = torch.tensor(arr(20, N, 8, H, W))
    flow = torch.tensor(arr(21, N, 2, H, W, scale=2.0), requires_grad=True)
    mask_head = set_weights(
        torch,
        nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True),
                      nn.Conv2d(16, 9 * f * f, 1, padding=0)),
        seed=22,
    )  # fmt: skip
    mask = 0.25 * mask_head(net)

    def upsample_flow(flow, mask):
        N, _, H, W = flow.shape
        mask = mask.view(N, 1, 9, f, f, H, W)
        mask = torch.softmax(mask, dim=2)
        up_flow = F.unfold(f * flow, [3, 3], padding=1)
        up_flow = up_flow.view(N, 2, 9, 1, 1, H, W)
        up_flow = torch.sum(mask * up_flow, dim=2)
        up_flow = up_flow.permute(0, 1, 4, 2, 5, 3)
        return up_flow.reshape(N, 2, f * H, f * W)

    def upflow(flow, mode="bilinear"):
        new_size = (f * flow.shape[2], f * flow.shape[3])
        return f * F.interpolate(flow, size=new_size, mode=mode, align_corners=True)

    up = upsample_flow(flow, mask)
    up_bilinear = upflow(flow)
    target = torch.tensor(arr(23, N, 2, f * H, f * W, scale=3.0))
    loss = (up - target).abs().mean() + 0.1 * (up_bilinear - target).abs().mean()
    loss.backward()
    uniform = upsample_flow(flow.detach(), torch.zeros(N, 9 * f * f, H, W))
    return {"up": up, "up_bilinear": up_bilinear, "loss": loss, "grad_flow": flow.grad,
            "uniform_mask_up": uniform, "grads": grads(mask_head),
            "corner_weights": torch.softmax(mask.view(N, 1, 9, f, f, H, W), 2)[0, 0, :, 0, 0]}  # fmt: skip


@program
def forward_backward_occlusion_and_range_map(torch):
    """Occlusion reasoning of UnFlow / DDFlow / ARFlow: the backward flow warped by the forward
    flow, the forward-backward consistency test ``|fw + bw_w|^2 > a (|fw|^2 + |bw_w|^2) + b``,
    a range map by forward-splatting bilinear weights with ``scatter_add_`` (occluded where
    nothing lands), the occlusion-masked Charbonnier photometric loss and its gradient with
    respect to the forward flow."""
    B, H, W = 2, 7, 9
    rng = np.random.default_rng(30)
    base = rng.standard_normal((B, 2, 1, 1)).astype(np.float32) * 1.2
    fw_np = base + 0.3 * arr(31, B, 2, H, W)
    bw_np = -base + 0.3 * arr(32, B, 2, H, W)
    bw_np[:, :, 2:4, 3:6] += 3.0 * arr(33, B, 2, 2, 3)  # a region that disagrees
    flow_fw = torch.tensor(fw_np, requires_grad=True)
    flow_bw = torch.tensor(bw_np)
    im1 = torch.tensor(_smooth_image(34, B, 3, H, W))
    im2 = torch.tensor(_smooth_image(35, B, 3, H, W))

    def length_sq(x):
        return torch.sum(torch.square(x), dim=1, keepdim=True)

    bw_warped, _ = _flow_warp(torch, flow_bw, flow_fw.detach(), padding_mode="border")
    flow_diff_fw = flow_fw.detach() + bw_warped
    mag_sq_fw = length_sq(flow_fw.detach()) + length_sq(bw_warped)
    occ_thresh_fw = 0.01 * mag_sq_fw + 0.5
    fb_occ_fw = (length_sq(flow_diff_fw) > occ_thresh_fw).float()

    def range_map(flow):
        b, _, h, w = flow.shape
        grid = _coords_grid(torch, b, h, w)
        pos = grid + flow
        x, y = pos[:, 0].reshape(b, -1), pos[:, 1].reshape(b, -1)
        x0, y0 = torch.floor(x), torch.floor(y)
        x1, y1 = x0 + 1, y0 + 1
        out = torch.zeros(b, h * w)
        for xi, yi, wt in ((x0, y0, (x1 - x) * (y1 - y)), (x1, y0, (x - x0) * (y1 - y)),
                           (x0, y1, (x1 - x) * (y - y0)), (x1, y1, (x - x0) * (y - y0))):  # fmt: skip
            valid = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
            idx = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long()
            out.scatter_add_(1, idx, wt * valid.float())
        return out.view(b, 1, h, w)

    rmap = range_map(flow_bw)
    range_occ = 1.0 - rmap.clamp(0, 1)
    noc = 1.0 - fb_occ_fw
    im2_warped, valid = _flow_warp(torch, im2, flow_fw)
    diff = im1 - im2_warped
    charb = (diff**2 + 0.001**2) ** 0.45
    loss = (charb * noc).sum() / (noc.sum() * 3 + 1e-6)
    loss.backward()
    return {"bw_warped": bw_warped, "fb_occ": fb_occ_fw.bool(), "occ_ratio": fb_occ_fw.mean(),
            "range_map": rmap, "range_occ": range_occ, "valid": valid, "loss": loss,
            "grad_flow_fw": flow_fw.grad}  # fmt: skip


@program
def stereo_cost_volumes_concat_groupwise_difference_and_1d_corr(torch):
    """Stereo cost volumes as the stereo networks build them: PSMNet's concatenation volume and
    GwcNet's group-wise correlation volume filled by disparity with ``new_zeros`` and slices
    shifted along the width, StereoNet's difference volume by ``F.pad`` on the left, and
    RAFT-Stereo's 1-D correlation (``einsum``), its width-only ``avg_pool2d`` pyramid and a 1-D
    ``grid_sample`` lookup; gradients of a loss on all of them."""
    F = torch.nn.functional
    B, C, H, W, D = 1, 8, 4, 10, 5
    num_groups = 4
    ref = torch.tensor(arr(40, B, C, H, W), requires_grad=True)
    tgt = torch.tensor(arr(41, B, C, H, W), requires_grad=True)

    def build_concat_volume(refimg_fea, targetimg_fea, maxdisp):
        B, C, H, W = refimg_fea.shape
        volume = refimg_fea.new_zeros([B, 2 * C, maxdisp, H, W])
        for i in range(maxdisp):
            if i > 0:
                volume[:, :C, i, :, i:] = refimg_fea[:, :, :, i:]
                volume[:, C:, i, :, i:] = targetimg_fea[:, :, :, :-i]
            else:
                volume[:, :C, i, :, :] = refimg_fea
                volume[:, C:, i, :, :] = targetimg_fea
        return volume.contiguous()

    def groupwise_correlation(fea1, fea2, num_groups):
        B, C, H, W = fea1.shape
        channels_per_group = C // num_groups
        cost = (fea1 * fea2).view([B, num_groups, channels_per_group, H, W]).mean(dim=2)
        return cost

    def build_gwc_volume(refimg_fea, targetimg_fea, maxdisp, num_groups):
        B, C, H, W = refimg_fea.shape
        volume = refimg_fea.new_zeros([B, num_groups, maxdisp, H, W])
        for i in range(maxdisp):
            if i > 0:
                volume[:, :, i, :, i:] = groupwise_correlation(
                    refimg_fea[:, :, :, i:], targetimg_fea[:, :, :, :-i], num_groups
                )
            else:
                volume[:, :, i, :, :] = groupwise_correlation(refimg_fea, targetimg_fea, num_groups)
        return volume.contiguous()

    def difference_volume(left, right, maxdisp):
        costs = []
        for d in range(maxdisp):
            shifted = F.pad(right, (d, 0, 0, 0))[..., :W]
            costs.append(torch.norm(left - shifted, p=1, dim=1))
        return torch.stack(costs, dim=1)

    concat = build_concat_volume(ref, tgt, D)
    gwc = build_gwc_volume(ref, tgt, D, num_groups)
    diff = difference_volume(ref, tgt, D)

    # RAFT-Stereo: CorrBlock1D
    corr1d = torch.einsum("aijk,aijh->ajkh", ref, tgt) / math.sqrt(C)
    corr1d = corr1d.reshape(B * H * W, 1, 1, W)
    pyramid = [corr1d]
    for _ in range(2):
        pyramid.append(F.avg_pool2d(pyramid[-1], [1, 2], stride=[1, 2]))
    disp = torch.tensor(_uniform(42, B, 1, H, W, low=0.2, high=4.3))
    coords = _coords_grid(torch, B, H, W)[:, :1] - disp
    coords = coords.permute(0, 2, 3, 1)
    r = 2
    out = []
    for i, corr in enumerate(pyramid):
        dx = torch.linspace(-r, r, 2 * r + 1).view(1, 1, 2 * r + 1, 1)
        x0 = dx + coords.reshape(B * H * W, 1, 1, 1) / 2**i
        y0 = torch.zeros_like(x0)
        coords_lvl = torch.cat([x0, y0], dim=-1)
        out.append(_bilinear_sampler(torch, corr, coords_lvl).view(B, H, W, -1))
    lookup = torch.cat(out, dim=-1).permute(0, 3, 1, 2).contiguous()

    loss = concat.pow(2).mean() + gwc.sum() * 0.1 + diff.mean() + lookup.abs().mean()
    loss.backward()
    return {"concat": concat[:, ::3], "concat_zero_frac": (concat == 0).float().mean(),
            "gwc": gwc, "diff": diff, "pyramid_last": pyramid[-1][::5],
            "pyramid_shapes": [list(p.shape) for p in pyramid], "lookup": lookup, "loss": loss,
            "grad_ref": ref.grad, "grad_tgt": tgt.grad}  # fmt: skip


@program
def gcnet_soft_argmin_disparity_regression_training(torch):
    """A GC-Net / PSMNet style stereo network trained for three Adam steps: shared 2-D features,
    a concatenation cost volume at half resolution, 3-D convolutions with BatchNorm3d, the cost upsampled with trilinear ``interpolate``, PSMNet's ``disparityregression``
    (softmax over negated costs times a disparity buffer), and the smooth-L1 loss on valid
    ground-truth pixels (``mask = gt < maxdisp``)."""
    F = torch.nn.functional
    nn = torch.nn
    maxdisp = 8

    class DisparityRegression(nn.Module):
        def __init__(self, maxdisp):
            super().__init__()
            self.register_buffer(
                "disp", torch.arange(maxdisp, dtype=torch.float32).view(1, maxdisp, 1, 1)
            )

        def forward(self, x):
            return torch.sum(x * self.disp.data, 1, keepdim=False)

    class StereoLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.feature = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.ReLU(),
                                         nn.Conv2d(4, 4, 3, 1, 1))  # fmt: skip
            self.dres = nn.Sequential(nn.Conv3d(8, 4, 3, 1, 1, bias=False), nn.BatchNorm3d(4),
                                      nn.ReLU(inplace=True), nn.Conv3d(4, 1, 3, 1, 1, bias=False))  # fmt: skip
            self.regression = DisparityRegression(maxdisp)

        def forward(self, left, right):
            fl, fr = self.feature(left), self.feature(right)
            B, C, H, W = fl.shape
            d4 = maxdisp // 2
            cost = fl.new_zeros(B, 2 * C, d4, H, W)
            for i in range(d4):
                if i > 0:
                    cost[:, :C, i, :, i:] = fl[:, :, :, i:]
                    cost[:, C:, i, :, i:] = fr[:, :, :, :-i]
                else:
                    cost[:, :C, i, :, :] = fl
                    cost[:, C:, i, :, :] = fr
            cost = self.dres(cost.contiguous())
            cost = F.interpolate(cost, [maxdisp, left.size(2), left.size(3)], mode="trilinear",
                                 align_corners=False)  # fmt: skip
            cost = torch.squeeze(cost, 1)
            pred = F.softmax(-cost, dim=1)
            return self.regression(pred), pred

    left = torch.tensor(_smooth_image(50, 2, 3, 8, 12))
    right = torch.tensor(_smooth_image(51, 2, 3, 8, 12))
    gt = torch.tensor(_uniform(52, 2, 8, 12, low=0.0, high=9.5))
    model = set_weights(torch, StereoLite(), seed=53)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.999))
    mask = gt < maxdisp
    mask.detach_()
    losses = []
    for _ in range(3):
        opt.zero_grad()
        disp, prob = model(left, right)
        loss = F.smooth_l1_loss(disp[mask], gt[mask], reduction="mean")
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        disp_eval, prob_eval = model(left, right)
    return {"losses": losses, "disp": disp, "prob_sum": prob.sum(1), "disp_eval": disp_eval,
            "entropy": -(prob_eval * torch.log(prob_eval + 1e-8)).sum(1).mean(),
            "mask_count": mask.sum(), "grads": grads(model),
            "running_mean": model.dres[1].running_mean, "running_var": model.dres[1].running_var}  # fmt: skip


@program
def census_ternary_and_hamming_losses(torch):
    """The census transform as UnFlow / DDFlow / ARFlow write it: 7x7 patches by a ``conv2d``
    with an identity kernel, the soft ternary transform ``t / sqrt(0.81 + t^2)``, the normalised
    squared distance summed over the patch and masked at the border; the hard census bit vector
    and its Hamming distance; the robust (|x| + eps)^q loss of the warped second image and its
    gradient with respect to the flow."""
    F = torch.nn.functional
    B, H, W = 1, 10, 11
    im1 = torch.tensor(_smooth_image(60, B, 3, H, W))
    im2 = torch.tensor(_smooth_image(61, B, 3, H, W))
    flow = torch.tensor(arr(62, B, 2, H, W, scale=0.8), requires_grad=True)

    def rgb_to_grayscale(image):
        return (0.2989 * image[:, 0:1] + 0.5870 * image[:, 1:2] + 0.1140 * image[:, 2:3]) * 255

    def ternary_transform(image, patch_size=7):
        intensities = rgb_to_grayscale(image)
        out_channels = patch_size * patch_size
        w = torch.eye(out_channels).view((out_channels, 1, patch_size, patch_size))
        weights = w.type_as(image)
        patches = F.conv2d(intensities, weights, padding=patch_size // 2)
        transf = patches - intensities
        return transf / torch.sqrt(0.81 + torch.pow(transf, 2))

    def hamming_distance(t1, t2):
        dist = torch.pow(t1 - t2, 2)
        dist_norm = dist / (0.1 + dist)
        return torch.sum(dist_norm, 1, keepdim=True)

    def create_mask(tensor, paddings):
        shape = tensor.shape
        inner_width = shape[3] - (paddings[1][0] + paddings[1][1])
        inner_height = shape[2] - (paddings[0][0] + paddings[0][1])
        inner = torch.ones((inner_height, inner_width)).type_as(tensor)
        mask2d = F.pad(inner, [paddings[1][0], paddings[1][1], paddings[0][0], paddings[0][1]])
        mask3d = mask2d.unsqueeze(0).repeat(shape[0], 1, 1)
        return mask3d.unsqueeze(1).detach()

    def census_loss(img1, img2_warp, max_distance=3):
        patch_size = 2 * max_distance + 1
        t1 = ternary_transform(img1, patch_size)
        t2 = ternary_transform(img2_warp, patch_size)
        dist = hamming_distance(t1, t2)
        pad = [[max_distance, max_distance], [max_distance, max_distance]]
        return dist * create_mask(img1, pad)

    def hard_census(image, r=2):
        gray = rgb_to_grayscale(image)
        k = 2 * r + 1
        patches = F.unfold(F.pad(gray, [r] * 4, mode="replicate"), k).view(B, k * k, H, W)
        return patches > gray

    img2_warp, _ = _flow_warp(torch, im2, flow)
    cl = census_loss(im1, img2_warp)
    q, eps = 0.4, 0.01
    loss = ((cl.abs() + eps) ** q).mean()
    loss.backward()
    bits1, bits2 = hard_census(im1), hard_census(im2)
    hamming = (bits1 ^ bits2).sum(1)
    return {"census": cl, "loss": loss, "grad_flow": flow.grad,
            "bits_sum": bits1.sum((2, 3)), "hamming": hamming,
            "ternary_10": ternary_transform(im1)[:, 10]}  # fmt: skip


@program
def monodepth_ssim_l1_photometric_and_left_right_consistency(torch):
    """Monodepth / Monodepth2 photometric losses for a rectified stereo pair: the ``SSIM`` module
    (``ReflectionPad2d`` + ``AvgPool2d(3, 1)`` statistics, ``clamp((1 - n/d) / 2, 0, 1)``),
    ``0.85 * SSIM + 0.15 * L1``, images warped along the width by a disparity (``grid_sample``
    on a ``linspace`` mesh, ``padding_mode='zeros'`` / ``'border'``), the per-pixel minimum
    over sources with auto-masking by identity reprojection, the left-right disparity
    consistency term; three Adam steps on a log-disparity map."""
    F = torch.nn.functional
    nn = torch.nn

    class SSIM(nn.Module):
        def __init__(self):
            super().__init__()
            self.mu_x_pool = nn.AvgPool2d(3, 1)
            self.mu_y_pool = nn.AvgPool2d(3, 1)
            self.sig_x_pool = nn.AvgPool2d(3, 1)
            self.sig_y_pool = nn.AvgPool2d(3, 1)
            self.sig_xy_pool = nn.AvgPool2d(3, 1)
            self.refl = nn.ReflectionPad2d(1)
            self.C1 = 0.01**2
            self.C2 = 0.03**2

        def forward(self, x, y):
            x = self.refl(x)
            y = self.refl(y)
            mu_x = self.mu_x_pool(x)
            mu_y = self.mu_y_pool(y)
            sigma_x = self.sig_x_pool(x**2) - mu_x**2
            sigma_y = self.sig_y_pool(y**2) - mu_y**2
            sigma_xy = self.sig_xy_pool(x * y) - mu_x * mu_y
            SSIM_n = (2 * mu_x * mu_y + self.C1) * (2 * sigma_xy + self.C2)
            SSIM_d = (mu_x**2 + mu_y**2 + self.C1) * (sigma_x + sigma_y + self.C2)
            return torch.clamp((1 - SSIM_n / SSIM_d) / 2, 0, 1)

    ssim = SSIM()

    def compute_reprojection_loss(pred, target):
        abs_diff = torch.abs(target - pred)
        l1_loss = abs_diff.mean(1, True)
        ssim_loss = ssim(pred, target).mean(1, True)
        return 0.85 * ssim_loss + 0.15 * l1_loss

    def apply_disparity(img, disp, padding_mode="zeros"):
        batch_size, _, height, width = img.size()
        x_base = torch.linspace(0, 1, width).repeat(batch_size, height, 1).type_as(img)
        y_base = (torch.linspace(0, 1, height).repeat(batch_size, width, 1)
                  .transpose(1, 2).type_as(img))  # fmt: skip
        x_shifts = disp[:, 0, :, :]
        flow_field = torch.stack((x_base + x_shifts, y_base), dim=3)
        return F.grid_sample(img, 2 * flow_field - 1, mode="bilinear",
                             padding_mode=padding_mode, align_corners=True)  # fmt: skip

    B, H, W = 2, 8, 12
    left = torch.tensor(_smooth_image(70, B, 3, H, W))
    right = torch.tensor(
        np.roll(_smooth_image(70, B, 3, H, W), -2, axis=3) * 0.9 + 0.05 * _uniform(71, B, 3, H, W)
    )
    prev = torch.tensor(_smooth_image(72, B, 3, H, W))
    log_disp = torch.tensor(np.full((B, 2, H, W), math.log(0.1), np.float32)
                            + arr(73, B, 2, H, W, scale=0.3), requires_grad=True)  # fmt: skip
    opt = torch.optim.Adam([log_disp], lr=0.05)
    losses, masks = [], []
    for _ in range(3):
        opt.zero_grad()
        disp = torch.exp(log_disp).clamp(max=0.4)
        disp_l, disp_r = disp[:, 0:1], disp[:, 1:2]
        left_est = apply_disparity(right, -disp_l)
        right_est = apply_disparity(left, disp_r, padding_mode="border")
        reproj = torch.cat([compute_reprojection_loss(left_est, left),
                            compute_reprojection_loss(prev, left)], 1)  # fmt: skip
        identity = compute_reprojection_loss(right, left)
        identity = identity + torch.tensor(arr(74, B, 1, H, W, scale=1e-5))
        combined = torch.cat((identity, reproj), dim=1)
        to_optimise, idxs = torch.min(combined, dim=1)
        automask = (idxs > identity.shape[1] - 1).float()
        r_to_l = apply_disparity(disp_r, -disp_l)
        l_to_r = apply_disparity(disp_l, disp_r)
        lr_loss = torch.mean(torch.abs(r_to_l - disp_l)) + torch.mean(torch.abs(l_to_r - disp_r))
        right_loss = compute_reprojection_loss(right_est, right).mean()
        loss = to_optimise.mean() + right_loss + 1.0 * lr_loss
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        masks.append(automask.mean())
    return {"losses": losses, "automask_frac": masks, "log_disp": log_disp, "idxs": idxs,
            "left_est": left_est, "ssim_map": ssim(left_est, left),
            "grad_log_disp": log_disp.grad}  # fmt: skip


@program
def edge_aware_first_and_second_order_smoothness(torch):
    """Smoothness regularisers of self-supervised flow and depth: Monodepth2's
    ``get_smooth_loss`` on the mean-normalised disparity (``|grad d| * exp(-mean |grad I|)``),
    UFlow's first- and second-order edge-weighted flow smoothness (``exp(-mean(|w * grad I|))``
    with edge constant 150, gradients by slicing), and the gradients with respect to the
    disparity and the flow; a few SGD steps of smoothing a noisy flow."""
    B, H, W = 2, 7, 8
    img = torch.tensor(_smooth_image(80, B, 3, H, W))
    disp = torch.tensor(_uniform(81, B, 1, H, W, low=0.05, high=1.0), requires_grad=True)
    flow = torch.tensor(arr(82, B, 2, H, W), requires_grad=True)

    def get_smooth_loss(disp, img):
        grad_disp_x = torch.abs(disp[:, :, :, :-1] - disp[:, :, :, 1:])
        grad_disp_y = torch.abs(disp[:, :, :-1, :] - disp[:, :, 1:, :])
        grad_img_x = torch.mean(torch.abs(img[:, :, :, :-1] - img[:, :, :, 1:]), 1, keepdim=True)
        grad_img_y = torch.mean(torch.abs(img[:, :, :-1, :] - img[:, :, 1:, :]), 1, keepdim=True)
        grad_disp_x *= torch.exp(-grad_img_x)
        grad_disp_y *= torch.exp(-grad_img_y)
        return grad_disp_x.mean() + grad_disp_y.mean()

    def image_grads(image_batch, stride=1):
        image_batch_gh = image_batch[:, :, stride:] - image_batch[:, :, :-stride]
        image_batch_gw = image_batch[:, :, :, stride:] - image_batch[:, :, :, :-stride]
        return image_batch_gh, image_batch_gw

    def edge_weighting_fn(x):
        return torch.exp(-torch.mean(torch.abs(150.0 * x), dim=1, keepdim=True))

    def robust_l1(x):
        return (x**2 + 0.001**2) ** 0.5

    def first_order_smoothness(flow, image):
        img_gx, img_gy = image_grads(image)
        weights_x, weights_y = edge_weighting_fn(img_gx), edge_weighting_fn(img_gy)
        flow_gx, flow_gy = image_grads(flow)
        return (torch.mean(weights_x * robust_l1(flow_gx))
                + torch.mean(weights_y * robust_l1(flow_gy))) / 2.0  # fmt: skip

    def second_order_smoothness(flow, image):
        img_gx, img_gy = image_grads(image, stride=2)
        weights_xx, weights_yy = edge_weighting_fn(img_gx), edge_weighting_fn(img_gy)
        flow_gx, flow_gy = image_grads(flow)
        flow_gxx, _ = image_grads(flow_gx)
        _, flow_gyy = image_grads(flow_gy)
        return (torch.mean(weights_xx * robust_l1(flow_gxx))
                + torch.mean(weights_yy * robust_l1(flow_gyy))) / 2.0  # fmt: skip

    mean_disp = disp.mean(2, True).mean(3, True)
    norm_disp = disp / (mean_disp + 1e-7)
    smooth = get_smooth_loss(norm_disp, img)
    first = first_order_smoothness(flow, img)
    second = second_order_smoothness(flow, img)
    total = 1e-3 * smooth + 4.0 * first + 2.0 * second
    total.backward()
    grad_disp, grad_flow = disp.grad.clone(), flow.grad.clone()

    flow_opt = flow.detach().clone().requires_grad_(True)
    opt = torch.optim.SGD([flow_opt], lr=0.5, momentum=0.9)
    steps = []
    for _ in range(4):
        opt.zero_grad()
        loss = first_order_smoothness(flow_opt, img) + (flow_opt - flow.detach()).pow(2).mean()
        loss.backward()
        opt.step()
        steps.append(loss.item())
    return {"smooth": smooth, "first": first, "second": second, "total": total,
            "grad_disp": grad_disp, "grad_flow": grad_flow, "steps": steps,
            "weights_x": edge_weighting_fn(image_grads(img)[1]), "flow_opt": flow_opt}  # fmt: skip


@program
def endpoint_error_metrics_and_raft_sequence_loss(torch):
    """Evaluation and supervision of flow: RAFT's ``sequence_loss`` (exponentially weighted L1
    over the iterations' predictions, valid where ``valid >= 0.5`` and ``|gt| < max_flow``) and
    its metrics (EPE over valid pixels by boolean indexing, 1/3/5-px accuracy), KITTI's
    Fl-all outlier rate (``epe > 3`` and ``epe / mag > 0.05``), EPE on occluded and
    non-occluded pixels, the average angular error, a per-sequence summary printed with
    f-strings, and the gradient of the loss with respect to each prediction."""
    B, H, W = 2, 6, 7
    flow_gt = torch.tensor(arr(90, B, 2, H, W, scale=4.0))
    flow_gt[0, :, 0, 0] = 500.0  # beyond max_flow
    valid = torch.tensor(_uniform(91, B, H, W))
    occ = torch.tensor(_uniform(92, B, H, W) > 0.7)
    preds = [torch.tensor(arr(93 + i, B, 2, H, W, scale=3.0 / (i + 1) ** 0.5) + arr(90, B, 2, H, W, scale=4.0) * (i / 3.0),
                          requires_grad=True) for i in range(4)]  # fmt: skip
    gamma, max_flow = 0.8, 400

    def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8, max_flow=400):
        n_predictions = len(flow_preds)
        flow_loss = 0.0
        mag = torch.sum(flow_gt**2, dim=1).sqrt()
        valid = (valid >= 0.5) & (mag < max_flow)
        for i in range(n_predictions):
            i_weight = gamma ** (n_predictions - i - 1)
            i_loss = (flow_preds[i] - flow_gt).abs()
            flow_loss += i_weight * (valid[:, None] * i_loss).mean()
        epe = torch.sum((flow_preds[-1] - flow_gt) ** 2, dim=1).sqrt()
        epe = epe.view(-1)[valid.view(-1)]
        metrics = {
            "epe": epe.mean().item(),
            "1px": (epe < 1).float().mean().item(),
            "3px": (epe < 3).float().mean().item(),
            "5px": (epe < 5).float().mean().item(),
        }
        return flow_loss, metrics

    loss, metrics = sequence_loss(preds, flow_gt, valid, gamma, max_flow)
    loss.backward()

    with torch.no_grad():
        pred = preds[-1]
        epe = torch.sum((pred - flow_gt) ** 2, dim=1).sqrt()
        mag = torch.sum(flow_gt**2, dim=1).sqrt()
        val = valid >= 0.5
        out = ((epe > 3.0) & ((epe / mag) > 0.05)).float()
        fl_all = 100 * out[val].mean()
        epe_noc = epe[val & ~occ].mean()
        epe_occ = epe[val & occ].mean()
        u, v = pred[:, 0], pred[:, 1]
        ug, vg = flow_gt[:, 0], flow_gt[:, 1]
        cos = (1.0 + u * ug + v * vg) / (
            torch.sqrt(1.0 + u**2 + v**2) * torch.sqrt(1.0 + ug**2 + vg**2)
        )
        aae = torch.rad2deg(torch.acos(cos.clamp(-1.0, 1.0))).mean()
        per_image = [epe[b][val[b]].mean() for b in range(B)]
    summary = ", ".join(f"{k}: {v:.3f}" for k, v in metrics.items())
    return {"loss": loss, "metrics": metrics, "fl_all": fl_all, "epe_noc": epe_noc,
            "epe_occ": epe_occ, "aae": aae, "per_image": per_image, "summary": summary,
            "pred_grads": [p.grad for p in preds], "valid_count": val.sum()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # three GRU iterations and two AdamW steps compound float32 rounding
def raft_convgru_iterative_refinement_training(torch):
    """RAFT's small update loop: a context encoder split into ``tanh`` hidden state and ``relu``
    input, a motion encoder on the correlation lookup and the flow, a ConvGRU (``z``, ``r``,
    ``q`` convolutions on ``cat([h, x])``), a flow head, ``coords1 = coords1.detach()`` each
    iteration, ``upflow``-free predictions at 1/1, the sequence loss, ``clip_grad_norm_``, AdamW
    with OneCycleLR (``pct_start=0.05``, ``anneal_strategy='linear'``) for two steps."""
    F = torch.nn.functional
    nn = torch.nn
    hdim, cdim, radius, levels = 8, 8, 1, 2
    cor_planes = levels * (2 * radius + 1) ** 2

    class ConvGRU(nn.Module):
        def __init__(self, hidden_dim, input_dim):
            super().__init__()
            self.convz = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)
            self.convr = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)
            self.convq = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)

        def forward(self, h, x):
            hx = torch.cat([h, x], dim=1)
            z = torch.sigmoid(self.convz(hx))
            r = torch.sigmoid(self.convr(hx))
            q = torch.tanh(self.convq(torch.cat([r * h, x], dim=1)))
            h = (1 - z) * h + z * q
            return h

    class SmallMotionEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.convc1 = nn.Conv2d(cor_planes, 8, 1, padding=0)
            self.convf1 = nn.Conv2d(2, 8, 7, padding=3)
            self.convf2 = nn.Conv2d(8, 4, 3, padding=1)
            self.conv = nn.Conv2d(12, 6, 3, padding=1)

        def forward(self, flow, corr):
            cor = F.relu(self.convc1(corr))
            flo = F.relu(self.convf1(flow))
            flo = F.relu(self.convf2(flo))
            cor_flo = torch.cat([cor, flo], dim=1)
            out = F.relu(self.conv(cor_flo))
            return torch.cat([out, flow], dim=1)

    class FlowHead(nn.Module):
        def __init__(self, input_dim, hidden_dim):
            super().__init__()
            self.conv1 = nn.Conv2d(input_dim, hidden_dim, 3, padding=1)
            self.conv2 = nn.Conv2d(hidden_dim, 2, 3, padding=1)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.conv2(self.relu(self.conv1(x)))

    class SmallUpdateBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = SmallMotionEncoder()
            self.gru = ConvGRU(hidden_dim=hdim, input_dim=cdim + 8)
            self.flow_head = FlowHead(hdim, hidden_dim=16)

        def forward(self, net, inp, corr, flow):
            motion_features = self.encoder(flow, corr)
            inp = torch.cat([inp, motion_features], dim=1)
            net = self.gru(net, inp)
            delta_flow = self.flow_head(net)
            return net, None, delta_flow

    class RAFTLite(nn.Module):
        def __init__(self):
            super().__init__()
            self.fnet = nn.Conv2d(3, 8, 3, padding=1)
            self.cnet = nn.Conv2d(3, hdim + cdim, 3, padding=1)
            self.update_block = SmallUpdateBlock()

        def forward(self, image1, image2, iters=3):
            image1 = 2 * (image1 / 255.0) - 1.0
            image2 = 2 * (image2 / 255.0) - 1.0
            fmap1, fmap2 = self.fnet(image1), self.fnet(image2)
            corr_fn = _CorrBlock(torch, fmap1, fmap2, num_levels=levels, radius=radius)
            cnet = self.cnet(image1)
            net, inp = torch.split(cnet, [hdim, cdim], dim=1)
            net = torch.tanh(net)
            inp = torch.relu(inp)
            N, _, H, W = image1.shape
            coords0 = _coords_grid(torch, N, H, W)
            coords1 = _coords_grid(torch, N, H, W)
            flow_predictions = []
            for _ in range(iters):
                coords1 = coords1.detach()
                corr = corr_fn(coords1)
                flow = coords1 - coords0
                net, up_mask, delta_flow = self.update_block(net, inp, corr, flow)
                coords1 = coords1 + delta_flow
                flow_predictions.append(coords1 - coords0)
            return flow_predictions

    image1 = torch.tensor(_smooth_image(100, 1, 3, 6, 6) * 255)
    image2 = torch.tensor(np.roll(_smooth_image(100, 1, 3, 6, 6), 1, axis=3) * 255)
    flow_gt = torch.tensor(np.stack([np.full((6, 6), 1.0), np.zeros((6, 6))])[None].astype(np.float32)
                           + arr(101, 1, 2, 6, 6, scale=0.1))  # fmt: skip
    model = set_weights(torch, RAFTLite(), seed=102)
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=1e-4, eps=1e-8)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 4e-3, 10, pct_start=0.05,
                                                    cycle_momentum=False, anneal_strategy="linear")  # fmt: skip
    losses, norms, lrs = [], [], []
    for _ in range(2):
        optimizer.zero_grad()
        preds = model(image1, image2, iters=3)
        loss = 0.0
        for i, p in enumerate(preds):
            loss = loss + 0.8 ** (len(preds) - i - 1) * (p - flow_gt).abs().mean()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        optimizer.step()
        scheduler.step()
        losses.append(loss.detach())
        lrs.append(scheduler.get_last_lr()[0])
    return {"losses": losses, "norms": norms, "lrs": lrs, "preds": preds,
            "gru_convz": model.update_block.gru.convz.weight,
            "grads": grads(model.update_block)}  # fmt: skip


@program
def gmflow_global_matching_propagation_and_mutual_nn(torch):
    """GMFlow's global matching: the (B, HW, HW) correlation ``f1 f2^T / sqrt(C)``, a softmax
    over the second image, the expected correspondence ``prob @ grid`` minus the grid as flow,
    flow propagation by self-attention; the stereo variant (1-D correlation along the width with
    a ``triu`` mask so disparity is non-negative, ``masked_fill`` -inf); LoFTR's dual-softmax
    confidence and mutual-nearest-neighbour matches above a threshold; gradients with respect to
    the features."""
    B, C, H, W = 1, 8, 4, 5
    f0_np = arr(110, B, C, H, W)
    f1_np = np.roll(f0_np, 1, axis=3) + 0.3 * arr(111, B, C, H, W)
    feature0 = torch.tensor(f0_np, requires_grad=True)
    feature1 = torch.tensor(f1_np, requires_grad=True)

    def coords_grid(b, h, w):
        y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        stacks = [x, y]
        grid = torch.stack(stacks, dim=0).float()
        return grid[None].repeat(b, 1, 1, 1)

    def global_correlation_softmax(feature0, feature1):
        b, c, h, w = feature0.shape
        feature0 = feature0.view(b, c, -1).permute(0, 2, 1)
        feature1 = feature1.view(b, c, -1)
        correlation = torch.matmul(feature0, feature1).view(b, h, w, h, w) / (c**0.5)
        init_grid = coords_grid(b, h, w)
        grid = init_grid.view(b, 2, -1).permute(0, 2, 1)
        correlation = correlation.view(b, h * w, h * w)
        prob = torch.nn.functional.softmax(correlation, dim=-1)
        correspondence = torch.matmul(prob, grid).view(b, h, w, 2).permute(0, 3, 1, 2)
        flow = correspondence - init_grid
        return flow, prob

    def global_correlation_softmax_stereo(feature0, feature1):
        b, c, h, w = feature0.shape
        x_grid = torch.linspace(0, w - 1, w, device=feature0.device)
        feature0 = feature0.permute(0, 2, 3, 1)
        feature1 = feature1.permute(0, 2, 1, 3)
        correlation = torch.matmul(feature0, feature1) / (c**0.5)
        mask = torch.triu(torch.ones((w, w)), diagonal=1).type_as(feature0)
        valid_mask = (mask == 0).unsqueeze(0).unsqueeze(0).repeat(b, h, 1, 1)
        correlation[~valid_mask] = -1e9
        prob = torch.nn.functional.softmax(correlation, dim=-1)
        correspondence = (x_grid.view(1, 1, 1, w) * prob).sum(-1)
        disparity = x_grid.view(1, 1, w).repeat(b, h, 1) - correspondence
        return disparity.unsqueeze(1), prob

    def self_attn_propagation(feature0, flow):
        b, c, h, w = feature0.shape
        query = feature0.view(b, c, h * w).permute(0, 2, 1)
        key = query
        value = flow.view(b, flow.size(1), h * w).permute(0, 2, 1)
        scores = torch.matmul(query, key.permute(0, 2, 1)) / (c**0.5)
        prob = torch.softmax(scores, dim=-1)
        out = torch.matmul(prob, value)
        return out.view(b, h, w, value.size(-1)).permute(0, 3, 1, 2)

    flow, prob = global_correlation_softmax(feature0, feature1)
    flow_prop = self_attn_propagation(feature0, flow)
    disparity, prob_stereo = global_correlation_softmax_stereo(feature0, feature1)
    loss = flow_prop.abs().mean() + flow.pow(2).mean() + disparity.mean()
    loss.backward()

    with torch.no_grad():
        f0 = feature0.flatten(2).transpose(1, 2)
        f1 = feature1.flatten(2).transpose(1, 2)
        sim = torch.einsum("nlc,nsc->nls", f0, f1) / C / 0.1
        conf = torch.softmax(sim, 1) * torch.softmax(sim, 2)
        mask = conf > 0.05
        mask = (mask & (conf == conf.max(dim=2, keepdim=True)[0])
                & (conf == conf.max(dim=1, keepdim=True)[0]))  # fmt: skip
        mask_v, all_j_ids = mask.max(dim=2)
        b_ids, i_ids = torch.where(mask_v)
        j_ids = all_j_ids[b_ids, i_ids]
        mconf = conf[b_ids, i_ids, j_ids]
        mkpts0 = torch.stack([i_ids % W, i_ids // W], dim=1).float()
        mkpts1 = torch.stack([j_ids % W, j_ids // W], dim=1).float()
    return {"flow": flow, "prob_rowsum": prob.sum(-1), "flow_prop": flow_prop,
            "disparity": disparity, "prob_stereo": prob_stereo[0, 0], "loss": loss,
            "grad_f0": feature0.grad, "grad_f1": feature1.grad, "i_ids": i_ids, "j_ids": j_ids,
            "mconf": mconf, "mkpts0": mkpts0, "mkpts1": mkpts1}  # fmt: skip


@program
def flow_augmentation_resize_and_color_wheel(torch):
    """Flow data handling as the data loaders and visualisers write it: a horizontal flip that
    negates ``u``, a vertical flip that negates ``v``, resizing a flow with ``interpolate`` and
    rescaling its components by the size ratio, a random-crop-style slice, the Middlebury colour
    wheel built in a preallocated tensor and a flow coloured through it (``atan2``, ``floor``
    indices with wrap-around, interpolation between wheel entries, saturation by the radius),
    and the sparse-flow (KITTI) resize that scatters valid samples with ``index_put_``."""
    F = torch.nn.functional
    B, H, W = 1, 6, 8
    flow = torch.tensor(arr(120, B, 2, H, W, scale=3.0))
    valid = torch.tensor(_uniform(121, H, W) > 0.4)

    hflip = flow.flip(-1) * torch.tensor([-1.0, 1.0]).view(1, 2, 1, 1)
    vflip = torch.flip(flow, dims=[2]) * torch.tensor([1.0, -1.0]).view(1, 2, 1, 1)
    new_h, new_w = 9, 12
    resized = F.interpolate(flow, size=(new_h, new_w), mode="bilinear", align_corners=False)
    resized = resized * torch.tensor([new_w / W, new_h / H]).view(1, 2, 1, 1)
    crop = flow[:, :, 1:5, 2:7]

    def make_colorwheel():
        RY, YG, GC, CB, BM, MR = 15, 6, 4, 11, 13, 6
        ncols = RY + YG + GC + CB + BM + MR
        colorwheel = torch.zeros(ncols, 3)
        col = 0
        colorwheel[0:RY, 0] = 255
        colorwheel[0:RY, 1] = torch.floor(255 * torch.arange(0, RY) / RY)
        col = col + RY
        colorwheel[col : col + YG, 0] = 255 - torch.floor(255 * torch.arange(0, YG) / YG)
        colorwheel[col : col + YG, 1] = 255
        col = col + YG
        colorwheel[col : col + GC, 1] = 255
        colorwheel[col : col + GC, 2] = torch.floor(255 * torch.arange(0, GC) / GC)
        col = col + GC
        colorwheel[col : col + CB, 1] = 255 - torch.floor(255 * torch.arange(CB) / CB)
        colorwheel[col : col + CB, 2] = 255
        col = col + CB
        colorwheel[col : col + BM, 2] = 255
        colorwheel[col : col + BM, 0] = torch.floor(255 * torch.arange(0, BM) / BM)
        col = col + BM
        colorwheel[col : col + MR, 2] = 255 - torch.floor(255 * torch.arange(MR) / MR)
        colorwheel[col : col + MR, 0] = 255
        return colorwheel

    def flow_to_color(u, v):
        colorwheel = make_colorwheel()
        ncols = colorwheel.shape[0]
        rad = torch.sqrt(torch.square(u) + torch.square(v))
        rad_max = rad.max()
        u, v = u / (rad_max + 1e-5), v / (rad_max + 1e-5)
        rad = rad / (rad_max + 1e-5)
        a = torch.atan2(-v, -u) / math.pi
        fk = (a + 1) / 2 * (ncols - 1)
        k0 = torch.floor(fk).long()
        k1 = k0 + 1
        k1[k1 == ncols] = 0
        f = fk - k0
        img = torch.zeros(*u.shape, 3)
        for i in range(3):
            tmp = colorwheel[:, i]
            col0 = tmp[k0] / 255.0
            col1 = tmp[k1] / 255.0
            col = (1 - f) * col0 + f * col1
            idx = rad <= 1
            col[idx] = 1 - rad[idx] * (1 - col[idx])
            col[~idx] = col[~idx] * 0.75
            img[..., i] = col
        return img, k0

    color, k0 = flow_to_color(flow[0, 0], flow[0, 1])

    # KITTI-style sparse resize: scale the valid samples' coordinates and scatter them
    yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    coords = torch.stack([xx, yy], dim=-1).float()[valid]
    flow_v = flow[0].permute(1, 2, 0)[valid]
    fx, fy = new_w / W, new_h / H
    coords1 = coords * torch.tensor([fx, fy])
    flow1 = flow_v * torch.tensor([fx, fy])
    xx1 = torch.round(coords1[:, 0]).long()
    yy1 = torch.round(coords1[:, 1]).long()
    keep = (xx1 >= 0) & (xx1 < new_w) & (yy1 >= 0) & (yy1 < new_h)
    sparse = torch.zeros(new_h, new_w, 2)
    sparse_valid = torch.zeros(new_h, new_w, dtype=torch.int32)
    sparse.index_put_((yy1[keep], xx1[keep]), flow1[keep])
    sparse_valid[yy1[keep], xx1[keep]] = 1
    return {"hflip": hflip, "vflip": vflip, "resized": resized, "crop": crop,
            "colorwheel": make_colorwheel(), "color": color, "k0": k0, "sparse": sparse,
            "sparse_valid": sparse_valid, "n_valid": int(valid.sum())}  # fmt: skip


@program
def mvsnet_homography_warping_variance_cost_volume(torch):
    """MVSNet's multi-view stereo: source features warped into the reference view at every depth
    hypothesis by ``homo_warping`` (``src_proj @ inverse(ref_proj)``, rotated pixel rays scaled
    by the depths, projected and normalised, one ``grid_sample`` over (D*H, W)), the variance
    cost volume accumulated with in-place ``div_`` / ``sub_`` / ``pow_`` as the reference code
    writes it, a 3-D regulariser, soft-argmax depth regression, the photometric confidence
    (``avg_pool3d`` over four depth bins, ``gather`` at the regressed index) and the masked
    smooth-L1 depth loss with its gradients."""
    F = torch.nn.functional
    nn = torch.nn
    B, C, H, W, D = 1, 4, 6, 8, 6

    def make_proj(tx, ty, yaw):
        K = np.array([[6.0, 0, (W - 1) / 2], [0, 6.0, (H - 1) / 2], [0, 0, 1]])
        c, s = math.cos(yaw), math.sin(yaw)
        R = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
        E = np.eye(4)
        E[:3, :3], E[:3, 3] = R, [tx, ty, 0.0]
        P = np.eye(4)
        P[:3, :4] = K @ E[:3, :4]
        return torch.tensor(P[None].astype(np.float32))

    def homo_warping(src_fea, src_proj, ref_proj, depth_values):
        batch, channels = src_fea.shape[0], src_fea.shape[1]
        num_depth = depth_values.shape[1]
        height, width = src_fea.shape[2], src_fea.shape[3]
        with torch.no_grad():
            proj = torch.matmul(src_proj, torch.inverse(ref_proj))
            rot = proj[:, :3, :3]
            trans = proj[:, :3, 3:4]
            y, x = torch.meshgrid([torch.arange(0, height, dtype=torch.float32),
                                   torch.arange(0, width, dtype=torch.float32)], indexing="ij")  # fmt: skip
            y, x = y.contiguous(), x.contiguous()
            y, x = y.view(height * width), x.view(height * width)
            xyz = torch.stack((x, y, torch.ones_like(x)))
            xyz = torch.unsqueeze(xyz, 0).repeat(batch, 1, 1)
            rot_xyz = torch.matmul(rot, xyz)
            rot_depth_xyz = rot_xyz.unsqueeze(2).repeat(1, 1, num_depth, 1) * depth_values.view(
                batch, 1, num_depth, 1
            )
            proj_xyz = rot_depth_xyz + trans.view(batch, 3, 1, 1)
            proj_xy = proj_xyz[:, :2, :, :] / proj_xyz[:, 2:3, :, :]
            proj_x_normalized = proj_xy[:, 0, :, :] / ((width - 1) / 2) - 1
            proj_y_normalized = proj_xy[:, 1, :, :] / ((height - 1) / 2) - 1
            proj_xy = torch.stack((proj_x_normalized, proj_y_normalized), dim=3)
            grid = proj_xy
        warped_src_fea = F.grid_sample(src_fea, grid.view(batch, num_depth * height, width, 2),
                                       mode="bilinear", padding_mode="zeros", align_corners=True)  # fmt: skip
        return warped_src_fea.view(batch, channels, num_depth, height, width)

    def depth_regression(p, depth_values):
        depth_values = depth_values.view(*depth_values.shape, 1, 1)
        return torch.sum(p * depth_values, 1)

    feature = set_weights(torch, nn.Conv2d(3, C, 3, padding=1), seed=130, scale=0.8)
    cost_reg = set_weights(
        torch,
        nn.Sequential(nn.Conv3d(C, 4, 3, padding=1), nn.ReLU(), nn.Conv3d(4, 1, 3, padding=1)),
        seed=131,
        scale=0.5,
    )
    imgs = [torch.tensor(_smooth_image(132 + i, B, 3, H, W)) for i in range(3)]
    projs = [make_proj(0.0, 0.0, 0.0), make_proj(0.3, 0.0, 0.02), make_proj(-0.2, 0.1, -0.03)]
    depth_values = torch.linspace(2.0, 7.0, D).view(1, D)
    depth_gt = torch.tensor(_uniform(135, B, H, W, low=1.5, high=7.5))
    mask = (depth_gt > 2.0) & (depth_gt < 7.0)

    features = [feature(img) for img in imgs]
    ref_feature, src_features = features[0], features[1:]
    ref_proj, src_projs = projs[0], projs[1:]
    num_views = len(imgs)
    ref_volume = ref_feature.unsqueeze(2).repeat(1, 1, D, 1, 1)
    volume_sum = ref_volume
    volume_sq_sum = ref_volume**2
    warped = []
    for src_fea, src_proj in zip(src_features, src_projs):
        warped_volume = homo_warping(src_fea, src_proj, ref_proj, depth_values)
        warped.append(warped_volume)
        volume_sum = volume_sum + warped_volume
        volume_sq_sum = volume_sq_sum + warped_volume**2
    volume_variance = volume_sq_sum.div_(num_views).sub_(volume_sum.div_(num_views).pow_(2))
    cost = cost_reg(volume_variance).squeeze(1)
    prob_volume = F.softmax(cost, dim=1)
    depth = depth_regression(prob_volume, depth_values=depth_values)
    with torch.no_grad():
        prob_volume_sum4 = 4 * F.avg_pool3d(
            F.pad(prob_volume.unsqueeze(1), pad=(0, 0, 0, 0, 1, 2)), (4, 1, 1), stride=1, padding=0
        ).squeeze(1)
        depth_index = depth_regression(
            prob_volume, depth_values=torch.arange(D, dtype=torch.float)
        ).long()
        photometric_confidence = torch.gather(prob_volume_sum4, 1, depth_index.unsqueeze(1))
    loss = F.smooth_l1_loss(depth[mask], depth_gt[mask], reduction="mean")
    loss.backward()
    return {"warped0": warped[0], "variance": volume_variance, "prob_volume": prob_volume,
            "depth": depth, "depth_index": depth_index,
            "confidence": photometric_confidence.squeeze(1), "loss": loss,
            "grads": {**grads(feature), **{f"reg.{k}": v for k, v in grads(cost_reg).items()}}}  # fmt: skip


@program
def softmax_splatting_forward_warp(torch):
    """Forward warping by softmax splatting (Niklaus & Liu) written with plain tensor ops: each
    source pixel's bilinear weights at ``grid + flow`` accumulated with ``index_add_`` into a
    flattened target, the importance metric ``-alpha * |I1 - backwarp(I2)|`` exponentiated and
    splatted alongside, normalised average, summation and softmax splats, and the gradients of a
    loss with respect to the flow, the image and ``alpha``."""
    B, C, H, W = 1, 3, 6, 7
    im1 = torch.tensor(_smooth_image(140, B, C, H, W), requires_grad=True)
    im2 = torch.tensor(_smooth_image(141, B, C, H, W))
    flow = torch.tensor(arr(142, B, 2, H, W, scale=1.1), requires_grad=True)
    alpha = torch.tensor(-20.0, requires_grad=True)

    def splat(ten_in, ten_flow):
        b, c, h, w = ten_in.shape
        grid = _coords_grid(torch, b, h, w)
        pos = grid + ten_flow
        x, y = pos[:, 0], pos[:, 1]
        x0, y0 = torch.floor(x), torch.floor(y)
        out = ten_in.new_zeros(b * h * w, c)
        src = ten_in.permute(0, 2, 3, 1).reshape(b * h * w, c)
        base = (torch.arange(b) * h * w).view(b, 1, 1)
        for xi, yi in ((x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1)):
            wt = (1 - (x - xi).abs()) * (1 - (y - yi).abs())
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            idx = base + yi.clamp(0, h - 1).long() * w + xi.clamp(0, w - 1).long()
            contrib = src * (wt * inside).reshape(-1, 1)
            out = out.index_add(0, idx.reshape(-1), contrib)
        return out.view(b, h, w, c).permute(0, 3, 1, 2)

    backwarped, _ = _flow_warp(torch, im2, flow)
    metric = alpha * (im1 - backwarped).abs().mean(1, keepdim=True)
    summation = splat(im1, flow)
    ones = splat(torch.ones(B, 1, H, W), flow)
    average = summation / (ones + 1e-7)
    soft_in = torch.cat([im1 * metric.exp(), metric.exp()], 1)
    soft = splat(soft_in, flow)
    soft = soft[:, :-1] / (soft[:, -1:] + 1e-7)
    holes = (ones < 1e-3).float()
    target = torch.tensor(_smooth_image(143, B, C, H, W))
    loss = ((soft - target).abs() * (1 - holes)).mean() + 0.1 * summation.mean()
    loss.backward()
    return {"summation": summation, "average": average, "soft": soft, "holes": holes,
            "metric": metric, "loss": loss, "grad_flow": flow.grad, "grad_im1": im1.grad,
            "grad_alpha": alpha.grad}  # fmt: skip


@program
def sgm_semi_global_matching_wta_subpixel_lr_check(torch):
    """Classical stereo as a tensor program: an absolute-difference + census-like matching cost
    by shifting along the width (``inf`` where no match), Semi-Global Matching aggregation along
    four paths (a scan over columns or rows with ``torch.minimum`` of the ``d``, ``d +- 1``
    (+P1) and ``min + P2`` terms, the other directions by ``flip`` / ``transpose``),
    winner-takes-all ``argmin``, parabola sub-pixel refinement with ``gather``, the right
    disparity read off the left volume's diagonals, and the left-right consistency check."""
    H, W, D = 5, 12, 4
    P1, P2 = 0.1, 0.6
    right_np = _smooth_image(150, 1, 1, H, W + 2)[0, 0]
    left_np = right_np[:, :W] + 0.02 * arr(151, H, W)
    right_np = right_np[:, 2:]  # true disparity 2
    left = torch.tensor(left_np.astype(np.float32))
    right = torch.tensor(right_np.astype(np.float32))

    cost = torch.full((H, W, D), float("inf"))
    for d in range(D):
        ad = (left[:, d:] - right[:, : W - d]).abs()
        grad_l = torch.diff(left, dim=1, prepend=left[:, :1])[:, d:]
        grad_r = torch.diff(right, dim=1, prepend=right[:, :1])[:, : W - d]
        cost[:, d:, d] = ad + 0.5 * (grad_l - grad_r).abs()
    cost_finite = torch.where(torch.isinf(cost), torch.full_like(cost, 2.0), cost)

    def aggregate_lr(c):
        h, w, nd = c.shape
        L = torch.empty_like(c)
        L[:, 0] = c[:, 0]
        inf = torch.full((h, 1), float("inf"))
        for x in range(1, w):
            prev = L[:, x - 1]
            prev_min = prev.min(dim=1, keepdim=True).values
            minus = torch.cat([inf, prev[:, :-1]], 1) + P1
            plus = torch.cat([prev[:, 1:], inf], 1) + P1
            best = torch.minimum(torch.minimum(prev, minus), torch.minimum(plus, prev_min + P2))
            L[:, x] = c[:, x] + best - prev_min
        return L

    paths = [
        aggregate_lr(cost_finite),
        aggregate_lr(cost_finite.flip(1)).flip(1),
        aggregate_lr(cost_finite.transpose(0, 1)).transpose(0, 1),
        aggregate_lr(cost_finite.transpose(0, 1).flip(1)).flip(1).transpose(0, 1),
    ]
    S = torch.stack(paths).sum(0)
    disp = S.argmin(dim=2)
    dm = (disp - 1).clamp(0, D - 1)
    dp = (disp + 1).clamp(0, D - 1)
    c0 = S.gather(2, dm.unsqueeze(2)).squeeze(2)
    c1 = S.gather(2, disp.unsqueeze(2)).squeeze(2)
    c2 = S.gather(2, dp.unsqueeze(2)).squeeze(2)
    denom = c0 - 2 * c1 + c2
    interior = (disp > 0) & (disp < D - 1) & (denom > 1e-6)
    offset = torch.where(interior, (c0 - c2) / (2 * denom.clamp(min=1e-6)), torch.zeros_like(c0))
    subpix = disp.float() + offset

    # right volume: C_R(x, d) = C_L(x + d, d)
    xs = torch.arange(W).view(1, W, 1) + torch.arange(D).view(1, 1, D)
    valid_r = xs < W
    S_r = S.gather(1, xs.clamp(max=W - 1).expand(H, W, D))
    S_r = S_r.masked_fill(~valid_r, float("inf"))
    disp_r = S_r.argmin(dim=2)
    xr = (torch.arange(W).view(1, W) - disp).clamp(min=0)
    lr_diff = (disp - disp_r.gather(1, xr)).abs()
    consistent = lr_diff <= 1
    final = torch.where(consistent, subpix, torch.full_like(subpix, -1.0))
    return {"cost": cost_finite, "S": S, "disp": disp, "subpix": subpix, "disp_r": disp_r,
            "consistent": consistent, "final": final,
            "accuracy": ((disp[:, 3:] == 2).float().mean())}  # fmt: skip


@program
def warping_grid_sample_modes_padding_and_volumes(torch):
    """The sampling options flow and stereo code meets: ``grid_sample`` in bilinear, nearest and
    bicubic modes with zeros / border / reflection padding and both ``align_corners``, on a grid
    from ``affine_grid`` plus a flow in normalised units; gradients with respect to the image
    and the grid; a cost volume (N, C, D, H, W) resampled by a 5-D ``grid_sample`` (trilinear) at
    per-pixel disparity hypotheses, as in cascade / disparity-refinement networks."""
    F = torch.nn.functional
    B, C, H, W = 1, 2, 5, 6
    img = torch.tensor(arr(160, B, C, H, W), requires_grad=True)
    theta = torch.tensor([[[1.05, 0.1, 0.05], [-0.08, 0.95, -0.1]]], dtype=torch.float32)
    out = {}
    for align_corners in (True, False):
        base = F.affine_grid(theta, [B, C, H, W], align_corners=align_corners)
        grid = (base + torch.tensor(arr(161, B, H, W, 2, scale=0.15))).requires_grad_(True)
        for mode in ("bilinear", "nearest", "bicubic"):
            for padding_mode in ("zeros", "border", "reflection"):
                y = F.grid_sample(img, grid, mode=mode, padding_mode=padding_mode,
                                  align_corners=align_corners)  # fmt: skip
                out[f"{mode}_{padding_mode}_{int(align_corners)}"] = y
        loss = sum((v * (i + 1)).sum() * 0.01 for i, v in enumerate(out.values())
                   if v.requires_grad)  # fmt: skip
        g_img, g_grid = torch.autograd.grad(loss, (img, grid))
        out[f"grad_img_{int(align_corners)}"] = g_img
        out[f"grad_grid_{int(align_corners)}"] = g_grid
        out = {k: v.detach() if hasattr(v, "detach") else v for k, v in out.items()}

    D = 4
    volume = torch.tensor(arr(162, B, 1, D, H, W), requires_grad=True)
    disp = torch.tensor(_uniform(163, B, H, W, low=0.2, high=2.8))
    hyp = disp.unsqueeze(1) + torch.tensor([-0.5, 0.0, 0.5]).view(1, 3, 1, 1)
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
    z = hyp / (D - 1) * 2 - 1
    grid3 = torch.stack([xs.expand_as(z), ys.expand_as(z), z], dim=-1)
    sampled = F.grid_sample(volume, grid3, mode="bilinear", padding_mode="border",
                            align_corners=True)  # fmt: skip
    sampled.square().sum().backward()
    out["volume_sampled"] = sampled
    out["grad_volume"] = volume.grad
    return out
