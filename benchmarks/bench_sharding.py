"""Sharding benchmarks: the same GT program on 2 workers against 1 worker, measured in one run.

Run ``python benchmarks/bench_sharding.py [--quick] [--json FILE]``. Every worker runs with
``OPENBLAS_NUM_THREADS=1`` (set before any cluster starts), so 2 workers can use 2 cores.

1. ``matmul 4096 rows x2``: ``c = a @ b`` for 4096x4096 float32 matrices, ``a`` row-sharded and
   ``b`` replicated over 2 workers (``shard: {axis: 0}`` / ``replicate``), against the same
   program on a 1-worker cluster. Inputs are placed before timing; best of N; target >= 1.6x.
2. ``mlp step h4096 x2``: one training step of a 2-layer MLP (4096 -> 4096 -> 4096, batch 512,
   ReLU, mean squared error, SGD) with the batch row-sharded and the weights replicated (data
   parallel: the weight gradients are all-reduced), against 1 worker. Target >= 1.6x.
3. ``all-reduce 64MiB x2``: the ``all_reduce`` instruction on 2 workers (ring: reduce-scatter then
   all-gather), 64 MiB per worker, timed from the workers' own ``exec`` events (from when both
   started it to when both finished), as bandwidth ``64 MiB / time``; against a raw zero-copy
   ZeroMQ transfer of 64 MiB between two processes (DEALER -> DEALER over TCP loopback, ``copy=False``
   both ways, timed until the receiver's 1-byte ack). Target >= 0.7x.

Every process started here is stopped on exit, error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from common import (
    Children,
    OtherLoad,
    Result,
    best,
    bind_random,
    child_guard,
    format_table,
    machine_info,
    parent_alive,
    print_machine,
    print_result_line,
    set_blas_threads,
)

MIB = 1 << 20
WARMUP = 2  # untimed runs first: BLAS buffers, and memory the workers then keep and reuse
ROWS = {"data": {"shard": {"axis": 0}}, "params": {"replicate": {}}}


# ----------------------------------------------------------------------------- GT side
def _cluster(n: int) -> Any:
    import gt  # noqa: PLC0415 - after the BLAS variables are set
    from gt.runtime.control import request  # noqa: PLC0415
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    cl = LocalCluster(workers=n)
    deadline = time.monotonic() + 60
    while sum(w["alive"] for w in request(cl.address, "stats")["workers"]) < n:
        if time.monotonic() > deadline:
            cl.stop()
            raise RuntimeError(f"{n} workers did not register within 60s")
        time.sleep(0.05)
    gt.connect(cl.address, timeout=600)
    gt.load_config(ROWS)
    return cl


def bench_matmul(n_workers: int, size: int, repeats: int) -> list[float]:
    """Seconds per ``a @ b`` (size x size) with ``a`` row-sharded over ``n_workers``."""
    import gt  # noqa: PLC0415

    cl = _cluster(n_workers)
    try:
        gt.manual_seed(0)
        with gt.signal.context("data"):
            a = gt.randn(size, size)
        with gt.signal.context("params"):
            b = gt.randn(size, size)
        gt.sync()
        samples = []
        for i in range(repeats + WARMUP):
            t0 = time.perf_counter()
            with gt.signal.context("data"):
                c = a @ b
            gt.sync()
            if i >= WARMUP:  # the first runs warm up BLAS and the memory the workers reuse
                samples.append(time.perf_counter() - t0)
            del c
        return samples
    finally:
        gt.disconnect()
        cl.stop()


def bench_mlp(n_workers: int, hidden: int, batch: int, repeats: int) -> list[float]:
    """Seconds per data-parallel training step of a 2-layer MLP."""
    import gt  # noqa: PLC0415

    cl = _cluster(n_workers)
    try:
        gt.manual_seed(0)
        with gt.signal.context("data"):
            x = gt.randn(batch, hidden)
            t = gt.randn(batch, hidden)
        with gt.signal.context("params"):
            w1 = (gt.randn(hidden, hidden) * hidden**-0.5).requires_grad_()
            w2 = (gt.randn(hidden, hidden) * hidden**-0.5).requires_grad_()
        opt = gt.optim.SGD([w1, w2], lr=0.01)
        samples = []
        for i in range(repeats + WARMUP):
            t0 = time.perf_counter()
            with gt.signal.context("data"):
                y = (x @ w1).relu() @ w2
                loss = ((y - t) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            gt.sync()
            if i >= WARMUP:
                samples.append(time.perf_counter() - t0)
        return samples
    finally:
        gt.disconnect()
        cl.stop()


def bench_allreduce(nbytes: int, repeats: int) -> list[float]:
    """Seconds per 2-worker all-reduce of ``nbytes``, from the workers' exec events."""
    import zmq  # noqa: PLC0415

    import gt  # noqa: PLC0415
    from gt.runtime import ops as O  # noqa: PLC0415
    from gt.trace import events as E  # noqa: PLC0415

    cl = _cluster(2)
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(cl.endpoints["events"])
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    time.sleep(0.3)  # let the subscription reach the bus
    code = O.OPCODE["all_reduce"]
    spans: list[tuple[str, int, int]] = []
    try:
        n = nbytes // 4
        with gt.signal.context("data"):
            x = gt.randn(2, n)  # one row per worker
        for _ in range(repeats + 1):
            part = x.sum(0)  # a partial sum on each worker: 64 MiB each
            gt.sync()
            (part + 0.0).numpy()[:1]  # combining it needs the all-reduce
        gt.sync()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(spans) < 2 * (repeats + 1):
            if not sub.poll(200):
                continue
            _topic, data = sub.recv_multipart()
            source, _seq, events = E.unpack_batch(data)
            for kind, _t, f in events:
                if kind == E.EXEC and code in f.get("ops", ()) and f.get("durs"):
                    i = f["ops"].index(code)
                    start = f["t0"] + sum(f["durs"][:i])
                    spans.append((source, start, start + f["durs"][i]))
    finally:
        sub.close()
        gt.disconnect()
        cl.stop()
    by_worker: dict[str, list[tuple[int, int]]] = {}
    for source, a, b in spans:
        by_worker.setdefault(source, []).append((a, b))
    runs = list(zip(*by_worker.values()))[1:]  # drop the warm-up
    if not runs or len(by_worker) != 2:
        raise RuntimeError(f"saw {len(spans)} all_reduce exec events from {sorted(by_worker)}")
    return [(max(b for _, b in r) - max(a for a, _ in r)) / 1e9 for r in runs]


# ----------------------------------------------------------------------------- raw ZeroMQ reference
def _receiver_main(conn: Any, stop: Any, ppid: int, nbytes: int) -> None:
    import zmq  # noqa: PLC0415

    with child_guard(conn):
        ctx = zmq.Context()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        conn.send(bind_random(s))
        while not stop.is_set() and parent_alive(ppid):
            if s.poll(200):
                frame = s.recv(copy=False)
                assert len(frame.buffer) == nbytes
                s.send(b"k")
        ctx.destroy(0)


def _sender_main(conn: Any, stop: Any, ppid: int, endpoint: str, nbytes: int, repeats: int) -> None:
    import numpy as np  # noqa: PLC0415
    import zmq  # noqa: PLC0415

    with child_guard(conn):
        ctx = zmq.Context()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(endpoint)
        buf = np.ones(nbytes // 4, dtype=np.float32)
        times = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            s.send(memoryview(buf).cast("B"), copy=False)
            if not s.poll(30_000):
                raise RuntimeError("the receiver did not answer")
            s.recv()
            times.append(time.perf_counter() - t0)
        conn.send(times[1:])
        while not stop.is_set() and parent_alive(ppid):
            time.sleep(0.05)
        ctx.destroy(0)


def raw_transfer(nbytes: int, repeats: int) -> list[float]:
    """Seconds per zero-copy ZeroMQ transfer of ``nbytes`` between two processes."""
    with Children() as kids:
        ep = kids.start(_receiver_main, nbytes)
        return kids.start(_sender_main, ep, nbytes, repeats)  # its first message: the times


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="smaller sizes, fewer repeats (a smoke run)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--only", choices=("matmul", "mlp", "allreduce"), action="append",
                    help="run only these benchmarks (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    only = set(args.only or ("matmul", "mlp", "allreduce"))
    set_blas_threads(1)
    size, hidden, batch, ar_bytes = (4096, 4096, 512, 64 * MIB)
    if args.quick:
        size, hidden, batch, ar_bytes = (1024, 1024, 256, 8 * MIB)
    r = max(1, args.repeats)
    print_machine(machine_info())
    load = OtherLoad()
    load.start()
    results = []

    if "matmul" in only:
        mm1, mm2 = bench_matmul(1, size, r), bench_matmul(2, size, r)
        res = Result(f"matmul {size} rows x2", "s", best(mm2), best(mm1), 1.6, False,
                     "1 worker / 2 workers time (ratio shown as speed-up)", {"gt": mm2, "ref": mm1})  # fmt: skip
        results.append(_speedup(res))
        print_result_line(results[-1])

    if "mlp" in only:
        st1, st2 = bench_mlp(1, hidden, batch, r), bench_mlp(2, hidden, batch, r)
        res = Result(f"mlp step h{hidden} x2", "s", best(st2), best(st1), 1.6, False,
                     "data-parallel step, 1 worker / 2 workers", {"gt": st2, "ref": st1})  # fmt: skip
        results.append(_speedup(res))
        print_result_line(results[-1])

    if "allreduce" in only:
        results.append(_allreduce(ar_bytes, r))
        print_result_line(results[-1])
    share = load.share()
    print()
    print(format_table(results))
    if share is not None:
        print(f"\nother programs used {share * 100:.0f}% of the machine's CPU during the run")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([x.as_dict() for x in results], f, indent=1)
    return 0 if all(x.passed for x in results) else 1


def _allreduce(ar_bytes: int, r: int) -> Result:
    ar = bench_allreduce(ar_bytes, r)
    raw = raw_transfer(ar_bytes, r)
    return (
        Result(
            f"all-reduce {ar_bytes // MIB}MiB x2",
            "B/s",
            ar_bytes / best(ar),
            ar_bytes / best(raw),
            0.7,
            True,
            "ring all-reduce bandwidth vs a raw zero-copy ZeroMQ transfer",
            {"gt": [ar_bytes / s for s in ar], "ref": [ar_bytes / s for s in raw]},
        )  # fmt: skip
    )


def _speedup(res: Result) -> Result:
    """Turn a (2-worker time, 1-worker time) result into a speed-up judged >= target."""
    return Result(res.name, "x", res.ref / res.gt, 1.0, res.target, True, res.note, res.samples)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
