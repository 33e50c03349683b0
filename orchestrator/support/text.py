"""Text for one-line views (logs, poll lines, state history, listings), and what a
track printed made safe to show (:func:`printable`, :func:`last_lines`)."""

from __future__ import annotations

import re

ONE_LINE_LIMIT = 200
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: a window title
                      r"|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Terminal escape sequences (colours, cursor moves) and control characters but tab and
newline: what a track prints must not move a reader's cursor or retitle a terminal."""


def printable(data: bytes | str) -> str:
    """``data`` as text fit to print or show: invalid UTF-8 replaced, line ends made
    ``\\n``, escape sequences and other control characters removed."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def last_lines(data: bytes | str, lines: int, chars: int) -> str:
    """The last ``lines`` non-empty lines of :func:`printable` ``data``, at most
    ``chars`` characters (the end is kept: that is where a command says how it ended)."""
    kept = [line.rstrip() for line in printable(data).splitlines() if line.strip()]
    return "\n".join(kept[-lines:])[-chars:]


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
