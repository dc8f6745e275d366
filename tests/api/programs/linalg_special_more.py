"""Householder products (an orthogonal layer trained through them, and complex ones), the Airy
function (a table and a fit of a quantum well's bound state), ``torch.func.linearize`` of a
small network (Gauss-Newton steps), and the LDL factorisation of symmetric indefinite systems."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


def _f64(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return arr(seed, *shape, scale=scale, dtype=np.float64)


@program(rtol=1e-6, atol=1e-8)
def householder_orthogonal_layer_training(torch):
    # an orthogonal 6 -> 4 map from 4 reflectors (as parametrizations.orthogonal's "householder"),
    # fitted to a target rotation by a few SGD steps
    raw = torch.tensor(_f64(1, 6, 4), requires_grad=True)
    x = torch.tensor(_f64(2, 16, 6))
    target = x @ torch.linalg.qr(torch.tensor(_f64(3, 6, 4)))[0]
    opt = torch.optim.SGD([raw], lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        v = raw.tril(-1)
        tau = 2.0 / (1.0 + (v * v).sum(dim=-2))
        q = torch.linalg.householder_product(v, tau)
        loss = ((x @ q - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    v = raw.detach().tril(-1)
    tau = 2.0 / (1.0 + (v * v).sum(dim=-2))
    q = torch.orgqr(v, tau)
    batch = torch.tensor(_f64(4, 3, 5, 3))
    btau = torch.tensor(_f64(5, 3, 2, scale=0.5))
    return {"losses": losses, "q": q, "gram": q.mT @ q, "raw": raw.detach(),
            "grad": raw.grad, "batched": batch.orgqr(btau)}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def householder_complex_unitary_from_qr_factors(torch):
    # Householder vectors and taus of a complex QR, with tau = 2 / |v|^2 (unitary reflectors),
    # and a real loss differentiated through the complex product
    re, im = _f64(6, 2, 5, 3), _f64(7, 2, 5, 3)
    a = torch.complex(torch.tensor(re), torch.tensor(im)).requires_grad_(True)
    v = a.tril(-1) + torch.eye(5, 3, dtype=torch.complex128)
    tau = (2.0 / (v.abs() ** 2).sum(dim=-2)).to(torch.complex128)
    q = torch.linalg.householder_product(a, tau)
    loss = (q.real**2 * torch.arange(3.0, dtype=torch.float64)).sum() + q.imag.sum()
    loss.backward()
    gram = q.mH @ q
    return {"q_real": q.real, "q_imag": q.imag, "gram_real": gram.real, "gram_imag": gram.imag,
            "grad_real": a.grad.real, "grad_imag": a.grad.imag}  # fmt: skip


# (atol: PyTorch 2.13's airy_ai is off by up to 1e-6 on [-3.02, -2.09], e.g. 6.6e-7 at its first
# zero, where SciPy and mpmath give 0 to 1e-16; GT's values are those to 1e-15)
@program(rtol=1e-5, atol=2e-6)
def airy_table_and_triangular_well(torch):
    # a table of Ai (float64 and float32), and the bound states of a particle in the linear
    # potential V(x) = x on x > 0 with a wall at 0: psi_n(x) = Ai(x + a_n), a_n Ai's zeros,
    # normalised by the trapezoid rule; E_n = -a_n
    grid = torch.linspace(-12.0, 12.0, 97, dtype=torch.float64)
    table = torch.special.airy_ai(grid)
    single = torch.special.airy_ai(grid.float())
    ints = torch.special.airy_ai(torch.arange(-4, 5))
    zeros = torch.tensor([-2.338107410459767, -4.08794944413097, -5.520559828095551],
                         dtype=torch.float64)  # fmt: skip
    x = torch.linspace(0.0, 12.0, 2001, dtype=torch.float64)
    psi = torch.special.airy_ai(x.unsqueeze(0) + zeros.unsqueeze(1))
    norm = torch.trapezoid(psi**2, x, dim=1).sqrt()
    psi = psi / norm.unsqueeze(1)
    overlap = torch.trapezoid(psi.unsqueeze(0) * psi.unsqueeze(1), x, dim=-1)
    mean_x = torch.trapezoid(psi**2 * x, x, dim=1)  # <x> = 2 E_n / 3 (virial theorem)
    # a fit: amplitude and shift of measured Ai-shaped data, by least squares in the amplitude
    data = 1.7 * torch.special.airy_ai(x[:400] - 1.3) + 0.01 * torch.tensor(_f64(8, 400))
    feature = torch.special.airy_ai(x[:400] - 1.3).unsqueeze(1)
    amp = torch.linalg.lstsq(feature, data.unsqueeze(1)).solution
    leaf = grid.clone().requires_grad_(True)
    return {"table": table, "single": single, "ints": ints, "wall": psi[:, 0],
            "norm": norm, "overlap": overlap, "mean_x": mean_x, "amp": amp,
            "no_grad": torch.special.airy_ai(leaf).requires_grad}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def linearize_network_gauss_newton(torch):
    # Gauss-Newton on a tiny regression network: the residual's Jacobian-vector products come
    # from one linearize call, reused for every column of the Jacobian
    w1, b1 = torch.tensor(_f64(9, 8, 2, scale=0.7)), torch.tensor(_f64(10, 8, scale=0.1))
    xs = torch.tensor(_f64(11, 12, 2))
    ys = torch.sin(xs[:, :1]) * xs[:, 1:]

    def residual(w2, b2):
        return (torch.tanh(xs @ w1.T + b1) @ w2 + b2 - ys).squeeze(1)

    w2, b2 = torch.tensor(_f64(12, 8, 1, scale=0.3)), torch.zeros(1, dtype=torch.float64)
    history = []
    for _ in range(3):
        r, jvp_fn = torch.func.linearize(residual, w2, b2)
        cols = []
        for k in range(9):
            e = torch.zeros(9, dtype=torch.float64)
            e[k] = 1.0
            cols.append(jvp_fn(e[:8].reshape(8, 1), e[8:]))
        jac = torch.stack(cols, dim=1)
        step = torch.linalg.solve(jac.T @ jac + 1e-3 * torch.eye(9, dtype=torch.float64),
                                  -jac.T @ r)  # fmt: skip
        w2, b2 = w2 + step[:8].reshape(8, 1), b2 + step[8:]
        history.append((r**2).sum().item())
    out, jvp_fn = torch.func.linearize(lambda x: torch.tanh(x @ w1.T + b1), xs[:3])
    tangent = torch.tensor(_f64(13, 3, 2))
    same = torch.func.jvp(lambda x: torch.tanh(x @ w1.T + b1), (xs[:3],), (tangent,))[1]
    return {"history": history, "w2": w2, "b2": b2, "jac": jac, "out": out,
            "lin": jvp_fn(tangent), "jvp": same}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def ldl_saddle_point_systems(torch):
    # equality-constrained least squares: the KKT matrix [[0, C], [C^T, H]] is symmetric
    # indefinite (and starts with zeros on its diagonal, so it needs 2x2 pivots and
    # interchanges); factor once with LDL, solve for several right sides
    la = torch.linalg
    h = torch.tensor(_f64(14, 2, 5, 5))
    h = h @ h.mT + torch.eye(5, dtype=torch.float64)
    c = torch.tensor(_f64(15, 2, 2, 5))
    kkt = torch.cat([torch.cat([torch.zeros(2, 2, 2, dtype=torch.float64), c], -1),
                     torch.cat([c.mT, h], -1)], -2)  # fmt: skip
    rhs = torch.tensor(_f64(16, 2, 7, 3))
    ld, piv, info = la.ldl_factor_ex(kkt)
    x = la.ldl_solve(ld, piv, rhs)
    # a Hermitian indefinite matrix, and one right side broadcast over the batch
    re, im = torch.tensor(_f64(17, 4, 4)), torch.tensor(_f64(18, 4, 4))
    herm = torch.complex(re + re.mT, im - im.mT)
    hld, hpiv = la.ldl_factor(herm, hermitian=True)
    hx = la.ldl_solve(hld, hpiv, torch.ones(4, 1, dtype=torch.complex128), hermitian=True)
    return {"ld": ld, "pivots": piv, "info": info, "x": x, "residual": kkt @ x - rhs,
            "herm_ld_real": hld.real, "herm_ld_imag": hld.imag, "herm_pivots": hpiv,
            "herm_x_real": hx.real, "herm_x_imag": hx.imag}  # fmt: skip
