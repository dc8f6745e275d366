"""Checkpoints and copies: save/load round trips, optimizer and scheduler state, deepcopy, pickle."""

from __future__ import annotations

import copy
import io
import pickle

from programs import program
from programs.common import arr, params, set_weights


def _net(torch, seed: int):
    nn = torch.nn
    return set_weights(torch, nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2)), seed=seed)


def _step(torch, model, opt, seed: int):
    x, y = torch.tensor(arr(seed, 8, 3)), torch.tensor(arr(seed + 1, 8, 2))
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


@program
def state_dict_save_load_round_trip(torch):
    a, b = _net(torch, 1), _net(torch, 2)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    result = b.load_state_dict(sd)
    x = torch.tensor(arr(3, 4, 3))
    return {"equal": bool(torch.equal(a(x), b(x))), "keys": list(sd.keys()),
            "missing": list(result.missing_keys), "out": b(x)}  # fmt: skip


@program
def resume_training_from_checkpoint(torch):
    straight = _net(torch, 4)
    opt = torch.optim.Adam(straight.parameters(), lr=0.01)
    for i in range(6):
        _step(torch, straight, opt, 10 + i)

    first = _net(torch, 4)
    opt1 = torch.optim.Adam(first.parameters(), lr=0.01)
    for i in range(3):
        _step(torch, first, opt1, 10 + i)
    buf = io.BytesIO()
    torch.save({"epoch": 3, "model": first.state_dict(), "optim": opt1.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf)
    resumed = _net(torch, 99)
    opt2 = torch.optim.Adam(resumed.parameters(), lr=0.5)
    resumed.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    for i in range(ckpt["epoch"], 6):
        _step(torch, resumed, opt2, 10 + i)
    return {"straight": params(straight), "resumed": params(resumed),
            "lr": opt2.param_groups[0]["lr"], "state_keys": sorted(ckpt["optim"]["state"][0])}  # fmt: skip


@program
def sgd_momentum_state_dict_round_trip(torch):
    model = _net(torch, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _step(torch, model, opt, 20)
    sd = opt.state_dict()
    other = _net(torch, 5)
    other.load_state_dict(model.state_dict())
    opt2 = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    _step(torch, model, opt, 21)
    _step(torch, other, opt2, 21)
    return {"a": params(model), "b": params(other), "groups": sd["param_groups"][0]["params"],
            "momentum": sd["param_groups"][0]["momentum"]}  # fmt: skip


@program
def deepcopy_model_then_diverge(torch):
    model = _net(torch, 6)
    twin = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    _step(torch, model, opt, 30)
    x = torch.tensor(arr(31, 3, 3))
    same_type = type(twin[0].weight).__name__
    return {"model_out": model(x), "twin_out": twin(x), "twin_params": params(twin),
            "twin_is_leaf": twin[0].weight.is_leaf, "twin_requires_grad": twin[0].weight.requires_grad,
            "param_type": same_type, "distinct": twin[0].weight is not model[0].weight}  # fmt: skip


@program
def pickle_tensors_and_modules(torch):
    t = torch.tensor(arr(32, 2, 3))
    p = torch.nn.Parameter(torch.tensor(arr(33, 4)))
    t2 = pickle.loads(pickle.dumps(t))
    p2 = pickle.loads(pickle.dumps(p))
    model = _net(torch, 7)
    m2 = pickle.loads(pickle.dumps(model))
    x = torch.tensor(arr(34, 2, 3))
    ints_ = pickle.loads(pickle.dumps(torch.arange(5)))
    return {"t": t2, "p": p2, "p_requires_grad": p2.requires_grad, "p_type": type(p2).__name__,
            "model_out": m2(x), "ints": ints_}  # fmt: skip


@program
def snapshot_state_dict_by_clone(torch):
    model = _net(torch, 8)
    snap = {k: v.clone() for k, v in model.state_dict().items()}
    live = model.state_dict()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    _step(torch, model, opt, 40)
    return {"snap": snap, "live_follows_model": bool(torch.equal(live["0.weight"], model[0].weight)),
            "snap_differs": not bool(torch.equal(snap["0.weight"], model[0].weight))}  # fmt: skip


@program
def partial_load_strict_false(torch):
    nn = torch.nn
    big = set_weights(torch, nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2),
                                           nn.Linear(2, 1)), seed=9)  # fmt: skip
    small = _net(torch, 10)
    res = big.load_state_dict(small.state_dict(), strict=False)
    try:
        big.load_state_dict(small.state_dict())
        error = "none"
    except RuntimeError:
        error = "RuntimeError"
    return {"missing": list(res.missing_keys), "unexpected": list(res.unexpected_keys),
            "error": error, "w": big[0].weight}  # fmt: skip


@program
def scheduler_state_round_trip(torch):
    model = _net(torch, 11)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for i in range(3):
        _step(torch, model, opt, 50 + i)
        sched.step()
    state = sched.state_dict()
    opt2 = torch.optim.SGD(_net(torch, 11).parameters(), lr=0.1)
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = sched.get_last_lr()[0]
    sched.step()
    sched2.step()
    return {
        "last_epoch": state["last_epoch"],
        "lr1": sched.get_last_lr(),
        "lr2": sched2.get_last_lr(),
    }


@program
def save_load_file_with_tensors_list(torch, tmp_name="ckpt_programs.pt"):
    import os
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), tmp_name)
    items = [torch.tensor(arr(60, 3)), torch.arange(4), torch.ones(2, 2, dtype=torch.float64)]
    torch.save({"items": items, "meta": {"name": "run", "step": 7}}, path)
    back = torch.load(path)
    os.remove(path)
    return {"items": back["items"], "meta_step": back["meta"]["step"],
            "dtypes_equal": [a.dtype == b.dtype for a, b in zip(items, back["items"])]}  # fmt: skip


@program
def tied_weights_state_dict_keys(torch):
    nn = torch.nn
    lin = set_weights(torch, nn.Linear(3, 3), seed=70)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    sd = model.state_dict()
    fresh = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
    fresh.load_state_dict(sd)
    x = torch.tensor(arr(71, 2, 3))
    return {"keys": list(sd.keys()), "n_params": len(list(model.parameters())),
            "same_out": bool(torch.allclose(model(x), fresh(x))),
            "prefixed": list(model.state_dict(prefix="net.").keys())}  # fmt: skip
