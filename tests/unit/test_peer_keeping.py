"""The dispatcher's record of which connection each peer speaks on (``PeerKeeping.heard``): a
connection's fd is read once, a closed connection marks its peer cut until it speaks again, and a
reused fd belongs to its new connection."""

from __future__ import annotations

import zmq

from gt.runtime.dispatcher import keeping
from gt.runtime.dispatcher.keeping import PeerKeeping
from gt.runtime.liveness import RunningClock


class Frame:
    """A received frame whose connection is ``fd``; counts how often it was asked."""

    asked = 0

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def get(self, prop):
        assert prop == zmq.SRCFD
        Frame.asked += 1
        return self.fd


def _keeper(monkeypatch, closed: list, sock: str = "front") -> PeerKeeping:
    """A keeper whose ``sock`` monitor reports the fds appended to ``closed`` as closed."""
    k = object.__new__(PeerKeeping)
    k._fd_owner, k._fd_known, k._cut = {}, set(), {}
    k.clock = RunningClock(period=0.1, stall=1.0)
    k.monitors = {"front": "front", "back": "back"}
    monkeypatch.setattr(
        keeping,
        "read_event",
        lambda mon: (zmq.EVENT_DISCONNECTED, closed.pop(0)) if mon == sock and closed else None,
    )
    Frame.asked = 0
    return k


def test_a_known_connection_is_not_asked_for_its_fd_again(monkeypatch):
    k = _keeper(monkeypatch, [])
    for _ in range(100):
        k.heard("client", 3, Frame(11), "front", b"c3")
    assert Frame.asked == 1
    assert k._fd_owner == {("front", 11): ("client", 3, b"c3")}


def test_a_closed_connection_cuts_its_peer_until_it_speaks_again(monkeypatch):
    closed: list[int] = []
    k = _keeper(monkeypatch, closed)
    k.heard("client", 3, Frame(11), "front", b"c3")
    closed.append(11)
    k.on_monitor_events()
    assert ("client", 3) in k._cut
    k.heard("client", 3, Frame(12), "front", b"c3")  # back, on a new connection
    assert ("client", 3) not in k._cut
    assert k._fd_owner == {("front", 12): ("client", 3, b"c3")}
    closed.append(12)  # and that one's close is seen too: its fd was learnt again
    k.on_monitor_events()
    assert ("client", 3) in k._cut


def test_a_reused_fd_belongs_to_the_new_connection(monkeypatch):
    closed: list[int] = []
    k = _keeper(monkeypatch, closed)
    k.heard("client", 3, Frame(11), "front", b"c3")
    k.heard("client", 4, Frame(11), "front", b"c4")  # c3's close not seen yet; the OS reused 11
    assert k._fd_owner == {("front", 11): ("client", 4, b"c4")}
    assert ("front", b"c3") not in k._fd_known  # c3 will be asked again if it speaks
    closed.append(11)
    k.on_monitor_events()
    assert list(k._cut) == [("client", 4)]


def test_any_message_of_a_peer_clears_its_cut_even_on_its_other_connection(monkeypatch):
    closed: list[int] = []
    k = _keeper(monkeypatch, closed, "back")
    k.heard("worker", 0, Frame(5), "back", b"main")
    k.heard("worker", 0, Frame(6), "back", b"heartbeats")
    closed.append(6)
    k.on_monitor_events()
    assert ("worker", 0) in k._cut
    k.heard("worker", 0, Frame(5), "back", b"main")  # its main connection is alive
    assert ("worker", 0) not in k._cut


def test_a_close_not_yet_read_is_the_old_connections_when_a_new_one_reuses_its_fd(monkeypatch):
    # The monitors are read by the housekeeping (0.1 s) now, not on every wake: a close may wait
    # there while a new connection on the same fd speaks. It must cut the old peer, not the new.
    closed: list[int] = []
    k = _keeper(monkeypatch, closed)
    k.heard("client", 3, Frame(11), "front", b"c3")
    closed.append(11)  # c3 hung up; the housekeeping has not read it yet
    k.heard("client", 4, Frame(11), "front", b"c4")  # the OS gave 11 to a new connection
    k.on_monitor_events()  # the housekeeping comes round
    assert list(k._cut) == [("client", 3)]
    assert k._fd_owner == {("front", 11): ("client", 4, b"c4")}
