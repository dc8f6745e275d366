"""DESIGN.md section 8's import rules, checked on the source (imports point down)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "gt"


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def modules(pattern: str) -> list[Path]:
    return sorted(ROOT.glob(pattern))


def violations(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for p in paths:
        for name in imports_of(p):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{p.name} imports {name}")
    return bad


def test_rule_checker_can_fail(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from gt.runtime import dispatcher\nimport cupy\n")
    assert imports_of(f) >= {"gt.runtime.dispatcher", "cupy"}


@pytest.mark.parametrize("leaf", ["runtime/protocol.py", "trace/events.py", "errors.py"])
def test_leaf_modules_import_nothing_from_gt(leaf):
    assert [n for n in imports_of(ROOT / leaf) if n == "gt" or n.startswith("gt.")] == []


def test_trace_never_imports_the_runtime():
    assert violations(modules("trace/**/*.py"), ("gt.runtime",)) == []


def test_tui_never_imports_dispatcher_worker_or_backend():
    forbidden = (
        "gt.runtime.dispatcher",
        "gt.runtime.worker",
        "gt.runtime.backend",
        "gt.runtime.planner",
        "gt.runtime.launch",
    )
    assert violations(modules("tui/**/*.py"), forbidden) == []


def test_only_the_backend_imports_cupy():
    users = [
        p
        for p in modules("**/*.py")
        if any(n == "cupy" or n.startswith("cupy") for n in imports_of(p))
    ]
    assert [p.relative_to(ROOT).as_posix() for p in users] in ([], ["runtime/worker/backend.py"])


def test_client_side_never_imports_the_servers():
    client_side = [p for p in modules("*.py") if p.name not in ("cli.py", "__main__.py", "demo.py")]
    client_side += modules("nn/**/*.py")
    forbidden = (
        "gt.runtime.dispatcher",
        "gt.runtime.worker",
        "gt.runtime.backend",
        "gt.runtime.planner",
    )
    assert violations(client_side, forbidden) == []
