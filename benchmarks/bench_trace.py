"""Trace benchmarks: recording, reading, seeking and exporting ``.gtrace`` files.

Run ``python benchmarks/bench_trace.py [--events N] [--quick] [--no-bus]``. It prints:

1. ``write``: a synthetic trace of N events (default 1,000,000: ``exec`` events with 8-instruction
   columns from 4 workers, plus memory samples, 64 events per bus batch) written with
   :class:`~gt.trace.recorder.Recorder` from packed batches; events/s.
2. ``full read``: open the trace and iterate every event.
3. ``seek``: open, ``seek()`` to the middle, read the keyframe, fold the catch-up and read 1,000
   events at or after the target; and ``events(t_start=middle)`` for 1,000 events. Each as a share
   of the full read (target: < 5%). The same again on a copy without an index (scanned at open).
4. ``export``: Chrome trace JSON of the whole trace; events read per second, JSON events written.
5. ``bus``: a publisher process sends batches through a real ZeroMQ PUB socket to
   :func:`~gt.trace.recorder.record_from_bus` (SUB, tcp on 127.0.0.1), paced at several rates
   and then unpaced; events/s recorded and events lost (counted from sequence gaps).

Every process started here is stopped on exit, and every wait has a timeout.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from gt.trace import events as E
from gt.trace.export import export_chrome
from gt.trace.reader import Reader
from gt.trace.recorder import TRAILER, Recorder, record_from_bus

BATCH = 64
WORKERS = 4
OP_NAMES = [f"op_{i}" for i in range(64)]


def exec_event(w: int, i: int, t: int) -> list:
    """One worker ``exec`` event with 8-instruction columns, running from ``t`` for 32 us."""
    durs = [4000] * 8
    return E.event(
        E.EXEC,
        t,
        worker=w,
        client=1 + i % 3,
        batch=i,
        t0=t,
        t1=t + 32_000,
        n=8,
        ops=[(i + k) % 40 for k in range(8)],
        outs=list(range(i * 8, i * 8 + 8)),
        srcs=[1] * 8,
        durs=durs,
        hot=i % 5 == 0,
        queue=1,
        errors=0,
    )


def synthetic_packed(n_events: int, t0: int = 10**12) -> list[bytes]:
    """``n_events`` events as packed bus batches: per worker one exec every 40 us."""
    out, seqs, made = [], [0] * WORKERS, 0
    i = 0
    while made < n_events:
        w = i % WORKERS
        k = min(BATCH, n_events - made)
        base = t0 + (i // WORKERS) * BATCH * 40_000
        evs = []
        for j in range(k):
            t = base + j * 40_000
            if j % 16 == 15:
                evs.append(
                    E.event(
                        E.MEMORY,
                        t,
                        worker=w,
                        used=j * 1000,
                        reserved=10**8,
                        limit=10**9,
                        spilled=0,
                        tensors=j,
                    )
                )
            else:
                evs.append(exec_event(w, i * BATCH + j, t))
        out.append(E.pack_batch(f"worker:{w}", seqs[w], evs))
        seqs[w] += k
        made += k
        i += 1
    return out


def timed(fn, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_files(n_events: int, tmp: Path) -> None:
    packed = synthetic_packed(n_events)
    path = tmp / "bench.gtrace"
    t = time.perf_counter()
    with Recorder(
        path, op_names=OP_NAMES, workers=[{"id": w, "device": f"cpu:{w}"} for w in range(WORKERS)]
    ) as rec:
        for data in packed:
            rec.write_packed(data)
    dt = time.perf_counter() - t
    size = path.stat().st_size
    print(
        f"write        {n_events:,} events in {dt:.2f} s = {n_events / dt:,.0f} events/s "
        f"({size / 2**20:.1f} MiB, {rec.stats['keyframes']} keyframes)"
    )
    data = path.read_bytes()
    offset, _ = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    unclean = tmp / "unclean.gtrace"
    unclean.write_bytes(data[:offset])
    del data, packed

    for label, p in (("indexed", path), ("no index", unclean)):

        def full(p=p):
            with Reader(p) as r:
                for _ in r.events():
                    pass

        with Reader(p) as r:
            info = r.info()
        mid = (info["t_first"] + info["t_last"]) // 2

        def seek(p=p, mid=mid):
            with Reader(p) as r:
                s = r.seek(mid)
                n = 0
                for ev in s.events:  # fold the catch-up, then take 1,000 events at or after mid
                    if ev.t_ns >= mid:
                        n += 1
                        if n == 1000:
                            break

        def window(p=p, mid=mid):
            with Reader(p) as r:
                for n, _ in enumerate(r.events(t_start=mid)):
                    if n == 999:
                        break

        t_full = timed(full, 3)
        t_seek = timed(seek, 5)
        t_win = timed(window, 5)
        print(
            f"read ({label:8}) full {t_full:.3f} s ({n_events / t_full:,.0f} events/s) · "
            f"seek+catch-up {t_seek * 1000:.1f} ms = {100 * t_seek / t_full:.2f}% · "
            f"events(t_start) {t_win * 1000:.1f} ms = {100 * t_win / t_full:.2f}%  (target < 5%)"
        )

    out = tmp / "bench.json"
    counts = export_chrome(path, out)
    written = counts["slices"] + counts["flows"] * 2 + counts["counters"] + counts["instants"]
    print(
        f"export       {counts['events_in']:,} events in {counts['seconds']:.2f} s = "
        f"{counts['events_in'] / counts['seconds']:,.0f} events/s read, "
        f"{written / counts['seconds']:,.0f} JSON events/s written ({out.stat().st_size / 2**20:.0f} MiB)"
    )
    with Reader(path) as r:
        span = r.info()["duration_ns"]
    win = export_chrome(path, tmp / "window.json", window=(span * 45 // 100, span * 55 // 100))
    print(
        f"export 10%   window in the middle ({span * 0.1 / 1e9:.2f} s): {win['seconds']:.2f} s "
        f"({win['slices']:,} slices) = {100 * win['seconds'] / counts['seconds']:.1f}% of the full export"
    )


# -- bus ---------------------------------------------------------------------------------------


def _publisher(port_q, ctl, n_events: int, rate: float | None) -> None:
    """Child process: PUB on a random port; probes until told to go, then the batches, then 'end'."""
    import zmq

    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 100_000)
    port_q.send(pub.bind_to_random_port("tcp://127.0.0.1"))
    probe = 0

    def send_probe(label: str) -> None:
        nonlocal probe
        pub.send_multipart(
            [E.TOPIC, E.pack_batch("probe", probe, [E.event(E.MARK, probe, label=label)])]
        )
        probe += 1

    deadline = time.monotonic() + 20
    while not ctl.poll(0.01):
        if time.monotonic() > deadline:
            return
        send_probe("probe")
    ctl.recv()
    t_start = time.perf_counter()
    sent = seq = 0
    t = 10**12
    while sent < n_events:
        evs = [exec_event(0, seq + j, t + j * 1000) for j in range(BATCH)]
        try:
            pub.send_multipart([E.TOPIC, E.pack_batch("worker:0", seq, evs)], zmq.NOBLOCK)
        except zmq.Again:
            pass  # the recorder sees the gap
        seq += BATCH
        sent += BATCH
        t += BATCH * 1000
        if rate:
            ahead = sent / rate - (time.perf_counter() - t_start)
            if ahead > 0:
                time.sleep(ahead)
    deadline = time.monotonic() + 20
    while not ctl.poll(0.01) and time.monotonic() < deadline:
        send_probe("end")
    pub.close(0)
    ctx.term()


def bench_bus(n_events: int, rate: float | None, tmp: Path) -> None:
    mpctx = mp.get_context("spawn")
    port_r, port_w = mpctx.Pipe(duplex=False)
    ctl_parent, ctl_child = mpctx.Pipe()
    proc = mpctx.Process(target=_publisher, args=(port_w, ctl_child, n_events, rate), daemon=True)
    proc.start()
    stop = threading.Event()
    marks: dict[str, float] = {}

    def on_batch(source, first_seq, events):
        now = time.perf_counter()
        if source == "worker:0":
            marks.setdefault("first", now)
            marks["last"] = now
        elif source == "probe":
            label = events[-1][2]["label"]
            if label == "probe" and "go" not in marks:
                marks["go"] = now
                ctl_parent.send("go")
            elif label == "end":
                stop.set()

    try:
        if not port_r.poll(30):
            raise RuntimeError("publisher did not start")
        port = port_r.recv()
        stats = record_from_bus(
            f"tcp://127.0.0.1:{port}",
            tmp / "bus.gtrace",
            duration=120,
            stop_event=stop,
            on_batch=on_batch,
        )
        ctl_parent.send("stop")
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    got = stats["sources"].get("worker:0", [0, 0])
    recorded = stats["counts"].get(E.EXEC, 0)  # the probes are marks
    lost = stats["drops"].get("worker:0", 0)
    span = marks.get("last", 0) - marks.get("first", 0)
    label = f"{rate:,.0f}/s" if rate else "unpaced"
    print(
        f"bus {label:>11}: recorded {recorded:,} of {got[1] - got[0]:,} events in {span:.2f} s = "
        f"{recorded / span if span else 0:,.0f} events/s, lost {lost:,}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100,000 events")
    ap.add_argument("--no-bus", action="store_true", help="skip the ZeroMQ recorder benchmark")
    args = ap.parse_args()
    n = 100_000 if args.quick else args.events
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="gt-bench-trace-") as d:
        tmp = Path(d)
        bench_files(n, tmp)
        if not args.no_bus:
            bus_n = min(n, 500_000)
            for rate in (50_000, 100_000, 200_000, None):
                bench_bus(bus_n if rate is None else min(bus_n, int(rate * 2)), rate, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
