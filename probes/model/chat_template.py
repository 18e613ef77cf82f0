"""Render a model's chat template (Jinja) with a budget of steps, output size and time.

A chat template is code from outside: it runs in Jinja's immutable sandbox, as transformers
runs it, and here also under a budget, so a template that loops or builds huge strings stops
with a one-line reason instead of costing minutes and gigabytes. Every call, attribute or
item lookup, intercepted operator, filter and iteration over a `range` counts one step;
numbers that would make a string or a power too large are refused before they are used;
the output is streamed and counted; the clock is checked at every step.

Constant folding is off: Jinja's optimizer would otherwise evaluate constant expressions
(`'x' * 10**9`) while compiling, outside any budget.
"""

from __future__ import annotations

import functools
import json
import operator
import pickle
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes.limited import Limits
    from probes.spawn import Started

MAX_STEPS = 200_000
MAX_CHARS = 1_000_000
MAX_SECONDS = 2.0
MAX_EXPONENT = 256


class BudgetExceeded(Exception):
    """The template needed more steps, output or time than it was given."""


@dataclass(frozen=True)
class Rendered:
    """The rendered text, or why there is none (`stopped` True: the budget ran out)."""

    text: str | None
    error: str = ""
    stopped: bool = False
    steps: int = 0


@dataclass
class Budget:
    """What a template may spend: steps, output characters and seconds."""

    max_steps: int = MAX_STEPS
    max_chars: int = MAX_CHARS
    max_seconds: float = MAX_SECONDS
    steps: int = 0
    deadline: float = 0.0

    def start(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + self.max_seconds

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise BudgetExceeded(f"more than {self.max_steps} steps")
        if self.steps % 64 == 0 and time.monotonic() > self.deadline:
            raise BudgetExceeded(f"more than {self.max_seconds:g} s")

    def size(self, value: Any) -> Any:
        """`value`, unless it is a string or sequence larger than the output budget."""
        if isinstance(value, (str, bytes, list, tuple)) and len(value) > self.max_chars:
            raise BudgetExceeded(f"a value of more than {self.max_chars} characters")
        return value

    def numbers(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Refuse integer arguments that would size a result beyond the budget."""
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and \
                    abs(value) > self.max_chars:
                raise BudgetExceeded(f"an argument of {value} (more than {self.max_chars})")


def _counted(iterable: Any, budget: Budget) -> Iterator[Any]:
    for item in iterable:
        budget.tick()
        yield item


def _binop_size(op: str, left: Any, right: Any, budget: Budget) -> None:
    sized = (str, bytes, list, tuple)
    if op == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, sized) and isinstance(times, int) and \
                    len(seq) * max(times, 0) > budget.max_chars:
                raise BudgetExceeded(f"a value of more than {budget.max_chars} characters")
    elif op == "**" and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
        raise BudgetExceeded(f"an exponent of {right} (more than {MAX_EXPONENT})")
    elif (op == "+" and isinstance(left, sized) and isinstance(right, sized)
          and len(left) + len(right) > budget.max_chars):
        raise BudgetExceeded(f"a value of more than {budget.max_chars} characters")


_BINOPS: Mapping[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "**": operator.pow, "%": operator.mod,
}


def _environment(budget: Budget) -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(_BINOPS)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            budget.tick()
            budget.numbers(args, kwargs)
            result = super().call(__context, __obj, *args, **kwargs)
            if isinstance(result, range):
                return _counted(result, budget)
            return budget.size(result)

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            budget.tick()
            _binop_size(op, left, right, budget)
            return budget.size(_BINOPS[op](left, right))

        def getattr(self, obj: Any, attribute: str) -> Any:
            budget.tick()
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            budget.tick()
            return super().getitem(obj, argument)

    env = BudgetedEnvironment(trim_blocks=True, lstrip_blocks=True,
                              extensions=["jinja2.ext.loopcontrols"])
    env.optimized = False
    env.filters["tojson"] = _tojson
    for table in (env.filters, env.tests):
        for name, fn in list(table.items()):
            table[name] = _budgeted(fn, budget)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _budgeted(fn: Callable[..., Any], budget: Budget) -> Callable[..., Any]:
    @functools.wraps(fn)  # keeps jinja_pass_arg (context/environment-taking filters)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budget.tick()
        budget.numbers(args, kwargs)
        return budget.size(fn(*args, **kwargs))

    return wrapper


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return time.strftime(fmt)


def render(template: str, variables: Mapping[str, Any], budget: Budget | None = None) -> Rendered:
    """Render `template` with `variables` inside the budget; never raises."""
    budget = budget or Budget()
    try:
        env = _environment(budget)
    except ImportError as exc:
        return Rendered(None, f"jinja2 is not installed ({exc})")
    budget.start()
    try:
        compiled = env.from_string(template)
        pieces: list[str] = []
        total = 0
        for piece in compiled.generate(**variables):
            total += len(piece)
            if total > budget.max_chars:
                raise BudgetExceeded(f"more than {budget.max_chars} characters of output")
            budget.tick()
            pieces.append(piece)
    except BudgetExceeded as exc:
        return Rendered(None, f"stopped: {exc}", stopped=True, steps=budget.steps)
    except RecursionError:
        return Rendered(None, "stopped: recursion too deep", stopped=True, steps=budget.steps)
    except MemoryError:  # in render_limited's child: its address-space cap
        return Rendered(None, "stopped: out of memory", stopped=True, steps=budget.steps)
    except Exception as exc:  # a template error, or an error the template raised on purpose
        return Rendered(None, f"{type(exc).__name__}: {exc}", steps=budget.steps)
    return Rendered("".join(pieces), steps=budget.steps)


# The largest chat template of a released model is tens of KB; a template of megabytes is
# compiled before any budget counts (28 MB took 3.9 GB and 53 s), so it is refused unread.
MAX_TEMPLATE_CHARS = 1_000_000


def render_limited(template: str, variables: Mapping[str, Any],
                   limits: Limits | None = None) -> Rendered:
    """`render` in a child process whose memory and CPU the kernel caps (probes.limited):
    what the step budget cannot see (one huge power, a string built by `%` or `format`) ends
    there, never in the caller. Never raises."""
    from probes.limited import LimitedError, finish_limited

    if len(template) > MAX_TEMPLATE_CHARS:
        return Rendered(None, f"stopped: a template of {len(template):,} characters (more "
                              f"than {MAX_TEMPLATE_CHARS:,})", stopped=True)
    try:
        answer = finish_limited(start_renderer(), "render_in_child",
                                (template, dict(variables)), limits)
    except LimitedError as exc:
        return Rendered(None, f"stopped: {exc}", stopped=True)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        return Rendered(None, f"the template's variables cannot be passed on ({exc})")
    return _rendered(answer)


def start_renderer() -> Started:
    """A limited child (probes.limited) that has this file and Jinja's sandbox imported and
    waits for its renderings: started early, it loads them while the caller is busy. This
    file alone, not the `probes` package, and without `site` where Jinja is found. The
    caller owns it: render_many_limited(started=...) or `.discard()` it."""
    from probes.limited import start_limited

    return start_limited(__file__, ("jinja2.sandbox", "jinja2.ext"),
                         without_site=("jinja2", "markupsafe"))


def render_many_limited(template: str, variable_sets: Sequence[Mapping[str, Any]],
                        limits: Limits | None = None,
                        on_start: Callable[[], None] | None = None,
                        started: Started | None = None) -> list[Rendered]:
    """`render` of one template with each set of variables, all in one limited child (one
    process start for several renderings); each rendering has its own budget. Never raises.
    `on_start`: called once the child runs (probes.spawn); not at all when none is started.
    `started`: a child start_renderer began, used (or ended) here; else one is started."""
    from probes.limited import LimitedError, finish_limited

    if len(template) > MAX_TEMPLATE_CHARS:
        if started is not None:
            started.discard()
        refused = Rendered(None, f"stopped: a template of {len(template):,} characters (more "
                                 f"than {MAX_TEMPLATE_CHARS:,})", stopped=True)
        return [refused for _ in variable_sets]
    if limits is None:  # each rendering may spend its own MAX_SECONDS
        from probes.limited import Limits

        more_s = MAX_SECONDS * (len(variable_sets) - 1)
        base = Limits()
        limits = Limits(cpu_s=base.cpu_s + int(more_s), wall_s=base.wall_s + more_s)
    if started is None:
        started = start_renderer()
    if on_start is not None:
        on_start()
    try:
        answer = finish_limited(started, "render_many_in_child",
                                (template, [dict(v) for v in variable_sets]), limits)
    except LimitedError as exc:
        return [Rendered(None, f"stopped: {exc}", stopped=True) for _ in variable_sets]
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        started.discard()
        return [Rendered(None, f"the template's variables cannot be passed on ({exc})")
                for _ in variable_sets]
    answers = answer if isinstance(answer, list) else []
    if len(answers) != len(variable_sets):
        return [Rendered(None, "stopped: the renderer gave no answer", stopped=True)
                for _ in variable_sets]
    return [_rendered(one) for one in answers]


def warm_up() -> None:
    """Render a small template once, with a budget of its own: Jinja's lexer, parser and
    code generator then start warm for the caller's template (probes.limited calls this
    before the work arrives)."""
    render("{% for m in messages %}{{ m.role ~ ':' }}{% if m.content %}{{ m.content | trim }}"
           "{% endif %}{% endfor %}{{ x | tojson }}", {"messages": [{"role": "a", "content": "b"}],
                                                     "x": [1]})


def render_in_child(argument: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The child's side of render_limited: the Rendered as JSON."""
    return _as_json(render(*argument))


def render_many_in_child(argument: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The child's side of render_many_limited: each Rendered as JSON."""
    template, variable_sets = argument
    return [_as_json(render(template, variables)) for variables in variable_sets]


def _as_json(rendered: Rendered) -> dict[str, Any]:
    return {"text": rendered.text, "error": rendered.error, "stopped": rendered.stopped,
            "steps": rendered.steps}


def _rendered(answer: Any) -> Rendered:
    if not isinstance(answer, dict):
        return Rendered(None, "stopped: the renderer gave no answer", stopped=True)
    text = answer.get("text")
    return Rendered(text if isinstance(text, str) else None, str(answer.get("error", "")),
                    bool(answer.get("stopped")), int(answer.get("steps") or 0))
