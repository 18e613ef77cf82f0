"""The rich console for terminal output, made on first use: `--json` never imports rich.

Tables of `list`, `playbooks` and `npu`, and the bundle's progress lines, show text from
outside (process names, npu-smi cells, host names, search words). This console never lets
such text act: it interprets no markup and no emoji codes in strings (a process named `[/x]`
is printed as `[/x]`, `[link=...]` is never obeyed), every string it renders passes
`probes.textsafe.visible` (an escape sequence is shown as `\\x1b`), and as a last line, any
control character still inside a rendered segment (a `Text` built by hand) is made visible
before it is written. Styles are given as `Text` objects or `style=` arguments, never as
markup in strings.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

from probes.textsafe import visible

if TYPE_CHECKING:
    from rich.console import Console


def make_console(file: IO[str] | None = None) -> Console:
    cls = _safe_console_class()
    console = cls(file=file, highlight=False, markup=False, emoji=False)
    if not console.is_terminal:
        # a file or a pipe has no width to fit: never cut or wrap a line at 80 columns
        console = cls(file=file, highlight=False, markup=False, emoji=False, width=160,
                      soft_wrap=True)
    return console


_SAFE_CONSOLE: Any = None


def _safe_console_class() -> Any:
    global _SAFE_CONSOLE
    if _SAFE_CONSOLE is None:
        _SAFE_CONSOLE = _define()
    return _SAFE_CONSOLE


def _define() -> Any:
    from rich.console import Console
    from rich.segment import Segment


    class SafeConsole(Console):
        """A Console that renders outside text literally (see the module docstring)."""

        def render_str(self, text: str, **kwargs: Any) -> Any:
            kwargs["markup"] = False
            kwargs["emoji"] = False
            return super().render_str(visible(text), **kwargs)

        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if segment.control or visible(segment.text) == segment.text:
                    yield segment
                else:  # a control character that came in through a hand-made Text
                    yield Segment(visible(segment.text), segment.style)

    return SafeConsole
