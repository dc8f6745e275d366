"""Memory limits with real processes: a program over its worker's limit gets the results it would
without one; a result that can never fit raises gt.OutOfMemory and the program goes on; a client
over its quota spills its own tensors, not another's; a client that leaves gives its memory back;
and the memory events say all of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import wait_for

import gt
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster, RecorderProcess

MB = 1_000_000


@pytest.fixture
def cluster():
    with LocalCluster(workers=1) as c:
        yield c


def _worker(address: str) -> dict:
    return request(address, "stats", timeout=10.0)["workers"][0]["stats"] or {}


def _fresh_stats(address: str, pred):
    """Worker stats once they satisfy ``pred`` (they are sent every half second)."""
    return wait_for(lambda: (lambda s: s if s and pred(s) else None)(_worker(address)), 30)


def _clients(stats: dict) -> dict[int, list]:
    """``{client: [used, spilled]}`` from a worker's stats."""
    return {int(c): v for c, v in (stats.get("memory_clients") or {}).items()}


def test_a_program_over_the_limit_gets_the_results_it_would_without_one(cluster):
    rng = np.random.default_rng(3)
    host = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(16)]  # 16 x 262 kB
    gt.connect(cluster.address, timeout=60)
    try:
        gt.config.set(memory_limit="2MB", prefetch="1MB")
        xs = [gt.from_numpy(h) for h in host]
        acc = xs[0]
        for x in xs[1:]:
            acc = acc @ x * 0.05 + x.T  # every input is read again: it must come back
        want = host[0]
        for h in host[1:]:
            want = want @ h * np.float32(0.05) + h.T
        np.testing.assert_allclose(acc.numpy(), want, rtol=1e-4, atol=1e-4)
        sums = [x.sum().item() for x in xs]  # the first ones have long been spilled
        np.testing.assert_allclose(sums, [h.sum() for h in host], rtol=1e-4)
        st = _fresh_stats(cluster.address, lambda s: s["memory"]["spill_out"] > 0)
        assert st["limit"] == 2 * MB and st["bytes"] <= 2 * MB
        assert st["memory"]["spill_in"] > 0 and st["memory"]["peak"] <= 2 * MB
    finally:
        gt.disconnect()


def test_a_result_that_cannot_fit_raises_out_of_memory_and_the_program_goes_on(cluster):
    gt.connect(cluster.address, timeout=60)
    try:
        gt.config.set(memory_limit="1MB")
        small = gt.ones(1000)
        with pytest.raises(gt.OutOfMemory) as err:
            gt.zeros(1_000_000).sum().item()  # 4 MB
        e = err.value
        assert isinstance(e, gt.WorkerError) and isinstance(e, MemoryError)
        # (a CuPy worker's device pool refuses first, asking for whole 512-byte blocks)
        assert e.op == "full" and 4 * MB <= e.requested < 4 * MB + 512 and e.limit == MB
        assert "test_memory.py" in e.source and "memory limit of 1.0 MB" in str(e)
        assert (small * 2).sum().item() == 2000.0  # the worker and the other tensors are fine
    finally:
        gt.disconnect()


def test_a_bad_memory_setting_is_refused_at_the_users_line(cluster):
    gt.connect(cluster.address, timeout=60)
    try:
        with pytest.raises(gt.config.ConfigError, match="not a size"):
            gt.config.set(memory_limit="lots")
        with pytest.raises(gt.config.ConfigError, match="unknown setting 'memory_limt'"):
            gt.config.set(memory_limt="1GB")
        assert gt.config.memory()["runtime"] == {}
    finally:
        gt.disconnect()


_OTHER = textwrap.dedent("""
    import sys, time
    import gt
    gt.connect(sys.argv[1], timeout=60)
    x = gt.ones(100_000)                       # 400 kB, under the 1 MB quota
    total = x.sum().item()
    print("ready", total, flush=True)
    sys.stdin.readline()                       # until the other client is done
    print("after", (x * 2).sum().item(), flush=True)
    gt.disconnect()
""")


def _block(nbytes: int) -> int:
    """The bytes a CuPy pool block of ``nbytes`` holds (it rounds up to 512; a NumPy array does not),
    which is what a CuPy worker counts."""
    return -(-nbytes // 512) * 512


def test_a_client_over_its_quota_spills_its_own_tensors_and_not_anothers(cluster):
    gt.connect(cluster.address, timeout=60)
    other = subprocess.Popen([sys.executable, "-c", _OTHER, cluster.address], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        gt.config.set(client_memory_limit="1MB")
        assert other.stdout.readline().split()[0] == "ready"
        mine = [gt.full((100_000,), float(i)) for i in range(8)]  # 3.2 MB against a 1 MB quota
        assert [m.sum().item() for m in mine] == [i * 100_000.0 for i in range(8)]
        me = gt.session.get_connection().client_no

        def settled(s: dict) -> bool:  # mine spilled, and the other's last free (of its 4-byte
            per = _clients(s)  # sum, sent by its flush timer) has reached the worker
            return per.get(me, [0, 0])[1] > 0 and sum(v[0] for c, v in per.items() if c != me) in (
                400_000,
                _block(400_000),
            )  # (a pool that rounds blocks, or one that does not)

        per = _clients(_fresh_stats(cluster.address, settled))
        assert per[me][0] <= MB and per[me][1] > 0  # mine: under the quota, the rest spilled
        others = [v for c, v in per.items() if c != me]
        assert others in ([[400_000, 0]], [[_block(400_000), 0]])  # all there, none spilled
        with pytest.raises(gt.OutOfMemory, match="quota of 1.0 MB"):
            gt.zeros(300_000).sum().item()  # one 1.2 MB result can never fit the quota
        other.stdin.write("go\n")
        other.stdin.flush()
        assert other.stdout.readline().split() == ["after", "200000.0"]
        assert other.wait(timeout=30) == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.wait(timeout=10)
        gt.disconnect()


def test_a_client_that_leaves_gives_its_memory_and_spill_files_back(cluster):
    gt.connect(cluster.address, timeout=60)
    try:
        gt.config.set(memory_limit="1MB")
        xs = [gt.full((100_000,), 1.0) for _ in range(6)]
        assert sum(x.sum().item() for x in xs) == 600_000.0
        _fresh_stats(cluster.address, lambda s: s["spilled"] > 0)
    finally:
        gt.disconnect()
    st = _fresh_stats(cluster.address, lambda s: s["bytes"] == 0 and s["spilled"] == 0)
    assert st["memory_clients"] == {}


def test_memory_events_carry_used_limit_spilled_and_the_traffic(cluster, tmp_path):
    from gt.trace.model import ClusterModel
    from gt.trace.reader import Reader

    trace = str(tmp_path / "mem.gtrace")
    recorder = RecorderProcess(cluster.address, trace)
    try:
        gt.connect(cluster.address, timeout=60)
        try:
            gt.config.set(memory_limit="1MB")
            xs = [gt.full((100_000,), float(i)) for i in range(5)]  # 2 MB into 1 MB
            assert sum(x.sum().item() for x in xs) == 1_000_000.0
            _fresh_stats(cluster.address, lambda s: s["spilled"] > 0 and s["memory"]["spill_in"])
            wait_for(lambda: _worker(cluster.address)["memory"]["spill_in"] > 0)
            gt.sync()
        finally:
            gt.disconnect()
        _fresh_stats(cluster.address, lambda s: s["bytes"] == 0)
    finally:
        recorder.stop()
    with Reader(trace) as r:
        names = list(r.header.get("op_names") or [])
        events = list(r.events())
        model = ClusterModel(names, count_gaps=False)
        for b in r.batches():
            model.apply_batch(b.source, b.first_seq, b.events)
    mems = [e.fields for e in events if e.kind == "memory" and e.fields.get("limit")]
    assert mems and all(m["limit"] == MB for m in mems)
    assert max(m["spilled"] for m in mems) >= 400_000
    assert all(m["used"] <= MB for m in mems)
    directions = {e.fields["direction"] for e in events if e.kind == "transfer"}
    # a read back is shown once: as the prefetch thread's read, or as the executor's own
    assert "spill" in directions and directions & {"unspill", "prefetch"}
    m = model.state(model.t_last).workers[0].memory
    assert m.limit == MB and m.spill_out >= 400_000 and m.spill_in > 0 and m.peak <= MB


def test_a_numpy_worker_over_its_ram_cap_refuses_the_op_and_keeps_running(monkeypatch):
    # Without a cap the kernel's OOM killer would take the worker, and every program's tensors.
    monkeypatch.setenv("GT_RAM_CAP", "700MB")
    with LocalCluster(workers=1) as c:
        gt.connect(c.address, timeout=60)
        try:
            kept = []
            with pytest.raises(gt.OutOfMemory) as err:
                for i in range(20):  # 100 MB each: the cap is reached long before 2 GB
                    kept.append(gt.full((25_000_000,), float(i)))
                    kept[-1][:1].item()
            assert "RAM cap of 700.0 MB" in str(err.value) and err.value.op == "full"
            assert 2 <= len(kept) < 8
            # the worker lives: the tensors made before are intact, and new work runs
            assert [t[-1].item() for t in kept[:-1]] == [float(i) for i in range(len(kept) - 1)]
            del kept[:]
            assert (gt.full((25_000_000,), 2.0)).sum().item() == 50_000_000.0
        finally:
            gt.disconnect()
