"""Hot paths with a real cluster: a captured step gives exactly the eager results (forward,
backward, optimizer), falls back when the step changes, survives memory spilling, and says what
it does in the trace."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import wait_for

import gt
import gt.nn.functional as F
from gt.runtime.launch import LocalCluster, RecorderProcess
from gt.trace.reader import Reader

pytestmark = pytest.mark.timeout(120)


def _data(seed: int = 0, n: int = 16):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 8)).astype(np.float32), rng.integers(0, 3, n)


def _model(opt_name: str):
    gt.manual_seed(1)
    model = gt.nn.Sequential(gt.nn.Linear(8, 16), gt.nn.ReLU(), gt.nn.Linear(16, 3))
    if opt_name == "sgd":
        return model, gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # (plain Adam counts its steps in Python eagerly; captured, the count moves to the worker)
    return model, gt.optim.Adam(model.parameters(), lr=0.01, capturable=opt_name == "adam")


def _step_of(model, opt):
    """One training step of ``model`` with ``opt``: what ``@gt.hot`` captures."""

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _train(hot: bool, opt_name: str, steps: int = 8):
    model, opt = _model(opt_name)
    step = _step_of(model, opt)
    fn = gt.hot(step) if hot else step
    losses = []
    for k in range(steps):
        x, y = _data(k)
        losses.append(fn(gt.tensor(x), gt.tensor(y)))
    losses = [loss.item() for loss in losses]  # each call's own result, not the last one's
    params = [p.detach().numpy() for p in model.parameters()]
    return losses, params, (fn.state if hot else None)


@pytest.mark.parametrize("opt_name", ["sgd", "adam", "adam, not capturable"])
def test_a_captured_training_step_gives_exactly_the_eager_results(conn, opt_name):
    eager_losses, eager_params, _ = _train(False, opt_name)
    hot_losses, hot_params, state = _train(True, opt_name)
    assert hot_losses == eager_losses  # bitwise: the same instructions ran
    for a, b in zip(hot_params, eager_params):
        np.testing.assert_array_equal(a, b)
    (only,) = state.values()
    assert only["state"] == "replaying" and only["calls"] >= 4


def test_a_new_shape_is_captured_on_its_own_and_both_stay_right(conn):
    w = gt.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))

    @gt.hot
    def f(x):
        return (x @ w).relu().sum(0)

    for n in (4, 5, 4, 5, 4, 5, 4, 5):
        x = np.full((n, 3), 0.5, np.float32)
        np.testing.assert_allclose(f(gt.tensor(x)).numpy(),
                                   np.maximum(x @ w.numpy(), 0).sum(0))  # fmt: skip
    states = [s["state"] for s in f.state.values()]
    assert states == ["replaying", "replaying"]


def test_a_step_whose_ops_change_runs_eagerly_and_right(conn):
    calls = {"n": 0}

    @gt.hot
    def f(x):
        calls["n"] += 1
        return x * 2 if calls["n"] % 2 else x + 1  # a different op every other call

    for k in range(8):
        x = gt.tensor([float(k)])
        assert f(x).item() == (k * 2.0 if (k + 1) % 2 else k + 1.0)
    (only,) = f.state.values()
    assert only["state"].startswith("eager: its instructions changed")
    assert calls["n"] == 8  # the Python ran every time


def test_a_sync_point_inside_the_step_keeps_it_eager_and_says_why(conn):
    seen = []

    @gt.hot
    def f(x):
        seen.append((x * 3).item())  # a sync point: the step's Python needs the value
        return x + 1

    for k in range(5):
        assert f(gt.tensor([float(k)])).item() == k + 1.0
    assert seen == [0.0, 3.0, 6.0, 9.0, 12.0]
    (only,) = f.state.values()
    assert "sync point" in only["state"]


def test_results_are_new_tensors_each_call_and_inputs_are_not_changed(conn):
    @gt.hot
    def f(x):
        return x * 2, x.sum()

    xs = [gt.tensor([float(k), 1.0]) for k in range(6)]
    outs = [f(x) for x in xs]
    for k, (double, total) in enumerate(outs):  # none of them overwritten by a later replay
        np.testing.assert_array_equal(double.numpy(), [2.0 * k, 2.0])
        assert total.item() == k + 1.0
        np.testing.assert_array_equal(xs[k].numpy(), [float(k), 1.0])


def test_dropping_a_tensor_the_step_relies_on_captures_it_again(conn):
    scale = {"t": gt.tensor([2.0])}

    @gt.hot
    def f(x):
        return x * scale["t"]

    for _ in range(4):
        assert f(gt.tensor([3.0])).item() == 6.0
    scale["t"] = gt.tensor([5.0])  # the old one is freed: the capture relied on it
    for _ in range(4):
        assert f(gt.tensor([3.0])).item() == 15.0
    (only,) = f.state.values()
    assert only["state"] == "replaying"


def test_a_replay_under_a_memory_limit_spills_and_gets_the_same_results():
    rng = np.random.default_rng(5)
    ws = [rng.standard_normal((128, 128)).astype(np.float32) * 0.1 for _ in range(8)]
    with LocalCluster(workers=1) as cluster:
        gt.connect(cluster.address, timeout=60)
        try:
            gt.config.set(memory_limit="400kB")  # 8 x 64 kB of weights, and their activations
            params = [gt.from_numpy(w) for w in ws]

            @gt.hot
            def forward(x):
                for p in params:
                    x = (x @ p).tanh()
                return x.sum()

            x = rng.standard_normal((16, 128)).astype(np.float32)
            want = x
            for w in ws:
                want = np.tanh(want @ w)
            got = [forward(gt.from_numpy(x)).item() for _ in range(6)]
            np.testing.assert_allclose(got, [want.sum()] * 6, rtol=1e-4)
            (only,) = forward.state.values()
            assert only["state"] == "replaying"
            conn = gt.session.current()
            wait_for(lambda: conn.control("stats")["workers"][0]["stats"]["memory"]["spill_out"])
        finally:
            gt.disconnect()


def test_hot_paths_are_in_the_trace(tmp_path):
    path = tmp_path / "hot.gtrace"
    with LocalCluster(workers=1) as cluster:
        rec = RecorderProcess(cluster.address, str(path))
        gt.connect(cluster.address, timeout=60)
        try:

            @gt.hot(name="double")
            def f(x):
                return x * 2 + 1

            x = gt.tensor([1.0, 2.0])
            for _ in range(12):
                x = f(x)
            x.numpy()
        finally:
            gt.disconnect()
            rec.stop()
    with Reader(path) as r:
        events = list(r.events())
    hot = [e.fields for e in events if e.kind == "hot"]
    assert hot and hot[0]["name"] == "double" and hot[0]["state"] == "replaying"
    assert hot[-1]["calls"] >= 1 and hot[0]["steps"] == 2
    replays = sum(e.fields["hot"] for e in events if e.kind == "exec")
    assert replays == 10  # two eager calls, then every call one hot instruction


def test_a_learning_rate_schedule_is_followed_by_a_captured_step(conn):
    def train(hot: bool) -> list:
        model, opt = _model("sgd")
        sched = gt.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        step = _step_of(model, opt)
        fn = gt.hot(step) if hot else step
        x, y = _data(0)
        gx, gy = gt.tensor(x), gt.tensor(y)
        out = []
        for _ in range(12):
            out.append(fn(gx, gy))
            sched.step()  # the lr the next step reads changes every 3 steps
        calls = sum(s["calls"] for s in fn.state.values()) if hot else None
        return [loss.item() for loss in out] + [p.detach().numpy().sum()
                                                for p in model.parameters()], calls  # fmt: skip

    (hot, calls), (eager, _) = train(True), train(False)
    assert hot == eager and calls >= 3  # replayed between the changes, and followed them


def _per_step_schedule(hot: bool, opt_name: str, manual: bool = False, every: int = 1,
                       sched_name: str = "lambda"):  # fmt: skip
    """Ten steps under a schedule that changes the rate after every ``every`` steps; ``manual``:
    the step also reads the rate itself (a Python number in its own update). ``sched_name``
    ``"onecycle"`` / ``"cyclic"``: those schedulers with ``cycle_momentum`` (their default), which
    also change ``momentum`` or beta1 every step."""
    gt.manual_seed(1)
    bias = opt_name != "muon"  # (Muon takes matrices only)
    model = gt.nn.Sequential(gt.nn.Linear(8, 16, bias=bias), gt.nn.ReLU(),
                             gt.nn.Linear(16, 3, bias=bias))  # fmt: skip
    params = model.parameters()
    opt = {
        "sgd": lambda: gt.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
        "sgd, dampening": lambda: gt.optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.3),
        "adam": lambda: gt.optim.Adam(params, lr=0.01, weight_decay=1e-3),
        "adamw": lambda: gt.optim.AdamW(params, lr=0.01, weight_decay=0.1),
        "nadamw": lambda: gt.optim.NAdam(params, lr=0.01, weight_decay=0.1,
                                         decoupled_weight_decay=True),
        "radam": lambda: gt.optim.RAdam(params, lr=0.01, weight_decay=0.1),
        "adamax": lambda: gt.optim.Adamax(params, lr=0.01),
        "rmsprop": lambda: gt.optim.RMSprop(params, lr=0.01, weight_decay=1e-3),
        "rmsprop, centered, momentum": lambda: gt.optim.RMSprop(
            params, lr=0.01, momentum=0.9, centered=True, weight_decay=1e-3),
        "adagrad": lambda: gt.optim.Adagrad(params, lr=0.1, lr_decay=0.01, weight_decay=1e-3),
        "adadelta": lambda: gt.optim.Adadelta(params, lr=1.0, weight_decay=1e-3),
        "asgd": lambda: gt.optim.ASGD(params, lr=0.05, t0=2, weight_decay=1e-3),
        "rprop": lambda: gt.optim.Rprop(params, lr=0.01),
        "adafactor": lambda: gt.optim.Adafactor(params, lr=2.0, weight_decay=0.05),
        "muon": lambda: gt.optim.Muon(params, lr=0.02, weight_decay=0.1),
    }[opt_name]()  # fmt: skip
    S = gt.optim.lr_scheduler
    sched = {
        "lambda": lambda: S.LambdaLR(opt, lambda s: 1.0 / (1.0 + s // every)),
        "onecycle": lambda: S.OneCycleLR(opt, max_lr=0.05, total_steps=12, pct_start=0.4),
        "cyclic": lambda: S.CyclicLR(opt, 0.005, 0.05, step_size_up=3),
    }[sched_name]()  # fmt: skip
    step = _step_of(model, opt)

    def step_reading_the_rate(x, y):
        loss = step(x, y)
        with gt.no_grad():
            model[0].bias.mul_(1.0 - opt.param_groups[0]["lr"])
        return loss

    fn = step_reading_the_rate if manual else step
    fn = gt.hot(fn) if hot else fn
    gx, gy = (gt.tensor(a) for a in _data(0))
    losses = []
    for _ in range(10):
        losses.append(fn(gx, gy))
        sched.step()
    calls = sum(s["calls"] for s in fn.state.values()) if hot else None
    return [loss.item() for loss in losses] + [p.detach().numpy().tobytes()
                                               for p in model.parameters()], calls  # fmt: skip


@pytest.mark.parametrize("opt_name", ["sgd", "adamw", "nadamw", "radam", "adamax", "rmsprop",
                                      "rmsprop, centered, momentum", "adagrad", "adadelta", "asgd",
                                      "rprop", "adafactor", "muon"])  # fmt: skip
def test_a_rate_changed_every_step_is_read_on_the_worker_and_the_step_replays(conn, opt_name):
    if opt_name == "muon":  # (it orthogonalises in bfloat16: CuPy before 14 and its double lack it)
        try:
            gt.ones(1).to(gt.bfloat16).float().item()
        except gt.errors.WorkerError as exc:
            pytest.skip(f"this worker has no bfloat16: {str(exc)[:60]}")
    (hot, calls), (eager, _) = (
        _per_step_schedule(True, opt_name),
        _per_step_schedule(False, opt_name),
    )
    assert hot == eager  # bit for bit, every loss and parameter
    assert calls >= 6  # captured by the fourth call, then replayed with each new rate


@pytest.mark.parametrize("sched_name", ["onecycle", "cyclic"])
@pytest.mark.parametrize("opt_name", ["sgd", "sgd, dampening", "adam", "adamw", "nadamw", "radam",
                                      "adamax", "rmsprop, centered, momentum"])  # fmt: skip
def test_a_momentum_or_beta1_cycled_every_step_is_read_on_the_worker_and_the_step_replays(
    conn, opt_name, sched_name
):
    # OneCycleLR and CyclicLR cycle momentum (beta1 for the Adam family) by default, every step
    (hot, calls), (eager, _) = (
        _per_step_schedule(True, opt_name, sched_name=sched_name),
        _per_step_schedule(False, opt_name, sched_name=sched_name),
    )
    assert hot == eager  # bit for bit, every loss and parameter
    assert calls >= 6  # captured by the fourth call, then replayed with each new value


def test_a_step_that_reads_the_rate_itself_is_captured_again_at_each_new_rate(conn):
    # A new rate every third step: captured while it holds, and the step's own update has the
    # number in it, so the new rate must capture again (not replay the old number)
    runs = [_per_step_schedule(h, "sgd", manual=True, every=3) for h in (True, False)]
    (hot, calls), (eager, _) = runs
    assert hot == eager and calls >= 1


def test_a_step_that_changed_during_a_warm_up_is_recorded_again_later_and_replays(
    conn, monkeypatch
):
    import gt.hotpath as H

    monkeypatch.setattr(H, "RETRY_AFTER", 4)  # (32 calls by default)
    calls = {"n": 0}

    @gt.hot
    def f(x):
        calls["n"] += 1
        return x * min(calls["n"], 6)  # a new number for five calls, then the same step

    got = [f(gt.tensor([1.0])).item() for _ in range(30)]
    assert got == [float(min(k, 6)) for k in range(1, 31)]
    (only,) = f.state.values()
    assert only["state"] == "replaying" and only["calls"] >= 10


def test_a_scheduler_stepped_inside_the_step_keeps_it_eager_and_right(conn):
    # (a replay runs no Python: StepLR's counter would stop and the rate stay where it was)
    def train(hot: bool):
        model, opt = _model("sgd")
        sched = gt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        step = _step_of(model, opt)

        def step_and_schedule(x, y):
            loss = step(x, y)
            sched.step()
            return loss

        fn = gt.hot(step_and_schedule) if hot else step_and_schedule
        gx, gy = (gt.tensor(a) for a in _data(0))
        losses = [fn(gx, gy).item() for _ in range(8)]
        return losses + [p.detach().numpy().tobytes() for p in model.parameters()], fn

    (hot, fn), (eager, _) = train(True), train(False)
    assert hot == eager
    (state,) = fn.state.values()
    assert state["calls"] == 0 and "scheduler" in state["state"]


def test_switching_between_train_and_eval_is_seen_by_a_captured_step(conn):
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(4, 4), gt.nn.Dropout(0.5))
    x = gt.ones(2, 4)

    @gt.hot
    def f(x):
        return model(x)

    want_eval = model.eval()(x).detach().numpy()
    for mode in ("train", "eval", "train", "eval"):
        getattr(model, mode)()
        outs = [f(x).detach().numpy() for _ in range(4)]
        if mode == "eval":  # no dropout: the plain linear layer, every time
            for o in outs:
                np.testing.assert_array_equal(o, want_eval)
        else:  # dropout: zeros somewhere, a fresh mask each call
            assert all((o == 0).any() for o in outs)
            assert not all(np.array_equal(outs[0], o) for o in outs[1:])


def test_a_hook_added_or_removed_after_capture_is_seen_by_the_captured_step(conn):
    gt.manual_seed(0)
    model = gt.nn.Linear(3, 2)
    x = gt.ones(1, 3)

    @gt.hot
    def f(x):
        return model(x)

    plain = [f(x).detach().numpy() for _ in range(4)]  # captured and replayed
    handle = model.register_forward_hook(lambda m, args, out: out * 0 + 7)
    hooked = [f(x).detach().numpy() for _ in range(4)]
    handle.remove()
    after = [f(x).detach().numpy() for _ in range(4)]
    assert all((h == 7).all() for h in hooked)
    for o in plain + after:
        np.testing.assert_array_equal(o, plain[0])
