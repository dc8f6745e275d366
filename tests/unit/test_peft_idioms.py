"""Idioms of parameter-efficient fine-tuning scripts that GT got wrong: a frozen base model cast to
bfloat16 under float32 adapters (the cast dropped the autograd graph, so ``loss.backward()`` said
the loss did not require grad), and HF's ``with torch.device("meta"): model = Net()`` followed by
``load_state_dict(..., assign=True)`` (``gt.device`` was no context manager)."""

from __future__ import annotations

import numpy as np

import gt


def test_bfloat16_results_of_tensors_that_require_grad_keep_the_graph(conn):
    adapter = gt.nn.Parameter(gt.ones(2, 3))
    frozen = gt.ones(2, 3).to(gt.bfloat16)
    mixed = frozen + adapter  # float32, requires grad
    cast = mixed.to(gt.bfloat16)  # PEFT: ``result.to(torch_result_dtype)``
    assert cast.dtype == gt.bfloat16
    assert cast.requires_grad and cast.grad_fn is not None and not cast.is_leaf
    assert (cast * 2.0).requires_grad
    leaf = gt.zeros(2, dtype=gt.bfloat16, requires_grad=True)
    assert (leaf * 2.0).requires_grad and (leaf * 2.0).grad_fn is not None


def test_device_is_a_context_manager_that_sets_the_default_device():
    before = gt.get_default_device()
    with gt.device("meta") as d:
        assert d == gt.device("meta")
        assert str(gt.get_default_device()) == "meta"
        with gt.device("cuda", 1):
            assert gt.get_default_device() == gt.device("cuda:1")
        assert str(gt.get_default_device()) == "meta"
    assert gt.get_default_device() == before


def test_a_model_built_under_the_meta_device_loads_with_assign(conn):
    source = gt.nn.Linear(3, 2)
    with gt.no_grad():
        source.weight.copy_(gt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)))
        source.bias.fill_(0.5)
    state = {k: v.clone() for k, v in source.state_dict().items()}
    with gt.device("meta"):
        model = gt.nn.Linear(3, 2)
    model.load_state_dict(state, assign=True)
    x = gt.ones(1, 3)
    np.testing.assert_allclose(model(x).detach().numpy(), [[3.5, 12.5]])
    assert model.weight.requires_grad and isinstance(model.weight, gt.nn.Parameter)
