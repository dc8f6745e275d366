"""The op registry: entries are consistent, and each one's shape and dtype rules agree with what
its kernel really makes (run on NumPy, no cluster)."""

from __future__ import annotations

import numpy as np
import pytest

from gt.runtime import ops as O
from gt.runtime.ops.base import KINDS, SHARD_FAMILIES
from gt.runtime.worker.backend import Backend

BACKEND = Backend(np, "cpu")
rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
ROW = rng.standard_normal((4,)).astype(np.float32)
POS = np.abs(A) + 0.5
IDX = np.array([2, 0, 2], dtype=np.int64)
RAND = {"shape": [2, 3], "dtype": "float32", "seed": 7}

#: For every compute and create op: argument values (arrays or Python numbers) and attrs.
SAMPLES: dict[str, tuple[list, object]] = {
    "full": ([1.5], {"shape": [2, 3], "dtype": "float32"}),
    "arange": ([], {"start": 1, "stop": 7, "step": 2, "dtype": "int64"}),
    "eye": ([], {"n": 3, "m": 4, "dtype": "float64"}),
    "randn": ([], RAND),
    "rand": ([], RAND),
    "randint": ([], {**RAND, "dtype": "int32", "low": 0, "high": 5}),
    "copy": ([A], None),
    "add": ([A, ROW], None),
    "sub": ([A, 2.0], None),
    "mul": ([A, B], None),
    "div": ([A, POS], None),
    "pow": ([POS, 1.5], None),
    "maximum": ([A, B], None),
    "minimum": ([A, ROW], None),
    "lt": ([A, B], None),
    "le": ([A, 0.0], None),
    "gt": ([A, ROW], None),
    "ge": ([A, B], None),
    "eq": ([A, A], None),
    "ne": ([A, B], None),
    "floor_divide": ([A, 0.7], None),
    "remainder": ([A, 0.7], None),
    "where": ([A > 0, A, 0.0], {"dtype": "float32"}),
    "clip": ([A, -0.5, 0.5], None),
    "neg": ([A], None),
    "abs": ([A], None),
    "exp": ([A], None),
    "log": ([POS], None),
    "sqrt": ([POS], None),
    "sin": ([A], None),
    "cos": ([A], None),
    "tanh": ([A], None),
    "sigmoid": ([A], None),
    "relu": ([A], None),
    "sign": ([A], None),
    "logical_not": ([A > 0], None),
    "erf": ([A], None),
    "cast": ([A], {"dtype": "float64"}),
    "matmul": ([A, B.T.copy()], None),
    "sum": ([A], {"axis": [1], "keepdims": False}),
    "max": ([A], {"axis": [0], "keepdims": True}),
    "min": ([A], None),
    "argmax": ([A], {"axis": 1, "keepdims": False}),
    "argmin": ([A], {"axis": None, "keepdims": False}),
    "log_softmax": ([A], {"axis": 1}),
    "cumsum": ([A], {"axis": 0}),
    "reshape": ([A], {"shape": [4, 3]}),
    "transpose": ([A], {"perm": [1, 0]}),
    "expand": ([ROW], {"shape": [2, 4]}),
    "getitem": ([A, IDX], {"key": [["t", 0], ["s", 1, None, 2]]}),
    "setitem": ([A.copy(), 9.0], {"key": [["i", 1]]}),
    "concat": ([A, B], {"axis": 0}),
    "index_add": (
        [np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32), IDX],
        {"key": [["t", 0]]},
    ),  # fmt: skip
}


def test_opcodes_are_dense_unique_and_named():
    assert [op.code for op in O.REGISTRY] == list(range(len(O.REGISTRY)))
    assert O.OPS == tuple(op.name for op in O.REGISTRY)
    assert len(set(O.OPS)) == len(O.OPS)
    assert all(O.OPCODE[op.name] == op.code for op in O.REGISTRY)


def test_entries_declare_known_kinds_and_families():
    for op in O.REGISTRY:
        assert op.kind in KINDS
        assert op.shard is None or op.shard in SHARD_FAMILIES
        assert op.doc, f"{op.name} has no doc line"
        if op.kind in ("compute", "create"):
            assert op.kernel and op.shape and op.dtype, op.name
        if op.kind == "comm":
            assert op.code in O.COMM_OPS


def test_every_compute_and_create_op_has_a_sample_here():
    need = {op.name for op in O.REGISTRY if op.kind in ("compute", "create")}
    assert need == set(SAMPLES), "add a sample for each new primitive"


def _meta(v: object) -> tuple[tuple[int, ...], str | None]:
    if isinstance(v, np.ndarray):
        return v.shape, v.dtype.name
    return (), None


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_shape_and_dtype_rules_match_the_kernel(name):
    op = O.BY_NAME[name]
    vals, attrs = SAMPLES[name]
    shapes = [_meta(v)[0] for v in vals]
    dtypes = [_meta(v)[1] for v in vals]
    out = BACKEND.handlers[op.code]([v.copy() if isinstance(v, np.ndarray) else v for v in vals],
                                    attrs)  # fmt: skip
    assert tuple(op.shape(shapes, attrs)) == out.shape
    assert op.dtype(dtypes, attrs) == out.dtype.name


def test_a_shape_rule_raises_the_users_error_for_bad_operands():
    with pytest.raises(ValueError, match="size of tensor a"):
        O.get("add").shape([(3, 4), (5,)], None)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        O.get("matmul").shape([(3, 4), (3, 4)], None)


def test_cumsum_kernel_and_its_integer_promotion():
    h = BACKEND.handlers[O.OPCODE["cumsum"]]
    np.testing.assert_allclose(h([A], {"axis": 1}), np.cumsum(A, axis=1), rtol=1e-6)
    ints = np.array([[1, 2], [3, 4]], dtype=np.int32)
    got = h([ints], {"axis": 0, "dtype": "int64"})
    assert got.dtype == np.int64 and got.tolist() == [[1, 2], [4, 6]]


def test_methods_named_by_entries_exist_on_tensors_and_as_functions():
    import gt

    for op in O.REGISTRY:
        for m in op.methods:
            assert getattr(gt.Tensor, m) is op.api
            assert callable(getattr(gt, m))
