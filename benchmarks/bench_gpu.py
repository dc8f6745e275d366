"""GPU benchmarks: GT on CuPy workers against CuPy called directly, measured in one run.

Run ``python benchmarks/bench_gpu.py [--quick] [--json FILE] [--only NAME ...]`` on a machine
with a CUDA GPU and CuPy; elsewhere it says why and exits 0 (nothing to measure). GT's workers run
with ``GT_BACKEND=cupy``; the references run in this process on the same GPU, never at the same
time as GT.

1. ``matmul N dtype``: ``K`` pipelined ``c = a @ b`` (N x N, float32 / float16 / bfloat16 where the
   worker computes in it) on one CuPy worker, then one scalar fetch of the last product, which
   returns only once the device has finished them all; time per product. The reference is CuPy
   direct, timed the same way (``K`` products, then one scalar ``.item()``), so both sides
   include the same launch and synchronisation; CuPy's CUDA-event time per product (device time
   only) is printed beside it. Target: <= 1.05x for 4096 float32, reported for the others.
2. ``tiny ops``: 20,000 pipelined ``x = x + 1`` on a 4-element array on a CuPy worker, ops/s;
   against CuPy's own launch rate for the same loop in this process (``x = x + 1``, then a
   synchronize). Reported (no target): what a GT instruction costs over a kernel launch.
3. ``sharded matmul 4096 x2``: ``a @ b`` with ``a`` row-sharded over 2 workers (on one GPU they
   share it) against 1 worker: speed-up, reported.
4. ``all-reduce 64MiB x2``: the ``all_reduce`` instruction on 2 workers, timed from their ``exec``
   events, as bandwidth; against a host round trip of the same bytes in CuPy (``asnumpy`` then
   ``asarray``: the floor of a host-staged exchange). Reported. Then the same all-reduce with
   pinned staging turned off (``GT_PINNED_STAGING=0`` in the workers): staged / unstaged.
   With two GPUs or more (the workers then sit on distinct GPUs), ``all-reduce ... nccl``: the
   wall time of a step that needs the all-reduce (``part.relu()[:1].numpy()``) with NCCL
   (default) and with ``GT_NCCL=0`` (the host-staged ring): ring / NCCL, both results checked
   equal.
5. ``upload 64MiB`` and ``fetch 64MiB``: ``gt.tensor(host)`` then a one-element fetch, and
   ``x.numpy()``, on one CuPy worker (client to worker over its ipc socket, then the device),
   with clients' transfers staged (``GT_PINNED_STAGING=all``) and not (``0``): staged /
   unstaged (the default stages only transfers between workers); CuPy's own pageable and pinned
   copies of the bytes are printed beside them (one hop fewer: no client process).
6. ``hot sgd fused``: a captured (``@gt.hot``) SGD-with-momentum update of 8 parameters of
   2048 x 2048 float32 on one CuPy worker, each parameter's ``buf.mul_``, ``buf.add_``,
   ``p.add_(alpha=)`` replayed as one CUDA kernel, against the same replay with
   ``GT_FUSED_CHAINS=0`` in the worker (three kernels a parameter); time per step, and whether
   both give the same bits. Reported.

Every process started here is stopped on exit, error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np
from common import Result, best, format_table, machine_info, print_machine, print_result_line

MIB = 1 << 20
WARMUP = 2
ROWS = {"data": {"shard": {"axis": 0}}, "params": {"replicate": {}}}


# ----------------------------------------------------------------------------- the GPU
def find_gpu() -> tuple[Any, str]:
    """``(cupy, description)``, or ``(None, why not)`` (no CuPy, no device, kernels fail)."""
    try:
        import cupy  # noqa: PLC0415 - the benchmark's reference side

        n = cupy.cuda.runtime.getDeviceCount()
        x = cupy.arange(4, dtype=cupy.float32)
        if float((x * 2).sum()) != 12.0:
            return None, "a test kernel gave a wrong answer"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return cupy, f"{name} ({n} visible), CuPy {cupy.__version__}"
    except Exception as exc:  # ImportError, CUDARuntimeError ...
        return None, f"{type(exc).__name__}: {exc}"


def use_test_double() -> tuple[Any, str]:
    """The CuPy test double as ``cupy``, here and in the workers: exercises this script's code,
    measures nothing about GPUs."""
    support = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                           "support")  # fmt: skip
    sys.path.insert(0, support)
    os.environ["GT_CUPY_DOUBLE"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (support, os.environ.get("PYTHONPATH"))
                                               if p)  # fmt: skip
    import cupy_double  # noqa: PLC0415

    return cupy_double, "the CuPy test double (a dry run: no GPU, these numbers mean nothing)"


def bf16_dtype(cp: Any) -> Any:
    """bfloat16 if this CuPy computes in it (CuPy 14+ with ml_dtypes), else None."""
    try:
        import ml_dtypes  # noqa: PLC0415

        a = cp.ones((2, 2), dtype=ml_dtypes.bfloat16)
        return ml_dtypes.bfloat16 if float((a @ a).astype(cp.float32).sum()) == 8.0 else None
    except Exception:
        return None


# ----------------------------------------------------------------------------- references
def cupy_matmul(cp: Any, n: int, dtype: Any, k: int, repeats: int) -> tuple[list, list]:
    """Seconds per product: wall (K products + a scalar read) and CUDA-event (device) time."""
    a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
    b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dtype)
    wall, event = [], []
    for i in range(repeats + WARMUP):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter()
        start.record()
        for _ in range(k):
            c = a @ b
        end.record()
        float(c[0, 0].astype(cp.float32).item())
        t1 = time.perf_counter()
        end.synchronize()
        if i >= WARMUP:
            wall.append((t1 - t0) / k)
            event.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / k)
    del a, b, c
    cp.get_default_memory_pool().free_all_blocks()
    return wall, event


def cupy_tiny_ops(cp: Any, n_ops: int) -> float:
    """CuPy's own rate for ``x = x + 1`` on a 4-element array (ops/s)."""
    x = cp.zeros(4, dtype=cp.float32)
    for _ in range(100):
        x = x + 1
    cp.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(n_ops):
        x = x + 1
    cp.cuda.get_current_stream().synchronize()
    return n_ops / (time.perf_counter() - t0)


def cupy_copies(cp: Any, nbytes: int, repeats: int) -> dict[str, float]:
    """CuPy's best seconds for one host-to-device and one device-to-host copy of ``nbytes``, from
    pageable memory (``asarray``/``asnumpy``) and from a reused pinned buffer."""
    n = nbytes // 4
    host = np.ones(n, np.float32)
    mem = cp.cuda.alloc_pinned_memory(nbytes)
    pinned = np.frombuffer(mem, np.float32, n)
    pinned[:] = 1
    dev = cp.ones(n, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()
    out: dict[str, list[float]] = {"h2d pageable": [], "d2h pageable": [], "h2d pinned": [],
                                   "d2h pinned": []}  # fmt: skip
    for _ in range(repeats + 1):
        for name, fn in (("h2d pageable", lambda: cp.asarray(host)),
                         ("d2h pageable", lambda: cp.asnumpy(dev)),
                         ("h2d pinned", lambda: dev.set(pinned)),
                         ("d2h pinned", lambda: dev.get(out=pinned))):  # fmt: skip
            stream.synchronize()
            t0 = time.perf_counter()
            fn()
            stream.synchronize()
            out[name].append(time.perf_counter() - t0)
    return {k: min(v[1:]) for k, v in out.items()}


def cupy_host_round_trip(cp: Any, nbytes: int, repeats: int) -> list[float]:
    x = cp.ones(nbytes // 4, dtype=cp.float32)
    out = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        y = cp.asarray(cp.asnumpy(x))
        cp.cuda.get_current_stream().synchronize()
        out.append(time.perf_counter() - t0)
    del x, y
    return out[1:]


# ----------------------------------------------------------------------------- GT side
def _cluster(n: int, config: dict | None = None) -> Any:
    import gt  # noqa: PLC0415
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    cl = LocalCluster(workers=n, start_timeout=120)
    gt.connect(cl.address, timeout=600)
    if config is not None:
        gt.load_config(config)
    return cl


def gt_matmul(n: int, dtype: str, k: int, repeats: int) -> list[float]:
    """Seconds per product on one CuPy worker (K pipelined products + one scalar fetch)."""
    import gt  # noqa: PLC0415

    cl = _cluster(1)
    try:
        gt.manual_seed(0)
        a, b = gt.randn(n, n, dtype=dtype), gt.randn(n, n, dtype=dtype)
        a[0, 0].float().item()
        samples = []
        for i in range(repeats + WARMUP):
            t0 = time.perf_counter()
            for _ in range(k):
                c = a @ b
            c[0, 0].float().item()  # the fetch waits for the device: every product is done
            if i >= WARMUP:
                samples.append((time.perf_counter() - t0) / k)
            del c
        return samples
    finally:
        gt.disconnect()
        cl.stop()


def gt_tiny_ops(n_ops: int) -> float:
    import gt  # noqa: PLC0415

    cl = _cluster(1)
    try:
        x = gt.zeros(4)
        for _ in range(100):
            x = x + 1
        x.numpy()
        t0 = time.perf_counter()
        for _ in range(n_ops):
            x = x + 1
        got = x.numpy()
        rate = n_ops / (time.perf_counter() - t0)
        if got[0] != 100 + n_ops:
            raise RuntimeError(f"tiny ops computed {got[0]}, not {100 + n_ops}")
        return rate
    finally:
        gt.disconnect()
        cl.stop()


def gt_sharded_matmul(n_workers: int, size: int, repeats: int) -> list[float]:
    import gt  # noqa: PLC0415

    cl = _cluster(n_workers, ROWS)
    try:
        gt.manual_seed(0)
        with gt.signal.context("data"):
            a = gt.randn(size, size)
        with gt.signal.context("params"):
            b = gt.randn(size, size)
        (a.sum() + b.sum()).item()
        samples = []
        for i in range(repeats + WARMUP):
            t0 = time.perf_counter()
            with gt.signal.context("data"):
                c = a @ b
            c.sum().item()
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
            del c
        return samples
    finally:
        gt.disconnect()
        cl.stop()


def gt_transfers(nbytes: int, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds per upload (``gt.tensor`` + a one-element fetch) and per fetch (``.numpy()``) of
    ``nbytes`` float32 on one CuPy worker."""
    import gt  # noqa: PLC0415

    cl = _cluster(1)
    host = np.ones(nbytes // 4, np.float32)
    ups, downs = [], []
    try:
        for i in range(repeats + WARMUP):
            t0 = time.perf_counter()
            x = gt.tensor(host)
            x[0].item()  # the upload has reached the device
            t1 = time.perf_counter()
            got = x.numpy()
            t2 = time.perf_counter()
            if got.shape != host.shape or got[-1] != 1:
                raise RuntimeError("a fetch returned other bytes than were uploaded")
            del x, got
            if i >= WARMUP:
                ups.append(t1 - t0)
                downs.append(t2 - t1)
        return ups, downs
    finally:
        gt.disconnect()
        cl.stop()


def _fused_launches(address: str) -> int:
    """The chains the cluster's workers ran as one kernel (their next stats report, <= 2 s)."""
    from gt.runtime.control import request  # noqa: PLC0415

    deadline, seen = time.monotonic() + 3.0, 0
    while time.monotonic() < deadline:
        seen = sum((w.get("stats") or {}).get("hot_fused", 0)
                   for w in request(address, "stats")["workers"])  # fmt: skip
        if seen:
            break
        time.sleep(0.2)
    return seen


def gt_hot_sgd(n: int, params: int, steps: int, repeats: int) -> tuple[list[float], Any, int]:
    """Seconds per captured SGD-momentum step (``steps`` replays, then a sync that waits for
    the device), the first parameter's values after them, and the chains run fused."""
    import gt  # noqa: PLC0415

    cl = _cluster(1)
    try:
        gt.manual_seed(0)
        ps = [gt.randn(n, n) for _ in range(params)]
        bufs = [gt.zeros(n, n) for _ in range(params)]
        gs = [gt.randn(n, n) * 0.01 for _ in range(params)]

        @gt.hot
        def update(lr):
            for p, b, g in zip(ps, bufs, gs):
                b.mul_(0.9).add_(g)
                p.add_(b, alpha=-lr)

        for _ in range(4):  # captured at the second call; the rest replay
            update(0.01)
        gt.sync()
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                update(0.01)
            gt.sync()
            samples.append((time.perf_counter() - t0) / steps)
        fusing = os.environ.get("GT_FUSED_CHAINS") != "0"
        return samples, ps[0].numpy(), _fused_launches(cl.address) if fusing else 0
    finally:
        gt.disconnect()
        cl.stop()


def _staging(mode: str) -> Any:
    """Set ``GT_PINNED_STAGING`` for the workers started next (returns the previous value)."""
    old = os.environ.get("GT_PINNED_STAGING")
    os.environ["GT_PINNED_STAGING"] = mode
    return old


def gt_allreduce_step(nbytes: int, repeats: int) -> tuple[list[float], Any]:
    """Wall seconds of a 2-worker step whose use of a partial sum needs its all-reduce, and the
    step's result (end to end: NCCL's time is on the GPUs' streams, not in exec events)."""
    from bench_sharding import _cluster  # noqa: PLC0415

    import gt  # noqa: PLC0415

    cl = _cluster(2)
    try:
        gt.load_config(ROWS)
        gt.manual_seed(0)
        with gt.signal.context("data"):
            x = gt.randn(2, nbytes // 4)  # one row per worker
        samples, got = [], None
        for i in range(repeats + WARMUP):
            part = x.sum(0)  # a partial sum on each worker
            gt.sync()
            t0 = time.perf_counter()
            got = part.relu()[:1].numpy()  # relu needs the whole sum: the all-reduce
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
        return samples, got
    finally:
        gt.disconnect()
        cl.stop()


def gt_allreduce(nbytes: int, repeats: int) -> list[float]:
    """Seconds per 2-worker ring all-reduce, from the workers' exec events (bench_sharding's
    method; ``GT_NCCL=0``, since on two GPUs NCCL would take it, whose time is on the streams and
    which pinned staging does not concern)."""
    from bench_sharding import bench_allreduce  # noqa: PLC0415

    old = os.environ.get("GT_NCCL")
    os.environ["GT_NCCL"] = "0"
    try:
        return bench_allreduce(nbytes, repeats)
    finally:
        _restore("GT_NCCL", old)


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    names = ("matmul", "tiny", "sharded", "allreduce", "transfers", "hot")
    ap.add_argument("--only", choices=names, action="append", help="run only these (repeatable)")
    # a dry run of this script on the CuPy test double (scripts/gpu_check.sh --dry-run)
    ap.add_argument("--test-double", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cp, why = use_test_double() if args.test_double else find_gpu()
    if cp is None:
        print(f"bench_gpu: skipped, no usable GPU ({why})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": why}, f)
        return 0
    os.environ["GT_BACKEND"] = "cupy"
    only = set(args.only or names)
    r = max(1, args.repeats)
    info = machine_info()
    info["gpu"] = why
    print_machine(info)
    results: list[Result] = []
    extra: dict[str, Any] = {}

    if "matmul" in only:
        sizes = ((128,) if args.test_double else (1024,)) if args.quick else (4096, 8192)
        dtypes = ["float32", "float16"] + (["bfloat16"] if bf16_dtype(cp) is not None else [])
        if "bfloat16" not in dtypes:
            print("  (bfloat16 skipped: this CuPy does not compute in it)")
        for n in sizes:
            for dt in dtypes:
                # about 50 ms of products per sample (rough peaks: 50 TFLOP/s f32, 500 half)
                peak = 5e13 if dt == "float32" else 5e14
                k = 10 if args.quick else max(2, round(0.05 * peak / (2 * n**3)))
                ref_dt = bf16_dtype(cp) if dt == "bfloat16" else getattr(cp, dt)
                wall, event = cupy_matmul(cp, n, ref_dt, k, r)
                mine = gt_matmul(n, dt, k, r)
                flops = 2 * n**3 / best(mine)
                judged = n == 4096 and dt == "float32"  # the target; others reported
                res = Result(f"matmul {n} {dt}", "s", best(mine), best(wall),
                             1.05 if judged else float("inf"), False,
                             f"per product, vs CuPy direct timed alike; CuPy event time "
                             f"{best(event) * 1e3:.3f} ms; GT {flops / 1e12:.1f} TFLOP/s",
                             {"gt": mine, "ref": wall, "ref_event": event})  # fmt: skip
                extra[res.name] = {"gt_over_event": best(mine) / best(event)}
                results.append(res)
                print_result_line(res)
                print(f"    CuPy event-timed: {best(event) * 1e3:.3f} ms/product; "
                      f"GT / event time: {best(mine) / best(event):.3f}x")  # fmt: skip

    if "tiny" in only:
        n_ops = 2000 if args.quick else 20_000
        ref = cupy_tiny_ops(cp, n_ops)
        mine = gt_tiny_ops(n_ops)
        results.append(Result("tiny ops (x = x + 1)", "ops/s", mine, ref, 0.0, True,
                              "reported: GT instruction rate vs CuPy's own launch rate",
                              {"gt": [mine], "ref": [ref]}))  # fmt: skip
        print_result_line(results[-1])

    if "sharded" in only:
        size = (256 if args.test_double else 1024) if args.quick else 4096
        one, two = gt_sharded_matmul(1, size, r), gt_sharded_matmul(2, size, r)
        results.append(Result(f"sharded matmul {size} x2", "x", best(one) / best(two), 1.0, 0.0,
                              True, "reported: 1-worker time / 2-worker time (one GPU shared)",
                              {"gt": two, "ref": one}))  # fmt: skip
        print_result_line(results[-1])

    if "allreduce" in only:
        nbytes = (8 if args.quick else 64) * MIB
        ar = gt_allreduce(nbytes, r)
        raw = cupy_host_round_trip(cp, nbytes, r)
        results.append(Result(f"all-reduce {nbytes // MIB}MiB x2", "B/s", nbytes / best(ar),
                              nbytes / best(raw), 0.0, True,
                              "reported: ring all-reduce vs a CuPy host round trip of the bytes",
                              {"gt": ar, "ref": raw}))  # fmt: skip
        print_result_line(results[-1])
        old = _staging("0")
        try:
            plain = gt_allreduce(nbytes, r)
        finally:
            _restore("GT_PINNED_STAGING", old)
        results.append(Result(f"all-reduce {nbytes // MIB}MiB x2 staging", "x",
                              best(plain) / best(ar), 1.0, 0.0, True,
                              "reported: pinned staging's speed-up (time unstaged / staged)",
                              {"gt": ar, "ref": plain}))  # fmt: skip
        print_result_line(results[-1])
        if cp.cuda.runtime.getDeviceCount() >= 2:
            nccl, by_nccl = gt_allreduce_step(nbytes, r)
            old = os.environ.get("GT_NCCL")
            os.environ["GT_NCCL"] = "0"
            try:
                ring, by_ring = gt_allreduce_step(nbytes, r)
            finally:
                _restore("GT_NCCL", old)
            same = bool((by_nccl == by_ring).all())
            results.append(Result(f"all-reduce {nbytes // MIB}MiB x2 nccl", "x",
                                  best(ring) / best(nccl), 1.0, 0.0, same,
                                  "reported: a step needing the all-reduce, time with GT_NCCL=0 "
                                  f"/ with NCCL (results {'equal' if same else 'DIFFER'})",
                                  {"gt": nccl, "ref": ring}))  # fmt: skip
            print_result_line(results[-1])
        else:
            print(
                "all-reduce over NCCL: skipped, one GPU (two workers cannot be NCCL ranks on one)"
            )

    if "transfers" in only:
        nbytes = (8 if args.quick else 64) * MIB
        ref = cupy_copies(cp, nbytes, r)
        print("    CuPy direct: " + ", ".join(f"{k} {nbytes / v / 1e9:.2f} GB/s"
                                            for k, v in ref.items()))  # fmt: skip
        extra["cupy copies GB/s"] = {k: nbytes / v / 1e9 for k, v in ref.items()}
        old = _staging("all")
        try:
            ups, downs = gt_transfers(nbytes, r)
            _staging("0")
            ups0, downs0 = gt_transfers(nbytes, r)
        finally:
            _restore("GT_PINNED_STAGING", old)
        for what, on, off, cupy_ref in (("upload", ups, ups0, ref["h2d pageable"]),
                                        ("fetch", downs, downs0, ref["d2h pageable"])):  # fmt: skip
            results.append(Result(f"{what} {nbytes // MIB}MiB staging", "x", best(off) / best(on),
                                  1.0, 0.0, True,
                                  f"reported: time unstaged / staged; GT staged "
                                  f"{nbytes / best(on) / 1e9:.2f} GB/s, unstaged "
                                  f"{nbytes / best(off) / 1e9:.2f} GB/s, CuPy pageable "
                                  f"{nbytes / cupy_ref / 1e9:.2f} GB/s",
                                  {"gt": on, "ref": off}))  # fmt: skip
            print_result_line(results[-1])

    if "hot" in only:
        n = (256 if args.test_double else 512) if args.quick else 2048
        fused, p_fused, launched = gt_hot_sgd(n, 8, 20, r)
        old = os.environ.get("GT_FUSED_CHAINS")
        os.environ["GT_FUSED_CHAINS"] = "0"
        try:
            steps, p_steps, _ = gt_hot_sgd(n, 8, 20, r)
        finally:
            _restore("GT_FUSED_CHAINS", old)
        same = p_fused.tobytes() == p_steps.tobytes()
        # (a kernel that would not compile leaves the steps to run: then nothing was compared)
        ok = same and launched > 0
        results.append(Result(f"hot sgd {n}x{n} x8 fused", "x", best(steps) / best(fused), 1.0,
                              0.0, ok,
                              f"reported: step time with three kernels a parameter / fused "
                              f"({best(steps) * 1e3:.3f} vs {best(fused) * 1e3:.3f} ms); "
                              f"{launched} fused launches; same bits: {same}",
                              {"gt": fused, "ref": steps}))  # fmt: skip
        print_result_line(results[-1])

    print()
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": [x.as_dict() for x in results],
                       "extra": extra}, f, indent=1)  # fmt: skip
    return 0 if all(x.passed for x in results) else 1


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
