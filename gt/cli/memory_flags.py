"""The memory flags ``gt worker`` and ``gt dispatcher`` share (see :mod:`gt.runtime.memory_settings`)."""

from __future__ import annotations

import argparse

from gt.runtime import memory_settings as MS


def add_memory_flags(p: argparse.ArgumentParser, *, for_dispatcher: bool = False) -> None:
    """Add ``--memory-limit``, ``--client-memory-limit``, ``--spill-threshold`` and ``--prefetch``."""
    who = "every worker (a worker's own flag wins)" if for_dispatcher else "this worker"
    g = p.add_argument_group(
        "memory",
        "Sizes are bytes, a number with a unit (8GB = 8e9 bytes, 8GiB = 8*2^30) or a fraction of "
        "the device's memory (0.8; RAM on NumPy workers). Programs can change them while running: "
        "gt.config.set(memory_limit=...).",
    )
    g.add_argument("--memory-limit", metavar="SIZE",
                   help=f"the most {who} may hold; past --spill-threshold of it, least recently "
                        "used tensors spill to host memory (GPU) or disk (NumPy) "
                        "[$GT_MEMORY_LIMIT; default: no limit, but a NumPy worker's "
                        "allocations stop at $GT_RAM_CAP, 0.9 of its share of RAM]")  # fmt: skip
    g.add_argument("--client-memory-limit", metavar="SIZE",
                   help="the most one client may hold on a worker (the programs of a tenant with a "
                        "key of its own share one): past it, that client's tensors spill first, "
                        "then its ops fail with gt.OutOfMemory; other clients go on "
                        "[$GT_CLIENT_MEMORY_LIMIT; default: no quota]")  # fmt: skip
    g.add_argument("--spill-threshold", metavar="FRACTION",
                   help="spill when more than this fraction of a limit is held "
                        "[$GT_SPILL_THRESHOLD; default 0.8]")  # fmt: skip
    g.add_argument("--prefetch", metavar="SIZE",
                   help="how much a worker may read back ahead of need for queued instructions; "
                        "0 turns prefetch off [$GT_PREFETCH; default 1GB]")  # fmt: skip


def memory_from_args(args: argparse.Namespace) -> dict:
    """The memory settings given on the command line, normalised.

    Raises:
        SystemExit: a flag, or a ``GT_*`` memory variable, that does not parse (the message
            names it).
    """
    raw = {k: getattr(args, k, None) for k in MS.KEYS}
    raw = {k: v for k, v in raw.items() if v is not None}
    try:
        MS.from_env()  # (checked at start too: a worker must not register, then exit)
        return MS.normalize(raw)
    except MS.SettingError as exc:
        raise SystemExit(f"gt: {exc}") from None
