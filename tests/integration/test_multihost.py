"""Many machines, for real, on one: a dispatcher and two workers on three hosts (network
namespaces joined by a bridge, each with its own address), this test as a client on a fourth.
Everything goes over TCP with CURVE; a link cut and restored is ridden out or becomes a bounded
error, never a hang. Needs root and ``ip netns`` (skipped otherwise)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import wait_for

import gt
from gt.runtime import security as S
from gt.runtime.control import request

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def _can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"gtprobe{random.randrange(1 << 20)}"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


if not _can_make_namespaces():
    pytest.skip("needs root and ip netns to make hosts", allow_module_level=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Hosts:
    """Network namespaces on one bridge: ``add(name)`` makes a host with its own address; this
    process stays in the root namespace, on the bridge's address."""

    def __init__(self) -> None:
        self.tag = f"{random.randrange(1 << 16):04x}"
        self.net = f"10.{random.randrange(60, 90)}.{random.randrange(256)}"
        self.bridge = f"gtbr{self.tag}"
        self.hosts: dict[str, tuple[str, str]] = {}  # name -> (netns, address)
        self.procs: list[subprocess.Popen] = []
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.net}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add(self, name: str) -> str:
        ns, n = f"gt{name}{self.tag}", len(self.hosts) + 2
        veth = f"v{name[:3]}{self.tag}"
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge)
        _ip("link", "set", veth, "up")
        for cmd in (["addr", "add", f"{self.net}.{n}/24", "dev", "eth0"],
                    ["link", "set", "eth0", "up"], ["link", "set", "lo", "up"]):  # fmt: skip
            _ip("netns", "exec", ns, "ip", *cmd)
        self.hosts[name] = (ns, f"{self.net}.{n}")
        return self.hosts[name][1]

    def link(self, name: str, up: bool) -> None:
        """Cut (or restore) a host's only link."""
        _ip("link", "set", f"v{name[:3]}{self.tag}", "up" if up else "down")

    def run(self, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
        ns = self.hosts[name][0]
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "gt", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, **(env or {})})  # fmt: skip
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for ns, _addr in self.hosts.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


TIMEOUT_S = 8  # how long a silent remote worker has before it is declared lost


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    keys = tmp_path_factory.mktemp("mh") / "keys"
    S.create(keys)
    env = {S.KEYS_ENV: str(keys), "GT_WORKER_TIMEOUT": str(TIMEOUT_S),
           "GT_CLIENT_TIMEOUT": str(TIMEOUT_S), "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    net = Hosts()
    try:
        host_d = net.add("disp")
        net.add("w1")
        net.add("w2")
        d = net.run("disp", "dispatcher", "--host", host_d, "--workers", "0", "--ready-json")
        eps = json.loads(d.stdout.readline())
        for w in ("w1", "w2"):
            net.run(w, "worker", "--connect", eps["front"])
        wait_for(lambda: sum(w["alive"] for w in request(eps["front"], "stats")["workers"]) == 2,
                 timeout=60)  # fmt: skip
        yield net, eps
    finally:
        net.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_each_host_is_reached_at_its_own_address(cluster):
    net, eps = cluster
    assert eps["front"].startswith(f"tcp://{net.hosts['disp'][1]}:")
    datas = sorted(w["data"] for w in request(eps["front"], "stats")["workers"])
    addrs = sorted(f"tcp://{net.hosts[h][1]}:" for h in ("w1", "w2"))
    assert [d.rsplit(":", 1)[0] + ":" for d in datas] == addrs  # advertised where they bound


def test_a_sharded_program_runs_across_three_hosts(cluster):
    _net, eps = cluster
    gt.connect(eps["front"], timeout=30)
    try:
        gt.load_config({"rows": {"shard": {"axis": 0}}, "w": {"replicate": {}}})
        rng = np.random.default_rng(0)
        a = rng.standard_normal((64, 32)).astype(np.float32)
        b = rng.standard_normal((32, 16)).astype(np.float32)
        with gt.signal.context("rows"):
            x = gt.from_numpy(a)
        with gt.signal.context("w"):
            w = gt.from_numpy(b)
        with gt.signal.context("rows"):
            y = (x @ w).relu()
        np.testing.assert_allclose(y.numpy(), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
        total = (x.T @ x).sum()  # partial sums on each host, all-reduced between them
        np.testing.assert_allclose(total.item(), (a.T @ a).sum(), rtol=1e-4)
        placed = gt.session.current().control("placement")
        assert any("shard" in str(v) for v in placed.values())
    finally:
        gt.load_config({})
        gt.disconnect()


def _host_of(net: Hosts, eps: dict, wid: int) -> str:
    """Which of our hosts worker ``wid`` runs on (by the address it advertised)."""
    data = next(w["data"] for w in request(eps["front"], "stats")["workers"] if w["id"] == wid)
    return next(h for h, (_ns, addr) in net.hosts.items() if data.startswith(f"tcp://{addr}:"))


def test_a_short_link_cut_is_ridden_out(cluster):
    net, eps = cluster
    gt.connect(eps["front"], timeout=30)
    try:
        x = gt.arange(1000, dtype=gt.float32)
        assert x.sum().item() == 499500.0
        name = _host_of(net, eps, gt.session.current().home_worker)
        net.link(name, False)
        time.sleep(2.0)  # shorter than the timeout: slow, not dead
        net.link(name, True)
        assert (x * 2).sum().item() == 999000.0  # nothing lost
        assert all(w["alive"] for w in request(eps["front"], "stats")["workers"])
    finally:
        gt.disconnect()


def test_a_long_cut_is_a_bounded_error_and_a_new_worker_brings_the_cluster_back(cluster):
    net, eps = cluster
    gt.connect(eps["front"], timeout=30)
    name = _host_of(net, eps, gt.session.current().home_worker)
    try:
        x = gt.ones(10)
        assert x.sum().item() == 10.0
        net.link(name, False)
        t0 = time.monotonic()
        with pytest.raises((gt.WorkerLost, gt.GTTimeout, gt.DispatcherLost)):
            (x + 1).numpy()
        assert time.monotonic() - t0 < 4 * TIMEOUT_S  # bounded, not a hang
    finally:
        gt.disconnect()
        net.link(name, True)
    net.run(name, "worker", "--connect", eps["front"])  # a fresh worker on that host
    wait_for(lambda: sum(w["alive"] for w in request(eps["front"], "stats")["workers"]) >= 2,
             timeout=60)  # fmt: skip
    gt.connect(eps["front"], timeout=30)
    try:
        assert (gt.arange(5) * 3).sum().item() == 30
    finally:
        gt.disconnect()
