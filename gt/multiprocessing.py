"""``gt.multiprocessing``: PyTorch's ``torch.multiprocessing``: Python's :mod:`multiprocessing`
with ``spawn``/``start_processes`` and the sharing-strategy settings.

GT's tensors live on the cluster, not in the process, so nothing is shared through memory: each
child process that uses gt opens a connection of its own. :func:`start_processes` points the
children at the parent's cluster (``$GT_DISPATCHER``, from the parent's current connection) when
the parent has one and ``$GT_DISPATCHER`` is not set already; a child of a parent without a
connection starts as any new program does.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import warnings
from multiprocessing import *  # noqa: F403 - PyTorch's module re-exports all of it
from typing import Any

from gt import session as _session

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           *multiprocessing.__all__]  # fmt: skip

if sys.platform in ("darwin", "win32"):
    _sharing_strategy = "file_system"
    _all_sharing_strategies = {"file_system"}
else:
    _sharing_strategy = "file_descriptor"
    _all_sharing_strategies = {"file_descriptor", "file_system"}


def set_sharing_strategy(new_strategy: str) -> None:
    """Set the strategy for sharing CPU tensors (recorded: GT's tensors are not in the process)."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(
            f"invalid sharing strategy {new_strategy!r}, expected one of {_all_sharing_strategies}"
        )
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current strategy for sharing CPU tensors."""
    return _sharing_strategy


def get_all_sharing_strategies() -> set[str]:
    """The strategies this system supports."""
    return _all_sharing_strategies


class ProcessException(Exception):
    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """Exception raised when a process failed due to an exception raised by the code."""


class ProcessExitedException(ProcessException):
    """Exception raised when a process failed due to signal or exited with a specific code."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None):  # fmt: skip
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> Any:
        return (type(self),
                (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name))  # fmt: skip


def _set_pdeathsig(sig: int) -> None:
    """Have Linux send ``sig`` to this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _wrap(fn: Any, i: int, args: tuple, error_file: str, address: str | None) -> None:
    _set_pdeathsig(signal.SIGINT)
    if address and not os.environ.get("GT_DISPATCHER"):
        os.environ["GT_DISPATCHER"] = address
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # SIGINT: killed by the parent
    except Exception:
        import traceback

        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes :func:`start_processes` started, to :meth:`join`."""

    def __init__(self, processes: list, error_files: list) -> None:
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(process.pid) for process in self.processes]

    def _join_procs_with_timeout(self, timeout: float) -> None:
        import time

        end = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0, end - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Join the processes: True once all have exited, False if some still run after
        ``timeout``. If one exited with an error, stop the others (SIGTERM, after
        ``grace_period``; SIGKILL if need be) and raise :class:`ProcessRaisedException` (its
        traceback) or :class:`ProcessExitedException` (its exit code or signal)."""
        if len(self.sentinels) == 0:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return len(self.sentinels) == 0
        if grace_period is not None:
            self._join_procs_with_timeout(grace_period)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        self._join_procs_with_timeout(30 if grace_period is None else grace_period)
        for process in self.processes:
            if process.is_alive():
                process.kill()
            process.join()
        failed_process = self.processes[error_index]
        if not os.access(self.error_files[error_index], os.R_OK):
            exitcode = failed_process.exitcode
            if exitcode < 0:
                try:
                    name = signal.Signals(-exitcode).name
                except ValueError:
                    name = f"<Unknown signal {-exitcode}>"
                raise ProcessExitedException(
                    f"process {error_index:d} terminated with signal {name}",
                    error_index=error_index, error_pid=failed_process.pid, exit_code=exitcode,
                    signal_name=name,
                )  # fmt: skip
            raise ProcessExitedException(
                f"process {error_index:d} terminated with exit code {exitcode:d}",
                error_index=error_index, error_pid=failed_process.pid, exit_code=exitcode,
            )  # fmt: skip
        with open(self.error_files[error_index], "rb") as fh:
            original_trace = pickle.load(fh)
        os.remove(self.error_files[error_index])
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n"
        msg += original_trace
        raise ProcessRaisedException(msg, error_index, failed_process.pid)


class SpawnContext(ProcessContext):
    def __init__(self, processes: list, error_files: list) -> None:
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.", stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(fn: Any, args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """Start ``nprocs`` processes running ``fn(i, *args)`` with ``start_method``; wait for them
    (``join=True``, returning None) or return their :class:`ProcessContext`."""
    mp = multiprocessing.get_context(start_method)
    conn = _session.current()
    address = conn.address if conn is not None else None
    error_files, processes = [], []
    for i in range(nprocs):
        # each process writes its traceback to a file of its own (that it exists means it failed)
        tf = tempfile.NamedTemporaryFile(prefix="gt-errorfile-", suffix=".pickle", delete=False)
        tf.close()
        os.unlink(tf.name)
        process = mp.Process(target=_wrap, args=(fn, i, args, tf.name, address), daemon=daemon)
        process.start()
        error_files.append(tf.name)
        processes.append(process)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Any, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """Spawn ``nprocs`` processes that run ``fn(i, *args)`` (``i`` the process index).

    If one of them exits with a non-zero status, the others are stopped and the cause is raised:
    :class:`ProcessRaisedException` with the child's traceback when it raised, else
    :class:`ProcessExitedException`. ``fn`` must be picklable (defined at a module's top level).
    Returns None with ``join=True``, else the :class:`ProcessContext`.
    """
    if start_method != "spawn":
        msg = (f"This method only supports start_method=spawn (got: {start_method}).\n"
               "To use a different start_method use:\n\t\t"
               " torch.multiprocessing.start_processes(...)")  # fmt: skip
        warnings.warn(msg, FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
