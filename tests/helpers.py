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


def start_backend_cluster(backend: str, workers: int = 1) -> Any:
    """A started local cluster of ``workers`` NumPy workers (``"numpy"``) or workers whose CuPy is
    the test double (``"cupy_double"``, checked); the caller stops it."""
    from gt.runtime.control import request  # noqa: PLC0415 - keep this module light to import
    from gt.runtime.launch import LocalCluster  # noqa: PLC0415

    if backend == "numpy":
        return LocalCluster(workers=workers)
    with cupy_double_environment():  # (the variables matter when its processes start)
        c = LocalCluster(workers=workers)
    found = [w["backend"] for w in request(c.address, "stats", timeout=10.0)["workers"]]
    if found != ["cupy"] * workers:
        c.stop()
        raise AssertionError(f"expected {workers} CuPy-double worker(s), found {found}")
    return c


class ClusterPool:
    """The local clusters a test process shares between its modules, one per (backend, workers)
    kind, started when first asked for and stopped when the session ends. Starting and stopping
    a dispatcher and its workers costs about a second of CPU; the suite's modules took 230 s of
    its 1,030 that way. A cluster is checked before each module gets it: one whose dispatcher or
    workers have gone (a module that killed one) is replaced by a fresh one. Each test still
    connects as a new client (the ``conn`` fixture), so tests share no tensors."""

    def __init__(self) -> None:
        self._clusters: dict[tuple[str, int], Any] = {}

    def get(self, backend: str = "numpy", workers: int = 2) -> Any:
        """A running cluster of that kind, every worker alive."""
        key = (backend, workers)
        c = self._clusters.get(key)
        if c is not None and not _all_alive(c, workers):
            c.stop()
            c = None
        if c is None:
            c = self._clusters[key] = start_backend_cluster(backend, workers)
        return c

    def close(self) -> None:
        """Stop every cluster of the pool."""
        for c in self._clusters.values():
            c.stop()
        self._clusters.clear()


def _all_alive(c: Any, workers: int) -> bool:
    """The cluster's dispatcher answers and all its ``workers`` are registered and alive."""
    from gt.runtime.control import ControlError, request  # noqa: PLC0415

    if c.proc.poll() is not None:
        return False
    try:
        found = request(c.address, "stats", timeout=10.0)["workers"]
    except ControlError:
        return False
    return sum(bool(w.get("alive")) for w in found) == workers == len(found)


def each_backend_cluster(workers: int = 1) -> Any:
    """A module fixture named ``cluster`` (assign it to that name): every test of the module on a
    NumPy-worker cluster, then on a CuPy-double one (both from the process's
    :class:`ClusterPool`)."""
    import pytest  # noqa: PLC0415 - keep this module light to import

    @pytest.fixture(scope="module", params=["numpy", "cupy_double"])
    def cluster(request: Any, cluster_pool: ClusterPool) -> Any:
        return cluster_pool.get(request.param, workers)

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


def optimizers_of_every_kind() -> dict[str, Callable[[Any], Any]]:
    """A GT optimizer of each update rule (name -> ``factory(params)``), with rates that keep a
    few steps of a small model finite."""
    import gt

    return {
        "rmsprop": lambda p: gt.optim.RMSprop(p, lr=0.01),
        "rmsprop, centered": lambda p: gt.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True),
        "adagrad": lambda p: gt.optim.Adagrad(p, lr=0.05),
        "adamax": lambda p: gt.optim.Adamax(p, lr=0.01),
        "nadam": lambda p: gt.optim.NAdam(p, lr=0.01),
        "radam": lambda p: gt.optim.RAdam(p, lr=0.01),
        "asgd": lambda p: gt.optim.ASGD(p, lr=0.05, t0=1),
        "adafactor": lambda p: gt.optim.Adafactor(p, lr=0.05),
        "rprop": lambda p: gt.optim.Rprop(p, lr=0.01),
    }
