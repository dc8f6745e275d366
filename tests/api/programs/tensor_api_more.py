"""The rest of PyTorch's tensor API as programs use it: the other spellings (``divide``,
``greater``, ``swapdims``, ``H`` ...), in-place forms (``asin_``, ``hypot_``, ``eq_``, ``renorm_``
...), reductions that pick an element (``aminmax``, ``nanmedian``, ``mode``, ``fmax``), splitting
and windows (``tensor_split``, ``hsplit``, ``unfold``), scatters into copies (``index_copy``,
``masked_scatter``, ``diagonal_scatter`` ...), the ``add*`` products, and ``torch.*`` helpers
(``column_stack``, ``combinations``, ``cartesian_prod``, ``std_mean``, ``isin``)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


@program(rtol=1e-5, atol=1e-6)
def aliases_and_inplace_forms_with_gradients(torch):
    x = torch.tensor(np.linspace(-0.9, 0.9, 6), requires_grad=True)  # float64
    y = torch.tensor(arr(1, 6).astype(np.float64), requires_grad=True)
    b = y * 1  # (non-leaves: in-place ops are allowed on them)
    b.sinh_()
    b.erf_()
    b.lgamma_()
    inplace = {}
    for name, args in [
        ("asin_", ()),
        ("hypot_", (b,)),
        ("copysign_", (b,)),
        ("fmod_", (0.4,)),
        ("xlogy_", (b.abs() + 0.5,)),
        ("exp2_", ()),
        ("atan2_", (b,)),
        ("logit_", (0.1,)),
        ("deg2rad_", ()),
        ("erfc_", ()),
        ("sinc_", ()),
        ("expm1_", ()),
        ("lerp_", (b, 0.3)),
        ("ldexp_", (torch.tensor(2),)),
        ("float_power_", (2,)),
        ("nan_to_num_", ()),
        ("remainder_", (0.3,)),
    ]:
        t = x * 1
        getattr(t, name)(*args)
        inplace[name] = t
    out = {
        **inplace, "b": b, "divide": torch.divide(x, y), "multiply": x.multiply(y),
        "subtract": torch.subtract(x, y, alpha=2), "negative": torch.negative(x),
        "true_divide": torch.true_divide(x, 2), "absolute": torch.absolute(y),
        "xlogy_method": x.abs().xlogy(y.abs()), "remainder": torch.remainder(y, 0.7),
        "floor_divide": x.detach().floor_divide(0.3), "swapdims": x.reshape(2, 3).swapdims(0, 1),
        "H": x.reshape(2, 3).H, "mH": x.reshape(1, 2, 3).mH, "adjoint": torch.adjoint(x.reshape(3, 2)),
        "ravel": torch.ravel(x.reshape(2, 3).t()),
    }  # fmt: skip
    total = sum(v.sum() for v in out.values())
    total.backward()
    ints = torch.tensor([-7, 7, 9, -2])
    cmp = torch.tensor([1.0, 2.0, 3.0, 4.0])
    cmp.gt_(2.5)
    flags = torch.tensor([1.0, 0.0, 2.0, 0.0])
    flags.logical_and_(torch.tensor([1.0, 1.0, 0.0, 0.0]))
    return {**out, "x_grad": x.grad, "y_grad": y.grad,
            "trunc_int": torch.divide(ints, 2, rounding_mode="trunc"),
            "trunc_float": ints.double().divide(-4, rounding_mode="trunc"),
            "floor_int": torch.div(ints, 2, rounding_mode="floor"),
            "greater": torch.greater(ints, 0), "less_equal": ints.less_equal(-2),
            "not_equal": torch.not_equal(ints, 7), "greater_equal": ints.greater_equal(7),
            "less": torch.less(ints, 0), "gt_": cmp, "logical_and_": flags,
            "positive": torch.positive(ints), "is_signed": [ints.is_signed(), cmp.is_signed()],
            "nbytes": [ints.nbytes, ints.itemsize, cmp.is_same_size(flags)],
            "byte": ints.abs().byte(), "char": ints.char(), "fix": cmp.clone().fix_()}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def picking_reductions_and_windows(torch):
    x = torch.tensor(arr(2, 3, 5).astype(np.float64), requires_grad=True)
    vals = torch.tensor(np.array([[1.0, 5, 5, 2, 1], [7, 7, 0, 0, 3], [4, 4, 4, 4, 4]]))
    with_nan = np.array([[np.nan, 2.0, 1.0, 4.0], [np.nan, np.nan, np.nan, np.nan]])
    n = torch.tensor(with_nan, requires_grad=True)
    mode = (x.detach().round() + vals).mode(1)
    out = {
        "aminmax_min": torch.aminmax(x, dim=1).min, "aminmax_max": x.aminmax(dim=0, keepdim=True).max,
        "fmax": torch.fmax(x, x.flip(1)), "fmin": x.fmin(torch.tensor([0.1, float("nan"), 0.0, 0.2, -5.0])),
        "nanmedian_dim": n.nanmedian(1).values, "nanmedian_all": torch.nanmedian(n),
        "mode_values": torch.mode(x + vals, 1).values, "unfold": x.unfold(1, 2, 2),
        "unfold_dim0": x.unfold(0, 2, 1), "fliplr": torch.fliplr(x), "flipud": x.flipud(),
        "renorm": x.renorm(2, 0, 1.0), "renorm_p1": torch.renorm(x, 1, 1, 1.5),
        "diagflat": torch.diagflat(x[0, :3], 1), "sum_to_size": x.sum_to_size(1, 5),
    }  # fmt: skip
    total = sum(v.nan_to_num().sum() for v in out.values())
    total.backward()
    r = x.detach().clone()
    r.renorm_(2, 1, 0.5)
    parts = torch.tensor_split(x.detach(), 3, dim=1)
    return {**out, "x_grad": x.grad, "n_grad": n.grad, "renorm_": r,
            "nanmedian_idx": n[:1].nanmedian(1).indices, "mode": mode.values, "mode_idx": mode.indices,
            "mode_ints": torch.tensor([[1, 2, 2, 1, 3], [3, 1, 1, 3, 0]]).mode(-1).indices,
            "tensor_split": list(parts),
            "tensor_split_idx": list(x.detach().tensor_split([1, 4, 9], dim=1)),
            "hsplit": list(torch.hsplit(x.detach(), [2])), "vsplit": list(x.detach().vsplit(3)),
            "dsplit": list(torch.dsplit(x.detach().reshape(3, 1, 5), [1, 3])),
            "split_with_sizes": list(x.detach().split_with_sizes([2, 3], 1)),
            "unique_consecutive": list(torch.unique_consecutive(
                torch.tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True, return_counts=True)),
            "unique_consecutive_dim": list(torch.tensor([[1, 1], [1, 1], [2, 3]]).unique_consecutive(
                return_counts=True, dim=0))}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def scatters_into_copies_and_products(torch):
    x = torch.tensor(arr(3, 4, 3).astype(np.float64), requires_grad=True)
    src = torch.tensor(arr(4, 2, 3).astype(np.float64), requires_grad=True)
    m = torch.tensor(arr(5, 3, 4).astype(np.float64), requires_grad=True)
    v = torch.tensor(arr(6, 4).astype(np.float64), requires_grad=True)
    b1 = torch.tensor(arr(7, 2, 4, 3).astype(np.float64), requires_grad=True)
    b2 = torch.tensor(arr(8, 2, 3, 3).astype(np.float64), requires_grad=True)
    mask = torch.tensor(arr(9, 4, 3) > 0)
    out = {
        "index_copy": x.index_copy(0, torch.tensor([3, 1]), src),
        "masked_scatter": x.masked_scatter(mask, (src * 10).reshape(-1).repeat(2)),
        "select_scatter": torch.select_scatter(x, src[0], 0, 2),
        "slice_scatter": x.slice_scatter(src, 0, 1, 4, 2),
        "diagonal_scatter": torch.diagonal_scatter(x, src[1], -1),
        "index_put": x.index_put((torch.tensor([0, 0, 2]),), src[0], accumulate=True),
        "put": x.put(torch.tensor([0, 11]), src[1, :2]),
        "take": torch.take(x, torch.tensor([[0, 5], [-1, 7]])), "select": x.select(1, -1),
        "narrow_copy": torch.narrow_copy(x, 0, 1, 2),
        "addmv": torch.addmv(v[:3], m, v, beta=0.5, alpha=2), "mv": m.mv(v),
        "addr": x.addr(v, src[0], alpha=-1), "addbmm": torch.addbmm(x, b1, b2, beta=0),
        "baddbmm": x.baddbmm(b1, b2, beta=2, alpha=0.5),
        "vdot": torch.vdot(v, v * 2), "chain_matmul": torch.chain_matmul(m, x, b2[0]),
        "matrix_power": torch.matrix_power(b2[0], 3), "matrix_power_neg": b2.matrix_power(-2),
        "logdet": torch.logdet(b2[0] @ b2[0].T + torch.eye(3, dtype=torch.float64)),
    }  # fmt: skip
    total = sum(o.sum() for o in out.values())
    total.backward()
    y = x.detach().clone()
    y.index_copy_(1, torch.tensor([0]), torch.ones(4, 1, dtype=torch.float64) * 7)
    y.masked_scatter_(mask, torch.arange(12.0, dtype=torch.float64))
    z = torch.zeros(3, 3, dtype=torch.float64)
    z.addr_(v[:3].detach(), v[1:].detach())
    w = torch.tensor(np.array([1.0, 2.0, 3.0]))
    return {**out, "x_grad": x.grad, "src_grad": src.grad, "m_grad": m.grad, "v_grad": v.grad,
            "b1_grad": b1.grad, "b2_grad": b2.grad, "index_copy_": y, "addr_": z,
            "column_stack": torch.column_stack([w, w.reshape(3, 1) * 2]),
            "hstack": torch.hstack([w, w]), "vstack": torch.vstack([w, w]),
            "row_stack": torch.row_stack([w, w]),
            "dstack": torch.dstack([w.reshape(1, 3), w.reshape(1, 3)]),
            "combinations": torch.combinations(w, 2), "comb3": torch.combinations(w, 3, True),
            "cartesian_prod": torch.cartesian_prod(w, torch.tensor(np.array([0.5, 1.5]))),
            "std_mean": list(torch.std_mean(x.detach(), 0)), "var_mean": list(torch.var_mean(
                x.detach(), 1, keepdim=True, correction=0)),
            "isin": torch.isin(torch.tensor([1, 2, 3, 4]), torch.tensor([4, 2])),
            "isin_invert": torch.isin(torch.tensor([1, 2, 3]), 2, invert=True),
            "rsub": torch.rsub(w, 1.0, alpha=2),
            "tril_indices": torch.tril_indices(3, 4, 1), "triu_indices": torch.triu_indices(4, 3, -1),
            "as_tensor": torch.as_tensor([1, 2]), "asarray": torch.asarray(np.array([1.5, 2.5]))}  # fmt: skip
