"""Strides as PyTorch reports them: ``stride()``, ``is_contiguous()`` and the channels-last formats.

A GT worker keeps every array in whatever layout suits its library, so strides are bookkeeping on
the client, kept for what PyTorch code reads: a view that PyTorch makes without copying
(``permute``/``transpose`` and their spellings, ``expand``, basic indexing, ``diagonal``, a
``view`` of one of these where PyTorch's ``view`` would not copy) reports the strides PyTorch's
view would have (``unfold`` too, though GT's windows are copies), ``to``/``contiguous`` with a ``memory_format`` report that format's, and
``contiguous()`` makes a tensor that reports contiguous. Convolutions and batch norm give a
channels-last result for a channels-last input (or, for convolutions, weight), a parameter's
``.grad`` takes the parameter's strides (PyTorch's gradient layout contract), and a deep copy its
original's. Everything else reports the row-major strides of its shape: unlike PyTorch, results
of elementwise ops do not inherit their inputs' layout.

A tensor's ``_st`` slot holds nothing (row-major), a tuple of strides, or a recipe made by a view
op (``("perm", parent's _st, parent's shape, perm)``, ``("expand", ...)``), resolved only when
asked, so views cost their op a tuple.
"""

from __future__ import annotations

from typing import Any

from gt.runtime.ops.base import dense_layout


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides (in elements) of a C-contiguous tensor of ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


def channels_last(shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of ``shape`` with channels (dimension 1) innermost, for 4-d (``channels_last``)
    and 5-d (``channels_last_3d``) shapes; ``None`` for other ranks."""
    if len(shape) not in (4, 5):
        return None
    order = (1, *range(len(shape) - 1, 1, -1), 0)  # innermost first: C, W, H, (D), N
    strides = [0] * len(shape)
    step = 1
    for d in order:
        strides[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(strides)


def resolve(st: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides recorded as ``st`` (see the module's docstring) for a tensor of ``shape``."""
    if st is None:
        return row_major(shape)
    if st[0] == "perm":
        _, parent, parent_shape, perm = st
        base = resolve(parent, parent_shape)
        return tuple(base[p] for p in perm)
    if st[0] == "unfold":  # windows along d: that stride times the step, then d's own stride
        _, parent, parent_shape, d, step = st
        base = resolve(parent, parent_shape)
        return (*base[:d], base[d] * step, *base[d + 1 :], base[d])
    if st[0] == "key":  # basic indexing: ("key", parent's _st, parent's shape, key)
        _, parent, parent_shape, key = st
        return key_geometry(parent_shape, resolve(parent, parent_shape), key)[1]
    if st[0] == "diag":
        _, parent, parent_shape, data = st
        return diag_geometry(parent_shape, resolve(parent, parent_shape), data)[1]
    if st[0] == "view":  # a reshape: PyTorch's view strides, or row-major where it would copy
        _, parent, parent_shape = st
        return view_strides(parent_shape, resolve(parent, parent_shape), shape) or row_major(shape)
    if st[0] == "expand":
        _, parent, parent_shape, new_shape = st
        base = resolve(parent, parent_shape)
        lead = len(new_shape) - len(parent_shape)
        out = [0] * lead
        for i, d in enumerate(parent_shape):
            out.append(base[i] if d == new_shape[lead + i] else 0)
        return tuple(out)
    return st


def key_geometry(shape: tuple, strides: tuple, key: Any) -> tuple[tuple, tuple, int]:
    """The shape and strides of ``x[key]`` (a basic key: ints, slices, ``None``, ``...``) for
    ``x`` of ``shape`` and ``strides``, and how many elements further on it starts."""
    items = key if type(key) is tuple else (key,)
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    sizes: list[int] = []
    out: list[int] = []
    offset, d = 0, 0
    for k in items:
        if k is Ellipsis:
            for _ in range(len(shape) - used):
                sizes.append(shape[d])
                out.append(strides[d])
                d += 1
        elif k is None:  # (unsqueeze's stride: the next dimension's extent, or 1 at the end)
            sizes.append(1)
            out.append(shape[d] * strides[d] if d < len(shape) else 1)
        elif type(k) is int:
            offset += (k + shape[d] if k < 0 else k) * strides[d]
            d += 1
        else:
            picked = range(*k.indices(shape[d]))
            if picked:
                offset += picked.start * strides[d]
            sizes.append(len(picked))
            out.append(strides[d] * picked.step)
            d += 1
    return (*sizes, *shape[d:]), (*out, *strides[d:]), offset


def diag_geometry(shape: tuple, strides: tuple, data: tuple) -> tuple[tuple, tuple, int]:
    """The shape, strides and start of ``x.diagonal(offset, d1, d2)`` (``data``), as
    :func:`key_geometry` gives them."""
    off, d1, d2 = data
    start = off * strides[d2] if off >= 0 else -off * strides[d1]
    n = max(0, min(shape[d1] + min(off, 0), shape[d2] - max(off, 0)))
    rest = [i for i in range(len(shape)) if i not in (d1, d2)]
    return (
        (*(shape[i] for i in rest), n),
        (*(strides[i] for i in rest), strides[d1] + strides[d2]),
        start,
    )


def view_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """The strides ``x.view(new_shape)`` has for ``x`` of ``shape`` and ``strides`` (PyTorch's
    rule: dimensions merge or split only where they are laid out one after another); ``None``
    where PyTorch's ``view`` would refuse (``reshape`` would copy)."""
    if not shape or 0 in shape:
        return row_major(new_shape)
    new = [0] * len(new_shape)
    vd = len(new_shape) - 1
    base = strides[-1]
    t_numel = v_numel = 1
    for td in range(len(shape) - 1, -1, -1):
        t_numel *= shape[td]
        if td == 0 or (shape[td - 1] != 1 and strides[td - 1] != t_numel * base):
            while vd >= 0 and (v_numel < t_numel or new_shape[vd] == 1):
                new[vd] = v_numel * base
                v_numel *= new_shape[vd]
                vd -= 1
            if v_numel != t_numel:
                return None
            if td > 0:
                base = strides[td - 1]
                t_numel = v_numel = 1
    return tuple(new) if vd == -1 else None


def strides_of(t: Any) -> tuple[int, ...]:
    """``t.stride()``."""
    return resolve(t._st, tuple(t.shape))


def matches(strides: tuple[int, ...], want: tuple[int, ...] | None, shape: tuple[int, ...]) -> bool:
    """Whether ``strides`` are ``want`` where it matters (PyTorch ignores dimensions of size 1)."""
    if want is None:
        return False
    return all(s == w for s, w, d in zip(strides, want, shape) if d != 1)


def is_contiguous(t: Any, memory_format: Any = None) -> bool:
    """``t.is_contiguous(memory_format)``."""
    st = t._st
    shape = tuple(t.shape)
    fmt = str.__str__(memory_format) if memory_format is not None else "contiguous_format"
    if fmt in ("contiguous_format", "preserve_format"):
        if st is None or 0 in shape:  # (PyTorch calls every empty tensor contiguous)
            return True
        return matches(resolve(st, shape), row_major(shape), shape)
    if fmt in ("channels_last", "channels_last_3d"):
        if len(shape) != (4 if fmt == "channels_last" else 5):
            return False
        return matches(resolve(st, shape), channels_last(shape), shape)
    raise ValueError(f"is_contiguous: unknown memory format {memory_format!r}")


def formatted(t: Any, memory_format: Any) -> Any:
    """``t`` with the strides of ``memory_format``: ``t`` itself when it has them, else a new
    handle on the same value (recorded for autograd like a reshape)."""
    fmt = str.__str__(memory_format)
    if fmt == "preserve_format":
        return t
    shape = tuple(t.shape)
    if fmt == "contiguous_format":
        if is_contiguous(t):
            return t
        return t._apply("reshape", [t], {"shape": list(shape)}, shape=shape)
    if fmt in ("channels_last", "channels_last_3d"):
        want = channels_last(shape)
        if want is None or len(shape) != (4 if fmt == "channels_last" else 5):
            rank = "4" if fmt == "channels_last" else "5"
            raise RuntimeError(f"required rank {rank} tensor to use {fmt} format")
        if is_contiguous(t, fmt):
            return t
        out = t._apply("reshape", [t], {"shape": list(shape)}, shape=shape)
        out._st = want
        return out
    raise ValueError(f"unknown memory format {memory_format!r}")


def cloned_layout(src: Any, out: Any, memory_format: Any) -> Any:
    """``out``, a copy of ``src``, with the strides ``clone(memory_format=...)`` gives it:
    ``src``'s where they are dense (an expanded view's copy is row-major), or the format's."""
    if memory_format is not None and str.__str__(memory_format) != "preserve_format":
        return formatted(out, memory_format)
    st = src._st
    if st is not None:
        shape, strides = tuple(src.shape), strides_of(src)
        if 0 in strides:  # (an expanded view's copy is row-major)
            return out
        dense = dense_in_order(shape, strides)
        if matches(strides, dense, shape):
            out._st = st
        elif not matches(dense, row_major(shape), shape):  # (a slice's copy is dense, its
            out._st = dense  # dimensions in the same order, as PyTorch's ``empty_like``)
    return out


def like_layout(src: Any, out: Any) -> Any:
    """``out``, a new tensor of ``src``'s shape, with the strides PyTorch's ``empty_like(src)``
    gives it (what ops such as ``flip`` write into): ``src``'s dimensions in the same order,
    dense; row-major where ``src`` is row-major or a broadcast."""
    if src._st is None:
        return out
    shape, strides = tuple(src.shape), strides_of(src)
    if 0 in strides:  # (a broadcast's order is ambiguous: PyTorch's is row-major)
        return out
    dense = dense_in_order(shape, strides)
    if not matches(dense, row_major(shape), shape):
        out._st = dense
    return out


def dense_in_order(shape: tuple, strides: tuple) -> tuple:
    """The strides of a dense tensor of ``shape`` whose dimensions lie in memory in the order
    ``strides`` gives them (largest stride outermost; ties keep their order)."""
    order = sorted(range(len(shape)), key=lambda d: -strides[d])
    out, step = [0] * len(shape), 1
    for d in reversed(order):
        out[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(out)


def restride(t: Any, memory_format: Any) -> None:
    """Give ``t`` itself the strides of ``memory_format`` where its rank has them (what
    ``Module.to(memory_format=...)`` does to parameters)."""
    fmt = str.__str__(memory_format)
    rank = {"channels_last": 4, "channels_last_3d": 5}.get(fmt)
    if fmt == "contiguous_format":
        t._st = None
    elif rank is not None and len(t.shape) == rank:
        t._st = channels_last(tuple(t.shape))


def suggests_channels_last(t: Any) -> bool:
    """Whether ``t`` (4-d or 5-d) has exactly the channels-last strides of its shape (and is not
    also row-major): the layout PyTorch's convolutions and batch norm carry to their result."""
    if t._st is None:
        return False
    shape = tuple(t.shape)
    want = channels_last(shape)
    return want is not None and want != row_major(shape) and resolve(t._st, shape) == want


def keep_channels_last(out: Any, *inputs: Any) -> Any:
    """``out`` with channels-last strides where one of ``inputs`` suggests that layout."""
    if any(x is not None and suggests_channels_last(x) for x in inputs):
        want = channels_last(tuple(out.shape))
        if want is not None:
            out._st = want
    return out


def grad_layout(leaf: Any) -> Any:
    """The ``_st`` a gradient accumulated into ``leaf.grad`` has: ``leaf``'s strides where they
    are non-overlapping and dense (PyTorch's gradient layout contract), else row-major (None)."""
    if leaf._st is None:
        return None
    shape = tuple(leaf.shape)
    return dense_layout(shape, resolve(leaf._st, shape))


def permuted(parent: Any, out: Any, perm: list[int]) -> None:
    """Record that ``out`` is ``parent`` permuted by ``perm`` (PyTorch's view strides)."""
    out._st = ("perm", parent._st, parent.shape, perm)


def viewed(parent: Any, out: Any, kind: str, data: Any) -> None:
    """Record that ``out`` is ``parent[data]`` (``kind`` ``"key"``, a basic key),
    ``parent.diagonal(*data)`` (``"diag"``) or ``parent`` reshaped (``"view"``), with the strides
    PyTorch's view would have. A reshape of a row-major tensor is row-major: nothing recorded."""
    st = parent._st
    if kind == "view":
        if st is not None:
            out._st = ("view", st, parent.shape)
    else:
        out._st = (kind, st, parent.shape, data)


def expanded(parent: Any, out: Any) -> None:
    """Record that ``out`` is ``parent`` broadcast to ``out``'s shape (stride 0 where new)."""
    out._st = ("expand", parent._st, parent.shape, tuple(out.shape))


__all__ = ["channels_last", "cloned_layout", "expanded", "formatted", "grad_layout", "is_contiguous",
           "keep_channels_last", "key_geometry", "like_layout", "diag_geometry", "permuted", "resolve", "restride",
           "row_major", "strides_of", "suggests_channels_last", "view_strides", "viewed"]  # fmt: skip
