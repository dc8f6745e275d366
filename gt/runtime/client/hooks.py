"""What :mod:`gt.hotpath` needs of a client connection to capture a step: recording what a call
emits and frees, being told when a tensor a captured step relies on is freed, and publishing the
step's ``hot`` events (a mixin of :class:`gt.runtime.client.connection.Connection`)."""

from __future__ import annotations

from typing import Any

from gt.trace import events as E


class CaptureHooks:
    """Capture support (see the module docstring)."""

    def record(self, instrs: list | None, freed: set | None) -> None:
        """Also append every instruction queued to ``instrs`` and add every id freed to ``freed``
        (``None``: stop). What :mod:`gt.hot` captures a step with."""
        self._rec_instrs, self._rec_freed = instrs, freed

    def watch(self, ids: Any, on_free: Any) -> None:
        """Call ``on_free(id)`` (once) when any of ``ids`` is freed (several captured steps may
        watch one id: each is told)."""
        for i in ids:
            told = self._watched.get(i)
            if told is None:
                self._watched[i] = [on_free]
            elif on_free not in told:
                told.append(on_free)

    def unwatch(self, ids: Any, on_free: Any = None) -> None:
        """Stop watching ``ids`` for ``on_free`` (for everyone when ``None``)."""
        for i in ids:
            told = self._watched.get(i)
            if told is None:
                continue
            if on_free is None or on_free in told and len(told) == 1:
                del self._watched[i]
            elif on_free in told:
                told.remove(on_free)

    def plans_nothing(self) -> bool:
        """Whether the dispatcher forwards this client's batches as they are: no shard config
        in force and no tensor of ours placed (its latest ``Route``). A signal annotation then
        changes nothing, so a step that runs under one can be captured."""
        return self._direct_allowed

    def on_close(self, fn: Any) -> None:
        """Call ``fn()`` when this connection closes (before anything is torn down)."""
        self._on_close.append(fn)

    def hot_event(self, fields: dict) -> None:
        """Publish what a captured step is doing (an ``E.HOT`` event)."""
        with self._lock:
            self.events.emit(E.HOT, {"client": self.client_no, **fields})
