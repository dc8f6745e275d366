"""``pad`` in the border modes is one ``pad_border`` instruction forward and one
``pad_border_backward`` back (a full copy per padded dimension before), with NumPy's padded
values and each border element's gradient added into the element it copies, twice
differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F
from gt.runtime import ops as O

PAD = O.OPCODE["pad_border"]
BACKWARD = O.OPCODE["pad_border_backward"]
NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
rng = np.random.default_rng(29)


def _source_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each padded position along one dimension, the input position it copies."""
    i = np.arange(-before, n + after)
    if mode == "reflect":
        return np.abs(i) - np.where(i >= n, 2 * (i - n + 1), 0)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    return i % n


def _grad_ref(g: np.ndarray, shape: tuple, pads: list, mode: str) -> np.ndarray:
    """``x``'s gradient: every padded position's gradient added into the input it copies."""
    first = len(shape) - len(pads)
    grids = np.meshgrid(
        *[np.arange(n) for n in shape[:first]],
        *[_source_index(n, b, a, mode) for n, (b, a) in zip(shape[first:], pads)],
        indexing="ij",
    )
    out = np.zeros(shape)
    np.add.at(out, tuple(grids), g)
    return out


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pad",
    [((2, 3, 9), (2, 3)), ((2, 3, 7, 8), (1, 2, 3, 0)), ((1, 2, 4, 5, 6), (1, 1, 2, 0, 3, 3))],
)
def test_a_border_pad_is_one_instruction_each_way(conn, sent, mode, shape, pad):
    x = rng.standard_normal(shape)
    X = gt.tensor(x, requires_grad=True)
    sent.clear()
    y = F.pad(X, pad, mode=mode)
    assert sent == [PAD]
    dims = len(pad) // 2
    pads = [(pad[2 * k], pad[2 * k + 1]) for k in reversed(range(dims))]
    widths = [(0, 0)] * (x.ndim - dims) + pads
    np.testing.assert_array_equal(y.detach().numpy(), np.pad(x, widths, mode=NUMPY_MODES[mode]))
    g = rng.standard_normal(y.shape)
    sent.clear()
    y.backward(gt.tensor(g))
    assert sent.count(BACKWARD) == 1 and PAD not in sent
    np.testing.assert_allclose(X.grad.numpy(), _grad_ref(g, shape, pads, mode), rtol=1e-12)


def test_the_backward_is_differentiable_again(conn):
    x0 = rng.standard_normal((2, 5, 6))
    X = gt.tensor(x0, requires_grad=True)
    (gx,) = gt.autograd.grad((F.pad(X, (2, 1, 1, 2), mode="reflect") ** 2).sum(), X,
                             create_graph=True)  # fmt: skip
    (hv,) = gt.autograd.grad((gx * gt.tensor(x0)).sum(), X)
    # d/dx of sum(pad(x)^2) is 2 * P^T P x, linear in x: its derivative along x0 is itself
    np.testing.assert_allclose(hv.numpy(), gx.detach().numpy(), rtol=1e-12)


def test_a_channels_last_input_stays_channels_last_and_crops_keep_their_path(conn, sent):
    x = gt.tensor(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    x = x.contiguous(memory_format=gt.channels_last)
    y = F.pad(x, (1, 1, 1, 1), mode="replicate")
    assert y.is_contiguous(memory_format=gt.channels_last)
    sent.clear()
    F.pad(x, (-1, 1, 0, 0), mode="replicate")  # (a negative pad crops: the composition)
    assert PAD not in sent
