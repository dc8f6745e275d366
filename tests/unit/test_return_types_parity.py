"""Every op that returns a ``torch.return_types.*`` in PyTorch returns GT's ``gt.return_types.*`` of
the same name and fields (one type per op: ``slogdet`` and ``linalg.slogdet`` differ, as do
``lu_unpack`` and ``linalg.lu``), prints as PyTorch's does and pickles under that name; GT used to
return its own named tuples (``SlogdetResult(sign=..., ...)``, ``EighResult(...)`` ...). Names and
fields as probed against PyTorch 2.13 (``torch.return_types``); ``std_mean``, ``var_mean`` and
``unique`` stay plain tuples, as in PyTorch."""

from __future__ import annotations

import pickle

import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _results():
    spd = gt.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=gt.float64)
    d = gt.tensor([[2.0, 0.0], [0.0, 4.0]], dtype=gt.float64)
    b = gt.tensor([[1.0], [2.0]], dtype=gt.float64)
    v = gt.tensor([1.0, 2.0, 1.0, 4.0])
    lu, piv = gt.linalg.lu_factor(spd)
    return {
        "frexp": (gt.frexp(v), ["mantissa", "exponent"]),
        "slogdet": (spd.slogdet(), ["sign", "logabsdet"]),
        "linalg_slogdet": (gt.linalg.slogdet(spd), ["sign", "logabsdet"]),
        "linalg_eigh": (gt.linalg.eigh(spd), ["eigenvalues", "eigenvectors"]),
        "linalg_eig": (gt.linalg.eig(d), ["eigenvalues", "eigenvectors"]),
        "linalg_svd": (gt.linalg.svd(d), ["U", "S", "Vh"]),
        "svd": (gt.svd(d), ["U", "S", "V"]),
        "linalg_qr": (gt.linalg.qr(d), ["Q", "R"]),
        "qr": (gt.qr(d), ["Q", "R"]),
        "linalg_lu_factor": (gt.linalg.lu_factor(spd), ["LU", "pivots"]),
        "linalg_lu_factor_ex": (gt.linalg.lu_factor_ex(spd), ["LU", "pivots", "info"]),
        "linalg_lu": (gt.linalg.lu(spd), ["P", "L", "U"]),
        "lu_unpack": (gt.lu_unpack(lu, piv), ["P", "L", "U"]),
        "linalg_ldl_factor": (gt.linalg.ldl_factor(spd), ["LD", "pivots"]),
        "linalg_ldl_factor_ex": (gt.linalg.ldl_factor_ex(spd), ["LD", "pivots", "info"]),
        "linalg_cholesky_ex": (gt.linalg.cholesky_ex(spd), ["L", "info"]),
        "linalg_inv_ex": (gt.linalg.inv_ex(d), ["inverse", "info"]),
        "linalg_solve_ex": (gt.linalg.solve_ex(d, b), ["result", "info"]),
        "linalg_lstsq": (
            gt.linalg.lstsq(d, b),
            ["solution", "residuals", "rank", "singular_values"],
        ),
        "histogram": (gt.histogram(v, bins=3), ["hist", "bin_edges"]),
        "histogramdd": (
            gt.histogramdd(gt.tensor([[0.0, 1.0], [1.0, 0.0]]), bins=[2, 2]),
            ["hist", "bin_edges"],
        ),  # fmt: skip
        "triangular_solve": (gt.triangular_solve(b, d), ["solution", "cloned_coefficient"]),
    }


def test_each_op_returns_pytorchs_named_type(conn):
    for name, (result, fields) in _results().items():
        kind = getattr(gt.return_types, name)
        assert type(result) is kind, (name, type(result))
        assert f"{kind.__module__}.{kind.__qualname__}" == f"gt.return_types.{name}"
        assert isinstance(result, tuple) and len(result) == len(fields), name
        assert list(kind._fields) == fields, name
        for i, field in enumerate(fields):
            assert getattr(result, field) is result[i], (name, field)
        again = pickle.loads(pickle.dumps(result))
        assert type(again) is kind, name


def test_they_print_as_pytorchs(conn):
    eye = gt.eye(2, dtype=gt.float64)
    assert str(gt.linalg.slogdet(eye)) == (
        "gt.return_types.linalg_slogdet(\n"
        "sign=tensor(1., dtype=gt.float64),\n"
        "logabsdet=tensor(0., dtype=gt.float64))"
    )
    assert repr(gt.frexp(gt.tensor([1.0, 3.0]))) == (
        "gt.return_types.frexp(\n"
        "mantissa=tensor([0.5000, 0.7500]),\n"
        "exponent=tensor([1, 2], dtype=gt.int32))"
    )
    assert repr(gt.histogram(gt.tensor([1.0, 2.0]), bins=1)) == (
        "gt.return_types.histogram(\nhist=tensor([2.]),\nbin_edges=tensor([1., 2.]))"
    )


def test_std_mean_var_mean_and_unique_stay_plain_tuples(conn):
    v = gt.tensor([1.0, 2.0, 2.0])
    for result in (gt.std_mean(v), gt.var_mean(v, 0), gt.unique(v, return_counts=True)):
        assert type(result) is tuple
