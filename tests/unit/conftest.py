"""Fixtures the unit tests share: ``run``, one op's kernel on NumPy and on the CuPy test double."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.worker.backend import Backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import cupy_double as cp  # noqa: E402

#: The array libraries a kernel runs on in unit tests (a real CuPy only in the ``gpu`` tests).
KERNEL_BACKENDS = {
    "numpy": Backend(np, "cpu"),
    "cupy_double": Backend(cp, name="cupy", cupyx=cp.cupyx),
}


@pytest.fixture(params=sorted(KERNEL_BACKENDS))
def run(request):
    """``run(op, args, attrs)``: op's kernel on one backend, arrays copied in and the result out."""
    be = KERNEL_BACKENDS[request.param]

    def call(name: str, args: list, attrs: object = None) -> np.ndarray:
        vals = [be.from_host(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
        return be.to_host(be.handlers[O.OPCODE[name]](vals, attrs))

    return call
