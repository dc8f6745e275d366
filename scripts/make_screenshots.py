"""Regenerate the monitor's screenshots (SVG) in ``screenshots/`` from a real recorded run.

    python scripts/make_screenshots.py [--trace F] [--out screenshots] [--size 140x45]
    python scripts/make_screenshots.py --record     # first record a fresh run into the trace

The pictures are drawn from a ``.gtrace`` that ``gt demo --record`` wrote on this machine (two
CPU workers, NumPy; a 16 MB memory limit so the memory column shows a limit): by default the one
committed for the snapshot tests (``tests/tui/fixtures/demo.gtrace``), so what you see is what is
tested. Each view is the dashboard as it was at :data:`AT_FRACTION` of the run: the live views from
the events up to that moment, the replay view paused there with the last second selected.

``--record`` runs :data:`RECORD` (the exact command) and replaces the trace first; the snapshot
tests then need ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

from gt.trace.reader import Reader
from gt.tui.app import make_app
from gt.tui.replay import ReplaySource
from gt.tui.sources import ListSource

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "tui" / "fixtures" / "demo.gtrace"
#: How the committed trace was recorded (``{trace}`` is its path); run with :data:`RECORD_ENV`.
RECORD = [sys.executable, "-m", "gt", "demo", "--no-tui", "--steps", "600", "--record", "{trace}"]
RECORD_ENV = {"GT_MEMORY_LIMIT": "16MB", "GT_BACKEND": "numpy"}
#: The moment every view shows, as a fraction of the recording's span.
AT_FRACTION = 0.75
S = 1_000_000_000
#: The config editor's picture: an edit of the demo's config with one mistake (worker 9).
EDITED = "data:\n  shard: {axis: 0, workers: [0, 1]}\nparams:\n  replicate: {workers: [0, 9]}\n"

# name -> keys pressed before the screenshot
VIEWS: dict[str, list[str]] = {
    "top": [],
    "top-light": ["t"],
    "worker-detail": ["enter"],
    "timeline-zoomed-paused": ["plus", "plus", "plus", "plus", "space"],
    "help": ["question_mark"],
    "config-editor": ["c"],
    "replay": [],
}


def moment(trace: Path, fraction: float = AT_FRACTION) -> int:
    """The run-clock time (ns) at ``fraction`` of the recording's span."""
    with Reader(trace) as r:
        t0, t1 = r.t_first, r.t_last
    if t0 is None or t1 is None:
        raise SystemExit(f"{trace}: the recording holds no events")
    return t0 + int((t1 - t0) * fraction)


def live_source(trace: Path) -> ListSource:
    """The live view of the recording at its chosen moment."""
    return ListSource.from_trace(trace, moment(trace))


def replay_source(trace: Path, wall=lambda: 0.0) -> ReplaySource:
    """The recording replayed, paused at its chosen moment with the second before it selected."""
    src = ReplaySource.from_file(trace, wall=wall)
    src.clock.pause(True)
    at = moment(trace)
    src.seek(max(src.clock.t_start, at - S))
    src.mark_window()
    src.seek(at)
    src.mark_window()
    return src


def record(trace: Path) -> None:
    """Record a fresh run into ``trace`` with :data:`RECORD`."""
    trace.parent.mkdir(parents=True, exist_ok=True)
    tmp = trace.with_suffix(".tmp.gtrace")
    cmd = [a.format(trace=tmp) for a in RECORD]
    print("recording:", " ".join(f"{k}={v}" for k, v in RECORD_ENV.items()), *cmd[1:])
    subprocess.run(cmd, env={**os.environ, **RECORD_ENV}, check=True)
    tmp.replace(trace)


async def shoot(name: str, keys: list[str], trace: Path, out: Path, size: tuple[int, int]) -> Path:
    """Run the app headless on the recording, press ``keys``, save ``out/name.svg``."""
    replay = name == "replay"
    source = replay_source(trace) if replay else live_source(trace)
    app = make_app(
        source, title=f"gt {'replay' if replay else 'top'} {trace.name}", readonly=replay
    )
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        await pilot.pause()
        if name == "config-editor":
            app.screen.load(EDITED)
            await pilot.pause()
        path = out / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"gt — {name} ({trace.name})"))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trace", default=str(TRACE), help="the recording (default: %(default)s)")
    ap.add_argument("--record", action="store_true", help="record a fresh run into --trace first")
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument("--size", default="140x45", help="terminal columns x rows")
    args = ap.parse_args(argv)
    trace = Path(args.trace)
    if args.record:
        record(trace)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, keys in VIEWS.items():
        print(asyncio.run(shoot(name, keys, trace, out, (cols, rows))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
