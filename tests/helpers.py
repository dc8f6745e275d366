"""Helpers shared by the test modules (importable because conftest.py's folder is on sys.path)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: Where the CuPy test double lives (``tests/support/cupy_double``).
SUPPORT = Path(__file__).resolve().parent / "support"


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail after
    ``timeout`` seconds with the last value. Tests wait on conditions like this, never on sleeps."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")


@contextlib.contextmanager
def cupy_double_environment() -> Iterator[None]:
    """Every GT worker started inside loads the CuPy test double as its CuPy (the variables are
    inherited by a local cluster's dispatcher and workers)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GT_CUPY_DOUBLE", "1")
        mp.setenv("GT_BACKEND", "cupy")
        path = os.environ.get("PYTHONPATH")
        mp.setenv("PYTHONPATH", str(SUPPORT) + (os.pathsep + path if path else ""))
        yield


class HandClock:
    """A clock (seconds) that a test moves by hand: ``clock.t += 1.0``."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@contextlib.contextmanager
def backend_cluster(backend: str, workers: int = 1) -> Iterator[Any]:
    """A local cluster of ``workers`` NumPy workers (``"numpy"``) or workers whose CuPy is the
    test double (``"cupy_double"``, checked), for module fixtures that run every test on both."""
    from gt.runtime.control import request  # noqa: PLC0415 - keep this module light to import
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    if backend == "numpy":
        with LocalCluster(workers=workers) as c:
            yield c
        return
    with cupy_double_environment(), LocalCluster(workers=workers) as c:
        found = [w["backend"] for w in request(c.address, "stats", timeout=10.0)["workers"]]
        assert found == ["cupy"] * workers, found
        yield c


def each_backend_cluster(workers: int = 1) -> Any:
    """A module fixture named ``cluster`` (assign it to that name): every test of the module on a
    NumPy-worker cluster, then on a CuPy-double one."""
    import pytest  # noqa: PLC0415 - keep this module light to import

    @pytest.fixture(scope="module", params=["numpy", "cupy_double"])
    def cluster(request: Any) -> Iterator[Any]:
        with backend_cluster(request.param, workers=workers) as c:
            yield c

    return cluster


def integrate(fn: Callable[[Any], Any], lo: float, hi: float, n: int = 400001) -> float:
    """The trapezoidal rule for ``fn`` (vectorised over NumPy arrays) on ``n`` points of [lo, hi]."""
    import numpy as np  # noqa: PLC0415 - keep this module light to import

    x = np.linspace(lo, hi, n)
    y = fn(x)
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


def as_float64(t: Any) -> Any:
    """A tensor's value as a float64 NumPy array."""
    import numpy as np  # noqa: PLC0415

    return np.asarray(t.detach().numpy(), dtype=np.float64)


def assert_mean_close(samples: Any, want_mean: Any, want_var: Any, k: float = 5.0) -> None:
    """The sample mean lies within ``k`` standard errors of ``want_mean``."""
    import numpy as np  # noqa: PLC0415

    n = samples.shape[0]
    err = k * np.sqrt(np.asarray(want_var) / n)
    assert np.all(np.abs(samples.mean(0) - want_mean) <= err), (samples.mean(0), want_mean, err)
