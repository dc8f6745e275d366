"""Replay seek latency: how long ``gt replay`` takes to show any time of a long trace.

Run ``python benchmarks/bench_replay_seek.py [--events N] [--seeks K]``. It writes a synthetic
trace of N events (default 1,000,000; the event mix of ``bench_trace.py``: 4 workers, 8-instruction
``exec`` batches, memory samples, a mark every 50,000 events) twice -- with model keyframes
(:class:`~gt.trace.keyframes.ModelKeyframer`, what ``gt record`` writes) and with the recorder's
compact keyframes -- then for each:

* ``open``: :class:`~gt.tui.replay.ReplaySource` construction (reads keyframes and moments);
* ``seek``: K seeks to random times (forwards and backwards), each ``seek()`` plus the
  ``snapshot()`` the screen draws: p50, p95 and max in ms;
* ``from start``: the same state folded from the beginning (what a replay without keyframes does).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_trace import OP_NAMES, WORKERS, synthetic_packed  # noqa: E402

from gt.trace import events as E  # noqa: E402
from gt.trace.keyframes import ModelKeyframer  # noqa: E402
from gt.trace.model import ClusterModel  # noqa: E402
from gt.trace.reader import Reader  # noqa: E402
from gt.trace.recorder import Recorder  # noqa: E402
from gt.tui.replay import ReplaySource  # noqa: E402


def write(path: Path, packed: list[bytes], model: bool, every: int = 20_000) -> dict:
    """Write the trace as ``gt record`` does (fold after write), with model or compact keyframes."""
    kf = ModelKeyframer(OP_NAMES) if model else None
    workers = [{"id": w, "device": f"cpu:{w}"} for w in range(WORKERS)]
    with Recorder(
        path, op_names=OP_NAMES, workers=workers, keyframe_fn=kf, keyframe_every_events=every
    ) as rec:
        for i, data in enumerate(packed):
            batch = rec.write_packed(data)
            if kf is not None:
                kf.on_batch(*batch)
            if i % 800 == 400:
                mark = [E.event(E.MARK, batch[2][-1][1], client=1, label=f"m{i}")]
                rec.write_batch("client:1", i // 800, mark)
                if kf is not None:
                    kf.on_batch("client:1", i // 800, mark)
        return rec.stats


def bench(path: Path, seeks: int, rng: random.Random) -> dict:
    t = time.perf_counter()
    src = ReplaySource.from_file(path, wall=lambda: 0.0)
    t_open = time.perf_counter() - t
    c = src.clock
    lat = []
    for _ in range(seeks):
        target = rng.randint(c.t_start, c.t_end)
        gc.collect()
        t = time.perf_counter()
        src.seek(target)
        src.snapshot()
        lat.append(time.perf_counter() - t)
    src.stop()
    lat.sort()
    return {"open": t_open, "p50": statistics.median(lat), "p95": lat[int(0.95 * (len(lat) - 1))],
            "max": lat[-1], "restores": src.restores}  # fmt: skip


def from_start(path: Path) -> float:
    t = time.perf_counter()
    with Reader(path) as r:
        m = ClusterModel(OP_NAMES, count_gaps=False)
        for b in r.batches():
            m.apply_batch(b.source, b.first_seq, b.events)
        m.state()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seeks", type=int, default=40)
    args = ap.parse_args(argv)
    packed = synthetic_packed(args.events)
    with tempfile.TemporaryDirectory() as tmp:
        for model in (True, False):
            path = Path(tmp) / ("model.gtrace" if model else "compact.gtrace")
            t = time.perf_counter()
            st = write(path, packed, model)
            dt = time.perf_counter() - t
            label = "model keyframes  " if model else "compact keyframes"
            print(f"{label} write {st['events']:,} events in {dt:.1f} s, {st['bytes'] / 2**20:.0f} MiB, "
                  f"{st['keyframes']} keyframes")  # fmt: skip
            r = bench(path, args.seeks, random.Random(1))
            print(f"{label} open {r['open'] * 1000:.0f} ms · seek+snapshot p50 {r['p50'] * 1000:.0f} ms, "
                  f"p95 {r['p95'] * 1000:.0f} ms, max {r['max'] * 1000:.0f} ms over {args.seeks} random seeks")  # fmt: skip
        print(f"from start (no keyframes): {from_start(path):.2f} s to the end of the trace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
