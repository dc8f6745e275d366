"""``gt run``'s view of its child: one ordered stream, colours kept, the end kept for the terminal."""

from __future__ import annotations

import os
import sys

from helpers import wait_for

from gt.cli.child_output import ChildOutput


def _all_lines(out: ChildOutput) -> list[str]:
    got: list[str] = []

    def drained() -> bool:
        while not out.lines.empty():
            line = out.lines.get_nowait()
            if line is None:
                return True
            got.append(line)
        return False

    wait_for(drained, timeout=30)
    return got


def test_stdout_and_stderr_keep_their_order_and_a_traceback_follows_its_print():
    script = (
        "import sys\n"
        "print('one'); print('two', file=sys.stderr); print('three')\n"
        "raise SystemExit(f'{sys.stdout.isatty()} {sys.stderr.isatty()}')\n"
    )
    out = ChildOutput([sys.executable, "-c", script])
    lines = _all_lines(out)
    assert lines == ["one", "two", "three", "True True", "[exited with code 1]"]


def test_colours_pass_through_and_a_progress_bar_shows_its_last_state():
    script = "print('\\x1b[31mred\\x1b[0m'); print('10%\\r50%\\r100%')"
    out = ChildOutput([sys.executable, "-c", script])
    assert _all_lines(out)[:2] == ["\x1b[31mred\x1b[0m", "100%"]


def test_the_tail_keeps_the_last_screenful_and_the_exit_status():
    script = "for i in range(500): print(i)\nraise SystemExit(4)"
    out = ChildOutput([sys.executable, "-c", script])
    _all_lines(out)
    assert out.tail(3) == ["498", "499", "[exited with code 4]"]
    assert out.proc.wait(timeout=10) == 4


def test_every_line_goes_to_the_log_though_the_tail_keeps_the_last_ones(tmp_path):
    out = ChildOutput([sys.executable, "-c", "for i in range(3000): print(i)"], log=True)
    lines = _all_lines(out)
    assert len(lines) == 3001 and out.count == 3001
    with open(out.log_path, encoding="utf-8") as f:
        logged = f.read().splitlines()
    assert logged[:3] == ["0", "1", "2"] and logged[2999] == "2999" and len(logged) == 3001
    assert out.tail(5)[-2:] == ["2999", "[exited with code 0]"]
    os.unlink(out.log_path)


def test_the_log_holds_each_line_while_the_program_still_runs(tmp_path):
    go = tmp_path / "go"
    script = (
        f"import os, time\nprint('first')\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
    )
    out = ChildOutput([sys.executable, "-c", script], log=True)
    try:

        def logged() -> str:
            with open(out.log_path, encoding="utf-8") as f:
                return f.read()

        assert wait_for(lambda: "first\n" in logged(), timeout=30)  # before the program ends
    finally:
        go.touch()
        _all_lines(out)
        out.proc.wait(timeout=10)
        os.unlink(out.log_path)
