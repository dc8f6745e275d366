"""Views that share their base's value, both ways, as PyTorch's views share storage.

GT's tensors are values (a worker may hold a view's array apart from its base's), so PyTorch's
shared storage is kept by the client. A view made by basic indexing (ints, slices, ``None``,
``...``), a reshape (``view``, ``flatten``, ``squeeze`` ...), a permutation, ``diagonal()`` or
``detach()`` remembers its *root* (weakly: the tensor that is not itself such a view) and the
*steps* that see the root as the view (``x.t()[2]``: transpose, then index), and the root
remembers its live views. Intermediate views need not stay alive: ``x.t()[2].fill_(7)`` changes
``x``.

* **View to root.** After an in-place op on the view, its new value is written into the root
  (recorded for autograd like the in-place op itself: ``root[key] = view``, the reshape or
  permutation undone, through the intermediate steps): ``x[0].zero_()``,
  ``m.view(-1).index_add_(...)``, ``w.t().mul_(2)``, ``x[:, 1][2] = 5`` change ``x``.
* **Root to views.** After an in-place change of the root (directly, or written back by one of
  its views), each of its other live views takes the root's new value seen through its steps
  (recorded when grad mode is on, so the view's history is rebased on the root's, as PyTorch
  rebases it). The view's version counts the change, so a backward that saved the view's old
  value raises, as PyTorch's shared version counter makes it raise. Outside autograd, a write
  into one part (``root[key] = v``, also a view's write-back) leaves the views of parts it does
  not touch as they are (a flat buffer's other parameters, the other colour of a red-black
  sweep): only their versions move. ``x[key] += v`` writes ``x`` once (the view does it).

Broadcasts and windows are views too (``expand``/``broadcast_to``, ``unfold``, ``as_strided`` of a
contiguous tensor, ``view_as_real``/``view_as_complex``, ``conj()``): they follow their root. Where such a
view sees one element of its root more than once, PyTorch refuses most in-place ops on it (not
``fill_``/``zero_``): so does GT (:func:`refuse_overlap`); a change it allows is written into the
root element by element, each root element taking the value of a copy that changed.

A ``detach()`` step shares outside autograd (no graph, no leaf check), as ``root.data`` would,
and so does a ``view(dtype)`` step (the bytes seen as another dtype; never differentiable).
``t_``/``transpose_``/``squeeze_``/``unsqueeze_`` keep the sharing (:func:`regeometry`); a view
stops following when its root is ``resize_``d, or the root is gone; ``x.data =
y`` gives ``x`` a value that its old views do not see and that it shares with ``y`` from then
on (a ``detach()`` step: ``p.data = flat[a:b].view_as(p)`` makes ``p`` a view of ``flat``), as
in PyTorch; an in-place change through ``v.data`` of a view ``v`` reaches ``v``'s root too.
Advanced indexing makes copies, as in PyTorch.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any

from gt._dtype import dtype as as_dtype
from gt.grad_mode import _mode
from gt.indexing import encode_key
from gt.ops import layout

#: Views whose change is being written into their root right now (they already hold the value
#: the root's other views are brought up to).
_writing: list = []
#: Views being brought up to their root's new value (their change must not be written back).
_following: set[int] = set()
#: ``(root, key)`` while ``root[key] = value`` runs: views of other parts need not follow.
parts: list = []
#: Steps that may see one root element more than once (written back element by element).
_OVERLAPPING = frozenset({"expand", "unfold", "strided"})
#: Steps that only pick root elements (so the same steps applied to the root's element numbers
#: say where each of the view's elements sits in its root).
_PICKING = frozenset({"key", "reshape", "perm", "diag", "detach", "expand", "unfold", "strided"})
_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def link(base: Any, view: Any, kind: str, data: Any) -> None:
    """Record that ``view`` is ``base`` seen through ``kind`` (``"key"``: ``base[data]``,
    ``"reshape"``, ``"perm"``: ``base.permute(data)``, ``"diag"``: ``base.diagonal(*data)``,
    ``"detach"``: ``base.detach()``, ``"real"``/``"imag"``: a complex base's part, ``"dtype"``:
    ``base.view(data)``, its bytes seen as dtype ``data``; ``"expand"``: ``base.expand(data)``,
    ``"unfold"``: ``base.unfold(*data)``, ``"strided"``: ``base.as_strided(*data)``,
    ``"as_real"``/``"as_complex"``: ``view_as_real(base)``/``view_as_complex(base)``,
    ``"conj"``: ``base.conj()``)."""
    step = (kind, view.shape if kind == "reshape" else data)
    vb = base._vb
    # (a proxy such as ``p.data`` dies with the expression that made it: held strongly; so is the
    # root of a view that may see an element twice, which a write must reach to change every
    # copy, as ``zeros(3).expand(2, 3)[0, 0] = 1`` does in PyTorch; other roots weakly, so that
    # a view does not keep its root's array alive)
    strong = kind in _OVERLAPPING
    if vb is not None and vb[0]() is not None:  # a view of a view: one more step from the root
        ref, steps, _shape, root_shape = vb
        root = ref()
        if strong and type(ref) is weakref.ref:
            ref = _holding(root)
        view._vb = (ref, (*steps, step), view.shape, root_shape)
    else:
        ref = _holding(base) if base._proxy or strong else weakref.ref(base)
        root = base
        view._vb = (ref, (step,), view.shape, base.shape)
    _register(root._owner if root._proxy else root, view)
    if not _mode.enabled and base._rg and kind != "detach" and kind != "dtype":
        # (PyTorch's view taken under no_grad of a tensor that requires grad requires grad too,
        # and prints so, yet it is a leaf no gradient reaches, and it may not change in place
        # once grad mode is back: see gt.ops.inplace._check_leaf and gt.backprop)
        view._rg = True
        view.__dict__["_nograd_view"] = True


def _holding(root: Any) -> Any:
    return lambda: root


def _register(root: Any, view: Any) -> None:
    vs = root._vs
    if vs is None:
        root._vs = [weakref.ref(view)]
        return
    vs.append(weakref.ref(view))
    n = len(vs)
    if n >= 32 and not n & (n - 1):  # at powers of two: amortised O(1) per view taken
        vs[:] = [r for r in vs if r() is not None]


def unlink(t: Any) -> None:
    """``t`` takes a value of its own (``t.data = y``): its views and its root no longer see it."""
    t._vb = t._vs = None


def regeometry(t: Any, new: Any, take_value: Any) -> bool:
    """``t.t_()``, ``t.transpose_(...)``, ``t.squeeze_()``, ``t.unsqueeze_(...)``: ``t`` takes
    ``new`` (``t`` seen another way, a view of it) and keeps sharing its value as PyTorch's does
    its storage: a view of ``t`` taken before still writes into ``t`` and sees ``t``'s changes.
    A view ``t`` becomes the view of its root that ``new`` is; a root with live views becomes a
    view of a hidden tensor that holds its former value, the root of those views from now on.
    ``False`` where that does not apply (nothing shares ``t``'s value: the caller just takes
    ``new``)."""
    vb = new._vb
    if t._proxy or vb is None:
        return False
    root = vb[0]()
    if root is not t:  # (a live view already: one step further from the same root)
        t._vb = None  # (its value does not change: nothing to write back)
        take_value(t, new)
        if root is not None:
            t._vb, new._vb = vb, None
            _register(root, t)
        return True
    if not (t._vs and any(r() is not None and r() is not new for r in t._vs)):
        return False
    former = t._handle()  # the former value, under the same id (the views' root from now on)
    former.id, former._rg, former._node, former._version = t.id, t._rg, t._node, t._version
    former._st, former._vs, t._vs = t._st, [r for r in t._vs if r() is not new], None
    for r in former._vs:
        v = r()
        if v is not None and v._vb is not None:
            ref = v._vb[0]
            v._vb = (
                weakref.ref(former) if type(ref) is weakref.ref else _holding(former),
                *v._vb[1:],
            )
    t.id, new._vb = None, None  # (so that taking ``new`` frees nothing)
    take_value(t, new)
    t._vb = (_holding(former), vb[1], t.shape, former.shape)
    _register(former, t)
    return True


def as_new(t: Any) -> Any:
    """``t`` as a tensor of its own: no view of anything, row-major (an op whose PyTorch result is
    a new tensor, which GT builds from views: ``repeat`` from a broadcast)."""
    t._vb = None
    t._st = None
    return t


def set_data(t: Any, value: Any, take_value: Any) -> None:
    """``t.data = value``: ``t``'s old views (and its old base) keep the old value, and ``t``
    shares ``value``'s from now on, outside autograd, as PyTorch's ``t`` shares its storage
    (``p.data = flat[a:b].view_as(p)`` makes ``p`` follow and write into ``flat``)."""
    unlink(t)
    take_value(t, value._alias(), False)
    base = value._owner if value._proxy else value
    vb = base._vb
    root = vb[0]() if vb is not None else None
    if base is not t and root is not t:
        link(base, t, "detach", None)


def write_back(t: Any, take_value: Any) -> None:
    """After an in-place change of ``t``: write its value into its root, if it is a view (and
    the change did not come from the root), then bring its own live views up to it
    (``take_value``: :func:`gt.ops.inplace.take_value`, which calls this)."""
    if t._vb is not None and id(t) not in _following:
        _write_into_root(t, take_value)
    owner = t._owner if t._proxy else t
    if owner is not t and owner._vb is not None and id(owner) not in _following:
        enabled = _mode.enabled  # ``view.data.add_(...)``: into the view's root, outside autograd
        _mode.enabled = False
        try:
            _write_into_root(owner, take_value)
        finally:
            _mode.enabled = enabled
    if owner._vs:
        _follow(owner, take_value)


def _root_of(view: Any) -> Any:
    """The view's root if the two still correspond (else the view is unlinked: ``None``)."""
    ref, _steps, shape, root_shape = view._vb
    root = ref()
    if root is None or root.id is None or root is view or view.shape != shape or root.shape != root_shape:  # fmt: skip
        view._vb = None  # (gone, or reshaped in place)
        return None
    return root


def refuse_leaf_root(view: Any) -> None:
    """Raise PyTorch's error if an in-place change of ``view`` would change a leaf that requires
    grad (asked before the change: the view stays as it was, and stays a view)."""
    root = _root_of(view) if view._vb is not None else None
    if root is not None:
        _refuse_leaf(view, root)


def _refuse_leaf(view: Any, root: Any) -> None:
    if _mode.enabled and root.requires_grad and root._node is None and not _outside(view._vb[1]):
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            "operation (wrap it in `with gt.no_grad():`)"
        )


def _write_into_root(view: Any, take_value: Any) -> None:
    root = _root_of(view)
    if root is None:
        return
    _refuse_leaf(view, root)
    steps = view._vb[1]
    detached = _outside(steps)
    _writing.append(view)
    enabled = _mode.enabled
    if detached:  # shared outside autograd, as PyTorch's detach() shares storage
        _mode.enabled = False
    try:
        if any(kind in _OVERLAPPING for kind, _ in steps):
            if all(kind in _PICKING for kind, _ in steps):
                _scatter_into_root(root, view, steps, take_value)
            else:  # (a broadcast seen as real numbers, say: not followed any further)
                view._vb = None
            return
        j = len(steps) - 1
        while j > 0 and steps[j][0] in ("reshape", "detach"):
            j -= 1
        if j < len(steps) - 1 and steps[j][0] == "key":
            # a part seen through reshapes (``p = flat[a:b].view_as(w)``): written in one go
            parent, key = _seen(root, steps[:j]), steps[j][1]
            shape = encode_key(parent, key)[2]
            if view.shape != shape:
                view = view._apply("reshape", [view], {"shape": list(shape)}, shape=shape)
            parent[key] = view
            return
        # the view's parent, seen afresh from the root (a temporary linked to it, whose change
        # then travels on to the root), unless the view is one step from the root
        parent = _seen(root, steps[:-1])
        kind, data = steps[-1]
        if kind == "key":
            parent[data] = view
        elif kind == "diag":
            take_value(parent, parent.diagonal_scatter(view, *data))
        elif kind == "reshape" or kind == "detach":
            take_value(parent, _aliased(view.reshape(parent.shape), view))
        elif kind == "dtype":  # the bytes seen as the parent's dtype again
            take_value(parent, _aliased(view._view_dtype(parent.dtype), view))
        elif kind == "conj":
            take_value(parent, _aliased(view._apply("conj", [view]), view))
        elif kind == "as_real":
            take_value(parent, _aliased(_as_complex(view), view))
        elif kind == "as_complex":
            take_value(parent, _aliased(_as_real(view), view))
        elif kind == "real" or kind == "imag":  # a complex tensor's part: the other part kept
            parts_ = (view, parent.imag) if kind == "real" else (parent.real, view)
            take_value(parent, parent._apply("complex", [p.to(view.dtype) for p in parts_]))
        else:  # "perm": undo the permutation
            inverse = [0] * len(data)
            for i, p in enumerate(data):
                inverse[p] = i
            take_value(parent, _aliased(view.permute(inverse), view))
    finally:
        _mode.enabled = enabled
        _writing.pop()


def _scatter_into_root(root: Any, view: Any, steps: tuple, take_value: Any) -> None:
    """Write a view that may see a root element more than once into its root: each element of
    the view that changed goes to the root element it sees (``fill_`` of a broadcast writes the
    whole root; ``b[0] = v`` of ``b = x.expand(2, 3)`` writes ``x``), the rest is kept."""
    n = root.numel()
    if n == 0:
        return
    numbers = root._arange(n)
    where_at = _seen(numbers.reshape(root.shape), steps)  # the root element each sees
    changed = _differs(view, _seen(root, steps))
    # (one slot past the end takes what did not change, so that only changed copies land)
    spare = root.new_zeros((n + 1,)).scatter(0, numbers, root.reshape(-1))
    dest = where_at.where(changed, n).reshape(-1)
    new = spare.scatter(0, dest, view.reshape(-1).to(root.dtype))[:n].reshape(root.shape)
    take_value(root, _aliased(new, view))


#: Integer dtypes of the floating ones' sizes: a change is told by the bits (``-0.0`` from ``0.0``).
_BITS = {"float16": "int16", "bfloat16": "int16", "float32": "int32", "float64": "int64"}


def _differs(a: Any, b: Any) -> Any:
    """Where ``a`` and ``b`` (same shape and dtype) hold different values, bit for bit."""
    bits = _BITS.get(str(a.dtype).removeprefix("gt."))
    if bits is not None:
        return a._view_dtype(as_dtype(bits)) != b._view_dtype(as_dtype(bits))
    return a != b


def _as_real(t: Any) -> Any:
    return t._apply("view_as_real", [t])


def _as_complex(t: Any) -> Any:
    return t._apply("view_as_complex", [t])


def refuse_overlap(t: Any, key: Any = None, name: str | None = None) -> None:
    """Raise PyTorch's error before an in-place op (other than a fill) writes into ``t`` (or
    ``t[key]``, a basic key) where it sees one element of its root more than once (a stride of 0
    along a dimension longer than 1, as PyTorch tells internal overlap); for the ops PyTorch
    still allows there (``name``: ``masked_fill_``, ``index_fill_``, ``index_put_``, which
    ``x[indices] = v`` is), its deprecation warning instead."""
    vb = t._vb
    if vb is None or not any(kind in _OVERLAPPING for kind, _ in vb[1]):
        return  # (the strides tell, whether or not the root still lives)
    shape, strides = tuple(t.shape), layout.strides_of(t)
    if key is not None and is_basic_key(key):
        shape, strides, _ = layout.key_geometry(shape, strides, key)
    if any(s == 0 and n > 1 for n, s in zip(shape, strides)):
        example = _DEPRECATED.get(name)
        if example is None:
            raise RuntimeError(_OVERLAP_MESSAGE)
        warnings.warn(
            f"Use of {name} on expanded tensors is deprecated. Please clone() the tensor before "
            f"performing this operation. This also applies to advanced indexing e.g. {example}",
            UserWarning,
            stacklevel=_user_level(),
        )


#: In-place ops PyTorch runs on a tensor that sees an element twice, with a warning (and the
#: example its warning gives).
_DEPRECATED = {
    "masked_fill_": "tensor[mask] = scalar",
    "index_fill_": "tensor[mask] = scalar",
    "index_put_": "tensor[indices] = tensor",
}
_GT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_level() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside GT."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_GT_DIR):
        frame, level = frame.f_back, level + 1
    return level - 1


def _aliased(new: Any, view: Any) -> Any:
    """``new``, or -- when it is ``view`` itself (a reshape to the same shape) -- a new handle on
    the same value that carries ``view``'s history, so the tensor that takes it stays in the
    graph (``x.view(-1)[0] = v`` of a 1-d ``x`` cut ``x`` from autograd)."""
    return new if new is not view else recorded_alias(view)


def recorded_alias(t: Any) -> Any:
    """A new handle on ``t``'s value (no copy on the worker), recorded for autograd like a
    reshape: unlike ``t._alias()``, it carries ``t``'s history."""
    return t._apply("reshape", [t], {"shape": list(t.shape)}, shape=t.shape)


def _follow(root: Any, take_value: Any) -> None:
    """Bring every live view of ``root`` (but the ones writing into it) up to its value."""
    part = parts[-1][1] if parts and parts[-1][0] is root else None
    for r in list(root._vs):
        v = r()
        if v is None or v.id is None or v._vb is None:
            continue
        if any(w is v for w in _writing) and not any(k in _OVERLAPPING for k, _ in v._vb[1]):
            continue  # (a view that sees an element twice takes the value written through both)
        src = _root_of(v)
        if src is None:
            continue
        steps = v._vb[1]
        detached = _outside(steps)
        if part is not None and steps[0][0] == "key" and _apart(part, steps[0][1], root.shape):
            # (a flat buffer's other parameters: unchanged, unless a history is to be rebased)
            if detached or not (_mode.enabled and src.requires_grad):
                v._version += 1  # (PyTorch's shared version counter moves)
                continue
        enabled = _mode.enabled
        if detached:
            _mode.enabled = False
        try:
            new = _seen(src, steps)
            _following.add(id(v))
            try:
                take_value(v, _aliased(new, src), not detached)
            finally:
                _following.discard(id(v))
        finally:
            _mode.enabled = enabled
    root._vs[:] = [r for r in root._vs if r() is not None]


def _seen(root: Any, steps: tuple) -> Any:
    """``root`` seen through ``steps`` (``root`` itself for none)."""
    t = root
    for kind, data in steps:
        if kind == "key":
            t = t[data]
        elif kind == "reshape":
            t = t.reshape(data)
        elif kind == "perm":
            t = t.permute(data)
        elif kind == "diag":
            t = t.diagonal(*data)
        elif kind == "real":
            t = t.real
        elif kind == "imag":
            t = t.imag
        elif kind == "dtype":
            t = t._view_dtype(as_dtype(data))
        elif kind == "expand":
            t = t.expand(data)
        elif kind == "unfold":
            t = t.unfold(*data)
        elif kind == "strided":
            t = t.as_strided(*data)
        elif kind == "conj":
            t = t._apply("conj", [t])
        elif kind == "as_real":
            t = _as_real(t)
        elif kind == "as_complex":
            t = _as_complex(t)
    return t


def _outside(steps: tuple) -> bool:
    """Whether a view with these steps shares its root's value outside autograd: a ``detach()``
    step, or a ``view(dtype)`` one (PyTorch's is not differentiable: writes through it, or into
    its root, are not recorded, even for a leaf that requires grad)."""
    return any(kind == "detach" or kind == "dtype" for kind, _ in steps)


def _apart(a: Any, b: Any, shape: tuple) -> bool:
    """Whether basic keys ``a`` and ``b`` of a tensor of ``shape`` select no element in common
    (``False`` where that is not plain: then the view follows, as it always may)."""
    ra, rb = _ranges(a, shape), _ranges(b, shape)
    if ra is None or rb is None:
        return False
    for x, y in zip(ra, rb):
        if not x or not y:
            return True
        xlo, xhi, xst = (x[0], x[-1], x.step) if x.step > 0 else (x[-1], x[0], -x.step)
        ylo, yhi, yst = (y[0], y[-1], y.step) if y.step > 0 else (y[-1], y[0], -y.step)
        if xhi < ylo or yhi < xlo or (xst == yst and (xlo - ylo) % xst):
            return True
    return False


def _ranges(key: Any, shape: tuple) -> list | None:
    """The indices a basic key selects along each dimension (``None``: not worked out)."""
    items = key if type(key) is tuple else (key,)
    if sum(1 for k in items if k is Ellipsis) > 1:
        return None
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    out, d = [], 0
    for k in items:
        if k is None:
            continue
        if k is Ellipsis:
            for _ in range(len(shape) - used):
                out.append(range(shape[d]))
                d += 1
            continue
        if d >= len(shape):
            return None
        n = shape[d]
        if type(k) is int:
            i = k + n if k < 0 else k
            out.append(range(i, i + 1))
        else:
            out.append(range(*k.indices(n)))
        d += 1
    return out + [range(n) for n in shape[d:]]


def is_view_at(t: Any, key: Any, value: Any) -> bool:
    """Whether ``value`` is a live view of ``t`` at ``key``, so that ``t[key] = value`` changes
    nothing: Python runs ``t[key] += v`` as ``view = t[key]; view += v; t[key] = view``, and the
    in-place op has already written the view into ``t``."""
    vb = value._vb
    if vb is None or not is_basic_key(key) or any(w is value for w in _writing):
        return False  # (a view being written back right now is written with ``t[key] = value``)
    own = t._vb
    if own is None:
        if vb[0]() is not t or vb[1] != (("key", key),):
            return False
    elif own[0]() is None or vb[0]() is not own[0]() or vb[1] != (*own[1], ("key", key)):
        return False
    root = _root_of(value)
    if root is None:
        return False
    vs = (root._owner if root._proxy else root)._vs
    return vs is not None and any(r() is value for r in vs)  # (not after the root's ``.data =``)


def is_basic_key(key: Any) -> bool:
    """Whether indexing with ``key`` makes a view in PyTorch (ints, slices, None, Ellipsis)."""
    kind = type(key)
    if kind is int or kind is slice:
        return True
    if kind is not tuple:
        return key is None or key is Ellipsis
    for item in key:
        kind = type(item)
        if not (kind is int or kind is slice or item is None or item is Ellipsis):
            return False
    return True


__all__ = ["as_new", "regeometry", "is_basic_key", "is_view_at", "link", "refuse_overlap", "set_data", "unlink",
           "write_back"]  # fmt: skip
