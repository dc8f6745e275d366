"""The op registry: entries are consistent, and each one's shape and dtype rules agree with what
its kernel really makes (run on NumPy, no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from gt.errors import ShapeError
from gt.runtime import ops as O
from gt.runtime.ops.base import KINDS, SHARD_FAMILIES
from gt.runtime.worker.backend import Backend

BACKEND = Backend(np, "cpu")
rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
ROW = rng.standard_normal((4,)).astype(np.float32)
POOL_X = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
POS = np.abs(A) + 0.5
IDX = np.array([2, 0, 2], dtype=np.int64)
RAND = {"shape": [2, 3], "dtype": "float32", "seed": 7}
INTS = rng.integers(-100, 100, (3, 4)).astype(np.int32)
INTS_ROW = rng.integers(0, 256, (4,)).astype(np.int32)
SHIFTS = np.array([0, 3, 31, 40], dtype=np.int32)  # 40: past the width (PyTorch's 0 / sign fill)
_lin = np.random.default_rng(91)  # (its own stream: the samples above keep their values)
SQ = (_lin.standard_normal((2, 3, 3)) + 3 * np.eye(3)).astype(np.float32)  # well conditioned
SPD = (SQ @ SQ.transpose(0, 2, 1) + np.eye(3)).astype(np.float32)
RHS = _lin.standard_normal((3, 2)).astype(np.float32)  # batch dims broadcast against SQ's

CPLX = (A + 1j * B).astype(np.complex64)

#: For every compute and create op: argument values (arrays or Python numbers) and attrs.
SAMPLES: dict[str, tuple[list, object]] = {
    "full": ([1.5], {"shape": [2, 3], "dtype": "float32"}),
    "arange": ([], {"start": 1, "stop": 7, "step": 2, "dtype": "int64"}),
    "eye": ([], {"n": 3, "m": 4, "dtype": "float64"}),
    "randn": ([], RAND),
    "rand": ([], RAND),
    "randint": ([], {**RAND, "dtype": "int32", "low": 0, "high": 5}),
    "copy": ([A], None),
    "add": ([A, ROW], None),
    "sub": ([A, 2.0], None),
    "add_scaled": ([A, B], {"alpha": -0.5}),
    "mul": ([A, B], None),
    "div": ([A, POS], None),
    "pow": ([POS, 1.5], None),
    "maximum": ([A, B], None),
    "minimum": ([A, ROW], None),
    "lt": ([A, B], None),
    "le": ([A, 0.0], None),
    "gt": ([A, ROW], None),
    "ge": ([A, B], None),
    "eq": ([A, A], None),
    "ne": ([A, B], None),
    "floor_divide": ([A, 0.7], None),
    "remainder": ([A, 0.7], None),
    "where": ([A > 0, A, 0.0], {"dtype": "float32"}),
    "clip": ([A, -0.5, 0.5], None),
    "neg": ([A], None),
    "abs": ([A], None),
    "exp": ([A], None),
    "log": ([POS], None),
    "sqrt": ([POS], None),
    "sin": ([A], None),
    "cos": ([A], None),
    "tanh": ([A], None),
    "sigmoid": ([A], None),
    "relu": ([A], None),
    "sign": ([A], None),
    "logical_not": ([A > 0], None),
    "erf": ([A], None),
    "cast": ([A], {"dtype": "float64"}),
    "matmul": ([A, B.T.copy()], None),
    "sum": ([A], {"axis": [1], "keepdims": False}),
    "max": ([A], {"axis": [0], "keepdims": True}),
    "min": ([A], None),
    "argmax": ([A], {"axis": 1, "keepdims": False}),
    "argmin": ([A], {"axis": None, "keepdims": False}),
    "log_softmax": ([A], {"axis": 1}),
    "softmax": ([A], {"axis": 1}),
    "cumsum": ([A], {"axis": 0}),
    "reshape": ([A], {"shape": [4, 3]}),
    "transpose": ([A], {"perm": [1, 0]}),
    "expand": ([ROW], {"shape": [2, 4]}),
    "getitem": ([A, IDX], {"key": [["t", 0], ["s", 1, None, 2]]}),
    "setitem": ([A.copy(), 9.0], {"key": [["i", 1]]}),
    "concat": ([A, B], {"axis": 0}),
    "index_add": (
        [np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32), IDX],
        {"key": [["t", 0]]},
    ),  # fmt: skip
    "log1p": ([POS], None),
    "expm1": ([A], None),
    "softplus": ([A], {"beta": 2.0, "threshold": 20.0}),
    "floor": ([A], None),
    "ceil": ([A], None),
    "round": ([A], {"decimals": 1}),
    "trunc": ([A], None),
    "binary_cross_entropy": ([POS / 3.0, (A > 0).astype(np.float32)], None),
    "nll_loss": ([A, np.array([0, 3, -100]), None], {"ignore_index": -100, "reduction": "mean"}),
    "nll_loss_backward": (
        [np.full((), 0.5, np.float32), np.array([0, 3, -100]), ROW],
        {"ignore_index": -100, "reduction": "sum", "shape": [3, 4]},
    ),  # fmt: skip
    "prod": ([A], {"axis": 1, "keepdims": True}),
    "cumprod": ([A], {"axis": 0}),
    "cumprod_grad": ([A, B], {"axis": 1}),
    "cumprod_jvp": ([A, B], {"axis": 1}),
    "cumprod_grad_grad": ([A, B, A * B], {"axis": 0}),
    "argsort": ([A], {"axis": 1, "descending": True}),
    "im2col": (
        [rng.standard_normal((2, 3, 5, 4)).astype(np.float32)],
        {"kernel": [3, 2], "dilation": [1, 1], "padding": [1, 0], "stride": [2, 1]},
    ),
    "col2im": (
        [rng.standard_normal((2, 18, 9)).astype(np.float32)],
        {
            "kernel": [3, 2],
            "dilation": [1, 1],
            "padding": [1, 0],
            "stride": [2, 1],
            "output_size": [5, 4],
        },
    ),  # fmt: skip
    **{
        name: (
            vals,
            {
                "kernel": [3, 2],
                "dilation": [1, 1],
                "padding": [1, 0],
                "stride": [2, 1],
                "extra": [1, 0],
            },
        )
        for name, vals in (
            ("max_pool", [POOL_X]),
            ("max_pool_indices", [POOL_X]),
            ("max_pool_grad", [POOL_X, rng.standard_normal((2, 3, 3, 3)).astype(np.float32)]),
            ("max_pool_pick", [POOL_X, rng.standard_normal((2, 3, 5, 4)).astype(np.float32)]),
        )
    },  # fmt: skip
    "max_unpool_positions": ([np.array([[0, 3], [2, 1]])], {"planes": 2, "sizes": [2, 2]}),
    # (T=3, B=2, H=2: gi, h0, c0, w_hh, b_hh; the grads take the forward's result and its shape)
    "lstm_scan": (
        [
            rng.standard_normal(s).astype(np.float32)
            for s in ((3, 2, 8), (2, 2), (2, 2), (8, 2), (8,))
        ],
        {"reverse": True},
    ),
    "lstm_scan_grad": (
        [
            rng.standard_normal(s).astype(np.float32)
            for s in ((7, 3, 2, 2), (7, 3, 2, 2), (2, 2), (2, 2), (8, 2))
        ],
        None,
    ),
    "gru_scan": (
        [rng.standard_normal(s).astype(np.float32) for s in ((3, 2, 6), (2, 2), (6, 2))],
        None,
    ),
    "gru_scan_grad": (
        [
            rng.standard_normal(s).astype(np.float32)
            for s in ((5, 3, 2, 2), (5, 3, 2, 2), (2, 2), (6, 2))
        ],
        {"reverse": True},
    ),
    "rnn_scan": (
        [rng.standard_normal(s).astype(np.float32) for s in ((3, 2, 2), (2, 2), (2, 2), (2,))],
        {"relu": True},
    ),
    "rnn_scan_grad": (
        [
            rng.standard_normal(s).astype(np.float32)
            for s in ((1, 3, 2, 2), (1, 3, 2, 2), (2, 2), (2, 2))
        ],
        {"reverse": True},
    ),
    "scatter_add": (
        [np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32), IDX],
        {"key": [["t", 0]]},
    ),  # fmt: skip
    "scatter_reduce": (
        [np.zeros((3, 4), np.float32), A[:3], IDX],
        {"key": [["t", 0]], "reduce": "amax", "include_self": False},
    ),  # fmt: skip
    "bitwise_and": ([INTS, INTS_ROW], None),
    "bitwise_or": ([INTS, -3], None),
    "bitwise_xor": ([INTS, INTS], None),
    "bitwise_not": ([INTS], None),
    "bitwise_left_shift": ([INTS, SHIFTS], None),
    "bitwise_right_shift": ([-INTS, SHIFTS], None),
    "searchsorted": ([np.sort(ROW), A], {"right": True, "dtype": "int32"}),
    "linalg_inv": ([SQ], None),
    "linalg_lu_info": ([SQ], None),
    "linalg_solve": ([SQ, RHS], None),
    "linalg_det": ([SQ], None),
    "linalg_slogdet": ([SQ], None),
    "linalg_cholesky": ([SPD], None),
    "linalg_solve_triangular": ([SQ, RHS], {"upper": True, "unitriangular": False}),
    "linalg_qr": ([A.T.copy()], None),
    "linalg_eigh": ([SPD], None),
    "linalg_svd": ([SQ], None),
    "geqrf": ([np.stack([A.T.copy(), A.T.copy()[::-1]])], None),
    "lgamma": ([A], None),
    "digamma": ([POS], None),
    "polygamma": ([POS], {"n": 2}),
    "erfinv": ([np.tanh(A)], None),
    "standard_gamma": ([POS], {"seed": 3}),
    "standard_gamma_grad": ([POS, POS], None),
    "asin": ([np.tanh(A)], None),
    "acos": ([np.tanh(A)], None),
    "atan": ([A], None),
    "asinh": ([A], None),
    "acosh": ([POS + 1.0], None),
    "atanh": ([np.tanh(A)], None),
    "atan2": ([A, ROW], None),
    "hypot": ([A, ROW], None),
    "log2": ([POS], None),
    "log10": ([POS], None),
    "exp2": ([A], None),
    "sinh": ([A], None),
    "cosh": ([A], None),
    "fmod": ([A, 0.7], None),
    "signbit": ([A], None),
    "gcd": ([INTS, INTS_ROW], None),
    "lcm": ([INTS, INTS_ROW], None),
    "cummax_indices": ([A], {"axis": 1}),
    "cummin_indices": ([INTS], {"axis": 0}),
    "logcumsumexp": ([A], {"axis": 1}),
    "i0": ([A], None),
    "i0e": ([A], None),
    "i1": ([A], None),
    "i1e": ([A], None),
    "zeta": ([POS + 1.0, POS], None),
    "gammainc": ([POS, ROW * ROW], None),
    "gammaincc": ([POS, 1.5], None),
    "erfcx": ([A], None),
    # (float64, through each of its four regions: -40 .. 40)
    "airy_ai": ([np.linspace(-40.0, 40.0, 12).reshape(3, 4)], None),
    "poisson": ([POS], {"seed": 5}),
    **{f"bessel_{fn}": ([POS], None) for fn in ("j0", "j1", "y0", "y1", "k0", "k1", "k0e", "k1e")},
    "real": ([CPLX], None),
    "imag": ([CPLX], None),
    "conj": ([CPLX], None),
    "angle": ([CPLX], None),
    "view_as_real": ([CPLX], None),
    "view_dtype": ([A], {"dtype": "uint8", "from": "float32"}),
    "view_as_complex": ([np.stack([A, B], -1)], None),
    "complex": ([A, ROW], None),
    "linalg_eig": ([SQ], None),
    "multinomial_probs": ([POS], None),
    "checked_values": ([POS], {"test": "nonnegative", "message": "negative"}),
    "nextafter": ([A, B], None),
    "frexp_mantissa": ([A * 100], None),
    "frexp_exponent": ([A * 100], None),
    # the complex-to-real kind (its attrs reach all three branches' code); the others are
    # checked against NumPy in tests/integration/test_complex_fft.py
    "fft": (
        [CPLX],
        {
            "kind": "c2r",
            "axes": [0, 1],
            "s": [3, 6],
            "norm": "ortho",
            "inverse": True,
            "dtype": "float32",
        },
    ),
    "normalize": ([A], {"axis": 1, "eps": 1e-5}),
    "normalize_backward": ([B, A], {"axis": 1, "eps": 1e-5, "shift": True}),
    "gelu": ([A], None),
    "gelu_backward": ([B, A], None),
    "pad_border": ([POOL_X], {"pads": [[1, 2], [2, 1]], "mode": "reflect"}),
    "pad_border_backward": ([POOL_X], {"pads": [[1, 0], [0, 1]], "mode": "replicate"}),
}


def test_opcodes_are_dense_unique_and_named():
    assert [op.code for op in O.REGISTRY] == list(range(len(O.REGISTRY)))
    assert O.OPS == tuple(op.name for op in O.REGISTRY)
    assert len(set(O.OPS)) == len(O.OPS)
    assert all(O.OPCODE[op.name] == op.code for op in O.REGISTRY)


def test_entries_declare_known_kinds_and_families():
    for op in O.REGISTRY:
        assert op.kind in KINDS
        assert op.shard is None or op.shard in SHARD_FAMILIES
        assert op.doc, f"{op.name} has no doc line"
        if op.kind in ("compute", "create"):
            assert op.kernel and op.shape and op.dtype, op.name
        if op.kind == "comm":
            assert op.code in O.COMM_OPS


def run_sample(be: Backend, name: str) -> np.ndarray:
    """Op ``name``'s sample run by ``be``'s kernel, inputs copied to the device, result to the host
    (what the CuPy double and the GPU checks compare with NumPy's)."""
    op = O.BY_NAME[name]
    vals, attrs = SAMPLES[name]
    args = [be.from_host(v.copy()) if isinstance(v, np.ndarray) else v for v in vals]
    return be.to_host(be.handlers[op.code](args, attrs))


def test_every_compute_and_create_op_has_a_sample_here():
    need = {op.name for op in O.REGISTRY if op.kind in ("compute", "create")}
    assert need == set(SAMPLES), "add a sample for each new primitive"


def _meta(v: object) -> tuple[tuple[int, ...], str | None]:
    if isinstance(v, np.ndarray):
        return v.shape, v.dtype.name
    return (), None


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_shape_and_dtype_rules_match_the_kernel(name):
    op = O.BY_NAME[name]
    vals, attrs = SAMPLES[name]
    shapes = [_meta(v)[0] for v in vals]
    dtypes = [_meta(v)[1] for v in vals]
    out = BACKEND.handlers[op.code]([v.copy() if isinstance(v, np.ndarray) else v for v in vals],
                                    attrs)  # fmt: skip
    assert tuple(op.shape(shapes, attrs)) == out.shape
    assert op.dtype(dtypes, attrs) == out.dtype.name


def test_a_shape_rule_raises_the_users_error_for_bad_operands():
    with pytest.raises(ValueError, match="size of tensor a"):
        O.get("add").shape([(3, 4), (5,)], None)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        O.get("matmul").shape([(3, 4), (3, 4)], None)


def test_cumsum_kernel_and_its_integer_promotion():
    h = BACKEND.handlers[O.OPCODE["cumsum"]]
    np.testing.assert_allclose(h([A], {"axis": 1}), np.cumsum(A, axis=1), rtol=1e-6)
    ints = np.array([[1, 2], [3, 4]], dtype=np.int32)
    got = h([ints], {"axis": 0, "dtype": "int64"})
    assert got.dtype == np.int64 and got.tolist() == [[1, 2], [4, 6]]


def test_single_precision_cumsum_and_cumprod_accumulate_in_double_like_pytorch():
    # PyTorch's CPU kernels keep float32 / complex64 running totals in double and round each
    # output once: a DDSP phase cumsum(2 pi f0 / sr) over many samples does not drift.
    x = (np.random.default_rng(3).standard_normal((2, 20000)) * 0.01 + 0.1).astype(np.float32)
    for name, f in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
        v = 1 + x * 1e-3 if name == "cumprod" else x
        for axis in (0, 1):
            got = _h(name)([v], {"axis": axis})
            want = f(v.astype(np.float64), axis=axis).astype(np.float32)
            assert got.dtype == np.float32 and np.array_equal(got, want), (name, axis)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    got = _h("cumsum")([z], {"axis": 1})
    assert got.dtype == np.complex64
    assert np.array_equal(got, np.cumsum(z.astype(np.complex128), axis=1).astype(np.complex64))


def test_methods_named_by_entries_exist_on_tensors_and_as_functions():
    import gt

    for op in O.REGISTRY:
        for m in op.methods:
            method = getattr(gt.Tensor, m)  # (or the api marked for autocast: cumsum, acos ...)
            assert method is op.api or getattr(method, "__wrapped__", None) is op.api
            assert callable(getattr(gt, m))


def _h(name):
    return BACKEND.handlers[O.OPCODE[name]]


def test_log1p_and_expm1_keep_tiny_values():
    tiny = np.array([1e-10, -1e-12], np.float32)
    np.testing.assert_allclose(_h("log1p")([tiny], None), tiny, rtol=1e-6)
    np.testing.assert_allclose(_h("expm1")([tiny], None), tiny, rtol=1e-6)


def test_softplus_kernel_is_stable_and_returns_x_above_the_threshold():
    x = np.array([-100.0, 0.0, 30.0, 1000.0], np.float32)
    got = _h("softplus")([x], None)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, [0.0, np.log(2.0), 30.0, 1000.0], rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(
        _h("softplus")([x[:2]], {"beta": 2.0, "threshold": 20.0}), [0.0, np.log(2.0) / 2]
    )


def test_round_is_half_to_even_like_pytorch():
    x = np.array([0.5, 1.5, 2.5, -0.5, 1.25], np.float32)
    assert _h("round")([x], None).tolist() == [0.0, 2.0, 2.0, -0.0, 1.0]
    np.testing.assert_allclose(_h("round")([x], {"decimals": 1}), [0.5, 1.5, 2.5, -0.5, 1.2])


def test_bce_kernel_clamps_its_logs_at_minus_100():
    p = np.array([0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 1.0], np.float32)
    np.testing.assert_allclose(_h("binary_cross_entropy")([p, t], None), [100.0, 100.0, np.log(2)])


def test_prod_and_cumprod_kernels_match_numpy_and_promote_small_ints():
    np.testing.assert_allclose(_h("prod")([A], None), np.prod(A), rtol=1e-5)
    ints = np.array([[1, 2], [3, 4]], np.int32)
    got = _h("cumprod")([ints], {"axis": 1})
    assert got.dtype == np.int64 and got.tolist() == [[1, 2], [3, 12]]


def test_cumprod_grad_is_exact_at_zeros():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    g = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # brute force: d/dx_i sum_j g_j prod_{k<=j} x_k
    want = [sum(g[j] * np.prod([x[k] for k in range(j + 1) if k != i]) for j in range(i, 5))
            for i in range(5)]  # fmt: skip
    np.testing.assert_allclose(_h("cumprod_grad")([x, g], {"axis": 0}), want)


def _cumprod_jacobian(x: np.ndarray) -> np.ndarray:
    """J[j, i] = d cumprod(x)_j / d x_i, by brute force (products that skip x_i)."""
    n = len(x)
    return np.array([[np.prod([x[k] for k in range(j + 1) if k != i]) if i <= j else 0.0
                      for i in range(n)] for j in range(n)])  # fmt: skip


def test_cumprod_second_derivative_kernels_are_exact_at_zeros():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0, -1.5])
    g = np.array([1.0, 2.0, -3.0, 4.0, 5.0, 0.5])
    u = np.array([0.5, -1.0, 2.0, 1.5, -2.0, 3.0])
    jac = _cumprod_jacobian(x)
    np.testing.assert_allclose(_h("cumprod_jvp")([x, u], {"axis": 0}), jac @ u)
    # the gradient in x of <g, J(x) u>, by central differences of the exact Jacobian (a
    # polynomial of degree one in each x_i, so the differences are exact up to rounding)
    want = []
    for i in range(len(x)):
        hi, lo = x.copy(), x.copy()
        hi[i] += 0.5
        lo[i] -= 0.5
        want.append(g @ (_cumprod_jacobian(hi) - _cumprod_jacobian(lo)) @ u)
    got = _h("cumprod_grad_grad")([x, g, u], {"axis": 0})
    np.testing.assert_allclose(got, want, atol=1e-12)
    # along another axis of a batch: each row on its own
    xs, gs, us = (np.stack([a, a[::-1]], 0) for a in (x, g, u))
    rows = _h("cumprod_grad_grad")([xs, gs, us], {"axis": 1})
    np.testing.assert_allclose(rows[0], got, atol=1e-12)


def test_argsort_is_stable_both_ways_with_nan_largest():
    x = np.array([2.0, 1.0, 2.0, np.nan, 1.0])
    assert _h("argsort")([x], {"axis": 0}).tolist() == [1, 4, 0, 2, 3]
    assert _h("argsort")([x], {"axis": 0, "descending": True}).tolist() == [3, 0, 2, 1, 4]


def test_im2col_matches_a_direct_window_loop_and_col2im_is_its_adjoint():
    x = rng.standard_normal((2, 3, 5, 4))
    at = {"kernel": [3, 2], "dilation": [2, 1], "padding": [2, 1], "stride": [1, 2]}
    cols = _h("im2col")([x], at)
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (1, 1)))
    oh, ow = 5, 3
    want = np.empty((2, 3, 3, 2, oh, ow))
    for i in range(3):
        for j in range(2):
            for r in range(oh):
                for c in range(ow):
                    want[:, :, i, j, r, c] = padded[:, :, r + 2 * i, 2 * c + j]
    np.testing.assert_allclose(cols, want.reshape(2, 18, oh * ow))
    y = rng.standard_normal(cols.shape)  # <im2col(x), y> == <x, col2im(y)>
    back = _h("col2im")([y], {**at, "output_size": [5, 4]})
    np.testing.assert_allclose((cols * y).sum(), (x * back).sum(), rtol=1e-10)


def test_im2col_from_a_strided_view_equals_the_slab_copies_other_backends_make():
    # (NumPy takes every window from one strided view; CuPy copies a slab per kernel offset)
    import itertools
    import types

    from gt.runtime.ops import conv as C

    slabs = types.SimpleNamespace(**{k: getattr(np, k) for k in ("empty", "full", "zeros")})
    view_kernel = C._k_im2col(types.SimpleNamespace(name="numpy", xp=np))
    slab_kernel = C._k_im2col(types.SimpleNamespace(name="slabs", xp=slabs))
    cases = 0
    for sizes, k, dl, p, s in itertools.product(([7], [6, 7], [4, 5, 6]), (1, 3), (1, 2),
                                                (0, 2), (1, 3)):  # fmt: skip
        d = len(sizes)
        at = {"kernel": [k] * d, "dilation": [dl] * d, "padding": [p] * d, "stride": [s] * d,
              "pad_value": -1.5}  # fmt: skip
        if min(C._out_sizes(sizes, at)) <= 0:
            continue
        x = rng.standard_normal((2, 3, *sizes)).astype(np.float32)
        np.testing.assert_array_equal(view_kernel([x], at), slab_kernel([x], at))
        cases += 1
    assert cases >= 40


def test_im2col_and_col2im_with_fewer_windows_than_kernel_offsets_loop_over_windows_alike():
    # (4 window positions, 20 kernel offsets: the kernels move one window per step)
    x = rng.standard_normal((2, 3, 6, 11))
    at = {"kernel": [4, 5], "dilation": [1, 2], "padding": [1, 0], "stride": [3, 2]}
    cols = _h("im2col")([x], at)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    want = np.empty((2, 3, 4, 5, 2, 2))
    for i, j, r, c in np.ndindex(4, 5, 2, 2):
        want[:, :, i, j, r, c] = padded[:, :, 3 * r + i, 2 * c + 2 * j]
    np.testing.assert_allclose(cols, want.reshape(2, 60, 4))
    y = rng.standard_normal(cols.shape)
    back = _h("col2im")([y], {**at, "output_size": [6, 11]})
    np.testing.assert_allclose((cols * y).sum(), (x * back).sum(), rtol=1e-10)


def test_im2col_and_col2im_take_1_to_3_spatial_dimensions():
    x = rng.standard_normal((2, 3, 4, 5, 3))
    at = {"kernel": [2, 3, 2], "dilation": [1, 1, 2], "padding": [1, 0, 1], "stride": [2, 1, 1]}
    cols = _h("im2col")([x], at)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0), (1, 1)))
    outs = (3, 3, 3)
    want = np.empty((2, 3, 2, 3, 2, *outs))
    for i, j, k in np.ndindex(2, 3, 2):
        for d, h, w in np.ndindex(*outs):
            want[:, :, i, j, k, d, h, w] = padded[:, :, 2 * d + i, h + j, w + 2 * k]
    np.testing.assert_allclose(cols, want.reshape(2, 36, 27))
    assert O.BY_NAME["im2col"].shape([x.shape], at) == cols.shape
    y = rng.standard_normal(cols.shape)  # <im2col(x), y> == <x, col2im(y)>, in 3-d too
    back = _h("col2im")([y], {**at, "output_size": [4, 5, 3]})
    assert back.shape == x.shape
    np.testing.assert_allclose((cols * y).sum(), (x * back).sum(), rtol=1e-10)
    line = rng.standard_normal((1, 2, 6))  # 1-d: [N, C, L]
    one = _h("im2col")([line], {"kernel": [3], "dilation": [1], "padding": [0], "stride": [2]})
    np.testing.assert_allclose(one, np.stack([line[:, :, i : i + 3 : 2] for i in range(3)], 2)
                               .reshape(1, 6, 2))  # fmt: skip
    with pytest.raises(ShapeError, match="a 3-d kernel expects a 5-d input"):
        O.BY_NAME["im2col"].shape([(2, 3, 4, 5)], at)


def test_scatter_add_accumulates_repeated_indices():
    out = _h("scatter_add")([np.zeros(3), np.ones(4), np.array([0, 2, 2, 2])], {"key": [["t", 0]]})
    assert out.tolist() == [1.0, 0.0, 3.0]


def test_fft_in_chunks_on_numpy_workers_equals_one_call():
    # (NumPy's FFT is several times slower with many transforms per call: the kernel chunks them)
    x = rng.standard_normal((600, 3, 16)).astype(np.float32)
    at = {"kind": "r2c", "axes": [2], "s": [20], "norm": "ortho", "inverse": False,
          "dtype": "complex64"}  # fmt: skip
    got = _h("fft")([x], at)
    np.testing.assert_allclose(
        got, np.fft.rfftn(x, s=[20], axes=[2], norm="ortho"), rtol=1e-5, atol=1e-6
    )
    z = rng.standard_normal((4, 700, 8)) + 1j * rng.standard_normal((4, 700, 8))
    at = {"kind": "c2r", "axes": [0, 2], "s": [5, 14], "norm": "backward", "inverse": True,
          "dtype": "float64"}  # fmt: skip
    np.testing.assert_allclose(
        _h("fft")([z], at), np.fft.irfftn(z, s=[5, 14], axes=[0, 2]), rtol=1e-12
    )


def test_every_op_named_for_complex_gradients_exists_and_has_a_derivative():
    from gt.runtime.ops.complexnum import COMPLEX_GRAD, complex_grad_mode

    assert set(COMPLEX_GRAD.values()) == {"conj", "native"}
    for name in COMPLEX_GRAD:
        assert O.BY_NAME[name].grad is not None, name
    with pytest.raises(NotImplementedError, match="relu for complex"):
        complex_grad_mode("relu")
