"""Discovery files: how ``gt top`` and friends find running dispatchers with no arguments.

A dispatcher writes ``dispatcher-<pid>.json`` with its endpoints into a private runtime directory
(mode 0700) and removes it on exit. Readers skip files whose process is gone and delete them.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def runtime_dir() -> Path:
    """``$GT_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/gt``, else ``<tmp>/gt-<uid>``; created 0700."""
    base = os.environ.get("GT_RUNTIME_DIR")
    if base:
        path = Path(base)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "gt"
    else:
        path = Path(tempfile.gettempdir()) / f"gt-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_uid == os.getuid():
        os.chmod(path, 0o700)
    return path


def write(info: dict[str, Any]) -> Path:
    """Atomically write this process's discovery file; returns its path."""
    d = runtime_dir()
    path = d / f"dispatcher-{os.getpid()}.json"
    tmp = d / f".dispatcher-{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)
    return path


class IpcDirTaken(RuntimeError):
    """Another live dispatcher already serves this ``--ipc`` directory."""


_claimed: dict[str, int] = {}  # ipc directory -> the locked file, held while this process lives


def claim_ipc_dir(ipc_dir: str) -> None:
    """Hold an exclusive lock on ``<ipc_dir>/lock`` for this process's life, or raise IpcDirTaken.

    Two dispatchers binding the same ipc paths would not fail: the second silently takes the
    sockets' names from the first, whose clients and workers then talk to the wrong process. The
    kernel drops the lock when its holder dies, however it dies, so a lock left is never stale.
    """
    key = os.path.realpath(ipc_dir)
    if key in _claimed:
        return
    fd = os.open(os.path.join(ipc_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise IpcDirTaken(
            f"another dispatcher (pid {holder}) already serves {ipc_dir}; stop it or pick "
            "another directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _claimed[key] = fd


def release_ipc_dir(ipc_dir: str) -> None:
    """Let go of :func:`claim_ipc_dir`'s lock (a dispatcher that closed, its process going on)."""
    fd = _claimed.pop(os.path.realpath(ipc_dir), None)
    if fd is not None:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie we can see)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def forget(pid: int) -> None:
    """Remove the discovery file of a dispatcher that is known to be gone."""
    try:
        (runtime_dir() / f"dispatcher-{pid}.json").unlink()
    except OSError:
        pass


def live_dispatchers() -> list[dict[str, Any]]:
    """Every live dispatcher's discovery record, newest first; stale files are removed."""
    out = []
    for path in runtime_dir().glob("dispatcher-*.json"):
        try:
            info = json.loads(path.read_text())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not pid_alive(pid):
            try:
                path.unlink()
            except OSError:
                pass
            continue
        info["file"] = str(path)
        out.append(info)
    out.sort(key=lambda i: i.get("started", 0), reverse=True)
    return out
