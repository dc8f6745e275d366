"""The dispatcher tells bad input (counted, dropped) from bugs in its own code (logged, counted)."""

from __future__ import annotations

import threading

import msgpack
import pytest
import zmq
from helpers import wait_for

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
