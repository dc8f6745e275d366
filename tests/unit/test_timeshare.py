"""The one definition of a worker's time: compute, comm, wait and idle partition wall time."""

from __future__ import annotations

import random

import pytest

from gt.trace.timeshare import COMM, COMPUTE, WAIT, TimeAccount, shares


def test_a_batch_claims_the_transfers_inside_it_and_the_rest_is_compute():
    a = TimeAccount()
    a.transfer(20, 40, waiting=True)
    a.transfer(30, 50, waiting=False)  # overlaps the wait: waiting wins there
    a.batch(0, 100)
    assert list(a.segments) == [
        (0, 20, COMPUTE),
        (20, 40, WAIT),
        (40, 50, COMM),
        (50, 100, COMPUTE),
    ]
    assert a.total == {COMPUTE: 70, COMM: 10, WAIT: 20}


def test_transfers_outside_batches_count_on_their_own_and_beyond_a_batch_carry_on():
    a = TimeAccount()
    a.transfer(5, 15, waiting=False)  # starts before the batch
    a.batch(10, 20)
    a.transfer(18, 30, waiting=True)  # starts inside time already accounted for: clipped
    a.batch(25, 40)
    assert list(a.segments) == [(5, 15, COMM), (15, 20, COMPUTE), (20, 30, WAIT), (30, 40, COMPUTE)]
    a.transfer(45, 60, waiting=False)  # not claimed yet: counted by totals() and window()
    assert a.totals() == {COMPUTE: 15, COMM: 25, WAIT: 10}
    assert a.window(40, 100) == {COMPUTE: 0, COMM: 15, WAIT: 0}


@pytest.mark.parametrize("seed", range(40))
def test_segments_never_overlap_and_add_up_whatever_the_order(seed):
    r = random.Random(seed)
    a, t = TimeAccount(), 0
    for _ in range(40):
        if r.random() < 0.5:
            x = r.randint(t - 20, t + 50)
            a.transfer(x, x + r.randint(1, 30), r.random() < 0.5)
        else:
            x = r.randint(t - 10, t + 40)
            y = x + r.randint(0, 40)
            a.batch(x, y)
            t = max(t, y)
    segs = list(a.segments)
    assert all(p[1] <= q[0] for p, q in zip(segs, segs[1:]))
    total = dict.fromkeys((COMPUTE, COMM, WAIT), 0)
    for s0, s1, part in segs:
        total[part] += s1 - s0
    assert total == a.total
    lo, hi = 0, max(t, 1)
    sh = shares(a.window(lo, hi), hi - lo)
    assert sum(sh.values()) == pytest.approx(1.0) and min(sh.values()) >= 0


def test_shares_add_up_to_one_even_when_rounding_overshoots():
    sh = shares({COMPUTE: 60, COMM: 30, WAIT: 11}, 100)
    assert sum(sh.values()) == pytest.approx(1.0) and sh["idle"] == 0.0
    assert shares({}, 0) is None


def test_parts_are_the_windows_segments_and_added_counts_the_new_ones():
    acc = TimeAccount()
    for i in range(10):
        acc.batch(i * 100, i * 100 + 50)
    assert sorted(acc.parts(0, 1000)) == [(i * 100, i * 100 + 50, "compute") for i in range(10)]
    assert len(acc.parts(700, 1000)) == 3 and acc.added == 10
    acc.batch(950, 990)  # (runs on from the last batch's end: the segment grows, none is added)
    assert acc.added == 10


def test_part_bins_follow_the_account_as_it_grows():
    from gt.trace.records import PartBins

    acc, bins = TimeAccount(), PartBins(100)
    rng = random.Random(3)
    t = 0
    for _ in range(300):
        a = t + rng.choice((0, 0, 7, 40))  # 0: the batch runs on from the last (a grown segment)
        if rng.random() < 0.3:
            acc.transfer(a, a + 15, rng.random() < 0.5)
        t = a + rng.randint(1, 90)
        acc.batch(a, t)
        if rng.random() < 0.5:
            bins.update(acc)
    bins.update(acc)
    for k in range(0, t // 100):
        want = acc.window(k * 100, (k + 1) * 100)
        got = bins.bins.get(k, {})
        assert {p: got.get(p, 0) for p in (COMPUTE, COMM, WAIT)} == {
            p: want[p] for p in (COMPUTE, COMM, WAIT)
        }
