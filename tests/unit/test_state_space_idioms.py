"""Idioms of state-space sequence models that GT once got wrong (found while writing the
``state_space_models`` programs): ``logcumsumexp`` of a complex tensor, as Heinsen's parallel scan
takes it (the log of signed values is complex), was refused. PyTorch accumulates in order with
``log1p(exp(lo - hi)) + hi`` (``hi``: the larger real part), so the imaginary part may leave
``(-pi, pi]``; its gradient is ``conj(exp(x + reverse_logcumsumexp(log(conj(g)) - out)))``.
Expected values are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)

Z = np.array([0.13 + 4.1j, -0.13 - 2j, 0.64 + 1.05j, 0.1 + 2.71j, -0.54 + 0.28j, 0.36 - 2.23j,
              1.3 - 2.77j], dtype=np.complex64)  # fmt: skip
#: torch.logcumsumexp(Z, 0): the first three stay on the sheet of Z[0] (imaginary part > pi).
WANT = np.array([0.13 + 4.1j, 0.6974434852600098 + 4.1797194480896j,
                 -2.1671831607818604 + 3.9817776679992676j, 0.13465729355812073 + 2.8057801723480225j,
                 -0.28979918360710144 + 2.3392813205718994j, 0.4183149039745331 - 2.7392666339874268j,
                 1.6463844776153564 - 2.761000871658325j], dtype=np.complex64)  # fmt: skip


def test_complex_logcumsumexp_kernel_accumulates_in_order_like_pytorch(run):
    got = run("logcumsumexp", [Z], {"axis": 0})
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, WANT, rtol=1e-5, atol=1e-6)
    both = run("logcumsumexp", [np.stack([Z, Z]).T.astype(np.complex128)], {"axis": 0})
    assert both.dtype == np.complex128
    np.testing.assert_allclose(both, np.stack([WANT, WANT]).T, rtol=1e-5, atol=1e-6)
    edge = np.array([-np.inf + 0j, -np.inf + 1j, 2 - 3j, 1 + 3j], dtype=np.complex64)
    got = run("logcumsumexp", [edge], {"axis": 0})
    np.testing.assert_allclose(
        got[2:], [2 - 3j, 2.305368661880493 - 3.0758144855499268j], rtol=1e-5
    )
    assert np.isneginf(got[:2].real).all() and (got[:2].imag == 0).all()


def test_complex_logcumsumexp_and_its_gradient(conn):
    z = np.stack([Z, Z[::-1]])
    x = gt.tensor(z, requires_grad=True)
    out = gt.logcumsumexp(x, dim=1)
    np.testing.assert_allclose(out.detach().numpy()[0], WANT, rtol=1e-5, atol=1e-6)
    w = gt.linspace(-1, 1, 14).reshape(2, 7) * (1 - 0.5j)
    (out * w).real.sum().backward()
    want = np.array(
        [[-9.495253562927246 - 2.2916293144226074j, -6.692328929901123 - 0.16510912775993347j,
          13.557058334350586 + 1.287174940109253j, -1.181085228919983 - 0.5657682418823242j,
          0.3633785545825958 - 0.13429245352745056j, -0.26684504747390747 + 0.012698576785624027j,
          -0.0541560985147953 - 0.02769002504646778j],
         [3.1206958293914795 + 1.2856775522232056j, 1.2702863216400146 - 0.19342520833015442j,
          -0.4401360750198364 - 0.22180546820163727j, 0.3441644608974457 + 0.7562318444252014j,
          -1.1258667707443237 + 0.4245761036872864j, 0.35627129673957825 - 0.1386817991733551j,
          0.2438153624534607 - 0.027957454323768616j]])  # fmt: skip
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-4, atol=1e-5)
    # the same gradient as through log(cumsum(exp(z))), whatever the branch of the log
    y = gt.tensor(z, requires_grad=True)
    (gt.log(gt.cumsum(gt.exp(y), dim=1)) * w).real.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-4, atol=1e-5)
