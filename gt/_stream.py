"""``gt.Stream`` and ``gt.Event``: PyTorch's device-agnostic stream and event classes, for GT.

A GT client's ops run in the order it issues them (one stream per client), so these are honest
without a device runtime: every op issued before ``event.record()`` has run once
``event.synchronize()`` returns (it waits with ``gt.sync()``), a stream is always this one queue
(``wait_event`` and ``wait_stream`` have nothing to order), and ``elapsed_time`` is measured on
the client: an event made with ``enable_timing=True`` waits for the ops issued so far when it is
recorded (``gt.sync()``) and then reads the client's clock, so the time between two such events is
the time the cluster took for the ops issued between them, as seen from the client (it includes
the round trips of the two waits).
"""

from __future__ import annotations

import time
from typing import Any

from gt.factories import sync
from gt.ops.device import device as _device


def _device_of(device: Any) -> _device:
    return _device("cpu") if device is None else _device(device)


class Stream:
    """An in-order queue of ops: on GT, the client's own (see :mod:`gt._stream`).

    Args:
        device: accepted (GT's workers choose their own devices); ``cpu`` by default.
        priority: accepted (one queue has nothing to prioritize).
    """

    def __init__(self, device: Any = None, *, priority: int = 0) -> None:
        self.device = _device_of(device)
        self.device_type = self.device.type
        self.device_index = -1 if self.device.index is None else self.device.index
        self.stream_id = 0

    def query(self) -> bool:
        """True once every op issued so far has run (GT learns it by waiting for them)."""
        sync()
        return True

    def synchronize(self) -> None:
        """Wait until every op issued so far has run (``gt.sync()``)."""
        sync()

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new :class:`Event` if None) at this point of the queue."""
        event = Event(self.device) if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Nothing to do: the ops after it already run after those before ``event``."""

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to do: every stream is the client's one queue."""

    def is_capturing(self) -> bool:
        """False (GT has no graph capture of streams)."""
        return False

    @property
    def native_handle(self) -> int:
        raise RuntimeError("Backend doesn't support getting stream native handle.")

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        key = (self.device_type, self.device_index, self.stream_id)
        return key == (other.device_type, other.device_index, other.stream_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self) -> str:
        return (f"gt.Stream device_type={self.device_type}, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")  # fmt: skip


class Event:
    """A point in the client's queue of ops, to wait for or to time (see :mod:`gt._stream`).

    Args:
        device: accepted; ``cpu`` by default.
        enable_timing: record the time (``record`` then waits for the ops issued so far).
        blocking, interprocess: accepted (no-ops, as in PyTorch).
    """

    def __init__(self, device: Any = None, *, enable_timing: bool = False,
                 blocking: bool = False, interprocess: bool = False) -> None:  # fmt: skip
        self.device = _device_of(device)
        self.enable_timing = bool(enable_timing)
        self.event_id = 0
        self._recorded = False
        self._done = False
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        """Record this point of the queue; with ``enable_timing``, wait for it and read the clock."""
        self._recorded = True
        self._done = False
        if self.enable_timing:
            sync()
            self._time = time.perf_counter()
            self._done = True

    def query(self) -> bool:
        """True once the ops issued before :meth:`record` have run (True if never recorded)."""
        if self._recorded and not self._done:
            sync()
            self._done = True
        return True

    def synchronize(self) -> None:
        """Wait until the ops issued before :meth:`record` have run."""
        if self._recorded and not self._done:
            sync()
            self._done = True

    def wait(self, stream: Stream | None = None) -> None:
        """Nothing to do: later ops already run after those before this event."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event's :meth:`record` and ``end_event``'s, on the client's
        clock, each taken once the ops issued before it had run."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0

    def ipc_handle(self) -> Any:
        raise NotImplementedError(
            "torch.Event ipc is not supported yet, please open an issue if you need this!"
        )

    @classmethod
    def from_ipc_handle(cls, device: Any, ipc_handle: Any) -> Event:
        raise NotImplementedError(
            "torch.Event ipc is not supported yet, please open an issue if you need this!"
        )

    def __repr__(self) -> str:
        index = -1 if self.device.index is None else self.device.index
        return (f"gt.Event device_type={self.device.type}, device_index={index}, "
                f"event_flag={int(self.enable_timing)}, event_id={self.event_id}")  # fmt: skip


__all__ = ["Event", "Stream"]
