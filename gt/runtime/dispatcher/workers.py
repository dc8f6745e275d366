"""What the dispatcher does with its workers' messages (a mixin of
:class:`gt.runtime.dispatcher.loop.Dispatcher`, whose state it uses): a batch done, data relayed
to a client, heartbeats, stats, registration; and telling workers about each other, or clients
about a worker that is gone."""

from __future__ import annotations

from typing import Any

import zmq

from gt.runtime import protocol as P
from gt.runtime.sockets import send_parts
from gt.trace import events as E

_HEARTBEAT = P.encode(P.Heartbeat())
_STOP = P.encode(P.Stop())


class WorkerMessages:
    """The worker side of the dispatcher (see the module docstring)."""

    back: zmq.Socket
    front: zmq.Socket
    planner: Any
    placement: Any
    events: Any
    clock: Any
    _worker_by_ident: dict
    _hb_idents: dict
    _pending_hellos: list

    def _on_worker(self, frames: list) -> None:
        ident, msg = P.parse_routed(frames)
        kind = type(msg)
        wid = self._worker_by_ident.get(ident)
        if wid is not None:  # any message is a sign of life, on a connection we now know
            self.planner.workers[wid].last_seen = self.clock.now()
            self.heard("worker", wid, frames[1], "back", ident)
        if kind is P.Done:
            if wid is None:
                raise P.ProtocolError("Done from an unregistered worker")
            running = self.planner.workers[wid].running
            key = (msg.client, msg.seq)
            if not running.get(key):  # only the worker that runs a batch may say it is done
                raise P.ProtocolError(f"worker {wid} reported a batch it does not run")
            running[key] -= 1
            if not running[key]:
                del running[key]
            self._done(wid, msg)
        elif kind is P.Ran:  # batches a client sent it straight: acknowledged already
            c = self.planner.clients.get(msg.client)
            if wid is None or (c is not None and c.home != wid):
                raise P.ProtocolError(f"worker {wid} counted batches of a client it is not home to")
            self.planner.count_direct(wid, msg)
        elif kind is P.Relay:
            c = self.planner.clients.get(msg.client)
            w = self.planner.workers.get(wid) if wid is not None else None
            if w is None or not any(k[0] == msg.client for k in w.running):
                raise P.ProtocolError("data for a client whose batch that worker does not run")
            if c is not None:
                send_parts(self.front, [c.ident, P.encode(msg.data()), *frames[2:3]])
        elif kind is P.Heartbeat:
            hb_wid = self._hb_idents.get(ident, wid)  # by identity, never by what a message claims
            w = self.planner.workers.get(hb_wid) if hb_wid is not None else None
            if w is not None and w.alive:
                w.last_seen = self.clock.now()
                self.heard("worker", w.wid, frames[1], "back", ident)
                self.back.send_multipart([ident, _HEARTBEAT])
            else:
                self.back.send_multipart([ident, _STOP])
        elif kind is P.Stats:
            if wid is not None:
                self.planner.workers[wid].stats = msg.stats
        elif kind is P.Register:
            self._register(ident, msg, frames[1])
        else:
            raise P.ProtocolError(f"unexpected {kind.__name__} from a worker")

    def _done(self, wid: int, msg: P.Done) -> None:
        sends, ack = self.planner.finish(
            wid, msg.client, msg.seq, msg.n, msg.errors, dropped=msg.dropped
        )
        c = self.planner.clients.get(msg.client)
        if c is not None:
            if msg.errors:
                c.errors += len(msg.errors)
            if ack is not None and (ack or not msg.acked):  # (acked: only errors are news)
                send_parts(self.front, [c.ident, P.encode(P.Ack(msg.seq, ack, msg.acked))])
        if sends:
            self._send_batches(sends)

    def _register(self, ident: bytes, msg: P.Register, frame: Any) -> None:
        info = {"host": msg.host, "pid": msg.pid, "device": msg.device, "backend": msg.backend,
                "data": msg.data, "gpu": msg.gpu, "data_key": msg.data_key}  # fmt: skip
        wid = self.planner.add_worker(ident, info, self.clock.now())
        self.planner.workers[wid].local = self.is_local(info)
        self._worker_by_ident[ident] = wid
        self._hb_idents[msg.hb] = wid
        self.heard("worker", wid, frame, "back", ident)
        self.back.send_multipart([ident, P.encode(P.Registered(wid, self._settings()))])
        self.events.emit(
            E.WORKER_JOINED,
            {"worker": wid, **{k: info[k] for k in ("host", "pid", "device", "backend")}},
        )
        self._send_peers()
        pending, self._pending_hellos = self._pending_hellos, []
        for c_ident, c_info, _t in pending:
            self._hello(c_ident, c_info)

    def _send_peers(self) -> None:
        """Tell every worker where its peers' data sockets are (for direct transfers)."""
        alive = self.planner.alive_workers()
        table = {w.wid: w.info.get("data") for w in alive if w.info.get("data")}
        keys = {w.wid: w.info["data_key"] for w in alive if w.info.get("data_key")} or None
        for w in alive:
            self.back.send_multipart([w.ident, P.encode(P.Peers(table, keys))])

    def _worker_lost(self, wid: int, reason: str) -> None:
        w = self.planner.workers[wid]
        text = f"worker {wid} ({w.info.get('device', '?')}, pid {w.info.get('pid', '?')}) {reason}; the tensors it held are lost"
        self.events.emit(E.WORKER_LEFT, {"worker": wid, "reason": reason})
        lost = self.planner.remove_worker(wid, text)
        for cno in self.placement.clients_on(wid):
            c = self.planner.clients.get(cno)
            if c is not None and c.broken is None:
                c.broken = text
                c.queue.clear()
                lost.append(c)
        for c in lost:
            self.front.send_multipart([c.ident, P.encode(P.Error(P.E_WORKER_LOST, text))])
        self._worker_by_ident.pop(w.ident, None)
        self._hb_idents = {k: v for k, v in self._hb_idents.items() if v != wid}
