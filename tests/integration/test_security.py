"""A shared dispatcher over TCP: only holders of the cluster's keys get in, each role does what it
may and no more, and no tenant reads or forges another's results."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zmq
from helpers import wait_for

import gt
from gt.runtime import protocol as P
from gt.runtime import security as S
from gt.runtime.control import ControlError, request

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    ring = S.create(root / "cluster")
    for role in ("client", "monitor", "worker"):
        S.export(ring, role, root / role)
    S.create(root / "stranger")  # another cluster's keys
    return root


@pytest.fixture(scope="module")
def cluster(keys):
    """``gt dispatcher`` on TCP with one local worker, using the cluster's keys."""
    env = {**os.environ, S.KEYS_ENV: str(keys / "cluster")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gt", "dispatcher", "--workers", "1", "--ready-json"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        eps = json.loads(proc.stdout.readline())
        old = os.environ.get(S.KEYS_ENV)
        os.environ[S.KEYS_ENV] = str(keys / "cluster")
        wait_for(lambda: request(eps["front"], "stats")["workers"], timeout=60)
        yield eps
    finally:
        proc.terminate()
        proc.wait(10)
        if old is None:
            os.environ.pop(S.KEYS_ENV, None)
        else:
            os.environ[S.KEYS_ENV] = old


@pytest.fixture
def as_role(keys, monkeypatch):
    """Act as a process holding only one role's keys (or a stranger's)."""

    def use(who: str) -> None:
        monkeypatch.setenv(S.KEYS_ENV, str(keys / who))
        monkeypatch.delenv("GT_ROLE", raising=False)

    return use


def _stats(eps: dict) -> dict:
    return request(eps["control"], "stats")


def test_a_client_with_the_clusters_keys_runs_a_program_sharded_over_curve(cluster, as_role):
    as_role("client")
    conn = gt.connect(cluster["front"], timeout=30)
    try:
        assert conn.role == "client"
        big = np.arange(40_000, dtype=np.float32)  # over the direct path's threshold
        assert (gt.from_numpy(big) * 2).numpy().sum() == big.sum() * 2
        np.testing.assert_array_equal((gt.arange(4) + 1).numpy(), [1, 2, 3, 4])
    finally:
        gt.disconnect()


@pytest.mark.parametrize("who", ["stranger", "nobody"])
def test_without_the_clusters_keys_nothing_gets_in(cluster, as_role, keys, who):
    as_role(who)
    if who == "nobody":
        os.environ[S.KEYS_ENV] = str(keys / "absent")
        with pytest.raises(gt.DispatcherLost, match="no GT keys"):
            gt.connect(cluster["front"], timeout=3)
        with pytest.raises(ControlError, match="no GT keys"):
            request(cluster["control"], "stats", timeout=2)
        return
    with pytest.raises(gt.DispatcherLost, match="no dispatcher answered"):
        gt.connect(cluster["front"], connect_timeout=2)  # the handshake fails: never a welcome
    with pytest.raises(ControlError, match="no GT dispatcher answered"):
        request(cluster["control"], "stats", timeout=2)


def test_a_program_with_a_monitors_key_hears_why_it_may_not_run(cluster, as_role, monkeypatch):
    # (it waited out its connect timeout, then heard "no dispatcher answered ... your keys?")
    as_role("cluster")
    monkeypatch.setenv("GT_ROLE", "monitor")  # (the owner's keys, used as a monitor's)
    with pytest.raises(gt.DispatcherLost, match="a monitor's key may not run programs here"):
        gt.connect(cluster["front"], connect_timeout=20)


def test_a_plain_socket_is_not_answered(cluster):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    try:
        s.connect(cluster["control"])
        s.send(P.encode(P.Control("stats", None)))
        assert not s.poll(1000)
    finally:
        s.close(0)
        ctx.term()


def test_only_an_admin_changes_the_cluster(cluster, as_role):
    as_role("client")
    with pytest.raises(ControlError, match="config_apply needs the admin role"):
        request(cluster["front"], "config_apply", {"config": {"x": {"replicate": {}}}, "by": "t"})
    as_role("monitor")
    with pytest.raises(ControlError, match="memory_set needs the admin role"):
        request(cluster["control"], "memory_set", {"settings": {"memory_limit": "1GB"}})
    as_role("cluster")  # the owner's full keyring acts as admin
    out = request(cluster["control"], "config_apply", {"config": {"x": {"replicate": {}}},
                                                        "by": "test"})  # fmt: skip
    assert "x" in out["signals"]
    request(cluster["control"], "config_apply", {"config": {}, "by": "test"})


def test_tenants_see_their_own_details_and_no_one_elses(cluster, as_role):
    as_role("client")
    conn = gt.connect(cluster["front"], timeout=30)
    try:
        gt.tensor([1.0]).item()
        mine = conn.control("stats")["clients"]
        me = next(c for c in mine if c["id"] == conn.client_no)
        assert me["argv"] and me["argv"] != ["(another tenant)"] and me["pid"] == os.getpid()
        as_role("monitor")
        seen = _stats(cluster)["clients"]
        assert all(c["argv"] == ["(another tenant)"] and c["pid"] is None for c in seen)
        as_role("cluster")
        full = _stats(cluster)["clients"]
        assert any(c["pid"] == os.getpid() for c in full)
    finally:
        gt.disconnect()


def test_a_tenant_sees_the_placement_of_its_own_tensors_only(cluster, as_role):
    as_role("cluster")  # the owner's keyring acts as admin
    request(cluster["control"], "config_apply", {"config": {"rows": {"shard": {"axis": 0}}},
                                                 "by": "test"})  # fmt: skip
    as_role("client")
    conn = gt.connect(cluster["front"], timeout=30)
    other = None
    try:
        with gt.signal.context("rows"):
            x = gt.from_numpy(np.ones((4, 2), dtype=np.float32))
        assert x.numpy().sum() == 8
        other = gt.runtime.client.Connection(cluster["front"])  # a second tenant
        seen = other.control("placement")
        assert conn.client_no not in seen and set(seen) <= {other.client_no}
        assert conn.client_no in conn.control("placement")
        as_role("cluster")
        assert conn.client_no in request(cluster["control"], "placement")  # admins: everyone's
    finally:
        if other is not None:
            other.close()
        gt.disconnect()
        as_role("cluster")
        request(cluster["control"], "config_apply", {"config": {}, "by": "test"})


def test_the_event_stream_is_for_monitors(cluster, as_role):
    def hears(role_dir: str) -> bool:
        as_role(role_dir)
        ctx = zmq.Context()
        sub = ctx.socket(zmq.SUB)
        try:
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            S.secure_connect(sub, cluster["events"], ("monitor", "client"))
            sub.connect(cluster["events"])
            return bool(sub.poll(3000))  # the dispatcher publishes stats every second
        finally:
            sub.close(0)
            ctx.term()

    assert hears("monitor")
    assert not hears("client")


def test_a_worker_cannot_report_a_batch_it_does_not_run(cluster, as_role):
    as_role("worker")
    before = _stats(cluster)["bad_messages"]
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    try:
        S.secure_connect(s, cluster["back"], ("worker",))
        s.connect(cluster["back"])
        reg = P.Register(host="x", pid=1, device="cpu", backend="numpy", data="ipc:///nowhere",
                         hb=b"fake/hb")  # fmt: skip
        s.send(P.encode(reg))
        assert s.poll(5000) and type(P.parse(s.recv_multipart()[0])) is P.Registered
        s.send(P.encode(P.Done(1, 12345, [["forged", 0, 0]], 1, 10)))
        s.send(P.encode(P.Relay(1, 7, "float32", [1], None)), zmq.SNDMORE)
        s.send(b"\0\0\0\0")
        as_role("cluster")
        wait_for(lambda: _stats(cluster)["bad_messages"] >= before + 2, timeout=10)
    finally:
        s.close(0)
        ctx.term()


def test_a_tenant_publishes_its_own_events_only(cluster, as_role):
    from gt.trace import events as E

    as_role("monitor")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    S.secure_connect(sub, cluster["events"], ("monitor",))
    sub.connect(cluster["events"])
    as_role("client")
    raw = ctx.socket(zmq.DEALER)  # a tenant speaking the protocol by hand
    S.secure_connect(raw, cluster["front"], ("client",))
    raw.connect(cluster["front"])
    push = ctx.socket(zmq.PUSH)  # and straight to the bus's intake
    push.setsockopt(zmq.LINGER, 0)
    S.secure_connect(push, cluster["events_in"], ("client",))
    push.connect(cluster["events_in"])
    heard: list[tuple[str, str, dict]] = []

    def hear(until) -> bool:
        def got() -> bool:
            while sub.poll(50):
                source, _first, events = E.unpack_batch(sub.recv_multipart()[1])
                heard.extend((source, kind, fields) for kind, _t, fields in events)
            return until()

        return wait_for(got, timeout=20)

    try:
        hear(lambda: any(s == "dispatcher" for s, _k, _f in heard))  # subscribed
        raw.send(P.encode(P.Hello(os.getpid(), "x", ["evil"], b"tok-evil")))
        assert raw.poll(10_000)
        cno = P.parse(raw.recv_multipart()[0]).client
        as_role("cluster")
        before = _stats(cluster)["bad_messages"]
        forged = [
            E.pack_batch("worker:0", 0, [[E.MEMORY, 1, {"worker": 0, "used": 1 << 40}]]),
            E.pack_batch(f"client:{cno}", 1, [[E.MARK, 1, {"client": cno + 1, "label": "f1"}]]),
            E.pack_batch(f"client:{cno + 1}", 2, [[E.MARK, 1, {"client": cno + 1, "label": "f2"}]]),
        ]
        for batch in forged:
            raw.send_multipart([P.encode(P.Events()), batch])
        try:  # (once the bus has refused the handshake the PUSH has no pipe: it would block)
            push.send_multipart(
                [E.TOPIC, E.pack_batch("worker:0", 9, [[E.MARK, 1, {"label": "f3"}]])], zmq.NOBLOCK
            )
        except zmq.Again:
            pass  # refused before it could even be queued: what the test wants to see
        own = E.pack_batch(f"client:{cno}", 3, [[E.MARK, 1, {"client": cno, "label": "mine"}]])
        raw.send_multipart([P.encode(P.Events()), own])
        hear(lambda: any(f.get("label") == "mine" for _s, _k, f in heard))
        wait_for(lambda: _stats(cluster)["bad_messages"] >= before + 3, timeout=10)
        # a real client's events still arrive, through its connection
        as_role("client")
        conn = gt.connect(cluster["front"], timeout=30)
        try:
            conn.mark("from the api")
            hear(lambda: any(f.get("label") == "from the api" for _s, _k, f in heard))
        finally:
            gt.disconnect()
        labels = {f.get("label") for _s, k, f in heard if k == E.MARK}
        assert {"mine", "from the api"} <= labels and not labels & {"f1", "f2", "f3"}
        assert not any(k == E.MEMORY and f.get("used") == 1 << 40 for _s, k, f in heard)
    finally:
        for s in (sub, raw, push):
            s.close(0)
        ctx.term()
