"""The dispatcher's pure planner: placement, fairness, backpressure, failures (no sockets)."""

from gt.runtime.dispatcher.planner import Planner


def make(n_workers=1, max_in_flight=2):
    p = Planner(max_in_flight)
    for i in range(n_workers):
        p.add_worker(f"w{i}".encode(), {}, 0.0)
    return p


def test_clients_are_spread_over_workers_by_load():
    p = make(2)
    homes = [p.add_client(f"c{i}".encode(), {}, 0.0).home for i in range(4)]
    assert sorted(homes) == [0, 0, 1, 1]


def test_no_worker_means_no_client():
    assert Planner().add_client(b"c", {}, 0.0) is None


def test_batches_wait_when_the_worker_window_is_full():
    p = make(1, max_in_flight=2)
    c = p.add_client(b"c", {}, 0.0)
    sent = [s for i in range(5) for s in p.submit(c.cno, f"b{i}")]
    assert [b for _, _, b in sent] == ["b0", "b1"]
    assert len(c.queue) == 3
    more = p.done(0, c.cno, 10)
    assert [b for _, _, b in more] == ["b2"]


def test_a_dropped_batch_frees_its_slot_but_is_not_counted_as_run():
    p = make(1, max_in_flight=2)
    c = p.add_client(b"c", {}, 0.0)
    for i in range(2):
        p.submit(c.cno, f"b{i}")
    w = p.workers[c.home]
    p.done(0, c.cno, 10)
    p.finish(0, c.cno, None, 3, [], dropped=True)
    assert (w.in_flight, w.batches_done, w.batches_dropped, w.instructions_done) == (0, 1, 1, 13)


def test_round_robin_is_fair_between_clients():
    p = make(1, max_in_flight=1)
    a = p.add_client(b"a", {}, 0.0)
    b = p.add_client(b"b", {}, 0.0)
    order = []
    for i in range(4):
        order += [x for _, _, x in p.submit(a.cno, f"a{i}")]
    for i in range(4):
        order += [x for _, _, x in p.submit(b.cno, f"b{i}")]
    while len(order) < 8:
        order += [x for _, _, x in p.done(0, a.cno, 1)]
    # after the first send, the two clients alternate even though a queued everything first
    assert order == ["a0", "a1", "b0", "a2", "b1", "a3", "b2", "b3"]


def test_dead_worker_breaks_its_clients_only():
    p = make(2)
    c0 = p.add_client(b"c0", {}, 0.0)
    c1 = p.add_client(b"c1", {}, 0.0)
    lost = p.remove_worker(c0.home, "gone")
    assert [c.cno for c in lost] == [c0.cno]
    assert c0.broken == "gone" and c1.broken is None
    assert p.remove_worker(c0.home, "again") == []
    assert p.add_client(b"c2", {}, 0.0).home == c1.home


def test_removed_client_drops_its_queue():
    p = make(1, max_in_flight=1)
    c = p.add_client(b"c", {}, 0.0)
    p.submit(c.cno, "x")
    p.submit(c.cno, "y")
    assert p.remove_client(c.cno).cno == c.cno
    assert p.done(0, c.cno, 1) == []
    assert p.remove_client(c.cno) is None
