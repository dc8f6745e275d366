"""User-level ops that a sweep found many times slower on a NumPy worker than in PyTorch eager
(Dec 7 2026, 159 cases), each timed through GT (a local cluster, one worker) and through PyTorch
on the CPU in the same process, both with one BLAS thread.

    python benchmarks/bench_op_cliffs.py [--only REGEX] [--rounds 3]

Each case runs in PyTorch, then in GT: a warm-up, then ``--rounds`` rounds of ``k`` runs (about
0.1 s of them) ended by ``gt.sync()``; the best round counts. Sizes are large
enough (2-100 ms in PyTorch) that GT's per-op messaging (tens of microseconds) is noise.
Prints each case's times and GT/PyTorch ratio. Needs PyTorch (a benchmark-only dependency).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GT_BLAS_THREADS"):
    os.environ[_v] = "1"  # (before NumPy, PyTorch or a GT worker starts)

import numpy as np  # noqa: E402

import gt  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:
    torch = None

rng = np.random.default_rng(0)
ACT = rng.standard_normal((32, 128, 1024)).astype(np.float32)  # 4.2M activations
ATT = rng.standard_normal((32, 12, 128, 128)).astype(np.float32)  # attention scores
MAT = rng.standard_normal((4096, 2048)).astype(np.float32)
ROWS = rng.standard_normal((100000, 128)).astype(np.float32)
SRC = rng.standard_normal((200000, 128)).astype(np.float32)
IDX = rng.integers(0, 100000, 200000)
EMB1K = rng.standard_normal((1000, 128)).astype(np.float32)
IDS = rng.integers(0, 1000, (64, 512))
IDS100K = rng.integers(0, 100000, (64, 512))
IMG = rng.standard_normal((16, 64, 56, 56)).astype(np.float32)
LNW = (1 + 0.1 * rng.standard_normal(1024)).astype(np.float32)  # layer_norm's weight and bias
LNB = (0.1 * rng.standard_normal(1024)).astype(np.float32)
CHW = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)  # per-channel weight and bias
CHB = (0.1 * rng.standard_normal(64)).astype(np.float32)
QKV = rng.standard_normal((3, 16, 12, 256, 64)).astype(np.float32)  # attention's q, k, v
CAUSAL_BIAS = np.triu(np.full((256, 256), -np.inf, np.float32), 1)  # an additive mask
SMALL = rng.standard_normal((8, 16, 256)).astype(np.float32)  # a small transformer's activations
SMW, SMB = LNW[:256].copy(), LNB[:256].copy()
LOGITS = rng.standard_normal((4096, 1024)).astype(np.float32)
LABELS = (rng.random((4096, 1024)) < 0.3).astype(np.float32)
NODES = rng.standard_normal((20000, 128)).astype(np.float32)  # a graph's node features
MSGS = rng.standard_normal((100000, 128)).astype(np.float32)  # one message per edge
DST = rng.integers(0, 20000, 100000)  # each edge's target node
SCATTER_IDX = rng.integers(0, 20000, (100000, 128))  # a different target for every element
GATHER_IDX = rng.integers(0, 2048, (4096, 512))  # 512 of each row's 2048 columns
SEQ = rng.standard_normal((64, 512, 256)).astype(np.float32)  # [batch, time, features]
PICK = rng.integers(0, 512, (64, 128))  # 128 time steps of each sequence

#: name -> (inputs, fn(lib, *tensors), with backward: the first input requires grad)
CASES = {
    "embedding bwd, vocab 1k": ([EMB1K, IDS], lambda T, w, i: T.nn.functional.embedding(i, w), True),
    "embedding bwd, vocab 100k": ([ROWS, IDS100K], lambda T, w, i: T.nn.functional.embedding(i, w), True),
    "index_select bwd": ([ROWS, IDX], lambda T, x, i: x.index_select(0, i), True),
    "index_add": ([ROWS, SRC, IDX], lambda T, x, s, i: x.index_add(0, i, s), False),
    "interpolate nearest bwd": ([IMG], lambda T, x: T.nn.functional.interpolate(x, scale_factor=2, mode="nearest"), True),
    "flip bwd": ([ACT], lambda T, x: x.flip(-1), True),
    "topk 10": ([MAT], lambda T, x: T.topk(x, 10, -1)[0], False),
    "topk 256": ([MAT], lambda T, x: T.topk(x, 256, -1)[0], False),
    "topk 10 bwd": ([MAT], lambda T, x: T.topk(x, 10, -1)[0], True),
    "kthvalue": ([MAT], lambda T, x: T.kthvalue(x, 100, -1)[0], False),
    "median": ([MAT], lambda T, x: T.median(x, -1)[0], False),
    "relu6": ([ACT], lambda T, x: T.nn.functional.relu6(x), False),
    "relu6 bwd": ([ACT], lambda T, x: T.nn.functional.relu6(x), True),
    "hardswish": ([ACT], lambda T, x: T.nn.functional.hardswish(x), False),
    "hardswish bwd": ([ACT], lambda T, x: T.nn.functional.hardswish(x), True),
    "leaky_relu": ([ACT], lambda T, x: T.nn.functional.leaky_relu(x, 0.01), False),
    "leaky_relu bwd": ([ACT], lambda T, x: T.nn.functional.leaky_relu(x, 0.01), True),
    "softmax": ([ACT], lambda T, x: T.softmax(x, -1), False),
    "softmax bwd": ([ACT], lambda T, x: T.softmax(x, -1), True),
    "softmax attention": ([ATT], lambda T, x: T.softmax(x, -1), False),
    "bias add, 1024 wide": ([MAT.reshape(8192, 1024), LNB], lambda T, x, b: x + b, False),
    "sdpa, float mask": ([QKV[0], QKV[1], QKV[2], CAUSAL_BIAS], lambda T, q, k, v, m: T.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m), False),
    "sdpa, bool mask": ([QKV[0], QKV[1], QKV[2], CAUSAL_BIAS == 0], lambda T, q, k, v, m: T.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m), False),
    "layer_norm": ([ACT, LNW, LNB], lambda T, x, w, b: T.nn.functional.layer_norm(x, (1024,), w, b), False),
    "layer_norm bwd": ([ACT, LNW, LNB], lambda T, x, w, b: T.nn.functional.layer_norm(x, (1024,), w, b), True),
    "layer_norm small bwd": ([SMALL, SMW, SMB], lambda T, x, w, b: T.nn.functional.layer_norm(x, (256,), w, b), True),
    "group_norm": ([IMG, CHW, CHB], lambda T, x, w, b: T.nn.functional.group_norm(x, 8, w, b), False),
    "group_norm bwd": ([IMG, CHW, CHB], lambda T, x, w, b: T.nn.functional.group_norm(x, 8, w, b), True),
    "batch_norm eval": ([IMG, CHW, CHB, CHB * 0.1, CHW], lambda T, x, w, b, rm, rv: T.nn.functional.batch_norm(x, rm, rv, w, b, False), False),
    "batch_norm eval bwd": ([IMG, CHW, CHB, CHB * 0.1, CHW], lambda T, x, w, b, rm, rv: T.nn.functional.batch_norm(x, rm, rv, w, b, False), True),
    "batch_norm train": ([IMG, CHW, CHB], lambda T, x, w, b: T.nn.functional.batch_norm(x, None, None, w, b, True), False),
    "batch_norm train bwd": ([IMG, CHW, CHB], lambda T, x, w, b: T.nn.functional.batch_norm(x, None, None, w, b, True), True),
    "bce_with_logits": ([LOGITS, LABELS], lambda T, x, y: T.nn.functional.binary_cross_entropy_with_logits(x, y), False),
    "bce_with_logits bwd": ([LOGITS, LABELS], lambda T, x, y: T.nn.functional.binary_cross_entropy_with_logits(x, y), True),
    "smooth_l1": ([LOGITS, LABELS], lambda T, x, y: T.nn.functional.smooth_l1_loss(x, y), False),
    "smooth_l1 bwd": ([LOGITS, LABELS], lambda T, x, y: T.nn.functional.smooth_l1_loss(x, y), True),
    "softplus": ([ACT], lambda T, x: T.nn.functional.softplus(x), False),
    "elu": ([ACT], lambda T, x: T.nn.functional.elu(x), False),
    "elu bwd": ([ACT], lambda T, x: T.nn.functional.elu(x), True),
    "scatter_add, index per element": ([NODES, SCATTER_IDX, MSGS], lambda T, x, i, m: x.scatter_add(0, i, m), False),
    "scatter_add, index per row": ([NODES, DST, MSGS], lambda T, x, d, m: x.scatter_add(0, d.unsqueeze(-1).expand(-1, 128), m), False),
    "gather, index per element": ([MAT, GATHER_IDX], lambda T, x, i: x.gather(1, i), False),
    "gather, index per element bwd": ([MAT, GATHER_IDX], lambda T, x, i: x.gather(1, i), True),
    "gather, index per row": ([SEQ, PICK], lambda T, x, i: x.gather(1, i.unsqueeze(-1).expand(-1, -1, 256)), False),
    "gather, index per row bwd": ([SEQ, PICK], lambda T, x, i: x.gather(1, i.unsqueeze(-1).expand(-1, -1, 256)), True),
    "adaptive_max_pool2d to 1": ([IMG], lambda T, x: T.nn.functional.adaptive_max_pool2d(x, 1), False),
    "adaptive_max_pool2d to 1 bwd": ([IMG], lambda T, x: T.nn.functional.adaptive_max_pool2d(x, 1), True),
    "pad reflect": ([IMG], lambda T, x: T.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"), False),
    "pad reflect bwd": ([IMG], lambda T, x: T.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"), True),
    "pad replicate bwd": ([IMG], lambda T, x: T.nn.functional.pad(x, (3, 3, 3, 3), mode="replicate"), True),
    "gelu": ([ACT], lambda T, x: T.nn.functional.gelu(x), False),
    "gelu bwd": ([ACT], lambda T, x: T.nn.functional.gelu(x), True),
    "gelu small bwd": ([SMALL], lambda T, x: T.nn.functional.gelu(x), True),
}  # fmt: skip


def _timed(lib, name: str, sync) -> float:
    """Best seconds per run of case ``name`` in ``lib``."""
    arrs, fn, backward = CASES[name]
    ts = [lib.from_numpy(a) for a in arrs]
    if backward:
        ts[0].requires_grad_(True)
        seed = lib.from_numpy(np.ones(tuple(fn(lib, *ts).shape), np.float32))

        def body():
            ts[0].grad = None
            fn(lib, *ts).backward(seed)
    else:

        def body():
            with lib.no_grad():
                fn(lib, *ts)

    body()
    sync()
    t0 = time.perf_counter()
    body()
    sync()
    k = max(1, min(20, int(0.1 / max(time.perf_counter() - t0, 1e-6))))
    best = float("inf")
    for _ in range(ARGS.rounds):
        t0 = time.perf_counter()
        for _ in range(k):
            body()
        sync()
        best = min(best, (time.perf_counter() - t0) / k)
    return best


def main() -> int:
    if torch is None:
        print("bench_op_cliffs: needs PyTorch (pip install torch), the reference", file=sys.stderr)
        return 2
    names = [n for n in CASES if ARGS.only is None or re.search(ARGS.only, n)]
    print(f"numpy {np.__version__}, torch {torch.__version__}, one BLAS thread each")
    print(f"{'case':28s} {'torch':>10s} {'GT':>10s} {'GT/torch':>9s}")
    for name in names:
        t_torch = _timed(torch, name, lambda: None)
        t_gt = _timed(gt, name, gt.sync)
        print(f"{name:28s} {t_torch * 1e3:8.2f}ms {t_gt * 1e3:8.2f}ms {t_gt / t_torch:8.2f}x",
              flush=True)  # fmt: skip
    gt.disconnect()
    return 0


_ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_ap.add_argument("--only", help="a regular expression: the cases whose names match")
_ap.add_argument("--rounds", type=int, default=3)
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])

if __name__ == "__main__":
    raise SystemExit(main())
