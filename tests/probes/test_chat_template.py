"""probes.model.chat_template: a chat template renders as transformers renders it, in a budget."""

from __future__ import annotations

import pytest

from probes.model.chat_template import Budget, render

MESSAGES = [{"role": "user", "content": "Hello world"}]
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_a_plain_chatml_template_renders() -> None:
    rendered = render(CHATML, {"messages": MESSAGES, "add_generation_prompt": True})
    assert rendered.text == "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"
    assert rendered.error == "" and not rendered.stopped


def test_transformers_helpers_are_there() -> None:
    rendered = render("{{ messages | tojson }}{{ raise_exception('no system role') }}",
                      {"messages": MESSAGES})
    assert rendered.text is None and not rendered.stopped
    assert rendered.error == "TemplateError: no system role"


@pytest.mark.parametrize(("template", "reason"), [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     "more than 200000 steps"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
     "more than 200000 steps"),
    ("{{ 'x' * 1000000000 }}", "a value of more than 1000000 characters"),
    ("{% set n = 1000000000 %}{{ 'ab' * n }}", "a value of more than 1000000 characters"),
    ("{{ 'x' | center(1000000000) }}", "an argument of 1000000000"),
    ("{{ 'x'.ljust(1000000000) }}", "an argument of 1000000000"),
    ("{{ 2 ** 100000000 }}", "an exponent of 100000000"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
     "{% endfor %}{{ ns.s }}", "a value of more than 1000000 characters"),
    ("{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
     "recursion too deep"),
])
def test_hostile_templates_stop_quickly(template: str, reason: str) -> None:
    rendered = render(template, {"messages": MESSAGES})
    assert rendered.stopped and rendered.text is None
    assert reason in rendered.error


def test_output_size_is_budgeted() -> None:
    rendered = render("{% for i in range(5000) %}{{ 'x' * 1000 }}{% endfor %}", {},
                      Budget(max_steps=10**9))
    assert rendered.stopped and "characters of output" in rendered.error


def test_time_is_budgeted() -> None:
    budget = Budget(max_steps=10**9, max_seconds=0.05)
    rendered = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                      "{% endfor %}", {}, budget)
    assert rendered.stopped and "more than 0.05 s" in rendered.error


def test_a_syntax_error_is_an_error_not_a_crash() -> None:
    rendered = render("{% for %}", {})
    assert rendered.text is None and rendered.error.startswith("TemplateSyntaxError")
