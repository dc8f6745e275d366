"""``gt.autograd.graph``: hooks on the tensors a backward pass keeps (``saved_tensors_hooks``,
``save_on_cpu``, ``disable_saved_tensors_hooks``, ``allow_mutation_on_saved_tensors``), hooks on
several tensors' gradients at once (``register_multi_grad_hook``), ``increment_version`` and the
graph's ``Node`` class, as ``torch.autograd.graph``.

Inside ``saved_tensors_hooks(pack, unpack)``, every op recorded for autograd passes each tensor it
keeps for backward through ``pack``, and backward gets it back through ``unpack`` when the op's
derivative needs it. The in-place check of saved tensors (the version counter) does not apply to
packed ones. ``save_on_cpu`` keeps them in this process's memory instead of the worker's: each
pack is a fetch (a sync point) and each unpack an upload, so it trades time for worker memory,
as PyTorch's trades it for GPU memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gt.grad_graph import SAVED_TENSOR_HOOKS, Node

__all__ = [
    "Node",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "increment_version",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]


class saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """A context in which tensors saved for backward go through ``pack_hook`` and come back
    through ``unpack_hook`` (which must return a tensor with the original's value)."""

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        SAVED_TENSOR_HOOKS.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc: Any) -> None:
        SAVED_TENSOR_HOOKS.pop()


class save_on_cpu(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """Keep the tensors saved for backward in this process's memory (NumPy arrays) rather than on
    the worker; ``pin_memory`` and ``device_type`` are accepted as in PyTorch."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(t: Any) -> Any:
            return (t._host().copy(), t.dtype, t.requires_grad, t._conn)

        def unpack(packed: Any) -> Any:
            from gt.tensor import upload  # noqa: PLC0415 - the tensor module imports this package

            array, dtype, rg, conn = packed
            out = upload(conn, np.ascontiguousarray(array))
            return out.to(dtype) if out.dtype != dtype else out

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """A context in which saved-tensor hooks may not be used: recording an op that saves tensors
    under an enclosing ``saved_tensors_hooks`` raises ``RuntimeError(error_message)``."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> disable_saved_tensors_hooks:
        SAVED_TENSOR_HOOKS.append(self.error_message)
        return self

    def __exit__(self, *exc: Any) -> None:
        SAVED_TENSOR_HOOKS.pop()


class allow_mutation_on_saved_tensors(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """A context in which a tensor saved for backward may be changed in place afterwards:
    backward uses the value it had when it was saved (PyTorch clones it when it is changed; GT
    keeps a copy of each tensor saved inside the context, which gives the same gradients)."""

    def __init__(self) -> None:
        def pack(t: Any) -> Any:
            from gt.grad_mode import no_grad  # noqa: PLC0415 - the tensor module imports this package

            with no_grad():
                return t.detach().clone()

        super().__init__(pack, lambda t: t)


def increment_version(tensor: Any) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable), as an in-place
    change would: a later backward through a node that saved it then raises."""
    for t in [tensor] if hasattr(tensor, "_conn") else tensor:
        t._version += 1


class _MultiHandle:
    """What :func:`register_multi_grad_hook` returns: ``remove()`` unregisters every hook."""

    def __init__(self, handles: tuple) -> None:
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def register_multi_grad_hook(tensors: Any, fn: Callable, *, mode: str = "all") -> _MultiHandle:
    """Call ``fn`` once per backward pass that computes a gradient of any of ``tensors``.

    ``mode="all"``: ``fn(grads)`` after the pass, ``grads`` holding each tensor's gradient in
    order (``None`` for those the pass did not reach). ``mode="any"``: ``fn(grad)`` with the first
    of their gradients the pass computes. What ``fn`` returns is ignored.
    """
    from gt.backprop import WALKS  # noqa: PLC0415 - the autograd engine needs the tensor class
    from gt.grad_hooks import register_hook  # noqa: PLC0415

    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    tensors = tuple(tensors)
    seen: dict[int, Any] = {}  # id(walk) -> the grads so far (mode "all") or True ("any")

    def hook_for(i: int) -> Callable:
        def hook(grad: Any) -> None:
            walk = WALKS[-1] if WALKS else None
            key = id(walk)
            if mode == "any":
                if key not in seen:
                    seen[key] = True
                    if walk is not None:
                        walk.at_end.append(lambda: seen.pop(key, None))
                    fn(grad)
                return
            grads = seen.get(key)
            if grads is None:  # the first of this pass: fn runs when the pass is done
                grads = seen[key] = [None] * len(tensors)
                if walk is not None:
                    walk.at_end.append(lambda: fn(seen.pop(key)))
            grads[i] = grad if grads[i] is None else grads[i] + grad
            if walk is None:  # (not inside a backward pass: nothing more can come)
                fn(seen.pop(key))

        return hook

    return _MultiHandle(tuple(register_hook(t, hook_for(i)) for i, t in enumerate(tensors)))
