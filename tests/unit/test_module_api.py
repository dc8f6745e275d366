"""The ``nn.Module`` API libraries lean on: state-dict hooks, versions and extra state, duplicates
in the named iterators, the parameter containers, forward hooks of every module and
``always_call``, dtype conversions and ``train`` through overridden children (PyTorch's
behaviour, written out)."""

from __future__ import annotations

import io
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import gt
import gt.nn as nn

pytestmark = pytest.mark.timeout(120)


def _set(module, seed=0):
    rng = np.random.default_rng(seed)
    with gt.no_grad():
        for p in module.parameters():
            p.copy_(gt.tensor(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32)))
    return module


# ---------------------------------------------------------------------- state dicts
def test_load_pre_hooks_rename_keys_and_post_hooks_forgive_missing_ones(conn):
    class Legacy(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(3)
            self.norm._register_load_state_dict_pre_hook(rename)
            self.head = nn.Linear(3, 2)
            self.register_load_state_dict_pre_hook(strip)
            self.register_load_state_dict_post_hook(forgive)

    seen = []

    def rename(state_dict, prefix, *rest):
        seen.append(prefix)
        for old, new in (("gamma", "weight"), ("beta", "bias")):
            if prefix + old in state_dict:
                state_dict[prefix + new] = state_dict.pop(prefix + old)

    def strip(module, state_dict, prefix, *rest):
        nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, "module.")

    def forgive(module, keys):
        keys.missing_keys[:] = [k for k in keys.missing_keys if not k.startswith("head.")]

    src = _set(Legacy(), 1)
    ckpt = {
        "module.norm.gamma": src.norm.weight.detach(),
        "module.norm.beta": src.norm.bias.detach(),
    }
    dst = Legacy()
    result = dst.load_state_dict(ckpt)  # strict: the post-hook cleared the missing head
    assert seen == ["norm."]
    assert list(ckpt) == ["module.norm.gamma", "module.norm.beta"]  # the caller's dict is untouched
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert str(result) == "<All keys matched successfully>"
    np.testing.assert_allclose(dst.norm.weight.detach().numpy(), src.norm.weight.detach().numpy())
    loose = nn.Linear(3, 2).load_state_dict(
        {"weight": gt.zeros(2, 3), "extra": gt.zeros(1)}, strict=False
    )
    assert str(loose) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['extra'])"


def test_state_dict_hooks_extra_state_and_versions(conn):
    class Counter(nn.Module):
        _version = 3

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.steps = 0

        def get_extra_state(self):
            return {"steps": self.steps}

        def set_extra_state(self, state):
            self.steps = state["steps"]

    model = nn.Sequential(Counter(), nn.Linear(2, 1))
    model[0].steps = 7
    pre = []
    model[1].register_state_dict_pre_hook(lambda m, prefix, keep_vars: pre.append(prefix))
    model[1].register_state_dict_post_hook(
        lambda m, sd, prefix, meta: sd.__setitem__(prefix + "kernel", sd.pop(prefix + "weight"))
    )
    model._register_state_dict_hook(lambda m, sd, prefix, meta: OrderedDict(reversed(sd.items())))
    sd = model.state_dict()
    assert list(sd) == ["1.kernel", "1.bias", "0.lin.bias", "0.lin.weight", "0._extra_state"]
    assert pre == ["1."]
    model2 = nn.Sequential(Counter(), nn.Linear(2, 1))
    plain = _set(model2, 3).state_dict()
    assert plain._metadata == {"": {"version": 1}, "0": {"version": 3}, "0.lin": {"version": 1},
                               "1": {"version": 1}}  # fmt: skip
    buf = io.BytesIO()
    gt.save(dict(sd), buf)
    buf.seek(0)
    loaded = gt.load(buf, weights_only=True)
    loaded["1.weight"] = loaded.pop("1.kernel")
    fresh = nn.Sequential(Counter(), nn.Linear(2, 1))
    fresh.load_state_dict(loaded)
    assert fresh[0].steps == 7
    with pytest.raises(RuntimeError, match="post-hook must return None"):
        m = nn.Linear(1, 1)
        m.register_state_dict_post_hook(lambda *a: {})
        m.state_dict()
    missing = nn.Sequential(Counter()).load_state_dict(
        {"0.lin.weight": gt.zeros(2, 2)}, strict=False
    )
    assert missing.missing_keys == ["0._extra_state", "0.lin.bias"]


def test_batchnorm_loads_an_old_checkpoint_without_num_batches_tracked(conn):
    bn = nn.BatchNorm1d(3)
    with gt.no_grad():
        bn.num_batches_tracked.fill_(4)
    old = {k: v for k, v in nn.BatchNorm1d(3).state_dict().items() if k != "num_batches_tracked"}
    bn.load_state_dict(old)  # no _metadata: version 1, whose checkpoints lack the counter
    assert int(bn.num_batches_tracked) == 4
    assert bn.state_dict()._metadata[""] == {"version": 2}
    new = OrderedDict(old)
    new._metadata = {"": {"version": 2}}
    with pytest.raises(
        RuntimeError, match='Missing key\\(s\\) in state_dict: "num_batches_tracked"'
    ):
        bn.load_state_dict(new)


def test_load_state_dict_assign_makes_the_given_tensors_the_parameters(conn):
    lin = nn.Linear(2, 2)
    lin.bias.requires_grad_(False)
    w, b = gt.ones(2, 2), gt.zeros(2)
    lin.load_state_dict({"weight": w, "bias": b}, assign=True)
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    assert not lin.bias.requires_grad
    np.testing.assert_array_equal(lin.weight.detach().numpy(), np.ones((2, 2)))


def test_consume_prefix_strips_keys_and_metadata():
    sd = OrderedDict([("module.a", 1), ("b", 2)])
    sd._metadata = OrderedDict([("", {}), ("module", {"version": 1}), ("module.x", {})])
    nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
    assert list(sd) == ["b", "a"]
    assert sd._metadata == {"": {"version": 1}, "x": {}}  # the model's entry is the root's now
    assert nn.modules.utils._pair(3) == (3, 3) and nn.modules.utils._triple((1, 2, 3)) == (1, 2, 3)


# ---------------------------------------------------------------------- traversal
def test_named_iterators_keep_duplicates_only_when_asked(conn):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 2)
            self.act = nn.ReLU()
            self.act2 = self.act
            self.out = nn.Linear(2, 4, bias=False)
            self.out.weight = self.emb.weight

    m = Tied()
    assert [n for n, _ in m.named_parameters()] == ["emb.weight"]
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == [
        "emb.weight",
        "out.weight",
    ]
    assert [n for n, _ in m.named_modules(remove_duplicate=False)] == [
        "",
        "emb",
        "act",
        "act2",
        "out",
    ]
    assert [n for n, _ in m.named_children()] == ["emb", "act", "out"]
    assert [n for n, _ in m.named_parameters(prefix="m", recurse=False)] == []


def test_get_parameter_get_buffer_and_get_submodule_errors_as_pytorch(conn):
    m = nn.Sequential(nn.BatchNorm1d(2))
    for target, getter, message in (("0.running_mean", m.get_parameter, "`running_mean` is not an nn.Parameter"),
                                    ("0.weight", m.get_buffer, "`weight` is not a buffer"),
                                    ("0.nothing", m.get_parameter, "BatchNorm1d has no attribute `nothing`"),
                                    ("0.weight.x", m.get_parameter, "`weight` is not an nn.Module")):  # fmt: skip
        with pytest.raises(AttributeError) as e:
            getter(target)
        assert str(e.value) == message


# ---------------------------------------------------------------------- containers
def test_parameter_dict_update_setdefault_pop_and_repr(conn):
    d = nn.ParameterDict({"b": gt.ones(2)})
    d.update({"z": gt.zeros(1), "a": gt.ones(3)})  # a plain dict: its keys sorted, as PyTorch
    d.update([("y", gt.ones(1))])
    assert list(d) == ["b", "a", "z", "y"]
    assert isinstance(d["a"], nn.Parameter)
    assert d.setdefault("b", gt.zeros(9)) is d["b"]
    assert d.get("nope", "x") == "x" and "a" in d
    assert d.pop("z").shape == (1,) and list(d.keys()) == ["b", "a", "y"]
    assert d.popitem()[0] == "y"
    assert repr(d) == ("ParameterDict(\n    (b): Parameter containing: [torch.FloatTensor of size 2]\n"
                       "    (a): Parameter containing: [torch.FloatTensor of size 3]\n)")  # fmt: skip
    assert [n for n, _ in nn.Module.named_parameters(d)] == ["b", "a"]


def test_parameter_list_wraps_tensors_slices_and_repr(conn):
    pl = nn.ParameterList([gt.ones(2, 3)])
    pl.append(gt.zeros(4))
    pl += [nn.Parameter(gt.ones(1))]
    assert [type(p).__name__ for p in pl] == ["Parameter"] * 3
    assert isinstance(pl[1:], nn.ParameterList) and len(pl[1:]) == 2
    assert pl[-1].shape == (1,)
    with pytest.raises(IndexError):
        pl[3]
    assert repr(pl).splitlines()[1].replace("torch.", "gt.") == (
        "    (0): Parameter containing: [gt.float32 of size 2x3]"
    )
    with pytest.raises(RuntimeError, match="should not be called"):
        pl()


def test_sequential_and_module_list_edits_renumber_as_pytorch(conn):
    seq = nn.Sequential(nn.ReLU(), nn.Tanh())
    seq.insert(1, nn.Sigmoid()).extend([nn.ELU()])
    assert [type(m).__name__ for m in seq] == ["ReLU", "Sigmoid", "Tanh", "ELU"]
    assert type(seq.pop(1)).__name__ == "Sigmoid"
    del seq[0]
    assert list(seq._modules) == ["0", "1"]
    assert list(seq[1:]._modules) == ["1"]  # a slice keeps the names
    assert len(seq + nn.Sequential(nn.ReLU())) == 3 and len(seq * 2) == 4
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.ELU()])
    del ml[0]
    assert list(ml._modules) == ["0", "1"]
    assert isinstance(ml + [nn.ReLU()], nn.ModuleList)
    assert type(ml.pop(-1)).__name__ == "ELU" and len(ml) == 1


# ---------------------------------------------------------------------- hooks
def test_forward_hooks_of_every_module_run_before_a_modules_own(conn):
    calls = []
    lin = nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda m, a: calls.append("own pre"))
    lin.register_forward_hook(lambda m, a, o: calls.append("own post"))
    g1 = nn.modules.module.register_module_forward_pre_hook(lambda m, a: calls.append("all pre"))
    g2 = nn.modules.module.register_module_forward_hook(
        lambda m, a, kw, o: calls.append(f"all post {sorted(kw)}") or o * 2, with_kwargs=True
    )
    try:
        out = nn.Identity()(gt.ones(1))
        lin(gt.ones(2))
    finally:
        g1.remove()
        g2.remove()
    assert float(out) == 2.0
    assert calls == ["all pre", "all post []", "all pre", "own pre", "all post []", "own post"]
    calls.clear()
    nn.Identity()(gt.ones(1))
    assert calls == []


def test_always_call_forward_hook_runs_when_forward_raises(conn):
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_forward_hook(lambda m, a, o: seen.append(("always", o)), always_call=True)
    lin.register_forward_hook(lambda m, a, o: seen.append(("regular", o)))
    with pytest.raises(Exception):  # noqa: B017 - a shape error, whichever its class
        lin(gt.ones(3))
    assert seen == [("always", None)]
    seen.clear()
    lin(gt.ones(2))
    assert [k for k, _ in seen] == ["always", "regular"]
    bad = nn.Identity()
    bad.register_forward_hook(lambda m, a, o: 1 / 0, always_call=True)
    bad.register_forward_pre_hook(lambda m, a: [][1])
    with warnings.catch_warnings(record=True) as caught, pytest.raises(IndexError):
        warnings.simplefilter("always")
        bad(gt.ones(1))
    assert "always_call=True" in str(caught[0].message)


# ---------------------------------------------------------------------- conversions and modes
def _dtype(t):
    return str(t.dtype).split(".")[-1]


def test_module_to_converts_gradients_and_keeps_parameter_objects(conn):
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    model(gt.ones(3, 2)).sum().backward()
    params = list(model.parameters())
    rv = model[1].running_var
    model.to(dtype=gt.float64)
    assert [p is q for p, q in zip(params, model.parameters())] == [True] * 4
    assert {_dtype(p.grad) for p in model.parameters()} == {"float64"}
    assert _dtype(model[1].num_batches_tracked) == "int64"
    assert _dtype(rv) == "float32"  # a buffer is replaced, as in PyTorch
    model.half()
    assert _dtype(model[1].num_batches_tracked) == "int64"
    assert _dtype(model[0].weight.grad) == "float16"
    model.type(gt.float64)  # every tensor, integer ones too
    assert _dtype(model[1].num_batches_tracked) == "float64"
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        model.to(gt.int32)


def test_train_reaches_children_through_their_own_train(conn):
    class FrozenNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(2)
            self.lin = nn.Linear(2, 2)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()
            return self

    model = nn.Sequential(FrozenNorm(), nn.Dropout(0.5))
    model.eval()
    model.train()
    assert [m.training for m in model.modules()] == [True, True, False, True, True]
    with pytest.raises(ValueError, match="boolean"):
        model.train(1)
