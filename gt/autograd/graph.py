"""``gt.autograd.graph``: hooks on the tensors a backward pass keeps (``saved_tensors_hooks``,
``save_on_cpu``, ``disable_saved_tensors_hooks``), as ``torch.autograd.graph``.

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

from gt.grad_graph import SAVED_TENSOR_HOOKS

__all__ = ["disable_saved_tensors_hooks", "save_on_cpu", "saved_tensors_hooks"]


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
            return (t.numpy().copy(), t.dtype, t.requires_grad, t._conn)

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
