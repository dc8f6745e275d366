"""Runtime benchmarks: GT against hand-written references measured in the same run.

Run ``python benchmarks/bench_runtime.py [--quick]``. Each benchmark prints GT's number, the
reference's number, their ratio and the target ratio, and PASS or FAIL:

1. ``pipelined-add``: ``x = gt.zeros(4)``, N times ``x = x + 1``, one ``x.numpy()``; instructions/s.
   Reference: a 3-hop ZeroMQ chain (client DEALER -> forwarder ROUTER/DEALER -> worker DEALER).
   The forwarder msgpack-decodes every message, namespaces the tensor ids and re-encodes it; the
   worker decodes it and runs the ``+1`` on a 4-element NumPy array. One message per instruction,
   all fired at once (ZeroMQ's high-water marks give backpressure), then one fetch. Target >= 1.0x.
2. ``sync-roundtrip``: ``(x + 1).numpy()`` repeated; median seconds per call against one
   request/reply through the same chain (add + fetch in one message, the 16-byte result back
   through the forwarder: four hops). Target <= 1.0x (issue 14's; it was <= 1.3x while GT took
   three hops). ``2b``: the chain's client sends straight to its worker, which answers straight
   back: two hops, as GT's direct batches. Target <= 1.0x.
3. ``upload+fetch 64MiB``: ``gt.from_numpy(a).numpy()`` of a 64 MiB float32 array, bandwidth
   ``2 * 64 MiB / time``, best of N, against a zero-copy ZeroMQ echo of the same array between two
   processes (``copy=False`` on every send and receive). Target >= 0.8x.
4. ``matmul 1000x1000 x20``: 20 pipelined ``c = a @ b`` then ``gt.sync()``, best of N, against
   the same 20 matmuls in a NumPy process with the same BLAS thread count (set before either side
   imports NumPy; GT's one worker inherits it). Target <= 1.05x.

GT runs on a private local cluster with one worker (``LocalCluster(workers=1)``). Every process
started here is stopped on exit, error or Ctrl-C, and every receive has a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import zmq
from common import (
    BLAS_INFO_VARS,
    BLAS_VARS,
    Children,
    OtherLoad,
    Result,
    best,
    bind_random,
    child_guard,
    format_markdown,
    format_table,
    machine_info,
    median,
    parent_alive,
    print_machine,
    print_result_line,
    process_env,
    set_blas_threads,
    usable_cores,
    wait_for_idle,
)

import gt
from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.launch import LocalCluster

# The reference chain speaks GT's instruction layout ([opcode, out, args, attrs, src]) and opcodes.
OP_FULL = O.OPCODE["full"]
OP_ADD = O.OPCODE["add"]
OP_FETCH = O.OPCODE["fetch"]
ID_SHIFT = 40  # the forwarder namespaces tensor ids as (client_no << 40) | id
RECV_TIMEOUT_MS = 30_000  # no receive in the parent waits longer than this
POLL_MS = 100  # child loops wake at least this often to check for stop / a dead parent
MiB = 1 << 20
MATMUL_SEED = 4  # both sides of benchmark 4 multiply the same random matrices


@dataclass(frozen=True)
class Config:
    """Sizes and repeat counts of one run (``--quick`` shrinks them)."""

    adds: int = 100_000  # benchmark 1: instructions per measurement
    add_reps: int = 7
    roundtrips: int = 100  # benchmark 2: round trips per round (short rounds, many of them,
    roundtrip_rounds: int = 30  # alternating, so both sides see the same background load)
    upload_mib: int = 64  # benchmark 3
    upload_reps: int = 9
    matmul_n: int = 1000  # benchmark 4
    matmuls: int = 20
    matmul_reps: int = 7


QUICK = Config(
    adds=30_000, add_reps=3, roundtrips=100, roundtrip_rounds=8, upload_reps=3, matmul_reps=3
)


# =========================================================================================
# Reference processes (run in spawned children; module-level so ``spawn`` can import them)
# =========================================================================================
def _socket(ctx: zmq.Context, kind: int) -> zmq.Socket:
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    return s


def forwarder_main(conn: Any, stop: Any, parent_pid: int) -> None:
    """The reference chain's middle hop: ROUTER (clients) <-> DEALER (worker).

    Requests are ``[[instr, ...], [free_id, ...]]``; each is decoded, its tensor ids are namespaced
    per client and it is re-encoded as ``[client_no, instrs, frees]`` for the worker. Replies
    ``[client_no, req, dtype, shape] + data`` are decoded and routed back to the client's identity.
    """
    with child_guard(conn):
        ctx = zmq.Context()
        front = _socket(ctx, zmq.ROUTER)
        back = _socket(ctx, zmq.DEALER)
        back.setsockopt(zmq.SNDTIMEO, 1000)
        conn.send((bind_random(front), bind_random(back)))
        packb, unpackb = msgpack.packb, msgpack.unpackb
        cno_of: dict[bytes, int] = {}
        ident_of: dict[int, bytes] = {}
        poller = zmq.Poller()
        poller.register(front, zmq.POLLIN)
        poller.register(back, zmq.POLLIN)
        try:
            while not stop.is_set() and parent_alive(parent_pid):
                events = dict(poller.poll(POLL_MS))
                if front in events:
                    for _ in range(256):
                        try:
                            ident, body = front.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        cno = cno_of.get(ident)
                        if cno is None:
                            cno = cno_of[ident] = len(cno_of) + 1
                            ident_of[cno] = ident
                        ns = cno << ID_SHIFT
                        instrs, frees = unpackb(body)
                        for ins in instrs:
                            if ins[0] != OP_FETCH:
                                ins[1] |= ns
                            ins[2] = [a | ns if type(a) is int else a for a in ins[2]]
                        try:
                            back.send(packb([cno, instrs, [f | ns for f in frees]]))
                        except zmq.Again:
                            pass  # the worker is gone; the parent times out and reports it
                if back in events:
                    for _ in range(256):
                        try:
                            hdr, data = back.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        cno, req, dtype, shape = unpackb(hdr)
                        front.send_multipart([ident_of[cno], packb([req, dtype, shape]), data])
        finally:
            ctx.destroy(linger=0)


def chain_worker_main(conn: Any, stop: Any, parent_pid: int, back: str) -> None:
    """The reference chain's last hop: executes ``full``/``add``/``fetch`` on NumPy arrays.

    Requests come from the forwarder, and replies go back through it (four hops a round trip);
    or they come straight from a client on the worker's own ROUTER, and are answered there (two
    hops, as GT's direct batches), with a table per client as GT's worker keeps.
    """
    with child_guard(conn):
        ctx = zmq.Context()
        sock = _socket(ctx, zmq.DEALER)
        sock.setsockopt(zmq.SNDTIMEO, 1000)
        sock.connect(back)
        direct = _socket(ctx, zmq.ROUTER)
        direct.setsockopt(zmq.SNDTIMEO, 1000)
        conn.send(bind_random(direct))
        packb, unpackb = msgpack.packb, msgpack.unpackb
        tables: dict[Any, dict[int, np.ndarray]] = {}
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(direct, zmq.POLLIN)
        try:
            while not stop.is_set() and parent_alive(parent_pid):
                events = dict(poller.poll(POLL_MS))
                for s in (sock, direct):
                    if s not in events:
                        continue
                    for _ in range(256):
                        try:
                            if s is sock:
                                cno, instrs, frees = unpackb(s.recv(zmq.NOBLOCK))
                            else:
                                cno, body = s.recv_multipart(zmq.NOBLOCK)
                                instrs, frees = unpackb(body)
                        except zmq.Again:
                            break
                        tbl = tables.setdefault(cno, {})
                        for code, out, args, attrs, _src in instrs:
                            if code == OP_ADD:
                                tbl[out] = tbl[args[0]] + args[1]
                            elif code == OP_FETCH:
                                a = tbl[args[0]]
                                if s is direct:
                                    hdr = packb([out, a.dtype.name, list(a.shape)])
                                    direct.send_multipart([cno, hdr, a.tobytes()])
                                else:
                                    hdr = packb([cno, out, a.dtype.name, list(a.shape)])
                                    sock.send_multipart([hdr, a.tobytes()])
                            elif code == OP_FULL:
                                tbl[out] = np.full(attrs["shape"], args[0], dtype=attrs["dtype"])
                        for f in frees:
                            tbl.pop(f, None)
        finally:
            ctx.destroy(linger=0)


def echo_main(conn: Any, stop: Any, parent_pid: int) -> None:
    """Benchmark 3's reference peer: receive a message with ``copy=False`` and send it back."""
    with child_guard(conn):
        ctx = zmq.Context()
        sock = _socket(ctx, zmq.DEALER)
        sock.setsockopt(zmq.SNDTIMEO, 5000)
        conn.send(bind_random(sock))
        try:
            while not stop.is_set() and parent_alive(parent_pid):
                if sock.poll(POLL_MS):
                    frames = sock.recv_multipart(copy=False)
                    sock.send_multipart(frames, copy=False)
        finally:
            ctx.destroy(linger=0)


def numpy_matmul_main(conn: Any, stop: Any, parent_pid: int, n: int, count: int, seed: int) -> None:
    """Benchmark 4's reference: a NumPy process that times ``count`` matmuls per request.

    NumPy is imported by the spawned interpreter after the parent set the BLAS variables, so its
    thread pool has the same size as the GT worker's. Reports its BLAS environment when ready, then
    answers every ``"run"`` from the parent with the seconds one measurement took.
    """
    with child_guard(conn):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        for _ in range(2):  # warm up: BLAS thread pool, page faults
            c = a @ b
        conn.send({k: os.environ.get(k) for k in BLAS_VARS + BLAS_INFO_VARS})
        while not stop.is_set() and parent_alive(parent_pid):
            if not conn.poll(POLL_MS / 1000):
                continue
            try:
                if conn.recv() != "run":
                    break
            except EOFError:  # the parent is gone
                break
            t0 = time.perf_counter()
            for _ in range(count):
                c = a @ b
            dt = time.perf_counter() - t0
            conn.send((dt, float(c[0, 0])))


# =========================================================================================
# Parent-side reference clients
# =========================================================================================
class ChainClient:
    """The parent's DEALER into the reference chain, speaking the chain's message format.

    With ``direct`` (the chain worker's ROUTER) it also holds a DEALER there, and round trips can
    go straight to the worker and back (``roundtrips(..., direct=True)``): two hops, as GT's.
    """

    def __init__(self, ctx: zmq.Context, front: str, direct: str | None = None):
        self.sock = _socket(ctx, zmq.DEALER)
        self.sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        self.sock.setsockopt(zmq.SNDTIMEO, RECV_TIMEOUT_MS)
        self.sock.connect(front)
        self.next_id = 1
        self.direct = None
        if direct is not None:
            self.direct = _socket(ctx, zmq.DEALER)
            self.direct.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
            self.direct.setsockopt(zmq.SNDTIMEO, RECV_TIMEOUT_MS)
            self.direct.connect(direct)

    def new_id(self) -> int:
        """A fresh client-side id."""
        self.next_id += 1
        return self.next_id

    def _send(self, instrs: list, frees: list, direct: bool) -> None:
        (self.direct if direct else self.sock).send(msgpack.packb([instrs, frees]))

    def zeros4(self, direct: bool = False) -> int:
        """Create a 4-element float32 zeros array on the chain worker; returns its id."""
        tid = self.new_id()
        self._send([[OP_FULL, tid, [0.0], {"shape": [4], "dtype": "float32"}, 1]], [], direct)
        return tid

    def fetch(self, tid: int, direct: bool = False) -> np.ndarray:
        """Fetch tensor ``tid`` (a full round trip)."""
        self._send([[OP_FETCH, self.new_id(), [tid], None, 1]], [], direct)
        return self.recv_array(direct)

    def recv_array(self, direct: bool = False) -> np.ndarray:
        """Receive one fetch reply (raises ``zmq.Again`` after ``RECV_TIMEOUT_MS``)."""
        hdr, data = (self.direct if direct else self.sock).recv_multipart()
        _req, dtype, shape = msgpack.unpackb(hdr)
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def pipelined_adds(self, n: int, batch: int = 1) -> float:
        """``x = zeros(4)``; ``n`` times ``x = x + 1``, ``batch`` instructions (and their frees)
        per message; fetch. Returns seconds."""
        x = self.zeros4()
        self.fetch(x)  # the chain is idle and x exists before the clock starts
        send, packb, new_id = self.sock.send, msgpack.packb, self.new_id
        t0 = time.perf_counter()
        instrs: list = []
        frees: list = []
        for _ in range(n):
            out = new_id()
            instrs.append([OP_ADD, out, [x, 1.0], None, 1])
            frees.append(x)
            x = out
            if len(instrs) >= batch:
                send(packb([instrs, frees]))
                instrs, frees = [], []
        if instrs:
            send(packb([instrs, frees]))
        result = self.fetch(x)
        dt = time.perf_counter() - t0
        check_value(result, float(n), "reference chain")
        return dt

    def roundtrips(self, n: int, direct: bool = False) -> list[float]:
        """``n`` synchronous ``(x + 1)`` + fetch round trips; returns seconds per round trip.
        ``direct``: straight to the chain worker and back (two hops, as GT's direct batches)."""
        x = self.zeros4(direct)
        self.fetch(x, direct)
        sock = self.direct if direct else self.sock
        packb, new_id = msgpack.packb, self.new_id
        times = []
        prev: list[int] = []
        for _ in range(n):
            t0 = time.perf_counter()
            out = new_id()
            ins = [[OP_ADD, out, [x, 1.0], None, 1], [OP_FETCH, new_id(), [out], None, 1]]
            sock.send(packb([ins, prev]))
            y = self.recv_array(direct)
            times.append(time.perf_counter() - t0)
            prev = [out]
        check_value(y, 1.0, "reference chain")
        return times

    def close(self) -> None:
        """Close the sockets."""
        self.sock.close(0)
        if self.direct is not None:
            self.direct.close(0)


def check_value(arr: np.ndarray, expect: float, who: str) -> None:
    """Fail loudly when a benchmark computed the wrong thing."""
    if arr.shape != (4,) or not np.all(arr == expect):
        raise AssertionError(f"{who} computed {arr!r}, expected four times {expect}")


# =========================================================================================
# Benchmarks
# =========================================================================================
def _alternate(
    n: int, first: Callable[[], None], second: Callable[[], None], settle: float = 0.05
) -> None:
    """Run ``first`` and ``second`` ``n`` times each, alternating, with a pause between any two.

    The pause lets the previous side go idle: OpenBLAS threads, for one, keep spinning for about
    0.1 s after a BLAS call returns and would steal the CPU from the side measured next (on a
    2-core machine that alone made whichever side ran second ~30% slower).
    """
    for _ in range(n):
        for fn in (first, second):
            time.sleep(settle)
            fn()


def gt_pipelined_adds(n: int) -> float:
    """GT side of benchmark 1: seconds for ``n`` pipelined ``x = x + 1`` and one fetch."""
    x = gt.zeros(4)
    x.numpy()  # x exists and everything before is done before the clock starts
    gt.sync()
    t0 = time.perf_counter()
    for _ in range(n):
        x = x + 1
    result = x.numpy()
    dt = time.perf_counter() - t0
    check_value(result, float(n), "gt")
    return dt


def gt_roundtrips(n: int) -> list[float]:
    """GT side of benchmark 2: seconds per ``(x + 1).numpy()``."""
    x = gt.zeros(4)
    x.numpy()
    gt.sync()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        y = (x + 1).numpy()
        times.append(time.perf_counter() - t0)
    check_value(y, 1.0, "gt")
    return times


def bench_pipelined(cfg: Config) -> Result:
    """Benchmark 1: pipelined tiny ops, instructions per second."""
    return _bench_pipelined(cfg, 1)


def bench_pipelined_batched(cfg: Config) -> Result:
    """Benchmark 1b: pipelined tiny ops against the chain sending GT's batch size per message."""
    return _bench_pipelined(cfg, BATCH)


def _bench_pipelined(cfg: Config, batch: int) -> Result:
    n = cfg.adds
    gt_rates: list[float] = []
    ref_rates: list[float] = []
    with Children() as kids:
        front, back = kids.start(forwarder_main, name="ref-forwarder")
        kids.start(chain_worker_main, back, name="ref-worker")
        ctx = zmq.Context()
        client = ChainClient(ctx, front)
        try:
            client.pipelined_adds(min(n, 10_000), batch)  # warm up both sides
            gt_pipelined_adds(min(n, 10_000))
            _alternate(
                cfg.add_reps,
                lambda: gt_rates.append(n / gt_pipelined_adds(n)),
                lambda: ref_rates.append(n / client.pipelined_adds(n, batch)),
            )
        finally:
            client.close()
            ctx.destroy(linger=0)
    how = ("one msgpack message per instruction" if batch == 1 else
           f"{batch} instructions per msgpack message (GT's batch size)")  # fmt: skip
    return Result(
        name="1 pipelined x=x+1" if batch == 1 else "1b pipelined, batched ref",
        unit="op/s",
        gt=max(gt_rates),
        ref=max(ref_rates),
        target=1.0,
        higher_is_better=True,
        note=f"{n} adds + 1 fetch, best of {cfg.add_reps}; reference: 3-hop ZeroMQ chain, "
        f"{how}, decoded/rewritten/re-encoded by the forwarder",
        samples={"gt": gt_rates, "ref": ref_rates},
    )


def bench_roundtrip(cfg: Config) -> Result:
    """Benchmark 2: synchronous tiny op + fetch against the chain replying through the forwarder
    (four hops; GT takes two once its batches go straight to the worker)."""
    return _bench_roundtrip(cfg, direct=False)


def bench_roundtrip_same_hops(cfg: Config) -> Result:
    """Benchmark 2b: the same, straight to the chain's worker and back (two hops, as GT's)."""
    return _bench_roundtrip(cfg, direct=True)


def _bench_roundtrip(cfg: Config, direct: bool) -> Result:
    n = cfg.roundtrips
    gt_times: list[float] = []
    ref_times: list[float] = []
    gt_medians: list[float] = []
    ref_medians: list[float] = []

    def run_gt() -> None:
        t = gt_roundtrips(n)
        gt_times.extend(t)
        gt_medians.append(median(t))

    with Children() as kids:
        front, back = kids.start(forwarder_main, name="ref-forwarder")
        worker_direct = kids.start(chain_worker_main, back, name="ref-worker")
        ctx = zmq.Context()
        client = ChainClient(ctx, front, worker_direct if direct else None)

        def run_ref() -> None:
            t = client.roundtrips(n, direct)
            ref_times.extend(t)
            ref_medians.append(median(t))

        try:
            client.roundtrips(200, direct)  # warm up
            gt_roundtrips(200)
            _alternate(cfg.roundtrip_rounds, run_gt, run_ref, settle=0.01)
        finally:
            client.close()
            ctx.destroy(linger=0)
    how = ("straight to the worker and back (2 hops, as GT)" if direct else
           "reply back through the forwarder (4 hops; GT takes 2)")  # fmt: skip
    return Result(
        name="2b sync, same hops" if direct else "2 sync (x+1).numpy()",
        unit="s",
        gt=median(gt_times),
        ref=median(ref_times),
        target=1.0,
        higher_is_better=False,
        note=f"median of {cfg.roundtrip_rounds}x{n} round trips (means: gt "
        f"{sum(gt_times) / len(gt_times) * 1e6:.0f} us, reference "
        f"{sum(ref_times) / len(ref_times) * 1e6:.0f} us); reference: add+fetch in one message "
        f"through the same chain, {how}",
        samples={"gt": gt_medians, "ref": ref_medians},
    )


def bench_upload_fetch(cfg: Config) -> Result:
    """Benchmark 3: 64 MiB upload + fetch bandwidth against a zero-copy ZeroMQ echo."""
    nbytes = cfg.upload_mib * MiB
    arr = np.random.default_rng(3).standard_normal(nbytes // 4, dtype=np.float32)
    gt_bw: list[float] = []
    ref_bw: list[float] = []

    def run_gt() -> None:
        t0 = time.perf_counter()
        t = gt.from_numpy(arr)
        out = t.numpy()
        dt = time.perf_counter() - t0
        if out.nbytes != nbytes:
            raise AssertionError(f"gt returned {out.nbytes} bytes, expected {nbytes}")
        gt_bw.append(2 * nbytes / dt)

    with Children() as kids:
        endpoint = kids.start(echo_main, name="ref-echo")
        ctx = zmq.Context()
        sock = _socket(ctx, zmq.DEALER)
        sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        sock.setsockopt(zmq.SNDTIMEO, RECV_TIMEOUT_MS)
        sock.connect(endpoint)

        def echo() -> np.ndarray:
            sock.send(arr, copy=False)
            frame = sock.recv(copy=False)
            return np.frombuffer(frame.buffer, dtype=np.float32)

        def run_ref() -> None:
            t0 = time.perf_counter()
            out = echo()
            dt = time.perf_counter() - t0
            if out.nbytes != nbytes:
                raise AssertionError(f"echo returned {out.nbytes} bytes, expected {nbytes}")
            ref_bw.append(2 * nbytes / dt)

        try:
            if not np.array_equal(echo(), arr):  # warm up and check both once
                raise AssertionError("the echo reference corrupted the array")
            if not np.array_equal(gt.from_numpy(arr).numpy(), arr):
                raise AssertionError("gt upload+fetch corrupted the array")
            _alternate(cfg.upload_reps, run_gt, run_ref)
        finally:
            sock.close(0)
            ctx.destroy(linger=0)
    return Result(
        name=f"3 upload+fetch {cfg.upload_mib}MiB",
        unit="B/s",
        gt=max(gt_bw),
        ref=max(ref_bw),
        target=0.8,
        higher_is_better=True,
        note=f"2 x {cfg.upload_mib} MiB / time, best of {cfg.upload_reps}; reference: ZeroMQ echo "
        "between two processes over ipc (the transport of GT's local cluster), copy=False on both ends",
        samples={"gt": gt_bw, "ref": ref_bw},
    )


def bench_matmul(cfg: Config, blas_threads: int) -> Result:
    """Benchmark 4: 20 pipelined float32 matmuls against NumPy with the same BLAS threads."""
    n, count = cfg.matmul_n, cfg.matmuls
    rng = np.random.default_rng(MATMUL_SEED)
    a = gt.from_numpy(rng.standard_normal((n, n), dtype=np.float32))
    b = gt.from_numpy(rng.standard_normal((n, n), dtype=np.float32))
    gt_times: list[float] = []
    ref_times: list[float] = []

    def run_gt() -> None:
        gt.sync()
        t0 = time.perf_counter()
        for _ in range(count):
            c = a @ b
        gt.sync()
        gt_times.append(time.perf_counter() - t0)
        del c

    with Children(start_timeout=60) as kids:
        ref_env = kids.start(numpy_matmul_main, n, count, MATMUL_SEED, name="ref-numpy")
        for var in BLAS_VARS:
            if ref_env.get(var) != str(blas_threads):
                raise RuntimeError(f"reference process has {var}={ref_env.get(var)}")

        ref_c00: list[float] = []

        def run_ref() -> None:
            kids.send(0, "run")
            dt, c00 = kids.recv(0, timeout=120)
            ref_times.append(dt)
            ref_c00.append(c00)

        for _ in range(2):  # warm up the worker's BLAS pool
            c = a @ b
        gt.sync()
        del c
        _alternate(cfg.matmul_reps, run_gt, run_ref, settle=0.5)
    gt_c00 = float((a @ b).numpy()[0, 0])  # both sides multiplied the same matrices
    if not np.isclose(gt_c00, ref_c00[-1], rtol=1e-4, atol=1e-3):
        raise AssertionError(f"gt's (a @ b)[0, 0] = {gt_c00}, NumPy's = {ref_c00[-1]}")
    return Result(
        name=f"4 matmul {n}x{n} x{count}",
        unit="s",
        gt=best(gt_times),
        ref=best(ref_times),
        target=1.05,
        higher_is_better=False,
        note=f"{count} pipelined matmuls + gt.sync(), best of {cfg.matmul_reps}; reference: NumPy "
        f"in one process; BLAS threads = {blas_threads} on both sides",
        samples={"gt": gt_times, "ref": ref_times},
    )


# =========================================================================================
# Driver
# =========================================================================================
BENCHMARKS = ("pipelined", "roundtrip", "upload", "matmul", "pipelined_batched", "roundtrip_hops")
#: The stronger references, by number: 1b next to 1, 2b next to 2.
ALIASES = {"1b": "pipelined_batched", "2b": "roundtrip_hops"}
ORDER = ("pipelined", "pipelined_batched", "roundtrip", "roundtrip_hops", "upload", "matmul")
#: Instructions per message of the batched reference: GT's own batch size.
BATCH = 512


def worker_blas_env(cluster: LocalCluster) -> list[dict[str, str]]:
    """The BLAS variables each GT worker of ``cluster`` actually runs with (from /proc)."""
    ctx = zmq.Context()
    sock = _socket(ctx, zmq.DEALER)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    try:
        sock.connect(cluster.endpoints["control"])
        sock.send(P.encode(P.Control("stats")))
        reply = P.parse(sock.recv())
    finally:
        sock.close(0)
        ctx.term()
    envs = []
    for w in reply.payload["workers"]:
        env = process_env(w["pid"])
        envs.append(
            {"pid": str(w["pid"]), **{k: env.get(k, "-") for k in BLAS_VARS + BLAS_INFO_VARS}}
        )
    return envs


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes and fewer repeats (~10 s on a quiet machine)",
    )
    p.add_argument(
        "--only",
        default=",".join(BENCHMARKS),
        help=f"comma-separated subset of {', '.join(BENCHMARKS)} (or their numbers 1-4, and 1b "
        "and 2b for the stronger references of 1 and 2)",
    )
    p.add_argument(
        "--blas-threads",
        type=int,
        default=usable_cores(),
        help="BLAS threads for the GT worker and the NumPy reference (default: usable cores)",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="S",
        help="first wait up to S seconds for the machine to be <10%% busy (shared machines)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    p.add_argument("--strict", action="store_true", help="exit with status 1 if a benchmark fails")
    return p.parse_args(argv)


def select(only: str) -> list[str]:
    """Resolve ``--only`` to benchmark names."""
    chosen = []
    for item in only.split(","):
        item = item.strip()
        if not item:
            continue
        name = ALIASES.get(item) or (BENCHMARKS[int(item) - 1] if item.isdigit() else item)
        if name not in BENCHMARKS:
            raise SystemExit(f"unknown benchmark {item!r}; choose from {', '.join(BENCHMARKS)}")
        chosen.append(name)
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks and print one line each, then a summary table."""
    args = parse_args(argv)
    cfg = QUICK if args.quick else Config()
    chosen = select(args.only)
    # Before any worker or reference process starts: they read these when NumPy loads.
    set_blas_threads(args.blas_threads)
    os.environ.setdefault("GT_TIMEOUT", "60")  # a stuck sync point raises instead of hanging

    if args.wait_idle > 0:
        busy = wait_for_idle(args.wait_idle)
        if busy is not None:
            print(f"machine {busy * 100:.0f}% busy before the run")
    started = time.perf_counter()
    load = OtherLoad()
    load.start()
    print(f"GT runtime benchmarks ({'quick' if args.quick else 'full'}), {time.strftime('%c')}")
    print_machine(machine_info())
    results: list[Result] = []
    cluster = LocalCluster(workers=1)
    try:
        gt.connect(cluster.address, timeout=60)
        for env in worker_blas_env(cluster):
            wrong = [k for k in BLAS_VARS if env.get(k) != str(args.blas_threads)]
            if wrong:
                print(
                    f"  WARNING: the gt worker does not run with {args.blas_threads} BLAS threads"
                )
            print(
                f"  gt worker pid {env.pop('pid')}: " + " ".join(f"{k}={v}" for k, v in env.items())
            )
        print(flush=True)
        runners: dict[str, Callable[[], Result]] = {
            "pipelined": lambda: bench_pipelined(cfg),
            "pipelined_batched": lambda: bench_pipelined_batched(cfg),
            "roundtrip": lambda: bench_roundtrip(cfg),
            "roundtrip_hops": lambda: bench_roundtrip_same_hops(cfg),
            "upload": lambda: bench_upload_fetch(cfg),
            "matmul": lambda: bench_matmul(cfg, args.blas_threads),
        }
        for name in sorted(chosen, key=ORDER.index):
            r = runners[name]()
            print_result_line(r)
            results.append(r)
    finally:
        gt.disconnect()
        cluster.stop()

    print()
    print(format_table(results))
    print()
    for r in results:
        print(f"  {r.name}: {r.note}")
    if args.markdown:
        print()
        print(format_markdown(results))
    elapsed = time.perf_counter() - started
    others = load.share()
    print(f"\n{sum(r.passed for r in results)}/{len(results)} passed in {elapsed:.1f} s")
    if others is not None:
        print(
            f"other programs used {others * 100:.0f}% of the machine's CPU time during the run"
            + (" (a noisy run: ratios may be off)" if others > 0.05 else "")
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "machine": machine_info(),
                    "quick": args.quick,
                    "other_cpu_share": others,
                    "results": [r.as_dict() for r in results],
                },
                f,
                indent=2,
            )
    if args.strict and not all(r.passed for r in results):
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted; every process this run started has been stopped", file=sys.stderr)
        sys.exit(130)
