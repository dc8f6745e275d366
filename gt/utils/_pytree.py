"""``gt.utils._pytree``: PyTorch's helpers for nested containers ("pytrees") that research code
and libraries import from ``torch.utils._pytree``: :func:`tree_flatten` a tuple/list/dict/namedtuple
nesting into its leaves and a :class:`TreeSpec`, :func:`tree_unflatten` it back, :func:`tree_map`
a function over the leaves. ``None`` is an empty node, as in PyTorch."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "LeafSpec", "TreeSpec", "tree_all", "tree_any", "tree_flatten", "tree_leaves", "tree_map",
    "tree_map_", "tree_map_only", "tree_structure", "tree_unflatten",
]  # fmt: skip


class TreeSpec:
    """The shape of a pytree: a node's type, its context (keys, field names) and its children's
    specs; a leaf's spec has no type."""

    def __init__(self, type: Any, context: Any, children_specs: list[TreeSpec]):  # noqa: A002
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves = sum(c.num_leaves for c in children_specs) if type is not None else 1
        self.num_children = len(children_specs)

    def is_leaf(self) -> bool:
        """Whether this spec stands for one leaf."""
        return self.type is None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TreeSpec)
            and self.type is other.type
            and self.context == other.context
            and self.children_specs == other.children_specs
        )

    def __hash__(self) -> int:
        return hash((self.type, repr(self.context), len(self.children_specs)))

    def __repr__(self) -> str:
        if self.type is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({self.type.__name__}, {self.context}, [{inner}])"


def LeafSpec() -> TreeSpec:  # noqa: N802 - PyTorch's name
    """The spec of one leaf."""
    return TreeSpec(None, None, [])


def _children(node: Any) -> tuple[Any, list, Any] | None:
    """``(type, children, context)`` of a container node, ``None`` for a leaf."""
    t = type(node)
    if node is None:
        return type(None), [], None
    if t is tuple or t is list:
        return t, list(node), None
    if isinstance(node, tuple) and hasattr(node, "_fields"):  # a namedtuple
        return t, list(node), t
    if t is dict or t is OrderedDict:
        return t, list(node.values()), list(node.keys())
    if t is defaultdict:
        return t, list(node.values()), (node.default_factory, list(node.keys()))
    return None


def _rebuild(spec: TreeSpec, children: list) -> Any:
    t = spec.type
    if t is type(None):
        return None
    if t is tuple or t is list:
        return t(children)
    if t is dict or t is OrderedDict:
        return t(zip(spec.context, children))
    if t is defaultdict:
        factory, keys = spec.context
        return defaultdict(factory, zip(keys, children))
    return t(*children)  # a namedtuple


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeSpec]:
    """The leaves of ``tree`` in order, and the spec that :func:`tree_unflatten` rebuilds it from
    (``is_leaf``: what to stop at, though it is a container)."""
    leaves: list = []

    def walk(node: Any) -> TreeSpec:
        got = None if is_leaf is not None and is_leaf(node) else _children(node)
        if got is None:
            leaves.append(node)
            return LeafSpec()
        t, kids, context = got
        return TreeSpec(t, context, [walk(k) for k in kids])

    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> Any:
    """The pytree of ``treespec``'s shape with ``leaves`` in order."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(
            f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
            f"to a pytree that holds {treespec.num_leaves} items ({treespec})."
        )
    it = iter(leaves)

    def build(spec: TreeSpec) -> Any:
        if spec.type is None:
            return next(it)
        return _rebuild(spec, [build(c) for c in spec.children_specs])

    return build(treespec)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of ``tree``, in order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec:
    """The spec of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable, tree: Any, *rests: Any, is_leaf: Callable | None = None) -> Any:
    """``tree`` with each leaf ``x`` replaced by ``func(x, *same leaf of each of rests)`` (the
    other trees must have ``tree``'s shape, or a leaf where ``tree`` has one)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_leaves_like(r, spec, is_leaf) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def _leaves_like(tree: Any, spec: TreeSpec, is_leaf: Callable | None) -> list:
    leaves, other = tree_flatten(tree, is_leaf)
    if other != spec:
        raise ValueError(f"Tree structures do not match: {other} and {spec}")
    return leaves


def tree_map_(func: Callable, tree: Any, *rests: Any, is_leaf: Callable | None = None) -> Any:
    """Call ``func`` on each leaf (and the same leaf of each of ``rests``) for its effect; returns
    ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_leaves_like(r, spec, is_leaf) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def tree_map_only(
    type_or_types: Any, func: Callable, tree: Any, is_leaf: Callable | None = None
) -> Any:
    """:func:`tree_map` of ``func`` over the leaves that are instances of ``type_or_types`` (the
    others stay)."""
    return tree_map(lambda x: func(x) if isinstance(x, type_or_types) else x, tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: Any, is_leaf: Callable | None = None) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_any(pred: Callable[[Any], bool], tree: Any, is_leaf: Callable | None = None) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(pred(x) for x in tree_leaves(tree, is_leaf))
