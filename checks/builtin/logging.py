"""logging.level: ASCEND_GLOBAL_LOG_LEVEL with its real meaning, and where logs go."""

from __future__ import annotations

from checks.builtin import facts
from checks.context import Context
from checks.model import Finding, passed, warned
from checks.registry import check
from probes.environment import LOG_LEVEL_NAMES


@check("logging.level", "CANN log level and log directory", "logging",
       "ASCEND_GLOBAL_LOG_LEVEL (0 DEBUG .. 4 NULL), ASCEND_SLOG_PRINT_TO_STDOUT, log directory")
def logging_level(ctx: Context) -> Finding:
    env = facts.environment(ctx)
    level = env.log_level
    name = LOG_LEVEL_NAMES[level.level]
    shown = f"ASCEND_GLOBAL_LOG_LEVEL={level.raw}" if level.raw is not None else \
        "ASCEND_GLOBAL_LOG_LEVEL unset"
    log_dir = env.log_dir
    where = (f"log directory {log_dir.path} (from {log_dir.source})" if log_dir.path
             else "log directory unknown")
    evidence = (f"{shown}: level {level.level} = {name}", where, *log_dir.notes)
    problems = list(level.problems)
    production = bool(ctx.policy.get("logging", "production"))
    if production and level.level in (0, 1):
        problems.append(f"level {level.level} ({name}) logs every {name.lower()} message: "
                        "slower and fills the disk; CANN never rotates application logs")
    if ctx.host.env.get("ASCEND_SLOG_PRINT_TO_STDOUT") == "1":
        problems.append("ASCEND_SLOG_PRINT_TO_STDOUT=1 prints host logs to stdout")
    if problems:
        return warned("; ".join(problems),
                      "for production set ASCEND_GLOBAL_LOG_LEVEL=3 (ERROR, the default) or 2 "
                      "(WARNING) and unset ASCEND_SLOG_PRINT_TO_STDOUT", *evidence)
    return passed(f"log level {level.level} ({name}); {where}", *evidence)
