"""Tenants with keys of their own on a shared dispatcher (TCP, CURVE): a tenant runs programs with
its own key and is known by name; it sees the details of all its programs and no one else's; and
removing its key ends its running programs and refuses its new connections, while everyone else's
keys go on working."""

# ruff: noqa: F811 - the fixtures imported from test_security are the tests' parameters
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import wait_for
from test_security import as_role, cluster, keys  # noqa: F401 - the shared dispatcher's fixtures

import gt
from gt.runtime import security as S
from gt.runtime.client import Connection
from gt.runtime.control import request

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tenants(keys):
    """Alice and bob get keys of their own, each exported to a folder named after them."""
    for name in ("alice", "bob"):
        S.add_tenant(keys / "cluster", name)
        S.export(S.load(keys / "cluster"), "client", keys / name, tenant=name)
    return keys


def test_a_tenant_runs_a_program_with_its_own_key_and_is_known_by_name(cluster, tenants, as_role):
    as_role("alice")
    conn = gt.connect(cluster["front"], timeout=30)
    try:
        assert conn.role == "client"
        big = np.arange(40_000, dtype=np.float32)  # the direct path: the worker lets alice in
        assert (gt.from_numpy(big) * 2).numpy().sum() == big.sum() * 2
        assert [gt.tensor([float(i)]).item() for i in range(3)] == [0.0, 1.0, 2.0]
        assert conn.direct_batches > 0  # its batches go straight to the worker, over CURVE too
        as_role("cluster")
        me = next(c for c in request(cluster["control"], "stats")["clients"]
                  if c["id"] == conn.client_no)  # fmt: skip
        assert me["tenant"] == "alice" and me["pid"] == os.getpid()
    finally:
        gt.disconnect()


def test_a_tenant_sees_all_its_programs_and_not_another_tenants(cluster, tenants, as_role):
    as_role("alice")
    first = gt.connect(cluster["front"], timeout=30)
    gt.tensor([1.0]).item()
    second = Connection(cluster["front"], timeout=30)  # another program of alice's
    try:
        seen = {c["id"]: c for c in request(cluster["control"], "stats")["clients"]}
        for cno in (first.client_no, second.client_no):
            assert seen[cno]["tenant"] == "alice" and seen[cno]["pid"] == os.getpid()
        as_role("bob")
        seen = {c["id"]: c for c in request(cluster["control"], "stats")["clients"]}
        for cno in (first.client_no, second.client_no):
            assert seen[cno]["argv"] == ["(another tenant)"] and seen[cno]["tenant"] is None
    finally:
        second.close()
        gt.disconnect()


def test_removing_a_tenants_key_ends_its_programs_and_refuses_it_from_then_on(
    cluster,
    tenants,
    as_role,
):
    S.add_tenant(tenants / "cluster", "carol")
    S.export(S.load(tenants / "cluster"), "client", tenants / "carol", tenant="carol")
    as_role("carol")
    gt.connect(cluster["front"], timeout=30)
    x = gt.tensor([1.0, 2.0])
    assert x.sum().item() == 3.0
    try:
        S.remove_tenant(tenants / "cluster", "carol")
        deadline = time.monotonic() + 10
        with pytest.raises(gt.DispatcherLost, match="carol's key was taken out"):
            while time.monotonic() < deadline:  # the dispatcher reads the keys within a second
                (x + 1).numpy()
                time.sleep(0.05)
    finally:
        gt.disconnect()
    with pytest.raises(gt.DispatcherLost, match="no dispatcher answered"):
        gt.connect(cluster["front"], connect_timeout=2)  # the handshake itself is refused now
    as_role("bob")  # the other tenants' keys go on working
    gt.connect(cluster["front"], timeout=30)
    try:
        assert (gt.tensor([2.0]) * 2).item() == 4.0
    finally:
        gt.disconnect()


#: Another program of the same tenant: holds 600 kB, says so, waits for a line, goes.
_SECOND_PROGRAM = """
import sys, gt
gt.connect(sys.argv[1], timeout=60)
x = gt.full((150_000,), 2.0)
print("ready", gt.session.get_connection().client_no, x.sum().item(), flush=True)
sys.stdin.readline()
"""


def test_a_tenants_programs_share_one_memory_quota(cluster, tenants, as_role):
    as_role("cluster")
    request(cluster["control"], "memory_set", {"settings": {"client_memory_limit": "1MB"}})
    as_role("alice")
    second = None
    try:
        gt.connect(cluster["front"], timeout=30)
        mine = gt.full((150_000,), 1.0)  # 600 kB: alone, well under the quota
        assert mine.sum().item() == 150_000.0
        me = gt.session.get_connection().client_no
        second = subprocess.Popen([sys.executable, "-c", _SECOND_PROGRAM, cluster["front"]],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ))  # fmt: skip
        ready, other, total = second.stdout.readline().split()
        assert ready == "ready" and float(total) == 300_000.0
        # 1.2 MB for alice's two programs against her one 1 MB quota: hers made room
        as_role("cluster")
        worker = wait_for(lambda: next(
            (w for w in request(cluster["control"], "stats")["workers"]
             if (w["stats"] or {}).get("memory", {}).get("spill_out")), None), timeout=30)  # fmt: skip
        per = {int(c): v for c, v in worker["stats"]["memory_clients"].items()}
        hers = [per.get(c, [0, 0]) for c in (me, int(other))]  # [used, spilled] of each program
        assert sum(u for u, _ in hers) <= 1_000_000 and sum(s for _, s in hers) > 0
        as_role("alice")
        assert mine.sum().item() == 150_000.0  # (read back from the tier)
    finally:
        if second is not None:
            second.communicate("go\n", timeout=30)
        gt.disconnect()
        as_role("cluster")
        request(cluster["control"], "memory_set", {"settings": {"client_memory_limit": None}})
