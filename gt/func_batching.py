"""``vmap``'s batched run: the function runs once, on tensors that carry the batch as a hidden
leading dimension, and each instruction it sends is rewritten for the batch.

Python code (GT's ops, autograd, the user's function) sees a mapped argument without its batch
dimension (its *logical* shape, as PyTorch's batching rules show it); on the worker the same id
holds the whole batch, batch first (the *physical* value). While the function runs, the
connection's ``emit`` and ``fetch`` go through :class:`Batching`, which rewrites each instruction
by its primitive's family in the op registry (the ``shard`` families: elementwise, reductions, ops
along an axis, reshape, transpose, expand, concat, matmul, indexing): axes move one to the right,
shapes gain the batch, and operands of a lower rank gain unit dimensions so that broadcasting still
lines up. Autograd needs nothing of its own: backward's instructions are rewritten alike, so
``vmap(grad(f))`` yields per-sample gradients from one batched backward pass.

What it has no rule for, a value the function reads (``.item()``), random numbers, or a change to
a tensor made outside the function raises :class:`~gt.ops.base.Unbatchable` before anything is
sent, and ``vmap`` runs the function once per entry instead: the batched run only saves time, it
never changes a result.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import Any

import numpy as np

from gt import shapes as S
from gt.ops.base import BATCHING, Unbatchable
from gt.runtime import ops as O
from gt.runtime.ops.shape import key_items

_FAMILY = tuple(op.shard for op in O.REGISTRY)
_RANDOM = frozenset(O.OPCODE[n] for n in ("randn", "rand", "randint", "poisson", "standard_gamma"))
#: Random draws of a given shape (no tensor arguments): ``randomness="different"`` draws the
#: batch's at once, ``"same"`` one for every entry.
_DRAWS = frozenset(O.OPCODE[n] for n in ("randn", "rand", "randint"))
_KEYED_WRITES = frozenset(O.OPCODE[n] for n in ("setitem", "index_add", "scatter_add"))
_RESHAPE, _EXPAND, _MATMUL, _COPY, _ARANGE, _GETITEM = (
    O.OPCODE[n] for n in ("reshape", "expand", "matmul", "copy", "arange", "getitem")
)
_SLICE_ALL = ["s", None, None, None]
_FETCH = O.OPCODE["fetch"]
#: Ops that treat each entry of their first dim on its own (sliding windows over [N, C, ...]).
_PER_ROW = frozenset(
    O.OPCODE[n]
    for n in ("im2col", "col2im", "max_pool", "max_pool_indices", "max_pool_grad", "max_pool_pick")
)
#: Linear algebra of the last two dims: the kernels broadcast the leading ones.
_MATRICES = frozenset(op.code for op in O.REGISTRY if op.name.startswith("linalg_"))
#: How ``vmap`` calls ran: ``batched``, ``per_entry``, and why the last per-entry one was not
#: batched (for tests and for a user who wonders; the results are the same either way).
RUNS: dict[str, Any] = {"batched": 0, "per_entry": 0, "why": ""}


class Batching:
    """The rewriting of one batched run (a context manager that installs it on ``conn``).

    Args:
        conn: the client connection every tensor of the run belongs to.
        n: the batch size.
        known: ``id -> (shape, dtype)`` of tensors made before the run that the function may use
            (its unmapped arguments, the modules and tensors it closes over).
    """

    def __init__(self, conn: Any, n: int, known: dict, randomness: str = "error") -> None:
        self.conn, self.n, self.known, self.randomness = conn, n, known, randomness
        self.created: dict[int, tuple] = {}  # tensors made during the run: id -> (shape, dtype)
        self.batched: dict[int, tuple] = {}  # id -> logical shape (its value has the batch first)
        self._temps: list[int] = []
        self._thread = get_ident()  # (another thread's instructions are not the function's)

    def __enter__(self) -> Batching:
        if BATCHING or "emit" in vars(self.conn):
            raise Unbatchable("already batching")
        self._emit, self._fetch = self.conn.emit, self.conn.fetch
        self.conn.emit, self.conn.fetch = self.emit, self.fetch
        BATCHING.append(self.created)
        return self

    def __exit__(self, *exc: Any) -> None:
        BATCHING.clear()
        del self.conn.emit, self.conn.fetch  # the class's own methods again

    # ------------------------------------------------------------------ bookkeeping
    def mark(self, tid: int, logical: tuple) -> None:
        """Say that ``tid`` holds a batch of values of shape ``logical``."""
        self.batched[tid] = tuple(logical)

    def _info(self, tid: Any) -> tuple | None:
        if type(tid) is not int:
            return None
        got = self.created.get(tid)
        return got if got is not None else self.known.get(tid)

    def _shape(self, tid: Any) -> tuple:
        """Logical shape of a tensor argument, or :class:`Unbatchable` if it is not known."""
        if tid in self.batched:
            return self.batched[tid]
        info = self._info(tid)
        if info is None:
            raise Unbatchable("a tensor whose shape the batched run does not know")
        return tuple(info[0])

    def _out_shape(self, out: int) -> tuple:
        info = self.created.get(out)
        if info is None:
            raise Unbatchable("an instruction for a tensor made outside the function")
        return tuple(info[0])

    def _temp(self, opcode: int, args: list, attrs: Any) -> int:
        tid = self.conn.new_id()
        self._emit(opcode, tid, args, attrs)
        self._temps.append(tid)
        return tid

    def _reshaped(self, tid: int, shape: list) -> int:
        return self._temp(_RESHAPE, [tid], {"shape": shape})

    def _padded(self, tid: Any, rank: int) -> Any:
        """A batched ``tid`` with unit dimensions after the batch up to logical rank ``rank``."""
        if type(tid) is not int or tid not in self.batched:
            return tid
        s = self.batched[tid]
        if len(s) >= rank:
            return tid
        return self._reshaped(tid, [self.n, *([1] * (rank - len(s))), *s])

    def _spread(self, tid: int) -> int:
        """An unbatched tensor as a (broadcast) batch of copies of itself."""
        s = list(self._shape(tid))
        return self._temp(_EXPAND, [self._reshaped(tid, [1, *s])], {"shape": [self.n, *s]})

    def _send(self, opcode: int, out: int, args: list, attrs: Any, logical: tuple) -> None:
        self._emit(opcode, out, args, attrs)
        self.mark(out, logical)
        for t in self._temps:
            self.conn.free(t)
        self._temps.clear()

    # ------------------------------------------------------------------ the connection's calls
    def fetch(self, tid: int, *more: Any, **kw: Any) -> Any:
        """A read of a value: refused for a batched one (the function's control flow would see
        one entry where it needs all of them)."""
        if tid in self.batched and get_ident() == self._thread:
            raise Unbatchable("the function reads a value (.item(), printing, control flow)")
        return self._fetch(tid, *more, **kw)

    def emit(self, opcode: int, out: int, args: list, attrs: Any = None) -> None:
        """Queue one instruction of the function, rewritten for the batch."""
        if get_ident() != self._thread:
            self._emit(opcode, out, args, attrs)
            return
        if opcode in _RANDOM:
            if opcode in _DRAWS and self.randomness == "different" and out in self.created:
                logical = self._out_shape(out)
                self._send(opcode, out, args, {**attrs, "shape": [self.n, *logical]}, logical)
                return
            if not (opcode in _DRAWS and self.randomness == "same"):
                raise Unbatchable("random numbers (without randomness='same' or 'different')")
        batched = self.batched
        if not any(type(a) is int and a in batched for a in args):
            if out not in self.created and opcode != _FETCH:
                raise Unbatchable(f"{O.op_name(opcode)} into a tensor made outside the function")
            self._emit(opcode, out, args, attrs)
            batched.pop(out, None)  # (a batched tensor given one value for every entry)
            return
        self._temps.clear()
        try:
            if opcode in _KEYED_WRITES:
                self._keyed_write(opcode, out, args, attrs)
                return
            if opcode in _MATRICES:
                rule = Batching._matrices
            elif opcode in _PER_ROW:
                rule = Batching._per_row
            else:
                rule = _RULES.get(_FAMILY[opcode])
            if rule is None:
                raise Unbatchable(f"{O.op_name(opcode)} has no batching rule")
            rule(self, opcode, out, args, attrs)
        except BaseException:
            for t in self._temps:
                self.conn.free(t)
            self._temps.clear()
            raise

    # ------------------------------------------------------------------ rules by family
    def _elementwise(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        logical = self._out_shape(out)
        if out in args and out not in self.batched:  # an in-place op of an unbatched tensor
            self._promote(out)
        self._send(opcode, out, [self._padded(a, len(logical)) for a in args], attrs, logical)

    def _promote(self, tid: int) -> None:
        """Make an unbatched tensor of the function a batch (it is about to take batched
        values in place)."""
        self._emit(_COPY, tid, [self._spread(tid)], None)
        self.mark(tid, self._shape(tid))

    def _reduce(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        (x,) = args
        r = len(self.batched[x])
        at = dict(attrs) if type(attrs) is dict else {}
        axis = at.get("axis")
        if axis is None:  # over every dim: over the flattened entry
            if at.get("keepdims"):
                raise Unbatchable("a reduction over every dim that keeps them")
            x = self._reshaped(x, [self.n, -1])
            at["axis"] = 1
        else:
            if r == 0:
                raise Unbatchable("a reduction of a 0-d tensor over a dim")
            at["axis"] = axis % r + 1 if type(axis) is int else [a % r + 1 for a in axis]
        self._send(opcode, out, [x], at, self._out_shape(out))

    def _along_axis(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        (x,) = args
        r = len(self.batched[x])
        if r == 0:
            raise Unbatchable("an op along a dim of a 0-d tensor")
        at = {**attrs, "axis": attrs["axis"] % r + 1}
        self._send(opcode, out, [x], at, self._out_shape(out))

    def _reshape(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        logical = self._out_shape(out)
        self._send(opcode, out, list(args), {**attrs, "shape": [self.n, *logical]}, logical)

    def _transpose(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        r = len(self.batched[args[0]])
        perm = [0, *(p % r + 1 for p in attrs["perm"])]
        self._send(opcode, out, list(args), {**attrs, "perm": perm}, self._out_shape(out))

    def _expand(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        logical = self._out_shape(out)
        x = self._padded(args[0], len(logical))
        self._send(opcode, out, [x], {**attrs, "shape": [self.n, *logical]}, logical)

    def _concat(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        logical = self._out_shape(out)
        if any(type(a) is not int for a in args):
            raise Unbatchable("concat of a number")
        parts = [a if a in self.batched else self._spread(a) for a in args]
        at = {**attrs, "axis": attrs["axis"] % len(logical) + 1}
        self._send(opcode, out, parts, at, logical)

    def _matmul(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        a, b = args
        n, logical = self.n, self._out_shape(out)
        ro = len(logical)
        if a in self.batched and b in self.batched:
            sa, sb = self.batched[a], self.batched[b]
            if len(sa) == 1 and len(sb) == 1:
                pa, pb = self._reshaped(a, [n, 1, sa[0]]), self._reshaped(b, [n, sb[0], 1])
            elif len(sa) == 1:
                pa, pb = self._reshaped(a, [n, *([1] * (len(sb) - 2)), 1, sa[0]]), b
            elif len(sb) == 1:
                pa, pb = a, self._reshaped(b, [n, *([1] * (len(sa) - 2)), sb[0], 1])
            else:
                m = max(len(sa), len(sb))
                pa, pb = self._padded(a, m), self._padded(b, m)
            direct = len(sa) > 1 and len(sb) > 1
        elif a in self.batched:
            sa = self.batched[a]
            if len(sa) >= 2:
                pa, pb, direct = self._padded(a, max(ro, len(sa))), b, True
            elif ro == 0:
                pa, pb, direct = a, b, True  # [n, k] @ [k] -> [n]
            else:
                pa, pb, direct = self._reshaped(a, [n, *([1] * (ro - 1)), 1, sa[0]]), b, False
        else:
            sb = self.batched[b]
            if len(sb) >= 2:
                pa, pb, direct = a, self._padded(b, max(ro, len(sb))), True
            else:
                pa, pb, direct = a, self._reshaped(b, [n, *([1] * max(ro - 1, 0)), sb[0], 1]), False
        if direct:
            self._send(opcode, out, [pa, pb], attrs, logical)
            return
        prod = self._temp(opcode, [pa, pb], attrs)
        self._send(_RESHAPE, out, [prod], {"shape": [n, *logical]}, logical)

    def _matrices(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        rank = max(len(self._shape(a)) for a in args if type(a) is int)
        self._send(opcode, out, [self._padded(a, rank) for a in args], attrs, self._out_shape(out))

    def _per_row(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        """The batch folded into the op's own first dim (of every argument, an unbatched one
        spread first), and unfolded from its result."""
        logical = self._out_shape(out)
        rows = []
        for x in args:
            s = self.batched[x] if x in self.batched else self._shape(x)
            if not s or not logical:
                raise Unbatchable(f"{O.op_name(opcode)} of a 0-d tensor")
            whole = x if x in self.batched else self._spread(x)
            rows.append(self._reshaped(whole, [self.n * s[0], *s[1:]]))
        res = self._temp(opcode, rows, attrs)
        self._send(_RESHAPE, out, [res], {"shape": [self.n, *logical]}, logical)

    def _getitem(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        x, idx = args[0], list(args[1:])
        key, extra = self._key(attrs["key"], idx, x in self.batched)
        self._send(opcode, out, [x, *extra], {**attrs, "key": key}, self._out_shape(out))

    def _key(self, key: list, idx: list, x_batched: bool) -> tuple[list, list]:
        """A wire key (and its index tensors) that selects, from the batch, each entry's
        ``x[key]`` with the batch first."""
        for t in idx:
            info = self._info(t)
            if info is None or info[1] == "bool":
                raise Unbatchable("an index tensor that may be a mask")
        rest = [it for it in key if it[0] != "i"]  # (integers are applied first, as a view)
        adv = [i for i, it in enumerate(rest) if it[0] in ("l", "t")]
        if adv and adv != list(range(adv[0], adv[-1] + 1)):
            raise Unbatchable("advanced indices apart from each other")
        if not any(t in self.batched for t in idx):
            if not x_batched:
                raise Unbatchable("nothing batched")
            return [_SLICE_ALL, *key], idx
        if adv[0] != 0:
            raise Unbatchable("batched indices after a slice")
        shapes = [np.asarray(it[1]).shape if it[0] == "l" else self._shape(idx[it[1]])
                  for it in rest if it[0] in ("l", "t")]  # fmt: skip
        rank = len(np.broadcast_shapes(*shapes))
        extra = [self._padded(t, rank) for t in idx]
        if not x_batched:
            return key, extra
        first = self._temp(_ARANGE, [], {"start": 0, "stop": self.n, "step": 1, "dtype": "int64"})
        first = self._reshaped(first, [self.n, *([1] * rank)])
        shifted = [["t", it[1] + 1] if it[0] == "t" else it for it in key]
        return [["t", 0], *shifted], [first, *extra]

    def _keyed_write(self, opcode: int, out: int, args: list, attrs: Any) -> None:
        """``setitem``, ``index_add``, ``scatter_add``: ``[x, value, *index tensors]``."""
        x, value, idx = args[0], args[1], list(args[2:])
        logical = self._out_shape(out)
        if x not in self.batched:
            if out == x:
                self._promote(x)
            else:
                x = self._spread(x)
        key, extra = self._key(attrs["key"], idx, True)
        if type(value) is int and value in self.batched:
            xs = self.batched.get(x) or logical
            sel = S.index_shape(xs, key_items(attrs["key"], [self._shape(t) for t in idx]))
            value = self._padded(value, len(sel))
        self._send(opcode, out, [x, value, *extra], {**attrs, "key": key}, logical)


_RULES: dict[Any, Callable[..., None]] = {
    "elementwise": Batching._elementwise,
    "reduce": Batching._reduce,
    "along_axis": Batching._along_axis,
    "reshape": Batching._reshape,
    "transpose": Batching._transpose,
    "expand": Batching._expand,
    "concat": Batching._concat,
    "matmul": Batching._matmul,
    "getitem": Batching._getitem,
}


# ---------------------------------------------------------------------- the batched run
def _known_tensors(roots: list) -> dict:
    """``id -> (shape, dtype)`` of the tensors a function may use: in its arguments, in what it
    closes over or names as globals (modules' parameters and buffers, containers), a few levels
    deep. A tensor missed here only makes an op that needs its shape unbatchable."""
    from gt.nn.module import Module
    from gt.tensor import Tensor

    known: dict[int, tuple] = {}
    seen: set[int] = set()
    todo = [(r, 0) for r in roots]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > 6:
            continue
        seen.add(id(obj))
        if isinstance(obj, Tensor):
            if obj.id is not None:
                known[obj.id] = (tuple(obj.shape), obj.dtype)
        elif isinstance(obj, Module):
            todo.extend((t, depth) for t in (*obj.parameters(), *obj.buffers()))
            todo.extend((v, depth + 1) for v in vars(obj).values()
                        if isinstance(v, (Tensor, list, tuple, dict)))  # fmt: skip
        elif isinstance(obj, (list, tuple)):
            todo.extend((v, depth + 1) for v in obj)
        elif isinstance(obj, dict):
            todo.extend((v, depth + 1) for v in obj.values())
        elif callable(obj):
            inner = getattr(obj, "__func__", obj)  # a bound method: its function and its object
            if inner is not obj:
                todo.append((getattr(obj, "__self__", None), depth + 1))
            for attr in ("func", "args", "keywords", "__wrapped__"):  # functools.partial, wraps
                if attr in getattr(inner, "__dict__", {}) or hasattr(type(inner), attr):
                    todo.append((getattr(inner, attr, None), depth + 1))
            code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
            for cell in cells or ():
                try:
                    todo.append((cell.cell_contents, depth + 1))
                except ValueError:  # an empty cell
                    pass
            if code is not None:
                glob = getattr(inner, "__globals__", {})
                todo.extend((glob[n], depth + 1) for n in code.co_names if n in glob)
                todo.extend((c, depth + 1) for c in code.co_consts if hasattr(c, "co_names"))
        elif hasattr(obj, "co_names"):  # a nested function's code: the globals it names
            pass
    return known


def run_batched(func: Callable, args: tuple, kwargs: dict, dims: tuple, out_dims: Any, n: int,
                leaves: Callable, rebuild: Callable, randomness: str = "error",
                leaf_dims: Callable | None = None) -> Any:  # fmt: skip
    """``vmap(func)(*args)`` as one batched run (see the module's docstring). ``dims``: per
    argument, the mapped dim of each of its tensors (None: not mapped); ``leaf_dims(result,
    out_dims)``: the same for the results.

    Raises:
        Unbatchable: it cannot be (nothing was sent that changes a tensor the caller holds).
    """
    from gt.grad_mode import is_grad_enabled
    from gt.ops.typeinfo import Size
    from gt.tensor import Tensor

    mapped = [(t, d) for a, ds in zip(args, dims) for t, d in zip(leaves(a), ds) if d is not None]
    conn = mapped[0][0]._conn
    everything = [t for a in (*args, *kwargs.values()) for t in leaves(a)]
    if any(t._conn is not conn for t in everything):
        raise Unbatchable("tensors of several connections")
    if is_grad_enabled() and any(t.requires_grad for t, _ in mapped):
        raise Unbatchable("mapped inputs that require grad (the results must connect to them)")
    known = _known_tensors([func, list(args), kwargs])
    handles: dict[int, Tensor] = {}
    for t, d in mapped:  # each entry's value, batch first, under a handle of the entry's shape
        if id(t) in handles:
            continue
        d = d % max(t.ndim, 1)
        phys = t.detach() if d == 0 else t.detach().movedim(d, 0)
        h = phys._alias()
        h.shape = Size(tuple(t.shape[:d]) + tuple(t.shape[d + 1 :]))
        handles[id(t)] = h
        known[h.id] = (tuple(h.shape), h.dtype)
    new_args = [a if all(d is None for d in ds) else
                rebuild(a, [t if d is None else handles[id(t)] for t, d in zip(leaves(a), ds)])
                for a, ds in zip(args, dims)]  # fmt: skip
    with Batching(conn, n, known, randomness) as b:
        for h in handles.values():
            b.mark(h.id, tuple(h.shape))
        result = func(*new_args, **kwargs)
        outs = leaves(result)
        if not outs or _count_leaves(result) != len(outs):
            raise Unbatchable("results that are not all tensors")
        if is_grad_enabled() and any(t.requires_grad for t in outs):
            raise Unbatchable("results that require grad")
        batched = dict(b.batched)
    od = leaf_dims(result, out_dims) if leaf_dims is not None else [out_dims] * len(outs)
    made: dict[int, Tensor] = {}
    final = []
    for t, d in zip(outs, od):
        if d is None:  # (not mapped: the one value, as it is)
            if t.id in batched:
                raise Unbatchable("out_dims=None for a result that differs by entry")
            final.append(t)
            continue
        if id(t) in made:
            phys = made[id(t)]
        elif t.id in batched:
            phys = Tensor(conn, t.id, (n, *t.shape), t.dtype)
            t.id = None  # the result owns the value now
            made[id(t)] = phys
        else:  # the same for every entry
            phys = t.detach().unsqueeze(0).expand(n, *t.shape).contiguous()
            made[id(t)] = phys
        final.append(phys if d == 0 else phys.movedim(0, d))
    return rebuild(result, final)


def _count_leaves(tree: Any) -> int:
    if isinstance(tree, (tuple, list)):
        return sum(_count_leaves(x) for x in tree)
    if isinstance(tree, dict):
        return sum(_count_leaves(v) for v in tree.values())
    return 1
