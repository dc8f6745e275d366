"""3-d convolution and pooling against direct NumPy loops (the oracle): values and shapes of
``F.conv3d``, ``F.conv_transpose3d``, ``F.max_pool3d``, ``F.avg_pool3d`` and the adaptive poolings,
the modules' parameter shapes, initialization and ``repr``, and PyTorch's errors for a wrong input
rank or channel count."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F

rng = np.random.default_rng(0)


def _r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _t3(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


def _conv3d_np(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """A direct loop over output positions."""
    s, p, d = _t3(stride), _t3(padding), _t3(dilation)
    x = np.pad(x, ((0, 0), (0, 0), *((q, q) for q in p)))
    n, c, *size = x.shape
    o, cg, *k = w.shape
    outs = [(size[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(3)]
    out = np.zeros((n, o, *outs))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for pos in itertools.product(*(range(v) for v in outs)):
            window = tuple(slice(pos[i] * s[i], pos[i] * s[i] + d[i] * (k[i] - 1) + 1, d[i])
                           for i in range(3))  # fmt: skip
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg), *window)]
            out[(slice(None), oc, *pos)] = (patch * w[oc]).sum((1, 2, 3, 4))
    if b is not None:
        out += b.reshape(1, o, 1, 1, 1)
    return out


def _conv_transpose3d_np(x, w, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Every input position scatters its weighted kernel into the output."""
    s, p, op, d = _t3(stride), _t3(padding), _t3(output_padding), _t3(dilation)
    n, c, *size = x.shape
    _, og, *k = w.shape
    full = [(size[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] for i in range(3)]
    out = np.zeros((n, og * groups, *full))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for pos in itertools.product(*(range(v) for v in size)):
            for off in itertools.product(*(range(v) for v in k)):
                at = tuple(pos[i] * s[i] + off[i] * d[i] for i in range(3))
                out[(slice(None), slice(g * og, (g + 1) * og), *at)] += (
                    x[(slice(None), ci, *pos)][:, None] * w[(ci, slice(None), *off)][None]
                )
    crop = tuple(slice(p[i], full[i] - p[i]) for i in range(3))
    return out[(slice(None), slice(None), *crop)]


def _pool3d_np(x, k, s, p, reduce, count_include_pad=True):
    """Max (``-inf`` padding) or average pooling by a loop over output positions."""
    k, s, p = _t3(k), _t3(s), _t3(p)
    fill = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), *((q, q) for q in p)), constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), [(q, q) for q in p])
    outs = [(x.shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(3)]
    out = np.zeros((*x.shape[:2], *outs))
    for pos in itertools.product(*(range(v) for v in outs)):
        window = tuple(slice(pos[i] * s[i], pos[i] * s[i] + k[i]) for i in range(3))
        patch = xp[(slice(None), slice(None), *window)]
        if reduce == "max":
            out[(slice(None), slice(None), *pos)] = patch.max((2, 3, 4))
        else:
            count = np.prod(k) if count_include_pad else ones[window].sum()
            out[(slice(None), slice(None), *pos)] = patch.sum((2, 3, 4)) / count
    return out


def _adaptive3d_np(x, outs, reduce):
    def bounds(size, o):
        return [((i * size) // o, -(-((i + 1) * size) // o)) for i in range(o)]

    out = np.zeros((*x.shape[:2], *outs))
    ranges = [bounds(x.shape[2 + i], outs[i]) for i in range(3)]
    for pos in itertools.product(*(range(v) for v in outs)):
        window = tuple(slice(*ranges[i][pos[i]]) for i in range(3))
        patch = x[(slice(None), slice(None), *window)]
        out[(slice(None), slice(None), *pos)] = (
            patch.max((2, 3, 4)) if reduce == "max" else patch.mean((2, 3, 4))
        )
    return out


def _check(got, want, tol=1e-10):
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol)


def test_conv3d_padded_with_bias_matches_a_direct_loop(conn):
    x, w, b = _r(2, 4, 5, 6, 4), _r(8, 4, 3, 3, 3), _r(8)
    _check(F.conv3d(gt.tensor(x), gt.tensor(w), gt.tensor(b), padding=1),
           _conv3d_np(x, w, b, padding=1))  # fmt: skip


def test_conv3d_stride_dilation_groups_match_a_direct_loop(conn):
    x, w = _r(1, 4, 7, 6, 8), _r(6, 2, 2, 3, 2)
    got = F.conv3d(gt.tensor(x), gt.tensor(w), stride=(2, 1, 3), padding=(1, 0, 2),
                   dilation=(1, 2, 1), groups=2)  # fmt: skip
    _check(got, _conv3d_np(x, w, stride=(2, 1, 3), padding=(1, 0, 2), dilation=(1, 2, 1), groups=2))


def test_conv3d_same_and_valid_padding_and_unbatched_input(conn):
    x, w = _r(3, 5, 4, 6), _r(2, 3, 3, 2, 3)
    same = F.conv3d(gt.tensor(x), gt.tensor(w), padding="same")
    assert same.shape == (2, 5, 4, 6)  # unbatched in, unbatched out
    # "same" pads the odd extra element on the right (PyTorch's rule), here along H.
    xp = np.pad(x[None], ((0, 0), (0, 0), (1, 1), (0, 1), (1, 1)))
    _check(same, _conv3d_np(xp, w)[0])
    _check(F.conv3d(gt.tensor(x), gt.tensor(w), padding="valid"), _conv3d_np(x[None], w)[0])


def test_conv_transpose3d_matches_a_scatter_loop(conn):
    x, w, b = _r(2, 4, 3, 2, 3), _r(4, 3, 3, 2, 3), _r(3)
    got = F.conv_transpose3d(gt.tensor(x), gt.tensor(w), gt.tensor(b), stride=(2, 1, 2),
                             padding=(1, 0, 1), output_padding=(1, 0, 0))  # fmt: skip
    want = _conv_transpose3d_np(x, w, (2, 1, 2), (1, 0, 1), (1, 0, 0)) + b.reshape(1, 3, 1, 1, 1)
    _check(got, want)


def test_conv_transpose3d_groups_and_dilation(conn):
    x, w = _r(1, 4, 3, 3, 2), _r(4, 2, 2, 3, 2)
    got = F.conv_transpose3d(gt.tensor(x), gt.tensor(w), stride=2, groups=2, dilation=(2, 1, 1))
    _check(got, _conv_transpose3d_np(x, w, 2, 0, 0, groups=2, dilation=(2, 1, 1)))


def test_conv_transpose3d_is_the_adjoint_of_conv3d(conn):
    x, w = _r(2, 3, 6, 4, 5), _r(4, 3, 3, 2, 3)
    cx = F.conv3d(gt.tensor(x), gt.tensor(w), stride=2, padding=1)
    y = _r(*cx.shape)  # <conv3d(x), y> == <x, conv_transpose3d(y)>
    back = F.conv_transpose3d(gt.tensor(y), gt.tensor(w), stride=2, padding=1,
                              output_padding=(1, 0, 0))  # fmt: skip
    assert back.shape == x.shape
    np.testing.assert_allclose((cx.numpy() * y).sum(), (x * back.numpy()).sum(), rtol=1e-10)


@pytest.mark.parametrize(
    "k, s, p", [(2, 2, 0), ((3, 2, 3), (2, 1, 2), (1, 1, 0)), (3, 1, 1)], ids=["2", "mixed", "3pad"]
)
def test_max_and_avg_pool3d_match_direct_loops(conn, k, s, p):
    x = _r(2, 3, 6, 5, 7)
    _check(F.max_pool3d(gt.tensor(x), k, s, p), _pool3d_np(x, k, s, p, "max"))
    _check(F.avg_pool3d(gt.tensor(x), k, s, p), _pool3d_np(x, k, s, p, "avg"))
    got = F.avg_pool3d(gt.tensor(x), k, s, p, count_include_pad=False)
    _check(got, _pool3d_np(x, k, s, p, "avg", count_include_pad=False))


def test_pool3d_ceil_mode_dilation_and_divisor_override(conn):
    x = _r(1, 2, 5, 6, 7)
    # ceil_mode keeps the last partial window: the same as padding the end with -inf.
    got = F.max_pool3d(gt.tensor(x), 2, ceil_mode=True)
    assert got.shape == (1, 2, 3, 3, 4)
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 0), (0, 1)), constant_values=-np.inf)
    _check(got, _pool3d_np(xp, 2, 2, 0, "max"))
    dil = F.max_pool3d(gt.tensor(x), 2, stride=1, dilation=(2, 1, 3))
    assert dil.shape == (1, 2, 3, 5, 4)
    ref = np.full(dil.shape, -np.inf)  # the max over the 8 dilated offsets of the kernel
    for a, b, c in itertools.product(range(2), range(2), range(2)):
        ref = np.maximum(ref, x[:, :, 2 * a : 2 * a + 3, b : b + 5, 3 * c : 3 * c + 4])
    _check(dil, ref)
    div = F.avg_pool3d(gt.tensor(x), 2, divisor_override=3)
    _check(div, _pool3d_np(x, 2, 2, 0, "avg") * 8 / 3)
    # ceil_mode with padding: windows count padding but not the overhang past it (PyTorch).
    avg = F.avg_pool3d(gt.tensor(x), 3, stride=2, padding=1, ceil_mode=True)
    assert avg.shape == (1, 2, 3, 4, 4)
    # The last window starts at (3, 5, 5) and covers 2x1x2 input elements, 3x2x3 with padding.
    np.testing.assert_allclose(avg.numpy()[0, 0, -1, -1, -1], x[0, 0, 3:, 5:, 5:].sum() / 18)


@pytest.mark.parametrize(
    "outs", [(2, 3, 4), (4, 2, 5), (1, 1, 1)], ids=["even", "uneven", "global"]
)
def test_adaptive_pool3d_matches_pytorchs_windows(conn, outs):
    x = _r(2, 3, 6, 5, 7)
    _check(F.adaptive_avg_pool3d(gt.tensor(x), outs), _adaptive3d_np(x, outs, "mean"))
    _check(F.adaptive_max_pool3d(gt.tensor(x), outs), _adaptive3d_np(x, outs, "max"))


def test_adaptive_pool3d_sizes_none_int_and_unbatched(conn):
    x = _r(3, 6, 5, 7)
    assert F.adaptive_avg_pool3d(gt.tensor(x), (2, None, 3)).shape == (3, 2, 5, 3)
    _check(F.adaptive_max_pool3d(gt.tensor(x), 2), _adaptive3d_np(x[None], (2, 2, 2), "max")[0])


def test_conv3d_module_parameters_init_and_forward(conn):
    m = nn.Conv3d(4, 8, 3, padding=1, groups=2)
    assert m.weight.shape == (8, 2, 3, 3, 3) and m.bias.shape == (8,)
    bound = 1 / np.sqrt(2 * 27)  # kaiming_uniform(a=sqrt(5)): 1/sqrt(fan_in)
    assert (
        np.abs(m.weight.detach().numpy()).max() <= bound
        and np.abs(m.bias.detach().numpy()).max() <= bound
    )
    x = _r(2, 4, 8, 8, 8).astype(np.float32)
    want = _conv3d_np(x.astype(np.float64), m.weight.detach().numpy().astype(np.float64),
                      m.bias.detach().numpy().astype(np.float64), padding=1, groups=2)  # fmt: skip
    _check(m(gt.tensor(x)), want, tol=1e-4)
    t = nn.ConvTranspose3d(4, 6, 2, stride=2, groups=2, bias=False)
    assert t.weight.shape == (4, 3, 2, 2, 2) and t.bias is None
    assert t(gt.tensor(x)).shape == (2, 6, 16, 16, 16)
    assert t(gt.tensor(x), output_size=[17, 16, 17]).shape == (2, 6, 17, 16, 17)


def test_conv3d_padding_modes_pad_before_convolving(conn):
    m = nn.Conv3d(2, 3, 3, padding=(1, 0, 2), padding_mode="circular")
    x = _r(1, 2, 4, 5, 3).astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0), (2, 2)), mode="wrap")
    want = _conv3d_np(xp.astype(np.float64), m.weight.detach().numpy().astype(np.float64),
                      m.bias.detach().numpy().astype(np.float64))  # fmt: skip
    _check(m(gt.tensor(x)), want, tol=1e-4)


def test_3d_modules_print_as_pytorch_does():
    assert repr(nn.Conv3d(4, 8, 3)) == "Conv3d(4, 8, kernel_size=(3, 3, 3), stride=(1, 1, 1))"
    assert repr(nn.Conv3d(4, 8, (3, 1, 1), stride=2, padding=1, dilation=2, groups=2, bias=False,
                          padding_mode="reflect")) == (
        "Conv3d(4, 8, kernel_size=(3, 1, 1), stride=(2, 2, 2), padding=(1, 1, 1), "
        "dilation=(2, 2, 2), groups=2, bias=False, padding_mode=reflect)"
    )  # fmt: skip
    assert repr(nn.Conv3d(4, 8, 3, padding="same")) == (
        "Conv3d(4, 8, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=same)"
    )
    assert repr(nn.ConvTranspose3d(4, 8, 2, stride=2, output_padding=1, groups=2)) == (
        "ConvTranspose3d(4, 8, kernel_size=(2, 2, 2), stride=(2, 2, 2), "
        "output_padding=(1, 1, 1), groups=2)"
    )
    assert repr(nn.MaxPool3d(2)) == (
        "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.AvgPool3d((2, 1, 2), stride=(1, 2, 1), padding=1)) == (
        "AvgPool3d(kernel_size=(2, 1, 2), stride=(1, 2, 1), padding=1)"
    )
    assert repr(nn.AdaptiveAvgPool3d((2, None, 3))) == "AdaptiveAvgPool3d(output_size=(2, None, 3))"
    assert repr(nn.AdaptiveMaxPool3d(1)) == "AdaptiveMaxPool3d(output_size=1)"


def test_3d_modules_reject_bad_arguments_as_pytorch_does():
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv3d(4, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv3d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv3d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(
        ValueError, match='Only "zeros" padding mode is supported for ConvTranspose3d'
    ):
        nn.ConvTranspose3d(4, 4, 3, padding_mode="reflect")


def test_3d_ops_raise_pytorchs_errors_for_rank_and_channels(conn):
    x = gt.zeros(2, 3, 8, 8, 8)
    with pytest.raises(RuntimeError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) input to "
                       r"conv3d, but got input of size: \[2, 3, 4\]"):  # fmt: skip
        F.conv3d(gt.zeros(2, 3, 4), gt.zeros(8, 3, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[8, 4, 3, 3, 3\], "
                       r"expected input\[2, 3, 8, 8, 8\] to have 4 channels, but got 3 channels "
                       "instead"):  # fmt: skip
        F.conv3d(x, gt.zeros(8, 4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv3d(gt.zeros(1, 3, 2, 2, 2), gt.zeros(1, 3, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"Given transposed=1, weight of size \[4, 2, 3, 3, 3\], "
                       r"expected input\[2, 3, 8, 8, 8\] to have 4 channels"):  # fmt: skip
        F.conv_transpose3d(x, gt.zeros(4, 2, 3, 3, 3))
    with pytest.raises(RuntimeError, match="input to conv_transpose3d, but got input of size"):
        F.conv_transpose3d(gt.zeros(3, 4), gt.zeros(3, 2, 3, 3, 3))
    for pool in (F.max_pool3d, F.avg_pool3d):
        with pytest.raises(
            RuntimeError, match=r"non-empty 4D or 5D \(batch mode\) tensor expected"
        ):
            pool(gt.zeros(2, 3, 4), 2)
        with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
            pool(x, 2, padding=2)
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool3d\(\): Expected 4D or 5D tensor, "
                       r"but got \[2, 3\]"):  # fmt: skip
        F.adaptive_avg_pool3d(gt.zeros(2, 3), 2)
    with pytest.raises(RuntimeError, match=r"adaptive_max_pool3d\(\): Expected 4D or 5D tensor"):
        F.adaptive_max_pool3d(gt.zeros(2, 3), 2)
