"""Captured steps called with a batch as a data loader gives it: a list, a tuple, a dict or a
namedtuple of tensors. Each replays, gives the eager results bit for bit, and a batch of another
structure or shape is a capture of its own."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import gt
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)

Batch = namedtuple("Batch", ["x", "y"])


def _batch(k: int, kind: str, n: int = 16):
    rng = np.random.default_rng(k)
    x = gt.tensor(rng.standard_normal((n, 8)).astype(np.float32))
    y = gt.tensor(rng.integers(0, 3, n))
    return {"list": [x, y], "tuple": (x, y), "dict": {"x": x, "y": y},
            "namedtuple": Batch(x, y)}[kind]  # fmt: skip


def _train(hot: bool, kind: str, sizes=(16,) * 8):
    gt.manual_seed(2)
    model = gt.nn.Sequential(gt.nn.Linear(8, 16), gt.nn.ReLU(), gt.nn.Linear(16, 3))
    opt = gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(batch):
        x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = gt.hot(step) if hot else step
    losses = [fn(_batch(k, kind, n)).item() for k, n in enumerate(sizes)]
    params = [p.detach().numpy() for p in model.parameters()]
    return losses, params, (fn.state if hot else None)


@pytest.mark.parametrize("kind", ["list", "tuple", "dict", "namedtuple"])
def test_a_batch_of_tensors_in_a_container_replays_as_eagerly(conn, kind):
    eager = _train(False, kind)
    hot = _train(True, kind)
    assert hot[0] == eager[0]
    for a, b in zip(hot[1], eager[1]):
        np.testing.assert_array_equal(a, b)
    (only,) = hot[2].values()
    assert only["state"] == "replaying" and only["calls"] >= 4


def test_a_batch_of_another_shape_is_captured_on_its_own(conn):
    sizes = (16,) * 5 + (8,) * 5 + (16, 8)
    eager = _train(False, "list", sizes)
    hot = _train(True, "list", sizes)
    assert hot[0] == eager[0]
    states = list(hot[2].values())
    assert len(states) == 2 and all(s["state"] == "replaying" for s in states)
