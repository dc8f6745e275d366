"""Shared fixtures: a real local cluster (dispatcher + workers in separate processes) that the
modules of a test process share, and a fresh client connection per test so tests share no
tensors."""

from __future__ import annotations

import gc
import os
import sys

import pytest
from helpers import ClusterPool

import gt
from gt.runtime.control import ControlError, request
from gt.runtime.launch import LocalCluster

# Keep BLAS single-threaded in tests: 2-core CI machines, several processes.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure(config):
    """Byte-compile gt (and the CuPy double its workers load) once, when this Python may not:
    with ``PYTHONDONTWRITEBYTECODE=1`` (set on this project's machines) and an editable install,
    every client, dispatcher and worker the suite starts compiled about 400 modules from source,
    about 1.2 s of CPU each time. Compiled files go where Python looks for them (the ignored
    ``__pycache__`` folders); each process still reads them with the variable set."""
    if not sys.flags.dont_write_bytecode or hasattr(config, "workerinput"):
        return  # (Python writes them itself; or xdist's controller did it already)
    import compileall

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in ("gt", os.path.join("tests", "support")):
        compileall.compile_dir(os.path.join(root, folder), quiet=2)


@pytest.fixture(scope="module", autouse=True)
def frozen_heap():
    """Before each module, collect the garbage and freeze what is left out of the collector's
    sight (:func:`gc.freeze`). A full collection then scans only what the module made: a
    ``@gt.hot`` step collects once per capture, and in a test process that had collected the
    whole suite (about 280k objects) and run a few dozen modules each took 150 ms or more."""
    gc.collect()
    gc.freeze()
    yield


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def private_runtime_dir(tmp_path_factory):
    """Discovery files of the suite's dispatchers go to a temp dir, not the user's runtime dir
    (tests kill dispatchers with SIGKILL, which leaves their files behind)."""
    old = os.environ.get("GT_RUNTIME_DIR")
    os.environ["GT_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("gt-run"))
    yield
    if old is None:
        os.environ.pop("GT_RUNTIME_DIR", None)
    else:
        os.environ["GT_RUNTIME_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def private_keys(tmp_path_factory):
    """The suite's TCP dispatchers and their peers use keys of their own, never the user's
    (``~/.config/gt/keys``)."""
    from gt.runtime import security

    old = os.environ.get(security.KEYS_ENV)
    path = tmp_path_factory.mktemp("gt-keys") / "keys"
    security.create(path)
    os.environ[security.KEYS_ENV] = str(path)
    yield path
    if old is None:
        os.environ.pop(security.KEYS_ENV, None)
    else:
        os.environ[security.KEYS_ENV] = old


#: Dispatchers that reported bugs in GT's own code (internal_errors) when the suite stopped them.
INTERNAL_ERRORS: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def dispatchers_report_no_internal_errors():
    """Every local cluster the suite stops is asked first whether GT's own code raised (a bug,
    logged with its traceback by the dispatcher); any such bug fails the run."""
    original = LocalCluster.stop

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            try:
                n = request(self.address, "stats", timeout=2.0).get("internal_errors", 0)
            except ControlError:
                n = 0  # a dispatcher a test stopped on purpose, or too busy: nothing to check
            if n:
                INTERNAL_ERRORS.append(f"dispatcher {self.address}: {n} internal error(s)")
        original(self, timeout)

    LocalCluster.stop = stop
    yield
    LocalCluster.stop = original
    # A failure here is an error of this process's last test: the run fails, under pytest-xdist
    # too (whose controller would not see an exit status set in a worker process).
    if INTERNAL_ERRORS:
        pytest.fail("bugs in GT's own code were logged by:\n  " + "\n  ".join(INTERNAL_ERRORS))


@pytest.fixture(autouse=True)
def cupy_double_on_device_0():
    """A test that pins a CuPy double backend to another device (``Backend(cp, 1)`` sets this
    thread's current device) leaves the next test on device 0, as a new process starts."""
    yield
    double = sys.modules.get("cupy_double")
    if double is not None:
        double.cuda._local.__dict__.pop("device", None)


@pytest.fixture(scope="session")
def cluster_pool(dispatchers_report_no_internal_errors):
    """The clusters this test process shares between modules (:class:`helpers.ClusterPool`),
    stopped before the session's check for internal errors runs."""
    pool = ClusterPool()
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def cluster(cluster_pool):
    """A dispatcher with 2 workers, shared by the modules of this test process (a module that
    needs a cluster of its own defines its own ``cluster`` fixture)."""
    return cluster_pool.get("numpy", 2)


@pytest.fixture
def conn(cluster):
    """A new connection to the module's cluster, made current for gt's factories."""
    c = gt.connect(cluster.address, timeout=30)
    try:
        yield c
    finally:
        gt.disconnect()


@pytest.fixture
def sent(conn, monkeypatch):
    """The opcodes ``conn`` queues from now on (a list the test may clear)."""
    codes: list[int] = []
    emit = conn.emit

    def spy(opcode, out, args, attrs=None):
        codes.append(opcode)
        return emit(opcode, out, args, attrs)

    monkeypatch.setattr(conn, "emit", spy)
    return codes
