"""Auto-start: `import gt` and go; the local cluster is cleaned up on exit, Ctrl-C and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import wait_for

from gt.runtime.discovery import pid_alive

EXAMPLE = textwrap.dedent("""
    import faulthandler, os, signal, sys
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    import gt
    a = gt.randn(1000, 1000)
    b = gt.randn(1000, 1000)
    c = a @ b + 1
    print(c[:4, :4])
    conn = gt.session.current()
    print("PIDS", conn.cluster.proc.pid, *[w for w in conn.cluster.endpoints], flush=True)
    if len(sys.argv) > 1:
        print("WAITING", flush=True)
        import time; time.sleep(60)
""")


def _run_and_get_dispatcher(tmp_path, *args):
    script = tmp_path / "example.py"
    script.write_text(EXAMPLE)
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run")}
    env.pop("GT_DISPATCHER", None)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C as a terminal delivers it: a suite started in the background by a shell inherits
        # SIGINT ignored, and Python then leaves it ignored (no KeyboardInterrupt to stop on)
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_gone(pid, timeout=10.0):
    wait_for(lambda: not pid_alive(pid), timeout=timeout)


def _read_until(proc, marker):
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(marker):
            return line, lines
    raise AssertionError(f"{marker} never printed: {lines} {proc.stderr.read()}")


def test_the_readme_example_runs_with_no_setup_and_cleans_up(tmp_path):
    proc = _run_and_get_dispatcher(tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.startswith("tensor([[")
    dispatcher_pid = int(out.split("PIDS ")[1].split()[0])
    _wait_gone(dispatcher_pid)
    assert not list((tmp_path / "run").glob("dispatcher-*.json"))


def test_ctrl_c_stops_the_local_cluster(tmp_path):
    proc = _run_and_get_dispatcher(tmp_path, "wait")
    try:
        line, _ = _read_until(proc, "PIDS")
        dispatcher_pid = int(line.split()[1])
        _read_until(proc, "WAITING")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # (faulthandler: where it is stuck, on stderr)
            time.sleep(2)
            proc.kill()
            err = proc.communicate(timeout=10)[1]
            raise AssertionError(f"did not stop on Ctrl-C:\n{err[-6000:]}") from None
        _wait_gone(dispatcher_pid)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_a_crashed_client_takes_its_cluster_down(tmp_path):
    proc = _run_and_get_dispatcher(tmp_path, "wait")
    try:
        line, _ = _read_until(proc, "PIDS")
        dispatcher_pid = int(line.split()[1])
        _read_until(proc, "WAITING")
        proc.kill()
        proc.wait(timeout=10)
        _wait_gone(dispatcher_pid)
    finally:
        proc.stdout.close()
        proc.stderr.close()


def _workers_of(back: str) -> list[int]:
    """Pids of the ``gt worker`` processes connected to ``back``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"worker" in argv and back.encode() in argv:
                pids.append(int(entry))
    return pids


def test_a_private_clusters_workers_start_with_its_dispatcher_and_belong_to_it(tmp_path):
    from gt.runtime.control import request
    from gt.runtime.launch import LocalCluster

    with LocalCluster(workers=2) as c:
        back = c.endpoints["back"]
        workers = request(c.address, "stats", timeout=10)["workers"]
        assert [w["alive"] for w in workers] == [True, True]
        pids = sorted(w["pid"] for w in workers)
        assert sorted(_workers_of(back)) == pids  # the two it started, no more
        for pid in pids:  # its own children, watched through the OS (killed: restarted)
            with open(f"/proc/{pid}/stat") as f:
                assert int(f.read().rsplit(")", 1)[1].split()[1]) == c.proc.pid
    for pid in pids:
        _wait_gone(pid)


def test_workers_started_early_go_when_the_dispatcher_cannot_bind(tmp_path):
    missing = tmp_path / "no such dir"
    proc = subprocess.run(
        [sys.executable, "-m", "gt", "dispatcher", "--ipc", str(missing), "--workers", "2",
         "--ready-json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "gt dispatcher:" in proc.stderr
    wait_for(lambda: not _workers_of(f"ipc://{missing}/back"), timeout=10)


def test_a_bad_gt_config_is_one_clear_error_before_any_cluster_starts(tmp_path):
    # (the dispatcher's "ignoring GT_CONFIG" went to stdout, where its ready line is read: the
    # program died of a JSONDecodeError at its first op)
    bad = tmp_path / "typo.yaml"
    bad.write_text("rows:\n  shard: {axis: 0\n")
    script = tmp_path / "prog.py"
    script.write_text("import gt\nx = gt.ones(3)\n")
    for path in (bad, tmp_path / "missing.yaml"):
        env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run"), "GT_CONFIG": str(path)}
        env.pop("GT_DISPATCHER", None)
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert out.returncode == 1
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith(f"gt.runtime.sharding.config.ConfigError: GT_CONFIG={path}: ")
        assert "JSONDecodeError" not in out.stderr and "dispatcher" not in out.stderr


def test_a_local_dispatcher_with_a_bad_gt_config_still_starts_and_says_so(tmp_path, monkeypatch):
    from gt.runtime.launch import LocalCluster

    bad = tmp_path / "typo.yaml"
    bad.write_text("rows:\n  shard: {axis: 0\n")
    monkeypatch.setenv("GT_CONFIG", str(bad))
    with LocalCluster(workers=1) as cluster:
        assert cluster.address


def test_a_bad_memory_variable_is_one_clear_error_not_a_lost_worker(tmp_path):
    # (the worker registered, then exited: the program saw WorkerLost, the reason only on stderr)
    script = tmp_path / "prog.py"
    script.write_text("import gt\nx = gt.ones(3)\nprint(x.sum().item())\n")
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run"), "GT_MEMORY_LIMIT": "12XB"}
    env.pop("GT_DISPATCHER", None)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("gt.runtime.memory_settings.SettingError: $GT_MEMORY_LIMIT: ")
    worker = subprocess.run([sys.executable, "-m", "gt", "worker"], env=env, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert worker.returncode != 0 and "$GT_MEMORY_LIMIT" in worker.stderr


def test_gt_record_into_a_missing_folder_is_one_clear_error(tmp_path):
    # (the recorder died of a FileNotFoundError traceback, then the program of a RuntimeError)
    script = tmp_path / "prog.py"
    script.write_text("import gt\nx = gt.ones(3)\n")
    target = tmp_path / "nope" / "run.gtrace"
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run"), "GT_RECORD": str(target)}
    env.pop("GT_DISPATCHER", None)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.count("Traceback") == 1  # the program's own, ending in one clear line
    assert out.stderr.strip().splitlines()[-1] == (
        f"FileNotFoundError: GT_RECORD={target}: no such folder {target.parent}"
    )


def test_a_second_dispatcher_on_the_same_ipc_folder_is_refused_and_the_first_keeps_serving(
    tmp_path,
):
    # (the second bound the same socket paths and silently took them over from the first)
    from gt.runtime.control import request

    ipc = tmp_path / "ipc"
    ipc.mkdir(mode=0o700)
    cmd = [sys.executable, "-m", "gt", "dispatcher", "--ipc", str(ipc), "--workers", "0",
           "--ready-json"]  # fmt: skip
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert first.stdout.readline().startswith("{")
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"another dispatcher (pid {first.pid}) already serves" in second.stderr
        assert request(f"ipc://{ipc}/control", "ping", timeout=10)["pid"] == first.pid
    finally:
        first.terminate()
        first.wait(timeout=30)
        first.stdout.close()
    third = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:  # the lock went with the first: the folder can be served again
        assert third.stdout.readline().startswith("{")
    finally:
        third.terminate()
        third.wait(timeout=30)
        third.stdout.close()


def test_a_sigkilled_local_dispatcher_leaves_no_discovery_file(tmp_path, monkeypatch):
    from gt.runtime import discovery
    from gt.runtime.launch import LocalCluster

    monkeypatch.setenv("GT_RUNTIME_DIR", str(tmp_path / "run"))
    cluster = LocalCluster(workers=1)
    record = discovery.runtime_dir() / f"dispatcher-{cluster.proc.pid}.json"
    try:
        assert record.exists()
        os.kill(cluster.proc.pid, signal.SIGKILL)
        cluster.proc.wait(timeout=30)
    finally:
        cluster.stop()
    assert not record.exists()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_a_gt_folder_in_the_current_directory_does_not_replace_the_clusters_gt(tmp_path):
    # `python -m gt dispatcher` put the current directory first on its path: a checkout or a
    # stray `gt` folder there was imported instead of the program's GT
    decoy = tmp_path / "elsewhere"
    (decoy / "gt").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (decoy / "gt" / name).write_text("raise SystemExit('the decoy gt was imported')\n")
    script = tmp_path / "prog.py"
    script.write_text(
        "import gt\n"
        "print('SUM', float((gt.ones(3) + 1).sum().item()))\n"
        "import gt.runtime.launch as L\n"
        "print('ROOT', L._GT_ROOT)\n"
    )
    env = {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run")}
    env.pop("GT_DISPATCHER", None)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=decoy, env=env, capture_output=True, text=True,
        timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SUM 6.0" in proc.stdout
    assert "decoy" not in proc.stdout + proc.stderr


def test_the_clusters_processes_import_the_programs_gt_first():
    from gt.runtime import launch

    env = launch.gt_env({"PYTHONPATH": os.pathsep.join(["/opt/a", launch._GT_ROOT, "/opt/b"])})
    assert env["PYTHONSAFEPATH"] == "1"
    if launch._found_anyway(launch._GT_ROOT):  # (an installed GT: nothing to add)
        assert env["PYTHONPATH"] == os.pathsep.join(["/opt/a", launch._GT_ROOT, "/opt/b"])
    else:
        assert env["PYTHONPATH"] == os.pathsep.join([launch._GT_ROOT, "/opt/a", "/opt/b"])
    assert os.path.isfile(os.path.join(launch._GT_ROOT, "gt", "__init__.py"))
    assert launch.worker_env(1)["PYTHONSAFEPATH"] == "1"
