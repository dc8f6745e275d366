"""Instructions the placement planner treats specially, and how a signal's rule becomes a layout.

* creation (``full``, ``randn`` ..., ``upload``) lands where the signal's rule, or auto-shard, says;
  a sharded random tensor is drawn whole from the same seed on each worker and cut, so its values
  never depend on the layout;
* ``place`` (``gt.signal.tensor``) moves an existing tensor to its signal's layout;
* ``fetch`` of a sharded tensor gathers it on the home worker (into a temporary) first.
"""

from __future__ import annotations

from collections.abc import Callable

from gt.runtime import ops as O
from gt.runtime.sharding.config import resolve_workers
from gt.runtime.sharding.layout import (
    LOCAL,
    PARTIAL,
    REPL,
    Layout,
    Step,
    TensorInfo,
    local,
    repl,
    satisfies,
    shard_even,
)
from gt.runtime.sharding.relayout import move
from gt.runtime.sharding.shapeinfer import nbytes

_FETCH, _UPLOAD, _PLACE, _CHUNK, _FULL = (
    O.OPCODE[n] for n in ("fetch", "upload", "place", "chunk", "full")
)
Shape = tuple[int, ...]


def rule_for(signals: dict, key: tuple | None) -> tuple[str | None, dict | None]:
    """The signal name and config rule for an interned signal key ``(name, backward, is_bwd)``.

    Forward keys use their own rule; backward keys use the context's ``backward=`` name, else the
    config's ``backward`` entry for the forward signal, else none (gradients follow their inputs).
    """
    if key is None:
        return None, None
    name, bwd, is_bwd = key[0], key[1], key[2]
    if is_bwd:
        name = bwd or (signals.get(name) or {}).get("backward")
        if name is None:
            return None, None
    return name, signals.get(name)


def note_axis_fit(fits: dict[str, list[int]], name: str | None, rule: dict, shape: Shape) -> None:
    """Count, for a signal whose rule shards an axis, whether a tensor of ``shape`` made under it
    has that axis (``fits``: :attr:`ClientPlacement.axis_fits`)."""
    if name is None or rule["kind"] != "shard":
        return
    f = fits.get(name)
    if f is None:
        f = fits[name] = [0, 0, 0]
    nd = len(shape)
    f[0] += 1
    f[1] += -nd <= rule["axis"] < nd
    f[2] = max(f[2], nd)


def rule_layout(rule: dict | None, shape: Shape, alive: list[int], strict: bool) -> Layout | None:
    """The layout a rule asks for a tensor of ``shape`` (``None``: no opinion).

    Raises:
        ValueError: (``strict`` only) the rule shards an axis the tensor does not have.
    """
    if rule is None or rule["kind"] == "none":
        return None
    ws = resolve_workers(rule["workers"], alive)
    if not ws:
        return None
    nd = len(shape)
    if rule["kind"] == "replicate":
        return repl(ws)
    if rule["kind"] == "stage" and len(ws) == 1:
        return local(ws[0])
    axis = rule["axis"] if rule["kind"] == "shard" else 0
    if not -nd <= axis < nd:
        if strict:
            raise ValueError(f"axis {axis} is out of range for a tensor of shape {list(shape)}")
        return None
    axis %= nd
    if len(ws) == 1 or shape[axis] < 2:
        return repl(ws) if shape[axis] <= 1 else local(ws[0])
    return shard_even(shape, axis, ws)


def auto_target(settings: dict, shape: Shape | None, dtype: str, alive: list[int]) -> Layout | None:
    """Auto-shard: a large new tensor is split on axis 0 over every live worker."""
    if not settings["auto_shard"] or shape is None or not shape or shape[0] < 2 or len(alive) < 2:
        return None
    if nbytes(shape, dtype) < settings["auto_shard_min_bytes"]:
        return None
    return shard_even(shape, 0, tuple(sorted(alive)))


class SpecialOps:
    """Creation, ``gt.signal.tensor`` and ``fetch``: a mixin of :class:`Placement`."""

    config: dict
    _set: Callable[..., TensorInfo]

    def _create(self, s: Step) -> None:
        """A new tensor: where its signal's rule (or auto-shard) says, else on the home worker."""
        p, code, attrs, src, shape = s.p, s.code, s.attrs, s.src, s.shape
        target = None
        if shape is not None:
            if s.rule is not None:
                # (as for computed tensors: one whose rank the rule does not fit -- a bias, a
                # mask made inside a layer's signal -- stays on its home worker; only
                # ``gt.signal.tensor`` of such a tensor is an error, since it was asked for)
                target = rule_layout(s.rule, shape, s.alive, False)
                note_axis_fit(s.c.axis_fits, s.name, s.rule, shape)
            elif s.name is None or s.name not in self.config["signals"]:
                target = auto_target(self.config["settings"], shape, s.dtype, s.alive)
        home = s.c.home
        if code == _UPLOAD or target is None or target == local(home):
            p.add(home, code, s.out, s.args, attrs, src)
            info = self._set(s, s.out, local(home))
            if target is not None and target != local(home):
                size = nbytes(shape, s.dtype)
                info.layout, _ = move(p, s.out, local(home), target, size, src, True, exact=True)
            return
        if target.kind in (LOCAL, REPL):
            for w in target.workers:
                p.add(w, code, s.out, s.args, attrs, src)
        else:
            self._create_sharded(s, target)
        self._set(s, s.out, target)

    @staticmethod
    def _create_sharded(s: Step, target: Layout) -> None:
        p, code, attrs, src = s.p, s.code, s.attrs, s.src
        starts = target.starts()
        for i, w in enumerate(target.workers):
            if code == _FULL:
                shape = list(s.shape)
                shape[target.axis] = target.sizes[i]
                p.add(w, code, s.out, s.args, {**attrs, "shape": shape}, src)
            else:  # draw the whole tensor from the same seed, keep this worker's block
                tmp = p.tmp()
                p.add(w, code, tmp, s.args, attrs, src)
                block = {
                    "axis": target.axis,
                    "start": starts[i],
                    "stop": starts[i] + target.sizes[i],
                }
                p.add(w, _CHUNK, s.out, [tmp], block, src)
                p.free_now(w, [tmp], src)
        p.moves["chunk"] += len(target.workers)

    def _place(self, s: Step) -> None:
        """``gt.signal.tensor(t, name)``: move an existing tensor to its signal's layout."""
        c, p, tid, attrs = s.c, s.p, s.out, s.attrs
        info = c.tensors.get(tid)
        given = (
            tuple(attrs["shape"])
            if type(attrs) is dict and type(attrs.get("shape")) is list
            else None
        )
        if info is None:
            dtype = attrs.get("dtype", "float32") if type(attrs) is dict else "float32"
            info = c.tensors[tid] = TensorInfo(given, dtype, local(c.home))
        elif info.shape is None and given is not None:
            info.shape = given
        if s.rule is None or info.shape is None:
            return
        try:
            target = rule_layout(s.rule, info.shape, s.alive, True)
        except ValueError as exc:
            p.errors.append([f"gt.signal.tensor(..., {s.name!r}): {exc}", _PLACE, s.src])
            return
        if target is not None and not satisfies(info.layout, target):
            size = nbytes(info.shape, info.dtype)
            info.layout, _ = move(p, tid, info.layout, target, size, s.src, True, exact=True)

    def _fetch(self, s: Step) -> None:
        """A fetch of a placed tensor: combined or gathered on the home worker first."""
        c, p, req, args, attrs, src = s.c, s.p, s.out, s.args, s.attrs, s.src
        home = c.home
        tid = args[0] if args else None
        info = c.tensors.get(tid) if type(tid) is int else None
        if info is None or info.layout == local(home):
            p.add(home, _FETCH, req, args, attrs, src)
            return
        lay = info.layout
        nb = nbytes(info.shape, info.dtype)
        if lay.kind == PARTIAL:
            lay, _ = move(p, tid, lay, Layout(REPL, lay.workers), nb, src, True)
            info.layout = lay
        if lay.kind in (LOCAL, REPL):
            w = home if home in lay.workers else lay.workers[0]
            p.add(w, _FETCH, req, [tid], attrs, src)
            return
        _, ids = move(p, tid, lay, local(home), nb, src, False)
        p.add(home, _FETCH, req, [ids[home]], attrs, src)
