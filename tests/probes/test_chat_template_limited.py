"""Chat templates that defeat a step budget (one C-level power, strings allocated before a
size check, megabytes of source) end in a limited child, in seconds, as one line."""

from __future__ import annotations

import pytest

from probes.limited import LimitedError, Limits, run_limited
from probes.model.chat_template import MAX_TEMPLATE_CHARS, render, render_limited

QUICK = Limits(memory_bytes=256 << 20, cpu_s=2, wall_s=8.0)
VARS = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}


def test_an_ordinary_template_renders_as_in_process() -> None:
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    assert render_limited(template, VARS, QUICK) == render(template, VARS)


@pytest.mark.parametrize("template", [
    "{{ (((10 ** 256) ** 256) ** 256) ** 256 }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ '{:>999999999}'.format('x') }}",
    "{{ lipsum(999999, false, 999999, 999999) }}",
    "{% set ns = namespace(s='x' * 999999) %}{% for i in range(99) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
])
def test_what_the_budget_cannot_see_ends_in_the_child(template: str) -> None:
    rendered = render_limited(template, VARS, QUICK)
    assert rendered.text is None and rendered.error
    assert "\n" not in rendered.error


def test_a_huge_template_is_refused_unread() -> None:
    rendered = render_limited("x" * (MAX_TEMPLATE_CHARS + 1), VARS)
    assert rendered.stopped and "characters" in rendered.error


def test_the_child_reports_its_limits() -> None:
    with pytest.raises(LimitedError, match=r"CPU|s$"):
        run_limited("probes.model.chat_template", "render_in_child",
                    ("{{ (((10 ** 256) ** 256) ** 256) ** 256 }}", {}), QUICK)


def test_a_renderer_started_early_renders_its_work_later() -> None:
    from probes.model.chat_template import render_many_limited, start_renderer

    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    started = start_renderer()
    assert "-S" in started.argv  # jinja2 is a plain folder here: no `site` in the child
    rendered = render_many_limited(template, [VARS, VARS], started=started)
    assert rendered == [render(template, VARS)] * 2


def test_an_early_renderer_keeps_its_limits() -> None:
    from probes.model.chat_template import render_many_limited, start_renderer

    quick = Limits(memory_bytes=256 << 20, cpu_s=1, wall_s=30.0)
    rendered = render_many_limited("{{ (((10 ** 256) ** 256) ** 256) ** 256 }}", [VARS], quick,
                                   started=start_renderer())
    assert rendered[0].stopped and rendered[0].error == "stopped: more than 1 s of CPU"


def test_a_refused_template_ends_the_early_renderer() -> None:
    import os

    from probes.model.chat_template import render_many_limited, start_renderer

    started = start_renderer()
    rendered = render_many_limited("x" * (MAX_TEMPLATE_CHARS + 1), [VARS], started=started)
    assert rendered[0].stopped and started.pid is not None
    assert not os.path.exists(f"/proc/{started.pid}")
