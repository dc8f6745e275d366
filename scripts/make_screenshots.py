"""Regenerate the monitor's screenshots (SVG) in ``screenshots/`` from the fixed sample trace.

    python scripts/make_screenshots.py [--out screenshots] [--size 140x45]

Uses the same app factory and sample as the snapshot tests, so what you see is what is tested.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from gt.runtime.ops import OPS
from gt.trace.keyframes import ModelKeyframer
from gt.trace.recorder import Recorder
from gt.tui.app import make_app
from gt.tui.replay import ReplaySource
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource

S = 1_000_000_000
EDITED = "layer1:\n  shard: {axis: 0, workers: [0, 2]}\nlayer2:\n  replicate: {workers: [0, 9]}\n"

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


def replay_source(tmp: Path) -> ReplaySource:
    """The sample recorded to a trace and replayed, paused at 6.6 s with 5 s..6.6 s selected."""
    kf = ModelKeyframer(OPS)
    path = tmp / "sample.gtrace"
    with Recorder(path, start_ns=0, op_names=OPS, keyframe_fn=kf, keyframe_every_events=400) as rec:
        for batch in sample_batches():
            rec.write_batch(*batch)
            kf.on_batch(*batch)
    src = ReplaySource.from_file(path, wall=lambda: 0.0)
    src.clock.pause(True)
    for t in (5 * S, 6_600_000_000):
        src.seek(src.clock.t_start + t)
        src.mark_window()
    return src


async def shoot(name: str, keys: list[str], out: Path, size: tuple[int, int]) -> Path:
    """Run the app headless on the sample, press ``keys``, save ``out/name.svg``."""
    with tempfile.TemporaryDirectory() as tmp:
        if name == "replay":
            source = replay_source(Path(tmp))
        else:
            source = ListSource(sample_batches(), now_ns=T_END, address="sample.gtrace")
        app = make_app(
            source, title="gt replay" if name == "replay" else "gt top", readonly=name == "replay"
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
            path.write_text(app.export_screenshot(title=f"gt top — {name}"))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "screenshots"))
    ap.add_argument("--size", default="140x45", help="terminal columns x rows")
    args = ap.parse_args(argv)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, keys in VIEWS.items():
        print(asyncio.run(shoot(name, keys, out, (cols, rows))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
