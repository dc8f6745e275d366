"""More layers and losses: a PixelShuffle super-resolution net with reflection padding, a triplet
embedding step, heteroscedastic regression with GaussianNLLLoss, margin losses on a Bilinear
scorer, shuffles/shrinks/3-d padding, lazy modules, ``nn.Transformer`` and every new ``repr``."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def superres_pixelshuffle_training(torch):
    nn = torch.nn
    model = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(1, 8, 3), nn.ReLU(),
                          nn.ReplicationPad2d((1, 1, 1, 1)), nn.Conv2d(8, 4, 3),
                          nn.PixelShuffle(2))  # fmt: skip
    set_weights(torch, model, seed=11)
    lo = torch.tensor(arr(1, 2, 1, 6, 5))
    hi = torch.tensor(arr(2, 2, 1, 12, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(2):
        loss = nn.MSELoss()(model(lo), hi)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = model(lo)
    down = nn.PixelUnshuffle(2)(out)
    return {"losses": losses, "out": out, "unshuffled": down, "params": params(model)}


@program(rtol=5e-4, atol=5e-5)
def triplet_embedding_step(torch):
    nn = torch.nn
    embed = set_weights(torch, nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)), seed=3)
    a, p, n = (torch.tensor(arr(s, 5, 6)) for s in (20, 21, 22))
    cos = nn.CosineSimilarity(dim=1)
    dist = nn.PairwiseDistance(p=2.0)
    triplet = nn.TripletMarginLoss(margin=0.5, swap=True)
    cos_triplet = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, y: 1.0 - cos(x, y), margin=0.3
    )
    opt = torch.optim.SGD(embed.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        ea, ep, en = embed(a), embed(p), embed(n)
        loss = triplet(ea, ep, en) + cos_triplet(ea, ep, en)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ea, ep, en = embed(a), embed(p), embed(n)
    per = nn.functional.triplet_margin_loss(ea, ep, en, margin=1.0, p=1, reduction="none")
    return {"losses": losses, "cos_pos": cos(ea, ep), "dist_neg": dist(ea, en),
            "per_sample": per, "grads": grads(embed)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def heteroscedastic_gaussian_nll(torch):
    nn = torch.nn

    class MeanVar(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 16), nn.Softplus())
            self.mean = nn.Linear(16, 1)
            self.log_var = nn.Linear(16, 1)

        def forward(self, x):
            h = self.body(x)
            return self.mean(h), self.log_var(h).exp()

    model = set_weights(torch, MeanVar(), seed=5)
    x = torch.tensor(arr(30, 32, 3))
    y = torch.tensor(arr(31, 32, 1))
    crit = nn.GaussianNLLLoss(full=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        mu, var = model(x)
        loss = crit(mu, y, var)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    mu, var = model(x)
    counts = torch.tensor(np.random.default_rng(7).poisson(2.0, (32, 1)).astype(np.float32))
    poisson = nn.PoissonNLLLoss(full=True)(mu, counts)
    poisson_rate = nn.functional.poisson_nll_loss(var, counts, log_input=False, reduction="sum")
    return {"losses": losses, "mu": mu, "var": var, "poisson": poisson,
            "poisson_rate": poisson_rate, "params": params(model)}  # fmt: skip


@program
def bilinear_margin_losses(torch):
    nn = torch.nn
    bil = set_weights(torch, nn.Bilinear(4, 3, 5), seed=8)
    x1 = torch.tensor(arr(40, 6, 4), requires_grad=True)
    x2 = torch.tensor(arr(41, 6, 3))
    scores = bil(x1, x2)
    labels = torch.tensor(ints(42, 5, 6))
    multilabel = torch.tensor(np.array([[0, 3, -1, 1, 2], [4, -1, 0, 0, 0], [1, 2, 3, 0, -1],
                                        [2, -1, 1, 1, 1], [0, 1, 2, 3, 4], [3, 4, -1, -1, -1]]))  # fmt: skip
    soft_targets = torch.tensor((arr(43, 6, 5) > 0).astype(np.float32))
    signs = torch.tensor(np.sign(arr(44, 6, 5)).astype(np.float32))
    w = torch.tensor(np.array([1.0, 0.5, 2.0, 1.5, 1.0], dtype=np.float32))
    losses = {
        "multi_margin": nn.MultiMarginLoss()(scores, labels),
        "multi_margin_p2_w": nn.MultiMarginLoss(p=2, margin=0.7, weight=w, reduction="none")(scores, labels),
        "multilabel_margin": nn.MultiLabelMarginLoss()(scores, multilabel),
        "multilabel_soft": nn.MultiLabelSoftMarginLoss(weight=w)(scores, soft_targets),
        "soft_margin": nn.SoftMarginLoss(reduction="sum")(scores, signs),
        "hinge": nn.HingeEmbeddingLoss(margin=0.5)(scores, signs),
    }  # fmt: skip
    total = sum(v.sum() for v in losses.values())
    total.backward()
    return {**losses, "scores": scores, "dx1": x1.grad, "grads": grads(bil)}


@program
def shuffles_shrinks_and_padding(torch):
    nn = torch.nn
    x = torch.tensor(arr(50, 2, 4, 3, 3), requires_grad=True)
    v = torch.tensor(arr(51, 1, 2, 3, 4, 3), requires_grad=True)
    outs = {
        "channel_shuffle": nn.ChannelShuffle(2)(x),
        "softmax2d": nn.Softmax2d()(x),
        "hardshrink": nn.Hardshrink(0.6)(x),
        "softshrink": nn.Softshrink(0.4)(x),
        "rrelu_eval": nn.RReLU(0.1, 0.3).eval()(x),
        "nearest": nn.UpsamplingNearest2d(scale_factor=2)(x),
        "bilinear_up": nn.UpsamplingBilinear2d(size=(5, 4))(x),
        "reflect1d": nn.ReflectionPad1d((2, 1))(x[0]),
        "replicate1d": nn.ReplicationPad1d(2)(x[0]),
        "circular2d": nn.CircularPad2d((1, 2, 0, 1))(x),
        "constant2d": nn.ConstantPad2d((1, 0, 2, 1), -0.5)(x),
        "reflect3d": nn.ReflectionPad3d((1, 1, 2, 0, 1, 1))(v),
        "replicate3d": nn.ReplicationPad3d(1)(v),
        "circular3d": nn.CircularPad3d((0, 1, 1, 0, 2, 1))(v),
        "zero3d": nn.ZeroPad3d((1, 0, 0, 1, 1, 0))(v),
        "zero1d": nn.ZeroPad1d(1)(x[0, 0]),
        "constant3d": nn.ConstantPad3d(1, 2.0)(v),
        "instance3d": nn.InstanceNorm3d(2, affine=True)(v),
        "alpha_eval": nn.AlphaDropout(0.3).eval()(x),
    }
    sum(((o * (i + 1)).sum() for i, o in enumerate(outs.values()))).backward()
    return {**outs, "dx": x.grad, "dv": v.grad}


@program(rtol=5e-4, atol=5e-5)
def lazy_modules_and_transformer(torch):
    nn = torch.nn
    lin, conv, bn = nn.LazyLinear(3), nn.LazyConv2d(4, 3, padding=1), nn.LazyBatchNorm2d()
    conv1, conv3, bn1 = nn.LazyConv1d(2, 2), nn.LazyConv3d(2, 1), nn.LazyBatchNorm1d()
    before = {"lin": repr(lin), "conv": repr(conv), "bn": repr(bn), "conv1": repr(conv1),
              "conv3": repr(conv3), "bn1": repr(bn1)}  # fmt: skip
    x = torch.tensor(arr(60, 2, 3, 5, 5))
    h = bn(conv(x))
    flat = lin(h.mean((2, 3)).repeat(1, 2))
    conv1(torch.tensor(arr(61, 2, 3, 6)))
    conv3(torch.tensor(arr(62, 1, 2, 2, 2, 2)))
    bn1(torch.tensor(arr(63, 4, 5)))
    after = {"lin": repr(lin), "conv": repr(conv), "bn": repr(bn), "conv1": repr(conv1),
             "conv3": repr(conv3), "bn1": repr(bn1), "in_features": lin.in_features,
             "weight_shape": list(conv.weight.shape)}  # fmt: skip
    set_weights(torch, conv, seed=64)
    set_weights(torch, lin, seed=65)
    y = lin(bn(conv(x)).mean((2, 3)).repeat(1, 2))
    t = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                       dim_feedforward=16, dropout=0.0)  # fmt: skip
    set_weights(torch, t, seed=66)
    t.eval()
    src, tgt = torch.tensor(arr(67, 5, 2, 8)), torch.tensor(arr(68, 4, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    with torch.no_grad():
        out = t(src, tgt, tgt_mask=mask)
    return {"before": before, "after": after, "flat_shape": list(flat.shape), "y": y,
            "mask": mask, "transformer": out, "transformer_repr": repr(t)}  # fmt: skip


@program
def reprs_of_new_modules(torch):
    nn = torch.nn
    mods = [
        nn.ZeroPad1d(2), nn.ZeroPad3d((1, 2, 3, 4, 5, 6)), nn.ConstantPad1d(2, 0.5),
        nn.ConstantPad2d((1, 2, 3, 4), -1.0), nn.ConstantPad3d(1, 0.0), nn.ReflectionPad1d(3),
        nn.ReflectionPad2d((1, 0, 2, 0)), nn.ReflectionPad3d(1), nn.ReplicationPad1d((1, 2)),
        nn.ReplicationPad2d(2), nn.ReplicationPad3d(1), nn.CircularPad1d(1),
        nn.CircularPad2d((1, 1, 2, 2)), nn.CircularPad3d(2), nn.PixelShuffle(3),
        nn.PixelUnshuffle(2), nn.ChannelShuffle(4), nn.Softmax2d(),
        nn.UpsamplingNearest2d(scale_factor=2), nn.UpsamplingBilinear2d(size=(4, 6)),
        nn.CosineSimilarity(dim=2), nn.PairwiseDistance(p=1.0), nn.Bilinear(3, 4, 5, bias=False),
        nn.Hardshrink(), nn.Softshrink(0.25), nn.RReLU(), nn.RReLU(0.2, 0.4, inplace=True),
        nn.Dropout3d(0.2), nn.AlphaDropout(), nn.FeatureAlphaDropout(0.1),
        nn.InstanceNorm3d(4, affine=True), nn.TripletMarginLoss(),
        nn.TripletMarginWithDistanceLoss(), nn.GaussianNLLLoss(), nn.PoissonNLLLoss(),
        nn.HingeEmbeddingLoss(), nn.SoftMarginLoss(), nn.MultiLabelSoftMarginLoss(),
        nn.MultiMarginLoss(), nn.MultiLabelMarginLoss(),
    ]  # fmt: skip
    return {type(m).__name__ + f"_{i}": repr(m) for i, m in enumerate(mods)}
