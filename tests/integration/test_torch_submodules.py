"""``gt.random``, ``gt.version``/``gt.torch_version``, ``gt.functional``, ``gt.GradScaler``,
``gt.Stream``/``gt.Event``, ``gt.mps``, ``gt.xpu``, ``gt.multiprocessing`` and ``gt.hub``: PyTorch's
submodules of those names, with the values and messages PyTorch 2.13 (CPU build) gives, pasted in."""

from __future__ import annotations

import hashlib
import http.server
import operator
import os
import threading
import time

import numpy as np
import pytest

import gt


# ----------------------------------------------------------------------------- gt.random
def test_random_module_wraps_the_global_generator(conn):
    assert gt.random.manual_seed(0) is gt.default_generator  # torch's returns default_generator
    assert gt.random.initial_seed() == 0
    a, b = gt.randn(3).numpy(), gt.randn(3).numpy()
    gt.random.manual_seed(0)
    assert np.array_equal(gt.randn(3).numpy(), a)
    with gt.random.fork_rng():  # PyTorch: what the block draws leaves the next draws unchanged
        gt.randn(3)
        gt.randn(5)
    assert np.array_equal(gt.randn(3).numpy(), b)
    gt.random.manual_seed(0)
    with gt.random.fork_rng(enabled=False, devices=[]):
        gt.randn(3)
    assert np.array_equal(gt.randn(3).numpy(), b)
    state = gt.random.get_rng_state()
    x = gt.randn(2).numpy()
    gt.random.set_rng_state(state)
    assert np.array_equal(gt.randn(2).numpy(), x)
    s = gt.random.seed()
    assert gt.random.initial_seed() == s
    assert gt.random.default_generator is gt.default_generator
    assert gt.random.thread_safe_generator() is None
    assert gt.random.__all__ == ["set_rng_state", "get_rng_state", "manual_seed", "seed",
                                 "initial_seed", "fork_rng", "thread_safe_generator"]  # fmt: skip


# ----------------------------------------------------------------------------- versions
def test_version_module_is_a_cpu_build():
    v = gt.version
    assert v.__all__ == ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]
    assert (v.cuda, v.hip, v.rocm, v.xpu, v.debug) == (None, None, None, None, False)
    assert isinstance(gt.__version__, gt.torch_version.TorchVersion)
    assert gt.__version__ == v.__version__ and isinstance(gt.__version__, str)


# (self, other) -> [<, <=, ==, !=, >=, >], from torch.torch_version.TorchVersion
TORCH_VERSION_CASES = {
    ("0.1.0", "2.0"): "True True False True False False",
    ("0.1.0", "0.1"): "False True True True True False",
    ("0.1.0", "0.1.0.0"): "False True True True True False",
    ("0.1.0", "zebra"): "True True False True False False",
    ("0.1.0", (2, 0)): "True True False True False False",
    ("0.1.0", (0, 1)): "False True True True True False",
    ("0.1.0", 3): "TypeError TypeError False True TypeError TypeError",
    ("2.13.0+cpu", "2.13.0"): "False False False True True True",
    ("2.13.0+cpu", "1.10"): "False False False True True True",
    ("2.13.0+cpu", "zebra"): "True True False True False False",
    ("1.10.0a", "1.10.0a0"): "False True True True True False",
    ("1.10.0a", "1.10"): "True True False True False False",
    ("1.10.0a", (0, 1)): "False False False True True True",
    ("parrot", "2.0"): "False False False True True True",
    ("parrot", (2, 0)): "TypeError TypeError False True TypeError TypeError",
}


@pytest.mark.parametrize(("mine", "other"), sorted(TORCH_VERSION_CASES, key=str))
def test_torch_version_compares_as_pytorchs(mine, other):
    v = gt.torch_version.TorchVersion(mine)
    got = []
    for op in (operator.lt, operator.le, operator.eq, operator.ne, operator.ge, operator.gt):
        try:
            got.append(str(op(v, other)))
        except TypeError:
            got.append("TypeError")
    assert " ".join(got) == TORCH_VERSION_CASES[(mine, other)]
    assert hash(v) == hash(mine)


def test_gt_version_compares_with_strings_and_tuples():
    assert gt.__version__ >= "0.1" and gt.__version__ >= (0, 1) and gt.__version__ < (2, 0)


# ----------------------------------------------------------------------------- gt.functional
def test_functional_exports_pytorchs_names_bound_to_gt():
    names = [
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "broadcast_shapes",
        "broadcast_tensors",
        "cartesian_prod",
        "block_diag",
        "cdist",
        "chain_matmul",
        "einsum",
        "istft",
        "lu",
        "norm",
        "meshgrid",
        "pca_lowrank",
        "split",
        "stft",
        "svd_lowrank",
        "tensordot",
        "unique",
        "unique_consecutive",
        "unravel_index",
    ]  # fmt: skip (torch.functional.__all__)
    assert gt.functional.__all__ == names
    for n in names:
        assert getattr(gt.functional, n) is getattr(gt, n), n


# ----------------------------------------------------------------------------- Stream, Event
def test_grad_scaler_stream_and_event_at_top_level(conn):
    assert gt.GradScaler is gt.amp.GradScaler
    s = gt.Stream()
    assert (s.device_type, s.device_index, s.stream_id) == ("cpu", -1, 0)
    assert repr(s) == "gt.Stream device_type=cpu, device_index=-1, stream_id=0"
    assert s == gt.Stream() and s.query() is True and not s.is_capturing()
    with s:
        pass
    e1, e2 = gt.Event(enable_timing=True), gt.Event(enable_timing=True)
    assert repr(gt.Event()) == "gt.Event device_type=cpu, device_index=-1, event_flag=0, event_id=0"
    assert e1.query() is True  # (never recorded)
    with pytest.raises(ValueError, match="^Both events must be recorded before calculating"):
        e1.elapsed_time(e2)
    with pytest.raises(
        ValueError, match=r"^Both events must be created with argument 'enable_timing=True'\.$"
    ):
        gt.Event().elapsed_time(gt.Event())
    e1.record()
    x = gt.randn(64, 64)
    for _ in range(3):
        x = x @ x
    time.sleep(0.01)
    s.record_event(e2)
    ms = e1.elapsed_time(e2)
    assert ms >= 10.0 and e2.query()
    e3 = s.record_event()
    assert isinstance(e3, gt.Event) and e3.query() is True
    e3.synchronize()
    e3.wait(s)
    s.wait_event(e3)
    s.wait_stream(s)
    s.synchronize()
    with pytest.raises(NotImplementedError, match="^torch.Event ipc is not supported yet"):
        e1.ipc_handle()
    with pytest.raises(RuntimeError, match="^Backend doesn't support getting stream native handle"):
        s.native_handle  # noqa: B018


# ----------------------------------------------------------------------------- mps, xpu
def test_mps_and_xpu_answer_as_a_cpu_build():
    assert not gt.mps.is_available() and gt.mps.device_count() == 0
    assert gt.mps.manual_seed(1) is None
    for f, msg in [(gt.mps.synchronize, "deviceSynchronize"), (gt.mps.empty_cache, "emptyCache"),
                   (gt.mps.get_rng_state, "getDefaultGenerator"), (gt.mps.seed, "getDefaultGenerator"),
                   (gt.mps.current_allocated_memory, "getCurrentAllocatedMemory"),
                   (gt.mps.recommended_max_memory, "getRecommendedMaxMemory"),
                   (gt.mps.Event, "acquireEvent")]:  # fmt: skip
        with pytest.raises(
            RuntimeError, match=f"^Cannot execute {msg}\\(\\) without MPS backend\\.$"
        ):
            f()
    with pytest.raises(RuntimeError, match="^MPS is not available$"):
        gt.mps.compile_shader("kernel void f() {}")
    x = gt.xpu
    assert not x.is_available() and x.device_count() == 0 and not x.is_initialized()
    assert (
        x.memory_allocated(),
        x.max_memory_reserved(),
        x.get_arch_list(),
        x.get_gencode_flags(),
    ) == (0, 0, [], "")
    assert x.get_rng_state_all() == [] and x.default_generators == () and not x.is_bf16_supported()
    assert x.manual_seed(1) is None and x.seed_all() is None and x.empty_cache() is None
    assert dict(x.memory_stats()) == {}
    for f in (x.current_device, x.synchronize, x.get_device_name, x.initial_seed, x.init):
        with pytest.raises(AssertionError, match="^Torch not compiled with XPU enabled$"):
            f()


# ----------------------------------------------------------------------------- multiprocessing
def _child_ok(i, out_dir):
    with open(os.path.join(out_dir, f"{i}.txt"), "w") as f:
        f.write(str(i * 10))


def _child_raises(i):
    if i == 1:
        raise ValueError("child one failed")


def _child_exits(i):
    os._exit(3)


def _child_uses_gt(i, out_dir):
    value = float((gt.ones(4) * (i + 1)).sum().item())
    with open(os.path.join(out_dir, f"{i}.txt"), "w") as f:
        f.write(f"{value} {os.environ.get('GT_DISPATCHER')}")


def test_multiprocessing_reexports_and_sharing_strategies():
    mp = gt.multiprocessing
    import multiprocessing

    assert mp.Process is multiprocessing.Process and mp.Queue is multiprocessing.Queue
    assert mp.__all__[:3] == [
        "set_sharing_strategy",
        "get_sharing_strategy",
        "get_all_sharing_strategies",
    ]
    assert mp.get_sharing_strategy() == "file_descriptor"
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    with pytest.raises(AssertionError, match="^invalid sharing strategy 'bogus', expected one of"):
        mp.set_sharing_strategy("bogus")
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    assert issubclass(mp.ProcessRaisedException, Exception)
    assert issubclass(mp.ProcessExitedException, mp.ProcessException)


@pytest.mark.timeout(120)
def test_spawn_runs_fn_in_each_process_and_raises_pytorchs_exceptions(tmp_path):
    mp = gt.multiprocessing
    ctx = mp.start_processes(_child_ok, args=(str(tmp_path),), nprocs=2, join=False,
                             start_method="fork")  # fmt: skip
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join(timeout=60):
        pass
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["0", "10"]
    with pytest.raises(
        mp.ProcessRaisedException, match="-- Process 1 terminated with the following error:\n"
    ) as ei:
        mp.start_processes(_child_raises, nprocs=2, start_method="fork")
    assert "ValueError: child one failed" in str(ei.value) and ei.value.error_index == 1
    with pytest.raises(
        mp.ProcessExitedException, match="^process 0 terminated with exit code 3$"
    ) as ei:
        mp.start_processes(_child_exits, nprocs=1, start_method="fork")
    assert ei.value.exit_code == 3


@pytest.mark.timeout(180)
def test_spawned_children_use_the_parents_cluster(conn, tmp_path):
    gt.multiprocessing.spawn(_child_uses_gt, args=(str(tmp_path),), nprocs=2)
    got = sorted(p.read_text() for p in tmp_path.iterdir())
    assert got == [f"4.0 {conn.address}", f"8.0 {conn.address}"]


# ----------------------------------------------------------------------------- hub
@pytest.fixture
def served(tmp_path):
    """A local HTTP server on 127.0.0.1 (a free port) serving tmp_path/www; closed at the end."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_hub_dir_defaults_and_set_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(gt.hub, "_hub_dir", None)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert gt.hub.get_dir() == str(tmp_path / "th" / "hub")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gt.hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    gt.hub.set_dir(tmp_path / "mine")
    assert gt.hub.get_dir() == str(tmp_path / "mine")
    with pytest.raises(NotImplementedError, match="GitHub repositories are not supported"):
        gt.hub.list("pytorch/vision")
    with pytest.raises(NotImplementedError, match="GitHub repositories are not supported"):
        gt.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(
        ValueError, match='^Unknown source: "svn". Allowed values: "github" \\| "local".$'
    ):
        gt.hub.load("x", "y", source="svn")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "hubconf.py").write_text(
        "dependencies = []\ndef answer(x, k=1):\n    return x * k\n"
    )
    assert gt.hub.load(str(tmp_path / "repo"), "answer", 6, source="local", k=7) == 42
    with pytest.raises(RuntimeError, match="^Cannot find callable nope in hubconf$"):
        gt.hub.load(str(tmp_path / "repo"), "nope", source="local")


@pytest.mark.timeout(60)
def test_hub_downloads_with_hash_check_and_loads_state_dicts(
    conn, served, tmp_path, monkeypatch, capsys
):
    root, base = served
    sd = {"w": gt.arange(6, dtype=gt.float32).reshape(2, 3), "b": gt.tensor([1.5, -2.0])}
    gt.save(sd, root / "tmp.pt")
    digest = hashlib.sha256((root / "tmp.pt").read_bytes()).hexdigest()
    name = f"weights-{digest[:8]}.pt"
    (root / "tmp.pt").rename(root / name)

    dst = tmp_path / "got.pt"
    gt.hub.download_url_to_file(f"{base}/{name}", str(dst), hash_prefix=digest[:10], progress=True)
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == digest
    assert "B" in capsys.readouterr().err
    bad = tmp_path / "bad.pt"
    with pytest.raises(
        RuntimeError, match=f'^invalid hash value \\(expected "0000", got "{digest}"\\)$'
    ):
        gt.hub.download_url_to_file(f"{base}/{name}", str(bad), hash_prefix="0000", progress=False)
    assert not bad.exists() and not any(p.name.endswith(".partial") for p in tmp_path.iterdir())

    monkeypatch.setattr(gt.hub, "_hub_dir", str(tmp_path / "hub"))
    got = gt.hub.load_state_dict_from_url(f"{base}/{name}", progress=False, check_hash=True)
    assert (
        f'Downloading: "{base}/{name}" to {tmp_path / "hub" / "checkpoints" / name}'
        in capsys.readouterr().out
    )
    assert sorted(got) == ["b", "w"] and np.array_equal(got["w"].numpy(), sd["w"].numpy())
    (root / name).unlink()  # now served from the cache alone
    again = gt.hub.load_state_dict_from_url(f"{base}/{name}", progress=False)
    assert np.array_equal(again["b"].numpy(), [1.5, -2.0]) and capsys.readouterr().out == ""
