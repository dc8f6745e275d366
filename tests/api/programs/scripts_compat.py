"""What scripts wrap around their math: ``torch.jit`` decorators, ``torch.compile``'d steps,
``torch.testing.assert_close`` checks, ``torch.profiler`` blocks and data-parallel scaffolding
(``torch.distributed`` as one process, ``DistributedDataParallel``, ``DistributedSampler``)."""

from __future__ import annotations

from programs import program
from programs.common import arr, ints, params, set_weights


def _close(torch, a, b, **kw) -> bool:
    try:
        torch.testing.assert_close(a, b, **kw)
        return True
    except AssertionError:
        return False


@program
def jit_scripted_helpers_in_training(torch):
    @torch.jit.script
    def scaled_tanh(x, s: float):
        return torch.tanh(x) * s

    @torch.jit.ignore
    def python_only(x):
        return x * 2

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        @torch.jit.export
        def features(self, x):
            return scaled_tanh(self.fc(x), 1.5)

        def forward(self, x):
            y = self.features(x)
            if torch.jit.is_scripting():  # (True inside a TorchScript forward, never in GT)
                y = y * 2
            else:
                y = python_only(y)
            return torch.jit.annotate(torch.Tensor, y)

    model = torch.jit.script(set_weights(torch, Net(), seed=3))
    x = torch.tensor(arr(1, 6, 4))
    traced = torch.jit.trace(model, (x,))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = traced(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    fut = torch.jit.fork(scaled_tanh, x, 0.5)
    return {"losses": losses, "params": params(model), "fork": torch.jit.wait(fut),
            "scripting": torch.jit.is_scripting(), "tracing": torch.jit.is_tracing(),
            "final": torch.jit.Final is not None}  # fmt: skip


@program
def compiled_training_step(torch):
    model = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(),
                                                   torch.nn.Linear(8, 3)), seed=4)  # fmt: skip
    same = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.tensor(arr(2, 16, 5))
    y = torch.tensor(ints(5, 3, 16))

    @torch.compile
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    @torch.compile(mode="reduce-overhead", dynamic=False)
    def predict(x):
        return model(x).softmax(-1)

    losses = [step(x, y) for _ in range(6)]
    probs = [predict(x) for _ in range(4)]
    eager = torch.compile(lambda v: v * 3, disable=True)
    fwd = same(x)  # a compiled module's forward keeps its graph
    fwd.sum().backward()
    return {"losses": losses, "probs": probs[-1], "params": params(model),
            "grad": model[0].bias.grad, "eager": eager(y), "fwd": fwd,
            "compiled_module_grad": fwd.requires_grad}  # fmt: skip


@program
def assert_close_results_as_booleans(torch):
    a = torch.tensor(arr(6, 4, 3))
    b64 = torch.tensor(arr(6, 4, 3), dtype=torch.float64)
    ok = {
        "same": _close(torch, a, a.clone()),
        "tiny": _close(torch, a, a + 1e-7),
        "small": _close(torch, a, a + 1e-4),
        "small_loose": _close(torch, a, a + 1e-4, rtol=1e-3, atol=1e-3),
        "f64_tight": _close(torch, b64, b64 + 1e-6),
        "dtype": _close(torch, a, b64),
        "dtype_unchecked": _close(torch, a, b64, check_dtype=False),
        "ints": _close(torch, torch.tensor([1, 2]), torch.tensor([1, 3])),
        "nan": _close(torch, torch.tensor([float("nan")]), torch.tensor([float("nan")])),
        "nan_eq": _close(torch, torch.tensor([float("nan")]), torch.tensor([float("nan")]),
                         equal_nan=True),
        "seq": _close(torch, [a, 1.0, 2], [a.clone(), 1.0, 2]),
        "map": _close(torch, {"w": a, "n": 3}, {"w": a * 1.01, "n": 3}),
        "numbers": _close(torch, 0.1 + 0.2, 0.3),
    }  # fmt: skip
    try:
        torch.testing.assert_close(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.5, 3.1]))
        message = ""
    except AssertionError as e:
        message = str(e)
    try:
        torch.testing.assert_close(a, [1.0])
        kind = "none"
    except TypeError:
        kind = "TypeError"
    made = torch.testing.make_tensor(3, 5, dtype=torch.float32, device="cpu", low=-2, high=2)
    ints_made = torch.testing.make_tensor((40,), dtype=torch.int64, device="cpu", exclude_zero=True)
    return {**ok, "message": message, "kind": kind, "made_shape": list(made.shape),
            "made_range": bool(((made >= -2) & (made < 2)).all()),
            "ints_range": bool(((ints_made >= -9) & (ints_made < 10) & (ints_made != 0)).all()),
            "made_dtype": ints_made.dtype == torch.int64}  # fmt: skip


@program
def profiled_training_steps(torch):
    model = set_weights(torch, torch.nn.Linear(4, 2), seed=7)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.tensor(arr(8, 10, 4))
    traces = []

    @torch.profiler.record_function("loss_fn")
    def loss_fn(out):
        return out.pow(2).mean()

    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    acts = [torch.profiler.ProfilerActivity.CPU]
    losses = []
    with torch.profiler.profile(
        activities=acts,
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: traces.append(p.step_num),
    ) as prof:
        for _ in range(5):
            with torch.profiler.record_function("train_step"):
                opt.zero_grad()
                with torch.profiler.record_function("forward"):
                    out = model(x)
                loss = loss_fn(out)
                loss.backward()
                opt.step()
            losses.append(loss)
            prof.step()
    rows = {e.key: e.count for e in prof.key_averages()}
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    with torch.profiler.profile() as p2:
        with torch.profiler.record_function("once"):
            y = model(x).sum()
    return {"losses": losses, "params": params(model), "traces": traces, "y": y,
            "counts": {k: rows.get(k, 0) for k in ("train_step", "forward", "loss_fn")},
            "table_has_rows": all(k in table for k in ("train_step", "forward", "loss_fn")),
            "once": [e.key for e in p2.key_averages() if e.key == "once"]}  # fmt: skip


@program
def data_parallel_script_as_one_process(torch):
    import tempfile  # noqa: PLC0415 - (PyTorch's file rendezvous needs a path)

    dist = torch.distributed
    nn = torch.nn
    before = dist.is_available(), dist.is_initialized()
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp}/rendezvous", world_size=1, rank=0
        )
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        inner = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        set_weights(torch, inner, seed=7)
        model = nn.parallel.DistributedDataParallel(inner)
        data = torch.utils.data.TensorDataset(
            torch.tensor(arr(40, 12, 4)), torch.tensor(arr(41, 12, 1))
        )
        sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=3)
        loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                with model.no_sync():
                    loss.backward()
                for p in model.parameters():
                    dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                    p.grad /= world
                opt.step()
                reported = loss.detach().clone()
                dist.all_reduce(reported)
                losses.append(reported.item() / world)
        gathered = [None] * world
        dist.all_gather_object(gathered, {"rank": rank, "steps": len(losses)})
        shards = [torch.zeros(2)]
        dist.all_gather(shards, torch.tensor([1.0, 2.0]))
        dist.barrier()
        dist.destroy_process_group()
    return {"before": list(before), "rank": rank, "world": world, "losses": losses,
            "weight": model.module[0].weight, "gathered_steps": gathered[0]["steps"],
            "shard": shards[0], "after": dist.is_initialized(),
            "order": list(sampler)}  # fmt: skip


@program
def global_settings_scripts_set(torch):
    torch.set_default_dtype(torch.float64)
    try:
        x = torch.tensor([1.0, 2.5])
        lin = torch.nn.Linear(3, 2)
        mixed = torch.arange(3) * 0.5 + 1j
        dtypes = [x.dtype == torch.float64, torch.randn(2).dtype == torch.float64,
                  lin.weight.dtype == torch.float64, mixed.dtype == torch.complex128,
                  torch.get_default_dtype() == torch.float64]  # fmt: skip
    finally:
        torch.set_default_dtype(torch.float32)
    torch.set_printoptions(precision=2)
    try:
        short = repr(torch.tensor([1.23456, 2.5, -0.125]))
        torch.set_printoptions(sci_mode=True)
        sci = repr(torch.tensor([1.5, 20.0]))
    finally:
        torch.set_printoptions(profile="default")
    torch.manual_seed(3)
    state = torch.get_rng_state()
    a = torch.rand(2)
    torch.set_rng_state(state)
    b = torch.rand(2)
    torch.set_float32_matmul_precision("high")
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    img = torch.tensor(arr(42, 1, 3, 4, 4)).to(memory_format=torch.channels_last)
    return {"dtypes": dtypes, "short": short, "sci": sci, "default": repr(torch.tensor([1.23456])),
            "same_draws": bool((a == b).all()), "precision": precision,
            "is_dtype": isinstance(torch.float32, torch.dtype),
            "channels_last_sum": img.sum(), "after": torch.tensor([0.5]).dtype == torch.float32}  # fmt: skip
