"""What a worker reports about itself (a mixin of :class:`gt.runtime.worker.loop.Worker`, whose
state it uses): a batch's ``exec`` event and its errors, spill traffic on the timeline, and the
counters of its periodic ``Stats`` (with the memory event beside them)."""

from __future__ import annotations

from typing import Any

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.worker.batch import BatchResult
from gt.trace import events as E


class Reporting:
    """Events and stats of a worker (see the module docstring)."""

    events: Any
    wid: int
    sched: Any
    peers: Any
    executor: Any
    memory: Any
    direct: Any
    sock: Any
    bad_messages: int
    pending_uploads: dict
    client_bytes: int = 0  # to and from clients, since the worker started (peers count theirs)
    _expire_unclaimed: Any  # (the worker's: drops uploads nobody claimed)

    def _emit_exec(self, run: P.Run, res: BatchResult) -> None:
        ev = self.events
        off = ev.offset
        try:
            ops = [i[P.I_OP] for i in res.instrs]
            outs = [i[P.I_OUT] for i in res.instrs]
            srcs = [i[P.I_SRC] for i in res.instrs]
        except (TypeError, IndexError, KeyError):
            ops, outs, srcs = [], [], []
        ev.emit(E.EXEC, {"worker": self.wid, "client": run.client, "batch": run.seq,
                         "t0": res.t0 + off, "t1": res.t1 + off, "n": len(res.instrs), "ops": ops,
                         "outs": outs, "srcs": srcs, "durs": res.durs, "hot": res.hot, "queue": self.sched.count() - 1,
                         "errors": len(res.fresh_errors), "more": not res.done},
                res.t0 + off)  # fmt: skip
        for msg, opcode, src in res.fresh_errors[:8]:
            ev.emit(E.ERROR, {"client": run.client, "worker": self.wid, "message": msg,
                              "op": O.op_name(opcode), "source": src})  # fmt: skip

    def client_transfer(self, direction: str, t0: int, t1: int, nbytes: int, cno: int) -> None:
        """Bytes from a client (an upload taken, ``"from_client"``) or to one (a fetch's reply,
        ``"to_client"``): communication on the timeline, counted in the bytes moved. (The memory
        pool's traffic, which has no peer either, is published through here too.)"""
        if direction in ("to_client", "from_client"):
            self.client_bytes += nbytes
        ev = self.events
        if ev.enabled:
            off = ev.offset
            ev.emit(E.TRANSFER, {"worker": self.wid, "peer": None, "bytes": nbytes, "t0": t0 + off,
                                 "t1": t1 + off, "direction": direction, "what": "",
                                 "client": cno, "batch": self.peers.batch}, t0 + off)  # fmt: skip

    def _pool_transfer(self, direction: str, t0: int, t1: int, nbytes: int, cno: int) -> None:
        """Spill traffic: on the timeline, and (spills and reads on demand) a wait of the batch."""
        if direction != "prefetch":
            self.peers.waited_ns += t1 - t0  # not charged to the op that was running
        self.client_transfer(direction, t0, t1, nbytes, cno)

    def stats(self, memory: dict | None = None) -> dict:
        """Plain-data counters: tensors and bytes held, batches and instructions run."""
        ex = self.executor
        mem = memory if memory is not None else self.memory.report()
        spilled = mem.get("clients_spilled") or {}
        return {
            "tensors": mem["tensors"],
            "bytes": mem["used"],
            "reserved": mem["reserved"],
            "limit": mem["limit"],
            "spilled": mem["spilled"],
            "memory": {
                k: mem.get(k)
                for k in (
                    "cached",
                    "client_limit",
                    "peak",
                    "spill_out",
                    "spill_in",
                    "prefetched",
                    "prefetch_hits",
                    "oom",
                    "spill_reused",
                )
            },
            "memory_clients": {  # (a client whose tensors are all spilled is listed too)
                c: [mem["clients"].get(c, 0), spilled.get(c, 0)]
                for c in {*mem["clients"], *spilled}
            },
            "clients": len(ex.tables),
            "batches": ex.batches,
            "instructions": ex.instructions,
            "busy_ns": ex.busy_ns,
            "hot_fused": ex.hot.fused_launches(),  # replayed chains run as one CUDA kernel
            "bad_messages": self.bad_messages,
            "unclaimed": sum(len(f.buffer) for f, _ in self.pending_uploads.values()),
            "sent": self.peers.bytes_sent,  # to other workers, since the worker started
            "received": self.peers.bytes_received,
            "client_bytes": self.client_bytes,  # (with sent and received: the monitor's "moved")
        }

    def _report_stats(self) -> None:
        if self.direct.owed:  # (the dispatcher's counts then never trail the report's)
            self.direct.flush(self.sock)
        self._expire_unclaimed()
        self.memory.tick()
        mem = self.memory.report()
        self.sock.send(P.encode(P.Stats(self.stats(mem))))
        self.events.emit(E.MEMORY, {"worker": self.wid, **mem})
