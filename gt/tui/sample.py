"""A deterministic sample trace: what snapshot tests, screenshots and docs are drawn from.

Three workers (a GPU with device counters, a CPU worker whose device counters are all N/A, and
one that died), two clients, per-instruction exec spans, peer transfers and waits for them, memory
samples, a mark, a config change, an error with its source line, and one lost batch. Timestamps are fixed, so the
same call always returns the same events.
"""

from __future__ import annotations

import random

from gt.runtime import ops as O
from gt.trace import events as E

MS = 1_000_000
S = 1_000_000_000
T_END = 12 * S  # the sample's "now"

_ADD, _MUL, _EXP, _RELU, _MATMUL, _SUM, _TRANSPOSE = (
    O.OPCODE[name] for name in ("add", "mul", "exp", "relu", "matmul", "sum", "transpose")
)


def sample_batches(seed: int = 7) -> list[tuple[str, int, list]]:
    """The sample as ``(source, first_seq, events)`` batches in time order."""
    rng = random.Random(seed)
    pending: list[tuple[str, list, int]] = []

    def put(source: str, events: list, skip: int = 0) -> None:
        pending.append((source, events, skip))

    ev = E.event
    put("dispatcher", [
        ev(E.WORKER_JOINED, 10 * MS, worker=0, host="gpu-node-1", pid=4101, device="cuda:0", backend="cupy"),
        ev(E.WORKER_JOINED, 12 * MS, worker=1, host="gpu-node-1", pid=4102, device="cpu", backend="numpy"),
        ev(E.WORKER_JOINED, 14 * MS, worker=2, host="gpu-node-2", pid=5230, device="cuda:1", backend="cupy"),
        ev(E.CLIENT_JOINED, 200 * MS, client=1, home=0, host="laptop", pid=9001,
           argv=["train.py", "--epochs", "3"]),
        ev(E.CLIENT_JOINED, 400 * MS, client=2, home=1, host="laptop", pid=9002, argv=["eval.py"]),
    ])  # fmt: skip
    put("client:1", [ev(E.SRCLOC, 210 * MS, client=1,
                        locs={1: "train.py:41", 2: "train.py:42", 3: "train.py:57"})])  # fmt: skip

    pattern = [_MATMUL, _ADD, _RELU, _MATMUL, _ADD, _EXP, _SUM, _MUL, _TRANSPOSE]
    batch_no = {0: 0, 1: 0, 2: 0}
    for wid, start, stop, busy in ((0, 300 * MS, T_END, 0.7), (1, 500 * MS, T_END, 0.35),
                                   (2, 300 * MS, 7 * S, 0.5)):  # fmt: skip
        t = start
        src = f"worker:{wid}"
        client = 1 if wid != 1 else 2
        while t < stop - 5 * MS:
            n = rng.randint(6, 14)
            ops = [pattern[(i + batch_no[wid]) % len(pattern)] for i in range(n)]
            durs = [(rng.randint(2, 9) if o == _MATMUL else rng.randint(1, 3)) * 100_000 * (1 + wid % 2)
                    for o in ops]  # fmt: skip
            t0, t1 = t, t + sum(durs)
            if t1 + 4 * MS > stop:  # leave room for a transfer: nothing after the sample's "now"
                break
            events = []
            if wid == 0 and batch_no[0] % 6 == 1:
                # the batch starts by waiting for worker 2's shard: a wait, on the comm lane
                w1 = t0 + rng.randint(4, 12) * 100_000
                events.append(ev(E.TRANSFER, t0, worker=0, peer=2, bytes=0, t0=t0, t1=w1,
                                 direction="wait", what="shard", client=1, batch=batch_no[0]))  # fmt: skip
                t1 += w1 - t0
            events.append(ev(E.EXEC, t0, worker=wid, client=client, batch=batch_no[wid], t0=t0, t1=t1,
                             n=n, ops=ops, outs=list(range(n)), srcs=[1 + i % 3 for i in range(n)],
                             durs=durs, hot=batch_no[wid] % 5 == 4, queue=rng.randint(0, 4), errors=0))  # fmt: skip
            if wid == 0 and batch_no[0] % 6 == 3:
                x0 = t1 + 200_000
                x1 = x0 + rng.randint(10, 30) * 100_000
                events.append(ev(E.TRANSFER, x0, worker=0, peer=2, bytes=rng.randint(1, 8) << 20, t0=x0,
                                 t1=x1, direction="send", what="shard", client=1, batch=batch_no[0]))  # fmt: skip
                t1 = x1
            if batch_no[wid] % 4 == 0:
                used = (300 + 40 * wid + rng.randint(0, 60) + (t0 // S) * 25) << 20
                events.append(ev(E.MEMORY, t1, worker=wid, used=used, reserved=used + (128 << 20),
                                 limit=(2 << 30) if wid != 1 else None, spilled=0 if wid != 2 else 64 << 20,
                                 tensors=100 + batch_no[wid] % 50))  # fmt: skip
            if batch_no[wid] % 20 == 0:
                events.append(ev(E.DEVICE, t1, worker=wid, **_device(wid, rng)))
            # worker 1 lost one batch of events once: a visible gap in its sequence
            put(src, events, skip=1 if (wid == 1 and batch_no[1] == 40) else 0)
            batch_no[wid] += 1
            t = t1 + int(sum(durs) * (1 - busy) / busy)

    for i, t in enumerate(range(300 * MS, T_END, 250 * MS)):
        put(
            "client:1",
            [
                ev(
                    E.QUEUED,
                    t,
                    client=1,
                    batch=i,
                    n=120,
                    ops={_MATMUL: 40, _ADD: 80},
                    first_id=i * 120,
                )
            ],
        )
        if i % 2 == 0:
            put("client:2", [ev(E.QUEUED, t + MS, client=2, batch=i // 2, n=60, ops={_ADD: 60},
                                first_id=i * 60)])  # fmt: skip
    put("client:1", [ev(E.MARK, 4 * S, client=1, label="epoch 1")])
    put("dispatcher", [ev(E.CONFIG, 5 * S, before={}, after={"layer1": {"shard": {"axis": 0, "workers": [0, 2]}}},
                          by="gt top")])  # fmt: skip
    put("worker:2", [ev(E.ERROR, 6_500 * MS, client=1, worker=2, message="out of memory allocating 1.5 GiB",
                        op="matmul", source=3)])  # fmt: skip
    put("dispatcher", [ev(E.WORKER_LEFT, 7_200 * MS, worker=2, reason="sent no heartbeat for 3s")])
    put("client:1", [ev(E.MARK, 9 * S, client=1, label="epoch 2")])
    pending.sort(key=lambda b: b[1][0][1])
    out: list[tuple[str, int, list]] = []
    seqs: dict[str, int] = {}
    for source, events, skip in pending:  # sequence numbers follow time order per source
        first = seqs.get(source, 0) + skip
        out.append((source, first, events))
        seqs[source] = first + len(events)
    return out


def _device(wid: int, rng: random.Random) -> dict:
    if wid == 1:  # a CPU worker: NVML has nothing to say
        return dict(util=None, mem_used=None, mem_total=None, temp=None, power=None, pcie_tx=None,
                    pcie_rx=None, name=None)  # fmt: skip
    return dict(util=float(rng.randint(55, 95)), mem_used=(20 + wid) << 30, mem_total=141 << 30,
                temp=float(rng.randint(48, 66)), power=float(rng.randint(240, 480)), pcie_tx=None,
                pcie_rx=None, name="NVIDIA H200")  # fmt: skip


def sample_events(seed: int = 7) -> list[list]:
    """The sample's events in time order, without batch boundaries."""
    return [e for _s, _q, events in sample_batches(seed) for e in events]
