"""PyTorch's native spellings that library code calls directly: ``torch.kl_div`` and the other
losses with an integer reduction, the ``*_copy`` view functions, ``unsafe_split``, and the
``torch.nn.parameter`` import path."""

from __future__ import annotations

from programs import program
from programs.common import arr, ints


@program
def native_losses_with_integer_reductions(torch):
    # the ATen spellings (reduction 0 none, 1 mean, 2 sum), as distillation and metric-learning
    # code sometimes calls them, each with its gradient
    x = torch.tensor(arr(1, 6, 4), requires_grad=True)
    y = torch.tensor(arr(2, 6, 4))
    logp = torch.log_softmax(x, dim=1)
    q = torch.softmax(y, dim=1)
    out = {
        "kl_mean": torch.kl_div(logp, q, 1),
        "kl_sum_logt": torch.kl_div(logp, q.log(), 2, log_target=True),
        "kl_none": torch.kl_div(logp, q, 0),
        "bce": torch.binary_cross_entropy_with_logits(
            x, (y > 0).float(), None, torch.tensor([1.0, 2.0, 0.5, 1.5]), 1
        ),  # fmt: skip
        "cos_emb": torch.cosine_embedding_loss(x, y, torch.tensor([1, -1, 1, 1, -1, 1]), 0.2, 2),
        "hinge": torch.hinge_embedding_loss(x, torch.tensor(ints(3, 2, 6, 4)) * 2 - 1, 0.5, 1),
        "ranking": torch.margin_ranking_loss(
            x[:, 0], y[:, 0], torch.tensor([1, -1, 1, -1, 1, 1]), 0.1, 0
        ),  # fmt: skip
        "poisson": torch.poisson_nll_loss(x, y.abs(), True, False, 1e-8, 1),
        "triplet": torch.triplet_margin_loss(x[:2], x[2:4], y[4:], 1.0, 2.0, 1e-6, True, 1),
        "cos_sim": torch.cosine_similarity(x, y, dim=1),
    }
    total = sum(v.sum() for v in out.values())
    (out["grad_x"],) = torch.autograd.grad(total, x)
    return out


@program
def copy_forms_of_views_and_unsafe_splits(torch):
    # functionalised code (torch.export graphs, XLA-style passes) calls the *_copy forms; they
    # give the view's values in storage of their own, so writing to them leaves the base alone
    base = torch.tensor(arr(4, 2, 3, 4))
    keep = base.clone()
    pieces = {
        "view": torch.view_copy(base, [6, 4]),
        "t": torch.t_copy(base[0]),
        "permute": torch.permute_copy(base, [2, 0, 1]),
        "diagonal": torch.diagonal_copy(base, 1, 1, 2),
        "expand": torch.expand_copy(base[:, :1], [2, 5, 4]),
        "squeeze": torch.squeeze_copy(base[:, :1], 1),
        "unsqueeze": torch.unsqueeze_copy(base, 0),
        "transpose": torch.transpose_copy(base, 0, 2),
        "select": torch.select_copy(base, 1, 2),
        "slice": torch.slice_copy(base, 2, 1, 4, 2),
        "detach": torch.detach_copy(base),
        "alias": torch.alias_copy(base),
        "unfold": torch.unfold_copy(base, 2, 2, 1),
        "frob": torch.frobenius_norm(base, [1, 2]),
        "nuc": torch.nuclear_norm(base[0]),
        "pad": torch.constant_pad_nd(base, [1, 0, 0, 2], 0.5),
        "scalar": torch.scalar_tensor(3),
    }
    for i, t in enumerate(torch.split_copy(base, 2, 2)):
        pieces[f"split{i}"] = t
    for i, t in enumerate(torch.split_with_sizes_copy(base, [1, 3], 2)):
        pieces[f"sizes{i}"] = t
    for i, t in enumerate(torch.unbind_copy(base, 1)):
        pieces[f"unbind{i}"] = t
    for i, t in enumerate(torch.unsafe_split(base, 3, 2)):
        pieces[f"unsafe{i}"] = t
    for i, t in enumerate(torch.unsafe_chunk(base, 2, 1)):
        pieces[f"chunk{i}"] = t
    pieces["view"].mul_(10.0)
    pieces["select"].zero_()
    pieces["base_unchanged"] = torch.equal(base, keep)
    pieces["flags"] = [torch.is_conj(base), torch.is_neg(base),
                       torch.resolve_conj(base).shape == base.shape]  # fmt: skip
    return pieces


@program
def parameter_module_import_path(torch):
    # library code imports Parameter from torch.nn.parameter and checks for lazy placeholders
    from_parameter = torch.nn.parameter
    w = from_parameter.Parameter(torch.tensor(arr(5, 3, 2)))
    lin = torch.nn.LazyLinear(4)
    lazy_before = from_parameter.is_lazy(lin.weight)
    lin(torch.tensor(arr(6, 2, 3)))
    return {
        "is_param": isinstance(w, torch.nn.Parameter) and w.requires_grad,
        "same_class": from_parameter.Parameter is torch.nn.Parameter,
        "lazy": [
            lazy_before,
            from_parameter.is_lazy(lin.weight),
            isinstance(from_parameter.UninitializedParameter(), torch.nn.Parameter),
        ],  # fmt: skip
        "w": w.detach() * 2,
        "lin_shape": list(lin.weight.shape),
    }


@program(rtol=2e-4, atol=2e-5)
def aten_cells_convolution_and_samplers(torch):
    # hand-written recurrent loops (torch.lstm_cell / gru_cell with a module's weights), ATen's
    # convolution and grid sampler with integer modes, CTC with an integer reduction
    lstm, gru = torch.nn.LSTMCell(3, 4), torch.nn.GRUCell(3, 4)
    rnn = torch.nn.RNNCell(3, 4)
    for i, m in enumerate((lstm, gru, rnn)):
        for j, p in enumerate(m.parameters()):
            p.data.copy_(torch.tensor(arr(10 * i + j, *p.shape, scale=0.4)))
    xs = torch.tensor(arr(40, 5, 2, 3), requires_grad=True)
    h, c = torch.zeros(2, 4), torch.zeros(2, 4)
    hg = hr = torch.zeros(2, 4)
    for x in xs:
        h, c = torch.lstm_cell(
            x, (h, c), lstm.weight_ih, lstm.weight_hh, lstm.bias_ih, lstm.bias_hh
        )
        hg = torch.gru_cell(x, hg, gru.weight_ih, gru.weight_hh, gru.bias_ih, gru.bias_hh)
        hr = torch.rnn_tanh_cell(x, hr, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh)
    relu_h = torch.rnn_relu_cell(xs[0], hr, rnn.weight_ih, rnn.weight_hh)
    with_modules = lstm(xs[0], (torch.zeros(2, 4), torch.zeros(2, 4)))[0]
    img = torch.tensor(arr(41, 2, 3, 6, 6))
    w = torch.tensor(arr(42, 4, 3, 3, 3, scale=0.3))
    wt = torch.tensor(arr(43, 3, 2, 3, 3, scale=0.3))
    conv = torch.convolution(
        img, w, torch.tensor(arr(44, 4)), [2, 1], [1, 0], [1, 2], False, [0, 0], 1
    )
    convt = torch.convolution(img, wt, None, [2, 2], [1, 1], [1, 1], True, [1, 0], 1)
    theta = torch.tensor(arr(45, 2, 2, 3, scale=0.3)) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
    grid = torch.affine_grid_generator(theta, [2, 3, 5, 4], False)
    sampled = torch.grid_sampler(img, grid, 0, 1, False)
    nearest = torch.grid_sampler(img, grid * 1.2, 1, 2, True)
    logp = torch.tensor(arr(46, 7, 2, 5)).log_softmax(2)
    ctc = torch.ctc_loss(logp, torch.tensor([[1, 2, 2], [3, 1, 0]]), [7, 6], [3, 2], 0, 1, False)
    total = h.sum() + c.sum() + hg.sum() + hr.sum() + relu_h.sum() + ctc
    (gx,) = torch.autograd.grad(total, xs)
    return {"h": h, "c": c, "hg": hg, "hr": hr, "relu_h": relu_h, "with_modules": with_modules,
            "conv": conv, "convt": convt, "grid": grid, "sampled": sampled, "nearest": nearest,
            "ctc": ctc, "gx": gx}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def low_rank_pca_of_rank_deficient_data(torch):
    # torch.pca_lowrank / svd_lowrank on data of rank 3: the randomised range finder recovers the
    # range exactly, so the singular values, the reconstruction and the explained variance are
    # PyTorch's (the random test matrices and the vectors' signs are not compared)
    a = torch.tensor(arr(50, 40, 3)) @ torch.tensor(arr(51, 3, 12)) + torch.tensor(arr(52, 12))
    u, s, v = torch.pca_lowrank(a, q=4)
    centred = a - a.mean(dim=0, keepdim=True)
    recon = u[:, :3] @ torch.diag(s[:3]) @ v[:, :3].T
    us, ss, vs = torch.svd_lowrank(centred.T, q=5, niter=3)
    proj = (centred @ v[:, :3]).abs().sum(dim=0)
    return {"s3": s[:3], "s_tail": s[3:].abs().max() < 1e-3, "recon": recon, "centred": centred,
            "ss3": ss[:3], "shapes": [list(u.shape), list(s.shape), list(v.shape), list(us.shape),
                                      list(vs.shape)],
            "proj": proj, "explained": (s[:3] ** 2 / (s**2).sum())}  # fmt: skip


@program
def feature_dropout_and_binomial_draws_are_well_formed(torch):
    # random draws differ between the libraries: their form is compared (whole channels kept or
    # zeroed and scaled; whole-number counts within [0, count])
    x = torch.tensor(arr(60, 4, 6, 3, 3)) + 5.0
    y = torch.feature_dropout(x, 0.5, True)
    kept = (y != 0).flatten(2)
    channel_whole = bool((kept.all(dim=2) | (~kept).all(dim=2)).all())
    scaled = bool(torch.allclose(y[y != 0], (x * 2)[y != 0]))
    same_eval = torch.equal(torch.feature_dropout(x, 0.5, False), x)
    counts = torch.tensor([[5.0, 10.0, 0.0], [3.0, 7.0, 1.0]])
    b = torch.binomial(counts, torch.tensor([[0.3, 0.5, 0.9], [1.0, 0.0, 0.5]]))
    return {"channel_whole": channel_whole, "scaled": scaled, "same_eval": same_eval,
            "b_ok": bool(((b >= 0) & (b <= counts) & (b == b.round())).all()),
            "b_sure": b[1, :2], "b_shape": list(b.shape)}  # fmt: skip


@program
def custom_conv_backward_with_nn_grad(torch):
    # a custom autograd Function whose backward calls torch.nn.grad, as memory-saving conv
    # layers write it, with torch.nn.common_types annotations
    from_types = torch.nn.common_types
    ngrad = torch.nn.grad

    class Conv2dFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, stride: from_types._size_2_t, padding: from_types._size_2_t):
            ctx.save_for_backward(x, w)
            ctx.stride, ctx.padding = stride, padding
            return torch.nn.functional.conv2d(x, w, None, stride, padding)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            gx = ngrad.conv2d_input(x.shape, w, g, ctx.stride, ctx.padding)
            gw = ngrad.conv2d_weight(x, w.shape, g, ctx.stride, ctx.padding)
            return gx, gw, None, None

    x = torch.tensor(arr(70, 2, 3, 7, 6), requires_grad=True)
    w = torch.tensor(arr(71, 4, 3, 3, 2, scale=0.3), requires_grad=True)
    out = Conv2dFn.apply(x, w, (2, 1), (1, 0))
    (out * torch.tensor(arr(72, *out.shape))).sum().backward()
    x1, w1 = torch.tensor(arr(73, 2, 2, 9)), torch.tensor(arr(74, 4, 1, 3))
    g1 = torch.tensor(arr(75, 2, 4, 5))
    x3, w3 = torch.tensor(arr(76, 1, 2, 4, 4, 4)), torch.tensor(arr(77, 2, 2, 2, 2, 2))
    g3 = torch.tensor(arr(78, 1, 2, 3, 3, 3))
    return {"gx": x.grad, "gw": w.grad,
            "in1": ngrad.conv1d_input(x1.shape, w1, g1, 2, 1, 1, 2),
            "w1": ngrad.conv1d_weight(x1, w1.shape, g1, 2, 1, 1, 2),
            "in3": ngrad.conv3d_input(x3.shape, w3, g3), "w3": ngrad.conv3d_weight(x3, w3.shape, g3)}  # fmt: skip


@program
def histogramdd_of_points_with_ranges_weights_and_edges(torch):
    # occupancy grids and joint histograms: torch.histogramdd with bins per dimension, a range,
    # weights and density, and explicit edges
    pts = torch.tensor(arr(80, 300, 3))
    w = torch.tensor(arr(81, 300)).abs()
    a = torch.histogramdd(pts, bins=[3, 4, 2])
    b = torch.histogramdd(
        pts, bins=4, range=[-1.0, 1.0, -2.0, 2.0, 0.0, 1.0], weight=w, density=True
    )
    edges = [torch.tensor([-2.0, 0.0, 0.5, 2.0]), torch.tensor([-1.0, 1.0])]
    c = torch.histogramdd(pts[:, :2], bins=edges)
    return {"a": a.hist, "a_edges": torch.cat(a.bin_edges), "b": b.hist,
            "b_edges": torch.cat(b.bin_edges), "c": c.hist, "c_total": c.hist.sum()}  # fmt: skip


@program
def segment_reduce_ragged_batches(torch):
    # ragged batches pooled per graph or per sentence with torch.segment_reduce (lengths or
    # offsets, every reduction, an initial value, empty segments), with gradients
    feats = torch.tensor(arr(90, 9, 4), requires_grad=True)
    lengths = torch.tensor([3, 0, 4, 2])
    pooled = {r: torch.segment_reduce(feats, r, lengths=lengths) for r in ("sum", "max", "min")}
    pooled["mean"] = torch.segment_reduce(feats, "mean", offsets=torch.tensor([0, 3, 3, 7, 9]))
    pooled["prod"] = torch.segment_reduce(feats[:, :2], "prod", lengths=lengths, initial=2.0)
    pooled["max0"] = torch.segment_reduce(feats, "max", lengths=lengths, initial=0.0)
    pooled["mean_init"] = torch.segment_reduce(feats, "mean", lengths=lengths, initial=1.0)
    loss = sum(v.nan_to_num(posinf=0.0, neginf=0.0).sum() for v in pooled.values())
    (g,) = torch.autograd.grad(loss, feats)
    return {**pooled, "grad": g}
