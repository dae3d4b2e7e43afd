"""pydantic's ValidationError as the one line a user reads: where, which setting, what is wrong, the fix."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError


def setting_name(location: tuple) -> str:
    return ".".join(str(part) for part in location) or "(the whole file)"


def describe(error: ValidationError, source: str, fixes: Mapping[str, str] | None = None) -> str:
    """`source`: `setting`: problem (got value); fix, for each error, joined by "; also ".

    `fixes` maps a top-level setting name to how to fix it; without one the fix is "correct it"."""
    parts = []
    for item in error.errors(include_url=False):
        name = setting_name(item["loc"])
        problem = item["msg"].removeprefix("Value error, ")
        got = item.get("input")
        quiet = item["type"] == "missing" or isinstance(got, (dict, list)) or repr(got) in problem
        shown = "" if quiet else f" (got {got!r:.80})"
        top = str(item["loc"][0]) if item["loc"] else ""
        fix = (fixes or {}).get(top, f"correct {name!r}" if item["type"] != "extra_forbidden" else f"remove {name!r}")
        parts.append(f"{name}: {problem}{shown}; {fix}")
    return f"{source}: " + "; also ".join(parts)
