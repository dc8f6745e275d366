"""Registry entries the worker handles itself: data in and out of the cluster, marks, frees,
placement, and the transfers and collectives between workers that the planner inserts.

These have no kernel: the worker's executor runs ``io`` ops, and ``comm`` ops go to its peer links
(:mod:`gt.runtime.worker.peers`). They show on the timelines like any instruction.
"""

from __future__ import annotations

from gt.runtime.ops.base import Op, attr_shape, first_dtype, same_shape


def _io(name: str, code: int, arity: int | None, doc: str, **kw: object) -> Op:
    return Op(name, code, kind="io", arity=arity, doc=doc, **kw)  # type: ignore[arg-type]


def _comm(name: str, code: int, doc: str) -> Op:
    return Op(name, code, kind="comm", arity=None, doc=doc)


ENTRIES: list[Op] = [
    _io(
        "upload",
        0,
        0,
        "an array the client sent (attrs.buf: a frame; attrs.tok: the data socket)",
        shape=attr_shape,
        dtype=first_dtype,
    ),  # fmt: skip
    _io("fetch", 1, 1, "send the input's data to the client (out is the request id)"),
    _io("mark", 52, 0, "a named point in the stream (no work)"),
    _io("free", 64, 0, "drop attrs.ids here, in program order"),
    _io(
        "place",
        54,
        1,
        "the input, placed by its signal's rule (planner only)",
        shape=same_shape,
        dtype=first_dtype,
    ),  # fmt: skip
    _comm("chunk", 55, "keep block attrs.start:stop of attrs.axis"),
    _comm("send", 56, "send the input to attrs.peer"),
    _comm("recv", 57, "receive from attrs.peer"),
    _comm("bcast", 58, "broadcast from attrs.root over attrs.workers"),
    _comm("scatter", 59, "blocks of the root's tensor, one per worker"),
    _comm("gather", 60, "the workers' blocks joined on the root"),
    _comm("all_gather", 61, "the workers' blocks joined on every worker"),
    _comm("all_reduce", 62, "the workers' parts combined (attrs.op) on every worker"),
    _comm("reduce_scatter", 63, "the workers' parts combined, one block per worker"),
    _io(
        "hot_define",
        82,
        0,
        "store a client's captured step (attrs: plan, steps, inputs, temps, "
        "outs; gt.runtime.worker.hot)",
    ),
    _io("hot", 83, None, "replay captured step attrs.plan on these inputs into attrs.outs"),
]
