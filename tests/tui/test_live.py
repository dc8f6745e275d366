"""The live source and ``gt top`` against real local clusters (dispatcher and workers as processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import wait_for

import gt
from gt.cli import main
from gt.cli.dashboard import find_endpoints
from gt.runtime.launch import LocalCluster
from gt.tui.sources import LiveSource

pytestmark = pytest.mark.timeout(90)


def run_some_ops(address: str) -> None:
    conn = gt.connect(address, timeout=30)
    try:
        a = gt.randn(32, 32)
        for _ in range(20):
            a = (a @ a).tanh() + 1
        assert a.sum().item() is not None
        gt.mark("checkpoint")
    finally:
        gt.disconnect()
    del conn


def test_live_source_sees_workers_clients_and_exec_events(cluster):
    src = LiveSource(cluster.endpoints, hz=20)
    src.start()
    try:
        assert src.ready.wait(10), "no snapshot from the control endpoint"
        assert wait_for(lambda: len(src.snapshot().workers) == 2)
        run_some_ops(cluster.address)
        # (the counts can arrive before the exec events that name the ops, on a busy machine)
        st = wait_for(lambda: (s := src.snapshot()).totals.instructions >= 60
                      and any(w.ops for w in s.workers) and s)  # fmt: skip
        assert all(w.alive for w in st.workers)
        assert st.clients, "the client should be listed"
        assert wait_for(lambda: any(m.label == "checkpoint" for m in src.snapshot().marks))
        assert src.status().connected and src.status().address == cluster.address
    finally:
        src.stop()
    assert src._thread is None


def test_top_json_and_once_print_the_cluster_and_exit(cluster):
    cmd = [sys.executable, "-m", "gt", "top", "--connect", cluster.address, "--wait", "0.3"]
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [w["id"] for w in data["workers"]] == [0, 1]
    assert data["source"]["connected"] is True
    text = subprocess.run([*cmd, "--once"], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "w0" in text.stdout and "w1" in text.stdout and "workers 2/2" in text.stdout


def test_find_endpoints_by_front_address(cluster):
    eps = find_endpoints(cluster.address)
    assert eps["events"] == cluster.endpoints["events"]
    assert eps["control"] == cluster.endpoints["control"]


def test_top_without_a_dispatcher_says_so_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GT_RUNTIME_DIR", str(tmp_path))
    assert main(["top"]) == 1
    err = capsys.readouterr().err
    assert "no GT dispatcher is running" in err and err.count("\n") == 1


def test_top_with_an_address_nobody_answers_exits_1(capsys):
    assert main(["top", "--connect", "tcp://127.0.0.1:9", "--once"]) == 1
    assert "no GT dispatcher answered" in capsys.readouterr().err


def test_live_source_shows_disconnected_and_follows_a_restarted_dispatcher(tmp_path, monkeypatch):
    monkeypatch.setenv("GT_RUNTIME_DIR", str(tmp_path))  # the clusters' discovery files go here
    found: dict = {}
    first = LocalCluster(workers=1)
    src = LiveSource(
        first.endpoints, hz=20, ping_s=0.2, dead_s=1.0, resolve=lambda: found.get("eps")
    )
    src.start()
    second = None
    try:
        assert src.ready.wait(10)
        assert wait_for(lambda: src.status().connected)
        first.stop()
        assert wait_for(lambda: not src.status().connected, timeout=10)
        assert "disconnected" in src.status().detail
        second = LocalCluster(workers=2)
        found["eps"] = second.endpoints
        assert wait_for(lambda: src.status().connected, timeout=15)
        assert wait_for(lambda: len(src.snapshot().workers) == 2, timeout=10)
        assert src.status().address == second.address
    finally:
        src.stop()
        first.stop()
        if second is not None:
            second.stop()


def test_a_lost_dispatcher_stops_the_clock_and_counts_the_silence(tmp_path, monkeypatch):
    from gt.tui.tables import header_text

    monkeypatch.setenv("GT_RUNTIME_DIR", str(tmp_path))
    cluster = LocalCluster(workers=1)
    src = LiveSource(cluster.endpoints, hz=20, ping_s=0.2, dead_s=1.0)
    src.start()
    try:
        assert src.ready.wait(10) and wait_for(lambda: src.status().connected)
        cluster.stop()
        assert wait_for(lambda: not src.status().connected, timeout=10)
        up = src.compute().uptime_s
        assert wait_for(lambda: time.monotonic() - src.silent_since > 2.5, timeout=10)
        assert src.compute().uptime_s == up  # "up" stands where the last answer left it
        assert "no answer for 2." in src.status().detail  # the silence, not the threshold
        header = header_text(src.compute(), src.status()).plain
        assert "workers ?/1" in header  # it cannot tell who is alive
    finally:
        src.stop()
        cluster.stop()


@pytest.mark.skipif(
    not os.path.exists("/usr/bin/tmux") and not os.environ.get("TMUX_BIN"), reason="needs tmux"
)
def test_gt_top_in_a_real_terminal_shows_the_workers(cluster, tmp_path):
    """End to end: the app in a pseudo-terminal (tmux) against the cluster, then q quits it."""
    session = f"gt-top-test-{os.getpid()}"
    cmd = f"exec {sys.executable} -m gt top --connect {cluster.address} --hz 10"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "40", cmd],
        check=True,
        timeout=10,
    )
    try:
        run_some_ops(cluster.address)

        def screen() -> str:
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                  timeout=10).stdout  # fmt: skip

        last = {"screen": ""}

        def ready() -> str | None:
            last["screen"] = text = screen()
            return text if "workers 2/2" in text and "connected" in text else None

        try:
            text = wait_for(ready, timeout=30, interval=0.2)
        except AssertionError:
            raise AssertionError(
                f"gt top never showed both workers; last screen:\n{last['screen']}"
            ) from None
        assert "w0" in text and "w1" in text and "alive" in text
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10)
        wait_for(lambda: subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode != 0,
                 timeout=10)  # fmt: skip
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)


async def test_zoom_key_repaints_a_live_view_at_once(cluster):
    """Key press to repaint does not wait for the collector's next tick."""
    from gt.tui.app import make_app

    src = LiveSource(cluster.endpoints, hz=2)  # a slow collector: 500 ms between its states
    app = make_app(src, hz=2)
    async with app.run_test(size=(140, 45)) as pilot:
        assert src.ready.wait(10)
        before = src.timeline_ns
        await pilot.press("plus")
        # both the app (2 Hz) and the collector (2 Hz) are slow: the new view can only be on
        # screen this soon because the key handler rendered it itself
        shown = app.state.timeline_end_ns - app.state.timeline_start_ns
        assert shown == src.timeline_ns < before


def test_run_with_dashboard_shows_the_childs_output_and_returns_its_status(cluster, tmp_path):
    """``gt run`` 's dashboard in a real terminal: output pane, exit status line, q returns the status."""
    if not os.path.exists("/usr/bin/tmux"):
        pytest.skip("needs tmux")
    rc_file = tmp_path / "rc"
    child = "import sys; print('hello from the child'); sys.exit(3)"
    script = tmp_path / "run_dashboard.py"
    script.write_text(
        "import sys\n"
        "from gt.cli.dashboard import run_with_dashboard\n"
        f"rc = run_with_dashboard({cluster.address!r}, [sys.executable, '-c', {child!r}], hz=10)\n"
        f"open({str(rc_file)!r}, 'w').write(str(rc))\n"
    )
    session = f"gt-run-test-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "45",
                    f"exec {sys.executable} {script}"], check=True, timeout=10)  # fmt: skip
    try:
        last = {"screen": ""}

        def shown() -> bool:
            last["screen"] = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                                            text=True, timeout=10).stdout  # fmt: skip
            return (
                "hello from the child" in last["screen"]
                and "[exited with code 3]" in last["screen"]
            )

        try:
            wait_for(shown, timeout=30, interval=0.2)
        except AssertionError:
            raise AssertionError(
                f"no child output on the dashboard; last screen:\n{last['screen']}"
            ) from None
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10)
        assert wait_for(lambda: rc_file.exists() and rc_file.read_text(), timeout=15) == "3"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)
