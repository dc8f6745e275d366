"""The correctness matrix: every example config x {forward, backward, optimizer step} x {1, 2, 4}
workers gives the single-worker, no-config results; and a config changed inside a running loop.

The program is a 2-layer MLP whose sizes do not divide by 2 or 4 (batch 10, hidden 7), so shards
are uneven. Its tensors are annotated with the signals the configs in ``configs/`` name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gt
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
MODES = ("forward", "backward", "step")

pytestmark = pytest.mark.timeout(120)


def start(n: int) -> LocalCluster:
    """A cluster whose ``n`` workers have all registered (LocalCluster waits for them)."""
    return LocalCluster(workers=n)


@pytest.fixture(scope="module")
def clusters():
    made: dict[int, LocalCluster] = {}

    def get(n: int) -> LocalCluster:
        if n not in made:
            made[n] = start(n)
        return made[n]

    yield get
    for cl in made.values():
        cl.stop()


def program(mode: str, steps: int = 2, configs: list | None = None, b: int = 10, d: int = 5, h: int = 7,
            o: int = 3) -> dict[str, np.ndarray]:  # fmt: skip
    """The MLP; ``configs[i]`` (if given) is loaded before step ``i``."""
    rng = np.random.default_rng(0)
    x = gt.from_numpy(rng.standard_normal((b, d)).astype(np.float32))
    t = gt.from_numpy(rng.standard_normal((b, o)).astype(np.float32))
    shapes = {"w1": (d, h), "b1": (h,), "w2": (h, o), "b2": (o,)}
    params = {}
    for name, shape in shapes.items():
        params[name] = gt.from_numpy(
            (rng.standard_normal(shape) * 0.5).astype(np.float32)
        ).requires_grad_()
        gt.signal.tensor(params[name], name)
    opt = gt.optim.SGD(list(params.values()), lr=0.1, momentum=0.5)
    losses = []
    for step in range(steps):
        if configs is not None:
            gt.load_config(configs[step])
        with gt.signal.context("layer1"):
            hid = (x @ params["w1"] + params["b1"]).relu()
        with gt.signal.context("layer2", backward="layer2_bwd"):
            y = hid @ params["w2"] + params["b2"]
        loss = ((y - t) ** 2).mean()
        if mode == "forward":
            return {"y": y.detach().numpy(), "loss": np.array(loss.item())}
        opt.zero_grad()
        loss.backward()
        if mode == "backward":
            return {f"d{k}": v.grad.numpy() for k, v in params.items()}
        opt.step()
        losses.append(loss.item())
    return {k: v.detach().numpy() for k, v in params.items()} | {"losses": np.array(losses)}


@pytest.fixture(scope="module")
def reference(clusters):
    """The program on one worker with no config, per mode."""
    out = {}
    gt.connect(clusters(1).address, timeout=60)
    try:
        gt.config.clear()
        for mode in MODES:
            out[mode] = program(mode)
        out["loop"] = program("step", steps=4)
    finally:
        gt.disconnect()
    return out


def compare(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-4, atol=2e-5, err_msg=k)


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_matrix(clusters, reference, path, workers):
    cl = clusters(workers)
    for mode in MODES:
        gt.connect(cl.address, timeout=60)
        try:
            gt.load_config(path)
            got = program(mode)
            gt.sync()
        finally:
            gt.disconnect()
        compare(got, reference[mode])


def test_a_config_changed_between_steps_of_a_running_loop(clusters, reference):
    cl = clusters(4)
    gt.connect(cl.address, timeout=60)
    try:
        plan = [CONFIG_DIR / "dp.yaml", CONFIG_DIR / "tp2.yaml", None, CONFIG_DIR / "pipeline.yaml"]
        got = program("step", steps=4, configs=plan)
        gt.sync()
    finally:
        gt.disconnect()
    compare(got, reference["loop"])


def test_sharded_runs_really_spread_the_work(clusters):
    """Under the data-parallel config, both workers execute matmuls and exchange data directly."""
    cl = clusters(2)
    gt.connect(cl.address, timeout=60)
    try:
        before = {w["id"]: w["instructions"] for w in request(cl.address, "stats")["workers"]}
        gt.load_config(CONFIG_DIR / "dp.yaml")
        program("step", b=64, d=32, h=48, o=8)
        gt.sync()
        after = {w["id"]: w["instructions"] for w in request(cl.address, "stats")["workers"]}
    finally:
        gt.disconnect()
    ran = {w: after[w] - before.get(w, 0) for w in after}
    assert all(n > 20 for n in ran.values()), ran
