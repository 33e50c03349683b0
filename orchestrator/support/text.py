"""Text for one-line views (logs, poll lines, state history, listings)."""

from __future__ import annotations

ONE_LINE_LIMIT = 200


def one_line(text: str, limit: int = ONE_LINE_LIMIT) -> str:
    """``text`` on one line: its first line, then its last non-empty one.

    A failed command's error is ``exit code 2; stderr ends with:`` and the tail of
    its stderr on the lines below; the point is usually the last line (the exception,
    the message), so a view with room for one line keeps both ends. When the result
    is longer than ``limit``, the middle of the first line gives way, never the end.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    head, last = lines[0], lines[-1]
    if len(lines) == 1:
        return head if len(head) <= limit else head[: limit - 1] + "…"
    sep = " " if head.endswith(":") else " … "
    if len(head) + len(sep) + len(last) <= limit:
        return f"{head}{sep}{last}"
    if len(last) > limit // 2:
        last = "…" + last[-(limit // 2 - 1):]
    room = limit - len(sep) - len(last)
    return f"{head[: room - 1]}…{sep}{last}"


def error_location(loc: tuple[int | str, ...], limit: int = 60) -> str:
    """Where a validation error is (pydantic's ``loc``) as one printable line: a key of
    a mapping in the input may hold anything, a line break or a megabyte too, so a key
    that is not printable is quoted and a long one cut."""
    parts = []
    for part in loc:
        text = str(part) if isinstance(part, int) or part.isprintable() else repr(part)
        parts.append(text if len(text) <= limit else text[:limit - 3] + "...")
    return ".".join(parts) or "(root)"
