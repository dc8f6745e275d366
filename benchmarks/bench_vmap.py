"""Per-sample gradients with ``vmap(grad(f))``: GT's batched run against running each entry and
against PyTorch's ``torch.func``.

The workload is the one of PyTorch's per-sample-gradient tutorial (and of DP-SGD): an MLP
``Linear(IN, HIDDEN) -> ReLU -> Linear(HIDDEN, 10)``, cross entropy, the gradient of each of
``--batch`` samples' losses with respect to every parameter. Three timings, interleaved round by
round, each a number of calls followed by one fetch of a result (a sync):

* ``GT batched``: ``gt.func.vmap(gt.func.grad(loss))``, which runs once over the whole batch;
* ``GT per entry``: the same call with the batched run turned off (what ``vmap`` did before:
  the function once per sample, then a stack);
* ``torch.func``: ``torch.func.vmap(torch.func.grad(loss))`` in PyTorch eager on the CPU with the
  same BLAS threads (the reference a user would pick instead).

GT's batched gradients are checked equal to its per-entry ones. PyTorch is needed
(``pip install torch``); it is a benchmark-only dependency.

    python benchmarks/bench_vmap.py [--rounds 5] [--calls 20] [--batch 64] [--blas-threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_ap.add_argument("--rounds", type=int, default=5)
_ap.add_argument("--calls", type=int, default=20)
_ap.add_argument("--batch", type=int, default=64)
_ap.add_argument("--hidden", type=int, default=128)
_ap.add_argument("--inputs", type=int, default=64)
_ap.add_argument("--blas-threads", type=int, default=1)
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GT_BLAS_THREADS"):
    os.environ[_v] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402 - after the BLAS settings

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - a benchmark-only dependency
    sys.exit("bench_vmap.py compares with torch.func: pip install torch")

import gt  # noqa: E402
import gt.func as gt_func  # noqa: E402
from gt.ops.base import Unbatchable  # noqa: E402


def per_sample_grads(lib, model, x, y):
    """A function computing every sample's gradients with ``lib``'s ``func``."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xb, yb):
        out = lib.func.functional_call(model, p, (xb.unsqueeze(0),))
        return lib.nn.functional.cross_entropy(out, yb.unsqueeze(0))

    psg = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))
    return lambda: psg(params, x, y)


def timed(fn, calls: int) -> tuple[float, dict]:
    t = time.perf_counter()
    for _ in range(calls):
        out = fn()
    next(iter(out.values())).sum().item()  # a sync: the work is done
    return (time.perf_counter() - t) / calls, out


def _never_batched(*_a, **_k):
    raise Unbatchable("turned off by the benchmark")


def main() -> int:
    torch.set_num_threads(ARGS.blas_threads)
    rng = np.random.default_rng(0)
    n, d, h = ARGS.batch, ARGS.inputs, ARGS.hidden
    x_np = rng.standard_normal((n, d)).astype(np.float32)
    y_np = rng.integers(0, 10, n)
    torch.manual_seed(0)
    t_model = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, 10))
    t_fn = per_sample_grads(torch, t_model, torch.from_numpy(x_np), torch.from_numpy(y_np))
    gt.connect()
    try:
        g_model = gt.nn.Sequential(gt.nn.Linear(d, h), gt.nn.ReLU(), gt.nn.Linear(h, 10))
        with gt.no_grad():
            for gp, tp in zip(g_model.parameters(), t_model.parameters()):
                gp.copy_(gt.tensor(tp.detach().numpy()))
        g_fn = per_sample_grads(gt, g_model, gt.tensor(x_np), gt.tensor(y_np))
        batched_run = gt_func.run_batched
        res: dict[str, list] = {"batched": [], "per_entry": [], "torch": []}
        same = True
        for r in range(ARGS.rounds + 1):  # round 0 warms up
            tb, gb = timed(g_fn, ARGS.calls)
            gt_func.run_batched = _never_batched
            try:
                tp, gp = timed(g_fn, max(ARGS.calls // 10, 1))
            finally:
                gt_func.run_batched = batched_run
            tt, gw = timed(t_fn, ARGS.calls)
            for k in gb:
                same &= np.allclose(gb[k].numpy(), gp[k].numpy(), rtol=1e-5, atol=1e-6)
                same &= np.allclose(gb[k].numpy(), gw[k].numpy(), rtol=1e-4, atol=1e-5)
            if r:
                res["batched"].append(tb), res["per_entry"].append(tp), res["torch"].append(tt)
                print(f"round {r}: GT batched {tb * 1e3:.2f} ms, GT per entry {tp * 1e3:.1f} ms, "
                      f"torch.func {tt * 1e3:.2f} ms a call")  # fmt: skip
        m = {k: statistics.median(v) for k, v in res.items()}
        print()
        print(f"per-sample gradients, MLP {d}-{h}-10, batch {n}, float32, BLAS threads "
              f"{ARGS.blas_threads}; medians of {ARGS.rounds} rounds")  # fmt: skip
        print(f"  GT batched vs GT per entry: {m['per_entry'] / m['batched']:.1f}x faster "
              f"({m['batched'] * 1e3:.2f} vs {m['per_entry'] * 1e3:.1f} ms)")  # fmt: skip
        print(f"  GT batched vs torch.func:   {m['batched'] / m['torch']:.2f}x its time "
              f"({m['batched'] * 1e3:.2f} vs {m['torch'] * 1e3:.2f} ms)")  # fmt: skip
        print(f"  results equal (batched, per entry, torch.func): {bool(same)}")
        return 0 if same else 1
    finally:
        gt.disconnect()


if __name__ == "__main__":
    sys.exit(main())
