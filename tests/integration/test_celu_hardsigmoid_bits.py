"""``celu``'s and ``hardsigmoid``'s float64 gradients bit for bit as PyTorch's CPU kernels give
them: PyTorch's derivative formulas carry float32 constants into float64 (``celu``:
``elu_backward(grad, alpha, 1, 1.0 / alpha.toFloat(), ...)``, one over ``alpha`` rounded to
float32 first; ``hardsigmoid_backward``: ``grad * (1.0f / 6.0f)``), and ``hardsigmoid`` divides
by 6 where a product with ``1 / 6`` rounds differently. The values below are torch 2.13's (CPU)
for these inputs and upstream gradients, pasted; the points avoid the few where PyTorch's
vectorised ``exp`` (SLEEF's) is an ulp off the correctly rounded one GT's backends give."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)
F = gt.nn.functional

XS = [-7.25, -3.1, -2.2, -1.3, -0.61, -0.05, -1e-300, -0.0, 0.0, 0.4, 1.7, 2.99, 3.0, 3.5,
      float("nan")]  # fmt: skip
GS = [0.37 + 0.11 * i * (-1) ** i for i in range(len(XS))]

# torch.nn.functional.hardsigmoid(x) and its gradient (backward(g)), float64
HARDSIGMOID = [0.0, 0.0, 0.1333333333333333, 0.2833333333333333, 0.3983333333333334,
               0.4916666666666667, 0.5, 0.5, 0.5, 0.5666666666666667, 0.7833333333333333,
               0.9983333333333334, 1.0, 1.0, float("nan")]  # fmt: skip
HARDSIGMOID_GRAD = [0.0, 0.0, 0.09833333626389502, 0.0066666668653488125, 0.13500000402331352,
                    -0.03000000089406968, 0.171666671782732, -0.06666666865348816,
                    0.2083333395421505, -0.10333333641290665, 0.245000007301569,
                    -0.14000000417232514, 0.0, 0.0, 0.0]  # fmt: skip
# torch.nn.functional.celu(x, alpha).backward(g), float64: {alpha: x.grad}
CELU_GRAD = {
    0.3: [1.1823665767117062e-11, 8.45792564171299e-06, 0.00038550136513857466,
          0.0005249492190096563, 0.10602776093049604, -0.15236670543488648, 1.029999959071479,
          -0.3999999841054287, 1.2499999503294645, -0.62, 1.4700000000000002, -0.84, 1.69, -1.06,
          1.9100000000000001],
    1.0: [0.00026276452387174315, 0.011712792622325028, 0.06537386343377698,
          0.010901271721360498, 0.4401142039503449, -0.17122129641012857, 1.03, -0.4, 1.25,
          -0.62, 1.4700000000000002, -0.84, 1.69, -1.06, 1.9100000000000001],
    2.7: [0.025237168547377505, 0.08247815624413535, 0.26120556921223453,
          0.024714693949034982, 0.6461995183740857, -0.17669733816044023, 1.0299999818095458,
          -0.39999999293574595, 1.2499999779242061, -0.62, 1.4700000000000002, -0.84, 1.69,
          -1.06, 1.9100000000000001],
}  # fmt: skip


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def test_hardsigmoid_float64_value_and_gradient_are_pytorchs_bits(conn):
    x = gt.tensor(XS, dtype="float64", requires_grad=True)
    y = F.hardsigmoid(x)
    y.backward(gt.tensor(GS, dtype="float64"))
    np.testing.assert_array_equal(_bits(y.detach().numpy()), _bits(HARDSIGMOID))
    np.testing.assert_array_equal(_bits(x.grad.numpy()), _bits(HARDSIGMOID_GRAD))
    assert y.grad_fn.name() == "HardsigmoidBackward0"


@pytest.mark.parametrize("alpha", list(CELU_GRAD))
def test_celu_float64_gradient_is_pytorchs_bits(conn, alpha):
    x = gt.tensor(XS, dtype="float64", requires_grad=True)
    y = F.celu(x, alpha)
    y.backward(gt.tensor(GS, dtype="float64"))
    np.testing.assert_array_equal(_bits(x.grad.numpy()), _bits(CELU_GRAD[alpha]))
    assert y.grad_fn.name() == "CeluBackward0"


def test_celu_module_and_inplace_share_the_gradient(conn):
    x = gt.tensor(XS, dtype="float64", requires_grad=True)
    gt.nn.CELU(0.3)(x).backward(gt.tensor(GS, dtype="float64"))
    np.testing.assert_array_equal(_bits(x.grad.numpy()), _bits(CELU_GRAD[0.3]))
    x2 = gt.tensor(XS, dtype="float64", requires_grad=True)
    F.celu(x2 * 1.0, 0.3, inplace=True).backward(gt.tensor(GS, dtype="float64"))
    np.testing.assert_array_equal(_bits(x2.grad.numpy()), _bits(CELU_GRAD[0.3]))
