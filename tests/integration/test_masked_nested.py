"""gt.masked (torch.masked's functional reductions) and gt.nested (torch.nested's strided and
jagged nested tensors). Every expected value, gradient and message is what PyTorch 2.13 gives
for the same lines (probed with torch beside gt; gradients of ``(r * (1 + arange)).sum()``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt

M = gt.masked
NAN, INF = math.nan, math.inf
X = [[1.0, -2.0, 3.0, 0.5], [4.0, 5.0, -6.0, 2.0], [0.1, 0.2, 0.3, 0.4]]
MASK = [[True, False, True, True], [False, False, False, False], [True, True, False, True]]
XI = [[3, -1, 7, 2], [5, 4, 1, 0], [1, 2, 3, 4]]

# fmt: off
FLOAT_CASES = [("sum", lambda x, m: M.sum(x, 1, mask=m)),
     ("sum_all", lambda x, m: M.sum(x, mask=m)),
     ("sum_kd", lambda x, m: M.sum(x, (0, 1), keepdim=True, mask=m)),
     ("sum_bcast", lambda x, m: M.sum(x, 0, mask=m[0])),
     ("sum_f64", lambda x, m: M.sum(x, 1, dtype=gt.float64, mask=m)),
     ("sum_nomask", lambda x, m: M.sum(x, 1)),
     ("prod", lambda x, m: M.prod(x, 1, mask=m)),
     ("prod_all", lambda x, m: M.prod(x, mask=m)),
     ("cumsum", lambda x, m: M.cumsum(x, 1, mask=m)),
     ("cumprod", lambda x, m: M.cumprod(x, -1, mask=m)),
     ("amax", lambda x, m: M.amax(x, 1, mask=m)),
     ("amax_kd", lambda x, m: M.amax(x, 1, keepdim=True, mask=m)),
     ("amin", lambda x, m: M.amin(x, 1, mask=m)),
     ("amin0", lambda x, m: M.amin(x, 0, mask=m)),
     ("argmax", lambda x, m: M.argmax(x, 1, mask=m)),
     ("argmin", lambda x, m: M.argmin(x, 1, mask=m)),
     ("argmax_all", lambda x, m: M.argmax(x, mask=m)),
     ("mean", lambda x, m: M.mean(x, 1, mask=m)),
     ("mean_all", lambda x, m: M.mean(x, mask=m)),
     ("mean0", lambda x, m: M.mean(x, 0, keepdim=True, mask=m)),
     ("median", lambda x, m: M.median(x, 1, mask=m)),
     ("median_def", lambda x, m: M.median(x, mask=m)),
     ("norm", lambda x, m: M.norm(x, 2.0, 1, mask=m)),
     ("norm1", lambda x, m: M.norm(x, 1.0, 1, mask=m)),
     ("norminf", lambda x, m: M.norm(x, float("inf"), 1, mask=m)),
     ("normninf", lambda x, m: M.norm(x, float("-inf"), 1, mask=m)),
     ("var", lambda x, m: M.var(x, 1, mask=m)),
     ("var_b", lambda x, m: M.var(x, 1, unbiased=False, mask=m)),
     ("var_c2", lambda x, m: M.var(x, 1, correction=2, mask=m)),
     ("var_all", lambda x, m: M.var(x, mask=m)),
     ("std", lambda x, m: M.std(x, 1, mask=m)),
     ("std_kd", lambda x, m: M.std(x, 1, keepdim=True, mask=m)),
     ("std_nomask", lambda x, m: M.std(x, 1)),
     ("lse", lambda x, m: M.logsumexp(x, 1, mask=m)),
     ("lse_all", lambda x, m: M.logsumexp(x, mask=m)),
     ("softmax", lambda x, m: M.softmax(x, 1, mask=m)),
     ("softmax0", lambda x, m: M.softmax(x, 0, mask=m)),
     ("log_softmax", lambda x, m: M.log_softmax(x, 1, mask=m)),
     ("softmin", lambda x, m: M.softmin(x, 1, mask=m)),
     ("softmax_f64", lambda x, m: M.softmax(x, -1, dtype=gt.float64, mask=m)),
     ("normalize", lambda x, m: M.normalize(x, 2.0, 1, mask=m)),
     ("normalize1", lambda x, m: M.normalize(x, 1.0, 0, mask=m)),
     ("logaddexp", lambda x, m: M.logaddexp(x, x * 2, input_mask=m, other_mask=m)),
     ("mask_int", lambda x, m: M.sum(x, 1, mask=m.int())),
]

INT_CASES = [("i_sum", lambda x, m: M.sum(x, 1, mask=m)), ("i_prod", lambda x, m: M.prod(x, 1, mask=m)),
      ("i_amax", lambda x, m: M.amax(x, 1, mask=m)), ("i_amin", lambda x, m: M.amin(x, 1, mask=m)),
      ("i_argmax", lambda x, m: M.argmax(x, 1, mask=m)), ("i_mean", lambda x, m: M.mean(x, 1, mask=m)),
      ("i_mean_f", lambda x, m: M.mean(x, 1, dtype=gt.float32, mask=m)),
      ("i_var", lambda x, m: M.var(x, 1, mask=m)), ("i_median", lambda x, m: M.median(x, 1, mask=m)),
      ("i_median_ok", lambda x, m: M.median(x, 0, mask=m)),
      ("i_cumsum", lambda x, m: M.cumsum(x, 1, mask=m)), ("i_lse", lambda x, m: M.logsumexp(x.float(), 1, mask=m)),
      ("b_sum", lambda x, m: M.sum(m, 1, mask=m)), ("b_amax", lambda x, m: M.amax(m, 1, mask=m)),
      ("i64_sum", lambda x, m: M.sum(x.long(), 1, mask=m)), ("u8_amin", lambda x, m: M.amin(x.abs().to(gt.uint8), 1, mask=m)),
      ]

#: PyTorch's results: dtype, values and the input's gradient.
TORCH = {
    'sum': {'dtype': 'float32', 'v': [4.5, 0.0, 0.7], 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 3.0]]},
    'sum_all': {'dtype': 'float32', 'v': 5.2, 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]]},
    'sum_kd': {'dtype': 'float32', 'v': [[5.2]], 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]]},
    'sum_bcast': {'dtype': 'float32', 'v': [5.1, 0.0, -2.7, 2.9], 'g': [[1.0, 0.0, 3.0, 4.0], [1.0, 0.0, 3.0, 4.0], [1.0, 0.0, 3.0, 4.0]]},
    'sum_f64': {'dtype': 'float64', 'v': [4.5, 0.0, 0.7], 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 3.0]]},
    'sum_nomask': {'dtype': 'float32', 'v': [2.5, 5.0, 1.0], 'g': [[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0]]},
    'prod': {'dtype': 'float32', 'v': [1.5, 1.0, 0.008], 'g': [[1.5, 0.0, 0.5, 3.0], [0.0, 0.0, 0.0, 0.0], [0.24, 0.12, 0.0, 0.06]]},
    'prod_all': {'dtype': 'float32', 'v': 0.012, 'g': [[0.012, 0.0, 0.004, 0.024], [0.0, 0.0, 0.0, 0.0], [0.12, 0.06, 0.0, 0.03]]},
    'cumsum': {'dtype': 'float32', 'v': [[1.0, 1.0, 4.0, 4.5], [0.0, 0.0, 0.0, 0.0], [0.1, 0.3, 0.3, 0.7]], 'g': [[10.0, 0.0, 7.0, 4.0], [0.0, 0.0, 0.0, 0.0], [42.0, 33.0, 0.0, 12.0]]},
    'cumprod': {'dtype': 'float32', 'v': [[1.0, 1.0, 3.0, 1.5], [1.0, 1.0, 1.0, 1.0], [0.1, 0.02, 0.02, 0.008]], 'g': [[18.0, 0.0, 5.0, 12.0], [0.0, 0.0, 0.0, 0.0], [14.16, 2.58, 0.0, 0.24]]},
    'amax': {'dtype': 'float32', 'v': [3.0, -INF, 0.4], 'g': [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]]},
    'amax_kd': {'dtype': 'float32', 'v': [[3.0], [-INF], [0.4]], 'g': [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]]},
    'amin': {'dtype': 'float32', 'v': [0.5, INF, 0.1], 'g': [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]]},
    'amin0': {'dtype': 'float32', 'v': [0.1, 0.2, 3.0, 0.4], 'g': [[0.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 0.0, 4.0]]},
    'argmax': {'dtype': 'float32', 'v': [2.0, 0.0, 3.0]},
    'argmin': {'dtype': 'float32', 'v': [3.0, 0.0, 0.0]},
    'argmax_all': {'dtype': 'float32', 'v': 2.0},
    'mean': {'dtype': 'float32', 'v': [1.5, NAN, 0.23333], 'g': [[0.33333, 0.0, 0.33333, 0.33333], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]]},
    'mean_all': {'dtype': 'float32', 'v': 0.86667, 'g': [[0.16667, 0.0, 0.16667, 0.16667], [0.0, 0.0, 0.0, 0.0], [0.16667, 0.16667, 0.0, 0.16667]]},
    'mean0': {'dtype': 'float32', 'v': [[0.55, 0.2, 3.0, 0.45]], 'g': [[0.5, 0.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0], [0.5, 2.0, 0.0, 2.0]]},
    'median': {'dtype': 'float32', 'v': [1.0, NAN, 0.2], 'g': [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]]},
    'median_def': {'dtype': 'float32', 'v': [1.0, NAN, 0.2], 'g': [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]]},
    'norm': {'dtype': 'float32', 'v': [3.20156, 0.0, 0.45826], 'g': [[0.31235, 0.0, 0.93704, 0.15617], [0.0, 0.0, 0.0, 0.0], [0.65465, 1.30931, 0.0, 2.61861]]},
    'norm1': {'dtype': 'float32', 'v': [4.5, 0.0, 0.7], 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 3.0]]},
    'norminf': {'dtype': 'float32', 'v': [3.0, 0.0, 0.4], 'g': [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]]},
    'normninf': {'dtype': 'float32', 'v': [0.5, INF, 0.1], 'g': [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]]},
    'var': {'dtype': 'float32', 'v': [1.75, NAN, 0.02333], 'g': [[-0.5, 0.0, 1.5, -1.0], [NAN, NAN, NAN, NAN], [-0.4, -0.1, 0.0, 0.5]]},
    'var_b': {'dtype': 'float32', 'v': [1.16667, NAN, 0.01556], 'g': [[-0.33333, 0.0, 1.0, -0.66667], [NAN, NAN, NAN, NAN], [-0.26667, -0.06667, 0.0, 0.33333]]},
    'var_c2': {'dtype': 'float32', 'v': [3.5, NAN, 0.04667], 'g': [[-1.0, 0.0, 3.0, -2.0], [NAN, NAN, NAN, NAN], [-0.8, -0.2, 0.0, 1.0]]},
    'var_all': {'dtype': 'float32', 'v': 1.19067, 'g': [[0.05333, 0.0, 0.85333, -0.14667], [0.0, 0.0, 0.0, 0.0], [-0.30667, -0.26667, 0.0, -0.18667]]},
    'std': {'dtype': 'float32', 'v': [1.32288, NAN, 0.15275], 'g': [[-0.18898, 0.0, 0.56695, -0.37796], [NAN, NAN, NAN, NAN], [-1.30931, -0.32733, 0.0, 1.63663]]},
    'std_kd': {'dtype': 'float32', 'v': [[1.32288], [NAN], [0.15275]], 'g': [[-0.18898, 0.0, 0.56695, -0.37796], [NAN, NAN, NAN, NAN], [-1.30931, -0.32733, 0.0, 1.63663]]},
    'std_nomask': {'dtype': 'float32', 'v': [2.05649, 4.99166, 0.1291], 'g': [[0.06078, -0.42548, 0.38496, -0.02026], [0.36728, 0.50084, -0.96828, 0.10017], [-1.1619, -0.3873, 0.3873, 1.1619]]},
    'lse': {'dtype': 'float32', 'v': [3.19673, -INF, 1.33983], 'g': [[0.11117, 0.0, 0.82141, 0.06743], [0.0, 0.0, 0.0, 0.0], [0.8683, 0.95962, 0.0, 1.17208]]},
    'lse_all': {'dtype': 'float32', 'v': 3.34183, 'g': [[0.09615, 0.0, 0.71047, 0.05832], [0.0, 0.0, 0.0, 0.0], [0.03909, 0.0432, 0.0, 0.05277]]},
    'softmax': {'dtype': 'float32', 'v': [[0.11117, 0.0, 0.82141, 0.06743], [NAN, NAN, NAN, NAN], [0.28943, 0.31987, 0.0, 0.39069]], 'g': [[-0.20511, 0.0, 0.12724, 0.07787], [0.0, 0.0, 0.0, 0.0], [-0.43182, -0.15736, 0.0, 0.58918]]},
    'softmax0': {'dtype': 'float32', 'v': [[0.71095, 0.0, 1.0, 0.52498], [0.0, 0.0, 0.0, 0.0], [0.28905, 1.0, 0.0, 0.47502]], 'g': [[-1.644, 0.0, 0.0, -1.99501], [0.0, 0.0, 0.0, 0.0], [1.644, 0.0, 0.0, 1.99501]]},
    'log_softmax': {'dtype': 'float32', 'v': [[-2.19673, -INF, -0.19673, -2.69673], [NAN, NAN, NAN, NAN], [-1.23983, -1.13983, -INF, -0.93983]], 'g': [[-0.11166, 0.0, -5.21409, 3.32575], [0.0, 0.0, 0.0, 0.0], [-3.15619, -3.43467, 0.0, -4.40914]]},
    'softmin': {'dtype': 'float32', 'v': [[0.35919, 0.0, 0.04861, 0.5922], [NAN, NAN, NAN, NAN], [0.37798, 0.34201, 0.0, 0.28001]], 'g': [[0.67306, 0.0, -0.00613, -0.66692], [0.0, 0.0, 0.0, 0.0], [0.44679, 0.06226, 0.0, -0.50905]]},
    'softmax_f64': {'dtype': 'float64', 'v': [[0.11117, 0.0, 0.82141, 0.06743], [NAN, NAN, NAN, NAN], [0.28943, 0.31987, 0.0, 0.39069]], 'g': [[-0.20511, 0.0, 0.12724, 0.07787], [0.0, 0.0, 0.0, 0.0], [-0.43182, -0.15736, 0.0, 0.58918]]},
    'normalize': {'dtype': 'float32', 'v': [[0.31235, 0.0, 0.93704, 0.15617], [0.0, 0.0, 0.0, 0.0], [0.21822, 0.43644, 0.0, 0.87287]], 'g': [[-0.05333, 0.0, -0.15998, 1.06655], [0.0, 0.0, 0.0, 0.0], [11.63829, 5.81915, 0.0, -5.81914]]},
    'normalize1': {'dtype': 'float32', 'v': [[0.90909, 0.0, 1.0, 0.55556], [0.0, 0.0, 0.0, 0.0], [0.09091, 1.0, 0.0, 0.44444]], 'g': [[-0.66116, 0.0, 0.0, -3.95062], [0.0, 0.0, 0.0, 0.0], [6.61157, 0.0, 0.0, 4.93827]]},
    'logaddexp': {'dtype': 'float32', 'v': [[2.31326, -INF, 6.04859, 1.47408], [-INF, -INF, -INF, -INF], [0.8444, 0.99814, -INF, 1.31302]], 'g': [[1.73106, 0.0, 5.85772, 6.48984], [0.0, 0.0, 0.0, 0.0], [13.72481, 15.49834, 0.0, 19.18425]]},
    'mask_int': {'dtype': 'float32', 'v': [4.5, 0.0, 0.7], 'g': [[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 3.0]]},
    'i_sum': {'dtype': 'int64', 'v': [12, 0, 7]},
    'i_prod': {'dtype': 'int64', 'v': [42, 1, 8]},
    'i_amax': {'dtype': 'int32', 'v': [7, -2147483648, 4]},
    'i_amin': {'dtype': 'int32', 'v': [2, 2147483647, 1]},
    'i_argmax': {'dtype': 'int32', 'v': [2, 0, 3]},
    'i_mean_f': {'dtype': 'float32', 'v': [4.0, NAN, 2.33333]},
    'i_var': {'dtype': 'float32', 'v': [7.0, NAN, 2.33333]},
    'i_median_ok': {'dtype': 'int32', 'v': [1, 2, 7, 2]},
    'i_cumsum': {'dtype': 'int32', 'v': [[3, 3, 10, 12], [0, 0, 0, 0], [1, 3, 3, 7]]},
    'i_lse': {'dtype': 'float32', 'v': [7.02474, -INF, 4.16985]},
    'b_sum': {'dtype': 'int64', 'v': [3, 0, 3]},
    'i64_sum': {'dtype': 'int64', 'v': [12, 0, 7]},
    'u8_amin': {'dtype': 'uint8', 'v': [2, 255, 1]},
}
# fmt: on


def _close(got, want):
    return np.allclose(
        np.array(got, dtype=float),
        np.array(want, dtype=float),
        rtol=1e-4,
        atol=1e-5,
        equal_nan=True,
    )


@pytest.mark.parametrize("name", [n for n, _ in FLOAT_CASES])
def test_masked_reductions_match_pytorch_values_dtypes_and_gradients(conn, name):
    fn = dict(FLOAT_CASES)[name]
    want = TORCH[name]
    x = gt.tensor(X, requires_grad=True)
    r = fn(x, gt.tensor(MASK))
    assert str(r.dtype) == "gt." + want["dtype"]
    assert _close(r.tolist(), want["v"]), (r.tolist(), want["v"])
    if "g" in want:
        w = gt.arange(r.numel(), dtype=gt.float32).reshape(r.shape).add(1)
        (r.float() * w).sum().backward()
        assert _close(x.grad.tolist(), want["g"]), (x.grad.tolist(), want["g"])
    else:
        assert not r.requires_grad


@pytest.mark.parametrize("name", [n for n, _ in INT_CASES if n in TORCH])
def test_masked_integer_and_bool_inputs_follow_pytorchs_dtype_rules(conn, name):
    r = dict(INT_CASES)[name](gt.tensor(XI, dtype=gt.int32), gt.tensor(MASK))
    assert str(r.dtype) == "gt." + TORCH[name]["dtype"]
    assert _close(r.tolist(), TORCH[name]["v"])


def test_masked_refusals_carry_pytorchs_messages(conn):
    x, m = gt.tensor(X), gt.tensor(MASK)
    xi = gt.tensor(XI, dtype=gt.int32)
    with pytest.raises(
        IndexError,
        match=r"_input_mask expected broadcastable mask \(got mask dimensionality higher than of the input\)",
    ):
        M.sum(x, 1, mask=m.unsqueeze(0))
    with pytest.raises(RuntimeError, match="expanded size of the tensor"):
        M.sum(x, 1, mask=m[:, :2])
    with pytest.raises(RuntimeError, match="dim=1 appears multiple times in the list of dims"):
        M.sum(x, (1, 1), mask=m)
    with pytest.raises(
        IndexError,
        match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    ):
        M.sum(x, 2, mask=m)
    with pytest.raises(
        ValueError,
        match="mean\\(\\): Could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: gt.int32",
    ):
        M.mean(xi, 1, mask=m)
    with pytest.raises(
        ValueError,
        match="masked median expects no fully masked out rows if dtype is not floating point",
    ):
        M.median(xi, 1, mask=m)
    with pytest.raises(NotImplementedError, match="identity of amax on gt.bool input"):
        M.amax(m, 1, mask=m)


def test_masked_softmax_of_a_fully_masked_row_is_nan_and_the_rest_ignore_masked_entries(conn):
    # attention-style: a padded key never gets weight, an all-padded query row is nan everywhere
    scores = gt.tensor([[2.0, 1.0, 0.0], [0.5, 0.5, 0.5]])
    keep = gt.tensor([[True, True, False], [False, False, False]])
    p = M.softmax(scores, -1, mask=keep).tolist()
    assert _close(p[0], [0.7310586, 0.2689414, 0.0]) and all(math.isnan(v) for v in p[1])
    assert M.sum(scores, mask=gt.tensor(False)).item() == 0.0  # a 0-dim mask broadcasts
    assert M.amax(scores, 1, keepdim=True, dtype=gt.float64, mask=keep).dtype == gt.float64


# ------------------------------------------------------------------------------------ nested
A = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
B = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]


def _nt(**kw):
    return gt.nested.nested_tensor([gt.tensor(A), gt.tensor(B)], **kw)


def _lists(nt):
    assert nt.is_nested
    return [t.tolist() for t in nt.unbind()]


def test_nested_tensor_metadata_sizes_and_printing(conn):
    nt = _nt(requires_grad=True)
    assert nt.layout == gt.strided and nt.is_nested and nt.dim() == 3 and nt.dtype == gt.float32
    assert nt.requires_grad and nt.is_leaf
    assert nt.size(0) == 2 and nt.size(2) == 3 and nt.size(-1) == 3
    with pytest.raises(
        RuntimeError, match="Given dimension 1 is irregular and does not have a size."
    ):
        nt.size(1)
    with pytest.raises(
        IndexError,
        match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)",
    ):
        nt.size(3)
    with pytest.raises(RuntimeError, match="NestedTensorImpl doesn't support sizes"):
        nt.size()
    assert repr(nt) == (
        "nested_tensor([\n"
        "  tensor([[0., 1., 2.],\n"
        "          [3., 4., 5.]], requires_grad=True),\n"
        "  tensor([[0., 1., 2.],\n"
        "          [3., 4., 5.],\n"
        "          [6., 7., 8.]], requires_grad=True)\n"
        "], requires_grad=True)"
    )
    small = gt.nested.nested_tensor([gt.ones(2), gt.ones(1)], requires_grad=True)
    assert str(small * 2) == (
        "nested_tensor([\n  tensor([2., 2.], requires_grad=True),\n"
        "  tensor([2.], requires_grad=True)\n], grad_fn=<MulBackward0>)"
    )
    assert str(gt.nested.nested_tensor([])) == "nested_tensor([\n\n])"
    ints = gt.nested.nested_tensor([[1, 2], [3]])
    assert ints.dtype == gt.int64 and _lists(ints) == [[1, 2], [3]]
    assert _nt(dtype=gt.float64).dtype == gt.float64
    assert not gt.nested.nested_tensor([gt.tensor(A, requires_grad=True) * 2]).requires_grad
    with pytest.raises(
        RuntimeError,
        match="All Tensors given to nested_tensor must have the same dimension. Found dimension 2 for Tensor at index 1 and dimension 1 for Tensor at index 0.",
    ):
        gt.nested.nested_tensor([gt.ones(2), gt.ones(2, 2)])
    with pytest.raises(
        RuntimeError,
        match="NestedTensor can only be unbound along dimension 0 got dimension 1 instead.",
    ):
        nt.unbind(1)


def test_to_padded_tensor_and_narrow(conn):
    nt = _nt()
    assert gt.nested.to_padded_tensor(nt, 0.0).tolist() == [
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [0.0, 0.0, 0.0]],
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]],
    ]
    p = gt.nested.to_padded_tensor(nt, -1.0, output_size=(3, 4, 4))
    assert p.shape == (3, 4, 4) and p[0, 1].tolist() == [3.0, 4.0, 5.0, -1.0]
    assert p[2].tolist() == [[-1.0] * 4] * 4 and p[1, 3].tolist() == [-1.0] * 4
    assert nt.to_padded_tensor(1.0).shape == (2, 3, 3)
    ragged = gt.nested.nested_tensor([gt.ones(2, 3), gt.ones(1, 4)])
    assert gt.nested.to_padded_tensor(ragged, 9.0).tolist() == [
        [[1.0, 1.0, 1.0, 9.0], [1.0, 1.0, 1.0, 9.0]],
        [[1.0, 1.0, 1.0, 1.0], [9.0, 9.0, 9.0, 9.0]],
    ]
    with pytest.raises(
        RuntimeError,
        match="Value in output_size is less than NestedTensor padded size. Truncation is not supported.",
    ):
        gt.nested.to_padded_tensor(nt, -1.0, output_size=(2, 2, 3))
    with pytest.raises(
        RuntimeError,
        match="Length of output_size does not match NestedTensor dims. Broadcasting is not supported.",
    ):
        gt.nested.to_padded_tensor(nt, 0.0, output_size=(2, 4))
    assert _lists(gt.nested.narrow(nt, 0, 1, 1)) == [B]
    with pytest.raises(
        RuntimeError, match="narrow\\(\\): only dim=0 supported for nested tensors, but got: 1"
    ):
        gt.nested.narrow(nt, 1, 0, 1)


def test_nested_elementwise_ops_follow_pytorchs_strided_kernels(conn):
    nt = _nt()
    assert _lists(nt * 2) == [[[v * 2 for v in r] for r in A], [[v * 2 for v in r] for r in B]]
    assert _lists(1 + nt)[0] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert _lists(nt - 1)[1][2] == [5.0, 6.0, 7.0]
    assert _lists(nt / 2)[0] == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]
    assert _lists(nt * nt)[1][2] == [36.0, 49.0, 64.0]
    assert _lists(nt * gt.tensor(2.0))[0][1] == [6.0, 8.0, 10.0]
    assert _lists(nt / (nt + 1))[0][0] == [0.0, 0.5, pytest.approx(2 / 3)]
    assert _lists(-nt)[0][1] == [-3.0, -4.0, -5.0]
    assert _lists(gt.relu(nt - 4))[1][2] == [2.0, 3.0, 4.0]
    assert _close(_lists(gt.nn.functional.gelu(nt))[0][0], [0.0, 0.8413447, 1.9544997])
    assert _close(_lists(nt.sqrt())[0][0], [0.0, 1.0, 1.4142135])
    with pytest.raises(
        RuntimeError,
        match="Expected both self and other to be nested, but got a nested self and non-nested other",
    ):
        nt * gt.tensor([1.0, 2.0, 3.0])
    with pytest.raises(
        RuntimeError, match="add does not support broadcasting when given a NestedTensor"
    ):
        nt + gt.nested.nested_tensor([gt.tensor(B), gt.tensor(A)])
    for bad, op in ((lambda: nt.exp(), "exp"), (lambda: gt.sigmoid(nt), "sigmoid"), (lambda: nt**2, "pow.Tensor_Scalar"),
                    (lambda: 1 - nt, "rsub.Scalar"), (lambda: 1 / nt, "reciprocal")):  # fmt: skip
        with pytest.raises(
            NotImplementedError,
            match=f"Could not run 'aten::{op}' with arguments from the 'NestedTensorCPU' backend",
        ):
            bad()


def test_nested_sum_softmax_matmul_and_linear(conn):
    nt = _nt()
    assert _lists(nt.sum(-1, keepdim=True)) == [[[3.0], [12.0]], [[3.0], [12.0], [21.0]]]
    with pytest.raises(RuntimeError, match="NestedTensor always requires keepdim=True for now."):
        nt.sum(-1)
    with pytest.raises(
        RuntimeError,
        match="NestedTensor can only be reduced across the last dimension for now got dimension 1 instead.",
    ):
        nt.sum(1)
    with pytest.raises(RuntimeError, match="NestedTensor does not support dtype argument for now."):
        nt.sum(-1, keepdim=True, dtype=gt.float64)
    sm = _lists(gt.nn.functional.softmax(nt, -1))
    assert _close(sm[1][2], [0.09003057, 0.24472847, 0.66524094])
    assert _close(_lists(nt.softmax(1))[0][1], [0.95257413] * 3)
    with pytest.raises(RuntimeError, match="Cannot apply softmax across nested dimension 0"):
        nt.softmax(0)
    with pytest.raises(
        RuntimeError, match="Expected both to be nested, but got a nested self and non-nested other"
    ):
        nt @ gt.ones(3, 2)
    other = gt.nested.nested_tensor([gt.ones(3, 2), gt.ones(3, 2)])
    assert _lists(nt @ other) == [
        [[3.0, 3.0], [12.0, 12.0]],
        [[3.0, 3.0], [12.0, 12.0], [21.0, 21.0]],
    ]
    lin = gt.nn.functional.linear(nt, gt.ones(2, 3), gt.tensor([1.0, 2.0]))
    assert _lists(lin) == [[[4.0, 5.0], [13.0, 14.0]], [[4.0, 5.0], [13.0, 14.0], [22.0, 23.0]]]
    with pytest.raises(
        RuntimeError,
        match="Shape mismatch for NestedTensor Linear: Expected input's \\(a nested tensor\\) 'last_dim' to equal 'weight.size\\(1\\), but got: last_dim = 3, and weight.size\\(1\\) = 4",
    ):
        gt.nn.functional.linear(nt, gt.ones(2, 4))
    layer = gt.nn.Linear(3, 2)
    out = layer(nt)
    assert (
        out.is_nested
        and out.size(2) == 2
        and _close(out.unbind()[1].tolist(), layer(gt.tensor(B)).tolist())
    )


def test_nested_jagged_layout_allows_dense_operands(conn):
    nt = _nt(layout=gt.jagged)
    assert nt.layout == gt.jagged and nt.dim() == 3
    assert _lists(nt @ gt.ones(3, 2))[1] == [[3.0, 3.0], [12.0, 12.0], [21.0, 21.0]]
    assert _lists(nt.sum(-1)) == [[3.0, 12.0], [3.0, 12.0, 21.0]]
    assert _lists(nt * gt.tensor([1.0, 0.0, 1.0]))[0] == [[0.0, 0.0, 2.0], [3.0, 0.0, 5.0]]
    assert _close(_lists(nt.exp())[0][0], [1.0, 2.7182817, 7.389056])
    with pytest.raises(RuntimeError, match="Specified layout is unsupported for nested tensors"):
        _nt(layout=gt.sparse_coo)


def test_nested_gradients_match_pytorch(conn):
    nt = _nt(requires_grad=True)
    w = gt.ones(2, 3) * gt.tensor([[1.0], [2.0]])
    y = gt.nested.to_padded_tensor(gt.nn.functional.linear(nt * 2, w).softmax(-1), 0.0)
    (y * gt.arange(y.numel()).reshape(y.shape)).sum().backward()
    g = _lists(nt.grad)
    assert _close(g[0], [[0.0049328436] * 3, [-7.550269e-11] * 3])
    assert _close(g[1], [[0.0049321293] * 3, [-7.550269e-11] * 3, [-1.1499045e-18] * 3])
    a1 = gt.tensor(A, requires_grad=True)
    b1 = gt.tensor(B, requires_grad=True)
    W = gt.tensor([[1.0, -1, 0.5], [0.2, 0.3, -0.4]], requires_grad=True)
    z = gt.nested.to_padded_tensor(
        gt.nn.functional.linear(gt.nested.as_nested_tensor([a1, b1]), W).sum(-1, keepdim=True), -1.0
    )
    assert _close(z.tolist(), [[[-0.5], [1.3], [-1.0]], [[-0.5], [1.3], [3.1]]])
    (z * gt.arange(z.numel()).reshape(z.shape)).sum().backward()
    assert _close(a1.grad.tolist(), [[0.0, 0.0, 0.0], [1.2, -0.7, 0.1]])
    assert _close(b1.grad.tolist(), [[3.6, -2.1, 0.3], [4.8, -2.8, 0.4], [6.0, -3.5, 0.5]])
    assert _close(W.grad.tolist(), [[45.0, 58.0, 71.0], [45.0, 58.0, 71.0]])
