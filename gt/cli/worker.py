"""``gt worker --connect ADDR``: add a worker (this machine's GPU, or NumPy) to a dispatcher.

``--device N`` pins it to CUDA device ``N`` (CuPy's numbering: after ``CUDA_VISIBLE_DEVICES``);
a dispatcher's own workers get ``--slot K`` and take device ``K % devices``, so several workers may
share a GPU. ``--list-devices [--json]`` prints the GPUs a worker would use and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from gt.cli.common import Subparsers, install_stop_signals, positive_arg, resolve_endpoints
from gt.cli.memory_flags import add_memory_flags, memory_from_args


def add_parser(subparsers: Subparsers) -> None:
    """Register ``gt worker``."""
    p = subparsers.add_parser("worker", help="add a worker to a running dispatcher")
    p.add_argument("--connect", help="the dispatcher address printed by `gt dispatcher`")
    p.add_argument(
        "--backend",
        choices=["auto", "numpy", "cupy"],
        help="array backend (default auto: CuPy if a GPU runs a test kernel)",
    )
    p.add_argument(
        "--device",
        type=int,
        default=None,
        help="CUDA device index to run on (default: 0, or the dispatcher's choice)",
    )
    p.add_argument(
        "--list-devices",
        action="store_true",
        help="print the GPUs a worker would use (name, index, UUID, PCI bus id) and exit",
    )
    p.add_argument("--json", action="store_true", help="with --list-devices: as JSON")
    p.add_argument(
        "--bind",
        default=None,
        help="interface for the worker's data socket (default: the one this machine reaches the "
        "dispatcher from; 0.0.0.0 for all)",
    )
    p.add_argument(
        "--advertise",
        default=None,
        help="the host name or address clients and other workers reach this worker by "
        "(default: the bound address)",
    )
    p.add_argument(
        "--timeout",
        type=positive_arg,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the dispatcher to answer at --connect (default 10)",
    )
    add_memory_flags(p)
    # used by the dispatcher's own workers: its back endpoint, the worker's slot (its GPU is
    # slot % devices), and die with the dispatcher
    p.add_argument("--back", help=argparse.SUPPRESS)
    p.add_argument("--slot", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _list_devices(args: argparse.Namespace) -> int:
    from gt.runtime.worker.backend import list_devices

    devices = list_devices(args.backend)
    if args.json:
        print(json.dumps(devices))
    elif not devices:
        print("no usable GPU: workers here run NumPy")
    else:
        for d in devices:
            uuid = d.get("nvml_uuid") or "?"
            print(f"cuda:{d['index']}  {d['name']}  {d.get('pci_bus_id') or '?'}  {uuid}")
        from gt.runtime.worker.backend import cupy_module
        from gt.runtime.worker.nccl import nccl_summary

        print(nccl_summary(cupy_module(), len(devices)))
    return 0


def pick_device(slot: int | None, slurm_localid: str | None, count: Any,
                usable: str | None = None) -> int | None:  # fmt: skip
    """The CUDA device of a worker given no ``--device``: its slot among a dispatcher's local
    workers, else its task's place on the node under SLURM (``srun`` sets ``SLURM_LOCALID``, so
    ``srun --ntasks-per-node=GPUS gt worker ...`` puts one worker on each GPU), modulo the
    devices there are (``count()``); ``None`` on a machine without GPUs, or when neither says.
    ``usable``: a dispatcher's list of the GPUs that passed its probe (``"0,1,3"``, see
    :data:`gt.runtime.launch.USABLE_GPUS_ENV`): a slot takes the slot-th of those instead."""
    gpus = [int(v) for v in (usable or "").split(",") if v.strip().isdigit()]
    if slot is not None and gpus:
        return gpus[slot % len(gpus)]
    k = (
        slot
        if slot is not None
        else int(slurm_localid)
        if (slurm_localid or "").isdigit()
        else None
    )
    if k is None:
        return None
    n = count()
    return k % n if n else None


def sharing(slot: int | None, local: str | None, device: int | None, count: Any,
            usable: str | None = None) -> int:  # fmt: skip
    """How many of its dispatcher's ``local`` workers run where this one does, itself included:
    those whose slot picks its GPU, or all of them for a NumPy worker (``device`` None: they
    share the machine's RAM); 1 for a worker started on its own (no slot)."""
    n = int(local) if (local or "").isdigit() else 1
    if slot is None or n <= 1:
        return 1
    if device is None:
        return n
    return max(1, sum(pick_device(k, None, count, usable) == device for k in range(n)))


def run(args: argparse.Namespace) -> int:
    """Run a worker until its dispatcher goes away, SIGTERM or Ctrl-C; 1 if it cannot start."""
    if args.list_devices:
        return _list_devices(args)
    import zmq

    from gt.runtime.launch import LOCAL_WORKERS_ENV, USABLE_GPUS_ENV
    from gt.runtime.worker.backend import device_count, load_backend
    from gt.runtime.worker.loop import Worker

    memory = memory_from_args(args)
    back = args.back
    if back is None:
        if args.connect is None:
            raise SystemExit(
                "gt worker: give --connect ADDRESS (the address `gt dispatcher` printed)"
            )
        back = resolve_endpoints(args.connect, timeout=args.timeout)["back"]
    if args.backend:
        os.environ["GT_BACKEND"] = args.backend
    device = args.device
    if device is None:
        device = pick_device(args.slot, os.environ.get("SLURM_LOCALID"), device_count,
                             os.environ.get(USABLE_GPUS_ENV))  # fmt: skip
    try:
        backend = load_backend(device=device)
        pinned = backend.identity.index if backend.identity is not None else None
        shared = sharing(args.slot, os.environ.get(LOCAL_WORKERS_ENV), pinned, device_count,
                         os.environ.get(USABLE_GPUS_ENV))  # fmt: skip
        w = Worker(back, backend=backend, memory=memory, bind=args.bind, advertise=args.advertise,
                   register_timeout=max(args.timeout, 30.0), sharing=shared)  # fmt: skip
    except (RuntimeError, ValueError, zmq.ZMQError) as exc:
        print(f"gt worker: {exc}", file=sys.stderr)
        return 1
    install_stop_signals(w._stop.set)
    if args.back is None:
        print(
            f"GT worker {w.wid} on {w.backend.device} ({w.backend.name}) serving {args.connect}",
            flush=True,
        )
    reason = w.run(parent_pid=args.parent_pid)
    if args.back is None:
        print(f"worker stopped: {reason or 'signal'}")
    return 0
