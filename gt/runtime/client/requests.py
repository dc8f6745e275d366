"""Control requests over a client's own connection: shard configs, memory settings, stats (a
mixin of :class:`gt.runtime.client.connection.Connection`, whose state it uses). A request goes
after everything the program queued before it, so a config applies from that point on."""

from __future__ import annotations

import os
import sys
import time
from difflib import get_close_matches
from typing import Any

from gt.errors import GTTimeout
from gt.runtime import protocol as P
from gt.runtime.control import request
from gt.runtime.sharding.config import ConfigError, from_env


class Requests:
    """Control requests (see the module docstring)."""

    _config_signals: frozenset[str] = frozenset()  # the signals of the last config applied here

    def control(self, request: str, args: Any = None, timeout: float | None = None) -> Any:
        """Send one control request over this connection, after everything queued before it.

        Raises:
            ValueError: the dispatcher refused the request (its message says why).
        """
        with self._lock:
            self._flush_locked()
            if self._route_direct:  # sent straight to the worker: the dispatcher must not
                # act on the request (say, the workers' memory limit) before they have run
                self._drain_in_flight(time.monotonic() + self.timeout, f"before {request!r}")
            self._control_reply = None
            self._sock.send(P.encode(P.Control(request, args)))
            self._last_sent = time.monotonic()
            deadline = time.monotonic() + (timeout or min(self.timeout, 60.0))
            while self._control_reply is None:
                if self._broken is not None:
                    raise self._broken
                if time.monotonic() > deadline:
                    raise GTTimeout(f"the dispatcher did not answer {request!r} in time")
                self._pump(self._wait_slice())
            ok, payload = self._control_reply
            self._control_reply = None
        if not ok:
            raise (
                ConfigError(str(payload))
                if request.startswith("config")
                else ValueError(str(payload))
            )
        return payload

    def apply_config(self, raw: Any) -> dict:
        """Replace the dispatcher's shard config; instructions sent after this call follow it."""
        args = {"config": raw, "by": f"client:{self.client_no}"}
        if os.environ.get("GT_CONTROL_TOKEN"):
            args["token"] = os.environ["GT_CONTROL_TOKEN"]
        applied = self.control("config_apply", args)
        if isinstance(applied, dict) and (
            applied.get("signals") or applied.get("settings", {}).get("auto_shard")
        ):  # (the dispatcher's Route saying so may come later: a captured step must not wait)
            self._direct_allowed = False
        names = applied.get("signals") if isinstance(applied, dict) else None
        self._config_signals = frozenset(n for n in names or () if isinstance(n, str))
        if self._config_signals and self._warn_unused_signals not in self._on_close:
            self._on_close.append(self._warn_unused_signals)
        return applied

    def _warn_unused_signals(self) -> None:
        """At the end: say which of the config's signals this program never entered. A misspelt
        name is no error (another program could enter it), but its ops ran as if unplaced."""
        used = {n for key in self._signal_ids for n in key[:2] if isinstance(n, str)}
        unused = sorted(self._config_signals - used)
        if not unused:
            return
        hints = [
            f"{n!r} (did you mean {close[0]!r}?)" if (close := get_close_matches(n, used, 1)) else repr(n)
            for n in unused
        ]  # fmt: skip
        print(f"gt: warning: the shard config places {', '.join(hints)}, but this program never "
              f"entered {'that signal' if len(unused) == 1 else 'those signals'} "
              f"(gt.signal.context): {'it' if len(unused) == 1 else 'they'} placed nothing",
              file=sys.stderr)  # fmt: skip

    def set_memory(self, settings: dict) -> dict:
        """Change the workers' memory settings (:mod:`gt.runtime.memory_settings`); answers the
        dispatcher's layers ``{"flags": ..., "runtime": ...}``."""
        args = {"settings": settings, "by": f"client:{self.client_no}"}
        if os.environ.get("GT_CONTROL_TOKEN"):
            args["token"] = os.environ["GT_CONTROL_TOKEN"]
        return self.control("memory_set", args)

    def _apply_env_config(self) -> None:
        """Apply ``$GT_CONFIG`` / ``$GT_AUTO_SHARD`` when they are set."""
        if not (os.environ.get("GT_CONFIG") or os.environ.get("GT_AUTO_SHARD")):
            return
        try:
            raw = from_env()
            if raw is not None:
                self.apply_config(raw)
        except BaseException:
            self.close()
            raise

    def stats(self) -> dict:
        """The dispatcher's stats: workers (with tensors and bytes held), clients, counters."""
        return request(self.address, "stats", ctx=self._ctx)
