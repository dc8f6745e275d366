"""The process's current connection: ``gt.connect``, auto-start, ``gt.gpu_workers``.

The first op of a program calls :func:`get_connection`. It connects to ``$GT_DISPATCHER`` when that
is set, and otherwise starts a private local cluster (a dispatcher and ``$GT_WORKERS`` workers, in
separate processes) that is stopped when the program exits.
"""

from __future__ import annotations

import atexit
import os
import threading

from gt.runtime import launch, memory_settings
from gt.runtime.client.connection import Connection
from gt.runtime.sharding import config as shard_config

_current: Connection | None = None
_lock = threading.Lock()
_requested_workers: int | None = None


def connect(address: str | None = None, **kwargs) -> Connection:
    """Connect this process to a dispatcher and make it the current connection.

    Args:
        address: a front endpoint as printed by ``gt dispatcher``; ``None`` starts a local cluster.
        **kwargs: passed to :class:`gt.runtime.client.Connection` (timeout, window, ...).

    Returns:
        The new connection. A previous current connection is closed.
    """
    global _current
    with _lock:
        if _current is not None:
            _current.close()
            _current = None
        _current = _open(address, **kwargs)
        return _current


def _workers_from_env() -> int | None:
    """``$GT_WORKERS``: a number of local workers, or ``auto`` (or unset): one per GPU, else 1."""
    env = os.environ.get("GT_WORKERS", "").strip()
    if not env or env == "auto":
        return None
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"GT_WORKERS={env!r}: expected a number of workers or 'auto'") from None
    if n < 1:
        raise ValueError(f"GT_WORKERS={env!r}: needs at least 1 worker")
    return n


def _check_record_path(path: str) -> None:
    """Refuse a ``$GT_RECORD`` the recorder could not write, before anything starts."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"GT_RECORD={path}: no such folder {folder}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"GT_RECORD={path}: is a folder (name a .gtrace file)")


def _open(address: str | None, **kwargs) -> Connection:
    cluster = None
    recorder = None
    try:
        if os.environ.get("GT_RECORD"):
            _check_record_path(os.environ["GT_RECORD"])
        if address is None:
            n = _requested_workers or _workers_from_env()  # None: one per GPU, else 1
            # (a bad $GT_CONFIG or memory variable is reported here, before a cluster starts,
            # not as a worker that exits)
            shard_config.from_env()
            memory_settings.from_env()
            cluster = launch.LocalCluster(workers=n)
            address = cluster.address
        if os.environ.get("GT_RECORD"):
            recorder = launch.RecorderProcess(
                address, os.environ["GT_RECORD"], local=cluster is not None
            )
        conn = Connection(address, cluster=cluster, **kwargs)
        conn.recorder = recorder
        return conn
    except BaseException:
        if recorder is not None:
            recorder.stop()
        if cluster is not None:
            cluster.stop()
        raise


def get_connection() -> Connection:
    """The current connection, made on first use from ``$GT_DISPATCHER`` or a local cluster."""
    global _current
    conn = _current
    if conn is not None and not conn.closed:
        return conn
    with _lock:
        if _current is None or _current.closed:
            _current = _open(os.environ.get("GT_DISPATCHER") or None)
        return _current


def current() -> Connection | None:
    """The current connection if one is open, without starting anything."""
    return _current if _current is not None and not _current.closed else None


def disconnect() -> None:
    """Close the current connection (and its local cluster, if it started one)."""
    global _current
    with _lock:
        if _current is not None:
            _current.close()
            _current = None


def gpu_workers(n: int) -> None:
    """Ask for ``n`` workers in the local cluster that the first op starts.

    Must be called before the first op; with ``$GT_DISPATCHER`` set it has no effect.
    """
    global _requested_workers
    if n < 1:
        raise ValueError("gpu_workers needs n >= 1")
    if current() is not None and current().cluster is not None:
        raise RuntimeError(
            "gpu_workers() must be called before the first op starts the local cluster"
        )
    _requested_workers = n


atexit.register(disconnect)


def mark(label: str) -> None:
    """Put a named mark on every timeline (and in recordings), e.g. ``gt.mark("epoch 3")``."""
    get_connection().mark(label)
