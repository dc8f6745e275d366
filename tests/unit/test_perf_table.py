"""The README's performance table is made from RESULTS.md's headline rows and cannot drift."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import perf_table as PT  # noqa: E402

RESULTS = """# Results
## Headlines

| what | measured | target | reference | commit | command | machine |
|---|---|---|---|---|---|---|
| sync round trip | 1.10x its time | <= 1.3x | a 3-hop ZeroMQ chain | `abc1234` | `python benchmarks/bench_runtime.py` | 2-core VM |

## Other
| not | this |
"""
README = "intro\n<!-- perf-table:start -->\nold\n<!-- perf-table:end -->\nrest\n"


def test_the_committed_readme_matches_the_committed_results():
    assert PT.main(["--check"]) == 0


def test_the_readme_table_is_the_headline_rows_with_their_commit_and_reference():
    rows = PT.headline_rows(RESULTS)
    assert [r["what"] for r in rows] == ["sync round trip"]
    got = PT.with_table(README, PT.readme_table(rows))
    assert got.startswith("intro\n<!-- perf-table:start -->\n| what | measured | target |")
    assert (
        "| sync round trip | 1.10x its time | <= 1.3x | a 3-hop ZeroMQ chain | `abc1234` |" in got
    )
    assert got.endswith("<!-- perf-table:end -->\nrest\n") and "old" not in got


def test_check_fails_when_the_readme_was_edited_by_hand(tmp_path):
    (tmp_path / "R.md").write_text(RESULTS)
    (tmp_path / "README.md").write_text(README)
    args = ["--results", str(tmp_path / "R.md"), "--readme", str(tmp_path / "README.md")]
    assert PT.main([*args, "--check"]) == 1
    assert PT.main(args) == 0  # writes it
    assert PT.main([*args, "--check"]) == 0


@pytest.mark.parametrize(
    "bad",
    [
        RESULTS.replace("## Headlines", "## Heads"),
        RESULTS.replace("`abc1234`", "today"),
        RESULTS.replace("| `python benchmarks/bench_runtime.py` |", "|  |"),
        RESULTS.replace("| machine |", "|"),
    ],
)
def test_rows_without_a_commit_or_a_command_are_refused(bad):
    with pytest.raises(PT.TableError):
        PT.headline_rows(bad)
