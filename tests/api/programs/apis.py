"""The names real code uses: devices, comparisons, new_* constructors, in-place forms, einsum,
sorting, scatter/gather, exception types, retain_grad, inits, grad modes, generators."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program
def device_agnostic_training(torch):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = set_weights(torch, torch.nn.Linear(3, 2), seed=1).to(device)
    x = torch.tensor(arr(2, 5, 3)).to(device)
    y = torch.tensor(ints(3, 2, 5), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(x), y.to(device, non_blocking=True))
    loss.backward()
    opt.step()
    z = torch.zeros(2, 3, device=x.device) + torch.ones_like(x[:2], device=device)
    return {"loss": loss, "params": params(model), "z": z, "cuda": torch.cuda.is_available(),
            "device_type_ok": str(device) in ("cpu", "cuda")}  # fmt: skip


@program
def comparisons_and_predicates(torch):
    a = torch.tensor(arr(4, 6))
    b = a + 1e-7
    c = a.clone()
    c[2] = 100.0
    return {"allclose": torch.allclose(a, b), "allclose_c": torch.allclose(a, c),
            "isclose": torch.isclose(a, c, rtol=1e-3), "equal": torch.equal(a, a.clone()),
            "equal_shape": torch.equal(a, a.reshape(2, 3)), "is_tensor": torch.is_tensor(a),
            "not_tensor": torch.is_tensor(np.zeros(2)), "isnan": torch.isnan(a / a),
            "eq_any": (a == c).any(), "all": (a < 200).all(), "nan_close": torch.isclose(
                torch.tensor([np.nan]), torch.tensor([np.nan]), equal_nan=True)}  # fmt: skip


@program
def new_constructors_and_type_conversions(torch):
    x = torch.tensor(arr(5, 2, 3), dtype=torch.float64)
    i = torch.tensor([1, 2, 3])
    return {"new_zeros": x.new_zeros(2, 2), "new_ones": x.new_ones((3,)),
            "new_tensor": x.new_tensor([1, 2]), "new_full": x.new_full((2,), 7),
            "type_as": i.type_as(x), "nelement": x.nelement(), "numel": torch.numel(x),
            "float": i.float(), "long": x.long(), "half_back": x.half().float(),
            "bool": i.bool(), "dim": x.dim(), "size1": x.size(1), "shape": list(x.shape),
            "item": x[0, 0].item(), "tolist": i.tolist(), "is_fp": x.is_floating_point()}  # fmt: skip


@program
def inplace_method_forms(torch):
    x = torch.tensor(arr(6, 8))
    outs = {}
    for name, f in (("relu_", lambda t: t.relu_()), ("sigmoid_", lambda t: t.sigmoid_()),
                    ("tanh_", lambda t: t.tanh_()), ("exp_", lambda t: t.exp_()),
                    ("abs_", lambda t: t.abs_()), ("clamp_", lambda t: t.clamp_(-0.5, 0.5)),
                    ("mul_add_", lambda t: t.mul_(2).add_(1, alpha=3)),
                    ("masked_fill_", lambda t: t.masked_fill_(t > 0, 0.0)),
                    ("lerp_", lambda t: t.lerp_(torch.ones(8), 0.25)),
                    ("addcmul_", lambda t: t.addcmul_(t, t, value=0.5)),
                    ("addcdiv_", lambda t: t.addcdiv_(t, t.abs() + 1, value=2)),
                    ("floor_", lambda t: t.floor_()), ("zero_", lambda t: t.zero_()),
                    ("fill_", lambda t: t.fill_(2.5)), ("copy_", lambda t: t.copy_(torch.arange(8.0))),
                    ("sqrt_abs", lambda t: t.abs_().sqrt_()), ("neg_", lambda t: t.neg_()),
                    ("pow_", lambda t: t.pow_(2)), ("div_", lambda t: t.div_(4.0))):  # fmt: skip
        t = x.clone()
        r = f(t)
        outs[name] = {"value": t, "returns_self": r is t}
    with torch.no_grad():
        h = torch.nn.functional.relu(x.clone(), inplace=True)
    return {**outs, "functional_inplace": h}


@program
def legacy_tensor_constructor(torch):
    a = torch.Tensor([1, 2, 3])
    b = torch.Tensor([[1.5, 2], [3, 4]])
    c = torch.Tensor(2, 3)
    return {"a": a, "b": b, "c_shape": list(c.shape), "a_dtype": a.dtype == torch.float32,
            "isinstance": isinstance(a, torch.Tensor)}  # fmt: skip


@program
def einsum_variants(torch):
    A = torch.tensor(arr(7, 3, 4), requires_grad=True)
    B = torch.tensor(arr(8, 4, 5), requires_grad=True)
    C = torch.tensor(arr(9, 2, 3, 4))
    D = torch.tensor(arr(10, 2, 4, 5))
    S = torch.tensor(arr(11, 4, 4))
    v, w = torch.tensor(arr(12, 3)), torch.tensor(arr(13, 4))
    outs = {"matmul": torch.einsum("ij,jk->ik", A, B), "bmm": torch.einsum("bij,bjk->bik", C, D),
            "outer": torch.einsum("i,j->ij", v, w), "trace": torch.einsum("ii", S),
            "diag": torch.einsum("ii->i", S), "transpose": torch.einsum("ij->ji", A),
            "sum_all": torch.einsum("ij->", A), "bilinear": torch.einsum("i,ij,j->", v, A, w),
            "ellipsis": torch.einsum("...ij,...jk->...ik", C, D), "list_form": torch.einsum(
                "ij,jk", [A, B])}  # fmt: skip
    (outs["matmul"].sum() + outs["bilinear"] + outs["sum_all"]).backward()
    return {**outs, "dA": A.grad, "dB": B.grad}


@program
def gather_scatter_and_index_ops(torch):
    x = torch.tensor(arr(14, 3, 4), requires_grad=True)
    idx = torch.tensor(ints(15, 4, 3, 2))
    g = x.gather(1, idx)
    src = torch.tensor(arr(16, 3, 2))
    sc = torch.zeros(3, 4).scatter(1, idx[:, :1], src[:, :1])
    sa = torch.zeros(3, 4).scatter_add(1, idx, src)
    ia = torch.zeros(5, 4).index_add(0, torch.tensor([0, 2, 2]), x)
    filled = x.detach().clone().index_fill_(1, torch.tensor([0, 3]), -1.0)
    (g.sum() * 2 + ia.pow(2).sum() + x.scatter(1, idx, 0.0).sum()).backward()
    onehot = torch.zeros(3, 5).scatter_(1, torch.tensor([[1], [4], [0]]), 1.0)
    return {"gather": g, "scatter": sc, "scatter_add": sa, "index_add": ia, "index_fill": filled,
            "dx": x.grad, "onehot": onehot, "take": torch.take_along_dim(x, idx, 1)}  # fmt: skip


@program
def data_dependent_selection(torch):
    x = torch.tensor(arr(17, 3, 4))
    mask = x > 0.2
    return {"masked_select": torch.masked_select(x, mask), "nonzero": torch.nonzero(mask),
            "nonzero_tuple": mask.nonzero(as_tuple=True), "where1": torch.where(mask),
            "boolean_index": x[mask], "count": mask.sum(), "argwhere": torch.argwhere(mask),
            "roll": torch.roll(x, 1, 1), "roll_flat": x.roll(-2), "roll2": x.roll((1, 2), (0, 1)),
            "flip": torch.flip(x, [0, 1])}  # fmt: skip


@program
def exception_types_code_catches(torch):
    caught = {}
    tries = {
        "item_many": lambda: torch.ones(3).item(),
        "mixed_matmul": lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64),
        "int_requires_grad": lambda: torch.ones(2, dtype=torch.int64).requires_grad_(),
        "int_requires_grad_attr": lambda: setattr(torch.ones(2, dtype=torch.long), "requires_grad", True),
        "non_leaf_flag": lambda: setattr(torch.ones(2, requires_grad=True) * 2, "requires_grad", False),
        "shape_mismatch": lambda: torch.ones(2, 3) + torch.ones(4),
        "bad_matmul": lambda: torch.ones(2, 3) @ torch.ones(2, 3),
        "backward_twice": _backward_twice(torch),
        "index_out_of_range": lambda: torch.ones(3)[5],
        "bool_ambiguous": lambda: bool(torch.ones(2)),
        "leaf_inplace": lambda: torch.ones(2, requires_grad=True).add_(1),
    }  # fmt: skip
    for name, f in tries.items():
        try:
            f()
            caught[name] = "no error"
        except RuntimeError:
            caught[name] = "RuntimeError"
        except IndexError:
            caught[name] = "IndexError"
        except (TypeError, ValueError) as exc:
            caught[name] = type(exc).__name__
    return caught


def _backward_twice(torch):
    def f():
        x = torch.ones(2, requires_grad=True)
        y = (x * x).sum()
        y.backward()
        y.backward()

    return f


@program
def retain_grad_and_grad_flags(torch):
    x = torch.tensor(arr(18, 4), requires_grad=True)
    h = x * 2
    h.retain_grad()
    y = h.tanh()
    y.retain_grad()
    z = (y**2).sum()
    z.retain_grad()
    z.backward()
    with torch.no_grad():
        nog = (x * 3).requires_grad
    with torch.enable_grad():
        eg = (x * 3).requires_grad
    torch.set_grad_enabled(False)
    off = (x * 3).requires_grad
    torch.set_grad_enabled(True)
    with torch.inference_mode():
        inf = (x + 1).requires_grad
    d = x.detach()
    return {"h_grad": h.grad, "y_grad": y.grad, "z_grad": z.grad, "x_grad": x.grad,
            "flags": [nog, eg, off, inf, d.requires_grad, h.is_leaf, x.is_leaf, d.is_leaf,
                      torch.is_grad_enabled()], "grad_fn_none": x.grad_fn is None}  # fmt: skip


@program
def deterministic_inits(torch):
    nn = torch.nn
    lin = nn.Linear(4, 4)
    nn.init.zeros_(lin.bias)
    nn.init.eye_(lin.weight)
    conv = nn.Conv2d(2, 2, 3)
    nn.init.dirac_(conv.weight)
    nn.init.constant_(conv.bias, 0.1)
    ones = nn.init.ones_(torch.empty(2, 3))
    t = torch.empty(2000)
    nn.init.trunc_normal_(t, std=0.5, a=-0.4, b=0.6)
    o = torch.empty(6, 4)
    nn.init.orthogonal_(o)
    x = torch.tensor(arr(19, 1, 2, 5, 5))
    return {"lin_w": lin.weight, "lin_b": lin.bias, "conv_identity": torch.allclose(conv(x), x[:, :, 1:4, 1:4] + 0.1),
            "ones": ones, "trunc_in_bounds": bool(((t >= -0.4) & (t <= 0.6)).all()),
            "orthonormal": torch.allclose(o.T @ o, torch.eye(4), atol=1e-5),
            "gain": nn.init.calculate_gain("leaky_relu", 0.2)}  # fmt: skip


@program
def embedding_padding_and_pretrained(torch):
    nn = torch.nn
    emb = nn.Embedding(6, 3, padding_idx=0)
    pad_row_zero = bool((emb.weight[0] == 0).all())
    set_weights(torch, emb, seed=20)
    tok = torch.tensor([[0, 2, 0], [5, 1, 0]])
    emb(tok).pow(2).sum().backward()
    pre = nn.Embedding.from_pretrained(torch.tensor(arr(21, 4, 2)))
    out = pre(torch.tensor([3, 1]))
    return {"pad_row_zero": pad_row_zero, "grad": emb.weight.grad, "pre_out": out,
            "pre_frozen": not pre.weight.requires_grad}  # fmt: skip


@program
def generator_reproducibility(torch):
    g1 = torch.Generator().manual_seed(123)
    a = torch.randn(4, generator=g1)
    g2 = torch.Generator().manual_seed(123)
    b = torch.randn(4, generator=g2)
    torch.manual_seed(7)
    c = torch.rand(3)
    torch.manual_seed(7)
    d = torch.rand(3)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    return {"same_generator_same_values": bool(torch.equal(a, b)),
            "manual_seed_repeats": bool(torch.equal(c, d)),
            "perm_is_permutation": sorted(perm.tolist()) == list(range(10)),
            "randint_range": bool(((torch.randint(0, 5, (50,)) >= 0)).all())}  # fmt: skip


@program
def tensor_utilities(torch):
    a = torch.tensor(arr(22, 3))
    b = torch.tensor(arr(23, 4))
    M = torch.tensor(arr(24, 3, 3))
    gx, gy = torch.meshgrid(torch.arange(3), torch.arange(2), indexing="ij")
    bx, by = torch.broadcast_tensors(a.unsqueeze(1), b)
    return {"outer": torch.outer(a, b), "dot": torch.dot(a, a), "diag": torch.diag(a),
            "diag_of": torch.diag(M), "trace": torch.trace(M), "meshgrid": [gx, gy],
            "broadcast": [bx, by], "cdist": torch.cdist(torch.tensor(arr(25, 4, 2)),
                                                       torch.tensor(arr(26, 3, 2))),
            "cumsum": torch.cumsum(M, dim=0), "cumprod": torch.cumprod(M, 1),
            "prod": torch.prod(M, 0), "tril": torch.tril(M, -1), "triu": M.triu(1),
            "repeat_interleave": a.repeat_interleave(2), "chunk": torch.chunk(M, 2, dim=1),
            "median": M.median(), "median_dim": M.median(dim=1), "kth": M.kthvalue(2, dim=0),
            "logaddexp": torch.logaddexp(a, a * 2), "sign": torch.sign(a),
            "finfo_eps": torch.finfo(torch.float32).eps}  # fmt: skip


@program
def functional_helpers(torch):
    F = torch.nn.functional
    x = torch.tensor(arr(27, 3, 4), requires_grad=True)
    y = torch.tensor(arr(28, 3, 4))
    outs = {"normalize": F.normalize(x, dim=1), "normalize_p1": F.normalize(x, p=1, dim=0),
            "cosine": F.cosine_similarity(x, y, dim=1), "pairwise": F.pairwise_distance(x, y),
            "glu": F.glu(x, dim=-1), "softmin": F.softmin(x, dim=1),
            "one_hot": F.one_hot(torch.tensor([0, 2, 1]), 4)}  # fmt: skip
    sum(v.float().sum() for v in outs.values()).backward()
    return {**outs, "dx": x.grad}


@program
def parameter_counting_and_freezing(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    set_weights(torch, model, seed=29)
    for p in model[0].parameters():
        p.requires_grad = False
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss = model(torch.tensor(arr(30, 5, 4))).pow(2).mean()
    loss.backward()
    opt.step()
    return {"total": sum(p.numel() for p in model.parameters()),
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "frozen_grad_none": model[0].weight.grad is None, "grads": grads(model)[ "2.weight"],
            "names": [n for n, _ in model.named_parameters()], "children": len(list(model.children())),
            "modules": len(list(model.modules()))}  # fmt: skip


@program
def amp_loop_with_scaling_disabled(torch):
    """A mixed-precision training loop as written for GPUs, run with AMP off (``use_amp=False``)."""
    use_amp = False
    model = set_weights(torch, torch.nn.Linear(4, 2), seed=31)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    x, y = torch.tensor(arr(32, 6, 4)), torch.tensor(ints(33, 2, 6))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with torch.autocast(device_type="cpu", enabled=use_amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return {"losses": losses, "params": params(model)}
