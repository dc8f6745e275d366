"""The README's performance table, made from the headline rows of ``benchmarks/RESULTS.md``.

    python scripts/perf_table.py           # rewrite the README's table from RESULTS.md
    python scripts/perf_table.py --check   # exit 1 (and say what differs) if they disagree

RESULTS.md holds one table under the heading ``## Headlines``: every row is a number measured at a
named commit, with the command that measured it and the reference it is compared with. The README
shows the same rows (what, measured, target, reference, commit) between the markers
``<!-- perf-table:start -->`` and ``<!-- perf-table:end -->``; nothing else writes there, so the
two cannot drift (the test suite runs ``--check``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
README = ROOT / "README.md"
HEADING = "## Headlines"
START, END = "<!-- perf-table:start -->", "<!-- perf-table:end -->"
#: The columns of the headline table in RESULTS.md, in order.
COLUMNS = ("what", "measured", "target", "reference", "commit", "command", "machine")
#: What the README shows of each row.
SHOWN = ("what", "measured", "target", "reference", "commit")


class TableError(ValueError):
    """RESULTS.md or the README is not laid out as this script expects."""


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def headline_rows(results: str) -> list[dict[str, str]]:
    """The rows of the ``## Headlines`` table of RESULTS.md.

    Raises:
        TableError: no such table, other columns, or a row without a commit or a command.
    """
    lines = results.splitlines()
    try:
        at = lines.index(HEADING)
    except ValueError:
        raise TableError(f"RESULTS.md has no '{HEADING}' section") from None
    table = []
    for line in lines[at + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    if len(table) < 3:
        raise TableError(f"the '{HEADING}' section holds no table with rows")
    header = tuple(c.lower() for c in _cells(table[0]))
    if header != COLUMNS:
        raise TableError(f"the headline table's columns are {header}, expected {COLUMNS}")
    rows = []
    for line in table[2:]:
        cells = _cells(line)
        if len(cells) != len(COLUMNS):
            raise TableError(f"a headline row has {len(cells)} cells, not {len(COLUMNS)}: {line}")
        row = dict(zip(COLUMNS, cells))
        if not re.fullmatch(r"`?[0-9a-f]{7,40}`?", row["commit"]):
            raise TableError(f"a headline row names no commit: {line}")
        if not row["command"]:
            raise TableError(f"a headline row names no command: {line}")
        rows.append(row)
    return rows


def readme_table(rows: list[dict[str, str]]) -> str:
    """The README's table for these rows (Markdown, without the markers)."""
    out = ["| " + " | ".join(SHOWN) + " |", "|" + "---|" * len(SHOWN)]
    out += ["| " + " | ".join(row[c] for c in SHOWN) + " |" for row in rows]
    return "\n".join(out)


def with_table(readme: str, table: str) -> str:
    """``readme`` with the text between the markers replaced by ``table``.

    Raises:
        TableError: the markers are missing or out of order.
    """
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise TableError(f"README.md has no '{START}' ... '{END}' block")
    return readme[: i + len(START)] + "\n" + table + "\n" + readme[j:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="See the module docstring for the layout of RESULTS.md.",
    )
    ap.add_argument("--check", action="store_true", help="only check; exit 1 if they differ")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--readme", default=str(README))
    args = ap.parse_args(argv)
    try:
        rows = headline_rows(Path(args.results).read_text())
        readme = Path(args.readme).read_text()
        want = with_table(readme, readme_table(rows))
    except (OSError, TableError) as exc:
        print(f"perf_table: {exc}", file=sys.stderr)
        return 2
    if want == readme:
        return 0
    if args.check:
        print(
            "perf_table: README.md's performance table differs from benchmarks/RESULTS.md's "
            "headlines; run python scripts/perf_table.py",
            file=sys.stderr,
        )
        return 1
    Path(args.readme).write_text(want)
    print(f"wrote {len(rows)} rows into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
