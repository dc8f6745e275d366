"""Names of PyTorch's submodules that GT lacked: ``gt.fft.hfft2/hfftn/ihfft2/ihfftn``,
``gt.optim.Muon``, ``gt.distributions.ExponentialFamily``, ``gt.func.functionalize`` and
``replace_all_batch_norm_modules_``, ``gt.autograd``'s engine flags, ``gt.autograd.graph``'s
``register_multi_grad_hook``/``increment_version``/``allow_mutation_on_saved_tensors``/``Node``,
and ``gt.nn.utils.convert_conv{2,3}d_weight_memory_format``.

Every expected value was computed by PyTorch 2.13 (CPU) on the same inputs and pasted in; errors
are matched by PyTorch's messages."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.distributions as D
from gt.autograd.graph import (
    allow_mutation_on_saved_tensors,
    increment_version,
    register_multi_grad_hook,
)

pytestmark = pytest.mark.timeout(180)

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
Z = [[1 + 2j, -0.5 + 0.25j, 0.75 - 1j], [0.5 - 0.5j, 2 + 0j, -1 + 1.5j]]


def _x() -> gt.Tensor:
    return gt.tensor(np.array(X, dtype=np.float64))


def _z() -> gt.Tensor:
    return gt.tensor(np.array(Z, dtype=np.complex128))


# ----------------------------------------------------------------------------- gt.fft
def test_hfftn_and_hfft2_values_as_pytorch(conn):
    np.testing.assert_allclose(
        gt.fft.hfftn(_z()).numpy(), [[4.25, 2.25, -1.75, 1.25], [-2.75, -0.75, 7.25, -1.75]]
    )
    want = [
        [1.0327955589886448, 1.0056518819184659, -0.44893644383053233, -0.10957847019378082,
         0.45655914622091137],
        [0.6235667168117378, -2.218624721220661, 1.0995644630374504, 1.1309798399166056,
         -0.22625745636822536],
        [-0.49446727193815726, 0.26596277773923255, 2.810694490002705, -0.9621161982987547,
         -0.09281096657822414],
    ]  # fmt: skip
    np.testing.assert_allclose(gt.fft.hfft2(_z(), s=(3, 5), norm="ortho").numpy(), want)
    out = gt.fft.hfftn(_x(), dim=(0,), norm="forward")  # a real input, along one dim
    np.testing.assert_allclose(out.numpy(), [[1.0, -0.375, 0.625], [-0.5, -0.625, 1.375]])
    assert out.dtype == gt.float64
    assert gt.fft.hfftn(_z().to(gt.complex64)).dtype == gt.float32
    assert gt.fft.hfft2(_x().float()).dtype == gt.float32


def test_ihfftn_and_ihfft2_values_as_pytorch(conn):
    want = [
        [0.41666666666666663 - 0j, 0.29166666666666663 - 0.28867513459481287j],
        [0.08333333333333334 + 0j, -0.29166666666666663 - 0.5773502691896257j],
    ]
    out = gt.fft.ihfftn(_x())
    assert out.dtype == gt.complex128
    np.testing.assert_allclose(out.numpy(), want, atol=1e-15)
    want = [
        [0.8838834764831843 - 0j, 0.2651650429449553 - 0.2651650429449553j, 1.414213562373095 - 0j],
        [0.17677669529663687 + 0j, -1.3258252147247764 - 0.44194173824159216j,
         1.0606601717798212 + 0j],
    ]  # fmt: skip
    np.testing.assert_allclose(gt.fft.ihfft2(_x(), s=(2, 4), norm="ortho").numpy(), want)
    assert gt.fft.ihfftn(_x().float()).dtype == gt.complex64


def test_hermitian_transforms_gradients_as_pytorch(conn):
    z = _z().requires_grad_()
    w = gt.arange(8, dtype=gt.float64).reshape(2, 4)
    (gt.fft.hfftn(z) * w).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [[28, -8 - 8j, -4], [-16, 0, 0]], atol=1e-12)
    x = _x().requires_grad_()
    wc = gt.tensor(np.array([[1 + 1j, 2 - 1j], [0.5j, -1 + 0j]]))
    (gt.fft.ihfft2(x) * wc).real.sum().backward()
    want = [
        [0.3333333333333333, 0.22767090063073975, -0.0610042339640731],
        [0.6666666666666666, 0.0610042339640731, -0.22767090063073975],
    ]
    np.testing.assert_allclose(x.grad.numpy(), want, atol=1e-15)


def test_hermitian_transforms_errors_as_pytorch(conn):
    with pytest.raises(RuntimeError, match="Only supports floating-point dtypes, but found: ComplexFloat"):  # fmt: skip
        gt.fft.ihfftn(gt.zeros(3, 4, dtype=gt.complex64))
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bad"'):
        gt.fft.hfftn(_z(), norm="bad")
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        gt.fft.hfft2(_z(), dim=(0, 0))
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        gt.fft.ihfftn(_x(), s=(0, 4))
    with pytest.raises(RuntimeError, match="dim and shape arguments must have the same length"):
        gt.fft.ihfft2(_x(), s=(3,))
    with pytest.raises(IndexError, match=r"(?i)Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)"):  # fmt: skip
        gt.fft.hfftn(_x(), dim=(0, 5))


# ----------------------------------------------------------------------------- gt.optim.Muon
W0 = [[0.1, -0.2, 0.3, 0.4], [0.5, 0.6, -0.7, 0.8], [-0.9, 1.0, 0.15, -0.25]]
GRADS = [
    [[0.30000001192092896, -0.10000000149011612, 0.20000000298023224, 0.05000000074505806],
     [-0.4000000059604645, 0.25, 0.10000000149011612, -0.30000001192092896],
     [0.15000000596046448, 0.20000000298023224, -0.3499999940395355, 0.44999998807907104]],
    [[0.5, -0.30000001192092896, 0.30000001192092896, 0.0],
     [-0.9000000357627869, 0.4000000059604645, 0.10000000149011612, -0.7000000476837158],
     [0.20000001788139343, 0.30000001192092896, -0.800000011920929, 0.7999999523162842]],
    [[0.7000000476837158, -0.5, 0.40000003576278687, -0.04999999701976776],
     [-1.4000000953674316, 0.550000011920929, 0.10000000894069672, -1.100000023841858],
     [0.25, 0.40000003576278687, -1.25, 1.1499998569488525]],
]  # fmt: skip
BUF = [
    [0.07228749990463257, -0.04376250132918358, 0.043275002390146255, -0.00024374968779738992],
    [-0.1308000087738037, 0.05778125301003456, 0.01426250021904707, -0.1017875075340271],
    [0.02876875177025795, 0.043275002390146255, -0.11629375070333481, 0.11580624431371689],
]


def _muon_steps(transpose: bool = False, **kw):
    w = np.array(W0, dtype=np.float32)
    p = gt.tensor(w.T.copy() if transpose else w, requires_grad=True)
    opt = gt.optim.Muon([p], **kw)
    for g in GRADS:
        g = np.array(g, dtype=np.float32)
        p.grad = gt.tensor(g.T.copy() if transpose else g)
        opt.step()
    return p, opt


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        (dict(lr=0.02), [
            [0.05776006728410721, -0.2163158804178238, 0.28028154373168945, 0.40522873401641846],
            [0.5228143334388733, 0.5610575079917908, -0.7081127762794495, 0.8316748738288879],
            [-0.9165211915969849, 0.9688734412193298, 0.17913201451301575, -0.28127700090408325],
        ]),
        (dict(lr=0.05, nesterov=False, weight_decay=0.01, adjust_lr_fn="match_rms_adamw"), [
            [0.06275815516710281, -0.2154335081577301, 0.2781587839126587, 0.40164846181869507],
            [0.526814877986908, 0.5643534660339355, -0.7133055329322815, 0.8319898247718811],
            [-0.9190312623977661, 0.9735530614852905, 0.17808344960212708, -0.2851520776748657],
        ]),
    ],
)  # fmt: skip
def test_muon_steps_equal_pytorch(conn, kw, want):
    p, opt = _muon_steps(**kw)
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6, atol=1e-7)
    state = opt.state[p]
    assert list(state) == ["momentum_buffer"]
    np.testing.assert_allclose(state["momentum_buffer"].numpy(), BUF, rtol=1e-6, atol=1e-8)


def test_muon_on_a_tall_matrix_equals_pytorch(conn):
    p, _ = _muon_steps(transpose=True, lr=0.02)
    want = [
        [0.05131815746426582, 0.5268068909645081, -0.9199108481407166],
        [-0.21902523934841156, 0.5555889010429382, 0.9649844765663147],
        [0.2775089740753174, -0.7100163698196411, 0.18377770483493805],
        [0.4064081311225891, 0.8373160362243652, -0.2863471210002899],
    ]
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6, atol=1e-7)


def test_muon_groups_repr_and_errors_as_pytorch(conn):
    p = gt.zeros(3, 4, requires_grad=True)
    opt = gt.optim.Muon([p])
    assert opt.defaults == {
        "lr": 0.001, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
        "ns_coefficients": (3.4445, -4.775, 2.0315), "eps": 1e-07, "ns_steps": 5,
        "adjust_lr_fn": None,
    }  # fmt: skip
    assert sorted(opt.param_groups[0]) == sorted(["params", *opt.defaults])
    assert repr(opt) == (
        "Muon (\nParameter Group 0\n    adjust_lr_fn: None\n    eps: 1e-07\n    lr: 0.001\n"
        "    momentum: 0.95\n    nesterov: True\n    ns_coefficients: (3.4445, -4.775, 2.0315)\n"
        "    ns_steps: 5\n    weight_decay: 0.1\n)"
    )
    for kw, msg in [
        (dict(lr=-1.0), "Learning rate should be >= 0 but is: -1.0"),
        (dict(momentum=-0.1), "momentum should be >= 0 but is: -0.1"),
        (dict(weight_decay=-1.0), "weight decay should be >= 0 but is: -1.0"),
        (dict(adjust_lr_fn="foo"), "Adjust learning rate function foo is not supported"),
    ]:
        with pytest.raises(ValueError, match=msg):
            gt.optim.Muon([p], **kw)
    with pytest.raises(ValueError, match="Muon only supports 2D parameters whereas we found a parameter with size"):  # fmt: skip
        gt.optim.Muon([gt.zeros(3, requires_grad=True)])
    q = gt.zeros(3, 4, dtype=gt.complex64, requires_grad=True)
    q.grad = gt.zeros(3, 4, dtype=gt.complex64)
    with pytest.raises(RuntimeError, match="Muon does not support complex parameters"):
        gt.optim.Muon([q]).step()
    p.grad = gt.ones(3, 4)
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        gt.optim.Muon([p], ns_steps=100).step()
    with pytest.raises(ValueError, match="Coefficients must be a tuple of exactly 3 values"):
        gt.optim.Muon([p], ns_coefficients=(1.0, 2.0)).step()


# ----------------------------------------------------------------------------- ExponentialFamily
def test_exponential_family_members_as_pytorch():
    members = sorted(
        n for n in D.__all__
        if isinstance(getattr(D, n), type) and issubclass(getattr(D, n), D.ExponentialFamily)
    )  # fmt: skip
    assert members == ["Bernoulli", "Beta", "Chi2", "ContinuousBernoulli", "Dirichlet",
                       "Exponential", "ExponentialFamily", "Gamma", "Normal", "Poisson",
                       "Wishart"]  # fmt: skip
    from gt.distributions.exp_family import ExponentialFamily  # PyTorch's module path

    assert ExponentialFamily is D.ExponentialFamily


def test_bregman_entropy_and_kl_as_pytorch(conn):
    f64 = gt.float64
    gamma = D.Gamma(gt.tensor([0.5, 2.0, 3.5], dtype=f64), gt.tensor([1.0, 0.5, 2.0], dtype=f64))
    want = [0.09060992991398864, 2.270362845461478, 1.2499348201740212]
    np.testing.assert_allclose(
        D.ExponentialFamily.entropy(gamma).detach().numpy(), want, rtol=1e-12
    )
    np.testing.assert_allclose(gamma.entropy().numpy(), want, rtol=1e-12)  # the closed form
    normal = D.Normal(gt.tensor([0.0, 1.0], dtype=f64), gt.tensor([0.5, 2.0], dtype=f64))
    want = [0.7257913526447274, 2.112085713764618]
    np.testing.assert_allclose(
        D.ExponentialFamily.entropy(normal).detach().numpy(), want, rtol=1e-12
    )
    bern = D.Bernoulli(gt.tensor([0.2, 0.7], dtype=f64))
    want = [0.5004024235381879, 0.6108643020548934]
    np.testing.assert_allclose(D.ExponentialFamily.entropy(bern).detach().numpy(), want, rtol=1e-12)
    with pytest.raises(NotImplementedError):  # (no expected carrier measure, as in PyTorch)
        D.Poisson(gt.tensor([1.0, 2.5])).entropy()
    s1 = gt.tensor([[2.0, 0.3], [0.3, 1.0]], dtype=f64)
    s2 = gt.tensor([[1.0, -0.2], [-0.2, 1.5]], dtype=f64)
    kl = D.kl_divergence(
        D.Wishart(gt.tensor(4.0, dtype=f64), s1), D.Wishart(gt.tensor(5.0, dtype=f64), s2)
    )  # (no closed form: the Bregman divergence)
    assert kl.item() == pytest.approx(1.147996554162267, rel=1e-12)
    rate = gt.tensor([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="cross KL-divergence between different exponential families"):  # fmt: skip
        D.kl_divergence(D.Poisson(rate), D.Exponential(rate))


# ----------------------------------------------------------------------------- gt.func
def test_functionalize_as_pytorch_eager(conn):
    def f(x):
        y = x.clone()
        y.add_(1)
        x.mul_(2)
        return y, x

    x = gt.ones(3)
    g = gt.func.functionalize(f)
    assert g.__name__ == "f"
    y, out = g(x)
    assert y.tolist() == [2.0, 2.0, 2.0] and x.tolist() == [2.0, 2.0, 2.0]  # inputs still change
    assert out is not x
    out.mul_(5)  # a result that was an input is a copy of it
    assert x.tolist() == [2.0, 2.0, 2.0]

    def h(y):
        z = y * 1
        z.add_(1)
        return z.sum()

    assert gt.func.grad(gt.func.functionalize(h))(gt.ones(3)).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="received invalid argument for remove=bad"):
        gt.func.functionalize(f, remove="bad")
    gt.func.functionalize(f, remove="mutations_and_views")


def test_replace_all_batch_norm_modules_(conn):
    m = gt.nn.Sequential(
        gt.nn.Linear(2, 3), gt.nn.BatchNorm1d(3), gt.nn.Sequential(gt.nn.BatchNorm2d(4))
    )
    assert gt.func.replace_all_batch_norm_modules_(m) is m
    for bn in (m[1], m[2][0]):
        assert bn.running_mean is None and bn.running_var is None
        assert bn.num_batches_tracked is None and bn.track_running_stats is False
    assert list(m.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias", "2.0.weight",
                                    "2.0.bias"]  # fmt: skip
    m.eval()
    x = gt.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    np.testing.assert_allclose(
        m[1](x).detach().numpy(), [[-1.0, 0.0, 1.0], [1.0, 0.0, -1.0]], atol=1e-4
    )


# ----------------------------------------------------------------------------- gt.autograd
def test_autograd_engine_flags_as_pytorch():
    assert gt.autograd.is_multithreading_enabled() is True
    assert gt.autograd.is_view_replay_enabled() is False
    with gt.autograd.set_multithreading_enabled(False):
        assert gt.autograd.is_multithreading_enabled() is False
    assert gt.autograd.is_multithreading_enabled() is True
    gt.autograd.set_multithreading_enabled(False)
    assert gt.autograd.is_multithreading_enabled() is False
    gt.autograd.set_multithreading_enabled(True)
    assert gt.autograd.is_multithreading_enabled() is True


def test_register_multi_grad_hook_as_pytorch(conn):
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = gt.tensor([3.0, 4.0], requires_grad=True)
    c = gt.tensor([5.0], requires_grad=True)
    calls = []
    h = register_multi_grad_hook(
        (a, b, c), lambda gs: calls.append([None if g is None else g.tolist() for g in gs])
    )
    (a * b).sum().backward()
    (a * 2).sum().backward()
    assert calls == [[[3.0, 4.0], [1.0, 2.0], None], [[2.0, 2.0], None, None]]
    h.remove()
    (a * b).sum().backward()
    assert len(calls) == 2
    calls = []
    register_multi_grad_hook((a, b), lambda g: calls.append(g.tolist()), mode="any")
    (a * b * 3).sum().backward()
    assert len(calls) == 1 and calls[0] in ([9.0, 12.0], [3.0, 6.0])
    gt.autograd.grad((b * 5).sum(), [b])
    assert calls[1:] == [[5.0, 5.0]]
    with pytest.raises(ValueError, match=r"Expects mode to be one of \('all', 'any'\) but got bad"):
        register_multi_grad_hook((a,), lambda g: None, mode="bad")


def test_graph_versions_mutation_and_node(conn):
    x = gt.ones(2)
    assert x._version == 0
    increment_version(x)
    increment_version([x, x])
    assert x._version == 3
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    y = a.clone()
    z = y * y
    increment_version(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    with allow_mutation_on_saved_tensors():
        a = gt.tensor([1.0, 2.0], requires_grad=True)
        y = a.clone()
        z = y * y
        y.mul_(10)
        z.sum().backward()
    assert a.grad.tolist() == [2.0, 4.0]
    node = (a * 2).grad_fn
    assert isinstance(node, gt.autograd.graph.Node) and node.name() == "MulBackward0"


# ----------------------------------------------------------------------------- gt.nn.utils
def test_convert_conv_weight_memory_format_as_pytorch(conn):
    m = gt.nn.Sequential(
        gt.nn.Conv2d(2, 3, 3), gt.nn.Sequential(gt.nn.ConvTranspose2d(3, 2, 3)),
        gt.nn.Conv1d(2, 2, 1),
    )  # fmt: skip
    w = m[0].weight
    before = w.detach().clone()
    assert gt.nn.utils.convert_conv2d_weight_memory_format(m, gt.channels_last) is m
    assert m[0].weight is w and gt.equal(w, before)
    assert m[0].weight.stride() == (18, 1, 6, 2) and m[1][0].weight.stride() == (18, 1, 6, 2)
    assert m[0].weight.is_contiguous(memory_format=gt.channels_last)
    assert m[2].weight.stride() == (2, 1, 1)
    m3 = gt.nn.Sequential(gt.nn.Conv3d(2, 3, 3), gt.nn.ConvTranspose3d(3, 2, 3))
    gt.nn.utils.convert_conv3d_weight_memory_format(m3, gt.channels_last_3d)
    assert m3[0].weight.stride() == (54, 1, 18, 6, 2) == m3[1].weight.stride()
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        gt.nn.utils.convert_conv2d_weight_memory_format(gt.nn.Conv2d(2, 3, 3), gt.channels_last_3d)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        gt.nn.utils.convert_conv3d_weight_memory_format(gt.nn.Conv3d(2, 3, 3), gt.channels_last)
