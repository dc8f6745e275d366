"""Detection and segmentation without torchvision: box geometry, NMS, anchors, detection and segmentation losses, metrics."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _rand_boxes(seed, n, size=32.0):
    g = np.random.default_rng(seed)
    xy = g.uniform(0, size * 0.7, (n, 2))
    wh = g.uniform(2.0, size * 0.4, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


@program
def box_iou_giou_diou_pairwise_and_loss(torch):
    def box_area(b):
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

    def pairwise_iou(a, b):
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        union = box_area(a)[:, None] + box_area(b)[None, :] - inter
        return inter / union, union

    def generalized_iou(a, b):
        iou, union = pairwise_iou(a, b)
        lt = torch.minimum(a[:, None, :2], b[None, :, :2])
        rb = torch.maximum(a[:, None, 2:], b[None, :, 2:])
        area = (rb - lt).clamp_min(0).prod(dim=-1)
        return iou - (area - union) / area

    def diou_ciou_loss(p, t, eps=1e-7):
        x1, y1, x2, y2 = p.unbind(-1)
        x1g, y1g, x2g, y2g = t.unbind(-1)
        iw = (torch.min(x2, x2g) - torch.max(x1, x1g)).clamp(min=0)
        ih = (torch.min(y2, y2g) - torch.max(y1, y1g)).clamp(min=0)
        inter = iw * ih
        union = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter + eps
        iou = inter / union
        cw = torch.max(x2, x2g) - torch.min(x1, x1g)
        ch = torch.max(y2, y2g) - torch.min(y1, y1g)
        c2 = cw.pow(2) + ch.pow(2) + eps
        rho2 = ((x1 + x2 - x1g - x2g) ** 2 + (y1 + y2 - y1g - y2g) ** 2) / 4
        v = (4 / math.pi**2) * torch.pow(
            torch.atan((x2g - x1g) / (y2g - y1g)) - torch.atan((x2 - x1) / (y2 - y1)), 2
        )
        with torch.no_grad():
            alpha = v / (1 - iou + v + eps)
        return (1 - iou + rho2 / c2).mean(), (1 - iou + rho2 / c2 + alpha * v).mean()

    a = torch.from_numpy(_rand_boxes(1, 6))
    b = torch.from_numpy(_rand_boxes(2, 4))
    iou, _ = pairwise_iou(a, b)
    giou = generalized_iou(a, b)
    pred = torch.from_numpy(_rand_boxes(3, 5)).requires_grad_()
    tgt = torch.from_numpy(_rand_boxes(4, 5))
    diou, ciou = diou_ciou_loss(pred, tgt)
    giou_loss = (1 - torch.diag(generalized_iou(pred, tgt))).sum()
    (diou + ciou + giou_loss).backward()
    best_giou, best_idx = giou.max(dim=1)
    return {"iou": iou, "giou": giou, "diou": diou, "ciou": ciou, "giou_loss": giou_loss,
            "pred_grad": pred.grad, "best_giou": best_giou, "best_idx": best_idx,
            "giou_le_iou": bool((giou <= iou + 1e-6).all())}  # fmt: skip


@program
def greedy_nms_and_batched_offsets(torch):
    def box_iou(a, b):
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = torch.max(a[:, None, :2], b[:, :2])
        rb = torch.min(a[:, None, 2:], b[:, 2:])
        inter = (rb - lt).clamp(min=0).prod(2)
        return inter / (area_a[:, None] + area_b - inter)

    def nms(boxes, scores, thresh):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i.item())
            if order.numel() == 1:
                break
            ious = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]]).squeeze(0)
            order = order[1:][ious <= thresh]
        return torch.tensor(keep, dtype=torch.long)

    def nms_matrix(boxes, scores, thresh):
        scores_sorted, idx = torch.sort(scores, descending=True)
        b = boxes[idx]
        ious = box_iou(b, b).triu_(diagonal=1)
        suppressed = torch.zeros(len(b), dtype=torch.bool)
        for i in range(len(b)):
            if not suppressed[i]:
                suppressed |= ious[i] > thresh
        return idx[~suppressed], scores_sorted[~suppressed]

    boxes = torch.from_numpy(_rand_boxes(10, 20, size=24.0))
    scores = torch.from_numpy(
        np.random.default_rng(11).permutation(20).astype(np.float32) / 20 + 0.01
    )
    classes = torch.from_numpy(ints(12, 3, 20))
    keep = nms(boxes, scores, 0.3)
    keep2, kept_scores = nms_matrix(boxes, scores, 0.3)
    offsets = classes.to(boxes) * (boxes.max() + 1)
    keep_b = nms(boxes + offsets[:, None], scores, 0.3)
    per_class = [nms(boxes[classes == c], scores[classes == c], 0.3).tolist() for c in range(3)]
    mask = scores > 0.4
    keep_thr = torch.nonzero(mask).flatten()
    return {"keep": keep, "keep_matrix": keep2, "kept_scores": kept_scores,
            "same": torch.equal(keep, keep2), "keep_batched": keep_b,
            "per_class_counts": [len(p) for p in per_class], "keep_thr": keep_thr,
            "final": boxes.index_select(0, keep_b)}  # fmt: skip


@program
def anchor_generation_meshgrid_and_stack(torch):
    def make_anchors(sizes, ratios, dtype):
        scales = torch.as_tensor(sizes, dtype=dtype)
        aspect = torch.as_tensor(ratios, dtype=dtype)
        h_ratios = torch.sqrt(aspect)
        w_ratios = 1 / h_ratios
        ws = (w_ratios[:, None] * scales[None, :]).view(-1)
        hs = (h_ratios[:, None] * scales[None, :]).view(-1)
        return (torch.stack([-ws, -hs, ws, hs], dim=1) / 2).round()

    def grid_anchors(feat_sizes, strides, cell_anchors):
        out = []
        for (fh, fw), stride, base in zip(feat_sizes, strides, cell_anchors):
            shifts_x = torch.arange(0, fw, dtype=torch.int32) * stride
            shifts_y = torch.arange(0, fh, dtype=torch.int32) * stride
            sy, sx = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
            sx, sy = sx.reshape(-1), sy.reshape(-1)
            shifts = torch.stack((sx, sy, sx, sy), dim=1)
            out.append((shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
        return out

    cells = [
        make_anchors((16, 32), (0.5, 1.0, 2.0), torch.float32),
        make_anchors((64,), (0.5, 1.0, 2.0), torch.float32),
    ]
    levels = grid_anchors([(4, 5), (2, 3)], [8, 16], cells)
    all_anchors = torch.cat(levels)
    xs, ys = torch.meshgrid(torch.linspace(0.5, 4.5, 5), torch.arange(0.5, 4, 1.0), indexing="xy")
    centers = torch.stack([xs, ys], -1).flatten(0, 1)
    strides = torch.cat(
        [torch.full((len(lv),), s, dtype=torch.float32) for lv, s in zip(levels, [8, 16])]
    )
    yolo_grid = torch.cartesian_prod(torch.arange(3), torch.arange(2))
    wh = (all_anchors[:, 2:] - all_anchors[:, :2]).clamp(min=1)
    inside = ((all_anchors[:, :2] >= 0) & (all_anchors[:, 2:] <= 48)).all(dim=1)
    return {"cells0": cells[0], "cells1": cells[1], "anchors": all_anchors, "centers": centers,
            "strides": strides, "yolo_grid": yolo_grid, "log_wh": wh.log(),
            "num_inside": int(inside.sum()), "inside_idx": inside.nonzero().squeeze(1),
            "dtypes": [str(cells[0].dtype), str(levels[0].dtype)]}  # fmt: skip


@program
def box_coder_encode_decode_roundtrip(torch):
    clip = math.log(1000.0 / 16)

    def encode(ref, proposals, weights=(10.0, 10.0, 5.0, 5.0)):
        wx, wy, ww, wh = weights
        pw = proposals[:, 2] - proposals[:, 0]
        ph = proposals[:, 3] - proposals[:, 1]
        px = proposals[:, 0] + 0.5 * pw
        py = proposals[:, 1] + 0.5 * ph
        gw = ref[:, 2] - ref[:, 0]
        gh = ref[:, 3] - ref[:, 1]
        gx = ref[:, 0] + 0.5 * gw
        gy = ref[:, 1] + 0.5 * gh
        return torch.stack((wx * (gx - px) / pw, wy * (gy - py) / ph,
                            ww * torch.log(gw / pw), wh * torch.log(gh / ph)), dim=1)  # fmt: skip

    def decode(deltas, boxes, weights=(10.0, 10.0, 5.0, 5.0)):
        widths = boxes[:, 2:3] - boxes[:, 0:1]
        heights = boxes[:, 3:4] - boxes[:, 1:2]
        ctr = boxes[:, :2] + 0.5 * torch.cat([widths, heights], 1)
        w = deltas.new_tensor(weights)
        dx, dy, dw, dh = (deltas / w).split(1, dim=1)
        dw = torch.clamp(dw, max=clip)
        dh = dh.clamp(max=clip)
        cx = dx * widths + ctr[:, 0:1]
        cy = dy * heights + ctr[:, 1:2]
        pw = torch.exp(dw) * widths
        ph = dh.exp() * heights
        return torch.cat([cx - 0.5 * pw, cy - 0.5 * ph, cx + 0.5 * pw, cy + 0.5 * ph], dim=1)

    proposals = torch.from_numpy(_rand_boxes(20, 8))
    gt = torch.from_numpy(_rand_boxes(21, 8))
    deltas = encode(gt, proposals)
    back = decode(deltas, proposals)
    wild = torch.tensor(arr(22, 8, 4, scale=30.0))
    decoded_wild = decode(wild, proposals)
    clipped = decoded_wild.clone()
    clipped[:, 0::2] = clipped[:, 0::2].clamp(0, 32)
    clipped[:, 1::2].clamp_(min=0, max=32)
    pred = torch.zeros(8, 4, requires_grad=True)
    opt = torch.optim.Adam([pred], lr=0.1)
    losses = []
    for _ in range(5):
        loss = torch.nn.functional.l1_loss(decode(pred, proposals), gt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"deltas": deltas, "back": back, "roundtrip": torch.allclose(back, gt, atol=1e-4),
            "decoded_wild": decoded_wild, "clipped": clipped, "losses": losses, "pred": pred}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def retinanet_style_head_focal_smooth_l1(torch):
    nn, F = torch.nn, torch.nn.functional

    class Head(nn.Module):
        def __init__(self, c, a, k):
            super().__init__()
            self.a, self.k = a, k
            self.tower = nn.Sequential(
                nn.Conv2d(c, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(inplace=True)
            )
            self.cls = nn.Conv2d(8, a * k, 3, padding=1)
            self.reg = nn.Conv2d(8, a * 4, 3, padding=1)

        def forward(self, x):
            t = self.tower(x)
            n = x.shape[0]
            cls = self.cls(t).permute(0, 2, 3, 1).reshape(n, -1, self.k)
            reg = self.reg(t).permute(0, 2, 3, 1).contiguous().view(n, -1, 4)
            return cls, reg

    head = set_weights(torch, Head(4, 3, 5), seed=30)
    with torch.no_grad():
        head.cls.bias.fill_(-math.log((1 - 0.01) / 0.01))
    opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    feats = torch.tensor(arr(31, 2, 4, 4, 4))
    n_anchors = 4 * 4 * 3
    matched = torch.from_numpy(
        ints(32, 7, 2, n_anchors) - 2
    )  # -2 ignore, -1 background, 0..4 class
    box_tgt = torch.tensor(arr(33, 2, n_anchors, 4, scale=0.5))
    hist = []
    for _ in range(4):
        cls, reg = head(feats)
        valid = matched >= -1
        fg = matched >= 0
        onehot = torch.zeros_like(cls)
        onehot[fg] = F.one_hot(matched[fg], 5).to(cls.dtype)
        p = cls.sigmoid()
        ce = F.binary_cross_entropy_with_logits(cls, onehot, reduction="none")
        p_t = p * onehot + (1 - p) * (1 - onehot)
        a_t = 0.25 * onehot + 0.75 * (1 - onehot)
        focal = (a_t * ce * (1 - p_t) ** 2)[valid].sum()
        num_fg = max(1, fg.sum().item())
        reg_loss = F.smooth_l1_loss(reg[fg], box_tgt[fg], beta=1 / 9, reduction="sum")
        loss = (focal + reg_loss) / num_fg
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), max_norm=5.0)
        opt.step()
        hist.append([focal.item(), reg_loss.item()])
    return {"hist": hist, "params": params(head), "huber": F.huber_loss(reg[fg], box_tgt[fg], delta=0.5),
            "scores_max": cls.sigmoid().amax(dim=-1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def roi_align_with_affine_grid_and_grid_sample(torch):
    nn, F = torch.nn, torch.nn.functional

    def roi_align(feat, rois, out_size, spatial_scale):
        n, c, h, w = feat.shape
        batch_idx = rois[:, 0].long()
        boxes = rois[:, 1:] * spatial_scale
        x1, y1, x2, y2 = boxes.unbind(1)
        theta = torch.zeros(len(rois), 2, 3, dtype=feat.dtype)
        theta[:, 0, 0] = (x2 - x1) / w
        theta[:, 0, 2] = (x1 + x2) / w - 1
        theta[:, 1, 1] = (y2 - y1) / h
        theta[:, 1, 2] = (y1 + y2) / h - 1
        grid = F.affine_grid(theta, (len(rois), c, out_size, out_size), align_corners=False)
        return F.grid_sample(
            feat[batch_idx], grid, mode="bilinear", padding_mode="border", align_corners=False
        )

    backbone = set_weights(
        torch, nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)), seed=40
    )
    box_head = set_weights(
        torch,
        nn.Sequential(nn.Flatten(), nn.Linear(6 * 3 * 3, 16), nn.ReLU(), nn.Linear(16, 4)),
        seed=41,
    )
    img = torch.tensor(arr(42, 2, 3, 12, 12))
    rois = torch.tensor(np.array([[0, 1.0, 1.5, 8.0, 9.0], [1, 0.0, 0.0, 12.0, 12.0],
                                  [0, 4.2, 2.7, 10.5, 7.1], [1, 3.3, 5.0, 6.6, 11.0]], np.float32))  # fmt: skip
    labels = torch.tensor([1, 0, 3, 2])
    opt = torch.optim.RMSprop(
        list(backbone.parameters()) + list(box_head.parameters()), lr=1e-2, alpha=0.9
    )
    losses = []
    for _ in range(3):
        feat = backbone(img)
        pooled = roi_align(feat, rois, 3, spatial_scale=0.5)
        loss = F.cross_entropy(box_head(pooled), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    nearest = F.grid_sample(
        img,
        F.affine_grid(
            torch.eye(2, 3).unsqueeze(0).repeat(2, 1, 1) * 0.5, (2, 3, 4, 4), align_corners=True
        ),
        mode="nearest",
        align_corners=True,
    )
    zeros_pad = F.grid_sample(
        feat,
        F.affine_grid(
            torch.tensor([[[1.4, 0.2, 0.1], [-0.1, 1.3, 0.0]]]).expand(2, 2, 3),
            (2, 6, 5, 5),
            align_corners=False,
        ),
        padding_mode="zeros",
        align_corners=False,
    )
    # high-quality image crops for a mask head: bicubic sampling of the same RoI grids
    crop_grid = F.affine_grid(
        torch.tensor([[[0.5, 0.0, -0.2], [0.0, 0.6, 0.1]]]).repeat(2, 1, 1),
        (2, 3, 6, 6),
        align_corners=False,
    )
    bicubic_crop = F.grid_sample(
        img, crop_grid, mode="bicubic", padding_mode="border", align_corners=False
    )
    return {"losses": losses, "pooled": pooled,
        "bicubic_crop": bicubic_crop, "grads": grads(box_head), "bb_grads": grads(backbone),
            "nearest": nearest, "zeros_pad": zeros_pad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def semantic_seg_ce_ignore_index_class_weights(torch):
    nn, F = torch.nn, torch.nn.functional

    class TinyFCN(nn.Module):
        def __init__(self, n_cls):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                     nn.Conv2d(8, 8, 3, padding=2, dilation=2), nn.ReLU())  # fmt: skip
            self.classifier = nn.Conv2d(8, n_cls, 1)

        def forward(self, x):
            out = self.classifier(self.enc(x))
            return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)

    model = set_weights(torch, TinyFCN(4), seed=50)
    img = torch.tensor(arr(51, 2, 3, 8, 8))
    target = torch.from_numpy(ints(52, 4, 2, 8, 8))
    target[:, 0, :] = 255
    target[1, :, -2:] = 255
    freq = torch.bincount(target[target != 255].flatten(), minlength=4).float()
    weight = 1.0 / torch.log(1.02 + freq / freq.sum())
    crit = nn.CrossEntropyLoss(weight=weight, ignore_index=255)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=0.9)
    losses = []
    model.train()
    for _ in range(3):
        out = model(img)
        loss = crit(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = model(img)
        per_pixel = F.cross_entropy(out, target, ignore_index=255, reduction="none")
        nll = F.nll_loss(
            F.log_softmax(out, dim=1), target, weight=weight, ignore_index=255, reduction="sum"
        )
        ohem = per_pixel.flatten().topk(10).values.mean()
    return {"losses": losses, "weight": weight, "per_pixel": per_pixel, "nll": nll, "ohem": ohem,
            "ignored_zero": bool((per_pixel[target == 255] == 0).all()), "lr": sched.get_last_lr(),
            "bn_mean": model.enc[1].running_mean, "bn_var": model.enc[1].running_var}  # fmt: skip


@program
def confusion_matrix_mean_iou_bincount(torch):
    n_cls = 5
    logits = torch.tensor(arr(60, 3, n_cls, 6, 7))
    target = torch.from_numpy(ints(61, n_cls, 3, 6, 7))
    target[0, :2] = 255
    target[target == 4] = 3  # class 4 never appears in target
    pred = logits.argmax(dim=1)

    def fast_hist(pred, label, n):
        k = (label >= 0) & (label < n)
        return torch.bincount(n * label[k].to(torch.int64) + pred[k], minlength=n**2).reshape(n, n)

    hist = fast_hist(pred, target, n_cls)
    tp = torch.diag(hist).float()
    iou = tp / (hist.sum(1) + hist.sum(0) - torch.diag(hist)).float()
    miou = torch.nanmean(iou)
    acc = tp.sum() / hist.sum()
    cls_acc = tp / hist.sum(dim=1)
    freq = hist.sum(1).float() / hist.sum()
    fwiou = (freq[freq > 0] * iou[freq > 0]).sum()
    present = torch.unique(target[target != 255], sorted=True)
    bc_weighted = torch.bincount(
        pred.flatten(), weights=logits.max(dim=1).values.flatten(), minlength=n_cls
    )
    conf = torch.zeros(n_cls, n_cls, dtype=torch.long)
    valid = target != 255
    conf.index_put_(
        (target[valid], pred[valid]),
        torch.ones(int(valid.sum()), dtype=torch.long),
        accumulate=True,
    )
    return {"hist": hist, "iou": iou, "miou": miou, "acc": acc, "cls_acc": cls_acc, "fwiou": fwiou,
            "present": present, "bc_weighted": bc_weighted, "conf_equal": torch.equal(conf, hist),
            "nan_mask": torch.isnan(iou), "iou_nan_to_num": torch.nan_to_num(iou, nan=-1.0)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lovasz_softmax_and_hinge_losses(torch):
    nn, F = torch.nn, torch.nn.functional

    def lovasz_grad(gt_sorted):
        gts = gt_sorted.sum()
        intersection = gts - gt_sorted.float().cumsum(0)
        union = gts + (1 - gt_sorted).float().cumsum(0)
        jaccard = 1.0 - intersection / union
        jaccard[1:] = jaccard[1:] - jaccard[:-1].clone()
        return jaccard

    def lovasz_softmax_flat(probas, labels):
        losses = []
        for c in range(probas.size(1)):
            fg = (labels == c).float()
            if fg.sum() == 0:
                continue
            errors = (fg - probas[:, c]).abs()
            errors_sorted, perm = torch.sort(errors, 0, descending=True)
            losses.append(torch.dot(errors_sorted, lovasz_grad(fg[perm])))
        return torch.stack(losses).mean()

    def lovasz_hinge_flat(logits, labels):
        signs = 2.0 * labels.float() - 1.0
        errors = 1.0 - logits * signs
        errors_sorted, perm = torch.sort(errors, dim=0, descending=True)
        return torch.dot(F.elu(errors_sorted) + 1, lovasz_grad(labels[perm]))

    net = set_weights(
        torch, nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.SiLU(), nn.Conv2d(6, 3, 1)), seed=70
    )
    x = torch.tensor(arr(71, 2, 2, 5, 5))
    y = torch.from_numpy(ints(72, 3, 2, 5, 5))
    opt = torch.optim.Adagrad(net.parameters(), lr=0.1)
    hist = []
    for _ in range(3):
        logits = net(x)
        probas = logits.softmax(1).permute(0, 2, 3, 1).reshape(-1, 3)
        ls = lovasz_softmax_flat(probas, y.view(-1))
        lh = lovasz_hinge_flat(logits[:, 1].flatten(), (y == 1).view(-1).long())
        loss = ls + 0.5 * lh
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append([ls.item(), lh.item()])
    return {"hist": hist, "grads": grads(net), "logits": logits}


@program
def mask_upsampling_interpolate_and_paste(torch):
    F = torch.nn.functional
    masks = torch.tensor(arr(80, 3, 1, 7, 7))
    up = {
        "bilinear": F.interpolate(masks, size=(14, 14), mode="bilinear", align_corners=False),
        "bilinear_ac": F.interpolate(masks, scale_factor=2, mode="bilinear", align_corners=True),
        "nearest": F.interpolate(masks, scale_factor=1.5, mode="nearest"),
        "nearest_exact": F.interpolate(masks, size=(10, 11), mode="nearest-exact"),
        "bicubic": F.interpolate(masks, size=(9, 12), mode="bicubic", align_corners=False),
        "area": F.interpolate(masks, size=(3, 3), mode="area"),
        "upsample_mod": torch.nn.Upsample(scale_factor=2, mode="bilinear")(masks),
        "antialias": F.interpolate(masks, size=(4, 5), mode="bilinear", antialias=True),
    }
    boxes = torch.tensor([[2, 3, 12, 10], [0, 0, 6, 16], [5, 8, 16, 15]])
    canvas = torch.zeros(3, 16, 16)
    for i, (x1, y1, x2, y2) in enumerate(boxes.tolist()):
        m = F.interpolate(
            masks[i : i + 1], size=(y2 - y1, x2 - x1), mode="bilinear", align_corners=False
        )
        canvas[i, y1:y2, x1:x2] = m[0, 0].sigmoid()
    binary = canvas > 0.5
    inter = (binary[:, None] & binary[None]).flatten(2).sum(-1)
    area = binary.flatten(1).sum(1)
    mask_iou = inter / (area[:, None] + area[None] - inter).clamp(min=1)
    label_map = torch.where(
        canvas.amax(0) > 0.5, canvas.argmax(0) + 1, torch.zeros((), dtype=torch.long)
    )
    x = torch.tensor(arr(81, 1, 2, 5, 5), requires_grad=True)
    F.interpolate(x, scale_factor=3, mode="bilinear", align_corners=False).pow(2).sum().backward()
    return {**up, "canvas": canvas, "mask_iou": mask_iou, "label_map": label_map,
            "areas": area, "dx": x.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def centernet_heatmap_topk_decode_and_loss(torch):
    nn, F = torch.nn, torch.nn.functional

    def neg_loss(pred, gt):
        pos = gt.eq(1).float()
        neg = gt.lt(1).float()
        neg_w = torch.pow(1 - gt, 4)
        pred = pred.clamp(1e-4, 1 - 1e-4)
        pos_loss = (torch.log(pred) * torch.pow(1 - pred, 2) * pos).sum()
        neg_loss = (torch.log(1 - pred) * torch.pow(pred, 2) * neg_w * neg).sum()
        num_pos = pos.sum()
        return -(pos_loss + neg_loss) / num_pos.clamp(min=1)

    def decode(heat, wh, k):
        b, c, h, w = heat.shape
        hmax = F.max_pool2d(heat, 3, stride=1, padding=1)
        heat = heat * (hmax == heat).float()
        scores, inds = torch.topk(heat.view(b, -1), k)
        clses = torch.div(inds, h * w, rounding_mode="floor")
        inds = inds % (h * w)
        ys = (inds // w).float()
        xs = torch.remainder(inds, w).float()
        wh = wh.view(b, 2, -1).permute(0, 2, 1).gather(1, inds.unsqueeze(2).expand(b, k, 2))
        return (
            torch.stack(
                [
                    xs - wh[..., 0] / 2,
                    ys - wh[..., 1] / 2,
                    xs + wh[..., 0] / 2,
                    ys + wh[..., 1] / 2,
                ],
                2,
            ),
            scores,
            clses,
        )

    head = set_weights(torch, nn.Conv2d(3, 2 + 2, 3, padding=1), seed=90)
    x = torch.tensor(arr(91, 2, 3, 12, 12))
    yy, xx = torch.meshgrid(torch.arange(12.0), torch.arange(12.0), indexing="ij")
    centers = torch.tensor([[[3.0, 4.0], [8.0, 9.0]], [[6.0, 2.0], [10.0, 7.0]]])
    gt = torch.zeros(2, 2, 12, 12)
    for b in range(2):
        for j, (cx, cy) in enumerate(centers[b].tolist()):
            g = torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * 1.5**2))
            gt[b, j] = torch.maximum(gt[b, j], g)
    opt = torch.optim.SGD(head.parameters(), lr=0.1, nesterov=True, momentum=0.9)
    losses = []
    for _ in range(3):
        out = head(x)
        heat = out[:, :2].sigmoid()
        loss = neg_loss(heat, gt) + 0.1 * out[:, 2:].abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        out = head(x)
        boxes, scores, clses = decode(out[:, :2].sigmoid(), out[:, 2:].exp(), k=6)
        flat_vals, flat_idx = out[:, :2].flatten(1).topk(5, dim=1, largest=False, sorted=True)
        amax = out[:, :2].argmax(dim=1)
        peak = torch.unravel_index(out[0, 0].argmax(), (12, 12))
    return {"losses": losses, "boxes": boxes, "scores": scores, "clses": clses, "flat_vals": flat_vals,
            "flat_idx": flat_idx, "amax": amax, "peak": list(peak), "grads": grads(head)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def binary_mask_dice_tversky_bce_unet_step(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
            self.norm = nn.InstanceNorm2d(cout, affine=True)

        def forward(self, x):
            return F.leaky_relu(self.norm(self.conv(x)), 0.1)

    class MiniUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = Block(1, 4)
            self.mid = Block(4, 8)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.dec = Block(8, 4)
            self.out = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            d = self.down(x)
            m = self.mid(F.avg_pool2d(d, 2))
            return self.out(self.dec(torch.cat([self.up(m), d], dim=1)))

    def soft_dice(logits, target, smooth=1.0):
        p = torch.sigmoid(logits).flatten(1)
        t = target.flatten(1)
        return 1 - ((2 * (p * t).sum(1) + smooth) / (p.sum(1) + t.sum(1) + smooth)).mean()

    def tversky(logits, target, alpha=0.7, beta=0.3, gamma=0.75):
        p = torch.sigmoid(logits)
        tp = (p * target).sum(dim=(1, 2, 3))
        fn = ((1 - p) * target).sum(dim=(1, 2, 3))
        fp = (p * (1 - target)).sum(dim=(1, 2, 3))
        ti = tp / (tp + alpha * fn + beta * fp + 1e-6)
        return ((1 - ti) ** gamma).mean()

    model = set_weights(torch, MiniUNet(), seed=100)
    x = torch.tensor(arr(101, 2, 1, 8, 8))
    target = (torch.tensor(arr(102, 2, 1, 8, 8)) > 0.3).float()
    pos_weight = (target == 0).sum() / (target == 1).sum()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.99), amsgrad=True)
    hist = []
    for _ in range(3):
        logits = model(x)
        parts = [F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight), soft_dice(logits, target),
                 tversky(logits, target), F.binary_cross_entropy(logits.sigmoid(), target, reduction="mean")]  # fmt: skip
        loss = parts[0] + parts[1] + parts[2]
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append([p.item() for p in parts])
    pred = (model(x).sigmoid() > 0.5).to(torch.uint8)
    inter = torch.logical_and(pred.bool(), target.bool()).sum()
    union = torch.logical_or(pred.bool(), target.bool()).sum()
    return {"hist": hist, "grads": grads(model), "pred": pred, "iou": inter.float() / union.float(),
            "pos_weight": pos_weight}  # fmt: skip
