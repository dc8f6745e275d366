"""Write the API of the installed CuPy as JSON lines, for the CuPy test double to hold GT to.

Run with a Python that has a real CuPy (no GPU is needed: nothing here touches a device)::

    pip install cupy-cuda13x            # or cupy-cuda12x, in a separate virtual environment
    python scripts/make_cupy_api.py     # writes tests/support/cupy_double/api/cupy-<major>.jsonl

The test double (``tests/support/cupy_double``) resolves a name only if every committed API file
has it, and checks each call's arguments against the signature recorded here, so code that the CI
runs on the double cannot call a NumPy function, keyword or method that CuPy lacks. Keep one file
per CuPy major version that ``pyproject.toml`` admits; GT may use only what all of them offer.

What is recorded, per namespace (``cupy``, ``cupy.linalg``, ``cupy.ndarray``, ``cupy.cuda`` ...):
each public name's kind (``ufunc``, ``function``, ``class``, ``module``, ``attribute``) and, for
callables, the parameters as signature tokens (``a``, ``b=`` with a default, ``/``, ``*``,
``*args``, ``**kwargs``; from ``inspect.signature``, else from the signature line Cython puts at the
top of a docstring; ``null`` when neither says). The file is JSON lines: a header with the version,
then ``[namespace, name, record]`` per line. For ufuncs: ``nin``, ``nout``, the keywords
their call takes and the signatures of their methods (``reduce``, ``at`` ...).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[1] / "tests" / "support" / "cupy_double" / "api"

#: Modules whose public names are recorded.
MODULES = (
    "cupy",
    "cupy.linalg",
    "cupy.fft",
    "cupy.random",
    "cupy.cuda",
    "cupy.cuda.runtime",
    "cupyx",
    "cupyx.scipy.special",
)
#: Classes whose public members are recorded (as ``namespace`` -> dotted path).
CLASSES = {
    "cupy.ndarray": "cupy.ndarray",
    "cupy.random.Generator": "cupy.random.Generator",
    "cupy.cuda.Stream": "cupy.cuda.Stream",
    "cupy.cuda.Event": "cupy.cuda.Event",
    "cupy.cuda.Device": "cupy.cuda.Device",
    "cupy.cuda.MemoryPool": "cupy.cuda.MemoryPool",
    "cupy.cuda.PinnedMemoryPool": "cupy.cuda.PinnedMemoryPool",
    "cupy.cuda.PinnedMemoryPointer": "cupy.cuda.PinnedMemoryPointer",
    "cupy.cuda.MemoryPointer": "cupy.cuda.MemoryPointer",
}
UFUNC_METHODS = ("reduce", "accumulate", "reduceat", "outer", "at")
#: The keywords a CuPy ufunc call accepts (``cupy._core._kernel.ufunc.__call__`` pops these and
#: raises ``TypeError: Wrong arguments`` for any other; checked below on ``cupy.add``).
UFUNC_KEYWORDS = ("out", "dtype", "casting")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def split_top(text: str) -> list[str]:
    """Split ``text`` at commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def tokens(params: list[list] | None) -> list[str] | None:
    """``[[name, kind, has_default], ...]`` as signature tokens: ``a``, ``b=`` (has a default),
    ``/`` and ``*`` (the markers), ``*args``, ``**kwargs``."""
    if params is None:
        return None
    out: list[str] = []
    for i, (name, kind, has_default) in enumerate(params):
        if kind == "kw_only" and not any(t == "*" or t.startswith("*") for t in out):
            out.append("*")
        if kind == "var_pos":
            out.append("*" + name)
        elif kind == "var_kw":
            out.append("**" + name)
        else:
            out.append(name + ("=" if has_default else ""))
        nxt = params[i + 1][1] if i + 1 < len(params) else None
        if kind == "pos_only" and nxt != "pos_only":
            out.append("/")
    return out


def params_from_doc(obj: Any) -> list[list] | None:
    """Parameters from the ``name(a, b=1, *, c=None)`` line Cython embeds at a docstring's top."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    if not doc:
        return None
    line = doc.splitlines()[0].replace("\\*", "*")
    start = line.find("(")
    if start < 0:
        return None
    depth, end = 0, -1
    for i in range(start, len(line)):
        if line[i] == "(":
            depth += 1
        elif line[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end < 0 or not _IDENT.fullmatch(line[:start].split(".")[-1].strip() or "_"):
        return None
    out: list[list] = []
    kind = "pos_or_kw"
    for raw in split_top(line[start + 1 : end]):
        p = raw.strip()
        if not p:
            continue
        if p == "/":
            for q in out:
                if q[1] == "pos_or_kw":
                    q[1] = "pos_only"
            continue
        if p == "*":
            kind = "kw_only"
            continue
        if p.startswith("**"):
            out.append([p[2:].strip(), "var_kw", False])
            continue
        if p.startswith("*"):
            out.append([p[1:].strip(), "var_pos", False])
            kind = "kw_only"
            continue
        has_default = "=" in p
        head = p.split("=", 1)[0].strip()
        names = _IDENT.findall(head)  # "size_t size" -> the last word is the name
        if not names:
            return None
        out.append([names[-1], kind, has_default])
    if out and out[0][0] == "self":
        out = out[1:]
    return out


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "pos_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos_or_kw",
    inspect.Parameter.KEYWORD_ONLY: "kw_only",
    inspect.Parameter.VAR_POSITIONAL: "var_pos",
    inspect.Parameter.VAR_KEYWORD: "var_kw",
}


def params_of(obj: Any, bound: bool = False) -> list[list] | None:
    """``[[name, kind, has_default], ...]`` of a callable (``self`` left out), or ``None``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return params_from_doc(obj)
    out = [
        [p.name, _KINDS[p.kind], p.default is not inspect.Parameter.empty]
        for p in sig.parameters.values()
    ]
    if out and out[0][0] in ("self", "cls") and not bound:
        out = out[1:]
    return out


def describe(obj: Any) -> dict:
    """One name's record."""
    import cupy  # noqa: PLC0415

    if isinstance(obj, cupy.ufunc):
        methods = {
            m: tokens(params_from_doc(getattr(obj, m))) for m in UFUNC_METHODS if hasattr(obj, m)
        }
        return {
            "kind": "ufunc",
            "nin": obj.nin,
            "nout": obj.nout,
            "keywords": list(UFUNC_KEYWORDS),
            "methods": methods,
        }
    if inspect.ismodule(obj):
        return {"kind": "module"}
    if inspect.isclass(obj):
        init = params_of(obj) if obj.__init__ is not object.__init__ else []
        if init is None:
            init = params_from_doc(obj.__init__)
        return {"kind": "class", "params": tokens(init)}
    if callable(obj):
        return {"kind": "function", "params": tokens(params_of(obj))}
    return {"kind": "attribute"}


def public(obj: Any) -> list[str]:
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def check_ufunc_keywords() -> None:
    """Fail if CuPy's ufuncs took a keyword this script does not record (or stopped taking one)."""
    import cupy  # noqa: PLC0415

    try:
        cupy.add(1, 2, where=True)
    except TypeError as exc:
        if "Wrong arguments" not in str(exc):
            raise
    else:
        raise SystemExit("cupy.add took where=: update UFUNC_KEYWORDS")


def build() -> dict:
    """The whole record of the installed CuPy."""
    import cupy  # noqa: PLC0415

    check_ufunc_keywords()
    spaces: dict[str, dict] = {}
    for name in MODULES:
        mod = importlib.import_module(name)
        entries = {}
        for attr in public(mod):
            try:
                entries[attr] = describe(getattr(mod, attr))
            except Exception as exc:  # an attribute that fails to load: record that it exists
                entries[attr] = {"kind": "attribute", "note": f"{type(exc).__name__}"}
        spaces[name] = entries
    for space, path in CLASSES.items():
        mod_name, cls_name = path.rsplit(".", 1)
        cls = getattr(importlib.import_module(mod_name), cls_name)
        entries = {}
        for attr in public(cls):
            member = inspect.getattr_static(cls, attr)
            if isinstance(member, (property, staticmethod, classmethod)) or not callable(
                getattr(cls, attr)
            ):
                entries[attr] = {"kind": "attribute"}
            elif type(member).__name__ == "getset_descriptor":
                entries[attr] = {"kind": "attribute"}
            else:
                entries[attr] = {
                    "kind": "function",
                    "params": tokens(params_of(getattr(cls, attr))),
                }
        spaces[space] = entries
    return {
        "cupy_version": cupy.__version__,
        "python": sys.version.split()[0],
        "made_by": "scripts/make_cupy_api.py",
        "namespaces": spaces,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR, help="where the JSON file goes")
    args = ap.parse_args(argv)
    try:
        api = build()
    except ModuleNotFoundError as exc:
        print(f"make_cupy_api: {exc} (run it with a Python that has CuPy)", file=sys.stderr)
        return 2
    major = api["cupy_version"].split(".")[0]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"cupy-{major}.jsonl"
    # one name per line: small, and a new CuPy's changes read well in a diff
    lines = [json.dumps({k: v for k, v in api.items() if k != "namespaces"}, sort_keys=True)]
    for space, entries in sorted(api["namespaces"].items()):
        for name, rec in sorted(entries.items()):
            lines.append(json.dumps([space, name, rec], sort_keys=True, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")
    n = sum(len(v) for v in api["namespaces"].values())
    print(f"wrote {path} ({n} names of CuPy {api['cupy_version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
