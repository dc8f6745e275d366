"""``F.ctc_loss``/``nn.CTCLoss`` and ``F.embedding_bag``/``nn.EmbeddingBag`` through a real cluster,
against NumPy references written here: the CTC forward algorithm in float64 (itself checked
against a brute-force sum over every alignment), bags reduced one by one, and central finite
differences of those references for the gradients."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)
rng = np.random.default_rng(11)
EPS = 1e-6


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _fd(f, x, eps=EPS):
    """Central finite differences of the scalar ``f`` at ``x``."""
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (f(up) - f(down)) / (2 * eps)
    return g


# ------------------------------------------------------------------ CTC references
def _ctc_one(lp, target, blank):
    """``-log p(target)`` for one sample's ``[T, C]`` log-probabilities (forward algorithm)."""
    ext = [blank]
    for c in target:
        ext += [int(c), blank]
    t_len, width = lp.shape[0], len(ext)
    if t_len == 0:
        return 0.0 if not len(target) else math.inf
    alpha = np.full(width, -np.inf)
    alpha[0] = lp[0, ext[0]]
    if width > 1:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, t_len):
        new = np.full(width, -np.inf)
        for s in range(width):
            terms = [alpha[s]] + ([alpha[s - 1]] if s >= 1 else [])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
        alpha = new
    ends = [alpha[-1]] + ([alpha[-2]] if width > 1 else [])
    return -np.logaddexp.reduce(ends)


def _ctc_brute(lp, target, blank):
    """The same by summing over every path of length ``T`` that collapses to ``target``."""
    t_len, c = lp.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if k != blank and (i == 0 or k != path[i - 1])]
        if collapsed == list(target):
            total += math.exp(sum(lp[t, k] for t, k in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def _ctc_ref(lp, targets, il, tl, blank=0, reduction="mean", zero_infinity=False):
    """``lp``: ``[T, N, C]``; ``targets``: ``[N, S]``."""
    losses = np.array(
        [_ctc_one(lp[: il[n], n], targets[n][: tl[n]], blank) for n in range(lp.shape[1])]
    )
    if zero_infinity:
        losses = np.where(np.isinf(losses), 0.0, losses)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return (losses / np.maximum(np.asarray(tl), 1)).mean()


T, N, C = 6, 3, 5
LOGITS = rng.standard_normal((T, N, C))
TARGETS = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 1]])
IL, TL = [6, 5, 4], [3, 2, 1]


def test_ctc_reference_matches_brute_force():
    lp = _log_softmax(rng.standard_normal((4, 3)))
    for target in ([], [1], [1, 1], [2, 1], [1, 2, 1], [1, 1, 1]):
        for blank in (0, 2):
            if blank in target:
                continue
            ref, brute = _ctc_one(lp, target, blank), _ctc_brute(lp, target, blank)
            assert ref == brute or np.isclose(ref, brute, rtol=1e-12), (target, blank)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_loss_reductions_match_forward_algorithm(conn, reduction):
    lp = _log_softmax(LOGITS)
    got = F.ctc_loss(gt.tensor(lp), gt.tensor(TARGETS), IL, TL, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _ctc_ref(lp, TARGETS, IL, TL, reduction=reduction),
                               rtol=1e-10)  # fmt: skip


def test_ctc_loss_concatenated_targets_and_tensor_lengths(conn):
    lp = _log_softmax(LOGITS)
    flat = np.concatenate([TARGETS[n, : TL[n]] for n in range(N)])
    got = F.ctc_loss(gt.tensor(lp), gt.tensor(flat), gt.tensor(IL), gt.tensor(TL, dtype="int32"),
                     reduction="none")  # fmt: skip
    np.testing.assert_allclose(got.numpy(), _ctc_ref(lp, TARGETS, IL, TL, reduction="none"))
    assert got.dtype == "float64"
    got32 = nn.CTCLoss()(gt.tensor(lp.astype(np.float32)), gt.tensor(flat), tuple(IL), tuple(TL))
    assert got32.dtype == "float32"
    np.testing.assert_allclose(got32.numpy(), _ctc_ref(lp, TARGETS, IL, TL), rtol=1e-5)


def test_ctc_loss_other_blank_empty_target_and_unbatched(conn):
    lp = _log_softmax(LOGITS)
    targets = np.array([[0, 1, 3], [2, 2, 0], [1, 0, 0]])
    il, tl = [6, 3, 0], [3, 0, 0]
    got = nn.CTCLoss(blank=4, reduction="none")(gt.tensor(lp), gt.tensor(targets), il, tl)
    ref = _ctc_ref(lp, targets, il, tl, blank=4, reduction="none")
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    assert ref[2] == 0.0  # nothing to emit in no time
    one = F.ctc_loss(gt.tensor(lp[:, 0]), gt.tensor(TARGETS[0]), gt.tensor(5), gt.tensor(2))
    assert one.shape == ()
    np.testing.assert_allclose(one.numpy(), _ctc_one(lp[:5, 0], TARGETS[0][:2], 0) / 2)
    none = F.ctc_loss(gt.tensor(lp[:, 0]), gt.tensor(TARGETS[0]), [5], [2], reduction="none")
    assert none.shape == ()


def test_ctc_loss_gradient_of_logits_matches_finite_differences(conn):
    x = gt.tensor(LOGITS, requires_grad=True)
    loss = F.ctc_loss(x.log_softmax(-1), gt.tensor(TARGETS), gt.tensor(IL), gt.tensor(TL))
    loss.backward()
    fd = _fd(lambda a: _ctc_ref(_log_softmax(a), TARGETS, IL, TL), LOGITS)
    np.testing.assert_allclose(x.grad.numpy(), fd, atol=1e-7)


def test_ctc_loss_gradient_of_log_probs_is_pytorchs(conn):
    # PyTorch's kernel adds exp(log_probs) on each sample's first input_length steps.
    lp = _log_softmax(LOGITS)
    x = gt.tensor(lp, requires_grad=True)
    F.ctc_loss(x, gt.tensor(TARGETS), IL, TL, reduction="sum").backward()
    fd = _fd(lambda a: _ctc_ref(a, TARGETS, IL, TL, reduction="sum"), lp)
    within = np.arange(T)[:, None, None] < np.array(IL)[None, :, None]
    np.testing.assert_allclose(x.grad.numpy(), fd + np.exp(lp) * within, atol=1e-7)


def test_ctc_loss_impossible_alignment_is_inf_or_zero(conn):
    lp = _log_softmax(LOGITS)
    targets = np.array([[1, 1, 1], [1, 2, 3], [2, 0, 0]])
    il, tl = [6, 2, 4], [3, 3, 1]  # sample 1 needs at least 3 steps
    for zero_infinity in (False, True):
        x = gt.tensor(LOGITS, requires_grad=True)
        loss = F.ctc_loss(x.log_softmax(-1), gt.tensor(targets), il, tl, reduction="none",
                          zero_infinity=zero_infinity)  # fmt: skip
        loss.sum().backward()
        got, grad = loss.detach().numpy(), x.grad.detach().numpy()
        ref = _ctc_ref(lp, targets, il, tl, reduction="none", zero_infinity=zero_infinity)
        np.testing.assert_allclose(got, ref, rtol=1e-10)
        fd = _fd(lambda a: _ctc_ref(_log_softmax(a[:, [0, 2]]), targets[[0, 2]], [6, 4], [3, 1],
                                    reduction="sum"), LOGITS)  # fmt: skip
        np.testing.assert_allclose(grad[:, [0, 2]], fd[:, [0, 2]], atol=1e-7)
        if zero_infinity:
            assert got[1] == 0.0 and not grad[:, 1].any()
        else:
            assert got[1] == math.inf
            assert np.isnan(grad[:2, 1]).all() and not grad[2:, 1].any()  # as PyTorch


def test_ctc_loss_zero_infinity_mean(conn):
    lp = _log_softmax(LOGITS)
    got = F.ctc_loss(gt.tensor(lp), gt.tensor(TARGETS), [6, 1, 4], TL, zero_infinity=True)
    ref = _ctc_ref(lp, TARGETS, [6, 1, 4], TL, zero_infinity=True)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10)
    with gt.no_grad():
        quiet = F.ctc_loss(gt.tensor(lp, requires_grad=True), gt.tensor(TARGETS), [6, 1, 4], TL,
                           zero_infinity=True)  # fmt: skip
    assert not quiet.requires_grad
    np.testing.assert_allclose(quiet.numpy(), ref, rtol=1e-10)


def test_ctc_loss_errors(conn):
    lp = gt.tensor(_log_softmax(LOGITS))
    tg = gt.tensor(TARGETS)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6, but"):
        F.ctc_loss(lp, tg, [7, 5, 4], TL)
    with pytest.raises(RuntimeError, match="have size at least 4 at dimension 1, but got size 3"):
        F.ctc_loss(lp, tg, IL, [4, 1, 1])
    with pytest.raises(RuntimeError, match="target_lengths to have value at least 0"):
        F.ctc_loss(lp, tg, IL, [1, -1, 1])
    with pytest.raises(RuntimeError, match="input_lengths must be of size batch_size"):
        F.ctc_loss(lp, tg, [6, 6], TL)
    with pytest.raises(RuntimeError, match="to have size 6 at dimension 0, but got size 5"):
        F.ctc_loss(lp, gt.tensor([1, 2, 3, 1, 2]), IL, TL)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp, tg, IL, TL, blank=5)
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.ctc_loss(lp, tg, IL, TL, reduction="foo")


# ------------------------------------------------------------------ embedding_bag references
W = rng.standard_normal((7, 3))
IDX = np.array([1, 2, 4, 5, 4, 3, 2, 0, 6, 6])


def _bag_ref(w, idx, offsets, mode, psw=None, pad=None, include_last_offset=False):
    """Each bag reduced on its own (``offsets`` as PyTorch reads them)."""
    ends = list(offsets[1:]) + ([] if include_last_offset else [len(idx)])
    starts = offsets[:-1] if include_last_offset else offsets
    out = np.zeros((len(starts), w.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        keep = [i for i in range(s, e) if pad is None or idx[i] != pad % len(w)]
        if not keep:
            continue
        rows = w[idx[keep]] * (1.0 if psw is None else psw[keep][:, None])
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("pad", [None, 2, -1])
def test_embedding_bag_offsets_match_reference_with_gradient(conn, mode, pad):
    offsets = [0, 2, 2, 5]  # an empty bag, and a last bag running to the end
    g = rng.standard_normal((4, 3))
    w = gt.tensor(W, requires_grad=True)
    out = F.embedding_bag(gt.tensor(IDX), w, gt.tensor(offsets), mode=mode, padding_idx=pad)
    (out * gt.tensor(g)).sum().backward()
    np.testing.assert_allclose(
        out.detach().numpy(), _bag_ref(W, IDX, offsets, mode, pad=pad), rtol=1e-12
    )
    fd = _fd(lambda a: (_bag_ref(a, IDX, offsets, mode, pad=pad) * g).sum(), W)
    np.testing.assert_allclose(w.grad.numpy(), fd, atol=1e-7)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_fixed_bags_and_last_offset(conn, mode):
    got = F.embedding_bag(gt.tensor(IDX.reshape(2, 5)), gt.tensor(W), mode=mode, padding_idx=2)
    np.testing.assert_allclose(got.numpy(), _bag_ref(W, IDX, [0, 5], mode, pad=2))
    got = F.embedding_bag(gt.tensor(IDX.reshape(5, 2)), gt.tensor(W), mode=mode)
    np.testing.assert_allclose(got.numpy(), _bag_ref(W, IDX, [0, 2, 4, 6, 8], mode))
    offsets = [0, 3, 3, 10]
    got = F.embedding_bag(gt.tensor(IDX), gt.tensor(W), offsets, mode=mode,
                          include_last_offset=True)  # fmt: skip
    ref = _bag_ref(W, IDX, offsets, mode, include_last_offset=True)
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got.numpy(), ref)


@pytest.mark.parametrize("fixed", [False, True])
def test_embedding_bag_per_sample_weights_gradients(conn, fixed):
    psw = np.linspace(-1.0, 2.0, 10)
    g = rng.standard_normal((2, 3))
    w = gt.tensor(W, requires_grad=True)
    p = gt.tensor(psw, requires_grad=True)
    if fixed:
        out = F.embedding_bag(gt.tensor(IDX.reshape(2, 5)), w, mode="sum",
                              per_sample_weights=p.reshape(2, 5), padding_idx=2)  # fmt: skip
    else:
        out = F.embedding_bag(gt.tensor(IDX), w, gt.tensor([0, 5]), mode="sum",
                              per_sample_weights=p, padding_idx=2)  # fmt: skip
    (out * gt.tensor(g)).sum().backward()

    def ref(a, q):
        return _bag_ref(a, IDX, [0, 5], "sum", psw=q, pad=2)

    np.testing.assert_allclose(out.detach().numpy(), ref(W, psw), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), _fd(lambda a: (ref(a, psw) * g).sum(), W),
                               atol=1e-7)  # fmt: skip
    grad_p = _fd(lambda q: (ref(W, q) * g).sum(), psw)
    np.testing.assert_allclose(p.grad.numpy(), grad_p, atol=1e-7)
    assert grad_p[IDX == 2].tolist() == [0.0, 0.0]  # padding entries take no gradient


def test_embedding_bag_module_and_from_pretrained(conn):
    bag = nn.EmbeddingBag(10, 3, mode="max", padding_idx=-2)
    assert repr(bag) == "EmbeddingBag(10, 3, mode='max', padding_idx=8)"
    assert not bag.weight.detach().numpy()[8].any()
    pre = nn.EmbeddingBag.from_pretrained(gt.tensor(W), mode="sum")
    assert not pre.weight.requires_grad
    got = pre(gt.tensor(IDX), gt.tensor([0, 4]))
    np.testing.assert_allclose(got.numpy(), _bag_ref(W, IDX, [0, 4], "sum"))
    trainable = nn.EmbeddingBag.from_pretrained(gt.tensor(W), freeze=False)
    trainable(gt.tensor(IDX.reshape(2, 5))).sum().backward()
    counts = np.bincount(IDX, minlength=7)[:, None] / 5.0
    np.testing.assert_allclose(trainable.weight.grad.numpy(), np.broadcast_to(counts, (7, 3)))
    assert F.embedding_bag(gt.tensor(np.zeros(0, np.int64)), gt.tensor(W), [0, 0]).shape == (2, 3)


def test_embedding_bag_errors(conn):
    idx, w = gt.tensor(IDX), gt.tensor(W)
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        F.embedding_bag(idx, w, gt.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"offsets\[-1\] can not be greater than input's length"):
        F.embedding_bag(idx, w, gt.tensor([0, 11]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(idx, w)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(idx.reshape(2, 5), w, gt.tensor([0, 1]))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(idx, w, [0], mode="min")
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(idx, w, [0], per_sample_weights=gt.tensor(np.ones(10)))
    with pytest.raises(ValueError, match="must have the same shape as the input"):
        F.embedding_bag(idx, w, [0], mode="sum", per_sample_weights=gt.tensor(np.ones(9)))
    with pytest.raises(RuntimeError, match="padding_idx must be within the number of embeddings"):
        F.embedding_bag(idx, w, [0], padding_idx=7)
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        F.embedding_bag(idx, w, [0], mode="max", sparse=True)
    with pytest.raises(RuntimeError, match="Long, Int"):
        F.embedding_bag(gt.tensor(IDX.astype(np.float64)), w, [0])
