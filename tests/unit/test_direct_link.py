"""The worker's side of direct batches (gt.runtime.worker.direct), over an inproc socket pair."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from gt.runtime import protocol as P
from gt.runtime.worker import direct as D
from gt.runtime.worker.schedule import Entry, Scheduler

TOKEN = b"t" * 16


class Frame:
    """What pyzmq's zero-copy receive yields, as far as DirectLink reads it (``peer``: the
    ZAP User-Id a CURVE connection's frames carry)."""

    def __init__(self, data: bytes, peer: str | None = None):
        self.bytes = data
        self.buffer = memoryview(data)
        self.peer = peer

    def get(self, name: str) -> str | None:
        assert name == "User-Id"
        return self.peer


@pytest.fixture
def link() -> Iterator[tuple[D.DirectLink, zmq.Socket]]:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.bind("inproc://data")
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.IDENTITY, TOKEN)
    client.setsockopt(zmq.RCVTIMEO, 5000)
    client.connect("inproc://data")
    try:
        yield D.DirectLink(router, Scheduler(), guarded=False), client
    finally:
        client.close(0)
        router.close(0)
        ctx.term()


def got(client: zmq.Socket) -> object:
    return P.parse(client.recv_multipart()[0])


def run(ack: bool = True, token: bytes | None = TOKEN) -> P.Run:
    return P.Run(3, 1, 2, token, not ack, "alice", ack)


def batch_frames(seq: int = 5, token: bytes = TOKEN, peer: str | None = None) -> list:
    return [Frame(token), Frame(P.encode(P.Batch(seq, 1)), peer), Frame(P.encode_body([], []))]


def test_a_forwarded_batch_makes_its_client_known_once(link):
    dl, client = link
    dl.learn(run())
    assert got(client) == P.Known(3)
    dl.learn(run())  # the same client again: nothing more to say
    assert not client.poll(50)
    assert dl.clients == {TOKEN: (3, "alice")}


def test_a_planned_batch_or_one_without_a_token_teaches_nothing(link):
    dl, client = link
    dl.learn(run(ack=False))
    dl.learn(run(token=None))
    assert dl.clients == {} and not client.poll(50)


def test_a_client_without_a_link_yet_is_told_at_its_next_batch(link):
    dl, _client = link
    stranger = b"s" * 16
    dl.learn(P.Run(4, 1, 2, stranger, False, None, True))  # nobody connected with that identity
    assert stranger not in dl.clients  # not recorded: the next Run tries again


def test_a_direct_batch_of_a_known_client_becomes_a_queued_entry(link):
    dl, client = link
    dl.learn(run())
    got(client)
    e = dl.accept(batch_frames(), P.Batch(5, 1))
    assert isinstance(e, Entry) and e.direct and not e.planned
    assert e.msg == P.Run(3, 5, 1, TOKEN, False, "alice", True)
    assert [f.bytes for f in e.item[0]] == [f.bytes for f in batch_frames()[1:]]


def test_a_batch_from_an_unknown_token_is_refused_and_its_sender_told(link):
    dl, client = link
    with pytest.raises(P.ProtocolError, match="does not know"):
        dl.accept(batch_frames(), P.Batch(5, 1))
    err = got(client)
    assert type(err) is P.Error and err.code == P.E_UNKNOWN_CLIENT


def test_a_forgotten_client_is_refused(link):
    dl, client = link
    dl.learn(run())
    got(client)
    dl.forget(3)
    with pytest.raises(P.ProtocolError):
        dl.accept(batch_frames(), P.Batch(5, 1))


def test_a_client_past_its_queue_bound_is_refused(link, monkeypatch):
    dl, client = link
    monkeypatch.setattr(D, "DIRECT_QUEUE_MAX", 2)
    dl.learn(run())
    got(client)
    for seq in (1, 2):
        dl.sched.add(3, dl.accept(batch_frames(seq), P.Batch(seq, 1)))
    with pytest.raises(P.ProtocolError, match="more than 2"):
        dl.accept(batch_frames(3), P.Batch(3, 1))
    assert type(got(client)) is P.Error


def test_an_unacknowledged_batch_is_acknowledged_and_its_done_owed(link):
    dl, client = link
    dl.learn(run())
    got(client)
    e = dl.accept(batch_frames(), P.Batch(5, 1))
    err = ["ValueError: boom", 9, 3]
    dl.finished(e, [err], 1, acked=False)
    assert got(client) == P.Ack(5, [err], False)
    assert dl.dones == {3: [1, 1, 1, 0]} and dl.owed == 1


def test_a_batch_its_fetch_acknowledged_sends_nothing_more_unless_it_failed(link):
    dl, client = link
    dl.learn(run())
    got(client)
    e = dl.accept(batch_frames(), P.Batch(5, 1))
    dl.finished(e, [], 1, acked=True)
    assert not client.poll(50)
    dl.finished(e, [["late", 1, 0]], 1, acked=True)  # found at the batch's device fence
    assert got(client) == P.Ack(5, [["late", 1, 0]], True)


def test_the_dispatcher_is_told_after_a_delay_or_a_count_one_message_per_client(link):
    dl, client = link
    dl.learn(run())
    got(client)
    e = dl.accept(batch_frames(), P.Batch(5, 1))
    assert not dl.due(0.0) and dl.wait_ms(100) == 100
    dl.finished(e, [], 3, acked=True)
    assert not dl.due(dl.first_done) and 0 < dl.wait_ms(100) <= D.DONE_DELAY_S * 1000 + 1
    assert dl.due(dl.first_done + 2 * D.DONE_DELAY_S)
    for _ in range(D.DONE_BATCH - 2):
        dl.finished(e, [], 1, acked=True)
    dl.finished(e, [], 0, acked=False, dropped=True)  # its client left
    assert dl.due(dl.first_done)
    ctx = zmq.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind("inproc://dispatcher")
    b.connect("inproc://dispatcher")
    try:
        dl.flush(a)
        assert dl.dones == {} and dl.owed == 0
        assert P.parse(b.recv()) == P.Ran(3, D.DONE_BATCH, 3 + D.DONE_BATCH - 2, 0, 1)
        assert not b.poll(50)  # one message for all of them
    finally:
        a.close(0)
        b.close(0)


@pytest.mark.parametrize(
    "peer, ok",
    [("client:alice", True), ("client:bob", False), ("client", False), ("monitor", False),
     ("worker", False), ("admin", False)],
)  # fmt: skip
def test_over_curve_only_the_tenant_the_dispatcher_named_may_send(link, peer, ok):
    dl, client = link
    dl.guarded = True
    dl.learn(run())  # the dispatcher forwarded a batch of alice's program
    got(client)
    if ok:
        assert dl.accept(batch_frames(peer=peer), P.Batch(5, 1)).msg.tenant == "alice"
    else:
        with pytest.raises(P.ProtocolError, match="may not run it"):
            dl.accept(batch_frames(peer=peer), P.Batch(5, 1))
