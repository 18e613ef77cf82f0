"""The doctor: checks, their runner and face, reports, the CLI; its version for both tools."""

TOOL_VERSION = "0.1.0"  # pyproject.toml [project] version; both tools' --version and reports
