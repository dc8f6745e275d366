"""The collectives' algorithms on host arrays (what each participant sends, receives and
computes), driven by :mod:`gt.runtime.worker.peers`, which owns the sockets.

Each algorithm takes a *run* (``send(peer, step, arr)``, ``recv(peer, step)``, ``me``, and for a
background all-reduce ``missing(peer, step)``: see ``peers._Run``) and the participant's host
array, and returns its result. Ring all-reduce (reduce-scatter then all-gather: each rank moves
``2 (n-1)/n`` of the data), ring all-gather and reduce-scatter, binomial-tree broadcast, direct
scatter/gather.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.runtime.ops import (
    ALL_GATHER,
    ALL_REDUCE,
    BCAST,
    CHUNK,
    GATHER,
    RECV,
    REDUCE_SCATTER,
    SCATTER,
    SEND,
)

_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _block(x: np.ndarray, axis: int, start: int, stop: int, copy: bool = False) -> np.ndarray:
    """Block ``start:stop`` along ``axis``, contiguous; a copy when it must outlive ``x``."""
    b = x[(slice(None),) * axis + (slice(start, stop),)]
    return np.array(b, order="C", copy=True) if copy else np.ascontiguousarray(b)


def _starts(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += s
    return out


def _send(run: Any, x: Any, at: dict) -> None:
    run.send(at["peer"], 0, x)


def _recv(run: Any, x: Any, at: dict) -> Any:
    return run.recv(at["peer"], 0)


def _bcast(run: Any, x: Any, at: dict) -> Any:
    ws = list(at["workers"])
    n, r = len(ws), ws.index(run.me)
    mask = 1
    while mask < n:
        if r < mask:
            if r + mask < n:
                run.send(ws[r + mask], 0, x)
        elif r < 2 * mask:
            x = run.recv(ws[r - mask], 0)
        mask *= 2
    return x


def _scatter(run: Any, x: Any, at: dict) -> Any:
    ws, root, axis, sizes = list(at["workers"]), at["root"], at["axis"], list(at["sizes"])
    starts = _starts(sizes)
    mine = None
    if run.me == root:
        for i, w in enumerate(ws):
            blk = None if x is None else _block(x, axis, starts[i], starts[i] + sizes[i])
            if w == root:
                mine = None if blk is None else np.array(blk, copy=True)  # x itself may be freed
            else:
                run.send(w, 0, blk)
        return mine if root in ws else None
    return run.recv(root, 0)


def _gather(run: Any, x: Any, at: dict) -> Any:
    ws, root, axis = list(at["workers"]), at["root"], at["axis"]
    if run.me != root:
        run.send(root, 0, x)
        return None
    parts = [x if w == root else run.recv(w, 0) for w in ws]
    return None if run.err else np.concatenate(parts, axis=axis)


def _all_gather(run: Any, x: Any, at: dict) -> Any:
    ws, axis = list(at["workers"]), at["axis"]
    n, r = len(ws), ws.index(run.me)
    nxt, prv = ws[(r + 1) % n], ws[(r - 1) % n]
    have = {r: x}
    for s in range(n - 1):
        run.send(nxt, s, have[(r - s) % n])
        have[(r - s - 1) % n] = run.recv(prv, s)
    return None if run.err else np.concatenate([have[i] for i in range(n)], axis=axis)


def _ring_reduce_scatter(
    run: Any,
    ws: list[int],
    blocks: list,
    op: Any,
    shift: int,
    into: list | None = None,
    pausable: bool = True,
) -> Any:
    """Ring reduce-scatter over ``blocks``; rank r ends holding the reduced block ``(r + shift) % n``.

    At step s rank r sends block ``(r - s + shift - 1) % n`` (raw at step 0, else what it summed at
    step s - 1) and adds what its predecessor sends to block ``(r - s + shift - 2) % n``, writing
    the sum into ``into[i]`` when given (else a new array).
    """
    n, r = len(ws), ws.index(run.me)
    nxt, prv = ws[(r + 1) % n], ws[(r - 1) % n]
    acc: dict[int, Any] = {}
    for s in range(n - 1):
        si, ri = (r - s + shift - 1) % n, (r - s + shift - 2) % n
        out = acc.get(si)
        if out is not None and into is not None and n > 2:
            out = out.copy()  # into[si] is written again later; a zero-copy send must not see that
        run.send(nxt, s, blocks[si] if out is None else out)
        while pausable and run.missing(prv, s):
            yield  # the block is on its way; the caller may compute meanwhile
        got = run.recv(prv, s)
        if got is None or blocks[ri] is None:
            acc[ri] = None
        elif into is not None:
            acc[ri] = op(blocks[ri], got, out=into[ri])
        else:
            acc[ri] = op(blocks[ri], got)
    return acc


def _all_reduce(run: Any, x: Any, at: dict) -> Any:
    steps = all_reduce_steps(run, x, at)
    try:
        while True:
            next(steps)
    except StopIteration as stop:
        return stop.value


def all_reduce_steps(run: Any, x: Any, at: dict) -> Any:
    """Ring all-reduce as a generator; in the background (``run.background``) it pauses where a
    message it needs has not arrived yet, else it runs to its end in one go."""
    ws = list(at["workers"])
    n, r = len(ws), ws.index(run.me)
    op = _REDUCE[at.get("op", "sum")]
    if n == 1:
        return None if x is None else x.copy()
    flat = None if x is None else np.ascontiguousarray(x).reshape(-1)
    size = 0 if flat is None else flat.size
    bounds = [size * i // n for i in range(n + 1)]
    blocks = [None if flat is None else flat[bounds[i] : bounds[i + 1]] for i in range(n)]
    # the result, written piece by piece (pinned on a GPU: it goes back to the device from there)
    res = None if flat is None else run.p.backend.host_empty(flat.shape, flat.dtype)
    pieces = None if res is None else [res[bounds[i] : bounds[i + 1]] for i in range(n)]
    acc = yield from _ring_reduce_scatter(
        run, ws, blocks, op, 1, pieces
    )  # rank r: block (r + 1) % n
    nxt, prv = ws[(r + 1) % n], ws[(r - 1) % n]
    for s in range(n - 1):
        run.send(nxt, n - 1 + s, None if res is None else pieces[(r + 1 - s) % n])
        while run.missing(prv, n - 1 + s):
            yield
        got = run.recv(prv, n - 1 + s)
        if got is not None and pieces is not None:
            pieces[(r - s) % n][...] = got
    if run.err or res is None or acc.get((r + 1) % n) is None:
        return None
    return res.reshape(x.shape)


def _reduce_scatter(run: Any, x: Any, at: dict) -> Any:
    ws = list(at["workers"])
    axis, sizes = at["axis"], list(at["sizes"])
    r = ws.index(run.me)
    op = _REDUCE[at.get("op", "sum")]
    starts = _starts(sizes)
    blocks = [
        None if x is None else _block(x, axis, starts[i], starts[i] + sizes[i])
        for i in range(len(ws))
    ]
    if len(ws) == 1:
        return blocks[0]
    try:  # run the generator to its end: nothing to overlap here
        steps = _ring_reduce_scatter(run, ws, blocks, op, 0, None, False)
        while True:
            next(steps)
    except StopIteration as stop:
        acc = stop.value  # rank r holds block r
    return None if run.err else acc[r]


def _chunk(run: Any, x: Any, at: dict) -> Any:
    return None if x is None else _block(x, at["axis"], at["start"], at["stop"], copy=True)


ALGOS = {
    SEND: _send,
    RECV: _recv,
    BCAST: _bcast,
    SCATTER: _scatter,
    GATHER: _gather,
    ALL_GATHER: _all_gather,
    ALL_REDUCE: _all_reduce,
    REDUCE_SCATTER: _reduce_scatter,
    CHUNK: _chunk,
}
