"""Integer and bit-level algorithms as people write them with tensors in data pipelines, hashing,
sketching, retrieval and compression code: a vectorised sieve, splitmix/murmur/FNV hashing of ids
with logical shifts emulated by masks and wrap-around int64 multiplication, feature hashing with
remainders of negative ids and bucketized crosses, a Bloom filter, count-min sketch and
HyperLogLog, binary codes packed into bytes and searched by Hamming distance, Gray codes, bit
reversal, SWAR popcount and Morton codes, run-length encoding of masks, an LSD radix sort built
from ``bincount`` and ``cumsum``, bit-packed boolean masks, uint8 image arithmetic, an int8 GEMM
with fixed-point requantisation, and CRC-32/Adler-32, modular exponentiation and varints.
Integer results are compared exactly and dtypes by name."""

from __future__ import annotations

import zlib

import numpy as np

from programs import program

M32 = 0xFFFFFFFF


def _s64(c: int) -> int:
    """An unsigned 64-bit constant as the signed int64 that has the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def _srl(x, k: int):
    """Logical right shift of an int64 tensor (``>>`` is arithmetic on signed tensors)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


@program
def ib_sieve_of_eratosthenes(torch):
    """A bool-tensor sieve up to 5000 with strided slice assignment, pi(x) by cumsum, prime gaps,
    twin primes, a Goldbach table, and factorisation with a smallest-prime-factor sieve."""
    n = 5000
    is_prime = torch.ones(n + 1, dtype=torch.bool)
    is_prime[:2] = False
    for p in range(2, int(n**0.5) + 1):
        if is_prime[p]:
            is_prime[p * p :: p] = False
    primes = torch.nonzero(is_prime).flatten()
    pi = torch.cumsum(is_prime.to(torch.int32), dim=0)
    gaps = torch.diff(primes)
    twins = primes[:-1][gaps == 2]

    evens = torch.arange(4, 1001, 2)
    small = primes[primes < 1000]
    q = evens[:, None] - small[None, :]
    ways = ((q >= 2) & is_prime[q.clamp(min=0)] & (q >= small[None, :])).sum(dim=1)

    spf = torch.arange(n + 1)
    for p in primes[primes * primes <= n].tolist():
        multiples = torch.arange(p * p, n + 1, p)
        spf[multiples] = torch.minimum(spf[multiples], torch.tensor(p))
    x = torch.tensor(np.random.default_rng(0).integers(2, n + 1, 64))
    big_omega = torch.zeros_like(x)
    largest = torch.ones_like(x)
    while bool((x > 1).any()):
        f = spf[x]
        active = x > 1
        big_omega += active.long()
        largest = torch.where(active, torch.maximum(largest, f), largest)
        x = torch.where(active, x // f, x)
    return {
        "n_primes": int(primes.numel()),
        "primes_head": primes[:25],
        "primes_tail": primes[-10:],
        "pi_at": pi[torch.tensor([10, 100, 1000, 5000])],
        "pi_dtype": str(pi.dtype),
        "gap_hist": torch.bincount(gaps),
        "max_gap_after": primes[:-1][gaps.argmax()],
        "n_twins": twins.numel(),
        "twins_tail": twins[-5:],
        "goldbach_ways": ways,
        "goldbach_holds": bool((ways > 0).all()),
        "spf_head": spf[:40],
        "big_omega": big_omega,
        "largest_factor": largest,
        "residues_mod_30": torch.unique(primes[primes > 5] % 30),
    }


@program
def ib_splitmix_murmur_fnv_id_hashing(torch):
    """Hashing int64 ids the way embedding-table code does: splitmix64 and murmur3's fmix64 with
    wrap-around multiplication and masked logical shifts, xorshift32 in int64 and in int32, FNV-1a
    over padded byte strings, then buckets by remainder, by mask and by Lemire's multiply-shift."""
    g = np.random.default_rng(1)
    ids = torch.tensor(np.concatenate([
        g.integers(-(2**62), 2**62, 40), [0, 1, -1, 2**63 - 1, -(2**63), 42]
    ]).astype(np.int64))  # fmt: skip

    z = ids + _s64(0x9E3779B97F4A7C15)
    z = (z ^ _srl(z, 30)) * _s64(0xBF58476D1CE4E5B9)
    z = (z ^ _srl(z, 27)) * _s64(0x94D049BB133111EB)
    splitmix = z ^ _srl(z, 31)

    h = ids ^ _srl(ids, 33)
    h = h * _s64(0xFF51AFD7ED558CCD)
    h = h ^ _srl(h, 33)
    h = h * _s64(0xC4CEB9FE1A85EC53)
    fmix = h ^ _srl(h, 33)

    seeds = torch.tensor(g.integers(1, 2**32, 16).astype(np.int64))
    x64 = seeds.clone()
    x32 = (seeds - (seeds >= 2**31).long() * (1 << 32)).to(torch.int32)
    stream64, stream32 = [], []
    for _ in range(12):
        x64 = x64 ^ ((x64 << 13) & M32)
        x64 = x64 ^ (x64 >> 17)
        x64 = x64 ^ ((x64 << 5) & M32)
        x32 = x32 ^ (x32 << 13)
        x32 = x32 ^ ((x32 >> 17) & 0x7FFF)
        x32 = x32 ^ (x32 << 5)
        stream64.append(x64)
        stream32.append(x32)
    stream64 = torch.stack(stream64, 1)
    stream32 = torch.stack(stream32, 1)

    words = ["user", "item", "click", "tensor", "a", "", "hash", "bucketize", "émoji"]
    raw = [w.encode() for w in words]
    width = max(len(b) for b in raw)
    data = torch.tensor(np.array([list(b.ljust(width, b"\0")) for b in raw], dtype=np.uint8))
    lengths = torch.tensor([len(b) for b in raw])
    fnv = torch.full((len(words),), 2166136261, dtype=torch.int64)
    for i in range(width):
        step = ((fnv ^ data[:, i]) * 16777619) & M32
        fnv = torch.where(i < lengths, step, fnv)
    fnv_ref = []
    for b in raw:
        v = 2166136261
        for c in b:
            v = ((v ^ c) * 16777619) & M32
        fnv_ref.append(v)

    n_buckets = 1 << 10
    return {
        "splitmix": splitmix,
        "fmix": fmix,
        "fmix_dtype": str(fmix.dtype),
        "stream64": stream64,
        "stream32": stream32,
        "stream32_dtype": str(stream32.dtype),
        "xorshift_widths_agree": bool(((stream32.long() & M32) == stream64).all()),
        "fnv1a": fnv,
        "fnv1a_matches_python": fnv.tolist() == fnv_ref,
        "bucket_remainder": torch.remainder(fmix, n_buckets),
        "bucket_mask": fmix & (n_buckets - 1),
        "bucket_fmod": torch.fmod(fmix, n_buckets),
        "remainder_equals_mask": bool((fmix % n_buckets == (fmix & (n_buckets - 1))).all()),
        "bucket_lemire": ((splitmix & M32) * 1000) >> 32,
        "bucket_load": torch.bincount(torch.remainder(splitmix, 16), minlength=16),
    }


@program
def ib_feature_hashing_and_bucketized_crosses(torch):
    """The hashing trick with signed ids (Java-style hashCodes are negative half the time):
    ``remainder`` vs ``fmod`` vs ``%``, floor vs trunc division, sign hashing into a sparse
    feature matrix by ``index_put_(accumulate=True)``, and age buckets by ``bucketize`` and
    ``searchsorted`` crossed with hashed categories."""
    g = np.random.default_rng(2)
    n_rows, per_row, n_buckets = 6, 5, 32
    raw = torch.tensor(g.integers(-(2**31), 2**31, (n_rows, per_row)))
    values = torch.tensor(g.uniform(0.5, 2.0, (n_rows, per_row)).astype(np.float32))
    small = torch.tensor([-7, -6, -5, -1, 0, 1, 5, 6, 7])
    divs = {
        "remainder": torch.remainder(small, 3),
        "fmod": torch.fmod(small, 3),
        "percent": small % 3,
        "percent_neg_divisor": small % -3,
        "floor_divide": torch.floor_divide(small, 3),
        "slashslash": small // 3,
        "div_floor": torch.div(small, 3, rounding_mode="floor"),
        "div_trunc": torch.div(small, 3, rounding_mode="trunc"),
        "true_div": small / 3,
        "float_remainder": torch.remainder(small.double() * 0.75, 2.0),
        "float_fmod": torch.fmod(small.double() * 0.75, 2.0),
    }

    bucket = torch.remainder(raw, n_buckets)
    sign = 1 - 2 * (torch.div(raw, n_buckets, rounding_mode="floor") & 1)
    rows = torch.arange(n_rows)[:, None].expand(n_rows, per_row)
    X = torch.zeros(n_rows, n_buckets)
    X.index_put_((rows.reshape(-1), bucket.reshape(-1)), (sign * values).reshape(-1),
                 accumulate=True)  # fmt: skip
    nnz = (X != 0).sum(1)

    ages = torch.tensor([3.0, 17.9, 18.0, 24.0, 25.0, 34.5, 35.0, 47.0, 55.0, 64.9, 65.0, 90.0])
    bounds = torch.tensor([18.0, 25.0, 35.0, 45.0, 55.0, 65.0])
    left = torch.bucketize(ages, bounds)
    right = torch.bucketize(ages, bounds, right=True)
    ss_left = torch.searchsorted(bounds, ages)
    ss_right = torch.searchsorted(bounds, ages, side="right")
    ss_i32 = torch.searchsorted(bounds, ages, right=True, out_int32=True)
    shuffled = torch.tensor([45.0, 18.0, 65.0, 25.0, 55.0, 35.0])
    ss_sorter = torch.searchsorted(shuffled, ages, sorter=torch.argsort(shuffled))
    int_bounds = torch.tensor([0, 10, 100, 1000])
    counts = torch.tensor([[0, 5, 10], [99, 100, 101], [-3, 1000, 5000]])
    count_bucket = torch.bucketize(counts, int_bounds, right=True)

    category = torch.remainder(raw[:, 0], 7)
    age_b = left[:n_rows]
    cross = torch.remainder((age_b * 7 + category) * 2654435761, 1 << 16)
    return {
        **divs,
        "dtypes": [str(v.dtype) for v in divs.values()],
        "bucket": bucket,
        "fmod_negative": int((torch.fmod(raw, n_buckets) < 0).sum()),
        "sign": sign,
        "X": X,
        "nnz": nnz,
        "bucketize_left": left,
        "bucketize_right": right,
        "searchsorted_left": ss_left,
        "searchsorted_right": ss_right,
        "searchsorted_i32": ss_i32,
        "searchsorted_i32_dtype": str(ss_i32.dtype),
        "searchsorted_sorter": ss_sorter,
        "count_bucket": count_bucket,
        "cross": cross,
    }


def _universal(torch, x, a, b, p: int, m: int):
    """``((a * x + b) mod p) mod m`` for every (a, b) row: shape (k, len(x))."""
    return torch.remainder(torch.remainder(a[:, None] * x[None, :] + b[:, None], p), m)


@program
def ib_bloom_filter_count_min_and_hyperloglog(torch):
    """Streaming sketches over a Zipf-like stream of ids: a Bloom filter (bool bits set by
    ``index_put_``), a counting Bloom filter with ``scatter_add_`` inserts and deletes, a
    count-min sketch filled two ways, and a HyperLogLog with ``scatter_reduce(amax)``."""
    g = np.random.default_rng(3)
    p = (1 << 31) - 1
    k, m = 4, 512
    a = torch.tensor(g.integers(1, p, k))
    b = torch.tensor(g.integers(0, p, k))
    members = torch.tensor(g.choice(10**6, 120, replace=False))
    others = torch.tensor(g.integers(10**6, 2 * 10**6, 400))

    bits = torch.zeros(m, dtype=torch.bool)
    bits[_universal(torch, members, a, b, p, m).reshape(-1)] = True
    hit_members = bits[_universal(torch, members, a, b, p, m)].all(dim=0)
    hit_others = bits[_universal(torch, others, a, b, p, m)].all(dim=0)

    counting = torch.zeros(m, dtype=torch.int32)
    idx = _universal(torch, members, a, b, p, m).reshape(-1)
    counting.scatter_add_(0, idx, torch.ones_like(idx, dtype=torch.int32))
    removed = _universal(torch, members[:40], a, b, p, m).reshape(-1)
    counting.index_put_((removed,), torch.full_like(removed, -1, dtype=torch.int32),
                        accumulate=True)  # fmt: skip
    still = (counting[_universal(torch, members, a, b, p, m)] > 0).all(dim=0)

    vocab = 300
    stream = torch.tensor(np.minimum(g.zipf(1.3, 4000), vocab) - 1)
    d, w = 4, 64
    ca = torch.tensor(g.integers(1, p, d))
    cb = torch.tensor(g.integers(0, p, d))
    cols = _universal(torch, stream, ca, cb, p, w)
    table = torch.zeros(d, w, dtype=torch.int64)
    table.scatter_add_(1, cols, torch.ones_like(cols))
    flat = torch.zeros(d * w, dtype=torch.int64)
    flat.index_put_(((torch.arange(d)[:, None] * w + cols).reshape(-1),),
                    torch.ones(cols.numel(), dtype=torch.int64), accumulate=True)  # fmt: skip
    queries = torch.arange(vocab)
    estimate = table.gather(1, _universal(torch, queries, ca, cb, p, w)).min(dim=0).values
    truth = torch.bincount(stream, minlength=vocab)
    over = estimate - truth

    # HyperLogLog with 64 registers over 32-bit hashes
    ids = torch.tensor(g.integers(0, 5000, 3000))
    h = (ids * 2654435761 + 97) % ((1 << 32) - 5)
    reg_idx = h & 63
    rest = h >> 6
    rank = torch.ones_like(rest)
    alive = torch.ones_like(rest, dtype=torch.bool)
    for bit in range(25, -1, -1):
        alive = alive & (((rest >> bit) & 1) == 0)
        rank = rank + alive.long()
    registers = torch.zeros(64, dtype=torch.int64).scatter_reduce(0, reg_idx, rank, reduce="amax")
    harmonic = torch.pow(2.0, -registers.double()).sum()
    hll = 0.709 * 64 * 64 / harmonic
    return {
        "bits_set": int(bits.sum()),
        "no_false_negatives": bool(hit_members.all()),
        "false_positives": int(hit_others.sum()),
        "counting": counting,
        "counting_dtype": str(counting.dtype),
        "still_present": still,
        "kept_members_present": bool(still[40:].all()),
        "table": table,
        "two_ways_agree": bool(torch.equal(table.reshape(-1), flat)),
        "estimate_head": estimate[:20],
        "overestimate_hist": torch.bincount(over),
        "never_under": bool((over >= 0).all()),
        "heavy_hitters": torch.sort(estimate, descending=True, stable=True).indices[:10],
        "registers": registers,
        "hll_estimate": hll,
        "distinct": int(torch.unique(ids).numel()),
    }


@program
def ib_binary_codes_hamming_retrieval(torch):
    """Sign-binarised embeddings packed 8 bits to a uint8 byte (by weights and by shifts), XOR
    against a database, popcount by a 256-entry table and by SWAR on uint8, top-k by a
    tie-free composite key, unpacking, and first-byte bucket occupancy for multi-index hashing."""
    g = np.random.default_rng(4)
    n, q, dim = 200, 6, 64
    db = torch.tensor(g.standard_normal((n, dim)).astype(np.float32))
    noise = torch.tensor(g.standard_normal((q, dim)).astype(np.float32))
    queries = db[torch.tensor([3, 17, 50, 99, 150, 199])] + 0.6 * noise

    db_bits = db > 0
    q_bits = queries > 0
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)
    db_packed = (db_bits.view(n, dim // 8, 8).to(torch.uint8) * weights).sum(-1).to(torch.uint8)
    shifts = torch.arange(7, -1, -1, dtype=torch.uint8)
    q_packed = (q_bits.view(q, dim // 8, 8).to(torch.uint8) << shifts).sum(-1, dtype=torch.uint8)

    lut = torch.tensor([bin(i).count("1") for i in range(256)], dtype=torch.uint8)
    xor = q_packed[:, None, :] ^ db_packed[None, :, :]
    dist = lut[xor.long()].sum(-1)
    x = xor - ((xor >> 1) & 0x55)
    x = (x & 0x33) + ((x >> 2) & 0x33)
    x = (x + (x >> 4)) & 0x0F
    dist_swar = x.sum(-1, dtype=torch.int32)
    dist_bool = (q_bits[:, None, :] != db_bits[None, :, :]).sum(-1)

    key = dist * n + torch.arange(n)
    top = torch.topk(key, 5, largest=False)
    nearest = top.indices
    cos = torch.nn.functional.normalize(queries, dim=1) @ torch.nn.functional.normalize(db, dim=1).T
    true_nn = cos.argmax(dim=1)

    unpacked = ((db_packed[..., None] >> torch.arange(7, -1, -1)) & 1).reshape(n, dim)
    return {
        "db_packed_head": db_packed[:5],
        "q_packed": q_packed,
        "packed_dtypes": [str(db_packed.dtype), str(q_packed.dtype), str(xor.dtype)],
        "dist": dist,
        "dist_dtype": str(dist.dtype),
        "swar_agrees": bool((dist_swar.long() == dist).all()),
        "swar_dtype": str(dist_swar.dtype),
        "bool_agrees": bool(torch.equal(dist_bool, dist)),
        "nearest": nearest,
        "nearest_dist": top.values // n,
        "recall_at_5": int((nearest == true_nn[:, None]).any(dim=1).sum()),
        "unpacked_dtype": str(unpacked.dtype),
        "roundtrip": bool(torch.equal(unpacked.bool(), db_bits)),
        "first_byte_load": torch.bincount(db_packed[:, 0].long(), minlength=256)
        .reshape(16, 16)
        .sum(1),
        "not_bytes": torch.bitwise_not(q_packed[:, :2]),
    }


def _part1by1(x):
    x = (x | (x << 8)) & 0x00FF00FF
    x = (x | (x << 4)) & 0x0F0F0F0F
    x = (x | (x << 2)) & 0x33333333
    return (x | (x << 1)) & 0x55555555


@program
def ib_gray_codes_bit_reversal_popcount_morton(torch):
    """Bit tricks on int32/int64 tensors: Gray code and its prefix-XOR inverse, the FFT
    bit-reversal permutation, SWAR popcount with a wrapping int32 multiply, lowest set bit and
    trailing zeros, next power of two by bit smearing, and Morton (Z-order) codes."""
    n = torch.arange(256)
    gray = n ^ (n >> 1)
    inv = gray.clone()
    shift = 1
    while shift < 8:
        inv = inv ^ (inv >> shift)
        shift <<= 1
    neighbour = gray[1:] ^ gray[:-1]

    bits = 9
    idx = torch.arange(1 << bits)
    rev = torch.zeros_like(idx)
    for i in range(bits):
        rev |= torch.bitwise_left_shift(torch.bitwise_right_shift(idx, i) & 1, bits - 1 - i)
    signal = torch.tensor(np.random.default_rng(5).integers(-100, 100, 1 << bits))

    g = np.random.default_rng(6)
    words = torch.tensor(g.integers(-(2**31), 2**31, 40).astype(np.int32))
    x = words - ((words >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    wrapped = x * 0x01010101
    popcount = (wrapped >> 24) & 0xFF
    popcount_ref = [bin(int(v) & M32).count("1") for v in words.tolist()]

    v = torch.tensor(g.integers(1, 2**40, 30))
    lowest = v & -v
    ctz = torch.zeros_like(v)
    t = lowest - 1
    while bool((t > 0).any()):
        ctz += t & 1
        t = t >> 1
    s = v - 1
    for k in (1, 2, 4, 8, 16, 32):
        s = s | (s >> k)
    next_pow2 = s + 1

    xy = torch.tensor(g.integers(0, 1 << 10, (50, 2)).astype(np.int32))
    morton = _part1by1(xy[:, 0]) | (_part1by1(xy[:, 1]) << 1)
    order = torch.argsort(morton)
    return {
        "gray": gray,
        "inverse_is_identity": bool(torch.equal(inv, n)),
        "one_bit_steps": bool(((neighbour & (neighbour - 1)) == 0).all()),
        "rev": rev[:64],
        "rev_involution": bool(torch.equal(rev[rev], idx)),
        "permuted": signal[rev][:32],
        "popcount": popcount,
        "popcount_dtype": str(popcount.dtype),
        "popcount_matches_python": popcount.tolist() == popcount_ref,
        "wrapped": wrapped,
        "lowest": lowest,
        "ctz": ctz,
        "next_pow2": next_pow2,
        "is_pow2": ((v & (v - 1)) == 0),
        "morton": morton,
        "morton_dtype": str(morton.dtype),
        "z_order": order,
    }


@program
def ib_run_length_encode_decode(torch):
    """Run-length encoding as in COCO masks and token streams: ``unique_consecutive`` with counts
    and inverse on column-major flattened masks, decoding by ``repeat_interleave``, areas and IoU
    from runs, de-duplicating repeated rows, and a vocabulary by ``unique(return_counts=True)``."""
    g = np.random.default_rng(7)
    b, h, w = 3, 10, 12
    field = g.standard_normal((b, h + 2, w + 2))
    smooth = sum(field[:, i : i + h, j : j + w] for i in range(3) for j in range(3))
    masks = torch.tensor(smooth > 0.5)

    encoded, decoded_ok, areas = [], [], []
    for i in range(b):
        flat = masks[i].t().reshape(-1).to(torch.uint8)
        values, counts = torch.unique_consecutive(flat, return_counts=True)
        if values[0] == 1:
            counts = torch.cat([torch.zeros(1, dtype=counts.dtype), counts])
        encoded.append(counts)
        runs_values = torch.arange(counts.numel()) % 2
        decoded = torch.repeat_interleave(runs_values, counts).reshape(w, h).t()
        decoded_ok.append(bool(torch.equal(decoded.bool(), masks[i])))
        areas.append(int(counts[1::2].sum()))
    inter = (masks[0] & masks[1]).sum()
    union = (masks[0] | masks[1]).sum()

    tokens = torch.tensor(np.repeat(g.integers(0, 6, 25), g.integers(1, 4, 25)))
    vals, inverse, counts = torch.unique_consecutive(tokens, return_inverse=True,
                                                     return_counts=True)  # fmt: skip
    restored = torch.repeat_interleave(vals, counts, output_size=tokens.numel())
    rows = torch.tensor([[1, 2], [1, 2], [3, 4], [3, 4], [3, 4], [1, 2], [5, 6]])
    dedup, row_counts = torch.unique_consecutive(rows, return_counts=True, dim=0)
    vocab, vocab_inv, vocab_counts = torch.unique(tokens, sorted=True, return_inverse=True,
                                                  return_counts=True)  # fmt: skip
    padded = torch.repeat_interleave(torch.tensor([7, 8, 9]), 2)
    return {
        "rle": encoded,
        "decoded_ok": decoded_ok,
        "areas": areas,
        "mask_sums": masks.sum(dim=(1, 2)),
        "iou_num_den": [int(inter), int(union)],
        "token_runs": vals,
        "token_counts": counts,
        "token_inverse": inverse,
        "restored_ok": bool(torch.equal(restored, tokens)),
        "longest_run": int(counts.max()),
        "dedup_rows": dedup,
        "row_counts": row_counts,
        "vocab": vocab,
        "vocab_counts": vocab_counts,
        "vocab_inverse_ok": bool(torch.equal(vocab[vocab_inv], tokens)),
        "repeat_scalar": padded,
    }


@program
def ib_lsd_radix_sort_with_bincount(torch):
    """An LSD radix sort of signed int64 keys, 4 bits per pass: digit histograms by ``bincount``,
    bucket starts by ``cumsum``, stable in-bucket ranks from a one-hot cumsum, scatter into place;
    checked against ``torch.sort(stable=True)``; plus counting sort and weighted bincount."""
    g = np.random.default_rng(8)
    n, key_bits = 300, 20
    keys = torch.tensor(g.integers(-(2 ** (key_bits - 1)), 2 ** (key_bits - 1), n))
    keys[10:20] = keys[0]
    biased = keys + (1 << (key_bits - 1))
    order = torch.arange(n)
    cur = biased.clone()
    pass_counts = []
    for shift in range(0, key_bits, 4):
        digit = (cur >> shift) & 0xF
        counts = torch.bincount(digit, minlength=16)
        starts = torch.cumsum(counts, 0) - counts
        onehot = torch.nn.functional.one_hot(digit, 16)
        rank = (torch.cumsum(onehot, 0) - onehot).gather(1, digit[:, None]).squeeze(1)
        pos = starts[digit] + rank
        nxt = torch.empty_like(cur)
        nxt[pos] = cur
        nxt_order = torch.empty_like(order)
        nxt_order.index_copy_(0, pos, order)
        cur, order = nxt, nxt_order
        pass_counts.append(counts)
    radix_sorted = cur - (1 << (key_bits - 1))
    ref = torch.sort(keys, stable=True)

    small = torch.tensor(g.integers(0, 12, 80))
    hist = torch.bincount(small, minlength=12)
    counting_sorted = torch.repeat_interleave(torch.arange(12), hist)
    w32 = torch.tensor(g.uniform(0, 1, 80).astype(np.float32))
    weighted = torch.bincount(small, weights=w32, minlength=12)
    ranks = torch.empty_like(small)
    ranks[torch.argsort(small, stable=True)] = torch.arange(small.numel())
    return {
        "radix_sorted": radix_sorted,
        "matches_sort": bool(torch.equal(radix_sorted, ref.values)),
        "stable_order": order,
        "order_matches_stable_sort": bool(torch.equal(order, ref.indices)),
        "pass_counts": torch.stack(pass_counts),
        "counting_sorted": counting_sorted,
        "counting_ok": bool(torch.equal(counting_sorted, torch.sort(small).values)),
        "weighted": weighted,
        "weighted_dtype": str(weighted.dtype),
        "dense_ranks": ranks,
    }


@program
def ib_bool_mask_bitpacking(torch):
    """Packing bool masks into bytes (little-endian, shift-and-sum over groups of 8) and into
    int64 words whose bit 63 makes the sum wrap negative; set algebra and Jaccard on packed
    bytes; bit test/set/clear in words; and bool tensors with bitwise ops and Python scalars."""
    g = np.random.default_rng(9)
    r, nbits = 6, 64
    masks = torch.tensor(g.random((r, nbits)) < 0.4)
    masks[0, 63] = True
    masks[1] = False
    shifts = torch.arange(8, dtype=torch.uint8)
    packed = (masks.view(r, nbits // 8, 8).to(torch.uint8) << shifts).sum(-1).to(torch.uint8)
    unpacked = ((packed[..., None] >> shifts) & 1).bool().reshape(r, nbits)
    words = (masks.long() << torch.arange(nbits)).sum(-1)

    lut = torch.tensor([bin(i).count("1") for i in range(256)])
    a, b = packed[2], packed[3]
    inter = int(lut[(a & b).long()].sum())
    union = int(lut[(a | b).long()].sum())
    sym = int(lut[(a ^ b).long()].sum())
    complement = ~a

    w = words.clone()
    test63 = (w >> 63) & 1
    test5 = (w >> 5) & 1
    w = w | (1 << 5)
    w = w & ~(1 << 0)
    w = w & ((1 << 63) - 1)
    cleared = w

    m1, m2 = masks[2], masks[3]
    bool_ops = {
        "and": m1 & m2,
        "or": m1 | m2,
        "xor": m1 ^ m2,
        "not": ~m1,
        "logical_xor": torch.logical_xor(m1, m2),
        "and_true": m1 & True,
        "xor_true": m1 ^ True,
        "and_int": m1 & 1,
        "or_int_tensor": torch.bitwise_or(m1, torch.ones(nbits, dtype=torch.int8)),
        "bool_sum": m1 + m2,
        "bool_mul": m1 * m2,
    }
    return {
        "packed": packed,
        "packed_dtype": str(packed.dtype),
        "roundtrip": bool(torch.equal(unpacked, masks)),
        "words": words,
        "popcounts": lut[packed.long()].sum(-1),
        "jaccard_parts": [inter, union, sym],
        "complement": complement,
        "test63": test63,
        "test5": test5,
        "cleared": cleared,
        **{f"bool_{k}": v for k, v in bool_ops.items()},
        "bool_dtypes": [str(v.dtype) for v in bool_ops.values()],
        "any_all": [bool(m1.any()), bool(m1.all()), bool(masks[1].any())],
    }


@program
def ib_uint8_image_saturation_equalisation(torch):
    """uint8 image arithmetic: wrap-around vs saturating brightness (clamp in int16), absolute
    difference, histogram equalisation with ``bincount`` and a cumulative LUT, fixed-point alpha
    blending and grey conversion in int32, a rounded integer box blur, and small-int promotion."""
    g = np.random.default_rng(10)
    img = torch.tensor(g.integers(60, 140, (3, 16, 16)).astype(np.uint8))
    other = torch.tensor(g.integers(0, 256, (3, 16, 16)).astype(np.uint8))

    wrapped = img + 150
    saturated = (img.to(torch.int16) + 150).clamp(0, 255).to(torch.uint8)
    darker = (img.to(torch.int16) - 100).clamp(min=0).to(torch.uint8)
    diff_wrap = img - other
    diff_abs = (img.to(torch.int16) - other.to(torch.int16)).abs().to(torch.uint8)

    equalised = []
    for c in range(3):
        ch = img[c]
        hist = torch.bincount(ch.flatten(), minlength=256)
        cdf = torch.cumsum(hist, 0)
        cdf_min = cdf[cdf > 0][0]
        lut = ((cdf - cdf_min) * 255 // (ch.numel() - cdf_min)).clamp(0, 255).to(torch.uint8)
        equalised.append(lut[ch.long()])
    equalised = torch.stack(equalised)

    alpha = 77
    blend = (img.to(torch.int32) * alpha + other.to(torch.int32) * (256 - alpha) + 128) >> 8
    blend = blend.to(torch.uint8)
    r, gr, bl = img.to(torch.int32).unbind(0)
    grey = ((77 * r + 150 * gr + 29 * bl + 128) >> 8).to(torch.uint8)
    grey_overflowing = (img[0] * 77 + img[1] * 150 + img[2] * 29) >> 8

    padded = torch.nn.functional.pad(grey.to(torch.int32)[None], (1, 1, 1, 1), mode="replicate")[0]
    box = sum(padded[i : i + 16, j : j + 16] for i in range(3) for j in range(3))
    blurred = ((box + 4) // 9).to(torch.uint8)

    s8 = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    u8 = torch.tensor([0, 1, 128, 254, 255], dtype=torch.uint8)
    i16 = torch.tensor([-32768, -1, 0, 1, 32767], dtype=torch.int16)
    i32 = torch.tensor([-(2**31), -1, 0, 1, 2**31 - 1], dtype=torch.int32)
    promos = {
        "u8_plus_s8": u8 + s8,
        "u8_plus_i16": u8 + i16,
        "s8_times_i16": s8 * i16,
        "i16_plus_i32": i16 + i32,
        "u8_times_2": u8 * 2,
        "u8_plus_300": u8 + 300,
        "u8_neg": -u8,
        "s8_neg": -s8,
        "s8_abs": s8.abs(),
        "u8_div_2": u8 / 2,
        "u8_floordiv_2": u8 // 2,
        "u8_plus_half": u8 + 0.5,
        "u8_shift": u8 >> 1,
        "s8_shift": s8 >> 1,
        "i32_plus_1": i32 + 1,
        "i16_times_2": i16 * 2,
        "u8_mul_s8": u8 * s8,
        "u8_sum": u8.sum(),
        "s8_cumsum": s8.cumsum(0),
        "u8_to_s8": u8.to(torch.int8),
        "i32_to_i16": i32.to(torch.int16),
    }
    return {
        "wrapped": wrapped[0, :2],
        "saturated": saturated[0, :2],
        "n_saturated": int((saturated == 255).sum()),
        "darker": darker[1, :2],
        "diff_wrap": diff_wrap[2, :2],
        "diff_abs": diff_abs[2, :2],
        "equalised": equalised,
        "eq_hist_range": [int(equalised.min()), int(equalised.max())],
        "blend": blend[:, :3, :3],
        "grey": grey,
        "grey_overflowing": grey_overflowing[:2],
        "blurred": blurred,
        **promos,
        "promo_dtypes": [str(v.dtype) for v in promos.values()],
    }


@program
def ib_int8_gemm_fixed_point_requantize(torch):
    """A quantised linear layer done as integer kernels do it: uint8 activations with a zero
    point, per-channel int8 weights, int32 accumulation (``matmul`` and a broadcast sum), an int32
    bias, requantisation by a Q31 multiplier from ``frexp`` and a rounding right shift, and the
    int16-accumulator overflow it avoids."""
    g = np.random.default_rng(11)
    x = torch.tensor(g.standard_normal((8, 32)).astype(np.float32))
    w = torch.tensor((g.standard_normal((16, 32)) * 0.2).astype(np.float32))
    bias = torch.tensor((g.standard_normal(16) * 0.1).astype(np.float32))

    xmin, xmax = x.min(), x.max()
    sx = (xmax - xmin) / 255
    zx = torch.round(-xmin / sx).clamp(0, 255).to(torch.int32)
    qx = (torch.round(x / sx) + zx).clamp(0, 255).to(torch.uint8)
    sw = w.abs().amax(dim=1) / 127
    qw = torch.round(w / sw[:, None]).clamp(-127, 127).to(torch.int8)
    qb = torch.round(bias / (sx * sw)).to(torch.int32)

    xa = qx.to(torch.int32) - zx
    acc = xa @ qw.to(torch.int32).T + qb
    acc_bcast = (xa[:, None, :] * qw.to(torch.int32)[None]).sum(-1, dtype=torch.int32) + qb
    acc16 = (qx.to(torch.int16)[:, None, :] * qw.to(torch.int16)[None]).sum(-1, dtype=torch.int16)
    acc_nozp = (qx.to(torch.int32)[:, None, :] * qw.to(torch.int32)[None]).sum(-1)

    y_float = torch.nn.functional.linear(x, w, bias)
    sy = (y_float.max() - y_float.min()) / 255
    zy = int(torch.round(-y_float.min() / sy).clamp(0, 255))
    real = (sx.double() * sw.double()) / sy.double()
    mantissa, exponent = torch.frexp(real)
    q31 = torch.round(mantissa * (1 << 31)).to(torch.int64)
    right = -exponent.to(torch.int64)
    prod = acc.to(torch.int64) * q31
    high = (prod + (1 << 30)) >> 31
    half = torch.bitwise_left_shift(torch.ones_like(right), right - 1)
    scaled = (high + half) >> right
    qy = (scaled + zy).clamp(0, 255).to(torch.uint8)
    ref = (torch.round(acc.double() * real) + zy).clamp(0, 255).to(torch.uint8)
    deq = (qy.to(torch.int32) - zy).float() * sy
    return {
        "zx": zx,
        "qx_head": qx[:2],
        "qw_head": qw[:3],
        "qb": qb,
        "acc": acc,
        "acc_dtype": str(acc.dtype),
        "bcast_agrees": bool(torch.equal(acc, acc_bcast)),
        "acc16": acc16[:2],
        "acc16_dtype": str(acc16.dtype),
        "acc16_wrapped": bool((acc16.to(torch.int64) != acc_nozp).any()),
        "acc16_congruent": bool(((acc16.to(torch.int64) - acc_nozp) % 65536 == 0).all()),
        # (compared as a fraction: its last bits follow the float32 range of y_float, whose
        # product's rounding is the BLAS library's, MKL in PyTorch, OpenBLAS under NumPy)
        "q31": q31.double() / (1 << 31),
        "exponent": exponent,
        "exponent_dtype": str(exponent.dtype),
        "qy": qy,
        "fixed_vs_float_max_diff": int((qy.to(torch.int16) - ref.to(torch.int16)).abs().max()),
        "deq_error": (deq - y_float).abs().max(),
    }


@program
def ib_checksums_modexp_varints(torch):
    """Byte and number-theory kernels: CRC-32 by a 256-entry table over batched messages, Adler-32
    by cumulative sums (both checked against ``zlib``), vectorised modular exponentiation with
    Fermat tests and inverses, base-36 ids, and zigzag + LEB128 varint encoding of signed ids."""
    g = np.random.default_rng(12)
    lengths = [0, 1, 5, 17, 32, 40]
    width = max(lengths)
    msgs = [bytes(g.integers(0, 256, n).astype(np.uint8)) for n in lengths]
    data = torch.tensor(np.array([list(m.ljust(width, b"\0")) for m in msgs], dtype=np.uint8))
    lens = torch.tensor(lengths)

    c = torch.arange(256)
    for _ in range(8):
        c = torch.where((c & 1) == 1, 0xEDB88320 ^ (c >> 1), c >> 1)
    table = c
    crc = torch.full((len(msgs),), M32)
    for i in range(width):
        step = table[(crc ^ data[:, i]) & 0xFF] ^ (crc >> 8)
        crc = torch.where(i < lens, step, crc)
    crc = crc ^ M32

    mod_adler = 65521
    valid = torch.arange(width)[None, :] < lens[:, None]
    running = (1 + torch.cumsum(data.long() * valid, dim=1)) % mod_adler
    a_sum = running[torch.arange(len(msgs)), (lens - 1).clamp(min=0)]
    a_sum = torch.where(lens > 0, a_sum, torch.ones_like(a_sum))
    b_sum = (running * valid).sum(1) % mod_adler
    adler = (b_sum << 16) | a_sum

    def modpow(base, exp, m):
        result = torch.ones_like(base)
        base = base % m
        exp = exp.clone()
        while bool((exp > 0).any()):
            result = torch.where((exp & 1) == 1, result * base % m, result)
            base = base * base % m
            exp = exp >> 1
        return result

    odd = torch.arange(3, 2000, 2)
    fermat2 = modpow(torch.full_like(odd, 2), odd - 1, odd) == 1
    trial = torch.ones_like(odd, dtype=torch.bool)
    for p in range(3, 45, 2):
        trial &= (odd % p != 0) | (odd == p)
    pseudoprimes = odd[fermat2 & ~trial]
    p = 1_000_000_007
    a = torch.tensor(g.integers(1, p, 12))
    inv = modpow(a, torch.full_like(a, p - 2), p)

    ids = torch.tensor(g.integers(0, 36**7, 10))
    digits = []
    rest = ids.clone()
    for _ in range(8):
        digits.append(rest % 36)
        rest = rest // 36
    digits = torch.stack(digits[::-1], dim=1)
    back = torch.zeros_like(ids)
    for k in range(8):
        back = back * 36 + digits[:, k]
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    base36 = ["".join(alphabet[d] for d in row).lstrip("0") or "0" for row in digits.tolist()]

    signed = torch.tensor([0, -1, 1, -2, 63, -64, 64, 300, -300, 2**40, -(2**62), 2**63 - 1])
    zz = (signed << 1) ^ (signed >> 63)
    unzz = _srl(zz, 1) ^ -(zz & 1)
    groups, more = [], []
    rest = zz.clone()
    for _ in range(10):
        low = rest & 0x7F
        rest = _srl(rest, 7)
        cont = rest != 0
        groups.append(low | (cont.long() << 7))
        more.append(cont)
    varint = torch.stack(groups, 1).to(torch.uint8)
    n_bytes = 1 + torch.stack(more, 1).long().cumprod(1).sum(1)
    return {
        "crc_table_head": table[:8],
        "crc32": crc,
        "crc_matches_zlib": crc.tolist() == [zlib.crc32(m) for m in msgs],
        "adler32": adler,
        "adler_matches_zlib": adler.tolist() == [zlib.adler32(m) for m in msgs],
        "n_fermat_probable": int(fermat2.sum()),
        "pseudoprimes_base2": pseudoprimes,
        "inverses": inv,
        "inverse_ok": bool((a * inv % p == 1).all()),
        "digits": digits,
        "base36": base36,
        "base36_roundtrip": bool(torch.equal(back, ids)),
        "zigzag": zz,
        "unzigzag_ok": bool(torch.equal(unzz, signed)),
        "varint": varint,
        "varint_dtype": str(varint.dtype),
        "varint_len": n_bytes,
    }
