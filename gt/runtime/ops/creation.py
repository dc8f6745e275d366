"""Registry entries: tensors made on the worker from attributes alone (no tensor inputs).

Random tensors are drawn from the seed the client put in ``attrs`` (see ``gt.manual_seed``) with
one generator on every backend: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC'11), a counter-based generator written here with unsigned integer array arithmetic
on ``xp``. NumPy and CuPy compute the same 32-bit words from the same seed, so ``rand`` and
``randint`` give identical bits on every backend and any number of workers; ``randn`` (Box–Muller)
is identical up to the last bit or two of ``log``/``sin``/``cos``, which NumPy and CUDA round
differently. Values are drawn in the target dtype: float32 from 24-bit uniforms, float64 from
53-bit ones, float16/bfloat16 uniforms exactly in their own precision (normals for them are
computed in float32 and rounded, since Box–Muller in 8- or 11-bit precision would be useless);
nothing is drawn in float64 and cast.

Word ``i`` of a draw is word ``i % 4`` of the Philox block with counter ``i // 4`` under the key
``seed``; so any range of a tensor can be drawn on its own by counter offset.
"""

from __future__ import annotations

import math
from typing import Any

from gt.runtime.ops.base import Op, Shape, attr_shape, first_dtype

# Philox4x32's multipliers and Weyl key increments (Random123).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = 0xFFFFFFFF
ROUNDS = 10


def philox4x32(
    xp: Any, counter: Any, key: int, high: tuple[int, int] = (0, 0), rounds: int = ROUNDS
) -> tuple:
    """Philox4x32 blocks for the counters ``counter`` (a uint64 array of block numbers: the two
    low words of the 128-bit counter; ``high`` gives the other two) under the 64-bit ``key``.

    Returns:
        The four 32-bit output words of every block, as uint64 arrays (values below 2**32).
    """
    u64 = xp.uint64
    mask = u64(_MASK)
    c0 = counter & mask
    c1 = counter >> u64(32)
    c2 = xp.full(counter.shape, int(high[0]) & _MASK, dtype=u64)
    c3 = xp.full(counter.shape, int(high[1]) & _MASK, dtype=u64)
    p = xp.empty_like(c0)
    m0, m1, s32 = u64(_M0), u64(_M1), u64(32)
    k0, k1 = key & _MASK, (key >> 32) & _MASK
    mul, shr, band, bxor = xp.multiply, xp.right_shift, xp.bitwise_and, xp.bitwise_xor
    # In place, into five buffers (large temporaries would cost more in page faults than the
    # arithmetic). One round: (c0, c1, c2, c3) <- (hi(c2*M1)^c1^k0, lo(c2*M1),
    # hi(c0*M0)^c3^k1, lo(c0*M0)), the 32x32->64 products in one uint64 multiply each.
    for _ in range(rounds):
        mul(c0, m0, out=p)
        shr(p, s32, out=c0)  # hi0
        band(p, mask, out=p)  # lo0
        bxor(c0, c3, out=c0)
        bxor(c0, u64(k1), out=c0)  # the new c2
        c3, p = p, c3  # the new c3 is lo0
        mul(c2, m1, out=p)
        shr(p, s32, out=c2)  # hi1
        band(p, mask, out=p)  # lo1
        bxor(c2, c1, out=c2)
        bxor(c2, u64(k0), out=c2)  # the new c0
        c1, p = p, c1  # the new c1 is lo1
        c0, c2 = c2, c0
        k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return c0, c1, c2, c3


def random_words(xp: Any, n: int, seed: int, offset: int = 0) -> Any:
    """Words ``offset .. offset + n - 1`` of the stream of ``seed``: a uint64 array of 32-bit
    values (see the module docstring for the layout)."""
    first, last = offset // 4, (offset + n + 3) // 4
    blocks = philox4x32(xp, xp.arange(first, last, dtype=xp.uint64), _key(seed))
    words = xp.stack(blocks, axis=1).reshape(-1)
    start = offset - 4 * first
    return words[start : start + n]


def _key(seed: int) -> int:
    return int(seed) & ((1 << 64) - 1)


def _blocks(xp: Any, n_blocks: int, seed: int) -> tuple:
    return philox4x32(xp, xp.arange(n_blocks, dtype=xp.uint64), _key(seed))


def _uniform(xp: Any, w: Any, dtype: Any, bits: int) -> Any:
    """``k * 2**-bits`` for the top ``bits`` bits ``k`` of each 32-bit word (``w`` is consumed):
    exact in ``dtype``, in [0, 1)."""
    xp.right_shift(w, xp.uint64(32 - bits), out=w)
    u = w.astype(dtype)
    return xp.multiply(u, xp.asarray(2.0**-bits, dtype=dtype), out=u)


def _uniform53(xp: Any, hi: Any, lo: Any) -> Any:
    """float64 uniforms in [0, 1) from two words each (27 + 26 bits, NumPy's recipe)."""
    a = (hi >> xp.uint64(5)).astype(xp.float64)
    b = (lo >> xp.uint64(6)).astype(xp.float64)
    a *= 67108864.0
    a += b
    a *= 1.0 / 9007199254740992.0
    return a


def _bits_of(dtype_name: str) -> int:
    """Mantissa bits a uniform in ``dtype_name`` carries exactly."""
    return {"float16": 11, "bfloat16": 8}.get(dtype_name, 24)


def _interleave(xp: Any, cols: list, n: int, dtype: Any) -> Any:
    """Columns ``cols[j]`` (one value per block) as the flat stream ``b * len(cols) + j``."""
    out = xp.empty((cols[0].shape[0], len(cols)), dtype=dtype)
    for j, c in enumerate(cols):
        out[:, j] = c
    return out.reshape(-1)[:n]


def draw_rand(xp: Any, n: int, seed: int, dtype_name: str, dtype: Any) -> Any:
    """``n`` uniforms in [0, 1) of ``dtype``: element ``i`` from word ``i`` (float64: words
    ``2i`` and ``2i + 1``)."""
    if dtype_name == "float64":
        x = _blocks(xp, (n + 1) // 2, seed)
        return _interleave(xp, [_uniform53(xp, x[0], x[1]), _uniform53(xp, x[2], x[3])], n, dtype)
    x = _blocks(xp, (n + 3) // 4, seed)
    if dtype_name in ("float32", "float16", "bfloat16"):
        cols = [_uniform(xp, w, dtype, _bits_of(dtype_name)) for w in x]
    else:
        cols = [_uniform(xp, w, xp.float32, 24).astype(dtype) for w in x]
    return _interleave(xp, cols, n, dtype)


def _box_muller(xp: Any, u1: Any, u2: Any, work: Any) -> tuple:
    """Two standard normals from two uniforms in [0, 1), in place on the uniforms' buffers."""
    # 1 - u1 is in (0, 1]: log never sees 0.
    xp.subtract(xp.asarray(1.0, dtype=work), u1, out=u1)
    xp.log(u1, out=u1)
    xp.multiply(u1, xp.asarray(-2.0, dtype=work), out=u1)
    xp.sqrt(u1, out=u1)  # r
    xp.multiply(u2, xp.asarray(2.0 * math.pi, dtype=work), out=u2)  # theta
    s = xp.sin(u2)
    xp.cos(u2, out=u2)
    xp.multiply(u2, u1, out=u2)
    xp.multiply(s, u1, out=s)
    return u2, s


def draw_randn(xp: Any, n: int, seed: int, dtype_name: str, dtype: Any) -> Any:
    """``n`` standard normals of ``dtype`` (Box–Muller): elements ``2j, 2j + 1`` from words
    ``2j, 2j + 1`` (float64: from words ``4j .. 4j + 3``, two per uniform)."""
    if dtype_name == "float64":
        x = _blocks(xp, (n + 1) // 2, seed)
        z = _box_muller(xp, _uniform53(xp, x[0], x[1]), _uniform53(xp, x[2], x[3]), xp.float64)
        return _interleave(xp, list(z), n, dtype)
    x = _blocks(xp, (n + 3) // 4, seed)
    f32 = xp.float32
    cols = [*_box_muller(xp, _uniform(xp, x[0], f32, 24), _uniform(xp, x[1], f32, 24), f32),
            *_box_muller(xp, _uniform(xp, x[2], f32, 24), _uniform(xp, x[3], f32, 24), f32)]  # fmt: skip
    # float16/bfloat16: computed in float32, rounded once when written.
    return _interleave(xp, cols, n, dtype)


def draw_randint(xp: Any, n: int, seed: int, low: int, high: int, dtype: Any) -> Any:
    """``n`` integers in ``[low, high)``: element ``i`` from 64 bits (words ``2i``, ``2i + 1``)
    reduced modulo the range (a bias below ``(high - low) / 2**64``)."""
    span = int(high) - int(low)
    if span <= 0:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    x = _blocks(xp, (n + 1) // 2, seed)
    s32, m = xp.uint64(32), xp.uint64(span)
    cols = []
    for hi, lo in ((x[0], x[1]), (x[2], x[3])):
        xp.left_shift(hi, s32, out=hi)
        xp.bitwise_or(hi, lo, out=hi)
        xp.remainder(hi, m, out=hi)
        k = hi.astype(xp.int64)  # wraps past 2**63; + low wraps back into range
        if low:
            xp.add(k, xp.asarray(int(low), dtype=xp.int64), out=k)
        cols.append(k)
    return _interleave(xp, cols, n, dtype)


# ----------------------------------------------------------------------------- shapes, kernels
def _arange_shape(shapes: list, attrs: Any) -> Shape:
    return (max(0, math.ceil((attrs["stop"] - attrs["start"]) / attrs["step"])),)


def _eye_shape(shapes: list, attrs: Any) -> Shape:
    m = attrs.get("m")
    return (int(attrs["n"]), int(attrs["n"] if m is None else m))


def _dtype(be: Any, name: str) -> Any:
    """The backend's dtype for ``name`` (it refuses bfloat16 where it cannot compute in it)."""
    resolve = getattr(be, "dtype", None)
    return resolve(name) if resolve is not None else name


def _k_full(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.full(tuple(at["shape"]), v[0], dtype=_dtype(be, at["dtype"]))


def _k_arange(be: Any) -> Any:
    xp = be.xp

    def arange(v: Any, at: Any) -> Any:
        dtype = _dtype(be, at["dtype"])
        if xp.dtype(dtype).kind not in "fc":
            return xp.arange(at["start"], at["stop"], at["step"], dtype=dtype)
        # PyTorch's values: start + i * step in double, then rounded (NumPy's float32 arange
        # steps by a rounded increment: arange(0, 1, 0.1)[9] was 0.90000004, not 0.9f)
        n = _arange_shape([], at)[0]
        return (xp.arange(n, dtype=xp.float64) * at["step"] + at["start"]).astype(dtype)

    return arange


def _k_eye(be: Any) -> Any:
    xp = be.xp
    return lambda v, at: xp.eye(at["n"], at["m"], dtype=_dtype(be, at["dtype"]))


def _k_random(kind: str) -> Any:
    def make(be: Any) -> Any:
        xp = be.xp

        def h(v: list, at: dict) -> Any:
            shape = tuple(at["shape"])
            n = math.prod(shape)
            name = at["dtype"]
            dt = _dtype(be, name)
            if kind == "randn":
                r = draw_randn(xp, n, at["seed"], name, dt)
            elif kind == "rand":
                r = draw_rand(xp, n, at["seed"], name, dt)
            else:
                r = draw_randint(xp, n, at["seed"], at["low"], at["high"], dt)
            return r.reshape(shape)

        return h

    return make


def _create(name: str, code: int, kernel: Any, shape: Any = attr_shape, arity: int = 0,
            doc: str = "") -> Op:  # fmt: skip
    return Op(name, code, kind="create", arity=arity, shape=shape, dtype=first_dtype,
              kernel=kernel, doc=doc)  # fmt: skip


ENTRIES: list[Op] = [
    _create("full", 2, _k_full, arity=1, doc="attrs.shape filled with the immediate argument"),
    _create("arange", 3, _k_arange, _arange_shape, doc="attrs.start:stop:step"),
    _create("eye", 4, _k_eye, _eye_shape, doc="identity of attrs.n rows, attrs.m columns"),
    _create("randn", 5, _k_random("randn"), doc="standard normal, from attrs.seed (Philox)"),
    _create("rand", 6, _k_random("rand"), doc="uniform in [0, 1), from attrs.seed (Philox)"),
    _create("randint", 7, _k_random("randint"), doc="integers in [attrs.low, attrs.high)"),
]
