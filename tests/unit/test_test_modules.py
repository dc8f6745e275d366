"""The suite's own layout: pytest imports test modules by their base name (rootdir-relative, no
packages), so two test files with one name in different folders break collection for everyone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, k in names.items() if k > 1] == []
