"""Medical image segmentation as MONAI and nnU-Net code writes it: soft Dice and generalized Dice
losses with their ``include_background`` / ``squared_pred`` / smoothing options, Tversky and
focal-Tversky losses, Dice + cross-entropy and Dice + focal compounds, a small 3-D U-Net with
instance norm and deep supervision (weighted multi-scale losses on downsampled targets),
sliding-window inference with a Gaussian importance map and overlapping windows, one-hot conversion
of label volumes, test-time augmentation by mirroring, boundary distances (Hausdorff, HD95, ASSD)
through ``cdist``, the normalized surface Dice, CT/MR intensity normalization with resampling, and
nnU-Net's poly learning-rate schedule. Every name has ``medseg`` in it."""

from __future__ import annotations

import itertools
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


def _one_hot(torch, labels, num_classes):
    """MONAI's ``one_hot``: scatter ones into a zero tensor along the channel dim."""
    shape = list(labels.shape)
    shape[1] = num_classes
    out = torch.zeros(shape, dtype=torch.float32)
    return out.scatter_(1, labels.long(), 1)


def _dice_loss(torch, input, target, *, include_background=True, to_onehot_y=False,
               sigmoid=False, softmax=False, squared_pred=False, jaccard=False,
               smooth_nr=1e-5, smooth_dr=1e-5, batch=False, reduction="mean"):  # fmt: skip
    """MONAI's ``DiceLoss.forward`` as a function."""
    if sigmoid:
        input = torch.sigmoid(input)
    n_pred_ch = input.shape[1]
    if softmax:
        input = torch.softmax(input, 1)
    if to_onehot_y:
        target = _one_hot(torch, target, n_pred_ch)
    if not include_background:
        target = target[:, 1:]
        input = input[:, 1:]
    reduce_axis = list(range(2, len(input.shape)))
    if batch:
        reduce_axis = [0] + reduce_axis
    intersection = torch.sum(target * input, dim=reduce_axis)
    if squared_pred:
        ground_o = torch.sum(target**2, dim=reduce_axis)
        pred_o = torch.sum(input**2, dim=reduce_axis)
    else:
        ground_o = torch.sum(target, dim=reduce_axis)
        pred_o = torch.sum(input, dim=reduce_axis)
    denominator = ground_o + pred_o
    if jaccard:
        denominator = 2.0 * (denominator - intersection)
    f = 1.0 - (2.0 * intersection + smooth_nr) / (denominator + smooth_dr)
    if reduction == "mean":
        return torch.mean(f)
    if reduction == "sum":
        return torch.sum(f)
    return f


def _soft_dice_nnunet(torch, x, y_onehot, *, batch_dice=True, do_bg=False, smooth=1e-5):
    """nnU-Net's ``MemoryEfficientSoftDiceLoss`` (softmax applied, optional batch dice)."""
    x = torch.softmax(x, 1)
    axes = tuple(range(2, x.ndim))
    if not do_bg:
        x, y_onehot = x[:, 1:], y_onehot[:, 1:]
    intersect = (x * y_onehot).sum(axes)
    sum_pred = x.sum(axes)
    sum_gt = y_onehot.sum(axes)
    if batch_dice:
        intersect, sum_pred, sum_gt = intersect.sum(0), sum_pred.sum(0), sum_gt.sum(0)
    dc = (2 * intersect + smooth) / torch.clip(sum_gt + sum_pred + smooth, 1e-8)
    return -dc.mean()


@program
def medseg_soft_dice_loss_monai_options(torch):
    """MONAI's ``DiceLoss`` over its option grid on a (2, 3, 4, 5, 6) prediction: softmax with
    one-hot targets from label maps, without the background channel, squared predictions (the
    V-Net form), Jaccard, batch-wise reduction, ``reduction="none"``, and sigmoid multi-label
    targets; gradients of two variants w.r.t. the logits."""
    logits = torch.tensor(arr(1, 2, 3, 4, 5, 6), requires_grad=True)
    labels = torch.tensor(ints(2, 3, 2, 1, 4, 5, 6))
    multilabel = torch.tensor((arr(3, 2, 3, 4, 5, 6) > 0.3).astype(np.float32))
    out = {}
    out["softmax"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True)
    out["no_bg"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True,
                              include_background=False)  # fmt: skip
    out["squared"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True,
                                squared_pred=True, smooth_nr=0.0, smooth_dr=1e-6)  # fmt: skip
    out["jaccard"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True,
                                jaccard=True)  # fmt: skip
    out["batch"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True, batch=True,
                              smooth_nr=1.0, smooth_dr=1.0)  # fmt: skip
    out["none"] = _dice_loss(torch, logits, labels, to_onehot_y=True, softmax=True,
                             reduction="none")  # fmt: skip
    out["sigmoid_sum"] = _dice_loss(torch, logits, multilabel, sigmoid=True, reduction="sum")
    g_soft = torch.autograd.grad(out["softmax"], logits, retain_graph=True)[0]
    g_sq = torch.autograd.grad(out["squared"] + out["no_bg"], logits)[0]
    return {**out, "none_shape": list(out["none"].shape), "grad_softmax": g_soft,
            "grad_squared_no_bg": g_sq[0, :, 1]}  # fmt: skip


@program
def medseg_generalized_dice_loss_class_weights(torch):
    """MONAI's ``GeneralizedDiceLoss``: class weights ``1 / |G_c|^2`` (and ``1 / |G_c|`` for the
    ``simple`` type) with infinite weights of empty classes replaced by the largest finite one per
    sample (or over the batch), a class absent from one sample, the background excluded, and
    gradients w.r.t. the logits."""
    logits = torch.tensor(arr(4, 2, 4, 6, 6), requires_grad=True)
    lab = ints(5, 3, 2, 1, 6, 6)
    lab[0][lab[0] == 2] = 1  # class 2 is absent from the first sample
    lab[1, 0, :2, :2] = 3
    labels = torch.tensor(lab)

    def gdl(x, y, w_type="square", batch=False, include_background=True):
        x = torch.softmax(x, 1)
        y = _one_hot(torch, y, x.shape[1])
        if not include_background:
            x, y = x[:, 1:], y[:, 1:]
        reduce_axis = list(range(2, x.ndim))
        if batch:
            reduce_axis = [0] + reduce_axis
        intersection = torch.sum(y * x, reduce_axis)
        ground_o = torch.sum(y, reduce_axis)
        pred_o = torch.sum(x, reduce_axis)
        denominator = ground_o + pred_o
        w = 1.0 / ground_o.float() if w_type == "simple" else 1.0 / (ground_o.float() ** 2)
        infs = torch.isinf(w)
        if batch:
            w[infs] = 0.0
            w = w + infs * torch.max(w)
        else:
            w[infs] = 0.0
            max_values = torch.max(w, dim=1)[0].unsqueeze(dim=1)
            w = w + infs * max_values
        final_reduce_dim = 0 if batch else 1
        numer = 2.0 * (intersection * w).sum(final_reduce_dim, keepdim=True) + 1e-5
        denom = (denominator * w).sum(final_reduce_dim, keepdim=True) + 1e-5
        return 1.0 - (numer / denom), w

    sq, w_sq = gdl(logits, labels)
    simple, w_simple = gdl(logits, labels, w_type="simple", include_background=False)
    batched, w_batch = gdl(logits, labels, batch=True)
    total = sq.mean() + simple.mean() + batched.mean()
    total.backward()
    return {"square": sq, "simple": simple, "batch": batched, "w_square": w_sq,
            "w_simple": w_simple, "w_batch": w_batch, "total": total,
            "grad": logits.grad[:, :, 2]}  # fmt: skip


@program
def medseg_tversky_and_focal_tversky_adam(torch):
    """Tversky loss (alpha=0.3, beta=0.7 penalising false negatives, as for small lesions) and the
    focal Tversky loss ``(1 - TI)^gamma`` of Abraham & Khan, optimised directly on a logit volume
    with Adam for a few steps; the Tversky index per class and the final soft prediction."""
    target = torch.tensor(ints(6, 2, 1, 1, 6, 6, 6))
    y = torch.cat([1 - target, target], 1).float()
    logits = torch.nn.Parameter(torch.tensor(arr(7, 1, 2, 6, 6, 6)))
    opt = torch.optim.Adam([logits], lr=0.05)

    def tversky_index(p, g, alpha=0.3, beta=0.7, smooth=1.0):
        dims = (0, 2, 3, 4)
        tp = (p * g).sum(dims)
        fp = (p * (1 - g)).sum(dims)
        fn = ((1 - p) * g).sum(dims)
        return (tp + smooth) / (tp + alpha * fp + beta * fn + smooth)

    losses, tis = [], []
    for step in range(5):
        opt.zero_grad()
        p = torch.softmax(logits, dim=1)
        ti = tversky_index(p, y)
        if step < 2:
            loss = (1 - ti).mean()
        else:
            loss = torch.pow(1 - ti, 0.75).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        tis.append(ti.detach())
    p = torch.softmax(logits.detach(), 1)
    return {"losses": losses, "tversky_index": tis, "final_fg": p[0, 1, 2],
            "dice_hard": 2 * ((p.argmax(1) == 1) & (target[:, 0] == 1)).sum()
            / ((p.argmax(1) == 1).sum() + (target[:, 0] == 1).sum())}  # fmt: skip


@program
def medseg_dice_ce_conv3d_training(torch):
    """MONAI's ``DiceCELoss`` (``to_onehot_y``, softmax, class-weighted ``CrossEntropyLoss`` on
    the squeezed label channel, ``lambda_dice``/``lambda_ce``) training a small Conv3d head
    with AdamW; losses per step, both terms, predicted classes and the head's gradients."""
    net = torch.nn.Sequential(
        torch.nn.Conv3d(1, 4, 3, padding=1),
        torch.nn.PReLU(),
        torch.nn.Conv3d(4, 3, 1),
    )
    set_weights(torch, net, seed=8)
    x = torch.tensor(arr(9, 2, 1, 5, 5, 5))
    y = torch.tensor(ints(10, 3, 2, 1, 5, 5, 5))
    ce = torch.nn.CrossEntropyLoss(weight=torch.tensor([0.2, 1.0, 1.5]))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-4)
    lambda_dice, lambda_ce = 1.0, 0.5
    losses, dice_terms, ce_terms = [], [], []
    for _ in range(4):
        opt.zero_grad()
        pred = net(x)
        dice = _dice_loss(torch, pred, y, to_onehot_y=True, softmax=True)
        ce_term = ce(pred, y.squeeze(1).long())
        loss = lambda_dice * dice + lambda_ce * ce_term
        loss.backward()
        opt.step()
        losses.append(loss.item())
        dice_terms.append(dice.item())
        ce_terms.append(ce_term.item())
    with torch.no_grad():
        seg = net(x).argmax(dim=1, keepdim=True)
    return {"losses": losses, "dice": dice_terms, "ce": ce_terms, "seg": seg,
            "grads": grads(net)}  # fmt: skip


@program
def medseg_dice_focal_sigmoid_multilabel(torch):
    """MONAI's sigmoid ``FocalLoss`` written the way it is (``gamma=2`` with the log-sigmoid
    modulating factor, ``alpha`` weighting) and ``DiceFocalLoss`` on overlapping multi-label
    targets (BraTS-style tumour core / whole tumour / enhancing), with gradients."""
    logits = torch.tensor(arr(11, 2, 3, 4, 4, 4, scale=2.0), requires_grad=True)
    t = ints(12, 4, 2, 1, 4, 4, 4)
    # BraTS regions from labels: TC = {1, 3}, WT = {1, 2, 3}, ET = {3}
    lab = torch.tensor(t)
    target = torch.cat([(lab == 1) | (lab == 3), (lab == 1) | (lab == 2) | (lab == 3), lab == 3],
                       dim=1).float()  # fmt: skip

    def focal(input, target, gamma=2.0, alpha=None):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(input, target,
                                                                    reduction="none")  # fmt: skip
        invprobs = torch.nn.functional.logsigmoid(-input * (target * 2 - 1))
        loss = (invprobs * gamma).exp() * loss
        if alpha is not None:
            alpha_factor = target * alpha + (1 - target) * (1 - alpha)
            loss = alpha_factor * loss
        return loss.mean()

    fl = focal(logits, target)
    fl_alpha = focal(logits, target, alpha=0.25)
    dice = _dice_loss(torch, logits, target, sigmoid=True, smooth_nr=0.0, smooth_dr=1e-6)
    dice_focal = dice + fl
    dice_focal.backward()
    probs = torch.sigmoid(logits.detach())
    return {"focal": fl, "focal_alpha": fl_alpha, "dice": dice, "dice_focal": dice_focal,
            "grad": logits.grad[1, :, 0], "regions_vox": target.sum((0, 2, 3, 4)),
            "pred_regions": (probs > 0.5).sum((2, 3, 4))}  # fmt: skip


def _unet3d(torch):
    nn = torch.nn

    def block(cin, cout, stride=1):
        return nn.Sequential(
            nn.Conv3d(cin, cout, 3, stride=stride, padding=1),
            nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
            nn.LeakyReLU(negative_slope=1e-2, inplace=True),
        )

    class UNet3D(nn.Module):
        def __init__(self, in_ch=1, n_classes=3, feats=(4, 8, 16), deep_supervision=True):
            super().__init__()
            self.deep_supervision = deep_supervision
            self.enc = nn.ModuleList()
            cin = in_ch
            for i, f in enumerate(feats):
                self.enc.append(nn.Sequential(block(cin, f, 1 if i == 0 else 2), block(f, f)))
                cin = f
            self.up = nn.ModuleList()
            self.dec = nn.ModuleList()
            self.seg = nn.ModuleList()
            for i in range(len(feats) - 1, 0, -1):
                self.up.append(nn.ConvTranspose3d(feats[i], feats[i - 1], 2, stride=2,
                                                  bias=False))  # fmt: skip
                self.dec.append(nn.Sequential(block(2 * feats[i - 1], feats[i - 1])))
                self.seg.append(nn.Conv3d(feats[i - 1], n_classes, 1))

        def forward(self, x):
            skips = []
            for stage in self.enc:
                x = stage(x)
                skips.append(x)
            x = skips.pop()
            outputs = []
            for up, dec, seg in zip(self.up, self.dec, self.seg):
                x = up(x)
                x = torch.cat((x, skips.pop()), dim=1)
                x = dec(x)
                outputs.append(seg(x))
            outputs = outputs[::-1]  # highest resolution first, as nnU-Net returns them
            return outputs if self.deep_supervision else outputs[0]

    return UNet3D()


@program
def medseg_unet3d_instance_norm_deep_supervision(torch):
    """An nnU-Net-style 3-D U-Net (strided-conv downsampling, transposed-conv upsampling, skip
    concatenation, instance norm, leaky ReLU) with deep-supervision heads; the targets are
    downsampled with nearest interpolation to every output's size, the per-scale Dice + CE losses
    are weighted ``1 / 2^i`` normalised (nnU-Net's ``DeepSupervisionWrapper``), trained with SGD
    (momentum 0.99, Nesterov), gradient clipping at 12 and a poly schedule."""
    net = _unet3d(torch)
    set_weights(torch, net, seed=13)
    x = torch.tensor(arr(14, 2, 1, 8, 8, 8))
    target = torch.tensor(ints(15, 3, 2, 1, 8, 8, 8)).float()
    opt = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.99, nesterov=True,
                          weight_decay=3e-5)  # fmt: skip
    max_steps = 4
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: (1 - e / max_steps) ** 0.9)
    ce = torch.nn.CrossEntropyLoss()
    n_scales = 2
    weights = np.array([1 / (2**i) for i in range(n_scales)])
    weights = weights / weights.sum()
    losses, norms, scale_losses = [], [], []
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        outputs = net(x)
        targets = [torch.nn.functional.interpolate(target, size=o.shape[2:], mode="nearest")
                   for o in outputs]  # fmt: skip
        per_scale = []
        for o, t in zip(outputs, targets):
            onehot = torch.zeros(o.shape).scatter_(1, t.long(), 1)
            per_scale.append(ce(o, t[:, 0].long()) + _soft_dice_nnunet(torch, o, onehot))
        loss = sum(float(w) * term for w, term in zip(weights, per_scale))
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(net.parameters(), 12).item())
        opt.step()
        sched.step()
        losses.append(loss.item())
        scale_losses.append([term.item() for term in per_scale])
    net.eval()
    net.deep_supervision = False
    with torch.no_grad():
        probs = torch.softmax(net(x), 1)
    return {"losses": losses, "scale_losses": scale_losses, "grad_norms": norms,
            "out_shapes": [list(o.shape) for o in outputs], "weights": weights.tolist(),
            "probs": probs[0, :, 3], "enc0_norm_weight": net.enc[0][0][1].weight,
            "lr": sched.get_last_lr()}  # fmt: skip


def _gaussian_importance_map(torch, roi, sigma_scale=0.125):
    """MONAI's ``compute_importance_map(mode="gaussian")``: a separable Gaussian normalised to a
    maximum of one with zeros lifted to the smallest positive value."""
    imp = None
    for n in roi:
        sigma = n * sigma_scale
        x = torch.arange(n, dtype=torch.float32) - (n - 1) / 2.0
        g = torch.exp(-(x**2) / (2 * sigma**2))
        imp = g if imp is None else imp.unsqueeze(-1) * g
    imp = imp / torch.max(imp)
    min_non_zero = max(torch.min(imp[imp > 0]).item(), 1e-3)
    return torch.clamp(imp, min=min_non_zero)


def _scan_starts(size, roi, overlap):
    step = max(int(roi * (1 - overlap)), 1)
    num = math.ceil((size - roi) / step) + 1 if size > roi else 1
    return [min(i * step, size - roi) for i in range(num)]


@program
def medseg_sliding_window_gaussian_overlap_inference(torch):
    """MONAI-style ``sliding_window_inference``: the volume padded up to the ROI where smaller,
    window starts with 50% overlap (the last clipped to the border), windows batched through the
    network, each prediction weighted by a Gaussian importance map and accumulated with a count
    map, then divided and cropped back; argmax segmentation and the importance map itself."""
    nn = torch.nn
    net = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.InstanceNorm3d(4), nn.ReLU(),
                        nn.Conv3d(4, 3, 1))  # fmt: skip
    set_weights(torch, net, seed=16)
    net.eval()
    image = torch.tensor(arr(17, 1, 1, 10, 9, 5))
    roi = (6, 6, 6)
    overlap, sw_batch_size = 0.5, 4
    # pad the last dim (5 < 6) symmetrically, as MONAI does
    pad = []
    for k in range(len(roi) - 1, -1, -1):
        diff = max(roi[k] - image.shape[2 + k], 0)
        pad.extend([diff // 2, diff - diff // 2])
    padded = torch.nn.functional.pad(image, pad, mode="constant", value=0.0)
    spatial = padded.shape[2:]
    starts = [_scan_starts(spatial[d], roi[d], overlap) for d in range(3)]
    slices = [tuple(slice(s, s + r) for s, r in zip(st, roi)) for st in itertools.product(*starts)]
    importance = _gaussian_importance_map(torch, roi)
    output = torch.zeros((1, 3, *spatial))
    count = torch.zeros((1, 1, *spatial))
    with torch.no_grad():
        for i in range(0, len(slices), sw_batch_size):
            batch_sl = slices[i : i + sw_batch_size]
            windows = torch.cat([padded[(slice(None), slice(None), *sl)] for sl in batch_sl])
            preds = torch.softmax(net(windows), 1)
            for j, sl in enumerate(batch_sl):
                output[(slice(None), slice(None), *sl)] += preds[j : j + 1] * importance
                count[(slice(None), slice(None), *sl)] += importance
    output = output / count
    output = output[..., pad[0] : spatial[2] - pad[1]]
    return {"n_windows": len(slices), "starts": [list(s) for s in starts], "pad": pad,
            "importance": importance[2], "count": count[0, 0, :, :, 3], "probs": output[0, :, 4],
            "seg": output.argmax(1), "prob_sum": output.sum(1).mean()}  # fmt: skip


@program
def medseg_one_hot_label_volume_conversions(torch):
    """Label-volume bookkeeping: MONAI's scatter-based ``one_hot`` vs ``F.one_hot`` permuted to
    channels-first, label remapping through a lookup table, an ignore label (255) masked out
    before one-hot encoding, per-class voxel counts with ``bincount`` and volumes in millilitres
    from the spacing, ``argmax`` back to labels, and ``unique`` with counts."""
    F = torch.nn.functional
    lab_np = ints(18, 5, 2, 1, 4, 5, 6)
    lab_np[0, 0, 0, :2, :] = 255
    labels = torch.tensor(lab_np)
    ignore = labels == 255
    clean = torch.where(ignore, torch.zeros_like(labels), labels)
    lut = torch.tensor([0, 1, 1, 2, 3])  # merge classes 1 and 2
    remapped = lut[clean]
    oh_scatter = _one_hot(torch, remapped, 4)
    oh_f = F.one_hot(remapped[:, 0], num_classes=4).permute(0, 4, 1, 2, 3).float()
    oh_scatter = oh_scatter * (~ignore).float()
    oh_f = oh_f * (~ignore).float()
    counts = torch.bincount(remapped[~ignore], minlength=4)
    spacing = (1.5, 0.75, 0.75)
    voxel_ml = spacing[0] * spacing[1] * spacing[2] / 1000.0
    volumes = oh_scatter.sum(dim=(2, 3, 4)) * voxel_ml
    back = oh_scatter.argmax(1, keepdim=True)
    values, ucounts = torch.unique(remapped, return_counts=True)
    return {"equal": bool(torch.equal(oh_scatter, oh_f)), "oh_dtype": str(oh_scatter.dtype),
            "counts": counts, "volumes": volumes, "back_equal_where_valid":
            bool(((back == remapped) | ignore).all()), "values": values, "ucounts": ucounts,
            "oh_slice": oh_scatter[0, :, 0, 1], "n_ignored": int(ignore.sum()),
            "fg_fraction": (remapped > 0).float().mean()}  # fmt: skip


@program
def medseg_test_time_mirroring_ensemble(torch):
    """nnU-Net's test-time mirroring: predictions for every non-empty combination of the spatial
    mirror axes (flip the input, predict, flip the prediction back) averaged with the plain
    prediction; softmax probabilities, the segmentation, and how many voxels mirroring changed."""
    nn = torch.nn
    net = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.InstanceNorm3d(4, affine=True),
                        nn.LeakyReLU(0.01), nn.Conv3d(4, 3, 3, padding=1))  # fmt: skip
    set_weights(torch, net, seed=19)
    net.eval()
    x = torch.tensor(arr(20, 1, 1, 5, 6, 4))
    mirror_axes = (0, 1, 2)
    axes_combinations = [c for i in range(len(mirror_axes))
                         for c in itertools.combinations([m + 2 for m in mirror_axes], i + 1)]  # fmt: skip
    with torch.inference_mode():
        plain = net(x)
        prediction = plain.clone()
        for axes in axes_combinations:
            prediction += torch.flip(net(torch.flip(x, axes)), axes)
        prediction /= len(axes_combinations) + 1
        probs = torch.softmax(prediction, 1)
        seg = probs.argmax(1)
        changed = (seg != plain.argmax(1)).sum()
    return {"n_combos": len(axes_combinations), "combos": [list(c) for c in axes_combinations],
            "logits": prediction[0, :, 2], "probs": probs[0, 1], "seg": seg,
            "changed": changed}  # fmt: skip


def _boundary(torch, mask):
    """Surface voxels: the mask minus its 6-/26-neighbourhood erosion (min-pool as -max_pool)."""
    m = mask.float()[None, None]
    eroded = -torch.nn.functional.max_pool3d(-m, kernel_size=3, stride=1, padding=1)
    return (m - eroded)[0, 0] > 0


def _masks(seed):
    g = np.random.default_rng(seed)
    zz, yy, xx = np.meshgrid(np.arange(8), np.arange(9), np.arange(10), indexing="ij")
    gt = ((zz - 3.6) ** 2 / 6 + (yy - 4.2) ** 2 / 9 + (xx - 5.1) ** 2 / 12) < 1.0
    pr = ((zz - 3.9) ** 2 / 5 + (yy - 4.8) ** 2 / 10 + (xx - 4.6) ** 2 / 11) < 1.0
    pr[g.random(pr.shape) < 0.03] = True  # a few false-positive specks
    return gt, pr


@program
def medseg_hausdorff_hd95_assd_via_cdist(torch):
    """Boundary distances as MONAI's metrics compute them, with ``cdist`` between surface points
    in millimetres: the directed and symmetric Hausdorff distance, HD95 (95th percentile of each
    directed distance set), and the average symmetric surface distance; plus the Dice score of
    the two masks."""
    gt_np, pr_np = _masks(21)
    gt, pr = torch.tensor(gt_np), torch.tensor(pr_np)
    spacing = torch.tensor([1.5, 1.0, 0.75])
    b_gt, b_pr = _boundary(torch, gt), _boundary(torch, pr)
    p_gt = torch.nonzero(b_gt).float() * spacing
    p_pr = torch.nonzero(b_pr).float() * spacing
    d = torch.cdist(p_pr, p_gt)
    d_pr_to_gt = d.min(dim=1).values
    d_gt_to_pr = d.min(dim=0).values
    hd = torch.max(d_pr_to_gt.max(), d_gt_to_pr.max())
    hd95 = torch.max(torch.quantile(d_pr_to_gt, 0.95), torch.quantile(d_gt_to_pr, 0.95))
    assd = (d_pr_to_gt.sum() + d_gt_to_pr.sum()) / (d_pr_to_gt.numel() + d_gt_to_pr.numel())
    dice = 2 * (gt & pr).sum() / (gt.sum() + pr.sum())
    return {"n_surface": [int(b_gt.sum()), int(b_pr.sum())], "hd": hd, "hd95": hd95,
            "assd": assd, "directed": [d_pr_to_gt.max(), d_gt_to_pr.max()], "dice": dice,
            "d_hist": torch.histc(d_pr_to_gt, bins=5, min=0, max=5)}  # fmt: skip


@program
def medseg_surface_dice_and_dice_metric_ignore_empty(torch):
    """The normalized surface Dice of Nikolov et al. at two tolerances (the fraction of both
    surfaces lying within tau mm of the other), and MONAI's ``DiceMetric`` over a batch of
    one-hot predictions with ``ignore_empty=True`` giving NaN for empty ground truth, reduced
    with ``nanmean`` per class and overall."""
    gt_np, pr_np = _masks(22)
    gt, pr = torch.tensor(gt_np), torch.tensor(pr_np)
    spacing = torch.tensor([1.5, 1.0, 0.75])
    p_gt = torch.nonzero(_boundary(torch, gt)).float() * spacing
    p_pr = torch.nonzero(_boundary(torch, pr)).float() * spacing
    d = torch.cdist(p_gt, p_pr)
    d_gt, d_pr = d.min(1).values, d.min(0).values
    nsd = {}
    for tau in (1.2, 2.6):
        nsd[str(tau)] = ((d_gt <= tau).sum() + (d_pr <= tau).sum()) / (len(d_gt) + len(d_pr))
    # DiceMetric(include_background=False, reduction="mean_batch", ignore_empty=True)
    y_pred_lab = torch.tensor(ints(23, 3, 3, 4, 4, 4))
    y_lab = torch.tensor(ints(24, 3, 3, 4, 4, 4))
    y_lab[1][y_lab[1] == 2] = 0  # class 2 absent from the second case
    y_pred = torch.nn.functional.one_hot(y_pred_lab, 3).permute(0, 4, 1, 2, 3)[:, 1:].float()
    y = torch.nn.functional.one_hot(y_lab, 3).permute(0, 4, 1, 2, 3)[:, 1:].float()
    inter = torch.sum(y * y_pred, dim=(2, 3, 4))
    y_o = torch.sum(y, dim=(2, 3, 4))
    denom = y_o + torch.sum(y_pred, dim=(2, 3, 4))
    score = torch.where(y_o > 0, 2.0 * inter / denom, torch.tensor(float("nan")))
    return {"nsd": nsd, "dice_per_case": score, "mean_batch": torch.nanmean(score, dim=0),
            "mean": torch.nanmean(score), "not_nans": (~torch.isnan(score)).sum(0)}  # fmt: skip


@program
def medseg_poly_lr_schedule_nnunet_sgd(torch):
    """nnU-Net's ``PolyLRScheduler`` (an ``LRScheduler`` subclass setting ``initial_lr * (1 -
    step / max_steps) ** 0.9`` on every param group) next to ``PolynomialLR(power=0.9)`` and a
    linear-warmup-then-poly ``LambdaLR``, each driving SGD (momentum 0.99, Nesterov, weight decay
    3e-5) on a 1x1x1 Conv3d segmentation head; learning rates and final weights."""

    class PolyLRScheduler(torch.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, initial_lr, max_steps, exponent=0.9, current_step=None):
            self.optimizer = optimizer
            self.initial_lr = initial_lr
            self.max_steps = max_steps
            self.exponent = exponent
            self.ctr = 0
            super().__init__(optimizer, current_step if current_step is not None else -1)

        def step(self, current_step=None):
            if current_step is None or current_step == -1:
                current_step = self.ctr
                self.ctr += 1
            new_lr = self.initial_lr * (1 - current_step / self.max_steps) ** self.exponent
            for param_group in self.optimizer.param_groups:
                param_group["lr"] = new_lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    x = torch.tensor(arr(25, 2, 4, 3, 3, 3))
    y = torch.tensor(ints(26, 3, 2, 3, 3, 3))
    results = {}
    for kind in ("nnunet", "polynomial", "warmup_poly"):
        head = torch.nn.Conv3d(4, 3, 1)
        set_weights(torch, head, seed=27)
        opt = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.99, nesterov=True,
                              weight_decay=3e-5)  # fmt: skip
        if kind == "nnunet":
            sched = PolyLRScheduler(opt, 0.01, 8)
        elif kind == "polynomial":
            sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=8, power=0.9)
        else:
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s, warm=2: (s + 1) / warm if s < warm else (1 - (s - warm) / 6) ** 0.9
            )
        lrs, losses = [], []
        for _ in range(6):
            lrs.append(opt.param_groups[0]["lr"])
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(head(x), y)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        results[kind] = {"lrs": lrs, "losses": losses, "weight": head.weight[:, :, 0, 0, 0],
                         "last_lr": sched.get_last_lr()}  # fmt: skip
    return results


@program
def medseg_ct_mr_normalization_and_resampling(torch):
    """nnU-Net-style preprocessing: CT intensities clipped to the foreground's 0.5/99.5
    percentiles and z-scored with foreground mean/std, MR z-scored inside the nonzero mask,
    the image resampled to a target spacing with trilinear interpolation, and the segmentation
    resampled through its one-hot channels (linear, then argmax) and by nearest neighbour."""
    F = torch.nn.functional
    ct_np = (arr(28, 6, 7, 8, scale=300.0) + 40.0).astype(np.float32)
    seg_np = np.zeros((6, 7, 8), dtype=np.int64)
    seg_np[1:5, 2:6, 2:7] = 1
    seg_np[2:4, 3:5, 3:5] = 2
    ct, seg = torch.tensor(ct_np), torch.tensor(seg_np)
    fg = ct[seg > 0]
    lo, hi = torch.quantile(fg, 0.005), torch.quantile(fg, 0.995)
    mean, std = fg.mean(), fg.std()
    ct_norm = (torch.clamp(ct, lo, hi) - mean) / max(std.item(), 1e-8)
    mr = torch.relu(torch.tensor(arr(29, 6, 7, 8)) + 0.3)
    mask = mr > 0
    mr_norm = mr.clone()
    mr_norm[mask] = (mr[mask] - mr[mask].mean()) / mr[mask].std()
    mr_norm[~mask] = 0
    spacing, target_spacing = (3.0, 1.0, 1.0), (2.2, 1.3, 1.7)
    new_shape = [round(s * sp / ts) for s, sp, ts in zip(ct.shape, spacing, target_spacing)]
    img_rs = F.interpolate(ct_norm[None, None], size=new_shape, mode="trilinear",
                           align_corners=False)  # fmt: skip
    oh = F.one_hot(seg, 3).permute(3, 0, 1, 2)[None].float()
    seg_linear = F.interpolate(oh, size=new_shape, mode="trilinear", align_corners=False)
    seg_rs = seg_linear.argmax(1)
    seg_nn = F.interpolate(seg[None, None].float(), size=new_shape, mode="nearest").long()
    return {"clip": [lo, hi], "mean_std": [mean, std], "ct_norm": ct_norm[2, 3],
            "mr_norm": mr_norm[3], "new_shape": new_shape, "img_rs": img_rs[0, 0, 4],
            "seg_rs": seg_rs, "seg_nn": seg_nn, "agree": (seg_rs == seg_nn[:, 0]).float().mean(),
            "vol_rs": torch.bincount(seg_rs.flatten(), minlength=3)}  # fmt: skip
