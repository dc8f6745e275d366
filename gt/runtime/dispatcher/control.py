"""The dispatcher's answers to control requests (ping, stats, snapshot, config, placement).

A mixin of :class:`gt.runtime.dispatcher.Dispatcher`, kept apart so the poll loop's file stays about
moving bytes. Everything here reads the dispatcher's state and returns plain data.
"""

from __future__ import annotations

import hmac
import os
import time
from typing import Any

from gt.runtime import memory_settings as MS
from gt.runtime import protocol as P
from gt.runtime.liveness import BOOT_ID
from gt.runtime.sharding import config as shard_config
from gt.trace import events as E


class ControlRequests:
    """Control requests, answered from the dispatcher's planner, placement and counters."""

    def answer(self, request: str, args: Any, role: str | None = None,
               tenant: int | None = None, tenant_name: str | None = None) -> Any:  # fmt: skip
        """Answer one control request from a peer of ``role`` (``None``: over ipc, the owner).

        Changing the cluster (``config_apply``, ``memory_set``) takes the admin role; ``stats``
        and ``snapshot`` show a tenant's command line, host and source lines only to admins and
        to that tenant (``tenant``: the client the request came from on the front socket;
        ``tenant_name``: the tenant whose own key made the request, who sees all its programs).

        Requests: ``ping`` and ``endpoints`` (both with the dispatcher's ``pid``, ``uid`` and
        ``started``, a Unix time), ``stats``, ``snapshot``, ``config_get`` (the shard
        config in normal form), ``config_apply`` (``{"config": raw, "by": who}``: validate and
        apply for new instructions; answers the normal form; raises ``ValueError`` on a bad
        config), ``placement`` (per client: tensor id -> layout, for tools and tests; a tenant's
        own only, but for admins), ``axis_fits`` (the asking client's signals whose rule shards
        an axis: ``[tensors made under it, how many had that axis, the most axes one had]``),
        ``memory_get`` (the workers' memory settings: ``flags``, ``runtime``), ``memory_set``
        (``{"settings": {...}, "by": who}``: change them on every worker; raises ``ValueError``
        on an unknown setting or a bad size).
        """
        if request in ("config_apply", "memory_set") and role not in (None, "admin"):
            raise ValueError(f"{request} needs the admin role (this connection is {role}): use "
                             "the admin key (gt keys export --role admin)")  # fmt: skip
        if request == "config_get":
            return self.placement.config
        if request == "config_apply":
            return self.apply_config(args)
        if request == "memory_get":
            return self.memory_layers()
        if request == "memory_set":
            return self.set_memory(args)
        if request == "placement":  # a tenant sees its own tensors only (admins: everyone's)
            own = self._own(tenant, tenant_name)
            return {
                cno: {tid: info.layout.describe() for tid, info in c.tensors.items()}
                for cno, c in self.placement.clients.items()
                if role in (None, "admin") or cno in own
            }
        if request == "axis_fits":  # the asking client's: see ClientPlacement.axis_fits
            c = self.placement.clients.get(tenant) if tenant is not None else None
            return dict(c.axis_fits) if c is not None else {}
        if request == "ping":
            return {"pid": os.getpid(), "uptime": time.time() - self.started, **self._owner()}
        if request == "endpoints":
            return {**self.endpoints, "pid": os.getpid(), **self._owner()}
        if request == "stats":
            return self._for(self.stats(), role, self._own(tenant, tenant_name))
        if request == "snapshot":
            return self._for(self.snapshot(), role, self._own(tenant, tenant_name))
        raise ValueError(f"unknown control request {request!r}")

    def _own(self, tenant: int | None, tenant_name: str | None) -> set[int]:
        """The clients whose details the asker may see: itself, and with a tenant's own key
        every program of that tenant."""
        own = {tenant} if tenant is not None else set()
        if tenant_name is not None:
            own.update(c.cno for c in self.planner.clients.values()
                       if c.info.get("tenant") == tenant_name)  # fmt: skip
        return own

    @staticmethod
    def _for(answer: dict, role: str | None, own: set[int]) -> dict:
        """``answer`` as a peer of ``role`` may see it: other tenants' command lines, hosts,
        pids and source lines only for admins (and the owner, over ipc)."""
        if role in (None, "admin"):
            return answer
        hidden = {"host": None, "pid": None, "argv": ["(another tenant)"], "tenant": None}
        answer["clients"] = [c if c.get("id") in own else {**c, **hidden}
                             for c in answer.get("clients", ())]  # fmt: skip
        if "srclocs" in answer:
            answer["srclocs"] = {c: v for c, v in answer["srclocs"].items() if c in own}
        return answer

    def _owner(self) -> dict:
        """Who started this dispatcher and when, so a tool can say whom it talks to (and refuse
        to change another user's dispatcher)."""
        return {"uid": os.getuid(), "started": self.started}

    def apply_config(self, args: Any) -> dict:
        """Validate and apply a shard config: ``{"config": raw, "by": who, "token": secret}``.

        With ``$GT_CONTROL_TOKEN`` set in the dispatcher's environment, the request must carry
        that token (tools on other hosts); without it, anyone who can reach the endpoint may apply.

        Raises:
            ValueError: a missing or wrong token, or a malformed config (the message says which
                key is wrong); the running config then stays in force.
        """
        if not (
            isinstance(args, dict) and "config" in args and set(args) <= {"config", "by", "token"}
        ):
            args = {"config": args}
        if self.control_token and not hmac.compare_digest(
            str(args.get("token") or "").encode(), self.control_token.encode()
        ):
            raise ValueError(
                "config_apply: this dispatcher needs its control token (GT_CONTROL_TOKEN)"
            )
        raw, by = args.get("config"), args.get("by")
        alive = [w.wid for w in self.planner.alive_workers()]
        before, after = self.placement.apply_config(raw, alive)
        for c in list(self.planner.clients.values()):
            self.tell_route(c)  # a config with rules: their batches come through here again
        self.events.emit(
            E.CONFIG,
            {
                "before": shard_config.to_yaml_dict(before),
                "after": shard_config.to_yaml_dict(after),
                "by": str(by or "control"),
            },
        )
        return after

    def memory_layers(self) -> dict:
        """The memory settings workers get: the dispatcher's flags, and what programs set since."""
        return {"flags": dict(self.memory_flags), "runtime": dict(self.memory_runtime)}

    def set_memory(self, args: Any) -> dict:
        """Change memory settings on every worker: ``{"settings": {...}, "by": who, "token": t}``.

        Raises:
            ValueError: a missing or wrong control token, an unknown setting or a bad value.
        """
        if not (isinstance(args, dict) and isinstance(args.get("settings"), dict)):
            raise ValueError("memory_set takes {'settings': {name: value}}")
        self._check_token(args, "memory_set")
        try:
            new = MS.normalize(args["settings"])
        except MS.SettingError as exc:
            raise ValueError(str(exc)) from None
        self.memory_runtime.update(new)
        self.broadcast_memory()
        return self.memory_layers()

    def broadcast_memory(self) -> None:
        """Send the memory settings to every worker."""
        msg = P.encode(P.Configure(self.memory_layers()))
        for w in self.planner.alive_workers():
            self.back.send_multipart([w.ident, msg])

    def _check_token(self, args: dict, what: str) -> None:
        if self.control_token and not hmac.compare_digest(
            str(args.get("token") or "").encode(), self.control_token.encode()
        ):
            raise ValueError(f"{what}: this dispatcher needs its control token (GT_CONTROL_TOKEN)")

    def _emit_stats(self) -> None:
        p = self.planner
        self.events.emit(
            E.STATS,
            {
                "counters": {
                    "batches": self.batches_routed,
                    "planned": self.batches_planned,
                    "direct": p.direct_batches,
                    "bad_messages": self.bad_messages,
                    "internal_errors": self.internal_errors,
                    "clients": len(p.clients),
                    "workers": len(p.alive_workers()),
                    "in_flight": {w.wid: w.in_flight for w in p.workers.values() if w.alive},
                    "queued": {c.cno: len(c.queue) for c in p.clients.values() if c.queue},
                }
            },
        )

    def snapshot(self) -> dict:
        """The current state for a monitor that joins late: stats, source lines, event sequence.

        A monitor subscribes to the bus first, then asks for this; membership facts here are
        idempotent, so events that arrive twice (in the snapshot and on the bus) do no harm.
        """
        self.events.flush()
        return {
            **self.stats(),
            "srclocs": {cno: dict(locs) for cno, locs in self._srclocs.items()},
            "config": shard_config.to_yaml_dict(self.placement.config),
            "seq": {"dispatcher": self.events.seq},
            "clock": time.monotonic_ns(),
            "boot": BOOT_ID,
            "trace": self.events.level,
        }

    def stats(self) -> dict:
        """A plain-data summary of workers, clients and counters."""
        p = self.planner
        return {
            "uptime": time.time() - self.started,
            "bad_messages": self.bad_messages,
            "internal_errors": self.internal_errors,
            "endpoints": self.endpoints,
            "starting": self.starting(),  # local workers started (or restarted), not yet registered
            "workers": [
                {
                    "id": w.wid,
                    "alive": w.alive,
                    "reason": w.reason,
                    "in_flight": w.in_flight,
                    "clients": sorted(w.clients),
                    "batches": w.batches_done,
                    "dropped": w.batches_dropped,
                    "instructions": w.instructions_done,
                    "stats": w.stats,
                    **{k: w.info.get(k) for k in ("host", "pid", "device", "backend", "data")},
                }
                for w in p.workers.values()
            ],
            "clients": [
                {
                    "id": c.cno,
                    "home": c.home,
                    "queued": len(c.queue),
                    "in_flight": c.in_flight,
                    "batches": c.batches,
                    "instructions": c.instructions,
                    "errors": c.errors,
                    "broken": c.broken,
                    **{k: c.info.get(k) for k in ("host", "pid", "argv", "tenant")},
                }
                for c in p.clients.values()
            ],
        }
