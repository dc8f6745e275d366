"""Which batch a worker runs next: each client's batches in order, clients in turn."""

from __future__ import annotations

import pytest

from gt.runtime.worker.schedule import DEBT_MAX_S, SLICE_S, Entry, Scheduler


def _run_all(s: Scheduler, cut: set[str] = frozenset()) -> list[str]:
    """Run everything; batches named in ``cut`` yield once before they finish."""
    ran, yielded = [], set()
    while s.order:
        e = s.next()
        if e.msg in cut and e.msg not in yielded:
            yielded.add(e.msg)
            e.job = "started"
            ran.append(e.msg + "/")
            s.yielded()
            continue
        ran.append(e.msg)
        s.finished()
    return ran


def test_clients_take_turns_and_each_keeps_its_order():
    s = Scheduler()
    for client, name in ((1, "a1"), (1, "a2"), (1, "a3"), (2, "b1"), (3, "c1"), (2, "b2")):
        s.add(client, Entry(None, name))
    assert len(s) == 6
    assert _run_all(s) == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_a_batch_that_yields_lets_the_next_client_go_and_then_resumes():
    s = Scheduler()
    s.add(1, Entry(None, "long"))
    s.add(2, Entry(None, "short"))
    s.add(1, Entry(None, "after"))
    assert _run_all(s, cut={"long"}) == ["long/", "short", "long", "after"]


def test_others_waiting_and_what_is_still_to_start():
    s = Scheduler()
    s.add(1, Entry(None, "a"))
    assert not s.others_waiting(1)
    s.add(2, Entry(None, "b"))
    assert s.others_waiting(1) and s.others_waiting(2)
    s.next().job = "started"
    assert [e.msg for e in s.waiting()] == ["b"]


def test_a_client_that_left_loses_its_queued_batches():
    s = Scheduler()
    s.add(1, Entry(None, "a"))
    s.add(2, Entry(None, "b"))
    s.drop(1)
    s.drop(7)  # never had any
    assert _run_all(s) == ["b"] and not s.queues


def test_planned_batches_start_in_arrival_order_whoever_sent_them():
    # Client 1 has an ordinary batch ahead of its planned one; client 2's planned batch came
    # later. Taking turns alone would run p2 before p1 here, while a worker without u1 would run
    # p1 first: each worker would wait for the other's part of a different batch.
    s = Scheduler()
    s.add(1, Entry(None, "u1"))
    s.add(1, Entry(None, "p1", planned=True))
    s.add(2, Entry(None, "p2", planned=True))
    s.add(3, Entry(None, "u3"))
    assert _run_all(s) == ["u1", "u3", "p1", "p2"]


def test_dropping_a_client_releases_the_planned_batches_behind_its_own():
    s = Scheduler()
    s.add(1, Entry(None, "p1", planned=True))
    s.add(2, Entry(None, "p2", planned=True))
    s.next()
    s.drop(1)  # left while p1 ran
    assert _run_all(s) == ["p2"]


def test_finishing_without_a_current_batch_is_a_bug_not_a_silent_skip():
    s = Scheduler()
    s.add(1, Entry(None, "a"))
    with pytest.raises(RuntimeError, match="next"):
        s.finished()


def test_a_slice_that_ran_past_its_time_shortens_its_clients_next_ones():
    s = Scheduler()
    s.add(1, Entry(None, "spilling"))
    s.add(2, Entry(None, "other"))
    assert s.budget(1) == SLICE_S
    s.charge(1, SLICE_S + 0.002)  # its last instruction ran 2 ms past the slice
    assert s.budget(1) == pytest.approx(SLICE_S - 0.002) and s.budget(2) == SLICE_S
    s.charge(1, SLICE_S - 0.002 + 0.001)  # the next slice ran 1 ms past its shorter budget
    assert s.budget(1) == pytest.approx(SLICE_S - 0.001)
    s.charge(1, SLICE_S - 0.004)  # a short slice pays the rest back; no credit is kept
    assert s.budget(1) == SLICE_S and 1 not in s.debt


def test_debt_is_bounded_and_forgotten_when_the_client_goes_idle():
    s = Scheduler()
    s.add(1, Entry(None, "a"))
    s.add(2, Entry(None, "b"))
    s.charge(1, 10.0)  # one enormous instruction
    assert s.debt[1] == DEBT_MAX_S and s.budget(1) == 0.0  # one instruction per turn, for a while
    s.next()
    s.finished()  # client 1 has nothing queued now
    assert s.budget(1) == SLICE_S
    s.add(2, Entry(None, "b2"))
    s.charge(2, 1.0)
    s.drop(2)
    assert s.debt == {}


def test_the_worker_loop_polls_without_waiting_while_anything_is_taken_in_or_runnable():
    from gt.runtime.worker.loop import IDLE_POLL_MS, poll_timeout_ms

    # A long batch's slice checks move the next batches from the socket into the inbox, where a
    # poll cannot see them: the loop must not then sleep its idle timeout before running them.
    assert poll_timeout_ms(runnable=False, inbox=3) == 0
    assert poll_timeout_ms(runnable=True, inbox=0) == 0
    assert poll_timeout_ms(runnable=False, inbox=0) == IDLE_POLL_MS > 0
