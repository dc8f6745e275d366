"""A network-free executor for planned batches: the oracle for the placement planner's tests.

:class:`Sim` runs the per-worker instruction lists that :meth:`Placement.plan` makes, on NumPy,
with the same kernels the workers use. Transfer instructions are matched by tag across workers
and executed centrally, in the order the workers reach them; a plan whose transfers cannot all be
matched (a deadlock on real workers) raises. :class:`Client` builds client instructions and
computes every value a second time on one "worker" (plain NumPy), so a test compares the two.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.runtime import ops as O
from gt.runtime.sharding.placement import Placement
from gt.runtime.worker.backend import Backend

OP = O.OPCODE
BACKEND = Backend(np, "cpu")
_COMM = O.COMM_OPS - {O.CHUNK}  # chunk is a local cut: the simulator runs it like a kernel
_RED = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _split(x: np.ndarray, axis: int, sizes: list[int]) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


class Sim:
    """Per-worker tensor tables and the fetched values."""

    def __init__(self, n_workers: int):
        self.tables: dict[int, dict[int, Any]] = {w: {} for w in range(n_workers)}
        self.fetched: dict[int, np.ndarray] = {}

    def run(self, prog: Any, bufs: list[np.ndarray]) -> None:
        """Execute one planned batch (all workers), each free where its worker's part says."""
        pos = {w: 0 for w in prog.parts}
        parts = prog.parts
        done = {w: 0 for w in prog.frees}

        def drop_due(w: int, upto: int) -> None:  # the frees due before instruction ``upto``
            ids, at = prog.frees.get(w, []), prog.free_at.get(w, [])
            assert len(ids) == len(at) and at == sorted(at)
            while done.get(w, 0) < len(ids) and at[done[w]] <= upto:
                self.tables[w].pop(ids[done[w]], None)
                done[w] += 1

        while any(pos[w] < len(parts[w]) for w in parts):
            progress = False
            for w in parts:  # run local instructions until each worker reaches a transfer
                drop_due(w, pos[w])
                while pos[w] < len(parts[w]) and parts[w][pos[w]][0] not in _COMM:
                    self._local(w, parts[w][pos[w]], bufs)
                    pos[w] += 1
                    drop_due(w, pos[w])
                    progress = True
            waiting: dict[int, dict[int, list]] = {}
            for w in parts:
                if pos[w] < len(parts[w]):
                    ins = parts[w][pos[w]]
                    waiting.setdefault(ins[3]["tag"], {})[w] = ins
            for by_worker in waiting.values():
                w0, first = next(iter(by_worker.items()))
                need = self._participants(w0, first)
                if set(by_worker) == need:
                    self._collective(first[0], by_worker)
                    for w in by_worker:
                        pos[w] += 1
                    progress = True
            if not progress:
                raise AssertionError(f"deadlock: workers wait at {waiting}")
        for w in prog.frees:
            drop_due(w, len(parts.get(w, ())))

    @staticmethod
    def _participants(w: int, ins: list) -> set[int]:
        code, at = ins[0], ins[3]
        if code in (OP["send"], OP["recv"]):
            return {w, at["peer"]}
        ws = set(at["workers"])
        if code in (OP["scatter"], OP["gather"]):
            ws.add(at["root"])
        return ws

    def _local(self, w: int, ins: list, bufs: list) -> None:
        code, out, args, attrs, _src = ins
        tbl = self.tables[w]
        vals = [tbl[a] if type(a) is int else (a[0] if type(a) is list else a) for a in args]
        name = O.OPS[code]
        if name == "upload":
            tbl[out] = bufs[attrs["buf"]].copy()
        elif name == "fetch":
            self.fetched[out] = np.array(vals[0])
        elif name == "free":
            for t in attrs["ids"]:
                tbl.pop(t, None)
        elif name == "chunk":
            sl = (slice(None),) * attrs["axis"] + (slice(attrs["start"], attrs["stop"]),)
            tbl[out] = np.array(vals[0][sl])
        elif name in ("mark", "place"):
            pass
        else:
            tbl[out] = BACKEND.handlers[code](vals, attrs)

    def _collective(self, code: int, by_worker: dict[int, list]) -> None:
        name = O.OPS[code]
        t = self.tables
        first = next(iter(by_worker.values()))
        at = first[3]

        def val(w: int) -> Any:
            return t[w][by_worker[w][2][0]]

        if name in ("send", "recv"):
            (s,) = [w for w, ins in by_worker.items() if ins[0] == OP["send"]]
            (d,) = [w for w, ins in by_worker.items() if ins[0] == OP["recv"]]
            t[d][by_worker[d][1]] = np.array(val(s))
        elif name == "bcast":
            x = val(at["root"])
            for w, ins in by_worker.items():
                t[w][ins[1]] = x if w == at["root"] else np.array(x)
        elif name == "scatter":
            blocks = _split(val(at["root"]), at["axis"], at["sizes"])
            for i, w in enumerate(at["workers"]):
                t[w][by_worker[w][1]] = np.array(blocks[i])
        elif name == "gather":
            x = np.concatenate([val(w) for w in at["workers"]], axis=at["axis"])
            t[at["root"]][by_worker[at["root"]][1]] = x
        elif name == "all_gather":
            x = np.concatenate([val(w) for w in at["workers"]], axis=at["axis"])
            for w, ins in by_worker.items():
                t[w][ins[1]] = np.array(x)
        elif name in ("all_reduce", "reduce_scatter"):
            op = _RED[at["op"]]
            x = val(at["workers"][0])
            for w in at["workers"][1:]:
                x = op(x, val(w))
            if name == "all_reduce":
                for w, ins in by_worker.items():
                    t[w][ins[1]] = np.array(x)
            else:
                blocks = _split(x, at["axis"], at["sizes"])
                for i, w in enumerate(at["workers"]):
                    t[w][by_worker[w][1]] = np.array(blocks[i])


class Client:
    """Builds client instructions for the planner and the same values in plain NumPy."""

    def __init__(self, placement: Placement, n_workers: int, home: int = 0, cno: int = 1):
        self.pl = placement
        self.alive = list(range(n_workers))
        self.home = home
        self.cno = cno
        self.sim = Sim(n_workers)
        self.ref: dict[int, np.ndarray] = {}
        self.instrs: list[list] = []
        self.bufs: list[np.ndarray] = []
        self.frees: list[int] = []
        self.free_at: list[int] = []
        self.signals: list[list] = []
        self._sids: dict[str, int] = {}
        self._next = 1
        self._req = 10_000
        self.last: Any = None

    def sid(self, name: str | None) -> int:
        if name is None:
            return 0
        if name not in self._sids:
            self._sids[name] = len(self._sids) + 1
            self.signals.append([self._sids[name], name, None, False])
        return self._sids[name]

    def _new(self) -> int:
        self._next += 1
        return self._next

    def upload(self, arr: np.ndarray, sig: str | None = None) -> int:
        tid = self._new()
        arr = np.ascontiguousarray(arr)
        self.instrs.append(self._ins(OP["upload"], tid, [], {"shape": list(arr.shape), "dtype": arr.dtype.name,
                                                              "buf": len(self.bufs)}, sig))  # fmt: skip
        self.bufs.append(arr)
        self.ref[tid] = arr.copy()
        return tid

    def op(
        self,
        name: str,
        args: list,
        attrs: Any = None,
        sig: str | None = None,
        out: int | None = None,
    ) -> int:
        tid = out if out is not None else self._new()
        vals = [self.ref[a] if type(a) is int else (a[0] if type(a) is list else a) for a in args]
        self.ref[tid] = np.array(BACKEND.handlers[OP[name]](vals, attrs))
        self.instrs.append(self._ins(OP[name], tid, list(args), attrs, sig))
        return tid

    def place(self, tid: int, sig: str) -> None:
        shape = list(self.ref[tid].shape)
        self.instrs.append(
            self._ins(OP["place"], tid, [tid], {"shape": shape, "dtype": "float32"}, sig)
        )

    def fetch(self, tid: int) -> int:
        self._req += 1
        self.instrs.append([OP["fetch"], self._req, [tid], None, 0])
        return self._req

    def free(self, tid: int) -> None:
        self.frees.append(tid)
        self.free_at.append(len(self.instrs))  # where the program dropped it, as clients send
        self.ref.pop(tid, None)

    def _ins(self, code: int, out: int, args: list, attrs: Any, sig: str | None) -> list:
        ins = [code, out, args, attrs, 0]
        if sig is not None:
            ins.append(self.sid(sig))
        return ins

    def flush(self) -> Any:
        """Plan and simulate the pending instructions; returns the plan."""
        prog = self.pl.plan(self.cno, self.home, self.instrs, self.frees, self.alive, self.signals,
                            self.free_at)  # fmt: skip
        self.signals = []
        self.sim.run(prog, self.bufs)
        self.instrs, self.bufs, self.frees, self.free_at = [], [], [], []
        self.last = prog
        return prog

    def value(self, tid: int) -> np.ndarray:
        """Fetch ``tid`` through the planner and the simulated workers."""
        req = self.fetch(tid)
        self.flush()
        return self.sim.fetched.pop(req)

    def layout(self, tid: int) -> str:
        return self.pl.clients[self.cno].tensors[tid].layout.describe()
