"""The gradient hooks of tensors (``register_hook``, ``register_post_accumulate_grad_hook``) and
the handle that removes them; the backward walk (:mod:`gt.backprop`) runs them."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gt import guards
from gt.runtime.ops import Past

if TYPE_CHECKING:
    from gt.grad_graph import Node
    from gt.tensor import Tensor

#: Hooks of leaf tensors by ``id``: a leaf has no node to keep them (computed tensors keep theirs
#: in ``Node.hooks``); an entry goes when its tensor does.
_LEAF_HOOKS: dict[int, list[Callable]] = {}
#: ``register_post_accumulate_grad_hook`` hooks of leaves by ``id`` (kept as the leaf hooks are).
_POST_ACCUMULATE_HOOKS: dict[int, list[Callable]] = {}


class RemovableHandle:
    """What ``register_hook`` (and a module's ``register_forward_hook`` ...) returns: ``remove()``
    unregisters the hook; removing twice is harmless.

    Args:
        hooks: where the hook is kept: a list of hooks, or a dict keyed by ``key``.
        key: the hook itself (a list) or its key (a dict).
    """

    def __init__(self, hooks: list | dict, key: Any):
        self._hooks = hooks
        self._key = key

    @property
    def id(self) -> int:
        """The hook's key in its table (PyTorch's handle id)."""
        key = self._key
        return key if type(key) is int else id(key)

    def remove(self) -> None:
        """Unregister the hook."""
        if isinstance(self._hooks, dict):
            if self._hooks.pop(self._key, None) is not None:
                guards.bump()
        elif self._key in self._hooks:
            self._hooks.remove(self._key)
            guards.bump()

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def new_args_kwargs(result: Any, what: str) -> tuple:
    """A pre-hook's ``(new_args, new_kwargs)`` (a module's forward pre-hook with kwargs, an
    optimizer's step pre-hook), checked as PyTorch checks it."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(
            f"{what} must return None or a tuple of (new_args, new_kwargs), but got {result}."
        )
    return result


def register_hook(t: Tensor, hook: Callable) -> RemovableHandle:
    """Call ``hook(grad)`` whenever a gradient with respect to ``t`` is computed; a hook that
    returns a tensor replaces the gradient (what ``.grad``, later hooks and the rest of the walk
    see). See :meth:`gt.Tensor.register_hook`."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not callable(hook):
        raise TypeError(f"register_hook: the hook must be callable, got {type(hook).__name__}")
    node = t._node
    if node is not None:
        if node.hooks is None:
            node.hooks = []
        hooks = node.hooks
    else:
        hooks = _leaf_list(_LEAF_HOOKS, t)
    hooks.append(hook)
    guards.bump()  # a captured step (gt.hot) that ran without this hook must be captured again
    return RemovableHandle(hooks, hook)


def register_post_accumulate_grad_hook(t: Tensor, hook: Callable) -> RemovableHandle:
    """Call ``hook(t)`` after a backward pass has accumulated ``t.grad`` (a leaf only); what it
    returns is ignored. See :meth:`gt.Tensor.register_post_accumulate_grad_hook`."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._node is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not callable(hook):
        raise TypeError(f"the hook must be callable, got {type(hook).__name__}")
    hooks = _leaf_list(_POST_ACCUMULATE_HOOKS, t)
    hooks.append(hook)
    guards.bump()
    return RemovableHandle(hooks, hook)


def _leaf_list(table: dict[int, list[Callable]], t: Tensor) -> list[Callable]:
    """The hooks of leaf ``t`` in ``table`` (an entry made on first use, gone with ``t``)."""
    key = id(t)
    hooks = table.get(key)
    if hooks is None:
        hooks = table[key] = []
        weakref.finalize(t, table.pop, key, None)
    return hooks


def _run_hooks(hooks: list[Callable] | None, g: Tensor) -> Tensor:
    for hook in list(hooks or ()):
        new = hook(g)
        if new is not None:
            if tuple(getattr(new, "shape", ())) != tuple(g.shape) or not hasattr(new, "_conn"):
                raise RuntimeError(
                    f"hook {getattr(hook, '__name__', hook)!r} returned a gradient of shape "
                    f"{list(getattr(new, 'shape', []))} for a tensor of shape {list(g.shape)}"
                )
            g = new
    return g


def run_post_hooks(node: Node, hooks: list, in_grads: tuple, g: Tensor) -> tuple:
    """``node.register_hook`` hooks: each sees the inputs' gradients (``None`` where an input
    needs none) and ``(g,)``; a tuple one returns replaces the inputs' gradients."""
    grads = tuple(
        [
            None if p is None else (pg.grad.mT if type(pg) is Past else pg)
            for p, pg in zip(node.parents, in_grads)
        ]
    )
    for hook in list(hooks):
        out = hook(grads, (g,))
        if out is not None:
            out = tuple(out)
            if len(out) != len(grads):
                name = getattr(hook, "__name__", type(hook).__name__)
                raise RuntimeError(
                    f"hook '{name}' has returned an incorrect number of values (got {len(out)}, "
                    f"but expected {len(grads)})"
                )
            grads = out
    return grads
