"""The differential suite: realistic PyTorch programs run with GT give PyTorch's numbers.

Every program in ``programs/`` is run with ``gt`` in place of ``torch`` and its results are compared
with PyTorch's, stored in ``golden/`` by ``scripts/make_golden.py`` (PyTorch itself is never
imported here). Floats match within each program's tolerance, integers, booleans and shapes
exactly, strings exactly once ``torch.`` is read as ``gt.``. The programs listed in
:data:`KNOWN_DIFFERENCES` are expected to differ, for the reason given; they are strict xfails, so
one that starts to match must leave the list.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import gt

sys.path.insert(0, str(Path(__file__).parent))

from programs import PROGRAMS, load_all, run  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"
load_all()

#: Programs whose results differ from PyTorch's, and why (the README lists them).
KNOWN_DIFFERENCES: dict[str, str] = {}

_GOLDEN_CACHE: dict[str, dict[str, np.ndarray]] = {}


def golden(module: str) -> dict[str, np.ndarray]:
    """The stored PyTorch results of one program module."""
    if module not in _GOLDEN_CACHE:
        with np.load(GOLDEN / f"{module}.npz") as f:
            _GOLDEN_CACHE[module] = {k: f[k] for k in f.files}
    return _GOLDEN_CACHE[module]


def _normalize(text: str) -> str:
    return text.replace("torch.", "gt.")


def compare(name: str, got: dict[str, np.ndarray]) -> list[str]:
    """Every way ``got`` differs from PyTorch's results for program ``name``."""
    prog = PROGRAMS[name]
    want = golden(prog.module)
    keys = set(want[f"{name}::__keys__"].tolist())
    problems = []
    if set(got) != keys:
        problems.append(f"result names differ: missing {sorted(keys - set(got))}, "
                        f"extra {sorted(set(got) - keys)}")  # fmt: skip
    for key in sorted(keys & set(got)):
        w, g = want[f"{name}::{key}"], got[key]
        if w.dtype.kind == "U" or g.dtype.kind == "U":
            if _normalize(str(g)) != _normalize(str(w)):
                problems.append(f"{key}: text differs:\n--- gt\n{g}\n--- torch\n{w}")
            continue
        if w.shape != g.shape:
            problems.append(f"{key}: shape {g.shape} != PyTorch's {w.shape}")
            continue
        if w.dtype != g.dtype:
            problems.append(f"{key}: dtype {g.dtype} != PyTorch's {w.dtype}")
            continue
        if w.dtype.kind in "fc":
            close = np.isclose(g, w, rtol=prog.rtol, atol=prog.atol, equal_nan=True)
            if not close.all():
                worst = np.max(np.abs(np.nan_to_num(g.astype(w.dtype) - w)))
                problems.append(f"{key}: {int((~close).sum())} values differ (max abs {worst:.3g})"
                                f"\n gt    {g.ravel()[:6]}\n torch {w.ravel()[:6]}")  # fmt: skip
        elif not np.array_equal(g, w):
            problems.append(f"{key}: {g.ravel()[:8]} != PyTorch's {w.ravel()[:8]}")
    return problems


def _case(name: str) -> object:
    if name in KNOWN_DIFFERENCES:
        mark = pytest.mark.xfail(reason=KNOWN_DIFFERENCES[name], strict=True)
        return pytest.param(name, marks=mark)
    return name


@pytest.mark.parametrize("name", [_case(n) for n in sorted(PROGRAMS)])
def test_program_gives_pytorchs_results(conn, name):
    got = run(PROGRAMS[name], gt)
    problems = compare(name, got)
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_program_has_golden_results_and_no_stale_ones_remain():
    stored = set()
    for module in {p.module for p in PROGRAMS.values()}:
        stored |= {k.split("::")[0] for k in golden(module)}
    assert stored == set(PROGRAMS), (
        "rerun scripts/make_golden.py with PyTorch installed: "
        f"missing {sorted(set(PROGRAMS) - stored)}, stale {sorted(stored - set(PROGRAMS))}"
    )


def test_the_suite_is_large_and_mostly_matching():
    assert len(PROGRAMS) >= 100
    assert len(KNOWN_DIFFERENCES) <= 0.05 * len(PROGRAMS)
    assert set(KNOWN_DIFFERENCES) <= set(PROGRAMS)


def _stored(name: str) -> dict[str, np.ndarray]:
    want = golden(PROGRAMS[name].module)
    keys = want[f"{name}::__keys__"].tolist()
    return {k: want[f"{name}::{k}"] for k in keys}


def test_compare_accepts_pytorchs_own_results_and_reports_every_kind_of_difference():
    name = "linear_regression_sgd"
    good = _stored(name)
    assert compare(name, good) == []
    key = next(k for k, v in good.items() if v.dtype.kind == "f")
    off = {**good, key: good[key] + 1e-2}
    assert any(p.startswith(f"{key}:") for p in compare(name, off))
    assert any("missing" in p for p in compare(name, {k: v for k, v in good.items() if k != key}))
    assert any("dtype" in p for p in compare(name, {**good, key: good[key].astype(np.float64)}))
    text = _stored("tensor_reprs")
    assert compare("tensor_reprs", text) == []
    assert compare("tensor_reprs", {**text, "zeros": np.array("tensor([0, 0])")})


def test_pytorch_is_not_imported():
    assert "torch" not in sys.modules
