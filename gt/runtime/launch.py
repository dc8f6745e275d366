"""Starting and stopping local clusters: a dispatcher and its workers as separate processes.

Every process started here dies with its parent: on Linux the kernel sends it SIGTERM when the
parent exits (``PR_SET_PDEATHSIG``), and each also polls its parent's pid as a portable fallback.
Nothing binds a fixed port and nothing is left on disk.

GPUs: a cluster started without a worker count gets one worker per GPU that CuPy can use (counted
by a ``gt worker --list-devices`` child, so no CuPy is ever imported here), else one NumPy worker.
Local worker ``k`` is started with ``--slot k`` and pins itself to CUDA device ``k % devices``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from typing import Any

from gt.runtime import discovery, env_checks
from gt.runtime.control import ControlError, request

_PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Any:
    """libc's ``prctl``, looked up once in this process (``None`` off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # noqa: PLC0415 - only where there is a prctl

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: one C call and nothing else. An import or a
    ``dlopen`` here could wait for ever on a lock that another thread of the parent held at the
    fork (a multithreaded dispatcher spawning workers), leaving a child that never starts."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


#: The folder this GT was imported from (the one holding the ``gt`` package).
_GT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _found_anyway(root: str) -> bool:
    """Whether a new interpreter finds packages in ``root`` without being told (site-packages)."""
    paths = [*site.getsitepackages(), site.getusersitepackages()]
    return any(os.path.realpath(p) == os.path.realpath(root) for p in paths)


def gt_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a GT process started here (``python -m gt ...``), so that it runs this
    very GT: ``-m`` would put the current directory first on the child's path, and a ``gt``
    folder there (another checkout, a worktree) would be imported instead, its opcodes and
    kernels silently not the client's. ``PYTHONSAFEPATH`` leaves that directory out (Python
    3.11+; 3.10 ignores it), and where a new interpreter would not find this GT by itself (a
    checkout, an editable install, ``PYTHONPATH`` only in the parent) its folder goes first on
    ``PYTHONPATH``; the user's other entries keep their order."""
    env = dict(os.environ if base is None else base)
    env["PYTHONSAFEPATH"] = "1"
    if not _found_anyway(_GT_ROOT):
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != _GT_ROOT]
        env["PYTHONPATH"] = os.pathsep.join([_GT_ROOT, *rest])
    return env


def blas_threads_per_worker(n_workers: int) -> int:
    """Split the machine's cores between workers so their BLAS pools do not oversubscribe it."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    return max(1, cores // max(1, n_workers))


#: How many local workers their dispatcher starts (so a worker knows who shares its device).
LOCAL_WORKERS_ENV = "GT_LOCAL_WORKERS"


def worker_env(n_workers: int) -> dict[str, str]:
    """The environment for a worker: BLAS thread counts set unless the user already chose them,
    and how many local workers there are (:data:`LOCAL_WORKERS_ENV`); it runs this GT
    (:func:`gt_env`)."""
    env = gt_env()
    env[LOCAL_WORKERS_ENV] = str(n_workers)
    threads = os.environ.get("GT_BLAS_THREADS") or str(blas_threads_per_worker(n_workers))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, threads)
    return env


#: Local workers started so far per back endpoint (their slots, hence their GPUs).
_spawned: dict[str, int] = {}
GPU_PROBE_TIMEOUT_S = 120.0


def local_gpus(timeout: float = GPU_PROBE_TIMEOUT_S) -> list[dict[str, Any]]:
    """The GPUs a local worker would use (``gt worker --list-devices --json`` in a child process:
    each passed a test kernel); empty without CuPy, with ``GT_BACKEND=numpy``, or on any failure.
    """
    if os.environ.get("GT_BACKEND") == "numpy":
        return []
    # (GT_CUPY_DOUBLE: the test suite's CuPy stand-in, which is no installed ``cupy``)
    double = os.environ.get("GT_CUPY_DOUBLE", "") not in ("", "0")
    if importlib.util.find_spec("cupy") is None and not double:
        return []
    cmd = [sys.executable, "-m", "gt", "worker", "--list-devices", "--json"]
    try:
        out = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                             check=False, env=gt_env()).stdout  # fmt: skip
        found = json.loads(out.decode() or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    return found if isinstance(found, list) else []


#: The usable GPUs (``"0,1,3"``) a dispatcher with ``--workers auto`` found, for the local workers
#: it starts: slot ``k`` takes the ``k``-th of them, so a GPU that failed the probe gets none.
USABLE_GPUS_ENV = "GT_USABLE_GPUS"


def default_workers() -> int:
    """One worker per usable local GPU, else 1."""
    return max(1, len(local_gpus()))


def next_slot(back: str, n_workers: int) -> int:
    """The slot of the next local worker of the dispatcher at ``back``: ``0..n_workers-1`` in
    turn (a dispatcher restarting all its workers starts again at 0)."""
    k = _spawned.get(back, 0)
    _spawned[back] = k + 1
    return k % max(1, n_workers)


def spawn_worker(
    back: str,
    *,
    parent_pid: int,
    n_workers: int = 1,
    extra: list[str] | None = None,
    slot: int | None = None,
) -> subprocess.Popen:
    """Start ``gt worker`` connected straight to a dispatcher's back endpoint.

    ``slot`` (default: the next one, see :func:`next_slot`) picks its GPU: ``slot % devices``.
    """
    if slot is None:
        slot = next_slot(back, n_workers)
    cmd = [
        sys.executable,
        "-m",
        "gt",
        "worker",
        "--back",
        back,
        "--parent-pid",
        str(parent_pid),
        "--slot",
        str(slot),
        *(extra or []),
    ]
    return subprocess.Popen(
        cmd,
        env=worker_env(n_workers),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if _PRCTL is not None else None,
    )


def stop_process(proc: subprocess.Popen, sig: int, timeout: float) -> int | None:
    """Ask a child to stop with ``sig``, kill it after ``timeout`` s; close its stdout pipe."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


class LocalCluster:
    """A private dispatcher with ``workers`` workers, owned by this process.

    Args:
        workers: number of workers to start (``None``: one per usable GPU, else 1).
        start_timeout: seconds to wait for the dispatcher to report its endpoints.
        extra_args: more ``gt dispatcher`` arguments (e.g. ``["--max-in-flight", "8"]``).
    """

    def __init__(
        self,
        workers: int | None = 1,
        *,
        start_timeout: float = 30.0,
        extra_args: list[str] | None = None,
    ):
        if workers is not None and workers < 1:
            raise ValueError("a local cluster needs at least one worker")
        env_checks.check()  # (before any process starts: see gt.runtime.env_checks)
        if workers is None:
            start_timeout += GPU_PROBE_TIMEOUT_S  # the dispatcher counts GPUs first
        self.workers = workers or 0
        # ipc sockets in a private directory: only this user can connect, and nothing needs keys
        self.ipc_dir = tempfile.mkdtemp(prefix="c-", dir=discovery.runtime_dir())
        cmd = [
            sys.executable,
            "-m",
            "gt",
            "dispatcher",
            "--workers",
            "auto" if workers is None else str(workers),
            "--parent-pid",
            str(os.getpid()),
            "--ready-json",
            "--ipc",
            self.ipc_dir,
            *(extra_args or []),
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=gt_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
            # (a session of its own: a terminal's Ctrl-C reaches the program, whose handler may
            # still save a checkpoint through the cluster; the cluster goes when it exits)
            start_new_session=True,
        )
        deadline = time.monotonic() + start_timeout
        self.endpoints = self._read_ready(start_timeout)
        started = self.endpoints.pop("local_workers", None)
        if workers is None:
            self.workers = started if isinstance(started, int) and started > 0 else 1
        self.address: str = self.endpoints["front"]
        self._wait_for_workers(deadline)

    def _wait_for_workers(self, deadline: float) -> None:
        """Return once every worker has registered, so the first clients spread over all of them."""
        while True:
            try:
                alive = sum(
                    w["alive"] for w in request(self.address, "stats", timeout=2.0)["workers"]
                )
            except ControlError:
                alive = -1
            if alive >= self.workers:
                return
            if time.monotonic() > deadline or self.proc.poll() is not None:
                code = self.proc.poll()
                self.stop()
                why = ("" if code is None else
                       f" (its dispatcher stopped, code {code}: their messages are above)")  # fmt: skip
                raise RuntimeError(
                    f"the local GT cluster's {self.workers} worker(s) did not all start{why}"
                )
            time.sleep(0.02)

    def _read_ready(self, timeout: float) -> dict[str, Any]:
        """The dispatcher's ready line: the first line of its stdout that is a JSON object (a
        stray line before it, a warning say, is passed on to our stderr)."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(b"{"):
                    return json.loads(line)
                sys.stderr.write(line.decode(errors="replace") + "\n")
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                code = self.proc.poll()
                self.stop()
                why = (
                    f"exited with code {code}"
                    if code is not None
                    else f"did not start within {timeout:.0f}s"
                )
                raise RuntimeError(f"the local GT dispatcher {why}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                buf += chunk

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the dispatcher (which stops its workers); kill it if it does not go in time."""
        stop_process(self.proc, signal.SIGTERM, timeout)
        shutil.rmtree(self.ipc_dir, ignore_errors=True)
        # A dispatcher that was SIGKILLed could not remove its discovery file; ours is ours to.
        discovery.forget(self.proc.pid)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class RecorderProcess:
    """``gt record`` in a child process, writing a dispatcher's event bus to a ``.gtrace`` file.

    The constructor returns once the recorder has received its first event, so nothing the
    caller does afterwards is missed. :meth:`stop` ends it cleanly (the file gets its index).
    """

    def __init__(
        self, address: str, path: str, *, start_timeout: float = 20.0, local: bool = False
    ) -> None:
        """``local``: the cluster is this program's own, so ``$GT_TRACE`` is its processes'."""
        if local and os.environ.get("GT_TRACE", "").strip().lower() == "off":
            raise env_checks.MS.SettingError(
                "$GT_TRACE=off: the cluster publishes no events, so there is nothing to record "
                "(unset it, or set summary)"
            )
        self.path = path
        cmd = [
            sys.executable,
            "-m",
            "gt",
            "record",
            "-o",
            str(path),
            "--connect",
            address,
            "--ready-line",
            "--quiet",
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=gt_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
            # (a session of its own: a terminal's Ctrl-C reaches the program, whose handler may
            # still save a checkpoint through the cluster; the cluster goes when it exits)
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], start_timeout)
        line = os.read(fd, 4096) if ready else b""
        if b"ready" not in line:
            self.stop()
            raise RuntimeError(
                f"the recorder for {path} did not start (exit code {self.proc.poll()})"
            )

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop recording (the file gets its index); returns the recorder's exit code."""
        return stop_process(self.proc, signal.SIGINT, timeout)
