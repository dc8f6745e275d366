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
    _config_axes: dict[str, int] = {}  # (of those, the ones that shard an axis: which one)
    _config_backward: dict[str, str] = {}  # (of those, the ones whose rule names a backward one)

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
        self._config_backward = {  # (a signal whose rule names one places its gradients by it)
            n: r["backward"] for n, r in (names or {}).items()
            if isinstance(r, dict) and isinstance(r.get("backward"), str)
        }  # fmt: skip
        self._config_axes = {
            n: r["axis"] for n, r in (names or {}).items()
            if isinstance(r, dict) and r.get("kind") == "shard" and isinstance(r.get("axis"), int)
        }  # fmt: skip
        if self._config_signals and self._warn_unused_signals not in self._on_close:
            self._on_close.append(self._warn_unused_signals)
        return applied

    def _warn_unused_signals(self) -> None:
        """At the end: say which of the config's signals this program never entered, and which
        shard an axis that none of the tensors made under them had. Neither is an error (another
        program could enter the signal; a bias may sit in a layer's signal), but such a rule
        placed nothing."""
        used = {n for key in self._signal_ids for n in key[:2] if isinstance(n, str)}
        self._warn_unfit_axes(used)
        used |= {self._config_backward[n] for n in used if n in self._config_backward}
        unused = sorted(self._config_signals - used)
        if not unused:
            return
        hints = [  # (neutral: the typo may be in the program or in the config)
            f"{n!r} (this program entered {close[0]!r})"
            if (close := get_close_matches(n, used, 1)) else repr(n)
            for n in unused
        ]  # fmt: skip
        print(f"gt: warning: the shard config places {', '.join(hints)}, but this program never "
              f"entered {'that signal' if len(unused) == 1 else 'those signals'} "
              f"(gt.signal.context): {'it' if len(unused) == 1 else 'they'} placed nothing",
              file=sys.stderr)  # fmt: skip

    def _warn_unfit_axes(self, used: set[str]) -> None:
        if not (used & set(self._config_axes)) or self._broken is not None:
            return
        try:  # (at the end of the program: a dispatcher that cannot answer at once is left be)
            fits = self.control("axis_fits", None, timeout=2.0)
        except Exception:
            return
        for name in sorted(fits if isinstance(fits, dict) else ()):
            f = fits[name]
            axis = self._config_axes.get(name)
            if axis is None or not (isinstance(f, list) and len(f) == 3) or f[1] or not f[0]:
                continue
            n, most = f[0], f[2]
            print(f"gt: warning: the shard config shards {name!r} on axis {axis}, but none of the "
                  f"{n} tensor{'s' if n != 1 else ''} made under that signal had that axis "
                  f"(they had at most {most} ax{'is' if most == 1 else 'es'}): it placed nothing",
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
                try:
                    self.apply_config(raw)
                except ConfigError as exc:  # (the dispatcher's refusal: say whose config it was)
                    where = os.environ.get("GT_CONFIG")
                    raise ConfigError(f"GT_CONFIG={where}: {exc}" if where else str(exc)) from None
        except BaseException:
            self.close()
            raise

    def stats(self) -> dict:
        """The dispatcher's stats: workers (with tensors and bytes held), clients, counters."""
        return request(self.address, "stats", ctx=self._ctx)
