"""Idioms of quantum-simulation code that GT once got wrong (found while writing the
``quantum_simulation`` programs): a complex tensor's ``.real`` and ``.imag`` were copies, so
building a Pauli matrix with ``Y.imag[0, 1] = -1`` or ``H.real += J * term.real`` left it unchanged
(and ``z.real = v`` had no setter); ``linalg.matrix_power`` refused complex unitaries (``U ** 2**k``
in phase estimation) and integer matrices. Expected values are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_writes_through_real_and_imag_views_change_the_complex_tensor(conn):
    Y = gt.zeros(2, 2, dtype=gt.complex64)
    Y.imag[0, 1] = -1
    Y.imag[1, 0] = 1
    np.testing.assert_array_equal(Y.numpy(), [[0, -1j], [1j, 0]])
    z = gt.tensor([1 + 2j, 3 - 1j])
    z.real.mul_(2)
    z.imag.zero_()
    np.testing.assert_array_equal(z.numpy(), [2, 6])
    re = z.real  # a view follows its base's later changes
    z.mul_(1j)
    np.testing.assert_array_equal(re.numpy(), [0, 0])
    H = gt.zeros(2, 2, dtype=gt.complex128)
    H.real += gt.eye(2, dtype=gt.float64)  # (Python: H.real = H.real.__iadd__(...))
    H.imag = gt.tensor([[0.0, 2.0], [-2.0, 0.0]], dtype=gt.float64)
    np.testing.assert_array_equal(H.numpy(), [[1, 2j], [-2j, 1]])
    r = gt.tensor([1.0, 2.0])
    r.real = gt.tensor([5.0, 6.0])  # a real tensor is its own real part
    np.testing.assert_array_equal(r.numpy(), [5, 6])


def test_writes_into_real_and_imag_views_are_differentiable(conn):
    x = gt.tensor([0.5, 0.25], requires_grad=True)
    w = gt.zeros(2, dtype=gt.complex64)
    w.real.copy_(x * 2)
    w.imag.copy_(x**2)
    (w.abs() ** 2).sum().backward()
    np.testing.assert_allclose(w.detach().numpy(), [1 + 0.25j, 0.5 + 0.0625j])
    np.testing.assert_allclose(x.grad.numpy(), [4.5, 2.0625])  # (PyTorch's)


def test_matrix_power_of_complex_and_integer_matrices(conn):
    z = gt.tensor(np.array([[0, 1j], [1, 0.5]]))
    np.testing.assert_allclose(
        gt.linalg.matrix_power(z, 3).numpy(), [[0.5j, -1 + 0.25j], [0.25 + 1j, 0.125 + 1j]]
    )
    np.testing.assert_allclose(
        gt.linalg.matrix_power(z, -2).numpy(), [[-0.25 - 1j, 0.5j], [0.5, -1j]], atol=1e-15
    )
    fib = gt.tensor([[1, 1], [1, 0]])
    assert gt.linalg.matrix_power(fib, 5).tolist() == [[8, 5], [5, 3]]
    assert gt.linalg.matrix_power(fib, 0).tolist() == [[1, 0], [0, 1]]
    with pytest.raises(Exception, match="linalg.inv"):  # (a negative power inverts)
        gt.linalg.matrix_power(fib, -1)
