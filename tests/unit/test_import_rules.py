"""The layers of DESIGN.md section 9, checked on the source: what each part of ``gt`` may import.

Every ``import`` statement counts, at module level or inside a function: a function-local import
is still an arrow between layers (and one that dodges a cycle is still a cycle). Only imports
under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "gt"

USER_API = ("gt.errors", "gt.random", "gt.version", "gt.torch_version", "gt.functional", "gt._stream", "gt.mps", "gt.xpu", "gt.multiprocessing", "gt.hub", "gt.shapes", "gt.ops", "gt.indexing", "gt.autograd", "gt.signal",
            "gt.tensor", "gt.factories", "gt.session", "gt.config", "gt.optim", "gt.nn",
            "gt.client", "gt.serialization", "gt.serialization_torch", "gt.utils", "gt.cuda", "gt.cpu", "gt.backends", "gt.amp", "gt.hotpath", "gt.hot_calls", "gt.guards", "gt.backprop", "gt.backprop_order", "gt.grad_mode", "gt.grad_graph", "gt.custom_function", "gt.linalg", "gt.distributions", "gt.special", "gt.func", "gt.func_batching", "gt.torch_functions", "gt.testing", "gt.jit", "gt.compiler", "gt.profiler", "gt.fft", "gt.spectral", "gt.distributed", "gt.settings", "gt.grad_hooks", "gt._dtype", "gt._foreach", "gt.typed_tensors", "gt.signal_windows", "gt.quasirandom", "gt.signal_scope", "gt.anomaly", "gt.fake_quant", "gt.torch_aliases", "gt.torch_native", "gt.torch_level", "gt.torch_rnn", "gt.torch_control", "gt.range_values", "gt.range_ends", "gt.sparse", "gt.sparse_csr", "gt.masked", "gt.nested")  # fmt: skip
TRACE_OUT = ("gt.trace.events", "gt.trace.emit")

#: The layer a module belongs to (the longest matching prefix) -> what it may import from gt.
ALLOWED: dict[str, tuple[str, ...]] = {
    "gt.errors": (),
    "gt.shapes": ("gt.errors",),
    "gt.runtime.field_checks": (),
    "gt.runtime.protocol": ("gt.runtime.field_checks",),
    "gt.runtime.ops": ("gt.runtime.ops", "gt.shapes", "gt.errors"),
    "gt.runtime.discovery": (),
    "gt.runtime.liveness": (),
    "gt.runtime.sockets": (),
    "gt.runtime.memory_settings": (),
    "gt.runtime.env_checks": ("gt.runtime.memory_settings",),
    "gt.runtime.security": (),
    "gt.runtime.control": ("gt.runtime.protocol", "gt.runtime.security"),
    "gt.runtime.launch": ("gt.runtime.control", "gt.runtime.discovery", "gt.runtime.env_checks"),
    "gt.runtime.sharding": ("gt.runtime.sharding", "gt.runtime.ops", "gt.shapes", "gt.errors"),
    "gt.runtime.client": (
        "gt.runtime.client",
        "gt.runtime.protocol",
        "gt.runtime.ops",
        "gt.runtime.control",
        "gt.runtime.sharding.config",
        "gt.errors",
        "gt.runtime.liveness",
        "gt.runtime.security",
        "gt.runtime.sockets",
        "gt.runtime.env_checks",
        *TRACE_OUT,
    ),
    "gt.runtime.dispatcher": (
        "gt.runtime.dispatcher",
        "gt.runtime.protocol",
        "gt.runtime.ops",
        "gt.runtime.sharding",
        "gt.runtime.discovery",
        "gt.runtime.launch",
        "gt.runtime.liveness",
        "gt.runtime.memory_settings",
        "gt.runtime.security",
        "gt.runtime.sockets",
        *TRACE_OUT,
    ),
    "gt.runtime.worker": (
        "gt.runtime.worker",
        "gt.runtime.protocol",
        "gt.runtime.ops",
        "gt.runtime.discovery",
        "gt.runtime.liveness",
        "gt.runtime.memory_settings",
        "gt.runtime.env_checks",
        "gt.runtime.security",
        "gt.runtime.sockets",
        *TRACE_OUT,
    ),
    "gt.runtime": (),  # the package's own __init__
    "gt.trace": ("gt.trace",),
    "gt.tui": (
        "gt.tui",
        "gt.trace",
        "gt.runtime.protocol",
        "gt.runtime.ops",
        "gt.runtime.control",
        "gt.runtime.discovery",
        "gt.runtime.liveness",
        "gt.runtime.security",
        "gt.runtime.sharding.config",
        "gt.runtime.sharding.config_text",
    ),
    "gt.cli": ("gt",),  # the command line may use everything
    "gt.__main__": ("gt.cli",),
    **{
        m: (
            *USER_API,
            "gt.runtime.client",
            "gt.runtime.ops",
            "gt.runtime.launch",
            "gt.runtime.sharding.config",
            "gt.runtime.memory_settings",
        )
        for m in USER_API
    },
    # gt/__init__.py re-exports the user API, which gt/_api.py imports on first use
    "gt": (*USER_API, "gt.runtime.ops", "gt._api"),
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _exists(name: str) -> bool:
    base = ROOT.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


@functools.cache
def _tree(path: Path) -> ast.AST:
    """A file's syntax tree, parsed once per test run (every test here reads every file)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    """The gt modules a file imports, anywhere in it (``from gt import x`` names ``gt.x``)."""
    names: set[str] = set()
    for node in _runtime_nodes(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "gt")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "gt":
                continue
            subs = [f"{node.module}.{a.name}" for a in node.names]
            found = [s for s in subs if _exists(s)]
            names.update(found)
            if len(found) < len(subs):  # some names are attributes of node.module itself
                names.add(node.module)
    return frozenset(names)


def layer_of(module: str) -> str:
    best = None
    for prefix in ALLOWED:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best):
                best = prefix
    assert best is not None, f"{module} belongs to no layer: add it to ALLOWED"
    return best


def allowed(importer: str, imported: str) -> bool:
    return any(imported == a or imported.startswith(a + ".") for a in ALLOWED[layer_of(importer)])


@functools.cache
def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def test_the_checker_sees_function_local_and_from_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "from gt.runtime import protocol as P\n"
        "def g():\n    from gt.runtime.worker.loop import Worker\n"
        "from gt import shapes, __version__\n"
        "if TYPE_CHECKING:\n    from gt.tensor import Tensor\n"
    )
    assert imports_of(f) == {"gt.runtime.protocol", "gt.runtime.worker.loop", "gt.shapes", "gt"}
    assert not allowed("gt.tui.app", "gt.runtime.worker.loop")
    assert allowed("gt.tui.app", "gt.trace.model")


@pytest.mark.parametrize("module", sorted(all_modules()))
def test_each_module_imports_only_what_its_layer_may(module):
    path = all_modules()[module]
    wrong = sorted(n for n in imports_of(path) if n != module and not allowed(module, n))
    assert wrong == [], f"{module} ({layer_of(module)} layer) may not import {wrong}"


def test_there_is_no_import_cycle():
    mods = all_modules()
    graph = {m: sorted(n for n in imports_of(p) if n in mods and n != m) for m, p in mods.items()}
    # Parents import their children's names all the time (package __init__ re-exports); only
    # count edges between modules that are not one another's package.
    for m, deps in graph.items():
        graph[m] = [d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")]
    cycles = _strongly_connected(graph)
    assert [c for c in cycles if len(c) > 1] == []


def _strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert [c for c in _strongly_connected({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]})
            if len(c) > 1] == [["a", "b", "c"]]  # fmt: skip


def test_only_the_backend_imports_cupy():
    users = []
    for p in ROOT.rglob("*.py"):
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            if any(n.split(".")[0] in ("cupy", "cupyx") for n in names):
                users.append(p.relative_to(ROOT).as_posix())
    assert sorted(set(users)) in ([], ["runtime/worker/backend.py"])
