"""What a user's probe of the command line found on Dec 6, as a serious tool behaves: Ctrl-C
reaches the program and not the cluster (a handler can still save a checkpoint), `gt run` passes
SIGTERM on, a program killed outright leaves no sockets on disk, `gt export F -o F` keeps the
recording, damaged records are skipped and reported everywhere, `gt top`/`gt replay` print once
when stdout is not a terminal, and wrong options get one line instead of a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import wait_for

from gt.trace.recorder import MAGIC, REC, write_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from fixtures.gtrace_synth import OP_NAMES, synthetic_batches  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def gt_cmd(*args):
    return [sys.executable, "-m", "gt", *args]


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "GT_RUNTIME_DIR": str(tmp_path / "run"), "GT_WORKERS": "1"}


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.gtrace"
    write_trace(path, synthetic_batches(workers=2, clients=1, batches=8), run_id="cli",
                op_names=OP_NAMES, keyframe_every_events=12, index_every=2)  # fmt: skip
    return path


def _signal_until_done(proc, send, tries=3):
    """Send a signal, as a user presses Ctrl-C, again if the program goes on: Python drops what a
    handler raises when it runs inside a finalizer's first instruction (a tensor freed just then),
    a rare race no Python program escapes (GT raises it again from anywhere else)."""
    for _ in range(tries):
        send()
        try:
            out, _ = proc.communicate(timeout=40)
            return out
        except subprocess.TimeoutExpired:
            continue
    out, _ = proc.communicate(timeout=40)
    return out


def _stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def test_ctrl_c_reaches_the_program_whose_handler_saves_through_the_cluster(tmp_path, env):
    script = tmp_path / "ckpt.py"
    script.write_text(
        "import time, gt\n"
        "w = gt.ones(100)\n"
        "try:\n"
        "    gt.sync()\n"
        "    print('ready', flush=True)\n"
        "    while True:\n"
        "        w = w + 1; gt.sync(); time.sleep(0.02)\n"
        "except KeyboardInterrupt:\n"
        "    gt.save(w, 'ckpt.pt')\n"
        "    print('saved', gt.load('ckpt.pt').shape[0], flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = _signal_until_done(proc, lambda: os.killpg(proc.pid, signal.SIGINT))
        assert "saved 100" in out and proc.returncode == 0
    finally:
        _stop(proc)


def test_gt_run_passes_sigterm_on_and_a_killed_program_leaves_no_sockets(tmp_path, env):
    script = tmp_path / "term.py"
    script.write_text(
        "import signal, sys, time, gt\n"
        "w = gt.ones(10)\n"
        "def on_term(signum, frame):\n"
        "    gt.save(w, 'term.pt'); print('saved', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "gt.sync()\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    w = w + 1; gt.sync(); time.sleep(0.02)\n"
    )
    proc = subprocess.Popen(gt_cmd("run", "--no-tui", str(script)), cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = _signal_until_done(proc, lambda: proc.send_signal(signal.SIGTERM))
        assert "saved" in out and proc.returncode == 0 and (tmp_path / "term.pt").exists()
    finally:
        _stop(proc)
    plain = tmp_path / "plain.py"
    plain.write_text(
        "import time, gt\n"
        "w = gt.ones(10); gt.sync()\n"
        "print(gt.session.current().cluster.ipc_dir, flush=True)\n"
        "while True:\n"
        "    w = w + 1; gt.sync(); time.sleep(0.02)\n"
    )
    proc = subprocess.Popen([sys.executable, str(plain)], env=env, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        folder = proc.stdout.readline().strip()
        assert os.path.isdir(folder)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        wait_for(lambda: not os.path.exists(folder), timeout=60)
    finally:
        _stop(proc)


def test_gt_run_passes_on_a_sigint_the_terminal_did_not_send(tmp_path, env):
    # (`kill -INT` of gt run was ignored: gt run ignores SIGINT, as a terminal's Ctrl-C reaches
    # the script itself; here there is no terminal)
    script = tmp_path / "intr.py"
    script.write_text(
        "import time, gt\n"
        "w = gt.ones(10); gt.sync()\n"
        "try:\n"
        "    print('ready', flush=True)  # (inside: the signal may come as it returns)\n"
        "    while True:\n"
        "        w = w + 1; gt.sync(); time.sleep(0.02)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    proc = subprocess.Popen(gt_cmd("run", "--no-tui", str(script)), cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = _signal_until_done(proc, lambda: proc.send_signal(signal.SIGINT))
        assert "interrupted" in out and proc.returncode == 0
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("extra", "args", "said"),
    [
        ({"GT_BACKEND": "tpu"}, (), "gt: $GT_BACKEND must be auto, numpy or cupy, not 'tpu'"),
        ({"GT_TRACE": "off"}, ("--record", "t.gtrace"), "gt: $GT_TRACE=off: the cluster publishes"),
        ({"GT_RAM_CAP": "100MB"}, (), "gt: $GT_RAM_CAP=100MB is below what a worker needs"),
    ],
)
def test_gt_run_refuses_a_setting_its_cluster_cannot_run_with_in_one_line(
    tmp_path, env, extra, args, said
):
    script = tmp_path / "s.py"
    script.write_text("import gt\nprint(gt.zeros(1).numpy())\n")
    out = subprocess.run(gt_cmd("run", "--no-tui", *args, str(script)), capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, env={**env, **extra})  # fmt: skip
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert out.stderr.startswith(said) and out.stdout == ""


def test_export_refuses_to_write_over_its_input_and_writes_to_stdout(trace):
    before = trace.read_bytes()
    out = subprocess.run(gt_cmd("export", str(trace), "-o", str(trace)), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 1 and "is the trace itself" in out.stderr
    assert trace.read_bytes() == before
    out = subprocess.run(gt_cmd("export", str(trace), "-o", "-"), capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0 and json.loads(out.stdout)["traceEvents"]
    assert "wrote" in out.stderr


def test_a_damaged_record_is_skipped_and_reported_by_every_reader(trace, tmp_path):
    data = bytearray(trace.read_bytes())
    first = len(MAGIC)
    n = REC.unpack_from(data, first)[0]
    second = first + REC.size + n  # (the first record is the header: damage the one after)
    data[second + REC.size + 2] ^= 0xFF
    bad = tmp_path / "bad.gtrace"
    bad.write_bytes(bytes(data))
    info = subprocess.run(gt_cmd("trace", "info", str(bad)), capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert info.returncode == 0 and "1 damaged record(s), skipped" in info.stdout
    as_json = subprocess.run(gt_cmd("trace", "info", "--json", str(bad)), capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    facts = json.loads(as_json.stdout)
    assert facts["clean"] is False and facts["damaged"] == 1
    for cmd in (("trace", "stats", str(bad)), ("export", str(bad), "-o", str(tmp_path / "o.json"))):
        out = subprocess.run(gt_cmd(*cmd), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "checksum mismatch); skipped" in out.stderr


def test_replay_checks_its_speed_and_prints_once_into_a_file(trace, tmp_path):
    out = subprocess.run(gt_cmd("replay", str(trace), "--speed", "inf"), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "must be from 0.25 to 64" in out.stderr
    wide = {**os.environ, "COLUMNS": "160"}  # (below 100 the header drops its "GT ", as the app's)
    out = subprocess.run(gt_cmd("replay", str(trace)), capture_output=True, text=True, timeout=60,
                         env=wide)  # fmt: skip
    assert out.returncode == 0 and "not a terminal" in out.stderr
    assert out.stdout.startswith("GT ") and "\x1b[" not in out.stdout


def test_wrong_options_get_one_line_not_a_traceback(tmp_path, env):
    def gt(*args, **kw):
        return subprocess.run(gt_cmd(*args), capture_output=True, text=True, timeout=60,
                              env={**env, **kw})  # fmt: skip

    got = gt("top", "--connect", "127.0.0.1:5555")
    assert got.returncode == 2 and "is not a dispatcher address" in got.stderr
    assert "Traceback" not in got.stderr
    got = gt("--version", GT_WORKERS="auto")
    assert got.returncode == 0
    script = tmp_path / "ok.py"
    script.write_text("print('ran')\n")
    got = gt("run", "--no-tui", str(script), GT_WORKERS="lots")
    assert got.returncode == 2 and "$GT_WORKERS" in got.stderr and "ran" not in got.stdout
    got = gt("run", "--workers", "0", str(script))
    assert got.returncode == 2 and "at least 1 worker" in got.stderr
    got = gt("run", "--no-tui", "--record", str(tmp_path / "no" / "x.gtrace"), str(script))
    assert got.returncode == 2 and "no such folder" in got.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("signals:\n  data: {nonsense: 3}\n")
    got = gt("run", "--no-tui", "--config", str(bad), str(script))
    assert got.returncode == 2 and str(bad) in got.stderr and "Traceback" not in got.stderr
    got = subprocess.run([sys.executable, "-c", "import gt; gt.ones(2)"], capture_output=True,
                         text=True, timeout=60, env={**env, "GT_DISPATCHER": "garbage"})  # fmt: skip
    assert "is not a dispatcher address" in got.stderr


def test_once_tables_fit_the_terminal(trace):
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(gt_cmd("replay", str(trace), "--once"), stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # (EIO: the child closed its end)
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=60)
    lines = out.decode("utf-8", "replace").splitlines()
    assert lines and max(len(line) for line in lines) <= 80


def test_gt_trace_export_is_gt_export(trace, tmp_path):
    # (users of gt trace info|stats typed gt trace export: "invalid choice")
    out = tmp_path / "t.json"
    done = subprocess.run(gt_cmd("trace", "export", str(trace), "-o", str(out)),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["traceEvents"]


def test_replay_at_once_shows_the_moment_asked_for_in_the_apps_forms():
    demo = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "demo.gtrace"  # 2.963 s

    def detail(*at):
        out = subprocess.run(gt_cmd("replay", str(demo), "--json", *at), capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["source"]["detail"]

    total = float(detail().split("/")[-1].rstrip("s"))
    for at, want in (("1s", 1.0), ("50%", total / 2), ("+1s", 1.0), ("--at=-1s", total - 1)):
        args = (at,) if at.startswith("--") else ("--at", at)
        got = float(detail(*args).split()[-1].split("/")[0].rstrip("s"))
        assert abs(got - want) < 0.0015, at  # (the clock stood still from the seek: not 1.03 s)
    out = subprocess.run(gt_cmd("replay", str(demo), "--at", "later"), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "not a time: 'later'" in out.stderr


def test_replay_names_a_file_it_cannot_open_as_trace_does(tmp_path):
    for path, words in ((tmp_path / "none.gtrace", "no such file"), (tmp_path, "is a directory")):
        out = subprocess.run(gt_cmd("replay", "--once", str(path)), capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert out.returncode == 1 and f"{path}: {words}" in out.stderr
        assert "Errno" not in out.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["dispatcher", "--port", "99999"], "1 to 65531"),
        (["dispatcher", "--port=-5"], "1 to 65531"),
        (["dispatcher", "--port", "65533"], "it takes P to P+4"),
        (["top", "--hz", "0"], "must be above 0"),
        (["replay", "x.gtrace", "--hz=-1"], "must be above 0"),
        (["record", "-o", "x.gtrace", "--duration", "0"], "must be above 0"),
        (["worker", "--timeout=-1"], "must be above 0"),
    ],
)
def test_numbers_out_of_range_are_refused_before_anything_starts(args, words, capsys):
    from gt.cli import main

    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2 and words in capsys.readouterr().err


def test_gt_run_passes_the_scripts_arguments_as_python_would(monkeypatch, tmp_path):
    import gt.cli.run as run_cli
    from gt.cli import main

    script = tmp_path / "s.py"
    script.write_text("")
    seen = []
    monkeypatch.setattr(run_cli, "run_script", lambda path, args, **kw: seen.append(args) or 0)
    for argv, want in (
        ([str(script), "--", "x"], ["--", "x"]),
        (["--", str(script), "--lr", "1"], ["--lr", "1"]),
        (["--workers", "1", str(script), "x", "--", "y"], ["x", "--", "y"]),
    ):
        assert main(["run", "--no-tui", *argv]) == 0
        assert seen.pop() == want, argv
    assert main(["run", "--no-tui"]) == 2


def test_unusable_files_and_counts_get_one_line_not_a_traceback(tmp_path, env):
    def gt(*args, stdin=None):
        return subprocess.run(gt_cmd(*args), capture_output=True, timeout=60, input=stdin,
                              env={**env, "GT_KEYS": str(tmp_path / "keys")})  # fmt: skip

    image = tmp_path / "img.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    script = tmp_path / "ok.py"
    script.write_text("print('ran')\n")
    assert gt("keys").returncode == 0
    for args, stdin, code, words in (
        (("config", "validate", "--offline", str(image)), None, 1, "not a text file"),
        (("config", "validate", "--offline", "-"), image.read_bytes(), 1, "not a text file"),
        (("demo", "--no-tui", "--workers", "0"), None, 2, "at least 1 worker"),
        (("demo", "--no-tui", "--steps", "-3"), None, 2, "at least 1 step"),
        (("demo", "--no-tui", "--record", str(tmp_path / "no" / "d.gtrace")), None, 2, "no such folder"),
        (("run", "--no-tui", "--record", str(tmp_path), str(script)), None, 2, "a directory"),
        (("keys", "export", "--role", "client", str(image)), None, 1, "a file, not a directory"),
        (("keys", "export", "--role", "client", "/proc/gt-x"), None, 1, "cannot write /proc/gt-x"),
    ):  # fmt: skip
        got = gt(*args, stdin=stdin)
        err = got.stderr.decode()
        assert got.returncode == code and words in err and "Traceback" not in err, (args, err)


def test_a_short_demo_that_improves_the_fit_ends_well(env):
    got = subprocess.run(gt_cmd("demo", "--no-tui", "--workers", "1", "--steps", "5"),
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert got.returncode == 0, got.stdout + got.stderr
    assert "not converged yet" in got.stdout and "did not converge" not in got.stdout


def test_a_config_signal_the_program_never_entered_is_named_at_its_end(env):
    script = (
        "import gt\n"
        "gt.load_config({'layr1': {'replicate': {}}, 'layer2': {'replicate': {}}})\n"
        "with gt.signal.context('layer1'):\n"
        "    y = gt.ones(4, 4) * 2\n"
        "with gt.signal.context('layer2'):\n"
        "    print(float(y.sum()))\n"
    )
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert "'layr1' (this program entered 'layer1')" in got.stderr and "layer2" not in got.stderr


def test_a_signal_a_config_rule_names_as_backward_counts_as_entered(env):
    # (the dispatcher placed the gradients by 'a_bwd': it was not "never entered")
    script = (
        "import gt\n"
        "gt.load_config({'a': {'replicate': {}, 'backward': 'a_bwd'}, 'a_bwd': {'replicate': {}},"
        " 'b': {'replicate': {}}})\n"
        "x = gt.ones(4, 4, requires_grad=True)\n"
        "with gt.signal.context('a'):\n"
        "    y = (x * 2).sum()\n"
        "y.backward()\n"
        "print(float(x.grad.sum()))\n"
    )
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["32.0"]
    assert "places 'b', but" in got.stderr and "a_bwd" not in got.stderr


def test_a_config_signal_that_shards_an_axis_no_tensor_of_it_has_is_named_at_its_end(env):
    # (a rule that fits some of its tensors -- weights, not biases -- is as meant: no warning)
    script = (
        "import gt\n"
        "gt.load_config({'attn': {'shard': {'axis': 2}}, 'mlp': {'shard': {'axis': 1}}})\n"
        "with gt.signal.context('attn'):\n"
        "    a = gt.ones(4, 6) * 2\n"
        "with gt.signal.context('mlp'):\n"
        "    w, b = gt.ones(4, 6), gt.ones(6)\n"
        "    y = a @ w.T + 1\n"
        "print(float(y.sum()), float(b.sum()))\n"
    )
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env={**env, "GT_WORKERS": "2"})  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["208.0", "6.0"]
    assert ("shards 'attn' on axis 2, but none of the 2 tensors made under that signal had that "
            "axis (they had at most 2 axes)") in got.stderr  # fmt: skip
    assert "'mlp'" not in got.stderr


def test_a_config_naming_a_worker_the_cluster_lacks_is_refused_naming_the_file(tmp_path, env):
    cfg = tmp_path / "noworker.yaml"
    cfg.write_text("layer1:\n  shard: {axis: 0, workers: [0, 7]}\n")
    script = tmp_path / "s.py"
    script.write_text("import gt\nprint(gt.ones(3).sum().item())\n")
    got = subprocess.run(gt_cmd("run", "--no-tui", "--workers", "2", "--config", str(cfg),
                                str(script)), capture_output=True, text=True, timeout=60,
                         env=env)  # fmt: skip
    assert got.returncode == 2 and got.stdout == ""  # (refused before the script started)
    assert f"{cfg}:2: layer1.shard.workers: worker 7 does not exist" in got.stderr
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, env={**env, "GT_WORKERS": "2", "GT_CONFIG": str(cfg)})  # fmt: skip
    assert got.returncode == 1 and got.stdout == ""
    last = got.stderr.strip().splitlines()[-1]
    assert last.endswith(f"GT_CONFIG={cfg}: layer1.shard.workers: worker 7 does not exist "
                         "(workers: 0, 1)")  # fmt: skip
