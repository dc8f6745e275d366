"""Probe autocast: run ~140 ops and layers under ``autocast("cpu", dtype=bfloat16)`` with PyTorch or
with GT, and compare the two runs' output dtypes and values (what the README's autocast numbers
come from). PyTorch is needed for the first run only (it is not a GT dependency):

    /path/to/torch-venv/bin/python scripts/probe_autocast.py run torch /tmp/probe_torch.npz
    python scripts/probe_autocast.py run gt /tmp/probe_gt.npz
    python scripts/probe_autocast.py compare /tmp/probe_torch.npz /tmp/probe_gt.npz
"""

from __future__ import annotations

import sys
import warnings

import numpy as np


def run(lib: str, path: str) -> None:  # noqa: PLR0915 - one table of cases
    """Run every case with ``lib`` ("torch" or "gt") and save dtypes and values to ``path``."""
    warnings.filterwarnings("ignore")
    if lib == "torch":
        import torch as T  # noqa: N812, PLC0415
    else:
        import gt as T  # noqa: N812, PLC0415
    F = T.nn.functional
    rng = np.random.default_rng(0)

    def R(*s):
        return T.tensor(rng.standard_normal(s).astype(np.float32))

    A = R(4, 4)
    B = R(4, 4)
    v = R(4)
    b3 = R(2, 4, 4)
    x4 = R(2, 3, 8, 8)
    x5 = R(1, 2, 4, 4, 4)
    x3 = R(2, 3, 8)
    W5 = R(5, 8)
    bias5 = R(5)
    Wb = R(3, 4, 4)
    k1 = R(4, 3, 3)
    k2 = R(4, 3, 3, 3)
    k3 = R(3, 2, 2, 2, 2)
    kT = R(3, 4, 3, 3)
    th = R(2, 2, 3)
    grid = T.tensor((rng.random((2, 4, 4, 2)) * 2 - 1).astype(np.float32))
    sig = T.tensor(rng.standard_normal(64).astype(np.float32))
    x8 = R(8)
    spd = A @ A.T + 4 * T.eye(4)
    hb = A.bfloat16()
    hb2 = B.bfloat16()
    tests = {
        "matmul": lambda: A @ B,
        "mm": lambda: A.mm(B),
        "bmm": lambda: b3.bmm(b3),
        "mv": lambda: A.mv(v),
        "dot": lambda: v.dot(v),
        "vdot": lambda: T.vdot(v, v),
        "inner": lambda: T.inner(A, B),
        "outer": lambda: T.outer(v, v),
        "addmm": lambda: T.addmm(A, A, B),
        "addmv": lambda: T.addmv(v, A, v),
        "addr": lambda: T.addr(A, v, v),
        "baddbmm": lambda: T.baddbmm(b3, b3, b3),
        "addbmm": lambda: T.addbmm(A, b3, b3),
        "einsum": lambda: T.einsum("ij,jk->ik", A, B),
        "einsum_bij": lambda: T.einsum("bij,bjk->bik", b3, b3),
        "einsum_elem": lambda: T.einsum("ij,ij->ij", A, B),
        "einsum_perm": lambda: T.einsum("ij->ji", A),
        "einsum_sum": lambda: T.einsum("ij,ij->i", A, B),
        "tensordot": lambda: T.tensordot(A, B, 1),
        "multi_dot": lambda: T.linalg.multi_dot([A, B, A]),
        "chain_matmul": lambda: T.chain_matmul(A, B, A),
        "matrix_power": lambda: T.linalg.matrix_power(A, 3),
        "kron": lambda: T.kron(A, B),
        "linear": lambda: F.linear(x3, W5, bias5),
        "linear_nob": lambda: F.linear(x3, W5),
        "bilinear": lambda: F.bilinear(A, B, Wb),
        "conv1d": lambda: F.conv1d(x3, k1),
        "conv2d": lambda: F.conv2d(x4, k2),
        "conv2d_b": lambda: F.conv2d(x4, k2, bias5[:4], padding=1),
        "conv3d": lambda: F.conv3d(x5, k3),
        "convT2d": lambda: F.conv_transpose2d(x4, kT),
        "prelu": lambda: F.prelu(A, T.tensor([0.25])),
        "sdpa": lambda: F.scaled_dot_product_attention(b3, b3, b3),
        "cov": lambda: T.cov(A),
        "corrcoef": lambda: T.corrcoef(A),
        "cdist": lambda: T.cdist(A, B),
        "cdist_bf": lambda: T.cdist(hb, hb2),
        "pdist": lambda: F.pdist(A),
        "pdist_bf": lambda: F.pdist(hb),
        "cos_sim_bf": lambda: F.cosine_similarity(hb, hb2),
        "normalize_bf": lambda: F.normalize(hb),
        "pairwise_bf": lambda: F.pairwise_distance(hb, hb2),
        "softmax": lambda: F.softmax(hb, -1),
        "log_softmax": lambda: F.log_softmax(hb, -1),
        "layer_norm_bf": lambda: F.layer_norm(hb, (4,), T.ones(4), T.zeros(4)),
        "group_norm_bf": lambda: F.group_norm(hb.reshape(2, 2, 4), 2, T.ones(2), T.zeros(2)),
        "batch_norm_bf": lambda: F.batch_norm(hb, T.zeros(4), T.ones(4), T.ones(4), T.zeros(4)),
        "exp_bf": lambda: hb.exp(),
        "sum_bf": lambda: hb.sum(),
        "prod": lambda: A.prod(),
        "prod_bf": lambda: hb.prod(),
        "cumsum_bf": lambda: hb.cumsum(0),
        "norm_bf": lambda: hb.norm(),
        "pow_bf": lambda: hb**2,
        "logsumexp_bf": lambda: hb.logsumexp(0),
        "mean_bf": lambda: hb.mean(),
        "quantile": lambda: A.quantile(0.5),
        "trace": lambda: A.trace(),
        "trace_bf": lambda: hb.trace(),
        "inverse_bfin": lambda: T.inverse(spd.bfloat16()),
        "cholesky": lambda: T.linalg.cholesky(spd.bfloat16()),
        "linalg_inv": lambda: T.linalg.inv(spd.bfloat16()),
        "linalg_solve": lambda: T.linalg.solve(spd.bfloat16(), v.bfloat16()),
        "linalg_norm": lambda: T.linalg.norm(hb),
        "linalg_vector_norm": lambda: T.linalg.vector_norm(hb),
        "linalg_matrix_norm": lambda: T.linalg.matrix_norm(hb),
        "linalg_eigh": lambda: T.linalg.eigh(spd.bfloat16())[0],
        "linalg_svdvals": lambda: T.linalg.svdvals(spd.bfloat16()),
        "linalg_qr": lambda: T.linalg.qr(spd.bfloat16())[1].abs(),
        "linalg_lstsq": lambda: T.linalg.lstsq(spd.bfloat16(), spd.bfloat16())[0],
        "linalg_matrix_exp": lambda: T.linalg.matrix_exp(hb * 0.1),
        "linalg_vecdot": lambda: T.linalg.vecdot(A, B),
        "linalg_cross": lambda: T.linalg.cross(hb[:2, :3], hb2[:2, :3]),
        "linalg_eigvalsh": lambda: T.linalg.eigvalsh(spd.bfloat16()),
        "linalg_cholesky_ex": lambda: T.linalg.cholesky_ex(spd.bfloat16())[0],
        "fft_bf": lambda: T.fft.rfft(x8.bfloat16()).real,
        "fft_f": lambda: T.fft.rfft(x8).abs(),
        "mse": lambda: F.mse_loss(hb, hb2),
        "l1": lambda: F.l1_loss(hb, hb2),
        "smooth_l1": lambda: F.smooth_l1_loss(hb, hb2),
        "huber": lambda: F.huber_loss(hb, hb2),
        "ce": lambda: F.cross_entropy(hb, T.tensor([0, 1, 2, 3])),
        "nll": lambda: F.nll_loss(hb, T.tensor([0, 1, 2, 3])),
        "kl": lambda: F.kl_div(hb, hb2, reduction="batchmean", log_target=True),
        "bce": lambda: F.binary_cross_entropy(hb.sigmoid(), hb2.sigmoid()),
        "bce_logits": lambda: F.binary_cross_entropy_with_logits(hb, hb2.sigmoid()),
        "margin_rank": lambda: F.margin_ranking_loss(hb[0], hb[1], T.ones(4)),
        "soft_margin": lambda: F.soft_margin_loss(hb, T.ones(4, 4)),
        "triplet": lambda: F.triplet_margin_loss(hb, hb2, hb * 0.5),
        "multi_margin": lambda: F.multi_margin_loss(hb, T.tensor([0, 1, 2, 3])),
        "hinge_emb": lambda: F.hinge_embedding_loss(hb, T.ones(4, 4)),
        "cos_emb": lambda: F.cosine_embedding_loss(hb, hb2, T.ones(4)),
        "poisson": lambda: F.poisson_nll_loss(hb, hb2.abs()),
        "gauss_nll": lambda: F.gaussian_nll_loss(hb, hb2, hb.abs() + 1),
        "multilabel_margin": lambda: F.multilabel_margin_loss(hb, T.tensor([[0, 1, -1, 0]] * 4)),
        "multilabel_soft": lambda: F.multilabel_soft_margin_loss(hb, T.ones(4, 4)),
        "grid_sample": lambda: F.grid_sample(x4, grid, align_corners=False),
        "affine_grid": lambda: F.affine_grid(th, (2, 3, 4, 4), align_corners=False),
        "interp": lambda: F.interpolate(x4.bfloat16(), scale_factor=2, mode="bilinear"),
        "avgpool3d": lambda: F.avg_pool3d(x5.bfloat16(), 2),
        "maxpool3d": lambda: F.max_pool3d(x5.bfloat16(), 2),
        "maxpool2d": lambda: F.max_pool2d(x4.bfloat16(), 2),
        "adapt3d": lambda: F.adaptive_avg_pool3d(x5.bfloat16(), 1),
        "adaptmax3d": lambda: F.adaptive_max_pool3d(x5.bfloat16(), 1),
        "reflect1d": lambda: F.pad(x3.bfloat16(), (1, 1), mode="reflect"),
        "reflect2d": lambda: F.pad(x4.bfloat16(), (1, 1, 1, 1), mode="reflect"),
        "reflect3d": lambda: F.pad(x5.bfloat16(), (1, 1, 1, 1, 1, 1), mode="reflect"),
        "replicate1d": lambda: F.pad(x3.bfloat16(), (1, 1), mode="replicate"),
        "replicate2d": lambda: F.pad(x4.bfloat16(), (1, 1, 1, 1), mode="replicate"),
        "replicate3d": lambda: F.pad(x5.bfloat16(), (1, 1, 1, 1, 1, 1), mode="replicate"),
        "circular2d": lambda: F.pad(x4.bfloat16(), (1, 1, 1, 1), mode="circular"),
        "constant2d": lambda: F.pad(x4.bfloat16(), (1, 1, 1, 1)),
        "cat": lambda: T.cat([hb, A]),
        "stack": lambda: T.stack([hb, A]),
        "index_copy": lambda: hb.index_copy(0, T.tensor([0]), A[:1]),
        "addcmul": lambda: T.addcmul(hb, A, B),
        "where": lambda: T.where(A > 0, hb, A),
        "embedding": lambda: F.embedding(T.tensor([0, 1]), A),
        "polar": lambda: T.polar(A.abs().bfloat16(), A.bfloat16()).real,
        "stft": lambda: T.stft(sig, 16, return_complex=True, window=T.hann_window(16)).abs(),
        "std_bf": lambda: hb.std(),
        "var_mean": lambda: T.var_mean(hb)[0],
        "sort": lambda: hb.sort()[0],
        "unfold": lambda: F.unfold(x4, 2),
        "fold": lambda: F.fold(F.unfold(x4, 2), (8, 8), 2),
        "pixel_shuffle": lambda: F.pixel_shuffle(
            x4[:1, :, :2, :2].repeat(1, 4, 1, 1)[:, :4].bfloat16(), 2
        ),
        "gelu": lambda: F.gelu(hb),
        "silu": lambda: F.silu(hb),
        "elu": lambda: F.elu(hb),
        "softplus": lambda: F.softplus(hb),
        "mish": lambda: F.mish(hb),
        "logsigmoid": lambda: F.logsigmoid(hb),
        "linear_relu_chain": lambda: F.linear(F.relu(F.linear(x3, W5, bias5)), R(3, 5)).sum(),
    }

    def M(m, seed=3):
        g = np.random.default_rng(seed)
        with T.no_grad():
            for p in m.parameters():
                p.copy_(T.tensor(g.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
        return m

    tests.update(
        {
            "lstm": lambda: M(T.nn.LSTM(4, 3))(A.unsqueeze(1))[0],
            "gru": lambda: M(T.nn.GRU(4, 3))(A.unsqueeze(1))[0],
            "rnn": lambda: M(T.nn.RNN(4, 3))(A.unsqueeze(1))[0],
            "lstmcell": lambda: M(T.nn.LSTMCell(4, 3))(A)[0],
            "grucell": lambda: M(T.nn.GRUCell(4, 3))(A),
            "mha": lambda: M(T.nn.MultiheadAttention(4, 2))(
                A.unsqueeze(1), A.unsqueeze(1), A.unsqueeze(1)
            )[0],
            "embbag": lambda: F.embedding_bag(T.tensor([0, 1, 2, 1]), A, T.tensor([0, 2])),
            "sdpa4d": lambda: F.scaled_dot_product_attention(
                b3[None], b3[None], b3[None], is_causal=True
            ),
        }
    )
    out = {}
    with T.autocast("cpu", dtype=T.bfloat16):
        for k, f in tests.items():
            try:
                r = f()
                out[k + "__dtype"] = np.array(str(r.dtype).split(".")[-1])
                out[k] = r.detach().float().numpy().astype(np.float64)
            except Exception as e:
                out[k + "__dtype"] = np.array("ERR " + type(e).__name__ + ": " + str(e)[:80])
    np.savez(path, **out)


def compare(torch_path: str, gt_path: str) -> int:
    """Print each case whose dtype or values differ; returns how many differ."""
    t = np.load(torch_path)
    g = np.load(gt_path)
    bad = 0
    for k in [k for k in t.files if k.endswith("__dtype")]:
        n = k[:-7]
        td = str(t[k])
        gd = str(g[k]) if k in g.files else "MISSING"
        msg = ""
        if td != gd:
            msg = f"DTYPE torch={td} gt={gd}"
        elif not td.startswith("ERR"):
            a, b = t[n], g[n]
            if a.shape != b.shape:
                msg = f"SHAPE {a.shape} {b.shape}"
            else:
                d = np.abs(a - b)
                rel = (d / np.maximum(np.abs(a), 1e-6)).max() if a.size else 0
                if not np.array_equal(a, b):
                    ne = (a != b).sum()
                    msg = f"values {ne}/{a.size} differ, max rel {rel:.2e}" + (
                        " (>1ulp bf16)" if rel > 8e-3 else ""
                    )
        if msg:
            bad += 1
            print(f"{n:22s} {td:9s} {msg}")
    print("differing:", bad, "of", len([k for k in t.files if k.endswith("__dtype")]))

    return bad


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
