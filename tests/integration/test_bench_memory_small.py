"""The memory benchmark's scenarios in a small form (``benchmarks/bench_memory.py`` applies the
timing targets on a quiet machine; these checks hold on a busy one): an MLP whose live tensors
need 3x the limit gets bitwise the results of an unlimited run, with prefetch and without, and
stays under the limit; a client over its quota spills and its neighbour keeps running."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_memory  # noqa: E402 - the benchmark's own scenarios, small


@pytest.mark.slow
def test_an_mlp_over_the_limit_gets_bitwise_the_results_of_an_unlimited_run():
    size = bench_memory.MlpSize(d=128, layers=6, batch=32, warmup=1, steps=2)
    limit = size.live_bytes // 3
    out = bench_memory.run_mlp_round(size, limit, 0, None)
    ref = out["unlimited"]
    assert len(ref["loss"]) == 3 and all(x == x for x in ref["loss"])  # 3 steps, no NaN
    for config in bench_memory.CONFIGS[1:]:
        r = out[config]
        assert r["digest"] == ref["digest"], config  # weights and momentum, bitwise
        assert r["loss"] == ref["loss"], config
        assert r["limit"] == limit and 0 < r["peak"] <= limit, (config, r["peak"], limit)
        assert r["counters"]["spill_out"] > 0 and r["counters"]["spill_in"] > 0, config
    assert out["no-prefetch"]["counters"]["prefetched"] == 0


@pytest.mark.slow
def test_a_client_over_its_quota_spills_and_its_neighbour_keeps_running():
    size = bench_memory.NeighbourSize(a_buffers=6, a_side=256, b_side=128, block_s=0.6,
                                      settle_s=0.3, blocks=2, alone_s=0.3)  # fmt: skip
    res = bench_memory.run_neighbour(size)
    fits, over = res["blocks"]
    assert (fits["phase"], over["phase"]) == ("fits", "over")
    assert fits["counters"]["spill_out"] == 0 and over["counters"]["spill_out"] > 0
    assert fits["b_step_s"] and over["b_step_s"] and res["alone"]  # B ran all along
    assert fits["iter_s"] and over["iter_s"]
