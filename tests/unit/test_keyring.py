"""Keyrings (pure file work): made private, read back, one role's part exported, refusals named."""

from __future__ import annotations

import os
import stat

import pytest
import zmq

from gt.runtime import security as S


def test_a_new_keyring_is_private_and_holds_every_role(tmp_path):
    ring = S.create(tmp_path / "k")
    assert stat.S_IMODE(os.stat(ring.path).st_mode) == 0o700
    assert set(ring.secret) == set(ring.public) == set(S.ROLES)
    assert ring.server[1] is not None
    for role in S.ROLES:
        assert ring.role_of(ring.public[role]) == role
        assert stat.S_IMODE(os.stat(ring.path / f"{role}.key_secret").st_mode) == 0o600
    with pytest.raises(FileExistsError):
        S.create(ring.path)
    again = S.create(ring.path, force=True)
    assert again.public["client"] != ring.public["client"]


def test_an_export_holds_only_its_roles_secret(tmp_path):
    ring = S.create(tmp_path / "k")
    S.export(ring, "client", tmp_path / "tenant")
    tenant = S.load(tmp_path / "tenant")
    assert set(tenant.secret) == {"client"} and set(tenant.public) == set(S.ROLES)
    assert tenant.server == (ring.server[0], None)  # the dispatcher's public key only
    assert tenant.best("admin", "client") == "client"
    with pytest.raises(S.KeysMissing, match="no admin secret"):
        tenant.best("admin")
    with pytest.raises(S.KeysMissing, match="no role"):
        S.export(ring, "root", tmp_path / "x")


def test_missing_or_shared_keys_are_refused_with_what_to_do(tmp_path):
    with pytest.raises(S.KeysMissing, match="run `gt keys`"):
        S.load(tmp_path / "none")
    ring = S.create(tmp_path / "k")
    os.chmod(ring.path, 0o755)  # (a mounted Kubernetes secret's directory): the files decide
    assert S.load(ring.path).secret
    os.chmod(ring.path / "client.key_secret", 0o644)
    with pytest.raises(S.KeysMissing, match="readable by other users"):
        S.load(ring.path)


def test_only_tcp_sockets_get_curve(tmp_path, monkeypatch):
    ring = S.create(tmp_path / "k")
    monkeypatch.setenv(S.KEYS_ENV, str(ring.path))
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    try:
        assert S.secure_connect(s, "ipc:///tmp/x") is None
        assert s.get(zmq.MECHANISM) == zmq.NULL
        assert S.secure_connect(s, "tcp://127.0.0.1:1", ("monitor",)) == "monitor"
        assert s.get(zmq.MECHANISM) == zmq.CURVE
        monkeypatch.setenv("GT_ROLE", "client")
        assert S.secure_connect(s, "tcp://127.0.0.1:1") == "client"
    finally:
        s.close(0)
        ctx.term()


def test_a_served_socket_lets_in_only_its_roles_and_names_them(tmp_path, monkeypatch):
    ring = S.create(tmp_path / "k")
    monkeypatch.setenv(S.KEYS_ENV, str(ring.path))
    ctx = zmq.Context()
    guard = S.Guard(ctx, ring)
    socks = []
    try:
        srv = ctx.socket(zmq.ROUTER)
        socks.append(srv)
        guard.serve(srv, "back")  # workers only
        port = srv.bind_to_random_port("tcp://127.0.0.1")
        for role in ("client", "worker"):
            c = ctx.socket(zmq.DEALER)
            socks.append(c)
            S.secure_connect(c, f"tcp://127.0.0.1:{port}", (role,))
            c.connect(f"tcp://127.0.0.1:{port}")
            c.send(role.encode())
        assert srv.poll(5000)
        frames = srv.recv_multipart(copy=False)
        assert frames[1].bytes == b"worker" and S.role_of(frames[1]) == "worker"
        assert not srv.poll(300)  # the client's message never arrives
    finally:
        for s in socks:
            s.close(0)
        guard.close()
        ctx.term()


def test_a_tenants_key_is_a_client_known_by_name_until_it_is_removed(tmp_path):
    ring = S.create(tmp_path / "k")
    pub = S.add_tenant(ring.path, "alice")
    assert stat.S_IMODE(os.stat(ring.path / S.TENANTS).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(pub.with_suffix(".key_secret")).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        S.add_tenant(ring.path, "alice")
    for bad in ("", "a b", "-x", "../up", "x" * 33):
        with pytest.raises(S.KeysMissing, match="a tenant's name"):
            S.add_tenant(ring.path, bad)
    ring.refresh_tenants()  # (the running process's ring reads the change)
    assert ring.take_revoked() == []
    key = next(k for k, n in ring.tenants.items() if n == "alice")
    assert ring.peer_of(key) == "client:alice" and ring.role_of(key) == "client"
    assert S.base_role("client:alice") == "client" and S.base_role("monitor") == "monitor"
    S.remove_tenant(ring.path, "alice")
    ring.refresh_tenants()  # (say the ZAP thread read it first, at a handshake)
    ring.refresh_tenants()  # the dispatcher's loop still hears of it
    assert ring.take_revoked() == ["alice"] and ring.peer_of(key) is None
    assert ring.take_revoked() == []
    with pytest.raises(S.KeysMissing, match="no tenant alice"):
        S.remove_tenant(ring.path, "alice")


def test_a_tenants_export_holds_its_own_pair_as_the_client_and_a_workers_the_tenants_keys(tmp_path):
    ring = S.create(tmp_path / "k")
    S.add_tenant(ring.path, "bob")
    ring.refresh_tenants()
    S.export(ring, "client", tmp_path / "bob", tenant="bob")
    bob = S.load(tmp_path / "bob")
    assert set(bob.secret) == {"client"} and bob.public["client"] in ring.tenants
    assert bob.public["client"] != ring.public["client"]
    S.export(ring, "worker", tmp_path / "w")
    assert S.load(tmp_path / "w").tenants == ring.tenants  # its data socket lets bob in
    assert not list((tmp_path / "w" / S.TENANTS).glob("*_secret"))
    with pytest.raises(S.KeysMissing, match="no tenant carol"):
        S.export(ring, "client", tmp_path / "carol", tenant="carol")
