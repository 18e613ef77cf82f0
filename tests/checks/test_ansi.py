from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.cli.ansi import Writer, _wrap, styled, wants_color

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROOT = Path(__file__).resolve().parents[2]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "tty", "expected"), [
    ({}, True, True),
    ({}, False, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": ""}, True, True),  # no-color.org: only a non-empty value counts
    ({"FORCE_COLOR": "1"}, False, True),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
    ({"TERM": "dumb"}, True, False),
])
def test_colour_follows_the_conventions(env: dict[str, str], tty: bool, expected: bool) -> None:
    stream = _Tty() if tty else io.StringIO()
    assert wants_color(stream, env) is expected


def test_a_pipe_gets_plain_unwrapped_lines() -> None:
    out = io.StringIO()
    writer = Writer(out, color=False)
    long = "word " * 60
    writer.line(("  ", ""), ("WARN ", "yellow"), (long, ""))
    assert out.getvalue() == "  WARN " + long + "\n"


def test_a_terminal_gets_colour_and_wrapped_rows_under_the_summary() -> None:
    out = io.StringIO()
    writer = Writer(out, color=True, width=40)
    writer.line(("  ", ""), ("FAIL ", "bold red"), (" id ", "bold"),
                ("firmware 7.1 is outside driver 25.2's compatible range [7.3,7.9]", ""))
    rows = out.getvalue().splitlines()
    assert rows[0].startswith("  \x1b[1;31mFAIL \x1b[0m\x1b[1m id \x1b[0m")
    plain = [ANSI.sub("", r) for r in rows]
    assert all(len(r) <= 40 for r in plain)
    assert all(r.startswith(" " * 11) and r[11] != " " for r in plain[1:])
    sentence = "FAIL  id firmware 7.1 is outside driver 25.2's compatible range [7.3,7.9]"
    assert " ".join(p.strip() for p in plain) == sentence


def test_styled_leaves_empty_text_and_unknown_styles_alone() -> None:
    assert styled("", "bold") == ""
    assert styled("x", "sparkly") == "x"
    assert styled("x", "bold underline") == "\x1b[1;4mx\x1b[0m"


@given(st.text(alphabet=st.sampled_from("ab ·°—"), max_size=300),
       st.integers(min_value=1, max_value=120), st.integers(min_value=0, max_value=60))
def test_wrapping_keeps_every_word_in_order_and_fits(text: str, width: int, hang: int) -> None:
    hang = min(hang, width // 2)
    ranges = _wrap(text, width, hang)
    for n, (lo, hi) in enumerate(ranges):
        assert hi - lo <= (width if n == 0 else max(1, width - hang)) or " " not in text[lo:hi]
    rebuilt = " ".join(text[lo:hi] for lo, hi in ranges)
    assert "".join(rebuilt.split()) == "".join(text.split())


def test_the_doctor_on_a_real_terminal_colours_and_wraps(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-m", "checks.cli", "--root", str(tmp_path)],
                            cwd=ROOT, stdin=secondary, stdout=secondary, stderr=secondary,
                            env=env, close_fds=True)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert proc.wait(timeout=60) in (0, 1, 2)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    assert "\x1b[" in text
    rows = [ANSI.sub("", r) for r in text.splitlines()]
    assert rows and all(len(r) <= 60 for r in rows)
    assert any(r.startswith("  SKIP  checkpoint.format") for r in rows)
