"""The trace tells the truth, in the small form of ``benchmarks/bench_truth.py`` (which applies the
10 % targets on a quiet machine): known idle, known bytes, waiting where it happened, and shares
that add up to 100 % and agree between ``gt trace stats`` and the Perfetto export. The checks here
hold on a busy machine too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_truth  # noqa: E402 - the benchmark's own scenario, small


@pytest.mark.slow
def test_a_workload_of_known_costs_is_attributed_as_it_happened(tmp_path):
    # worker 1 computes for ~100 ms where worker 0 waits for it: long enough that worker 0 is
    # surely waiting by then, even when a busy machine starts it late
    n, repeats, gap = 400, 40, 0.4
    f = bench_truth.run_scenario(n, repeats, gap, str(tmp_path))
    assert f.moved_bytes == n * n * 4
    for w, idle in f.idle_s.items():  # nothing was queued in the gap: idle, whatever the load
        assert idle == pytest.approx(f.gap_seen_s, rel=0.02), (w, idle, f.gap_seen_s)
    assert f.wait_s > 0 and f.matmul_s > 0
    assert f.add_s < f.wait_s / 2  # the op that needed the data is not charged for the wait
    assert f.mul_s > 0 and f.allreduce_wait_s > 0  # the step ran, and worker 0 waited in it
    assert f.mul_s < f.allreduce_wait_s / 2  # the op that needed the sum is not charged either
    for w, shares in f.shares.items():
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9), (w, shares)
        want = " ".join(f"{k} {100 * v:.0f}%" for k, v in shares.items())
        assert f.export_labels[w].endswith(want)
