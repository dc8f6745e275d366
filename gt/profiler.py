"""``gt.profiler``: ``torch.profiler``'s ``profile`` and ``record_function``, for GT.

``record_function(name)`` (a context manager and a decorator) times its block with the host
clock and, when the program is connected, puts ``name`` and ``name/end`` marks on GT's timelines
(``gt.mark``), so the block can be found in ``gt top`` and in recordings. Inside
``with profile(...) as prof:`` the blocks are collected and ``prof.key_averages().table()``
lists them; ``prof.step()`` adds a ``ProfilerStep#N`` block per step after the first call, and a ``schedule`` decides
which steps are recorded, as in PyTorch.

Limits: GT ops are asynchronous (queued on the client, run on a worker), so a block's time is the
time the host spent in it, not the device's; call ``gt.sync()`` inside a block to include the
work. Per-op (``aten::``) events, shapes, memory and FLOPs are not recorded: the per-instruction
view is GT's own trace (``gt top``, ``gt record``, the Perfetto export).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gt.session import current

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]

_active: list[profile] = []  # the profilers that are recording, innermost last


class ProfilerActivity(enum.Enum):
    """The activities ``profile(activities=...)`` accepts (GT records host blocks either way)."""

    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:  # fmt: skip
    """PyTorch's step schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` and ``active`` recorded steps (``repeat`` cycles, 0 for no limit)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0)."
        )

    def schedule_fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        n = wait + warmup + active
        if repeat > 0 and step / n >= repeat:
            return ProfilerAction.NONE
        mod = step % n
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < n - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(_step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


@dataclass(frozen=True)
class FunctionEvent:
    """One recorded block: its name and host start/end in microseconds."""

    name: str
    start_us: float
    end_us: float

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us


@dataclass
class FunctionEventAvg:
    """The blocks of one name together (``key_averages()`` rows); times in microseconds."""

    key: str
    count: int = 0
    cpu_time_total: float = 0.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total

    device_time_total = cuda_time_total = 0.0


class EventList(list):
    """A list of events (or of averages) with PyTorch's ``table()``."""

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False, **_: Any) -> str:  # fmt: skip
        """A text table: name, calls, total and average host time."""
        rows = [r if isinstance(r, FunctionEventAvg) else _avg([r])[0] for r in self]
        if sort_by:
            key = sort_by.replace("self_", "").replace("cuda", "cpu").replace("device", "cpu")
            if key in ("count", "cpu_time_total", "cpu_time"):
                rows.sort(key=lambda r: getattr(r, key), reverse=True)
        rows = rows[:row_limit] if row_limit and row_limit > 0 else rows
        width = max([len("Name"), *(min(len(r.key), max_name_column_width) for r in rows)])
        total = sum(r.cpu_time_total for r in rows) or 1.0
        head = f"{'Name':<{width}}  {'CPU total %':>11}  {'CPU total':>12}  {'CPU time avg':>12}  {'# of Calls':>10}"
        line = "-" * len(head)
        out = [header] if header else []
        out += [line, head, line]
        for r in rows:
            out.append(f"{r.key[:width]:<{width}}  {100 * r.cpu_time_total / total:>10.2f}%  "
                       f"{_fmt_us(r.cpu_time_total):>12}  {_fmt_us(r.cpu_time):>12}  {r.count:>10}")  # fmt: skip
        out += [line, f"Self CPU time total: {_fmt_us(sum(r.cpu_time_total for r in rows))}", ""]
        return "\n".join(out)

    def key_averages(self) -> EventList:
        return EventList(_avg(list(self)))

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.cpu_time_total for e in self)


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _avg(events: list[FunctionEvent]) -> list[FunctionEventAvg]:
    rows: dict[str, FunctionEventAvg] = {}
    for e in events:
        r = rows.setdefault(e.name, FunctionEventAvg(e.name))
        r.count += 1
        r.cpu_time_total += e.cpu_time_total
    return list(rows.values())


def _mark(label: str) -> None:
    conn = current()  # never start a cluster just to put a mark on it
    if conn is not None:
        conn.mark(label)


class record_function(contextlib.ContextDecorator):
    """A named block: ``with record_function("forward"):`` or ``@record_function("step")``.

    Marks ``name`` and ``name/end`` on GT's timelines (when connected) and, inside a
    :class:`profile`, records the block's host time.
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._start: list[float] = []

    def __enter__(self) -> record_function:
        _mark(self.name)
        self._start.append(time.perf_counter())
        return self

    def __exit__(self, *exc: Any) -> bool:
        t1 = time.perf_counter()
        t0 = self._start.pop()
        _mark(f"{self.name}/end")
        for prof in _active:
            prof._add(self.name, t0, t1)
        return False


class profile:
    """``torch.profiler.profile``: records the :class:`record_function` blocks run inside it.

    Every argument of PyTorch's is accepted; ``schedule`` and ``on_trace_ready`` behave as there,
    the others (activities, shapes, memory, stack, FLOPs) change nothing. See the module for what
    is and is not measured.
    """

    def __init__(self, *, activities: Any = None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None,
                 execution_trace_observer: Any = None, acc_events: bool = False,
                 use_cuda: bool | None = None, custom_trace_id_callback: Any = None,
                 enabled: bool = True, **_: Any) -> None:  # fmt: skip
        self.activities = set(activities or (ProfilerActivity.CPU,))
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.enabled = enabled
        self.acc_events = acc_events
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._events: list[FunctionEvent] = []
        self._t0 = time.perf_counter()
        self._step_start: float | None = None
        self._running = False

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        if not self.enabled or self._running:
            return
        self._running = True
        self._t0 = time.perf_counter()
        self._transition(self.schedule(self.step_num))

    def stop(self) -> None:
        if not self._running:
            return
        self._end_step()
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._set_recording(False)
            self._ready()
        self._set_recording(False)
        self._running = False

    def step(self) -> None:
        """Mark the end of a training step (the schedule's clock)."""
        if not self._running:
            return
        self._end_step()
        prev = self.current_action
        self.step_num += 1
        new = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._set_recording(False)
            self._ready()
        self._transition(new, prev)
        self._step_start = time.perf_counter()

    def _transition(self, new: ProfilerAction, prev: ProfilerAction = ProfilerAction.NONE) -> None:
        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if new in recording or new == ProfilerAction.WARMUP:
            if (
                prev in (ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE)
                and not self.acc_events
            ):
                self._events = []
        self._set_recording(new in recording)
        self.current_action = new

    def _end_step(self) -> None:
        if self._step_start is not None and self in _active:
            self._add(f"ProfilerStep#{self.step_num}", self._step_start, time.perf_counter())
        self._step_start = None

    def _set_recording(self, on: bool) -> None:
        if on and self not in _active:
            _active.append(self)
        elif not on and self in _active:
            _active.remove(self)

    def _ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _add(self, name: str, t0: float, t1: float) -> None:
        self._events.append(FunctionEvent(name, (t0 - self._t0) * 1e6, (t1 - self._t0) * 1e6))

    # -- results --------------------------------------------------------------------------------
    def events(self) -> EventList:
        """The recorded blocks, in the order they ended."""
        return EventList(self._events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:  # fmt: skip
        """One row per block name: calls and host time."""
        return EventList(_avg(self._events))

    def export_chrome_trace(self, path: str) -> None:
        """Write the blocks as Chrome trace JSON (for GT's ops, export GT's own trace)."""
        events = [{"name": e.name, "ph": "X", "ts": e.start_us, "dur": e.cpu_time_total,
                   "pid": 0, "tid": 0, "cat": "user_annotation"} for e in self._events]  # fmt: skip
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:  # fmt: skip
    """An ``on_trace_ready`` that writes each recorded cycle as Chrome trace JSON to ``dir_name``."""

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json"))

    return handler
