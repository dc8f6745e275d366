"""``gt top --once --json`` while GPU workers are busy, with every NVML field checked.

Starts a local cluster (``--workers N``, default 2: on one GPU they share it), keeps every worker
busy with matrix products from a client thread, then runs ``gt top --connect ADDR --json`` as a
separate process and checks, for each worker: the backend is ``cupy``, the device is named as CUDA
and NVML name it (``cuda:i``, PCI bus id, UUID), and every device counter (name, util, mem_used,
mem_total, temp, power) has a value (util may be N/A on a MIG instance, which NVML does not
measure per instance). Writes the JSON and a verdict to ``--out``; exits 1 on a missing field.

``--expect-na`` checks the opposite, for a dry run without NVML (the CuPy test double, or NumPy
workers): every device counter must be N/A, and the command must still answer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

FIELDS = ("name", "util", "mem_used", "mem_total", "temp", "power")


def _load(stop: threading.Event, size: int) -> None:
    import gt  # noqa: PLC0415

    a = gt.randn(size, size)
    while not stop.is_set():
        for _ in range(8):
            a = (a @ a) * (1.0 / size)
        a.sum().item()


def check_workers(doc: dict, expect_na: bool) -> list[str]:
    """Problems found in ``gt top --json`` output (empty when every field is as expected)."""
    workers = doc.get("workers") or []
    problems = [] if workers else ["no workers in gt top's state"]
    for w in workers:
        wid, dev = w.get("id"), w.get("device") or ""
        stats = w.get("device_stats") or {}
        if expect_na:
            filled = [f for f in FIELDS if stats.get(f) is not None]
            if filled:
                problems.append(f"worker {wid}: expected N/A, got {filled}")
            continue
        if w.get("backend") != "cupy":
            problems.append(f"worker {wid}: backend {w.get('backend')!r}, not cupy")
        if not dev.startswith("cuda:") or ("GPU-" not in dev and "MIG-" not in dev):
            problems.append(f"worker {wid}: device {dev!r} lacks its CUDA index or UUID")
        mig = "MIG-" in dev
        for f in FIELDS:
            if stats.get(f) is None and not (mig and f == "util"):
                problems.append(f"worker {wid} ({dev}): NVML field {f} is N/A")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--size", type=int, default=2048, help="matrix size of the load")
    ap.add_argument("--out", default=".", help="folder for top.json and top_check.txt")
    ap.add_argument("--expect-na", action="store_true", help="a dry run: N/A everywhere")
    args = ap.parse_args(argv)
    import gt  # noqa: PLC0415
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    os.makedirs(args.out, exist_ok=True)
    with LocalCluster(workers=args.workers, start_timeout=120) as cl:
        gt.connect(cl.address, timeout=120)
        stop = threading.Event()
        t = threading.Thread(target=_load, args=(stop, args.size), daemon=True)
        t.start()
        try:
            time.sleep(3.0)  # NVML samples once a second: let several arrive under load
            cmd = [sys.executable, "-m", "gt", "top", "--connect", cl.address, "--json",
                   "--wait", "2.5"]  # fmt: skip
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        finally:
            stop.set()
            t.join(timeout=60)
            gt.disconnect()
    with open(os.path.join(args.out, "top.json"), "w") as f:
        f.write(run.stdout)
    if run.returncode != 0:
        problems = [f"gt top exited {run.returncode}: {run.stderr.strip()[-500:]}"]
    else:
        try:
            doc: Any = json.loads(run.stdout)
            problems = check_workers(doc, args.expect_na)
        except ValueError as exc:
            problems = [f"gt top --json printed no JSON: {exc}"]
    verdict = "PASS" if not problems else "FAIL"
    lines = [f"gt top --json during load: {verdict}", *problems]
    if not problems and not args.expect_na:
        for w in doc["workers"]:
            s = w["device_stats"]
            lines.append(f"  worker {w['id']}: {w['device']}: " + ", ".join(
                f"{k}={s[k]}" for k in FIELDS))  # fmt: skip
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "top_check.txt"), "w") as f:
        f.write(text + "\n")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
