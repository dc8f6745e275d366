"""Regenerate the monitor's screenshots (SVG) in ``screenshots/`` from the fixed sample trace.

    python scripts/make_screenshots.py [--out screenshots] [--size 140x45]

Uses the same app factory and sample as the snapshot tests, so what you see is what is tested.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from gt.tui.app import make_app
from gt.tui.sample import T_END, sample_batches
from gt.tui.sources import ListSource

# name -> keys pressed before the screenshot
VIEWS: dict[str, list[str]] = {
    "top": [],
    "top-light": ["t"],
    "worker-detail": ["enter"],
    "timeline-zoomed-paused": ["plus", "plus", "plus", "plus", "space"],
    "help": ["question_mark"],
}


async def shoot(name: str, keys: list[str], out: Path, size: tuple[int, int]) -> Path:
    """Run the app headless on the sample, press ``keys``, save ``out/name.svg``."""
    app = make_app(
        ListSource(sample_batches(), now_ns=T_END, address="sample.gtrace"), title="gt top"
    )
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
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
