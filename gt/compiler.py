"""``gt.compile`` and ``gt.compiler``: PyTorch's compiler entry points, mapped onto GT's hot paths.

GT does not compile Python to kernels. What it does instead is *capture and replay*: a function
called again and again with the same ops, shapes and dtypes is recorded once and from then on sent
to the worker as one small instruction per call (see :mod:`gt.hotpath`). ``gt.compile(fn)`` is
``gt.hot(fn)`` with one precaution: a function whose results carry a gradient graph not yet
backpropagated (a forward whose loss is backpropagated outside it) keeps running eagerly, because replayed results come back
detached. Anything a replay cannot repeat falls back to eager, correctly.
"""

from __future__ import annotations

import functools
from typing import Any

from gt.hot_calls import carries_graph, signature
from gt.hotpath import HotFunction
from gt.nn.module import Module
from gt.tensor import TensorBase

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "reset",
]


def compile(  # (torch.compile's name)
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> Any:
    """``torch.compile``: capture-and-replay for functions, the module itself for modules.

    Usable as ``gt.compile(fn)``, ``@gt.compile`` and ``@gt.compile(mode=...)``. The options are
    accepted and ignored (there is no code generation to tune).

    A plain function (a training step, say) becomes a :class:`CompiledFunction`, which is
    ``gt.hot(fn)``: after two identical calls each call is one instruction. An ``nn.Module`` is
    returned as it is, its ``forward`` eager: a module's forward alone is rarely a whole
    repeated step (the loss, ``backward()`` and the optimizer come after it, outside), and hot
    results are detached, so capturing the forward would cut the graph the backward needs.
    Compile the step function instead to get a replayed step. ``disable=True`` returns ``model``.
    """
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)  # fmt: skip
    if disable or isinstance(model, Module):
        return model
    if not callable(model):
        raise RuntimeError(
            f"compile expects a callable or an nn.Module, got {type(model).__name__}"
        )
    return CompiledFunction(model)


def _has_graph(value: Any) -> bool:
    if isinstance(value, TensorBase):  # a graph backward() has not yet run through (and freed)
        return carries_graph(value)
    if isinstance(value, (tuple, list)):
        return any(_has_graph(v) for v in value)
    if isinstance(value, dict):
        return any(_has_graph(v) for v in value.values())
    return False


class CompiledFunction:
    """A function compiled with :func:`compile`: run eagerly once; then, unless its results
    carry a gradient graph, replayed through ``gt.hot``.

    Attributes:
        fn: the original function (``_orig_mod`` / ``_torchdynamo_orig_callable`` as in torch).
        eager_reason: why it stays eager, or ``None``.
    """

    def __init__(self, fn: Any) -> None:
        functools.update_wrapper(self, fn)
        self.fn = self._torchdynamo_orig_callable = fn
        self._hot = HotFunction(fn, keep_graphs=True)
        self._checked: set = set()  # argument signatures (grad mode included) run once eagerly
        self.eager_reason: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager_reason is not None:
            return self.fn(*args, **kwargs)
        # (each signature's first call decides: one first called under no_grad says nothing of
        # a later call with gradients, whose results a replay would detach)
        sig = signature(args, kwargs)
        if sig is None or sig not in self._checked:
            result = self.fn(*args, **kwargs)
            if _has_graph(result):
                self.eager_reason = "its results carry a gradient graph (backward outside it)"
            elif sig is not None:
                self._checked.add(sig)
            return result
        return self._hot(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def state(self) -> dict:
        """The hot path's state per argument signature (see ``HotFunction.state``)."""
        return self._hot.state


def disable(fn: Any = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """``torch.compiler.disable``: the function unchanged (usable with or without arguments)."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn: Any) -> Any:
    """The function, unchanged."""
    return fn


def assume_constant_result(fn: Any) -> Any:
    """The function, unchanged."""
    return fn


def is_compiling() -> bool:
    """``False``: GT never traces Python code."""
    return False


def is_dynamo_compiling() -> bool:
    """``False``."""
    return False


def is_exporting() -> bool:
    """``False``."""
    return False


def reset() -> None:
    """Nothing to reset (hot paths are per function)."""
