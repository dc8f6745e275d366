"""Recorded sample traces for the replay tests (model or compact keyframes, every few hundred events)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from gt.runtime.ops import OPS
from gt.trace.keyframes import ModelKeyframer
from gt.trace.recorder import Recorder
from gt.tui.sample import sample_batches

S = 1_000_000_000


class FakeWall:
    """A wall clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def write_sample(path: Path, *, model: bool = True, every: int = 400) -> Path:
    """The sample run recorded as ``gt record`` does (the model folds each batch after it is
    written), copied to ``path``. Recorded once per test session and way of recording: the
    recording is deterministic, and folding it takes a while."""
    shutil.copyfile(_recorded(model, every), path)
    return path


_RECORDED: dict[tuple[bool, int], Path] = {}


def _recorded(model: bool, every: int) -> Path:
    path = _RECORDED.get((model, every))
    if path is None:
        folder = tempfile.mkdtemp(prefix="gt-sample-")
        atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / f"sample-{model}-{every}.gtrace"
        kf = ModelKeyframer(OPS) if model else None
        with Recorder(
            path, start_ns=0, op_names=OPS, keyframe_fn=kf, keyframe_every_events=every
        ) as rec:
            for source, first, events in sample_batches():
                rec.write_batch(source, first, events)
                if kf is not None:
                    kf.on_batch(source, first, events)
        _RECORDED[(model, every)] = path
    return path
