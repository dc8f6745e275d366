"""What a probe of the ``nn.Module`` API against PyTorch 2.13 found on Dec 6 (1,438 cases), as
training frameworks use it: conversions through ``_apply`` (which modules override to cast caches
of their own), parameters registered through ``register_parameter`` (what accelerate patches),
PyTorch's private tables and import paths, ``ModuleDict`` of pairs, names checked when registered,
lazy modules loading a checkpoint, and backward hooks of a module called twice in PyTorch's
order."""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import pytest

import gt
from gt import nn

pytestmark = pytest.mark.timeout(90)


def test_conversions_go_through_apply_so_an_override_casts_its_cache(conn):
    class Rope(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(2, 2)
            self.cache = gt.ones(2)  # a plain tensor, not a buffer

        def _apply(self, fn, recurse=True):
            self.cache = fn(self.cache)
            return super()._apply(fn, recurse)

    outer = nn.Sequential(Rope())
    grad = gt.ones(2, 2)
    outer[0].proj.weight.grad = grad
    outer.double()
    assert outer[0].cache.dtype == gt.float64 and outer[0].proj.weight.dtype == gt.float64
    assert outer[0].proj.weight.grad is grad and grad.dtype == gt.float64  # (kept, as PyTorch)
    seen = []
    outer._apply(lambda t: seen.append(tuple(t.shape)) or t)
    assert sorted(seen) == [(2,), (2,), (2, 2), (2, 2)]


def test_layers_register_parameters_through_register_parameter(conn):
    calls = []
    old = nn.Module.register_parameter

    def spy(self, name, param):
        calls.append(name)
        return old(self, name, param)

    nn.Module.register_parameter = spy
    try:
        nn.Linear(2, 3)
    finally:
        nn.Module.register_parameter = old
    assert calls == ["weight", "bias"]


def test_registration_hooks_of_every_module_see_and_may_replace(conn):
    from gt.nn.modules import module as M

    seen = []
    h1 = M.register_module_parameter_registration_hook(lambda m, n, p: seen.append(("p", n)))
    h2 = M.register_module_buffer_registration_hook(lambda m, n, b: seen.append(("b", n)))
    h3 = M.register_module_module_registration_hook(lambda m, n, s: seen.append(("m", n)))
    try:
        nn.Sequential(nn.BatchNorm1d(2))
    finally:
        h1.remove(), h2.remove(), h3.remove()
    assert ("p", "weight") in seen and ("b", "running_mean") in seen and ("m", "0") in seen
    nn.Linear(1, 1)
    assert len([s for s in seen if s == ("p", "bias")]) == 1


def test_the_private_tables_libraries_read_exist_from_the_start(conn):
    bn = nn.BatchNorm1d(2)
    assert bn._non_persistent_buffers_set == set()
    for name in ("_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                 "_load_state_dict_post_hooks", "_forward_hooks", "_forward_pre_hooks",
                 "_backward_hooks", "_forward_hooks_always_called"):  # fmt: skip
        assert type(getattr(bn, name)) is OrderedDict, name
    assert bn._is_full_backward_hook is None
    h = bn.register_forward_hook(lambda *a: None)
    bn._forward_hooks.move_to_end(h.id, last=False)
    assert isinstance(h.id, int)


def test_module_dict_of_pairs_and_deleting_a_key(conn):
    d = nn.ModuleDict([("z", nn.ReLU()), ("a", nn.Tanh())])
    assert list(d.keys()) == ["z", "a"]
    del d["z"]
    assert list(d.keys()) == ["a"] and "z" not in d._modules
    with pytest.raises(ValueError, match="element #0 has length 3"):
        d.update([("k", nn.ReLU(), 1)])
    merged = {"x": nn.Parameter(gt.ones(1))} | nn.ParameterDict({"y": nn.Parameter(gt.ones(1))})
    assert list(merged) == ["x", "y"]


def test_plain_attributes_may_be_set_before_init_but_not_parameters(conn):
    class Early(nn.Module):
        def __init__(self):
            self.cfg = {"width": 2}
            super().__init__()
            self.lin = nn.Linear(2, 2)

    assert Early().cfg == {"width": 2}

    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(gt.ones(1))

    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__"):
        Bad()


def test_names_are_checked_when_registered(conn):
    lin = nn.Linear(2, 2)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        lin.register_buffer("weight", gt.ones(2))
    with pytest.raises(KeyError, match="buffer name can.+t contain"):
        lin.register_buffer("a.b", gt.ones(2))
    with pytest.raises(TypeError, match="parameter name should be a string"):
        lin.register_parameter(3, None)
    with pytest.raises(TypeError, match="is not a Module subclass"):
        lin.add_module("t", gt.ones(2))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        nn.Sequential(nn.ReLU(), 3)
    with pytest.raises(TypeError, match="object to parameter 'p'"):
        lin.register_parameter("p", gt.ones(2, requires_grad=True) * 2)
    assert list(lin.state_dict()) == ["weight", "bias"]


def test_pytorch_import_paths_of_modules_and_helpers(conn):
    from gt.nn.modules.lazy import LazyModuleMixin
    from gt.nn.modules.linear import NonDynamicallyQuantizableLinear
    from gt.nn.modules.module import _addindent, _IncompatibleKeys
    from gt.nn.modules.transformer import _get_activation_fn

    from gt.nn.init import _no_grad_trunc_normal_, _no_grad_zero_
    from gt.nn.modules import Linear, Module
    from gt.utils.hooks import RemovableHandle

    assert Linear is nn.Linear and Module is nn.Module
    assert isinstance(nn.LazyLinear(2), LazyModuleMixin)
    assert isinstance(NonDynamicallyQuantizableLinear(2, 2), nn.Linear)
    assert isinstance(nn.MultiheadAttention(2, 1).out_proj, NonDynamicallyQuantizableLinear)
    assert _get_activation_fn("gelu") is nn.functional.gelu
    assert _addindent("a\nb", 2) == "a\n  b"
    assert isinstance(
        nn.Linear(1, 1).load_state_dict(nn.Linear(1, 1).state_dict()), _IncompatibleKeys
    )
    assert isinstance(nn.Linear(1, 1).register_forward_hook(lambda *a: None), RemovableHandle)
    t = gt.empty(1000)
    _no_grad_trunc_normal_(t, 0.0, 1.0, -0.5, 0.5)
    assert -0.5 <= t.min().item() and t.max().item() <= 0.5
    assert _no_grad_zero_(t).abs().sum().item() == 0.0
    for cls in (nn.CrossEntropyLoss, nn.NLLLoss, nn.BCELoss):
        assert isinstance(cls(), nn.modules.loss._WeightedLoss)


def test_pytree_helpers(conn):
    from gt.utils import _pytree as pytree

    Point = namedtuple("Point", "x y")
    tree = {"a": (1, [2, 3]), "b": Point(4, None), "c": 5}
    leaves, spec = pytree.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5] and spec.num_leaves == 5
    assert pytree.tree_unflatten([v * 10 for v in leaves], spec) == {
        "a": (10, [20, 30]), "b": Point(40, None), "c": 50,
    }  # fmt: skip
    assert pytree.tree_map(lambda u, v: u + v, tree, tree)["a"] == (2, [4, 6])
    x = pytree.tree_map_only(gt.Tensor, lambda t: t * 2, {"t": gt.ones(2), "n": 3})
    assert x["t"].tolist() == [2.0, 2.0] and x["n"] == 3
    with pytest.raises(ValueError, match="has length 2"):
        pytree.tree_unflatten([1, 2], spec)


def test_module_members_frameworks_call(conn):
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    assert m.compile() is None
    x = gt.ones(1, 2)
    assert m._call_impl(x).tolist() == m(x).tolist()
    names = [n for n, _ in m._named_members(lambda mod: mod._parameters.items())]
    assert names == ["0.weight", "0.bias"]
    assert "0" not in dir(m) and "forward" in dir(m)
    assert "weight" in dir(m[0])
    memo = {m[0]}
    assert [n for n, _ in m.named_modules(memo=memo)] == ["", "1"]


def test_a_parameters_data_has_the_parameters_storage(conn):
    w = nn.Linear(3, 2).weight
    assert w.data.data_ptr() == w.data_ptr() and w.data[1].data_ptr() == w[1].data_ptr()
    assert w.data.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()


def test_a_registered_buffer_is_a_plain_tensor_that_is_still_a_buffer(conn):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.stats = nn.Buffer(gt.ones(2), persistent=False)

    m = M()
    assert type(m.stats) is gt.Tensor and isinstance(m.stats, nn.Buffer)
    assert not isinstance(gt.ones(2), nn.Buffer) and list(m.state_dict()) == []


def test_a_lazy_module_takes_its_shapes_from_a_checkpoint(conn):
    src = nn.Linear(3, 4)
    with gt.no_grad():
        src.weight.copy_(gt.arange(12.0).reshape(4, 3))
        src.bias.fill_(1.0)
    lazy = nn.LazyLinear(4)
    lazy.load_state_dict(src.state_dict())
    assert lazy(gt.ones(2, 3)).tolist() == [[4.0, 13.0, 22.0, 31.0]] * 2
    assert type(lazy) is nn.Linear
    conv = nn.LazyConv2d(2, 3)
    conv.load_state_dict(nn.Conv2d(1, 2, 3).state_dict())
    assert tuple(conv.weight.shape) == (2, 1, 3, 3) and conv(gt.ones(1, 1, 4, 4)).shape == (
        1,
        2,
        2,
        2,
    )


def test_backward_hooks_of_a_module_called_twice_fire_latest_call_first(conn):
    m = nn.Linear(3, 2)
    log = []
    m.register_full_backward_pre_hook(lambda _, go: log.append(("pre", go[0].sum().item())))
    m.register_full_backward_hook(lambda _, gi, go: log.append(go[0].sum().item()))
    x = gt.ones(1, 3, requires_grad=True)
    (m(x).sum() + 2 * m(x).sum()).backward()
    assert log == [("pre", 4.0), 4.0, ("pre", 2.0), 2.0]
