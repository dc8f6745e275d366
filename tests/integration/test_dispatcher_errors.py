"""The dispatcher tells bad input (counted, dropped) from bugs in its own code (logged, counted)."""

from __future__ import annotations

import threading

import msgpack
import pytest
import zmq
from helpers import wait_for

from gt.runtime import ops as O
from gt.runtime import protocol as P
from gt.runtime.control import request
from gt.runtime.dispatcher.loop import Dispatcher


@pytest.fixture
def dispatcher(tmp_path):
    d = Dispatcher(write_discovery=False, ipc_dir=str(tmp_path))  # raw sockets need no keys
    t = threading.Thread(target=d.run, name="test-dispatcher", daemon=True)
    t.start()
    try:
        yield d
    finally:
        d.stop()
        t.join(timeout=10)


def _stats(d: Dispatcher) -> dict:
    return request(d.endpoints["control"], "stats", timeout=5.0)


def test_garbage_is_bad_input_and_a_raising_handler_is_an_internal_error(
    dispatcher, monkeypatch, caplog
):
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(dispatcher.address)
    try:
        sock.send(msgpack.packb([P.VERSION, P.Hello.KIND, "not a pid", "h", [], b"t"]))
        wait_for(lambda: _stats(dispatcher)["bad_messages"] == 1, timeout=10)
        assert _stats(dispatcher)["internal_errors"] == 0

        def broken(ident: bytes, info: dict) -> None:
            raise KeyError("a bug")

        monkeypatch.setattr(dispatcher, "_hello", broken)
        sock.send(P.encode(P.Hello(1, "h", ["x.py"], b"t" * 16)))
        stats = wait_for(
            lambda: (s := _stats(dispatcher))["internal_errors"] == 1 and s, timeout=10
        )
        assert stats["bad_messages"] == 1  # a bug is never disguised as bad input
        assert "a bug" in caplog.text and "internal error" in caplog.text
    finally:
        sock.close(0)


def test_a_hello_of_another_protocol_version_hears_why_it_is_refused(dispatcher):
    # (it got silence, and its program a "no dispatcher answered ... your keys?" 10 s later)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(dispatcher.address)
    try:
        sock.send(msgpack.packb([P.VERSION - 1, P.Hello.KIND, 1, "h", ["x.py"], b"t" * 16]))
        assert sock.poll(10_000)
        msg = P.parse(sock.recv())
        assert type(msg) is P.Error and msg.code == P.E_PROTOCOL
        assert f"protocol {P.VERSION}, the program {P.VERSION - 1}" in msg.message
    finally:
        sock.close(0)


def test_a_hellos_host_and_command_line_are_kept_bounded():
    # (a 50 MB host name was kept, and sent in every snapshot to every monitor)
    from gt.runtime.launch import LocalCluster

    with LocalCluster(workers=1) as cluster:
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(cluster.address)
        try:
            sock.send(P.encode(P.Hello(1, "h" * 1_000_000, ["a" * 10_000] * 10_000, b"t" * 16)))
            assert sock.poll(10_000) and type(P.parse(sock.recv())) is P.Welcome
            (client,) = request(cluster.endpoints["control"], "stats", timeout=5.0)["clients"]
        finally:
            sock.close(0)
    assert len(client["host"]) <= 255
    assert len(client["argv"]) <= 64 and max(map(len, client["argv"])) <= 200


def test_an_upload_whose_data_never_comes_does_not_hold_the_worker_for_others():
    # (the worker waited 10 s inside the batch for each such upload: every other client on it
    # waited too, and a tenant could repeat it for ever)
    import time

    import gt
    from gt.runtime.launch import LocalCluster

    with LocalCluster(workers=1) as cluster:
        gt.connect(cluster.address, timeout=60)
        raw = zmq.Context.instance().socket(zmq.DEALER)
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(cluster.address)
        try:
            assert (gt.ones(3) + 1).sum().item() == 6.0
            raw.send(P.encode(P.Hello(1, "h", ["raw"], b"r" * 16)))
            assert raw.poll(10_000) and type(P.parse(raw.recv())) is P.Welcome
            ups = [[O.OPCODE["upload"], i, [], {"shape": [3], "dtype": "float32", "tok": 9000 + i}, 1]
                   for i in range(1, 4)]  # fmt: skip
            raw.send_multipart([P.encode(P.Batch(1, 3)), P.encode_body(ups, [], None)])
            request(cluster.endpoints["control"], "stats", timeout=5.0)  # (it has been taken)
            t0 = time.monotonic()
            assert (gt.ones(3) + 1).sum().item() == 6.0
            assert time.monotonic() - t0 < 5.0  # (was 10 s or more: one wait per upload)
        finally:
            raw.close(0)
            gt.disconnect()


def test_a_client_gone_right_after_its_hello_leaves_the_list_soon():
    # (it was watched by its connection only from its second message: it stayed listed, and in
    # gt top, for the 60 s client timeout)
    import time

    from gt.runtime.launch import LocalCluster

    with LocalCluster(workers=1) as cluster:
        s = zmq.Context.instance().socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(cluster.address)
        s.send(P.encode(P.Hello(1, "h", ["x.py"], b"t" * 16)))
        assert s.poll(10_000)
        s.recv()
        s.close(0)
        t0 = time.monotonic()
        wait_for(lambda: not request(cluster.endpoints["control"], "stats")["clients"],
                 timeout=40)  # fmt: skip
        assert time.monotonic() - t0 < 30
