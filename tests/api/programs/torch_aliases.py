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
