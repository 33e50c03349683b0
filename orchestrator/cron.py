"""Cron slots with daylight-saving semantics. (Being filled in.)"""

from __future__ import annotations

from croniter import croniter

ALIASES = {"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"}


def validate_cron(expr: str) -> str:
    """Return ``expr`` if it is a five-field cron expression or an alias, else raise ValueError."""
    text = expr.strip()
    if text in ALIASES:
        return text
    if len(text.split()) != 5:
        raise ValueError(f"cron must have 5 fields, got {len(text.split())}: {expr!r}")
    if not croniter.is_valid(text):
        raise ValueError(f"invalid cron expression {expr!r}")
    return text
