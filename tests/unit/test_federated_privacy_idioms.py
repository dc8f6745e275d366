"""Idioms of federated-learning code that GT got wrong: a FedOpt server (or a logger) reading
``server_opt.state[p]["step"]`` of a built-in optimizer got GT's internal Python int where PyTorch
gives a float32 0-d tensor."""

from __future__ import annotations

import copy

import numpy as np

import gt


def _param():
    p = gt.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)
    p.grad = gt.tensor(np.array([0.5, 0.5, -1.0], np.float32))
    return p


def test_a_builtin_optimizers_step_count_reads_as_pytorchs_float32_tensor(conn):
    for make in (gt.optim.Adam, gt.optim.AdamW, gt.optim.RMSprop, gt.optim.NAdam,
                 gt.optim.Rprop, gt.optim.Adagrad):  # fmt: skip
        p = _param()
        opt = make([p], lr=0.1)
        for _ in range(3):
            opt.step()
        step = opt.state[p]["step"]
        assert isinstance(step, gt.Tensor) and step.dtype == gt.float32 and step.dim() == 0
        assert step.item() == 3.0, make
        assert isinstance(opt.state_dict()["state"][0]["step"], gt.Tensor)
    eager = gt.optim.Adagrad([_param()], lr=0.1)  # PyTorch makes Adagrad's state eagerly
    assert next(iter(eager.state.values()))["step"].item() == 0.0


def test_the_updates_still_count_in_an_int_and_give_the_same_numbers(conn):
    p = _param()
    opt = gt.optim.Adam([p], lr=0.1)
    opt.step()
    opt.step()
    assert dict.__getitem__(opt.state[p], "step") == 2  # still a Python int inside
    want = np.array([1.0, -2.0, 3.0]) - 0.2 * np.sign([0.5, 0.5, -1.0])
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-5)
    fresh = gt.optim.Adam([p], lr=0.1)
    fresh.load_state_dict(opt.state_dict())
    assert fresh.state[p]["step"].item() == 2.0
    fresh.step()
    assert fresh.state[p]["step"].item() == 3.0
    p2, opt2 = copy.deepcopy((p, opt))
    assert opt2.state[p2]["step"].item() == 2.0


def test_sparse_adam_keeps_pytorchs_python_int(conn):
    emb = gt.nn.Embedding(4, 2, sparse=True)
    opt = gt.optim.SparseAdam(emb.parameters(), lr=0.1)
    emb(gt.tensor([1, 2])).sum().backward()
    opt.step()
    assert type(opt.state[emb.weight]["step"]) is int


def test_a_state_dict_holds_plain_dicts_that_a_weights_only_load_reads(conn, tmp_path):
    p = _param()
    opt = gt.optim.SGD([p], lr=0.1, momentum=0.9)  # no step count: the state itself is exported
    opt.step()
    adam = gt.optim.Adam([p], lr=0.1)
    adam.step()
    for o in (opt, adam):
        assert all(type(s) is dict for s in o.state_dict()["state"].values())
        gt.save(o.state_dict(), tmp_path / "opt.pt")
        back = gt.load(tmp_path / "opt.pt")  # weights_only=True
        assert set(back["state"][0]) == set(o.state[p])
