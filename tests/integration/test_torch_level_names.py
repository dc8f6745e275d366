"""``torch.<name>`` functions, tensor methods and dtypes that a probe of ``dir(torch)`` found
missing (:mod:`gt.torch_level`, :mod:`gt.amp`'s setters, ``gt.uint16/32/64``). Every value and
message below was probed on PyTorch 2.13 (CPU) and pasted here."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gt

FLOAT_TYPES = "(<class 'numpy.integer'>, <class 'numpy.floating'>, <class 'int'>, <class 'float'>)"


def close(t, expected, tol=1e-5):
    np.testing.assert_allclose(np.asarray(t.detach().numpy(), np.float64), expected, atol=tol)


# ----------------------------------------------------------------------------- sym_*
def test_sym_helpers_on_numbers_and_0d_tensors(conn):
    assert gt.sym_int(3.7) == 3 and gt.sym_int(-3.7) == -3 and type(gt.sym_int(True)) is int
    assert gt.sym_int(gt.tensor(3.7)) == 3 and gt.sym_float(gt.tensor(3)) == 3.0
    assert type(gt.sym_float(3)) is float
    assert gt.sym_max(2, 3.5) == 3.5 and type(gt.sym_max(2, 3)) is int
    assert type(gt.sym_min(2, 3.5)) is float and gt.sym_min(2, 3.5) == 2.0
    assert gt.sym_not(True) is False and gt.sym_not(0) is True
    assert gt.sym_not(gt.tensor(True)) is False
    assert gt.sym_sqrt(4) == 2.0 and gt.sym_sqrt(gt.tensor(4.0)) == 2.0
    assert gt.sym_sum([1, 2, 3]) == 6 and gt.sym_sum(1, 2.5) == 3.5 and gt.sym_sum([]) == 0
    assert gt.sym_sum([gt.tensor(1.0), gt.tensor(2.0)]).item() == 3.0
    assert gt.sym_ite(True, 1, 2) == 1 and gt.sym_ite(False, 1, 2) == 2


def test_sym_helpers_errors(conn):
    with pytest.raises(AssertionError, match=r"expected \(<class 'numpy.integer'>.*got <class 'gt"):
        gt.sym_max(gt.tensor(2.0), 3)
    with pytest.raises(AssertionError, match="expected SymBool or bool, got <class 'int'>"):
        gt.sym_ite(1, 1, 2)
    with pytest.raises(AssertionError, match="type mismatch: <class 'int'> vs <class 'float'>"):
        gt.sym_ite(True, 1, 2.0)
    with pytest.raises(OverflowError, match="cannot convert float infinity to integer"):
        gt.sym_int(float("inf"))
    with pytest.raises(ValueError, match="math domain error"):
        gt.sym_sqrt(-1)


# ----------------------------------------------------------------------------- autocast state
def test_autocast_setters_drive_the_global_state(conn):
    a = gt.ones(2, 2)
    try:
        assert not gt.is_autocast_enabled("cpu")
        gt.set_autocast_enabled("cpu", True)
        assert gt.is_autocast_enabled("cpu") and (a @ a).dtype == gt.bfloat16
        gt.set_autocast_dtype("cpu", gt.float16)
        assert gt.get_autocast_dtype("cpu") == gt.float16 and (a @ a).dtype == gt.float16
        gt.set_autocast_dtype("cpu", gt.float64)  # (accepted, as by PyTorch)
        assert gt.get_autocast_dtype("cpu") == gt.float64
        gt.set_autocast_dtype("cpu", gt.bfloat16)
        with gt.autocast("cpu", enabled=False):
            assert not gt.is_autocast_enabled("cpu")
            gt.set_autocast_enabled("cpu", True)  # changes the region's state, which it restores
            assert gt.is_autocast_enabled("cpu")
        assert gt.is_autocast_enabled("cpu")
        gt.set_autocast_enabled("cpu", False)
        assert (a @ a).dtype == gt.float32
        with gt.autocast("cpu"):
            gt.set_autocast_dtype("cpu", gt.float16)
            assert (a @ a).dtype == gt.float16
        assert gt.get_autocast_dtype("cpu") == gt.bfloat16
        gt.set_autocast_dtype("cpu", gt.float16)
        with gt.autocast("cpu"):  # a region's default dtype is the current one
            assert (a @ a).dtype == gt.float16
        gt.set_autocast_dtype("cpu", gt.bfloat16)
        with gt.autocast("cpu", dtype=gt.float16), gt.autocast("cpu"):
            assert (a @ a).dtype == gt.float16
        gt.set_autocast_enabled(True)  # the one-argument form is CUDA's
        assert gt.is_autocast_enabled() and gt.is_autocast_enabled("cuda")
        gt.set_autocast_enabled(False)
        gt.set_autocast_enabled("xla", True)
        assert gt.is_autocast_enabled("xla")
        gt.set_autocast_enabled("xla", False)
        assert (
            gt.get_autocast_dtype("hpu") == gt.bfloat16
            and gt.get_autocast_dtype("xla") == gt.bfloat16
        )
        assert (
            gt.get_autocast_dtype("mps") == gt.float16
            and gt.get_autocast_dtype("cuda:0") == gt.float16
        )
    finally:
        gt.set_autocast_enabled("cpu", False)
        gt.set_autocast_dtype("cpu", gt.bfloat16)
        gt.set_autocast_enabled(False)


def test_deprecated_autocast_setters_warn_and_the_cache_flag(conn):
    with pytest.warns(
        DeprecationWarning, match=r"torch.set_autocast_cpu_enabled\(enabled\) is deprecated"
    ):
        gt.set_autocast_cpu_enabled(True)
    assert gt.is_autocast_enabled("cpu")
    with pytest.warns(DeprecationWarning):
        gt.set_autocast_cpu_enabled(False)
    with pytest.warns(
        DeprecationWarning, match=r"Please use torch.set_autocast_dtype\('cpu', dtype\)"
    ):
        gt.set_autocast_cpu_dtype(gt.float16)
    assert gt.get_autocast_dtype("cpu") == gt.float16
    with pytest.warns(
        DeprecationWarning, match=r"Please use torch.set_autocast_dtype\('cuda', dtype\)"
    ):
        gt.set_autocast_gpu_dtype(gt.bfloat16)
    assert gt.get_autocast_dtype("cuda") == gt.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gt.set_autocast_cpu_dtype(gt.bfloat16)
        gt.set_autocast_gpu_dtype(gt.float16)
    assert gt.is_autocast_cache_enabled()
    gt.set_autocast_cache_enabled(False)
    with gt.autocast("cpu"):
        assert not gt.is_autocast_cache_enabled()
    assert not gt.is_autocast_cache_enabled()
    gt.set_autocast_cache_enabled(True)
    with gt.autocast("cpu", cache_enabled=False):
        assert not gt.is_autocast_cache_enabled()
    assert gt.is_autocast_cache_enabled()
    assert gt.clear_autocast_cache() is None


def test_autocast_setters_errors(conn):
    devices = "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: foo"  # fmt: skip
    for call in (lambda: gt.set_autocast_enabled("foo", True), lambda: gt.is_autocast_enabled("foo"),
                 lambda: gt.set_autocast_dtype("foo", gt.float16), lambda: gt.get_autocast_dtype("foo")):  # fmt: skip
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == devices
    with pytest.raises(
        TypeError,
        match=r"set_autocast_enabled\(\): argument 'enabled' \(position 2\) must be bool, not int",
    ):
        gt.set_autocast_enabled("cpu", 1)
    with pytest.raises(
        TypeError,
        match=r"set_autocast_dtype\(\): argument 'dtype' \(position 2\) must be torch.dtype, not str",
    ):
        gt.set_autocast_dtype("cpu", "float16")
    with (
        pytest.raises(TypeError, match=r"enabled must be a bool \(got int\)"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        gt.set_autocast_cpu_enabled(1)
    with pytest.raises(TypeError, match=r"received an invalid combination of arguments - got \(\)"):
        gt.set_autocast_enabled()


# ----------------------------------------------------------------------------- native_*
X = [[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 3.0]]
Y = [[[1.0, 2.0], [0.5, -1.0]], [[3.0, -2.0], [1.5, 0.0]]]
Z = [[[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [2.0, 2.5]]]


def test_native_layer_norm(conn):
    out, mean, rstd = gt.native_layer_norm(gt.tensor(X), [4], gt.tensor([1.0, 2.0, 0.5, 1.0]),
                                           gt.tensor([0.0, 1.0, 0.0, -1.0]), 1e-5)  # fmt: skip
    close(
        out, [[0.058621, -1.696556, 0.73276, -1.175862], [0.365147, -0.46059, -0.547721, 0.46059]]
    )
    close(mean, [[0.4375], [1.0]])
    close(rstd, [[0.937932], [0.730295]])
    _, mean, _ = gt.native_layer_norm(gt.arange(24.0).reshape(2, 3, 4), (3, 4), None, None, 1e-5)
    assert tuple(mean.shape) == (2, 1, 1)
    with pytest.raises(
        RuntimeError,
        match=r"Given normalized_shape=\[5\], expected input with shape \[\*, 5\], but got input of size\[2, 4\]",
    ):
        gt.native_layer_norm(gt.tensor(X), [5], None, None, 1e-5)


def test_native_batch_norm_training_and_eval(conn):
    rm, rv = gt.zeros(2), gt.ones(2)
    out, mean, invstd = gt.native_batch_norm(gt.tensor(Y), gt.tensor([1.0, 2.0]), gt.tensor([0.0, 0.5]),
                                             rm, rv, True, 0.1, 1e-5)  # fmt: skip
    close(
        out,
        [[[0.0, 0.534522], [1.054697, -2.273484]], [[1.069043, -1.603565], [3.273484, -0.054697]]],
    )
    close(mean, [1.0, 0.25])
    close(invstd, [0.534522, 1.109394])
    close(rm, [0.1, 0.025])
    close(rv, [1.366667, 1.008333])
    out, mean, invstd = gt.native_batch_norm(gt.tensor(Y), None, None, rm, rv, False, 0.1, 1e-5)
    close(
        out,
        [
            [[0.769856, 1.625252], [0.473031, -1.020751]],
            [[2.480648, -1.796331], [1.468885, -0.024896]],
        ],
    )
    assert tuple(mean.shape) == (0,) and tuple(invstd.shape) == (0,)


def test_native_group_norm(conn):
    out, mean, rstd = gt.native_group_norm(gt.tensor(Z), gt.tensor([1.0, 2.0, 1.0, 1.0]),
                                           gt.tensor([0.0, 0.0, 1.0, 0.0]), 1, 4, 2, 2, 1e-5)  # fmt: skip
    close(
        out,
        [
            [
                [0.346409, 1.270165],
                [-0.230939, -3.002209],
                [1.987875, -0.646458],
                [0.109764, 0.548819],
            ]
        ],
    )
    close(mean, [[0.625, 1.875]])
    close(rstd, [[0.923757, 0.878111]])
    with pytest.raises(
        RuntimeError,
        match=r"Expected number of channels in input to be divisible by num_groups, but got input of shape \[1, 4, 2\] and num_groups=3",
    ):
        gt.native_group_norm(gt.tensor(Z), None, None, 1, 4, 2, 3, 1e-5)


def test_native_dropout(conn):
    out, mask = gt.native_dropout(gt.ones(3, 4), 0.5, False)
    assert mask.dtype == gt.bool and mask.numpy().all() and (out.numpy() == 1).all()
    out, mask = gt.native_dropout(gt.ones(200, 50), 0.5, None)  # (None trains, as in PyTorch)
    assert mask.dtype == gt.bool and set(np.unique(out.numpy())) == {0.0, 2.0}
    assert ((out.numpy() != 0) == mask.numpy()).all() and 0.45 < mask.float().mean().item() < 0.55
    out, mask = gt.native_dropout(gt.ones(3, 4), 1.0, True)
    assert not mask.numpy().any() and (out.numpy() == 0).all()
    out, mask = gt.native_dropout(gt.ones(3, 4), 0.0, True)
    assert mask.numpy().all() and (out.numpy() == 1).all()
    with pytest.raises(
        RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=-0.5"
    ):
        gt.native_dropout(gt.ones(2, 2), 1.5, True)


def test_native_norm_and_channel_shuffle(conn):
    # (PyTorch's CPU build runs native_norm only for sparse tensors; GT computes the dense norm)
    assert gt.native_norm(gt.tensor([3.0, 4.0])).item() == 5.0
    close(gt.native_norm(gt.tensor([[3.0, 4.0], [1.0, 2.0]]), 1, [1], False, None), [7.0, 3.0])
    out = gt.native_channel_shuffle(gt.arange(8.0).reshape(1, 4, 2), 2)
    assert out.tolist() == [[[0.0, 1.0], [4.0, 5.0], [2.0, 3.0], [6.0, 7.0]]]
    with pytest.raises(
        RuntimeError,
        match="Number of channels must be divisible by groups. Got 4 channels and 3 groups.",
    ):
        gt.native_channel_shuffle(gt.arange(8.0).reshape(1, 4, 2), 3)
    with pytest.raises(
        RuntimeError,
        match="Number of groups to divide channels in must be positive. Value of groups:0",
    ):
        gt.native_channel_shuffle(gt.arange(8.0).reshape(1, 4, 2), 0)
    with pytest.raises(
        RuntimeError,
        match=r"channel_shuffle expects input with > 2 dims, but got input with sizes \[8\]",
    ):
        gt.native_channel_shuffle(gt.arange(8.0), 2)


# ----------------------------------------------------------------------------- flat RNNs
XS = [[[0.5, -1.0]], [[1.0, 0.25]], [[-0.5, 0.75]]]
H = [[[0.1, -0.2]], [[0.0, 0.3]]]


def _lin(a, b, n, shape):
    return gt.linspace(a, b, n).reshape(shape)


def test_flat_gru_bidirectional(conn):
    shapes = [(6, 2), (6, 2), (6,), (6,)] * 2
    params = [_lin(-0.5, 0.5, int(np.prod(s)), s) * (1 + 0.1 * i) for i, s in enumerate(shapes)]
    out, hn = gt.gru(gt.tensor(XS), gt.tensor(H), params, True, 1, 0.0, False, True, False)
    close(out, [[[0.179509, 0.11375, 0.402334, 0.647239]], [[0.445788, 0.423553, 0.609112, 0.666913]],
                [[0.490773, 0.56707, 0.361473, 0.512241]]])  # fmt: skip
    close(hn, [[[0.490773, 0.56707]], [[0.402334, 0.647239]]])


def test_flat_lstm_and_elman_rnns(conn):
    w = [_lin(-0.5, 0.5, 16, (8, 2)), _lin(0.4, -0.4, 16, (8, 2)), gt.linspace(-0.1, 0.1, 8),
         gt.linspace(0.2, 0.0, 8)]  # fmt: skip
    h = gt.tensor(H[:1])
    out, hn, cn = gt.lstm(gt.tensor(XS), (h, h * 2), w, True, 1, 0.0, False, False, False)
    close(out, [[[0.059146, -0.102076]], [[0.072969, 0.015234]], [[0.077187, 0.057959]]])
    close(hn, [[[0.077187, 0.057959]]])
    close(cn, [[[0.141122, 0.104529]]])
    wr = [_lin(-0.5, 0.5, 4, (2, 2)), _lin(0.4, -0.4, 4, (2, 2))]
    out, hn = gt.rnn_tanh(gt.tensor(XS).transpose(0, 1), h, wr, False, 1, 0.0, False, False, True)
    close(out, [[[-0.069886, -0.336376], [-0.547267, 0.409937], [-0.039228, 0.19801]]])
    close(hn, [[[-0.039228, 0.19801]]])
    out, hn = gt.rnn_relu(gt.tensor(XS), h, wr, False, 1, 0.0, False, False, False)
    close(out, [[[0.0, 0.0]], [[0.0, 0.291667]], [[0.163889, 0.175]]])


def test_flat_rnn_matches_the_module_and_the_packed_form(conn):
    m = gt.nn.GRU(3, 2, num_layers=2)
    x, h = gt.randn(4, 2, 3), gt.randn(2, 2, 2)
    ref_out, ref_h = m(x, h)
    flat = [p for layer in m.all_weights for p in layer]  # (PyTorch: m._flat_weights)
    out, hn = gt.gru(x, h, flat, True, 2, 0.0, False, False, False)
    close(out, ref_out.detach().numpy())
    close(hn, ref_h.detach().numpy())
    data, sizes = x.reshape(8, 3), gt.tensor([2, 2, 2, 2])  # every sequence runs every step
    out, hn = gt.gru(data, sizes, h, flat, True, 2, 0.0, False, False)
    close(out, ref_out.detach().numpy().reshape(8, 2))
    close(hn, ref_h.detach().numpy())


def test_flat_rnn_errors(conn):
    w = [gt.ones(6, 2), gt.ones(6, 2), gt.ones(6), gt.ones(6)]
    x, h = gt.ones(3, 1, 2), gt.zeros(1, 1, 2)
    with pytest.raises(
        TypeError,
        match=r"gru\(\) received an invalid combination of arguments - got \(Tensor, Tensor, list, bool, int, float, bool, bool, bool, int\)",
    ):
        gt.gru(x, h, w, True, 1, 0.0, False, False, False, 1)
    with pytest.raises(
        RuntimeError, match="Odd number of params or hiddens given to a bidirectional RNN"
    ):
        gt.gru(x, h, w[:3], True, 1, 0.0, False, True, False)
    with pytest.raises(RuntimeError, match="Expected more weights in stacked_rnn"):
        gt.gru(x, h, w[:2], True, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0 in RNN"):
        gt.rnn_relu(x[:0], h, w[:2], False, 1, 0.0, False, False, False)


# ----------------------------------------------------------------------------- creation and misc
def test_empty_strided_and_empty_permuted(conn):
    t = gt.empty_strided((2, 3), (1, 2))
    assert tuple(t.shape) == (2, 3) and t.stride() == (1, 2)
    assert gt.empty_strided((2, 3), (3, 1), dtype=gt.int64).dtype == gt.int64
    assert gt.empty_strided((2, 3, 4), (1, 8, 2)).stride() == (1, 8, 2)
    with pytest.raises(
        RuntimeError,
        match=r"dimensionality of sizes \(2\) must match dimensionality of strides \(1\)",
    ):
        gt.empty_strided((2, 3), (1,))
    with pytest.raises(NotImplementedError, match="do not lay the tensor out densely"):
        gt.empty_strided((2, 3), (2, 2))  # (overlapping: GT has no raw storage to lay them over)
    t = gt.empty_permuted((2, 3, 4), (0, 2, 1))
    assert tuple(t.shape) == (2, 3, 4) and t.stride() == (12, 1, 3)
    assert gt.empty_permuted((2, 3, 4), (2, 0, 1)).stride() == (3, 1, 6)
    with pytest.raises(RuntimeError, match="Duplicate dim not allowed"):
        gt.empty_permuted((2, 3, 4), (0, 2, 2))
    with pytest.raises(
        RuntimeError, match=r"len\(size\) = 3 is not equal to len\(physical_layout\) = 2"
    ):
        gt.empty_permuted((2, 3, 4), (0, 2))


def test_device_storage_and_in_place_functions(conn):
    assert gt.get_device(gt.ones(2)) == -1
    with pytest.raises(
        TypeError, match=r"get_device\(\): argument 'input' \(position 1\) must be Tensor, not int"
    ):
        gt.get_device(3)
    assert gt.is_storage(gt.ones(2).untyped_storage()) and gt.is_storage(gt.ones(2).storage())
    assert not gt.is_storage(gt.ones(2)) and not gt.is_storage(1)
    a = gt.tensor([0.0, 1.0, 2.0])
    assert gt.i0_(a) is a
    close(a, [1.0, 1.2660658, 2.2795854])
    with pytest.raises(
        RuntimeError, match="result type Float can't be cast to the desired output type Long"
    ):
        gt.i0_(gt.tensor([1, 2]))
    a = gt.ones(2, 3)
    assert gt.resize_as_(a, gt.ones(4)) is a and tuple(a.shape) == (4,)
    assert gt.init_num_threads() is None
    assert (gt.has_lapack, gt.has_spectral) == (True, True)
    assert isinstance(gt.has_mkl, bool) and isinstance(gt.has_openmp, bool)


def test_default_generator_is_the_global_stream(conn):
    g = gt.default_generator
    assert isinstance(g, gt.Generator) and g.manual_seed(3) is g
    assert g.initial_seed() == 3 and gt.initial_seed() == 3
    a = gt.randn(3, generator=g).numpy()
    gt.manual_seed(3)
    assert (gt.randn(3).numpy() == a).all()
    state = g.get_state()
    b = gt.rand(2).numpy()
    g.set_state(state)
    assert (gt.rand(2).numpy() == b).all()


def test_lobpcg_eigenvalues(conn):
    a = gt.tensor([[4.0, 1, 0, 0, 0, 0], [1, 3, 1, 0, 0, 0], [0, 1, 2, 1, 0, 0], [0, 0, 1, 5, 1, 0],
                   [0, 0, 0, 1, 6, 1], [0, 0, 0, 0, 1, 1]], dtype=gt.float64)  # fmt: skip
    e, x = gt.lobpcg(a, k=2)
    close(e, [6.804152, 4.89269])
    assert tuple(x.shape) == (6, 2)
    close(a @ x, (x * e).numpy())
    close(gt.lobpcg(a, k=2, largest=False)[0], [0.79342, 1.097492])
    b = gt.diag(gt.tensor([1.0, 2.0, 1.0, 2.0, 1.0, 2.0], dtype=gt.float64))
    close(gt.lobpcg(a, k=1, B=b)[0], [6.226035])
    assert tuple(gt.lobpcg(a)[0].shape) == (1,)
    with pytest.raises(
        ValueError,
        match=r"LOBPCG algorithm is not applicable when the number of A rows \(=6\) is smaller than 3 x the number of requested eigenpairs \(=3\)",
    ):
        gt.lobpcg(a, k=3)


def test_cond_runs_a_branch_eagerly(conn):
    one = gt.ones(2)
    assert gt.cond(True, lambda a: a + 1, lambda a: a - 1, (one,)).tolist() == [2.0, 2.0]
    assert gt.cond(gt.tensor(False), lambda a: a + 1, lambda a: a - 1, (one,)).tolist() == [
        0.0,
        0.0,
    ]
    assert gt.cond(gt.tensor([True]), lambda a: a + 1, lambda a: a - 1, [one]).tolist() == [
        2.0,
        2.0,
    ]
    assert gt.cond(True, lambda: gt.ones(1), lambda: gt.zeros(1)).tolist() == [1.0]
    x, y = gt.cond(True, lambda a: (a, a * 2), lambda a: (a, a), (one,))
    assert y.tolist() == [2.0, 2.0]
    assert gt.cond(True, lambda a, b: a * b, lambda a, b: a, (one, 3)).tolist() == [3.0, 3.0]
    with pytest.raises(
        RuntimeError,
        match=r"Expected pred to be bool or single-element tensor, but got tensor\(\[ True, False\]\).",
    ):
        gt.cond(gt.tensor([True, False]), lambda a: a, lambda a: a, (one,))
    with pytest.raises(
        RuntimeError,
        match=r"Expect operands to be a tuple of possibly nested dict/list/tuple that only consists of tensor leaves, but got \(tensor\(\[1., 1.\]\), 3\).",
    ):
        gt.cond(gt.tensor(True), lambda a, b: a * b, lambda a, b: a, (one, 3))
    with pytest.raises(RuntimeError, match="Expected pred to be bool or tensor, but got x."):
        gt.cond("x", lambda a: a, lambda a: a, (one,))
    with pytest.raises(RuntimeError, match="Expect both branches to be callable."):
        gt.cond(gt.tensor(True), 1, lambda a: a, (one,))


def test_while_loop_runs_eagerly(conn):
    i, x = gt.while_loop(
        lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (gt.tensor(0), gt.ones(2))
    )
    assert i.item() == 3 and x.tolist() == [8.0, 8.0]
    single = gt.while_loop(lambda i: i < 3, lambda i: i + 1, (gt.tensor(0),))
    assert isinstance(single, gt.Tensor) and single.item() == 3
    assert gt.while_loop(lambda i: i < 3, lambda i: (i + 1,), (0,)) == (3,)
    (never,) = gt.while_loop(lambda i: i < 0, lambda i: (i + 1,), (gt.tensor(0),))
    assert never.item() == 0
    with pytest.raises(RuntimeError, match="Expect cond_fn and body_fn to be callable."):
        gt.while_loop(1, lambda i: (i + 1,), (gt.tensor(0),))
    with pytest.raises(AssertionError, match=r"\[0.5\] can only be of"):
        gt.while_loop(lambda i: i < 3, lambda i: (i + 1,), (0.5,))
    with pytest.raises(RuntimeError, match="Expected cond_fn to return a scalar tensor or a bool"):
        gt.while_loop(lambda i: gt.tensor([True]), lambda i: (i + 1,), (gt.tensor(0),))
    with pytest.raises(
        RuntimeError, match="Expected body_fn_output and carried_inputs to have same metadata"
    ):
        gt.while_loop(lambda i: i < 3, lambda i: (i + 1.0,), (gt.tensor(0),))


# ----------------------------------------------------------------------------- tensor methods
def test_device_flags_and_small_methods(conn):
    t = gt.ones(2)
    assert [t.is_mps, t.is_xpu, t.is_ipu, t.is_xla, t.is_vulkan, t.is_maia, t.is_mtia] == [
        False
    ] * 7
    assert t.output_nr == 0
    assert t.const_data_ptr() == t.data_ptr() and gt.tensor([]).const_data_ptr() == 0
    assert t.storage_type().__name__ == "FloatStorage"
    assert gt.ones(2, dtype=gt.int64).storage_type().__name__ == "LongStorage"
    assert gt.ones(2, dtype=gt.complex64).storage_type().__name__ == "ComplexFloatStorage"
    assert gt.ones(2, dtype=gt.bfloat16).storage_type().__name__ == "BFloat16Storage"
    with pytest.raises(TypeError, match="unsupported dtype 'complex32'"):
        t.chalf()  # (GT has no complex32)


def test_nonzero_static(conn):
    t = gt.tensor([[0.0, 1.0], [2.0, 0.0]])
    assert t.nonzero_static(size=3).tolist() == [[0, 1], [1, 0], [-1, -1]]
    assert t.nonzero_static(size=1, fill_value=7).tolist() == [[0, 1]]
    assert tuple(t.nonzero_static(size=0).shape) == (0, 2)
    assert gt.nonzero_static(t, size=3).tolist() == [[0, 1], [1, 0], [-1, -1]]
    assert tuple(gt.tensor(5.0).nonzero_static(size=2).shape) == (2, 0)
    assert gt.zeros(3).nonzero_static(size=2, fill_value=-5).tolist() == [[-5], [-5]]
    with pytest.raises(
        RuntimeError, match="nonzero_static: 'size' must be an non-negative integer"
    ):
        t.nonzero_static(size=-1)


def test_out_of_place_resize(conn):
    t = gt.tensor([[0.0, 1.0], [2.0, 0.0]])
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = t.resize(4)
    assert r.tolist() == [0.0, 1.0, 2.0, 0.0]
    r[0] = 9.0  # a view, as PyTorch's
    assert t.tolist() == [[9.0, 1.0], [2.0, 0.0]]
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert t.resize_as(gt.ones(4)).shape == (4,)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError) as e:
        t.resize(2, 3)
    assert str(e.value) == (
        "requested resize to 2x3 (6 elements in total), but the given tensor has a size of 2x2 (4 "
        "elements). autograd's resize can only change the shape of a given tensor, while "
        "preserving the number of elements. "
    )
    with (
        pytest.warns(UserWarning),
        pytest.raises(
            RuntimeError, match=r"requested resize to \(4,\) \(\(4,\) elements in total\)"
        ),
    ):
        t.resize((4,))
    with pytest.warns(UserWarning):
        assert gt.ones(2, 2, requires_grad=True).resize(4).requires_grad


def test_set_shares_the_sources_storage(conn):
    s, src = gt.zeros(3), gt.arange(4.0)
    assert s.set_(src) is s
    assert s.data_ptr() == src.data_ptr() and tuple(s.shape) == (4,) and s.stride() == (1,)
    s.add_(1)
    assert src.tolist() == [1.0, 2.0, 3.0, 4.0]
    src.mul_(2)
    assert s.tolist() == [2.0, 4.0, 6.0, 8.0]
    y = gt.zeros(1)
    y.set_(gt.arange(6.0).reshape(2, 3).t())
    assert y.stride() == (1, 3) and y.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert gt.zeros(3).set_().tolist() == []
    with pytest.raises(
        RuntimeError, match="Could not set tensor of type long int to a tensor of type float"
    ):
        gt.ones(2).set_(gt.ones(2, dtype=gt.int64))
    with pytest.raises(
        RuntimeError,
        match="a leaf Variable that requires grad is being used in an in-place operation.",
    ):
        gt.ones(2, requires_grad=True).set_(gt.ones(3))
    with pytest.raises(NotImplementedError, match=r"set_\(source, storage_offset, size, stride\)"):
        gt.zeros(1).set_(gt.arange(4.0), 1, (2,), (1,))


def test_as_subclass(conn):
    class MyT(gt.Tensor):
        pass

    a = gt.ones(2, requires_grad=True)
    b = (a * 2).as_subclass(MyT)
    assert type(b) is MyT and b.requires_grad
    b.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]
    c = gt.ones(2)
    c.as_subclass(MyT).add_(1)
    assert c.tolist() == [2.0, 2.0]
    with pytest.raises(
        TypeError,
        match="Creating a Tensor subclass from a class that does not inherit from Tensor is not possible.",
    ):
        gt.ones(2).as_subclass(int)


def test_hash_tensor(conn):
    assert gt.arange(6.0).hash_tensor().item() == 4610560118520545280
    assert gt.arange(6.0).hash_tensor().dtype == gt.uint64
    assert gt.tensor([1, 2, 3]).hash_tensor().item() == 0
    assert gt.tensor([[1.0, 2.0], [3.0, 4.0]]).hash_tensor(1).tolist() == [
        9218868437227405312,
        6755399441055744,
    ]
    assert gt.tensor([[1.0, 2.0], [3.0, 4.0]]).hash_tensor(0, keepdim=True).tolist() == [
        [9221120237041090560, 4503599627370496]
    ]
    assert gt.tensor([True, False]).hash_tensor().item() == 1
    assert gt.tensor([-1], dtype=gt.int8).hash_tensor().item() == 18446744073709551615
    assert gt.tensor([1.5], dtype=gt.float16).hash_tensor().item() == 4609434218613702656
    assert gt.arange(24.0).reshape(2, 3, 4).to(gt.int32).hash_tensor(1).tolist() == [
        [12, 13, 14, 15],
        [8, 9, 10, 11],
    ]
    assert gt.hash_tensor(gt.arange(24.0).reshape(2, 3, 4), 0).shape == (3, 4)
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode: 1"):
        gt.tensor([1, 2]).hash_tensor(mode=1)
    with pytest.raises(
        RuntimeError, match="Expected reduction dim to be specified for input.numel"
    ):
        gt.tensor([]).hash_tensor()
    with pytest.raises(
        IndexError, match="hash_tensor: Expected reduction dim 0 to have non-zero size."
    ):
        gt.zeros(0, 3).hash_tensor(0)
    with pytest.raises(
        NotImplementedError, match="\"xor_sum_cpu\" not implemented for 'ComplexFloat'"
    ):
        gt.tensor([1 + 2j]).hash_tensor()


# ----------------------------------------------------------------------------- uint16/32/64
@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_limited_unsigned_dtypes(conn, name):
    d = getattr(gt, name)
    bits = {"uint16": 16, "uint32": 32, "uint64": 64}[name]
    assert str(d) == f"gt.{name}" and d.itemsize == bits // 8
    assert not d.is_signed and not d.is_floating_point
    t = gt.tensor([1, 2], dtype=d)
    assert t.dtype == d and repr(t) == f"tensor([1, 2], dtype=gt.{name})"
    assert (
        repr(gt.tensor([[1, 2], [3, 4]], dtype=d))
        == f"tensor([[1, 2],\n        [3, 4]], dtype=gt.{name})"
    )
    assert repr(gt.zeros(0, dtype=d)) == f"tensor([], dtype=gt.{name})"
    assert gt.zeros(2, dtype=d).tolist() == [0, 0] and gt.ones(2, dtype=d).tolist() == [1, 1]
    assert gt.full((2,), 7, dtype=d).tolist() == [7, 7] and gt.empty(2, dtype=d).dtype == d
    assert gt.from_numpy(np.array([1, 2], dtype=name)).dtype == d and t.numpy().dtype == np.dtype(
        name
    )
    assert gt.tensor([-1, 2]).to(d).tolist() == [2**bits - 1, 2]
    assert gt.tensor([1.7, 2.0]).to(d).tolist() == [1, 2] and t.to(gt.float32).dtype == gt.float32
    assert t.to(gt.int64).tolist() == [1, 2] and t.type(gt.uint8).dtype == gt.uint8
    assert (t == gt.tensor([1, 4], dtype=d)).tolist() == [True, False] and t.eq(1).tolist() == [
        True,
        False,
    ]
    assert t.ne(gt.tensor([1, 3], dtype=d)).tolist() == [False, True]
    assert (t & gt.tensor([3, 3], dtype=d)).tolist() == [1, 2] and (t | 4).tolist() == [5, 6]
    assert (t ^ gt.tensor([3, 3], dtype=d)).dtype == d
    assert (
        (t * 2).dtype == d
        and (t * gt.tensor(3)).tolist() == [3, 6]
        and (t * gt.tensor(3)).dtype == d
    )
    assert (t + 1.5).dtype == gt.float32 and (t / 2).tolist() == [0.5, 1.0]
    assert (gt.tensor([1.5], dtype=gt.float64) * t).dtype == gt.float64
    assert t.sum().dtype == gt.int64 and t.sum().item() == 3 and t.cumsum(0).dtype == gt.int64
    assert t[1].item() == 2 and gt.cat([t, t]).dtype == d and t.sort().values.dtype == d
    info = gt.iinfo(d)
    assert (info.min, info.max, info.bits) == (0, 2**bits - 1, bits)
    with pytest.raises(TypeError, match=r"torch.finfo\(\) requires a floating point input type"):
        gt.finfo(d)
    small = {"uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}[name]
    with pytest.raises(
        RuntimeError,
        match=f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote {small} and Int",
    ):
        t + gt.tensor([3, 4], dtype=gt.int32)
    with pytest.raises(RuntimeError, match=f"attempted to promote {small} and Bool"):
        t * gt.tensor([True, False])
    with pytest.raises(RuntimeError, match=f"attempted to promote {small} and Long"):
        t == gt.tensor([1, 2])  # noqa: B015


def test_uint64_holds_values_past_int64(conn):
    assert gt.tensor([2**63 + 5], dtype=gt.uint64).tolist() == [9223372036854775813]
    assert gt.tensor(2**64 - 1, dtype=gt.uint64).item() == 18446744073709551615
    with pytest.raises(RuntimeError, match="attempted to promote UInt32 and UInt16"):
        gt.tensor([1, 2], dtype=gt.uint32) * gt.tensor([1, 2], dtype=gt.uint16)
