"""Autograd on a tensor: ``requires_grad`` (checked as PyTorch checks it), ``backward``,
``register_hook``, ``detach``, ``retain_grad``, ``is_leaf``, ``grad_fn`` (a :class:`Tensor`
mixin)."""

from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING, Any

from gt import backprop, guards
from gt import shapes as S
from gt.grad_graph import named
from gt.ops import views

if TYPE_CHECKING:
    from gt.tensor import Tensor

_FLOATS = frozenset(S.INEXACT_DTYPES)  # (what can require gradients: floats and complex)
#: PyTorch's warning for reading the ``.grad`` of a computed tensor that does not retain it.
NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information."
)


class AutogradOps:
    """Autograd flags and entry points of :class:`gt.Tensor`."""

    __slots__ = ()

    @property
    def requires_grad(self) -> bool:
        """Whether ops on this tensor are recorded for :meth:`backward`."""
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._node is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if value and self.dtype not in _FLOATS:
            raise RuntimeError(
                f"only Tensors of floating point and complex dtype can require gradients "
                f"(got {self.dtype})"
            )
        if bool(value) != self._rg:
            _changed_grad_flag(self)
        self._rg = bool(value)

    @property
    def is_leaf(self) -> bool:
        """True unless this tensor was computed by a recorded op."""
        return self._node is None

    @property
    def grad(self) -> Tensor | None:
        """The gradient ``backward`` accumulated here (leaves, and tensors that called
        :meth:`retain_grad`), or ``None``. Reading it on another computed tensor warns, as in
        PyTorch: it will never be filled."""
        g = self._grad
        if g is None and self._node is not None and self._node.retain is None:
            warnings.warn(NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if guards.grads_set is not None:  # (a hot function's call is being recorded)
            old = self._grad
            guards.grads_set.append((self, None if old is None else old.id))
        self._grad = value

    @property
    def grad_fn(self) -> Any:
        """The backward node that made this tensor, or ``None`` for leaves (its class named as
        PyTorch's, e.g. ``MulBackward0``)."""
        node = self._node
        return None if node is None else named(node)

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        Args:
            gradient: the gradient of some scalar with respect to ``self``; defaults to 1 for a
                one-element tensor.
            retain_graph: keep the graph so ``backward`` can run through it again (default:
                ``create_graph``).
            create_graph: record the backward pass, so the ``.grad`` tensors can themselves be
                differentiated (higher-order gradients).
            inputs: accumulate only into these tensors' ``.grad``.
        """
        backprop.backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook: Any) -> backprop.RemovableHandle:
        """Call ``hook(grad)`` each time the gradient with respect to this tensor is computed.

        A hook that returns a tensor replaces the gradient: what the rest of the backward pass,
        the leaf's ``.grad`` and later hooks see. Returns a handle whose ``remove()`` unregisters
        it.

        Example:
            >>> h = w.register_hook(lambda g: g.clamp(-1, 1))   # clip this gradient
        """
        return backprop.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Any) -> backprop.RemovableHandle:
        """Call ``hook(self)`` after each backward pass has accumulated this leaf's ``.grad`` (an
        optimizer step in backward, for instance); returns a handle whose ``remove()``
        unregisters it."""
        return backprop.register_post_accumulate_grad_hook(self, hook)

    def detach(self) -> Tensor:
        """A tensor with the same value that is not part of any graph.

        As in PyTorch, it shares the value (:mod:`gt.ops.views`): an in-place op on it
        (``p.grad.detach().copy_(g)``, ``w.detach().mul_(0.5)``) changes ``self`` too, outside
        autograd, even for a leaf that requires grad, and it follows ``self``'s changes.
        """
        out = self._alias()
        out._st = self._st  # (its strides: a transposed tensor's detach is no contiguous one)
        views.link(self, out, "detach", None)
        return out

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` on a leaf, in place; returns ``self``."""
        if requires_grad and self.dtype not in _FLOATS:
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients "
                f"(got {self.dtype})"
            )
        if self._node is not None:
            if not requires_grad:
                raise RuntimeError("you can only change requires_grad flags of leaf variables")
            return self  # a computed tensor that requires grad already: nothing to change
        if bool(requires_grad) != self._rg:
            _changed_grad_flag(self)
        self._rg = bool(requires_grad)
        return self

    def retain_grad(self) -> None:
        """Keep this computed tensor's gradient in ``.grad`` when ``backward`` passes it."""
        if self._node is None:
            if not self._rg:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return  # a leaf gets its .grad anyway
        self._node.retain = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this computed tensor."""
        return self._node is not None and self._node.retain is not None


def _changed_grad_flag(t: Any) -> None:
    """``t.requires_grad`` changes: a captured step (``gt.hot``) that reads ``t`` trained it, or
    did not, and must be captured again (a tensor no capture reads changes nothing)."""
    watched = getattr(t._conn, "_watched", None)
    if watched and t.id in watched:
        guards.bump()
