"""``gt dispatcher``: serve many clients, with local workers (or ones added by ``gt worker``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from gt.cli.common import Subparsers, install_stop_signals, port_arg
from gt.cli.memory_flags import add_memory_flags, memory_from_args


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt dispatcher``."""
    p = subparsers.add_parser(
        "dispatcher", help="run a dispatcher (and local workers) for many clients"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (0.0.0.0 to serve a network; default 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        type=port_arg,
        default=0,
        help="client port; the other endpoints take the next four (default: free ports)",
    )
    p.add_argument(
        "--advertise",
        default=None,
        help="the host name or address others reach this machine by (default: --host, or this "
        "machine's name with 0.0.0.0)",
    )
    p.add_argument(
        "--keys",
        default=None,
        help="the cluster's keyring (default $GT_KEYS or ~/.config/gt/keys; made on first use): "
        "every socket uses ZeroMQ CURVE and lets in only the roles it serves",
    )
    p.add_argument(
        "--workers",
        type=_worker_count,
        default="auto",
        help="local workers to start (default auto: one per usable GPU, several per GPU allowed, "
        "else 1; 0 = wait for `gt worker`)",
    )
    p.add_argument(
        "--max-in-flight", type=int, default=4, help="batches in flight per worker (default 4)"
    )
    add_memory_flags(p, for_dispatcher=True)
    # used by LocalCluster: die with the parent, and print the endpoints as one JSON line
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--ready-json", action="store_true", help=argparse.SUPPRESS)
    # used by LocalCluster: serve on ipc sockets in this private directory (no keys needed)
    p.add_argument("--ipc", default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _ensure_keys(where: str | None) -> None:
    """Make the cluster's keyring on first use (and say where, and how to share it)."""
    from gt.runtime import security

    path = Path(where) if where else security.default_dir()
    if (path / "server.key").exists():
        return
    security.create(path)
    print(f"gt dispatcher: made the cluster's keys in {path} (gt keys export --role client DIR "
          "gives a tenant what it needs)", file=sys.stderr)  # fmt: skip


def _worker_count(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the number of workers cannot be negative")
    return n


def _ipc_back(ipc_dir: str) -> str:
    return f"ipc://{ipc_dir}/back"


def _start_workers_early(args: argparse.Namespace) -> list:
    """A private local cluster (``--ipc``, a number of workers): its back endpoint is known before
    it is bound, so its workers start first and import while the dispatcher does (ZeroMQ connects
    them once the endpoint exists); a cluster starts about a third of a second sooner."""
    if args.ipc is None or args.workers == "auto" or args.workers < 1:
        return []
    from gt.runtime.launch import spawn_worker

    back = _ipc_back(args.ipc)
    return [spawn_worker(back, parent_pid=os.getpid(), n_workers=args.workers)
            for _ in range(args.workers)]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run a dispatcher until SIGTERM, Ctrl-C or the death of ``--parent-pid``."""
    from gt.runtime.discovery import IpcDirTaken, claim_ipc_dir, pid_alive

    if args.ipc is not None:
        try:  # before any worker starts: early workers would join the dispatcher already there
            claim_ipc_dir(args.ipc)
        except IpcDirTaken as exc:
            print(f"gt dispatcher: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"gt dispatcher: cannot serve in {args.ipc}: {exc.strerror}", file=sys.stderr)
            return 1
    early = _start_workers_early(args)
    import zmq

    from gt.runtime import security
    from gt.runtime.dispatcher.loop import Dispatcher
    from gt.runtime.launch import USABLE_GPUS_ENV, local_gpus

    gpus = local_gpus() if args.workers == "auto" else []
    workers = max(1, len(gpus)) if args.workers == "auto" else args.workers
    if gpus:  # the local workers take these, one each (not a device that failed the probe)
        os.environ[USABLE_GPUS_ENV] = ",".join(str(int(g["index"])) for g in gpus)
    memory = memory_from_args(args)
    if args.ipc is None:
        _ensure_keys(args.keys)
    try:
        d = Dispatcher(args.host, args.port, max_in_flight=args.max_in_flight, memory=memory,
                       ipc_dir=args.ipc, keys=args.keys, advertise=args.advertise)  # fmt: skip
    except (security.KeysMissing, zmq.ZMQError, IpcDirTaken) as exc:
        for proc in early:
            proc.kill()
        print(f"gt dispatcher: {exc}", file=sys.stderr)
        return 1
    if d.keyring is not None:
        os.environ[security.KEYS_ENV] = str(d.keyring.path)  # for the workers it starts
    install_stop_signals(d.stop)
    if early and d.endpoints["back"] == _ipc_back(args.ipc):
        d.adopt_local_workers(early)
    else:
        for proc in early:
            proc.kill()
        d.start_local_workers(workers)
    if args.ready_json:
        sys.stdout.write(json.dumps({**d.endpoints, "local_workers": workers}) + "\n")
        sys.stdout.flush()
    else:
        on = f", one per GPU ({len(gpus)})" if gpus else ""
        print(f"GT dispatcher (pid {os.getpid()}) with {workers} local worker(s){on}")
        print(f"  clients connect to:  {d.address}")
        print(f"    GT_DISPATCHER={d.address} python train.py")
        print(f"  add a worker:        gt worker --connect {d.address}")
        print(
            f"  watch it:            gt top   (control {d.endpoints['control']},"
            f" events {d.endpoints['events']})"
        )
        if d.keyring is not None:
            print(f"  keys (CURVE):        {d.keyring.path}   (others need theirs: "
                  "gt keys export --role client|worker|monitor DIR)")  # fmt: skip
        print("Ctrl-C stops it.", flush=True)
    d.run(parent_pid=args.parent_pid)
    if args.ipc is not None and args.parent_pid and not pid_alive(args.parent_pid):
        # (its program died without stopping it, by SIGTERM or SIGKILL: nothing stays on disk)
        shutil.rmtree(args.ipc, ignore_errors=True)
    if d.shutdown_reason:
        print(f"gt dispatcher: {d.shutdown_reason}", file=sys.stderr)
        return 1
    return 0
