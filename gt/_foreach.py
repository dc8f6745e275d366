"""``torch._foreach_*``: one op over lists of tensors, as optimizers and weight-EMA code call them.

PyTorch fuses each call into few kernels; GT sends one instruction per tensor, which its worker runs
in the same batch, so the list form costs what the loop costs. The names follow PyTorch's: ``X`` is
out of place (returns a list), ``X_`` in place. A second operand may be one scalar, a list of
scalars, one tensor (the same for every entry) or a list of tensors, passed by position or by
PyTorch's keyword for its overload (``scalar=``, ``scalars=``, ``other=``; ``exponent=`` for
``pow``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gt.tensor import Tensor

_UNARY = """abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p
log2 neg reciprocal round sigmoid sign sin sinh sqrt tan tanh trunc""".split()
_BINARY = "add sub mul div pow maximum minimum clamp_min clamp_max".split()
_TERNARY = "addcmul addcdiv".split()

#: Every ``_foreach_*`` name this module defines.
__all__: list[str] = []


def _per_entry(value: Any, n: int, what: str) -> list:
    """``value`` for each of ``n`` entries: a list or tuple is one per entry, anything else is
    shared (a scalar or a tensor)."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RuntimeError(
                f"_foreach: {what} has {len(value)} entries where the tensor list has {n}"
            )
        return list(value)
    return [value] * n


def _tensors(tensors: Sequence[Tensor], name: str) -> list[Tensor]:
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"_foreach_{name}: expected a list of tensors, got {type(t).__name__}")
    return tensors


def _call(t: Tensor, name: str, inplace: bool, *args: Any, **kw: Any) -> Any:
    """``t.name(...)``, or in place ``t.name_(...)``, or where that method does not exist (PyTorch
    has ``_foreach_maximum_`` but no ``Tensor.maximum_``) the result copied into ``t``."""
    if not inplace:
        return getattr(t, name)(*args, **kw)
    method = getattr(t, name + "_", None)
    return method(*args, **kw) if method is not None else t.copy_(getattr(t, name)(*args, **kw))


def _unary(name: str, inplace: bool) -> Callable:
    def op(self: Sequence[Tensor]) -> Any:
        out = [_call(t, name, inplace) for t in _tensors(self, name)]
        return None if inplace else out

    return op


def _second(name: str, args: tuple, kw: dict) -> Any:
    """The second operand of a binary ``_foreach_{name}``, given by position or by one of the
    keywords of PyTorch's overloads (``_foreach_mul_(ts, scalar=0.9)``)."""
    keywords = ("exponent",) if name == "pow" else ("other", "scalar", "scalars")
    unknown = set(kw) - set(keywords)
    if unknown:
        raise TypeError(f"_foreach_{name}() got an unexpected keyword argument '{unknown.pop()}'")
    given = list(args) + [kw[k] for k in keywords if k in kw]
    if len(given) != 1:
        raise TypeError(
            f"_foreach_{name}() takes one second operand (by position or as one of "
            f"{', '.join(keywords)}), got {len(given)}"
        )
    return given[0]


def _binary(name: str, inplace: bool) -> Callable:
    def op(self: Sequence[Tensor], *args: Any, alpha: Any = None, **kw: Any) -> Any:
        tensors = _tensors(self, name)
        others = _per_entry(_second(name, args, kw), len(tensors), "the second operand")
        kw = {} if alpha is None else {"alpha": alpha}
        out = [_call(t, name, inplace, o, **kw) for t, o in zip(tensors, others)]
        return None if inplace else out

    return op


def _ternary(name: str, inplace: bool) -> Callable:
    def op(
        self: Sequence[Tensor], tensor1: Any, tensor2: Any, value: Any = 1, scalars: Any = None
    ) -> Any:
        value = value if scalars is None else scalars
        tensors = _tensors(self, name)
        n = len(tensors)
        a, b = _per_entry(tensor1, n, "tensor1"), _per_entry(tensor2, n, "tensor2")
        values = _per_entry(value.tolist() if isinstance(value, Tensor) else value, n, "value")
        out = [_call(t, name, inplace, x, y, value=v) for t, x, y, v in zip(tensors, a, b, values)]
        return None if inplace else out

    return op


def _lerp(inplace: bool) -> Callable:
    def op(self: Sequence[Tensor], tensors1: Sequence[Tensor], weight: Any) -> Any:
        tensors = _tensors(self, "lerp")
        ends = _per_entry(tensors1, len(tensors), "tensors1")
        weights = _per_entry(weight, len(tensors), "weight")
        out = [_call(t, "lerp", inplace, e, w) for t, e, w in zip(tensors, ends, weights)]
        return None if inplace else out

    return op


def _define(name: str, fn: Callable, doc: str) -> None:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    globals()[name] = fn
    __all__.append(name)


for _name in _UNARY:
    _define(f"_foreach_{_name}", _unary(_name, False), f"``[t.{_name}() for t in self]``.")
    _define(f"_foreach_{_name}_", _unary(_name, True), f"``t.{_name}_()`` for each ``t``.")
for _name in _BINARY:
    _define(f"_foreach_{_name}", _binary(_name, False), f"``t.{_name}(other)`` for each entry.")
    _define(f"_foreach_{_name}_", _binary(_name, True), f"``t.{_name}_(other)`` for each entry.")
for _name in _TERNARY:
    _define(f"_foreach_{_name}", _ternary(_name, False), f"``t.{_name}(t1, t2, value=v)`` each.")
    _define(f"_foreach_{_name}_", _ternary(_name, True), f"``t.{_name}_(t1, t2, value=v)`` each.")
_define("_foreach_lerp", _lerp(False), "``t.lerp(end, weight)`` for each entry.")
_define("_foreach_lerp_", _lerp(True), "``t.lerp_(end, weight)`` for each entry.")


def _foreach_zero_(self: Sequence[Tensor]) -> None:
    """Set every tensor to zero in place."""
    for t in _tensors(self, "zero_"):
        t.zero_()


def _foreach_copy_(
    self: Sequence[Tensor], src: Sequence[Tensor], non_blocking: bool = False
) -> None:
    """``t.copy_(s)`` for each pair."""
    tensors = _tensors(self, "copy_")
    for t, s in zip(tensors, _per_entry(src, len(tensors), "src")):
        t.copy_(s)


def _foreach_norm(self: Sequence[Tensor], ord: Any = 2, dtype: Any = None) -> list[Tensor]:  # noqa: A002
    """Each tensor's vector norm (a list of 0-d tensors), as ``torch.linalg.vector_norm``."""
    from gt.linalg import vector_norm  # noqa: PLC0415 - gt.linalg imports the tensor layers

    return [vector_norm(t, ord, dtype=dtype) for t in _tensors(self, "norm")]


__all__ += ["_foreach_zero_", "_foreach_copy_", "_foreach_norm"]
