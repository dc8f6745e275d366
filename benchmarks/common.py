"""Shared helpers for the GT benchmarks: timing, statistics, result tables, reference processes.

Every benchmark compares GT against a *reference* measured in the same run on the same machine, and
judges the ratio, never an absolute number: the machines these run on are shared and noisy.

Reference processes are started with the ``spawn`` method (no inherited ZeroMQ contexts or threads)
and are always stopped, even on Ctrl-C: :class:`Children` terminates, joins with a timeout and
finally kills everything it started.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import platform
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: Environment variables that choose BLAS thread pools; GT workers and references must agree.
BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Further variables that change what OpenBLAS does; printed so a run can be reproduced.
BLAS_INFO_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "GT_BLAS_THREADS")

_SPAWN = mp.get_context("spawn")


# ----------------------------------------------------------------------------------------- timing
def now() -> float:
    """The benchmark clock (``time.perf_counter``), in seconds."""
    return time.perf_counter()


def time_call(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best(samples: Sequence[float]) -> float:
    """The smallest sample (best-of-N for times)."""
    return min(samples)


def median(samples: Sequence[float]) -> float:
    """The median sample."""
    return statistics.median(samples)


def spread(samples: Sequence[float]) -> float:
    """Relative spread ``(max - min) / median`` of the samples: a quick noise indicator."""
    if len(samples) < 2:
        return 0.0
    m = statistics.median(samples)
    return (max(samples) - min(samples)) / m if m else 0.0


def fmt_si(value: float, unit: str) -> str:
    """Format ``value`` with an SI prefix and 3 digits: ``fmt_si(2.5e-4, 's') == '250 us'``."""
    if value == 0 or value != value:  # zero or NaN
        return f"{value:.3g} {unit}"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value / 1e-9:.3g} n{unit}"


# ----------------------------------------------------------------------------------------- results
@dataclass
class Result:
    """One benchmark's outcome: GT's number against the reference's, judged by their ratio.

    Args:
        name: short benchmark name.
        unit: unit of ``gt`` and ``ref`` (``"ops/s"``, ``"s"``, ``"B/s"`` ...).
        gt: GT's number.
        ref: the reference's number, measured in the same run.
        target: the ratio ``gt / ref`` must be at least this (``higher_is_better``) or at most this.
        higher_is_better: ``True`` for rates, ``False`` for times.
        note: what the reference is, printed under the table.
        samples: raw samples per side, for the spread column and the JSON dump.
    """

    name: str
    unit: str
    gt: float
    ref: float
    target: float
    higher_is_better: bool
    note: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """``gt / ref``."""
        return self.gt / self.ref if self.ref else float("inf")

    @property
    def passed(self) -> bool:
        """Whether the ratio meets the target."""
        if self.higher_is_better:
            return self.ratio >= self.target
        return self.ratio <= self.target

    @property
    def target_text(self) -> str:
        """The target as ``>= 1.00x`` or ``<= 1.30x``."""
        return f"{'>=' if self.higher_is_better else '<='} {self.target:.2f}x"

    def noise(self) -> str:
        """Relative spread of the GT and reference samples, as ``gt%/ref%``."""
        g = self.samples.get("gt", [])
        r = self.samples.get("ref", [])
        if len(g) < 2 and len(r) < 2:
            return "-"
        return f"{spread(g) * 100:.0f}%/{spread(r) * 100:.0f}%"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "name": self.name,
            "unit": self.unit,
            "gt": self.gt,
            "ref": self.ref,
            "ratio": self.ratio,
            "target": self.target,
            "higher_is_better": self.higher_is_better,
            "passed": self.passed,
            "note": self.note,
            "samples": self.samples,
        }


_COLUMNS = ("benchmark", "gt", "reference", "ratio", "target", "spread gt/ref", "result")


def result_row(r: Result) -> tuple[str, ...]:
    """One table row for ``r``."""
    return (
        r.name,
        fmt_si(r.gt, r.unit),
        fmt_si(r.ref, r.unit),
        f"{r.ratio:.2f}x",
        r.target_text,
        r.noise(),
        "PASS" if r.passed else "FAIL",
    )


def format_table(results: Sequence[Result]) -> str:
    """Results as an aligned plain-text table."""
    rows = [_COLUMNS, *(result_row(r) for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_markdown(results: Sequence[Result]) -> str:
    """Results as a Markdown table (for RESULTS.md)."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(result_row(r)) + " |" for r in results]
    return "\n".join(lines)


def print_result_line(r: Result) -> None:
    """Print one result as soon as it is known (the table at the end repeats it)."""
    row = result_row(r)
    print(
        f"[{row[-1]}] {r.name}: gt {row[1]}, reference {row[2]}, ratio {row[3]} "
        f"(target {row[4]}, spread {row[5]})",
        flush=True,
    )


# ----------------------------------------------------------------------------------------- machine
def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (or :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), else ``os.cpu_count()``."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def git_revision(path: str) -> str:
    """The short git commit of the repository holding ``path`` (``-dirty`` if modified)."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=path,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "not a git checkout"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info() -> dict[str, str]:
    """What a result depends on: CPU, cores, load, library versions, BLAS environment."""
    import msgpack  # noqa: PLC0415 - keep module import cheap for spawned children
    import numpy as np  # noqa: PLC0415
    import zmq  # noqa: PLC0415

    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    info = {
        "cpu": cpu_model(),
        "cores": f"{usable_cores()} usable of {os.cpu_count()}",
        "loadavg": load,
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "numpy": np.__version__,
        "pyzmq": f"{zmq.__version__} (libzmq {zmq.zmq_version()})",
        "msgpack": ".".join(map(str, msgpack.version)),
        "platform": platform.platform(),
    }
    try:
        import gt  # noqa: PLC0415

        gt_dir = os.path.dirname(os.path.dirname(os.path.abspath(gt.__file__)))
        info["gt"] = f"{gt_dir} ({git_revision(gt_dir)})"
    except ImportError as exc:
        info["gt"] = f"not importable: {exc}"
    for var in BLAS_VARS + BLAS_INFO_VARS:
        if var in os.environ:
            info[var] = os.environ[var]
    return info


def print_machine(info: dict[str, str]) -> None:
    """Print :func:`machine_info` as ``key: value`` lines."""
    width = max(len(k) for k in info)
    for k, v in info.items():
        print(f"  {k.ljust(width)}  {v}")


def _proc_stat_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from ``/proc/stat``."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return (total - idle) / hz, total / hz


def _own_cpu() -> float:
    """CPU seconds of this process plus its waited-for descendants."""
    import resource  # noqa: PLC0415 - POSIX only

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class OtherLoad:
    """How much CPU *other* programs used while we ran: a noise indicator for a shared machine.

    Call :meth:`start`, run everything (and stop and reap every child process), then
    :meth:`share`: the machine's busy CPU time minus ours, as a fraction of all CPU time.
    """

    def __init__(self) -> None:
        self._busy0 = self._total0 = self._own0 = 0.0

    def start(self) -> None:
        """Take the first reading."""
        try:
            self._busy0, self._total0 = _proc_stat_cpu()
        except (OSError, ValueError, IndexError):
            pass
        self._own0 = _own_cpu()

    def share(self) -> float | None:
        """Other programs' CPU use since :meth:`start`, 0..1 of the machine (None if unknown)."""
        try:
            busy, total = _proc_stat_cpu()
        except (OSError, ValueError, IndexError):
            return None
        if total <= self._total0 or not self._total0:
            return None
        others = (busy - self._busy0) - (_own_cpu() - self._own0)
        return max(0.0, others / (total - self._total0))


def process_cpu_s(pid: int, tid: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by every thread of process ``pid``, or by its
    thread ``tid`` alone (None if gone)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The direct children of process ``pid`` (Linux; empty where unknown)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


class CpuSampler:
    """Samples the CPU seconds of named processes every ``period`` s on a thread of its own, so
    a benchmark can say how much CPU each used in any time window (:meth:`rate`)."""

    def __init__(self, pids: dict[str, int], period: float = 0.2) -> None:
        import threading  # noqa: PLC0415 - only benchmarks that sample need it

        self.pids, self.period = dict(pids), period
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CpuSampler:
        """Begin sampling (returns self)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take a last sample and stop."""
        self._stop.set()
        self._thread.join(5)

    def _take(self) -> None:
        cpu = {name: process_cpu_s(pid) for name, pid in self.pids.items()}
        self.samples.append((time.monotonic(), {k: v for k, v in cpu.items() if v is not None}))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._take()
        self._take()

    def rate(self, name: str, t0: float, t1: float) -> float:
        """Cores ``name`` used on average between the samples nearest inside ``[t0, t1]``."""
        inside = [(t, c[name]) for t, c in self.samples if t0 <= t <= t1 and name in c]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return float("nan")
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def wait_for_idle(max_wait: float, busy_below: float = 0.1, window: float = 1.0) -> float | None:
    """Wait until the machine's CPUs are less than ``busy_below`` busy over ``window`` seconds.

    Gives up after ``max_wait`` seconds. Returns the last busy share measured (None if unknown).
    """
    deadline = time.monotonic() + max_wait
    share = None
    while True:
        try:
            b0, t0 = _proc_stat_cpu()
            time.sleep(window)
            b1, t1 = _proc_stat_cpu()
        except (OSError, ValueError, IndexError):
            return None
        share = (b1 - b0) / (t1 - t0) if t1 > t0 else None
        if share is None or share < busy_below or time.monotonic() >= deadline:
            return share


def set_blas_threads(n: int) -> None:
    """Set every BLAS thread-count variable to ``n`` for processes started from now on.

    A process reads these when it first loads its BLAS library (when NumPy is imported), so the
    reference processes and the GT workers must be started after this call. Other OpenBLAS
    variables (``OPENBLAS_CORETYPE``, ``OPENBLAS_L2_SIZE``) are left alone; children inherit them.
    """
    for var in BLAS_VARS:
        os.environ[var] = str(n)


def process_env(pid: int) -> dict[str, str]:
    """Another process's environment from ``/proc/PID/environ`` (empty where unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


# ----------------------------------------------------------------------------------------- sockets
def bind_random(sock: Any) -> str:
    """Bind a ZeroMQ socket to a fresh ipc endpoint, the transport GT's own local clusters use
    (so references and GT move bytes the same way); returns the endpoint to connect to."""
    import tempfile
    import uuid

    ep = f"ipc://{tempfile.gettempdir()}/gt-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    sock.bind(ep)
    return ep


def parent_alive(parent_pid: int) -> bool:
    """Whether the process that started us is still our parent (for loops in child processes)."""
    return os.getppid() == parent_pid


# ----------------------------------------------------------------------------------------- children
class ChildError(RuntimeError):
    """A reference process failed to start or to answer in time."""


class Children:
    """Reference processes that are stopped when the ``with`` block ends, however it ends.

    Each child gets its end of a duplex pipe as its first argument. It must first send one ready
    message (e.g. its endpoint, or an exception if its setup failed); after that, parent and child
    may exchange more messages (:meth:`send`, :meth:`recv`). A shared stop event is the second
    argument and the parent's pid the third; child loops must wait with timeouts, and return when
    the event is set or the parent is gone.

    Example::

        with Children() as kids:
            endpoint = kids.start(echo_main, extra_arg)
            ...
    """

    def __init__(self, start_timeout: float = 30.0, stop_timeout: float = 3.0):
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.stop_event = _SPAWN.Event()
        self.procs: list[Any] = []
        self.pipes: list[mpc.Connection] = []

    def start(self, target: Callable[..., None], *args: Any, name: str | None = None) -> Any:
        """Start ``target(conn, stop_event, parent_pid, *args)`` in a spawned process.

        Returns:
            The first object the child sends on ``conn`` (its ready message).

        Raises:
            ChildError: the child died or sent nothing within ``start_timeout`` seconds, or sent an
                exception instance (its startup failed).
        """
        recv_end, send_end = _SPAWN.Pipe(duplex=True)
        proc = _SPAWN.Process(
            target=target,
            args=(send_end, self.stop_event, os.getpid(), *args),
            name=name or getattr(target, "__name__", "child"),
            daemon=True,
        )
        proc.start()
        send_end.close()
        self.procs.append(proc)
        self.pipes.append(recv_end)
        return self.recv(len(self.pipes) - 1, self.start_timeout)

    def recv(self, index: int, timeout: float) -> Any:
        """The next message from child ``index``, waiting at most ``timeout`` seconds."""
        pipe, proc = self.pipes[index], self.procs[index]
        deadline = time.monotonic() + timeout
        while True:
            if pipe.poll(0.1):
                try:
                    msg = pipe.recv()
                except EOFError:
                    raise ChildError(
                        f"{proc.name} closed its pipe (exit code {proc.exitcode})"
                    ) from None
                if isinstance(msg, BaseException):
                    raise ChildError(f"{proc.name} failed: {msg!r}")
                return msg
            if not proc.is_alive():
                raise ChildError(f"{proc.name} exited with code {proc.exitcode}")
            if time.monotonic() > deadline:
                raise ChildError(f"{proc.name} did not answer within {timeout:.0f}s")

    def send(self, index: int, msg: Any) -> None:
        """Send ``msg`` to child ``index``."""
        self.pipes[index].send(msg)

    def pids(self) -> list[int]:
        """Pids of the children (for profilers)."""
        return [p.pid for p in self.procs if p.pid is not None]

    def stop(self) -> None:
        """Set the stop event, then join, terminate and kill whatever is still running."""
        self.stop_event.set()
        deadline = time.monotonic() + self.stop_timeout
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(self.stop_timeout)
            if p.is_alive():
                p.kill()
                p.join(self.stop_timeout)
        for pipe in self.pipes:
            pipe.close()
        self.procs.clear()
        self.pipes.clear()

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def child_guard(conn: mpc.Connection) -> Iterator[None]:
    """In a child: report a startup/runtime exception to the parent instead of dying silently."""
    try:
        yield
    except KeyboardInterrupt:
        pass  # the parent got Ctrl-C too and is stopping us
    except BaseException as exc:
        try:
            conn.send(RuntimeError(f"{type(exc).__name__}: {exc}"))
        except (OSError, ValueError):
            pass
        raise
    finally:
        conn.close()


def flush_stdout() -> None:
    """Flush stdout (children share the terminal)."""
    sys.stdout.flush()


def read_child_line(proc: subprocess.Popen, timeout: float) -> str:
    """A child process's next line of output, waiting at most ``timeout`` seconds.

    Raises:
        RuntimeError: it said nothing in time, or it exited (with its exit code).
    """
    what = " ".join(map(str, proc.args[1:4])) if isinstance(proc.args, list) else str(proc.args)
    if not select.select([proc.stdout.fileno()], [], [], timeout)[0]:
        raise RuntimeError(f"{what} said nothing within {timeout:.0f} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{what} exited with code {proc.wait(10)}")
    return line


def stop_child(proc: subprocess.Popen | None) -> None:
    """Stop a child if it still runs (SIGTERM, then SIGKILL after 10 s), reap it, close its pipes."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            f.close()
